//! RATELIMIT.SLIDE against a real server: the estimate, admission, the exact retry_after_ms,
//! rotation by the clock, the heal, PEEK, PARTIAL, HITALL's SLIDE, every error, MULTI and scripts, OOM.
//!
//! Most rules are checked on a window of 10^12 ms (about 31 years): the current one began at
//! 10^12 (2001) and the next begins at 2·10^12 (2033), so the test knows which window the server
//! is in, and reads `elapsed` from the server's TIME around each call.

use ratelimit_testkit as common;

use std::thread::sleep;
use std::time::Duration;

use common::{error_of, get, limiter, pttl, reserve, run_all, server_ms, settle, slide, snapshot, Server};
use redis::Connection;

const W: i64 = 1_000_000_000_000;
const WINDOW: &str = "1000000000000";
const START: i64 = W;

/// `f`'s result and the server's clock just before and just after it.
fn bracketed<T>(con: &mut Connection, f: impl FnOnce(&mut Connection) -> T) -> (T, i64, i64) {
    let before = server_ms(con);
    let result = f(con);
    (result, before, server_ms(con))
}

fn set(con: &mut Connection, key: &str, value: &str) {
    let _: () = redis::cmd("SET").arg(key).arg(value).query(con).unwrap();
}

/// `prev * (W - elapsed) / W + curr + added`, rounded up, at `now`: the estimate as the docs
/// define it, computed here on its own.
fn estimate_at(prev: i64, curr: i64, added: i64, now: i64) -> i64 {
    let scaled = i128::from(prev) * i128::from(W - (now - START)) + i128::from(curr + added) * i128::from(W);
    ((scaled + i128::from(W) - 1) / i128::from(W)) as i64
}

/// A value in the previous window (it rotates to `prev`) with `count`.
fn previous(count: i64) -> String {
    format!("slide:{W}:0:0:{count}")
}

fn sliding(con: &mut Connection, key: &str, limit: &str, extra: &[&str]) -> Vec<i64> {
    let args: Vec<&str> = [limit, WINDOW, "MS"].iter().chain(extra).copied().collect();
    slide(con, key, &args).unwrap()
}

#[test]
fn first_call_stores_the_window_with_the_expiry_of_the_next() {
    let server = Server::start();
    let mut con = server.connect();
    let (reply, before, after) = bracketed(&mut con, |con| slide(con, "k", &["10", "60"]).unwrap());
    assert_eq!(reply[..4], [1, 1, 9, -1]);
    let value = get(&mut con, "k").unwrap();
    let start: i64 = value.strip_prefix("slide:60000:").and_then(|v| v.strip_suffix(":0:1")).unwrap().parse().unwrap();
    assert_eq!(start % 60_000, 0);
    assert!(before - before % 60_000 <= start && start <= after - after % 60_000, "{value}");
    // reset_ms: until the end of the window after this one.
    let end = start + 120_000;
    assert!(end - after <= reply[4] && reply[4] <= end - before, "{reply:?} {before} {after}");
    let (_, _, expiry) = snapshot(&mut con, "k");
    assert_eq!(expiry, end);
}

#[test]
fn counts_up_to_the_limit_then_denies_without_counting() {
    let server = Server::start();
    let mut con = server.connect();
    let replies: Vec<Vec<i64>> = (0..5).map(|_| sliding(&mut con, "k", "3", &[])).collect();
    let summary: Vec<[i64; 4]> = replies.iter().map(|r| [r[0], r[1], r[2], i64::from(r[3] == -1)]).collect();
    assert_eq!(summary, [[1, 1, 2, 1], [1, 2, 1, 1], [1, 3, 0, 1], [0, 3, 0, 0], [0, 3, 0, 0]]);
    assert_eq!(get(&mut con, "k"), Some(format!("slide:{W}:{START}:0:3")));
    // Its expiry is the end of the next window, whatever the traffic.
    assert_eq!(snapshot(&mut con, "k").2, START + 2 * W);
    // Denied, curr 3 of 3: the call fits once the next window has let a third of it go:
    // 3 * (W - e) <= 2 * W from e = W - floor(2W / 3).
    let (reply, before, after) = bracketed(&mut con, |con| sliding(con, "k", "3", &[]));
    let at = START + W + (W - 2 * W / 3);
    assert!(at - after <= reply[3] && reply[3] <= at - before, "{reply:?}");
}

