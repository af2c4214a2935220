//! Long runs: many clients on a few hot keys with 50-200 ms windows, and a soak of many hits over
//! many keys left to expire. Short forms run in `make test`; `make soak` sets RATELIMIT_SOAK=1
//! for the long forms (same scenarios, longer and bigger).

use ratelimit_testkit as common;

use std::collections::HashMap;
use std::thread;
use std::time::{Duration, Instant};

use common::{info_field, pttl, soak, Server};
use redis::Connection;

/// Hot key `i`: its window (50-200 ms) and limit.
fn hot_key(i: usize) -> (String, u64, i64) {
    (format!("hot:{i}"), 50 + 50 * i as u64, 5 + i as i64)
}

/// A hit: whether it was admitted and its count, the absolute end of the window it counted in
/// (the key's PEXPIRETIME, read in the same transaction), and when the client sent and got it.
struct Hit {
    admitted: bool,
    count: i64,
    window_end: i64,
    sent: Instant,
    received: Instant,
}

fn hammer(active_expire: bool) {
    const CLIENTS: usize = 12;
    const KEYS: usize = 4;
    let duration = Duration::from_secs(if soak() { 20 } else { 2 });
    let server = Server::start();
    let mut con = server.connect();
    let flag = i32::from(active_expire);
    let _: () = redis::cmd("DEBUG").arg("SET-ACTIVE-EXPIRE").arg(flag).query(&mut con).unwrap();

    let deadline = Instant::now() + duration;
    let workers: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let mut con = server.connect();
            thread::spawn(move || {
                let mut seen: Vec<Vec<Hit>> = (0..KEYS).map(|_| Vec::new()).collect();
                let mut i = c;
                while Instant::now() < deadline {
                    let (key, window_ms, limit) = hot_key(i % KEYS);
                    let sent = Instant::now();
                    let (reply, window_end): (Vec<i64>, i64) = redis::pipe()
                        .atomic()
                        .cmd("RATELIMIT.HIT")
                        .arg(&[&key, &limit.to_string(), &window_ms.to_string(), "MS"])
                        .cmd("PEXPIRETIME")
                        .arg(&key)
                        .query(&mut con)
                        .unwrap();
                    assert!(reply[1] <= limit && reply[2] == limit - reply[1], "{key}: {reply:?}");
                    assert!((0..=window_ms as i64).contains(&reply[3]), "{key}: {reply:?}");
                    let received = Instant::now();
                    seen[i % KEYS].push(Hit { admitted: reply[0] == 1, count: reply[1], window_end, sent, received });
                    i += 1;
                }
                seen
            })
        })
        .collect();
    let mut per_key: HashMap<usize, Vec<Hit>> = HashMap::new();
    for worker in workers {
        for (k, seen) in worker.join().unwrap().into_iter().enumerate() {
            per_key.entry(k).or_default().extend(seen);
        }
    }
    for (k, hits) in per_key {
        let (key, window_ms, limit) = hot_key(k);
        let mut windows: HashMap<i64, Vec<&Hit>> = HashMap::new();
        for hit in &hits {
            windows.entry(hit.window_end).or_default().push(hit);
        }
        for (end, hits) in &windows {
            // A window's hits, admitted or denied, fall within window_ms of server time (the key
            // lives through its last millisecond, and server time counts whole milliseconds: 2 ms
            // of slack). Each hit reached the server between its send and its reply, so the latest
            // send comes at most that long after the earliest reply. A counter that never expired
            // would gather every hit of the run into one window.
            let first_received = hits.iter().map(|h| h.received).min().unwrap();
            let last_sent = hits.iter().map(|h| h.sent).max().unwrap();
            let span = last_sent.saturating_duration_since(first_received);
            assert!(
                span <= Duration::from_millis(window_ms + 2),
                "{key}: the window ending at {end} took hits {} ms apart",
                span.as_millis()
            );
            let mut counts: Vec<i64> = hits.iter().filter(|h| h.admitted).map(|h| h.count).collect();
            counts.sort_unstable();
            let expected: Vec<i64> = (1..=counts.len() as i64).collect();
            assert!(counts.len() as i64 <= limit, "{key}: one window admitted {counts:?}");
            assert_eq!(counts, expected, "{key}: a window's admitted counts must be 1..=n once each");
        }
        let admitted = hits.iter().filter(|h| h.admitted).count();
        eprintln!("{key}: {} hits, {admitted} admitted, in {} windows", hits.len(), windows.len());
    }
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    for key in keys {
        assert_ne!(pttl(&mut con, &key), -1, "{key} has no TTL");
    }
}

#[test]
fn hot_keys_with_lazy_expiry_only() {
    hammer(false);
}

#[test]
fn hot_keys_with_active_expiry() {
    hammer(true);
}

fn used_memory(con: &mut Connection) -> i64 {
    info_field(con, "memory", "used_memory").unwrap().parse().unwrap()
}

fn rss(con: &mut Connection) -> i64 {
    info_field(con, "memory", "used_memory_rss").unwrap().parse().unwrap()
}

/// Pipelined HITs over `keys` keys with a 1 s window, `hits` in all.
fn load(con: &mut Connection, hits: u64, keys: u64) {
    for start in (0..hits).step_by(10_000) {
        let mut pipe = redis::pipe();
        for i in start..(start + 10_000).min(hits) {
            pipe.cmd("RATELIMIT.HIT").arg(format!("soak:{}", i % keys)).arg(1_000_000).arg(1).ignore();
        }
        pipe.query::<()>(con).unwrap();
    }
}

#[test]
fn memory_returns_to_baseline_when_counters_expire() {
    let (hits, keys, rounds) = if soak() { (1_000_000, 10_000, 3) } else { (100_000, 10_000, 2) };
    let server = Server::start();
    let mut con = server.connect();
    let baseline = used_memory(&mut con);
    let mut rss_after_round = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        load(&mut con, hits, keys);
        let dbsize: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
        // Within the 1 s window of the first hit, no key can have expired yet: every key is
        // there. A machine slow enough to take longer may have seen some windows end.
        if started.elapsed() < Duration::from_millis(1_000) {
            assert_eq!(dbsize, keys as i64);
        } else {
            assert!(0 < dbsize && dbsize <= keys as i64, "{dbsize} keys after the load");
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let dbsize: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
            if dbsize == 0 {
                break;
            }
            assert!(Instant::now() < deadline, "{dbsize} counters never expired");
            thread::sleep(Duration::from_millis(100));
        }
        rss_after_round.push(rss(&mut con));
    }
    let grown = used_memory(&mut con) - baseline;
    assert!(grown < 256 * 1024, "used_memory stayed {grown} bytes above its baseline");
    let rss_growth = rss_after_round.last().unwrap() - rss_after_round[0];
    assert!(rss_growth < 16 << 20, "RSS kept growing: {rss_after_round:?}");
    eprintln!("{rounds} rounds of {hits} hits over {keys} keys: used_memory {grown:+} bytes, RSS after each round {rss_after_round:?}");
}
