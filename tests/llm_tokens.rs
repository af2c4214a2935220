//! The LLM simulation: 20 clients, each call reserving 4,000 tokens and using a random 100 to
//! 4,000, against 50,000 tokens a window (a minute, scaled down to 1 s; each call's work 10 to
//! 40 ms, 0.6 to 2.4 s of a minute), for three windows, with HIT and with SLIDE, reserve then settle; and the same calls
//! with "check, then add afterwards" (PEEK, then the cost used added). What holds exactly: the
//! tokens used by the calls admitted in a window never pass the limit when they reserve and
//! settle. What it measures (printed, and in docs/performance.md): the share of the limit those
//! calls used while demand exceeded it, and how far "check, then add" overshoots.

use ratelimit_testkit as common;

use std::collections::BTreeMap;
use std::thread;
use std::time::{Duration, Instant};

use common::{limiter, reserve, settle, Rng, Server};
use redis::Connection;

const CLIENTS: usize = 20;
const LIMIT: i64 = 50_000;
const RESERVED: i64 = 4_000;
const WINDOW_MS: i64 = 1_000;
const WINDOWS: i64 = 3;

/// One admitted call: the window it counted in (its reservation's, or for "check, then add" the
/// window its cost was added to), and the tokens it used.
struct Call {
    window: i64,
    used: i64,
}

/// How the clients pay for their calls.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pattern {
    ReserveThenSettle(&'static str),
    CheckThenAdd,
}

/// One client's calls until `deadline`: each asks, works 10 to 40 ms when admitted, pays; a denied
/// one asks again 1 ms later. Returns the admitted calls.
fn client(con: &mut Connection, pattern: Pattern, seed: u64, deadline: Instant) -> Vec<Call> {
    let mut rng = Rng::new(seed);
    let mut calls = Vec::new();
    let (window, limit, reserved) = (WINDOW_MS.to_string(), LIMIT.to_string(), RESERVED.to_string());
    while Instant::now() < deadline {
        let used = 100 + (rng.next_u64() % 3_901) as i64;
        let work = Duration::from_millis(10 + rng.next_u64() % 31);
        match pattern {
            Pattern::ReserveThenSettle(command) => {
                let args = [limit.as_str(), window.as_str(), "MS", "COST", reserved.as_str()];
                let (_, reservation) = reserve(con, command, "tpm", &args).unwrap();
                let Some(reservation) = reservation else {
                    thread::sleep(Duration::from_millis(1));
                    continue;
                };
                thread::sleep(work);
                settle(con, "tpm", &reservation, used).unwrap();
                // The window it was counted in: the reservation's fourth field (an end or a start).
                let window = reservation.split(':').nth(3).unwrap().parse().unwrap();
                calls.push(Call { window, used });
            }
            Pattern::CheckThenAdd => {
                let peek: Vec<i64> =
                    limiter("RATELIMIT.PEEK").arg("tpm").arg(&limit).arg("COST").arg(&reserved).query(con).unwrap();
                if peek[0] == 0 {
                    thread::sleep(Duration::from_millis(1));
                    continue;
                }
                thread::sleep(work);
                // Added whatever the count, as INCRBY would: a limit nothing reaches.
                let (_, window): (Vec<i64>, i64) = redis::pipe()
                    .atomic()
                    .add_command(
                        limiter("RATELIMIT.HIT")
                            .arg("tpm")
                            .arg(i64::MAX)
                            .arg(&window)
                            .arg("MS")
                            .arg("COST")
                            .arg(used)
                            .clone(),
                    )
                    .cmd("PEXPIRETIME")
                    .arg("tpm")
                    .query(con)
                    .unwrap();
                calls.push(Call { window, used });
            }
        }
    }
    calls
}

/// A whole window: the share of the limit its admitted calls used, and how many they were.
#[derive(Debug)]
struct Window {
    share: f64,
    calls: usize,
}

/// The tokens used per window by the calls admitted in it, for the windows that ended before the
/// clients stopped (demand exceeded the limit throughout them).
fn run(pattern: Pattern) -> Vec<Window> {
    let server = Server::start();
    let started = Instant::now();
    let deadline = started + Duration::from_millis((WINDOWS as u64 + 1) * WINDOW_MS as u64 + 100);
    let workers: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let mut con = server.connect();
            thread::spawn(move || client(&mut con, pattern, 1 + i as u64, deadline))
        })
        .collect();
    let mut per_window: BTreeMap<i64, (i64, usize)> = BTreeMap::new();
    for worker in workers {
        for call in worker.join().unwrap() {
            let w = per_window.entry(call.window).or_default();
            *w = (w.0 + call.used, w.1 + 1);
        }
    }
    let mut con = server.connect();
    let now = common::server_ms(&mut con);
    // A window is identified by its end (HIT, and "check, then add") or its start (SLIDE).
    let end_of = |w: i64| if pattern == Pattern::ReserveThenSettle("RATELIMIT.SLIDE") { w + WINDOW_MS } else { w };
    // Whole windows the clients asked throughout: not the first (the clients were starting), not
    // one still running when they stopped.
    let stopped_at = now - (Instant::now() - deadline).as_millis() as i64;
    let whole: Vec<Window> = per_window
        .iter()
        .skip(1)
        .filter(|(w, _)| end_of(**w) <= stopped_at)
        .map(|(_, &(used, calls))| Window { share: used as f64 / LIMIT as f64, calls })
        .collect();
    eprintln!(
        "{pattern:?}: the whole windows' use of the limit: {whole:.3?} (all windows, tokens and calls: {per_window:?})"
    );
    whole
}

#[test]
fn reserving_then_settling_never_passes_the_limit_and_uses_most_of_it() {
    if common::module_only("the LLM simulation runs on the module") {
        return;
    }
    for command in ["RATELIMIT.HIT", "RATELIMIT.SLIDE"] {
        let windows = run(Pattern::ReserveThenSettle(command));
        assert!(!windows.is_empty(), "{command}: no whole window measured");
        // Exact: no call uses more than it reserved, and what a window counts stays within the limit.
        assert!(windows.iter().all(|w| w.share <= 1.0), "{command}: {windows:?}");
        // Refunds make room: charged their reservations, no window would admit more than 12 calls.
        // (Only a machine stalled through every window, so that no call settled in one, would not.)
        let most = windows.iter().map(|w| w.calls).max().unwrap_or(0);
        assert!(most as i64 > LIMIT / RESERVED, "{command}: at most {most} calls in a window: {windows:?}");
    }
    let windows = run(Pattern::CheckThenAdd);
    assert!(!windows.is_empty(), "check, then add: no whole window measured");
}