#[test]
fn the_previous_window_weighs_by_what_is_left_of_it() {
    let server = Server::start();
    let mut con = server.connect();
    // 100 in the previous window, none in this one: about 20.4 of them still count (2026).
    set(&mut con, "k", &previous(100));
    let (reply, before, after) = bracketed(&mut con, |con| sliding(con, "k", "100", &["COST", "5"]));
    assert_eq!(reply[0], 1);
    let expected = [estimate_at(100, 0, 5, before), estimate_at(100, 0, 5, after)];
    assert!(expected.contains(&reply[1]), "{reply:?}, expected one of {expected:?}");
    assert_eq!(reply[2], 100 - reply[1]);
    assert_eq!(get(&mut con, "k"), Some(format!("slide:{W}:{START}:100:5")));
    // One that does not fit: its retry is when 100 * (W - e) / W + 5 + cost <= limit.
    let limit = reply[1] + 2; // room for 2 now, not for 3
    let (reply, before, after) = bracketed(&mut con, |con| sliding(con, "k", &limit.to_string(), &["COST", "3"]));
    assert_eq!(reply[0], 0);
    let budget = i128::from(limit - 3 - 5) * i128::from(W);
    let e = W - (budget / 100) as i64;
    assert!(START + e - after <= reply[3] && reply[3] <= START + e - before, "{reply:?}");
    assert_eq!(get(&mut con, "k"), Some(format!("slide:{W}:{START}:100:5")), "a denied call counts nothing");
}

#[test]
fn rotation_follows_the_clock_not_the_ttl() {
    let server = Server::start();
    let mut con = server.connect();
    // Counts of two windows ago matter no more, TTL or not.
    set(&mut con, "old", "slide:1000:0:7:7");
    assert_eq!(slide(&mut con, "old", &["1", "1"]).unwrap()[..4], [1, 1, 0, -1]);
    // A window of 100 ms, filled: the retry it answers is enough, measured on the server's clock.
    let reply = slide(&mut con, "fast", &["2", "100", "MS", "COST", "2"]).unwrap();
    assert_eq!(reply[0], 1);
    let denied = slide(&mut con, "fast", &["2", "100", "MS"]).unwrap();
    assert_eq!(denied[0], 0);
    let asked = server_ms(&mut con);
    sleep(Duration::from_millis(denied[3] as u64));
    while server_ms(&mut con) < asked + denied[3] {
        sleep(Duration::from_millis(1));
    }
    assert_eq!(slide(&mut con, "fast", &["2", "100", "MS"]).unwrap()[0], 1, "after retry_after_ms it fits");
}

#[test]
fn a_key_without_ttl_gets_it_back_admitted_or_denied_and_keeps_its_counts() {
    let server = Server::start();
    let mut con = server.connect();
    let full = format!("slide:{W}:{START}:0:3");
    for (key, limit, allowed, after) in
        [("denied", "3", 0, full.clone()), ("admitted", "4", 1, format!("slide:{W}:{START}:0:4"))]
    {
        set(&mut con, key, &full);
        assert_eq!(pttl(&mut con, key), -1);
        assert_eq!(sliding(&mut con, key, limit, &[])[0], allowed);
        assert_eq!(get(&mut con, key), Some(after), "{key}");
        assert_eq!(snapshot(&mut con, key).2, START + 2 * W, "{key}: healed to the end of its counts");
    }
}

#[test]
fn peek_writes_nothing_and_answers_what_the_call_would_get() {
    let server = Server::start();
    let mut con = server.connect();
    set(&mut con, "k", &previous(100));
    let before = snapshot(&mut con, "k");
    let peeked = sliding(&mut con, "k", "30", &["PEEK", "COST", "2"]);
    assert_eq!(snapshot(&mut con, "k"), before, "PEEK wrote");
    // Without TTL, PEEK says -1 for reset_ms, as PTTL does; the count is the estimate as it is.
    assert_eq!(peeked[4], -1);
    assert_eq!(peeked[..4], [1, peeked[1], 30 - peeked[1], -1]);
    let called = sliding(&mut con, "k", "30", &["COST", "2"]);
    assert_eq!((called[0], called[1]), (1, peeked[1] + 2));
    // A call that would be denied: the same retry, less the time between the two calls.
    let ((peeked, called), before, after) =
        bracketed(&mut con, |con| (sliding(con, "k", "10", &["PEEK"]), sliding(con, "k", "10", &[])));
    assert_eq!(peeked[0], 0);
    assert_eq!(peeked[..3], called[..3]);
    assert!((0..=after - before).contains(&(peeked[3] - called[3])), "{peeked:?} {called:?}");
    assert_eq!(sliding(&mut con, "missing", "1", &["PEEK"]), [1, 0, 1, -1, 0]);
    let exists: i64 = redis::cmd("EXISTS").arg("missing").query(&mut con).unwrap();
    assert_eq!(exists, 0);
}

