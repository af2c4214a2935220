//! Counters through RDB snapshots, DEBUG RELOAD, and an AOF written under load by a server that
//! is then killed: values and absolute expiry instants survive, nothing is left without a TTL,
//! nothing exceeds its limit, and loading never needs the module.

use ratelimit_testkit as common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{hit, info_field, value_and_expiry, wait_for, Config, Server, TempDir};
use redis::Connection;

const KEYS: [&str; 4] = ["p:create", "p:counted", "p:healed", "p:cost"];

/// Counters of every kind, plus one on a 300 ms window that will be gone after a restart.
fn counters(con: &mut Connection) -> Vec<(Option<String>, i64)> {
    hit(con, "p:create", &["10", "3600"]).unwrap();
    for _ in 0..4 {
        hit(con, "p:counted", &["10", "3600"]).unwrap();
    }
    let _: () = redis::cmd("SET").arg(&["p:healed", "42"]).query(con).unwrap();
    hit(con, "p:healed", &["10", "3600"]).unwrap();
    hit(con, "p:cost", &["100", "3600000", "MS", "COST", "7"]).unwrap();
    hit(con, "p:short", &["10", "300", "MS"]).unwrap();
    KEYS.iter().map(|k| value_and_expiry(con, k)).collect()
}

fn same_counters(con: &mut Connection, expected: &[(Option<String>, i64)]) {
    for (key, want) in KEYS.iter().zip(expected) {
        assert_eq!(&value_and_expiry(con, key), want, "{key}");
    }
}

#[test]
fn rdb_snapshots_keep_values_and_expiry_instants() {
    let dir = TempDir::new();
    let expected = {
        let mut server = Server::with(Config { dir: Some(&dir.0), ..Config::default() });
        let mut con = server.connect();
        let expected = counters(&mut con);
        let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
        server.kill();
        expected
    };
    thread::sleep(Duration::from_millis(400)); // p:short's window ends while the server is down
    let restarted = Server::with(Config { module: false, dir: Some(&dir.0), ..Config::default() });
    let mut con = restarted.connect();
    same_counters(&mut con, &expected);
    let exists: i64 = redis::cmd("EXISTS").arg("p:short").query(&mut con).unwrap();
    assert_eq!(exists, 0, "an expired counter is gone after the restart");
}

#[test]
fn debug_reload_keeps_values_and_expiry_instants() {
    let server = Server::start();
    let mut con = server.connect();
    let expected = counters(&mut con);
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut con).unwrap();
    same_counters(&mut con, &expected);
    assert_eq!(hit(&mut con, "p:counted", &["10", "3600"]).unwrap()[..2], [1, 5], "and HIT goes on counting");
}

const LIMIT: i64 = 20;

/// Every counter under `crash:` has a TTL and is within its limit.
fn all_counters_sound(con: &mut Connection) -> usize {
    let keys: Vec<String> = redis::cmd("KEYS").arg("crash:*").query(con).unwrap();
    for key in &keys {
        let (value, expiry) = value_and_expiry(con, key);
        assert!(expiry > 0, "{key} has no TTL");
        let value: i64 = value.unwrap().parse().unwrap();
        assert!((1..=LIMIT).contains(&value), "{key} = {value}");
    }
    keys.len()
}

#[test]
fn a_crash_under_load_leaves_a_sound_aof() {
    let dir = TempDir::new();
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    let mut server = Server::with(Config { dir: Some(&dir.0), args: &aof, ..Config::default() });
    let (stop, hits) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let workers: Vec<_> = (0..6)
        .map(|w| {
            let mut con = server.connect();
            let (stop, hits) = (Arc::clone(&stop), Arc::clone(&hits));
            thread::spawn(move || {
                let mut i = w;
                // Until the server dies under us: errors are the end of the load, not a failure.
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("crash:{}", i % 40);
                    let window = ["600", "1200", "900"][i % 3];
                    if hit(&mut con, &key, &[&LIMIT.to_string(), window]).is_err() {
                        break;
                    }
                    hits.fetch_add(1, Ordering::Relaxed);
                    i += 7;
                }
            })
        })
        .collect();
    // Load for a while (longer under `make soak`), and until every counter has had hits.
    let load = Duration::from_millis(if common::soak() { 10_000 } else { 700 });
    let started = Instant::now();
    wait_for("the load's first hits", Duration::from_secs(120), || {
        started.elapsed() >= load && hits.load(Ordering::Relaxed) >= 400
    });
    server.kill(); // kill -9 in the middle of the load
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().unwrap();
    }

    // Loading needs no module.
    let mut restarted = Server::with(Config { module: false, dir: Some(&dir.0), args: &aof, ..Config::default() });
    let mut con = restarted.connect();
    // 400 acknowledged hits (appendfsync always) cycle through all 40 counters.
    let counters = all_counters_sound(&mut con);
    assert_eq!(counters, 40, "every counter hit before the crash survives it");

    let _: String = redis::cmd("BGREWRITEAOF").query(&mut con).unwrap();
    wait_for("AOF rewrite", Duration::from_secs(60), || {
        info_field(&mut con, "persistence", "aof_rewrite_in_progress").as_deref() == Some("0")
            && info_field(&mut con, "persistence", "aof_rewrite_scheduled").as_deref() == Some("0")
    });
    restarted.kill();
    let again = Server::with(Config { dir: Some(&dir.0), args: &aof, ..Config::default() });
    let mut con = again.connect();
    assert_eq!(all_counters_sound(&mut con), counters, "the rewritten AOF holds the same counters");
    let reply = hit(&mut con, "crash:0", &[&LIMIT.to_string(), "60"]).unwrap();
    assert!(reply[1] <= LIMIT, "HIT goes on from the reloaded counter: {reply:?}");
}
