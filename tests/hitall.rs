//! RATELIMIT.HITALL: one hit against several limits, all or nothing.

mod common;

use std::time::Duration;

use common::{error_of, info_field, pttl, run_all, snapshot, value_and_expiry, Server};
use redis::{Connection, RedisResult, Value};

/// `[allowed, [[count, remaining, reset_ms] per key]]`.
fn hitall(con: &mut Connection, args: &[&str]) -> RedisResult<(i64, Vec<Vec<i64>>)> {
    let reply: Vec<Value> = common::limiter("RATELIMIT.HITALL").arg(args).query(con)?;
    let allowed: i64 = redis::from_redis_value(&reply[0]).unwrap();
    let per_key = reply[1..].iter().map(|v| redis::from_redis_value(v).unwrap()).collect();
    Ok((allowed, per_key))
}

/// 2 per second and 5 per hour for one user.
const SECOND_AND_HOUR: [&str; 7] = ["2", "u:s", "u:h", "2", "1", "5", "3600"];

#[test]
fn every_limit_must_admit_and_then_every_counter_counts() {
    let server = Server::start();
    let mut con = server.connect();
    let (allowed, keys) = hitall(&mut con, &SECOND_AND_HOUR).unwrap();
    assert_eq!(allowed, 1);
    assert_eq!((keys[0][..2].to_vec(), keys[1][..2].to_vec()), (vec![1, 1], vec![1, 4]));
    assert!((1..=1_000).contains(&keys[0][2]) && (3_599_000..=3_600_000).contains(&keys[1][2]));
    assert!(pttl(&mut con, "u:s") > 0 && pttl(&mut con, "u:h") > 3_500_000);

    hitall(&mut con, &SECOND_AND_HOUR).unwrap();
    // The per-second budget is spent: the hourly one must not be burnt by the denied call.
    let (allowed, keys) = hitall(&mut con, &SECOND_AND_HOUR).unwrap();
    assert_eq!(allowed, 0);
    assert_eq!((keys[0][..2].to_vec(), keys[1][..2].to_vec()), (vec![2, 0], vec![2, 3]));
    assert_eq!(redis::cmd("GET").arg("u:h").query::<String>(&mut con).unwrap(), "2");

    std::thread::sleep(Duration::from_millis(1_100));
    assert_eq!(hitall(&mut con, &SECOND_AND_HOUR).unwrap().0, 1, "a new second");
    assert_eq!(redis::cmd("GET").arg("u:h").query::<String>(&mut con).unwrap(), "3");
}

#[test]
fn cost_and_ms_apply_to_every_limit_and_leaked_counters_heal() {
    let server = Server::start();
    let mut con = server.connect();
    run_all(&mut con, &["SET b 9"]);
    let (allowed, keys) = hitall(&mut con, &["2", "a", "b", "10", "500", "10", "700", "COST", "2", "MS"]).unwrap();
    assert_eq!(allowed, 0, "b would reach 11");
    assert_eq!((keys[0][..2].to_vec(), keys[1][..2].to_vec()), (vec![0, 10], vec![9, 1]));
    let exists: i64 = redis::cmd("EXISTS").arg("a").query(&mut con).unwrap();
    assert_eq!(exists, 0, "nothing created by a denied call");
    assert!((1..=700).contains(&pttl(&mut con, "b")), "the leaked counter healed although denied");

    let (allowed, keys) = hitall(&mut con, &["2", "a", "c", "10", "500", "10", "700", "COST", "2", "MS"]).unwrap();
    assert_eq!(allowed, 1);
    assert_eq!((keys[0][1], keys[1][1]), (8, 8));
    assert!((1..=500).contains(&pttl(&mut con, "a")) && (1..=700).contains(&pttl(&mut con, "c")));
}

