//! What reaches replicas and the AOF: effects with absolute expiry times, which a server
//! without the module reproduces exactly.

use ratelimit_testkit as common;

use common::{gcra, hit, info_field, limiter, reserve, settle, slide, value_and_expiry, Config, Server, TempDir};
use redis::Connection;

/// Hits that exercise every write path: create, increment, heal when admitted, heal when
/// denied, denied without a write, COST, MS; GCRA's create, store, heal when denied; the sliding
/// window's create, count, rotate, heal when admitted and when denied, and HITALL's SLIDE; each
/// limiter's give-back and settles (a refund, an overage). Returns the keys to compare.
fn every_write_path(con: &mut Connection) -> Vec<String> {
    let set = |con: &mut Connection, key: &str, value: i64| {
        let _: () = redis::cmd("SET").arg(key).arg(value).query(con).unwrap();
    };
    let set_text = |con: &mut Connection, key: &str, value: &str| {
        let _: () = redis::cmd("SET").arg(key).arg(value).query(con).unwrap();
    };
    hit(con, "rl:create", &["10", "3600"]).unwrap();
    for _ in 0..3 {
        hit(con, "rl:increment", &["10", "3600", "COST", "2"]).unwrap();
    }
    set(con, "rl:heal-admitted", 4);
    assert_eq!(hit(con, "rl:heal-admitted", &["10", "3600"]).unwrap()[0], 1);
    set(con, "rl:heal-denied", 99);
    assert_eq!(hit(con, "rl:heal-denied", &["10", "3600"]).unwrap()[0], 0);
    for _ in 0..3 {
        hit(con, "rl:full", &["2", "3600000", "MS"]).unwrap();
    }
    // Windows laid on the clock: their ends are absolute times too (windows long enough not to
    // end before they are compared).
    for _ in 0..2 {
        hit(con, "rl:aligned", &["10", "86400", "ALIGN"]).unwrap();
        hit(con, "rl:calendar", &["10", "month", "TZ", "+05:30"]).unwrap();
    }
    for _ in 0..3 {
        gcra(con, "g:bucket", &["1", "1", "3600", "TOKENS", "1"]).unwrap();
    }
    // A TAT an hour ahead, left without TTL: denied, and healed.
    let (s, _): (i64, i64) = redis::cmd("TIME").query(con).unwrap();
    set(con, "g:heal-denied", (s + 3600) * 1_000_000_000);
    assert_eq!(gcra(con, "g:heal-denied", &["0", "1", "60"]).unwrap()[0], 1);
    for _ in 0..3 {
        slide(con, "s:count", &["10", "3600", "COST", "2"]).unwrap();
    }
    // Counted two windows of 1 s ago (rotated away) and without TTL: admitted, and healed.
    set_text(con, "s:heal-admitted", "slide:1000:1000:3:4");
    assert_eq!(slide(con, "s:heal-admitted", &["10", "1"]).unwrap()[0], 1);
    // A full window of an hour, the current one, without TTL: denied, and healed.
    set_text(con, "s:heal-denied", &format!("slide:3600000:{}:0:5", (s * 1_000) / 3_600_000 * 3_600_000));
    assert_eq!(slide(con, "s:heal-denied", &["5", "3600"]).unwrap()[0], 0);
    let reply: redis::Value = limiter("RATELIMIT.HITALL")
        .arg(&["2", "s:{all}:m", "s:{all}:h", "5", "60", "50", "3600", "SLIDE"])
        .query(con)
        .unwrap();
    assert!(matches!(reply, redis::Value::Array(ref items) if items[0] == redis::Value::Int(1)));
    // Leases: acquire, renew, release, a denial, and a set healed and pruned.
    let lease = |con: &mut Connection, command: &str, args: &[&str]| {
        let _: redis::Value = limiter(command).arg(args).query(con).unwrap();
    };
    lease(con, "RATELIMIT.ACQUIRE", &["l:set", "2", "3600", "ID", "a"]);
    lease(con, "RATELIMIT.ACQUIRE", &["l:set", "2", "7200", "ID", "b"]);
    lease(con, "RATELIMIT.ACQUIRE", &["l:set", "2", "3600", "ID", "c"]);
    lease(con, "RATELIMIT.RENEW", &["l:set", "a", "5400"]);
    lease(con, "RATELIMIT.RELEASE", &["l:set", "b"]);
    set(con, "l:dummy", 0);
    let _: () = redis::cmd("ZADD")
        .arg(&["l:healed", "1000000000000", "old"])
        .arg((s + 3600) * 1_000)
        .arg("live")
        .query(con)
        .unwrap();
    lease(con, "RATELIMIT.ACQUIRE", &["l:healed", "1", "60", "ID", "next"]);
    // Give-backs, and settles: a refund and an overage on each limiter.
    for (command, key, args) in [
        ("RATELIMIT.HIT", "rl:refund", ["10", "3600", "COST"]),
        ("RATELIMIT.SLIDE", "s:refund", ["10", "3600", "COST"]),
        ("RATELIMIT.GCRA", "g:refund", ["9", "1", "3600"]),
    ] {
        let cost = if command == "RATELIMIT.GCRA" { "TOKENS" } else { "COST" };
        let mut call = |amount: &str| {
            let mut full: Vec<&str> = args.to_vec();
            if command == "RATELIMIT.GCRA" {
                full.push(cost);
            }
            full.push(amount);
            let _: redis::Value = limiter(command).arg(key).arg(&full).query(con).unwrap();
        };
        call("5");
        call("-2");
        for (suffix, used) in [("settle-refund", 1), ("settle-over", 9)] {
            let key = format!("{key}:{suffix}");
            let mut full: Vec<&str> = args.to_vec();
            if command == "RATELIMIT.GCRA" {
                full.push(cost);
            }
            full.push("4");
            let (_, reservation) = reserve(con, command, &key, &full).unwrap();
            settle(con, &key, &reservation.unwrap(), used).unwrap();
        }
    }
    // Windows laid on the clock: a refund, and an overage on a counter gone meanwhile (a new
    // window, ending where the laid one does).
    for (key, laid) in [("rl:laid:aligned", &["86400", "ALIGN"][..]), ("rl:laid:month", &["month", "TZ", "+05:30"])] {
        let args: Vec<&str> = [&["100"][..], laid, &["COST", "4"]].concat();
        let (_, refund) = reserve(con, "RATELIMIT.HIT", key, &args).unwrap();
        settle(con, key, &refund.unwrap(), 1).unwrap();
        let (_, over) = reserve(con, "RATELIMIT.HIT", key, &args).unwrap();
        let _: () = redis::cmd("DEL").arg(key).query(con).unwrap();
        settle(con, key, &over.unwrap(), 9).unwrap();
    }
    // Requests and tokens in one HITALL, its token keys settled in one call: a refund on one
    // counter, an overage on the other, gone meanwhile.
    let (tokens, rpm, tpm, tpd) = (&["TOKENS", "40", "2", "RESERVE"][..], "{t}:rpm", "{t}:tpm", "{t}:tpd");
    let mut reply: Vec<redis::Value> = limiter("RATELIMIT.HITALL")
        .arg(&["3", rpm, tpm, tpd, "5", "60", "1000", "60", "9000", "day"])
        .arg(tokens)
        .query(con)
        .unwrap();
    let all: String = redis::from_redis_value(&reply.pop().unwrap()).unwrap();
    common::settle_all(con, &[tpm, tpd], &all, 10).unwrap();
    let _: () = redis::cmd("DEL").arg(tpd).query(con).unwrap();
    common::settle_all(con, &[tpm, tpd], &common::same_terms(&all, 1), 90).unwrap();
    set(con, "rl:refund-heal", 6);
    hit(con, "rl:refund-heal", &["10", "3600", "COST", "-2"]).unwrap();
    // Adaptive limits: created, taken, denied; cut with a hold; capped and bounded by the provider.
    let adapt = |con: &mut Connection, command: &str, args: &[&str]| {
        let _: redis::Value = limiter(command).arg(args).query(con).unwrap();
    };
    for _ in 0..12 {
        adapt(con, "RATELIMIT.ADAPT", &["a:llm", "6", "60", "600", "3600", "COST", "7", "PARTIAL"]);
    }
    adapt(con, "RATELIMIT.REPORT", &["a:llm", "THROTTLED", "RETRY", "600000"]);
    adapt(con, "RATELIMIT.ADAPT", &["a:held", "6", "60", "600", "3600"]);
    adapt(con, "RATELIMIT.REPORT", &["a:held", "OK", "LIMIT", "30", "REMAINING", "3", "RESET", "600000"]);
    // An adaptive reservation settled: a refund, and an overage on a state gone meanwhile.
    for (used, gone) in [(2, false), (20, true)] {
        let (_, reservation) =
            reserve(con, "RATELIMIT.ADAPT", "a:reserved", &["6", "60", "600", "3600", "COST", "8"]).unwrap();
        if gone {
            let _: () = redis::cmd("DEL").arg("a:reserved").query(con).unwrap();
        }
        settle(con, "a:reserved", &reservation.unwrap(), used).unwrap();
    }
    let keys = [
        "a:llm",
        "a:held",
        "a:reserved",
        "rl:refund",
        "rl:refund:settle-refund",
        "rl:refund:settle-over",
        "rl:refund-heal",
        "rl:laid:aligned",
        "rl:laid:month",
        "{t}:rpm",
        "{t}:tpm",
        "{t}:tpd",
        "s:refund",
        "s:refund:settle-refund",
        "s:refund:settle-over",
        "g:refund",
        "g:refund:settle-refund",
        "g:refund:settle-over",
        "l:set",
        "l:healed",
        "rl:create",
        "rl:increment",
        "rl:heal-admitted",
        "rl:heal-denied",
        "rl:full",
        "rl:aligned",
        "rl:calendar",
        "g:bucket",
        "g:heal-denied",
        "s:count",
        "s:heal-admitted",
        "s:heal-denied",
        "s:{all}:m",
        "s:{all}:h",
    ];
    // And each settled key's settle marks (`HSET`, `PEXPIREAT`).
    let marks: Vec<String> = redis::cmd("KEYS").arg("*:settled:*").query(con).unwrap();
    assert!(marks.len() >= 10, "{marks:?}");
    keys.into_iter().map(String::from).chain(marks).collect()
}

