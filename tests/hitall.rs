//! RATELIMIT.HITALL: one hit against several limits, all or nothing.

use ratelimit_testkit as common;

use std::time::Duration;

use common::{assert_within, error_of, info_field, pttl, run_all, snapshot, timed, value_and_expiry, Server};
use redis::{Connection, RedisResult, Value};

/// `[allowed, [[count, remaining, reset_ms] per key]]`.
fn hitall(con: &mut Connection, args: &[&str]) -> RedisResult<(i64, Vec<Vec<i64>>)> {
    let reply: Vec<Value> = common::limiter("RATELIMIT.HITALL").arg(args).query(con)?;
    let allowed: i64 = redis::from_redis_value(&reply[0]).unwrap();
    let per_key = reply[1..].iter().map(|v| redis::from_redis_value(v).unwrap()).collect();
    Ok((allowed, per_key))
}

#[test]
fn every_limit_must_admit_and_then_every_counter_counts() {
    let server = Server::start();
    let mut con = server.connect();
    // 2 per second and 5 per hour for one user. The second's window must outlast the first three
    // calls: a run held up longer proves nothing, and goes again on fresh keys.
    for attempt in 1.. {
        let (second, hour) = (format!("{attempt}:u:s"), format!("{attempt}:u:h"));
        let args = ["2", &second, &hour, "2", "1", "5", "3600"];
        let ((first, denied, ttls), ms) = timed(|| {
            let first = hitall(&mut con, &args).unwrap();
            hitall(&mut con, &args).unwrap();
            let denied = hitall(&mut con, &args).unwrap();
            (first, denied, (pttl(&mut con, &second), pttl(&mut con, &hour)))
        });
        if ms >= 1_000 {
            assert!(attempt < 10, "three calls never ran within a second");
            continue;
        }
        assert_eq!(first, (1, vec![vec![1, 1, 1_000], vec![1, 4, 3_600_000]]), "new windows, each exactly its length");
        assert_within(ttls.0, 1_000 - ms, 1_000, "the second's PTTL");
        assert_within(ttls.1, 3_600_000 - ms, 3_600_000, "the hour's PTTL");
        // The per-second budget is spent: the hourly one must not be burnt by the denied call.
        let (allowed, keys) = denied;
        assert_eq!(allowed, 0);
        assert_eq!((keys[0][..2].to_vec(), keys[1][..2].to_vec()), (vec![2, 0], vec![2, 3]));
        assert_eq!(redis::cmd("GET").arg(&hour).query::<String>(&mut con).unwrap(), "2");

        // Past the second's reset, a new second.
        std::thread::sleep(Duration::from_millis(keys[0][2] as u64 + 1));
        assert_eq!(hitall(&mut con, &args).unwrap().0, 1, "a new second");
        assert_eq!(redis::cmd("GET").arg(&hour).query::<String>(&mut con).unwrap(), "3");
        return;
    }
}