#[test]
fn partial_grants_what_the_estimate_has_room_for_at_least_one() {
    const MINUTE: i64 = 1_796_126_400_000; // 2026-12-01 12:00:00 UTC
    let dir = common::TempDir::new();
    let clock = common::TestClock::at(&dir.0, MINUTE + 15_000);
    let server = Server::with(common::Config { clock: Some(&clock), ..common::Config::default() });
    let mut con = server.connect();
    let partial = ["1000", "60", "COST", "700", "PARTIAL"];
    // All of it, then the room left: 300, the count at the limit.
    assert_eq!(slide(&mut con, "k", &partial).unwrap(), [1, 700, 300, -1, 105_000, 700]);
    assert_eq!(slide(&mut con, "k", &partial).unwrap(), [1, 1000, 0, -1, 105_000, 300]);
    // None: denied as a call of one (one fits 60 ms into the next window), nothing counted.
    assert_eq!(slide(&mut con, "k", &partial).unwrap(), [0, 1000, 0, 45_060, 105_000, 0]);
    assert_eq!(get(&mut con, "k"), Some(format!("slide:60000:{MINUTE}:0:1000")));
    // Half-way through the next minute half the previous one's count has slid out: 500 of room,
    // granted and reserved; what is not used goes back.
    clock.move_to(&mut con, MINUTE + 90_000);
    let (reply, reservation) = reserve(&mut con, "RATELIMIT.SLIDE", "k", &partial).unwrap();
    assert_eq!(reply, [1, 1000, 0, -1, 90_000, 500]);
    let reservation = reservation.unwrap();
    assert!(reservation.starts_with(&format!("s:1000:60000:{}:500:", MINUTE + 60_000)), "{reservation}");
    assert_eq!(settle(&mut con, "k", &reservation, 200).unwrap()[1..], [700, 300, -1, 90_000, -300]);
    assert_eq!(get(&mut con, "k"), Some(format!("slide:60000:{}:1000:200", MINUTE + 60_000)));
    // PEEK PARTIAL says what the call would be granted, and writes nothing.
    let before = snapshot(&mut con, "k");
    assert_eq!(
        slide(&mut con, "k", &["1000", "60", "COST", "700", "PARTIAL", "PEEK"]).unwrap(),
        [1, 700, 300, -1, 90_000, 300]
    );
    assert_eq!(snapshot(&mut con, "k"), before);
}