#[test]
fn errors_change_nothing_on_any_key() {
    let server = Server::start();
    let mut con = server.connect();
    run_all(&mut con, &["SET ok 1 EX 100", "RPUSH list x", "SET text abc"]);
    let cases: &[(&[&str], &str)] = &[
        (&["2", "ok", "list", "5", "60", "5", "60"], "WRONGTYPE"),
        (&["2", "ok", "text", "5", "60", "5", "60"], "ERR value is not an integer or out of range"),
        (&["0", "ok", "5", "60"], "ERR numkeys must be an integer >= 1"),
        (&["2", "ok", "ok", "5", "60", "5", "60"], "ERR each key may be given only once"),
        (&["2", "ok", "new", "5", "60"], "ERR wrong number of arguments for 'ratelimit.hitall'"),
        (&["1", "ok", "5", "60", "COST"], "ERR syntax error: COST needs a value"),
        (&["1", "ok", "5", "0"], "ERR window must be an integer >= 1"),
        (&["1", "ok", "5", "60", "LIMIT", "1"], "ERR syntax error: unknown option (expected COST or MS)"),
    ];
    for (args, expected) in cases {
        let before = snapshot(&mut con, "ok");
        let error = error_of(hitall(&mut con, args));
        assert!(error.starts_with(expected), "{args:?}: {error}");
        assert_eq!(snapshot(&mut con, "ok"), before, "{args:?} changed ok");
    }
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(dbsize, 3);
}

#[test]
fn keys_are_declared_for_getkeys_and_acls() {
    if common::module_only("COMMAND GETKEYS and ACL rules name the module's command") {
        return;
    }
    let server = Server::start();
    let mut con = server.connect();
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg(&["GETKEYS", "RATELIMIT.HITALL", "2", "a:1", "b:1", "5", "60", "5", "60", "MS"])
        .query(&mut con)
        .unwrap();
    assert_eq!(keys, ["a:1", "b:1"]);
    run_all(&mut con, &["ACL SETUSER tenant on >pw ~a:* +ratelimit.hitall"]);
    let mut tenant = server.connect();
    run_all(&mut tenant, &["AUTH tenant pw"]);
    assert!(error_of(hitall(&mut tenant, &["2", "a:1", "b:1", "5", "60", "5", "60"])).starts_with("NOPERM"));
    assert_eq!(hitall(&mut tenant, &["2", "a:1", "a:2", "5", "60", "5", "60"]).unwrap().0, 1);
    let exists: i64 = redis::cmd("EXISTS").arg("b:1").query(&mut con).unwrap();
    assert_eq!(exists, 0);
}

#[test]
fn a_replica_without_the_module_gets_every_counter() {
    let (primary, replica) = common::primary_and_replica(false);
    let mut p = primary.connect();
    let mut r = replica.connect();
    run_all(&mut p, &["SET leaked 1"]);
    for _ in 0..3 {
        hitall(&mut p, &["3", "x", "y", "leaked", "10", "60", "20", "3600", "30", "86400"]).unwrap();
    }
    let _: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut p).unwrap();
    for key in ["x", "y", "leaked"] {
        let on_primary = value_and_expiry(&mut p, key);
        assert!(on_primary.1 > 0, "{key}");
        assert_eq!(value_and_expiry(&mut r, key), on_primary, "{key}");
    }
    assert_eq!(info_field(&mut r, "stats", "unexpected_error_replies").as_deref(), Some("0"));
}

#[test]
fn over_maxmemory_a_call_that_would_create_a_counter_is_refused() {
    if common::module_only("over maxmemory FCALL refuses every write; the module only new counters") {
        return;
    }
    let server = Server::start();
    let mut con = server.connect();
    hitall(&mut con, &["1", "old", "5", "60"]).unwrap();
    run_all(&mut con, &["CONFIG SET maxmemory 1"]);
    assert!(error_of(hitall(&mut con, &["2", "old", "new", "5", "60", "5", "60"])).starts_with("OOM"));
    assert_eq!(redis::cmd("GET").arg("old").query::<String>(&mut con).unwrap(), "1", "nothing counted");
    assert_eq!(hitall(&mut con, &["1", "old", "5", "60"]).unwrap().0, 1, "existing counters go on");
    run_all(&mut con, &["CONFIG SET maxmemory 0"]);
}