fn repl_offset(con: &mut Connection) -> i64 {
    info_field(con, "replication", "master_repl_offset").unwrap().parse().unwrap()
}

#[test]
fn a_replica_without_the_module_gets_identical_counters() {
    let (primary, replica) = common::primary_and_replica(false);
    let mut p = primary.connect();
    let mut r = replica.connect();
    let modules = common::loaded_modules(&mut r);
    assert!(modules.iter().all(|(name, _)| name != "ratelimit"), "the replica must not have the module: {modules:?}");

    let keys = every_write_path(&mut p);

    // A denied hit that heals nothing sends nothing to the replicas.
    let before = repl_offset(&mut p);
    assert_eq!(hit(&mut p, "rl:full", &["2", "3600000", "MS"]).unwrap()[0], 0);
    assert_eq!(repl_offset(&mut p), before);

    common::wait_for_replica(&mut p);
    for key in &keys {
        let on_primary = value_and_expiry(&mut p, key);
        assert!(on_primary.1 > 0, "{key} has no expiry on the primary");
        assert_eq!(value_and_expiry(&mut r, key), on_primary, "{key}");
    }
    // Errors the replica met while applying the primary's stream (client errors don't count).
    let unexpected = info_field(&mut r, "stats", "unexpected_error_replies");
    assert_eq!(unexpected.as_deref(), Some("0"), "the replica rejected part of the stream");
}