#[test]
fn every_error_leaves_the_keyspace_as_it_was() {
    let server = Server::start();
    let mut con = server.connect();
    run_all(&mut con, &["RPUSH list x", "SET counter 5", "SET bad slide:60000:1:0:1", "SET k slide:60000:0:1:1"]);
    let cases: &[(&str, &[&str], &str)] = &[
        ("k", &["10"], "ERR wrong number of arguments for 'ratelimit.slide' command"),
        ("k", &["0", "60"], "ERR limit must be an integer >= 1"),
        ("k", &["10", "x"], "ERR window must be an integer >= 1"),
        ("k", &["10", "9223372036854775"], "ERR window is too large"),
        ("k", &["10", "60", "COST", "0"], "ERR COST must be a nonzero integer"),
        ("k", &["10", "60", "COST", "-1", "RESERVE"], "ERR RESERVE needs COST >= 1"),
        ("k", &["10", "60", "PEEK", "RESERVE"], "ERR syntax error: PEEK and RESERVE cannot be given together"),
        ("k", &["10", "60", "COST"], "ERR syntax error: COST needs a value"),
        ("k", &["10", "60", "PEEK", "peek"], "ERR syntax error: PEEK given more than once"),
        ("k", &["10", "60", "COST", "-2", "PARTIAL"], "ERR PARTIAL needs COST >= 1"),
        ("k", &["10", "60", "PARTIAL", "partial"], "ERR syntax error: PARTIAL given more than once"),
        ("k", &["10", "60", "SLIDE"], "ERR syntax error: unknown option (expected COST, MS, PARTIAL, PEEK or RESERVE)"),
        ("list", &["10", "60"], "WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("counter", &["10", "60"], "ERR value is not a ratelimit sliding window"),
        ("bad", &["10", "60"], "ERR value is not a ratelimit sliding window"),
        ("bad", &["10", "60", "PEEK"], "ERR value is not a ratelimit sliding window"),
    ];
    for (key, args, expected) in cases {
        let before: Vec<_> = ["k", "list", "counter", "bad"].iter().map(|k| snapshot(&mut con, k)).collect();
        let error = error_of(slide(&mut con, key, args));
        assert!(error.starts_with(expected), "{key} {args:?}: {error}");
        let after: Vec<_> = ["k", "list", "counter", "bad"].iter().map(|k| snapshot(&mut con, k)).collect();
        assert_eq!(before, after, "{key} {args:?} changed the keyspace");
    }
}

#[test]
fn hitall_slide_is_all_or_nothing_with_each_keys_retry() {
    let server = Server::start();
    let mut con = server.connect();
    let hitall = |con: &mut Connection, cost: &str| -> redis::Value {
        limiter("RATELIMIT.HITALL")
            .arg(&["2", "{u}:a", "{u}:b", "10", WINDOW, "3", WINDOW, "MS", "SLIDE", "COST", cost])
            .query(con)
            .unwrap()
    };
    let numbers = |v: &redis::Value| -> (i64, Vec<Vec<i64>>) {
        let redis::Value::Array(items) = v else { panic!("{v:?}") };
        (
            redis::from_redis_value(&items[0]).unwrap(),
            items[1..].iter().map(|i| redis::from_redis_value(i).unwrap()).collect(),
        )
    };
    let (allowed, keys) = numbers(&hitall(&mut con, "2"));
    assert_eq!(allowed, 1);
    assert_eq!(keys, [vec![2, 8, -1, keys[0][3]], vec![2, 1, -1, keys[1][3]]]);
    let before = [snapshot(&mut con, "{u}:a"), snapshot(&mut con, "{u}:b")];
    let ((allowed, keys), t0, t1) = bracketed(&mut con, |con| numbers(&hitall(con, "2")));
    assert_eq!(allowed, 0);
    assert_eq!([snapshot(&mut con, "{u}:a"), snapshot(&mut con, "{u}:b")], before, "a denied call wrote");
    // The first key would admit it (-1); the second when the next window lets 1 of its 2 go.
    assert_eq!(keys[0][..3], [2, 8, -1]);
    let at = START + W + W / 2;
    assert!(at - t1 <= keys[1][2] && keys[1][2] <= at - t0, "{keys:?}");
    assert_eq!(get(&mut con, "{u}:a"), Some(format!("slide:{W}:{START}:0:2")));
}

#[test]
fn in_multi_and_in_scripts_it_is_one_atomic_step() {
    let server = Server::start();
    let mut con = server.connect();
    let (first, second): (Vec<i64>, Vec<i64>) = redis::pipe()
        .atomic()
        .add_command(limiter("RATELIMIT.SLIDE").arg(&["k", "1", WINDOW, "MS"]).clone())
        .add_command(limiter("RATELIMIT.SLIDE").arg(&["k", "1", WINDOW, "MS"]).clone())
        .query(&mut con)
        .unwrap();
    assert_eq!((first[0], second[0]), (1, 0));
    if common::module_only("FCALL cannot be called from a script") {
        return;
    }
    let reply: Vec<i64> = redis::cmd("EVAL")
        .arg("return redis.call('RATELIMIT.SLIDE', KEYS[1], '2', ARGV[1], 'MS')")
        .arg(1)
        .arg("s")
        .arg(WINDOW)
        .query(&mut con)
        .unwrap();
    assert_eq!(reply[..4], [1, 1, 1, -1]);
    assert_eq!(get(&mut con, "s"), Some(format!("slide:{W}:{START}:0:1")));
    assert_eq!(snapshot(&mut con, "s").2, START + 2 * W);
}

#[test]
fn over_maxmemory_only_new_keys_are_refused() {
    if common::module_only("over maxmemory FCALL refuses every write; the module only new keys") {
        return;
    }
    let server = Server::start();
    let mut con = server.connect();
    sliding(&mut con, "existing", "10", &[]);
    run_all(&mut con, &["CONFIG SET maxmemory 1"]);
    let refused = error_of(slide(&mut con, "new", &["10", "60"]));
    let counted = sliding(&mut con, "existing", "10", &[]);
    run_all(&mut con, &["CONFIG SET maxmemory 0"]);
    assert!(refused.starts_with("OOM "), "{refused}");
    assert_eq!(counted[..2], [1, 2]);
    let exists: i64 = redis::cmd("EXISTS").arg("new").query(&mut con).unwrap();
    assert_eq!(exists, 0);
}

#[test]
fn info_counts_calls_admitted_denied_and_heals() {
    if common::module_only("INFO ratelimit is the module's") {
        return;
    }
    let server = Server::start();
    let mut con = server.connect();
    set(&mut con, "leaked", &format!("slide:{W}:{START}:0:1"));
    for _ in 0..3 {
        sliding(&mut con, "leaked", "2", &[]);
    }
    sliding(&mut con, "leaked", "2", &["PEEK"]);
    let field = |con: &mut Connection, name: &str| common::info_field(con, "ratelimit", name).unwrap();
    assert_eq!(field(&mut con, "ratelimit_slide_calls"), "3");
    assert_eq!(field(&mut con, "ratelimit_slide_admitted"), "1");
    assert_eq!(field(&mut con, "ratelimit_slide_denied"), "2");
    assert_eq!(field(&mut con, "ratelimit_healed"), "1");
    assert_eq!(field(&mut con, "ratelimit_peeks"), "1");
}

/// The server's clock of each call and whether it was admitted, for calls sent at `offsets` (ms
/// after the start of an aligned window of `window_ms`); a call's time is TIME in its MULTI.
fn run_arrivals(con: &mut Connection, key: &str, limit: i64, window_ms: i64, offsets: &[i64]) -> Vec<(i64, bool)> {
    let now = server_ms(con);
    let origin = now - now % window_ms + window_ms;
    let started = std::time::Instant::now() - Duration::from_millis((now - origin + window_ms) as u64);
    let (limit, window) = (limit.to_string(), window_ms.to_string());
    let mut seen = Vec::new();
    for &offset in offsets {
        let due = Duration::from_millis((offset + window_ms) as u64);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            sleep(wait);
        }
        let ((s, us), reply): ((i64, i64), Vec<i64>) = redis::pipe()
            .atomic()
            .cmd("TIME")
            .add_command(limiter("RATELIMIT.SLIDE").arg(&[key, &limit, &window, "MS"]).clone())
            .query(con)
            .unwrap();
        seen.push((s * 1_000 + us / 1_000, reply[0] == 1));
    }
    seen
}