#[test]
fn cost_and_ms_apply_to_every_limit_and_leaked_counters_heal() {
    let server = Server::start();
    let mut con = server.connect();
    run_all(&mut con, &["SET b 9"]);
    let args = ["2", "a", "b", "10", "50000", "10", "70000", "COST", "2", "MS"];
    let (((allowed, keys), ttl), ms) = timed(|| (hitall(&mut con, &args).unwrap(), pttl(&mut con, "b")));
    assert_eq!(allowed, 0, "b would reach 11");
    assert_eq!(keys, [vec![0, 10, 0], vec![9, 1, 70_000]], "the leaked counter healed although denied");
    let exists: i64 = redis::cmd("EXISTS").arg("a").query(&mut con).unwrap();
    assert_eq!(exists, 0, "nothing created by a denied call");
    assert_within(ttl, 70_000 - ms, 70_000, "b's PTTL, in ms");

    let args = ["2", "a", "c", "10", "50000", "10", "70000", "COST", "2", "MS"];
    let (((allowed, keys), ttls), ms) =
        timed(|| (hitall(&mut con, &args).unwrap(), (pttl(&mut con, "a"), pttl(&mut con, "c"))));
    assert_eq!(allowed, 1);
    assert_eq!(keys, [vec![2, 8, 50_000], vec![2, 8, 70_000]]);
    assert_within(ttls.0, 50_000 - ms, 50_000, "a's PTTL");
    assert_within(ttls.1, 70_000 - ms, 70_000, "c's PTTL");
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
        (
            &["1", "ok", "5", "60", "LIMIT", "1"],
            "ERR syntax error: unknown option (expected COST, MS, SLIDE, ALIGN, TZ, TOKENS or RESERVE)",
        ),
        (&["1", "ok", "5", "60", "TOKENS", "0", "1"], "ERR TOKENS must be an integer >= 1"),
        (&["1", "ok", "5", "60", "TOKENS", "5"], "ERR syntax error: TOKENS needs a value"),
        (&["1", "ok", "5", "60", "TOKENS", "5", "2"], "ERR TOKENS' key count must be between 1 and numkeys"),
        (&["1", "ok", "5", "60", "TOKENS", "5", "0"], "ERR TOKENS' key count must be between 1 and numkeys"),
        (&["1", "ok", "5", "60", "TOKENS", "5", "x"], "ERR TOKENS' key count must be between 1 and numkeys"),
        (&["1", "ok", "5", "60", "RESERVE"], "ERR RESERVE needs TOKENS >= 1"),
        (
            &["1", "ok", "5", "60", "TOKENS", "5", "1", "TOKENS", "5", "1"],
            "ERR syntax error: TOKENS given more than once",
        ),
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

/// HITALL with RESERVE: its numbers, and the reservation the reply ends with (None when denied).
fn reserving(con: &mut Connection, args: &[&str]) -> (i64, Vec<Vec<i64>>, Option<String>) {
    let mut reply: Vec<Value> = common::limiter("RATELIMIT.HITALL").arg(args).arg("RESERVE").query(con).unwrap();
    let reservation = redis::from_redis_value(&reply.pop().unwrap()).unwrap();
    let allowed: i64 = redis::from_redis_value(&reply[0]).unwrap();
    (allowed, reply[1..].iter().map(|v| redis::from_redis_value(v).unwrap()).collect(), reservation)
}

#[test]
fn requests_and_tokens_are_decided_together_and_settled_in_one_call() {
    let server = Server::start();
    let mut con = server.connect();
    // 2 requests a minute, 10,000 tokens a minute, 20,000 a day: each call counts 1 request and
    // its estimate of 4,000 tokens, on every limit or none.
    let call = ["3", "{u}:rpm", "{u}:tpm", "{u}:tpd", "2", "60", "10000", "60", "20000", "day", "TOKENS", "4000", "2"];
    let (allowed, counts, first) = reserving(&mut con, &call);
    assert_eq!(allowed, 1);
    assert_eq!(counts.iter().map(|c| c[0]).collect::<Vec<_>>(), [1, 4000, 4000]);
    let first = first.unwrap();
    let entries: Vec<&str> = first.split(',').collect();
    assert_eq!(entries.len(), 2, "{first}");
    assert!(entries[0].starts_with("h:10000:60000:") && entries[1].starts_with("c:20000:0:"), "{first}");
    let (_, counts, _) = reserving(&mut con, &call);
    assert_eq!(counts.iter().map(|c| c[0]).collect::<Vec<_>>(), [2, 8000, 8000]);
    // The request limit refuses the third: nothing counted anywhere, no reservation.
    let (allowed, counts, none) = reserving(&mut con, &call);
    assert_eq!((allowed, none), (0, None));
    assert_eq!(counts.iter().map(|c| c[0]).collect::<Vec<_>>(), [2, 8000, 8000]);
    // The first call used 1,000 tokens: 3,000 back to each token limit, in one call.
    let settled = common::settle_all(&mut con, &["{u}:tpm", "{u}:tpd"], &first, 1000).unwrap();
    assert_eq!(
        settled.iter().map(|s| (s[0], s[1], s[2], s[4])).collect::<Vec<_>>(),
        [(1, 5000, 5000, -3000), (1, 5000, 15000, -3000)]
    );
    let counters: Vec<i64> = redis::cmd("MGET").arg(&["{u}:rpm", "{u}:tpm", "{u}:tpd"]).query(&mut con).unwrap();
    assert_eq!(counters, [2, 5000, 5000]);
    // A token limit refuses an estimate it cannot hold, whatever the request limits say.
    let big = ["2", "{v}:rpm", "{v}:tpm", "100", "60", "10000", "60", "TOKENS", "10001", "1"];
    assert_eq!(reserving(&mut con, &big).0, 0);
    let exists: i64 = redis::cmd("EXISTS").arg(&["{v}:rpm", "{v}:tpm"]).query(&mut con).unwrap();
    assert_eq!(exists, 0);
    // Sliding windows too; without RESERVE the tokens are simply counted.
    let (allowed, counts, r) =
        reserving(&mut con, &["2", "{s}:r", "{s}:t", "10", "60", "100", "60", "SLIDE", "TOKENS", "30", "1"]);
    assert_eq!((allowed, counts[0][0], counts[1][0]), (1, 1, 30));
    let r = r.unwrap();
    assert!(r.starts_with("s:100:60000:") && !r.contains(','), "{r}");
    assert_eq!(common::settle(&mut con, "{s}:t", &r, 10).unwrap()[5], -20);
    let (allowed, counts) =
        hitall(&mut con, &["2", "{w}:r", "{w}:t", "10", "60", "100", "60", "TOKENS", "30", "1"]).unwrap();
    assert_eq!((allowed, counts[0][0], counts[1][0]), (1, 1, 30));
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
    common::wait_for_replica(&mut p);
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