#[test]
fn the_aof_reloads_on_a_server_without_the_module() {
    let dir = TempDir::new();
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    let (keys, expected) = {
        let mut primary = Server::with(Config { dir: Some(&dir.0), args: &aof, ..Config::default() });
        let mut con = primary.connect();
        let keys = every_write_path(&mut con);
        let expected: Vec<_> = keys.iter().map(|k| value_and_expiry(&mut con, k)).collect();
        primary.kill(); // a crash: only what was fsynced survives
        (keys, expected)
    };
    let aof_text = std::fs::read_dir(dir.0.join("appendonlydir"))
        .unwrap()
        .map(|f| std::fs::read(f.unwrap().path()).unwrap())
        .map(|bytes| String::from_utf8_lossy(&bytes).to_lowercase())
        .collect::<String>();
    // Effects, never the calls (with the library the AOF also holds its source, from FUNCTION LOAD).
    let calls = [
        "\r\nratelimit.hit\r\n",
        "\r\nratelimit.gcra\r\n",
        "\r\nratelimit.slide\r\n",
        "\r\nratelimit.hitall\r\n",
        "\r\nratelimit.settle\r\n",
        "\r\nfcall\r\n",
    ];
    assert!(calls.iter().all(|call| !aof_text.contains(call)), "the AOF must hold effects, not the calls");
    assert!(aof_text.contains("pxat"), "absolute expiry times in the AOF");

    let restarted = Server::with(Config { module: false, dir: Some(&dir.0), args: &aof, ..Config::default() });
    let mut con = restarted.connect();
    for (key, want) in keys.iter().zip(expected) {
        assert_eq!(value_and_expiry(&mut con, key), want, "{key}");
    }
}