/// The most admitted calls in any interval (t - window, t].
fn most_in_a_window(seen: &[(i64, bool)], window_ms: i64) -> usize {
    let admitted: Vec<i64> = seen.iter().filter(|(_, a)| *a).map(|(t, _)| *t).collect();
    (0..admitted.len())
        .map(|i| admitted[..=i].iter().filter(|&&t| t > admitted[i] - window_ms).count())
        .max()
        .unwrap_or(0)
}

#[test]
fn on_real_arrivals_it_stays_within_its_bound() {
    let server = Server::start();
    let mut con = server.connect();
    let (limit, window) = (20, 200);
    // Twice the limit, evenly: what the estimate assumes; and its worst case: the limit in the
    // last ms of a window, then calls all through the next.
    let uniform: Vec<i64> = (0..8 * window).step_by((window / (2 * limit)) as usize).collect();
    let mut adversarial = Vec::new();
    for k in [1, 3] {
        adversarial.extend(std::iter::repeat_n(k * window - 2, limit as usize));
        adversarial.extend((k * window..(k + 1) * window).step_by(2));
    }
    for (name, offsets, key) in [("uniform", &uniform, "u"), ("adversarial", &adversarial, "a")] {
        let seen = run_arrivals(&mut con, key, limit, window, offsets);
        let most = most_in_a_window(&seen, window);
        let admitted = seen.iter().filter(|(_, a)| *a).count();
        eprintln!("{name}: {admitted} of {} admitted, at most {most} in any {window} ms (limit {limit})", seen.len());
        // The bound the docs give: under twice the limit in any window-length interval.
        assert!(most < 2 * limit as usize, "{name}: {most}");
        assert!(admitted >= limit as usize, "{name}: {admitted}");
    }
}
