//! The guard (`ratelimit.guard`): counters under guarded prefixes never stay without a TTL,
//! whichever client wrote them; nothing else is ever touched.

use ratelimit_testkit as common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{assert_within, error_of, info_field, pttl, run_all, value_and_expiry, wait_for, Config, Server, TempDir};
use redis::{Connection, Value};

const RULES: &str = "rl: 60 fast: 150000ms";

fn guarded() -> Server {
    Server::with(Config { args: &["--ratelimit.guard", RULES], ..Config::default() })
}

/// Whether the heal lands before the next command (servers with post-notification jobs), or
/// before the server next waits for input (Redis 7.0), as the module found this server.
fn heals_at_command_end(con: &mut Connection) -> bool {
    match info_field(con, "ratelimit", "ratelimit_guard_heal_at").as_deref() {
        Some("command_end") => true,
        Some("before_sleep") => false,
        other => panic!("ratelimit_guard_heal_at: {other:?}"),
    }
}

fn set_rules(con: &mut Connection, rules: &str) {
    let _: () = redis::cmd("CONFIG").arg(&["SET", "ratelimit.guard", rules]).query(con).unwrap();
}

/// `key` has a TTL of `window_ms` from a heal made after `written` (an instant before its write).
fn assert_healed(con: &mut Connection, key: &str, window_ms: i64, written: Instant, how: &str) {
    let ttl = pttl(con, key);
    let since = common::ms_since(written);
    assert_within(ttl, window_ms - since, window_ms, &format!("{how}: {key}'s PTTL"));
}

#[test]
fn every_write_path_is_healed() {
    let server = guarded();
    let mut con = server.connect();
    run_all(&mut con, &["SET src 7", "SET rl:persisted 3 EX 100", "SET dumped 11"]);
    let dump: Vec<u8> = redis::cmd("DUMP").arg("dumped").query(&mut con).unwrap();
    let written = Instant::now();
    let paths: &[(&str, &[&str])] = &[
        ("INCR", &["INCR rl:incr"]),
        ("INCRBY", &["INCRBY rl:incrby 5"]),
        ("DECR", &["DECR rl:decr"]),
        ("SET without EX", &["SET rl:set 10"]),
        ("GETSET", &["GETSET rl:getset 4"]),
        ("PERSIST", &["PERSIST rl:persisted"]),
        ("RENAME onto the prefix", &["SET tmp 5", "RENAME tmp rl:renamed"]),
        ("COPY onto the prefix", &["COPY src rl:copied"]),
        ("MSET", &["MSET rl:mset1 1 rl:mset2 2"]),
        ("SETRANGE", &["SETRANGE rl:range 0 42"]),
    ];
    for (how, lines) in paths {
        for line in *lines {
            let words: Vec<&str> = line.split(' ').collect();
            let _: Value =
                redis::cmd(words[0]).arg(&words[1..]).query(&mut con).unwrap_or_else(|e| panic!("{how}: {e}"));
        }
    }
    let _: () = redis::cmd("RESTORE").arg("rl:restored").arg(0).arg(&dump).query(&mut con).unwrap();
    let _: Value =
        redis::cmd("EVAL").arg(&["return redis.call('INCR', KEYS[1])", "1", "rl:lua"]).query(&mut con).unwrap();
    let _: Value =
        redis::pipe().atomic().cmd("INCR").arg("rl:multi").cmd("INCR").arg("rl:multi").query(&mut con).unwrap();
    let _: () = redis::cmd("SET").arg(&["fast:1", "1"]).query(&mut con).unwrap();

    let keys = [
        "rl:incr",
        "rl:incrby",
        "rl:decr",
        "rl:set",
        "rl:getset",
        "rl:persisted",
        "rl:renamed",
        "rl:copied",
        "rl:mset1",
        "rl:mset2",
        "rl:range",
        "rl:restored",
        "rl:lua",
        "rl:multi",
    ];
    for key in keys {
        assert_healed(&mut con, key, 60_000, written, key);
    }
    assert_healed(&mut con, "fast:1", 150_000, written, "the millisecond window");
    assert_eq!(redis::cmd("GET").arg("rl:multi").query::<String>(&mut con).unwrap(), "2", "values are untouched");
    let encoding: String = redis::cmd("OBJECT").arg(&["ENCODING", "rl:incr"]).query(&mut con).unwrap();
    assert_eq!(encoding, "int", "the check never rewrites a value");
    let heals: u64 = info_field(&mut con, "ratelimit", "ratelimit_guard_heals").unwrap().parse().unwrap();
    assert_eq!(heals, keys.len() as u64 + 1);
    assert!(server.log().contains("ratelimit guard: gave a TTL to counter 'rl:"), "the log names a healed key");
}

#[test]
fn writers_that_set_their_own_expiry_and_everything_else_are_left_alone() {
    let server = guarded();
    let mut con = server.connect();
    let written = Instant::now();
    // The well-known repair, as one transaction and as a script: their own 500 s, not the guard's 60.
    let _: Value = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("rl:multi")
        .cmd("EXPIRE")
        .arg(&["rl:multi", "500", "NX"])
        .query(&mut con)
        .unwrap();
    let script = "redis.call('INCR', KEYS[1]) redis.call('PEXPIRE', KEYS[1], 500000) return 1";
    let _: Value = redis::cmd("EVAL").arg(&[script, "1", "rl:lua"]).query(&mut con).unwrap();
    run_all(
        &mut con,
        &[
            "SET rl:ex 1 EX 100",
            "SET rl:text hello",
            "SET rl:float 1.5",
            "SET rl:padded 007",
            "HSET rl:hash f 1",
            "RPUSH rl:list 1",
            "SET other:counter 5",
            "INCR rlx",
        ],
    );
    for key in ["rl:multi", "rl:lua"] {
        assert_healed(&mut con, key, 500_000, written, "keeps its own expiry");
    }
    assert_healed(&mut con, "rl:ex", 100_000, written, "a running TTL is never touched");
    for key in ["rl:text", "rl:float", "rl:padded", "rl:hash", "rl:list", "other:counter", "rlx"] {
        assert_eq!(pttl(&mut con, key), -1, "{key} is no guarded counter");
    }
    assert_eq!(info_field(&mut con, "ratelimit", "ratelimit_guard_heals").as_deref(), Some("0"));
}

#[test]
fn the_heal_comes_before_the_next_command_or_before_the_server_sleeps() {
    let server = guarded();
    let mut con = server.connect();
    // The heal's delay, measured as what a command pipelined right behind the write sees.
    let (_, ttl): (i64, i64) = redis::pipe().cmd("INCR").arg("rl:k").cmd("PTTL").arg("rl:k").query(&mut con).unwrap();
    if heals_at_command_end(&mut con) {
        assert!(ttl > 0, "a post-notification job heals within the writing command: {ttl}");
    } else {
        assert_eq!(ttl, -1, "Redis 7.0 heals before it sleeps, after the pipeline's commands");
    }
    assert!(pttl(&mut con, "rl:k") > 0, "healed by the next round trip");
}

#[test]
fn rules_are_validated_changed_at_run_time_and_rewritten() {
    let dir = TempDir::new();
    let conf = dir.0.join("redis.conf");
    std::fs::write(&conf, format!("loadmodule {}\nratelimit.guard \"{RULES}\"\n", common::module_path().display()))
        .unwrap();
    let server = Server::with(Config { module: false, dir: Some(&dir.0), conf: Some(&conf), ..Config::default() });
    let mut con = server.connect();
    let get = |con: &mut Connection| -> String {
        let pair: Vec<String> = redis::cmd("CONFIG").arg(&["GET", "ratelimit.guard"]).query(con).unwrap();
        pair[1].clone()
    };
    assert_eq!(get(&mut con), RULES);
    for bad in ["rl:", "rl: 0", "rl: x", "rl: 60 rl: 30", "rl: 1.5"] {
        let error = error_of(redis::cmd("CONFIG").arg(&["SET", "ratelimit.guard", bad]).query::<()>(&mut con));
        assert!(error.contains("ratelimit.guard: "), "{bad}: {error}");
        assert_eq!(get(&mut con), RULES, "the old rules stay");
    }
    set_rules(&mut con, "new: 30");
    let written = Instant::now();
    run_all(&mut con, &["INCR new:1", "INCR rl:1"]);
    assert_healed(&mut con, "new:1", 30_000, written, "a prefix guarded at run time");
    assert_eq!(pttl(&mut con, "rl:1"), -1, "a prefix no longer guarded");
    run_all(&mut con, &["CONFIG REWRITE"]);
    assert!(std::fs::read_to_string(&conf).unwrap().contains("ratelimit.guard \"new: 30\""));
    set_rules(&mut con, "");
    run_all(&mut con, &["INCR new:2"]);
    assert_eq!(pttl(&mut con, "new:2"), -1, "no rules, no guard");
}

#[test]
fn replicas_and_the_aof_get_the_heals_and_a_replica_never_heals_itself() {
    // A guarded primary: its heals reach a replica without the module as PEXPIREAT.
    let primary = guarded();
    let port = primary.port.to_string();
    let replica =
        Server::with(Config { module: false, args: &["--replicaof", "127.0.0.1", &port], ..Config::default() });
    let mut p = primary.connect();
    let mut r = replica.connect();
    common::wait_for("replica link", Duration::from_secs(60), || {
        info_field(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    run_all(&mut p, &["INCR rl:a", "SET rl:b 5", "SELECT 3", "INCR rl:db3", "SELECT 0"]);
    common::wait_for_replica(&mut p);
    for (db, key) in [("0", "rl:a"), ("0", "rl:b"), ("3", "rl:db3")] {
        run_all(&mut p, &[&format!("SELECT {db}")]);
        run_all(&mut r, &[&format!("SELECT {db}")]);
        let on_primary = value_and_expiry(&mut p, key);
        assert!(on_primary.1 > 0);
        assert_eq!(value_and_expiry(&mut r, key), on_primary, "{key}: the same absolute expiry, in its database");
    }

    // A guarded replica of an unguarded primary leaves the primary's data as it is.
    let (plain_primary, guarded_replica) = common::primary_and_replica(true);
    let mut gr = guarded_replica.connect();
    set_rules(&mut gr, "rl: 60");
    let mut pp = plain_primary.connect();
    run_all(&mut pp, &["INCR rl:leak"]);
    // Acknowledged, the replica has applied the write and run what follows it (a job, or its
    // before-sleep, which comes before the acknowledgement is sent).
    common::wait_for_replica(&mut pp);
    assert_eq!(pttl(&mut gr, "rl:leak"), -1, "a replica reproduces its primary");
    assert_eq!(info_field(&mut gr, "ratelimit", "ratelimit_guard_checked").as_deref(), Some("0"));
}

#[test]
fn an_aof_of_guarded_writes_reloads_with_the_same_ttls_without_the_module() {
    let dir = TempDir::new();
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    let expected = {
        let args = [&aof[..], &["--ratelimit.guard", RULES]].concat();
        let mut server = Server::with(Config { dir: Some(&dir.0), args: &args, ..Config::default() });
        let mut con = server.connect();
        run_all(&mut con, &["INCR rl:a", "SET rl:b 9", "SELECT 2", "INCR fast:c", "SELECT 0"]);
        let expected: Vec<_> = [("0", "rl:a"), ("0", "rl:b"), ("2", "fast:c")]
            .iter()
            .map(|(db, key)| {
                run_all(&mut con, &[&format!("SELECT {db}")]);
                value_and_expiry(&mut con, key)
            })
            .collect();
        server.kill();
        expected
    };
    let plain = Server::with(Config { module: false, dir: Some(&dir.0), args: &aof, ..Config::default() });
    let mut con = plain.connect();
    for ((db, key), want) in [("0", "rl:a"), ("0", "rl:b"), ("2", "fast:c")].iter().zip(expected) {
        run_all(&mut con, &[&format!("SELECT {db}")]);
        assert!(want.1 > 0, "{key} was healed");
        assert_eq!(value_and_expiry(&mut con, key), want, "{key}: the same absolute expiry after the reload");
    }
}

#[test]
fn nothing_happens_while_the_server_loads_its_data() {
    let dir = TempDir::new();
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    {
        let mut plain = Server::with(Config { module: false, dir: Some(&dir.0), args: &aof, ..Config::default() });
        run_all(&mut plain.connect(), &["INCR rl:old"]);
        plain.kill();
    }
    let args = [&aof[..], &["--ratelimit.guard", RULES]].concat();
    let server = Server::with(Config { dir: Some(&dir.0), args: &args, ..Config::default() });
    let mut con = server.connect();
    assert_eq!(pttl(&mut con, "rl:old"), -1, "the replay reproduces the data, the guard decides nothing");
    assert_eq!(info_field(&mut con, "ratelimit", "ratelimit_guard_checked").as_deref(), Some("0"));
    let written = Instant::now();
    run_all(&mut con, &["INCR rl:old"]);
    assert_healed(&mut con, "rl:old", 60_000, written, "the next write");
}

/// The story the module exists for: the classic `GET`, `SET ... PX`, `INCR` limiter, many clients,
/// windows short enough that keys expire between the GET and the INCR.
#[test]
fn racing_the_classic_limiter_against_expiry_leaves_no_counter_without_ttl() {
    let server = guarded();
    let stop = Arc::new(AtomicBool::new(false));
    let run = Duration::from_millis(if common::soak() { 20_000 } else { 2_000 });
    let started = Instant::now();
    let clients: Vec<_> = (0..8)
        .map(|i| {
            let mut con = server.connect();
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("rl:{}", (n + i) % 20);
                    let current: Option<i64> = redis::cmd("GET").arg(&key).query(&mut con).unwrap();
                    if current.is_none() {
                        let _: () = redis::cmd("SET").arg(&[&key, "0", "PX", "3"]).query(&mut con).unwrap();
                    }
                    let _: i64 = redis::cmd("INCR").arg(&key).query(&mut con).unwrap();
                    n += 1;
                }
            })
        })
        .collect();
    // Race for `run`, and on until the race has leaked a few counters (how often it does depends
    // on the machine): a test that never saw a leak would prove nothing.
    let mut con = server.connect();
    let heals = |con: &mut Connection| -> u64 {
        info_field(con, "ratelimit", "ratelimit_guard_heals").unwrap().parse().unwrap()
    };
    wait_for("the race to leak counters", Duration::from_secs(300), || {
        started.elapsed() >= run && heals(&mut con) >= 3
    });
    stop.store(true, Ordering::Relaxed);
    clients.into_iter().for_each(|c| c.join().unwrap());
    eprintln!("{:?} of racing clients: the guard healed {} leaked counters", started.elapsed(), heals(&mut con));
    for i in 0..20 {
        assert_ne!(pttl(&mut con, &format!("rl:{i}")), -1, "rl:{i} was left without a TTL");
    }
}

#[test]
fn memory_stays_flat_with_the_guard_on() {
    let server = guarded();
    let mut con = server.connect();
    let round = |con: &mut Connection| {
        let mut pipe = redis::pipe();
        for i in 0..10_000 {
            pipe.cmd("INCR").arg(format!("rl:{}", i % 500)).ignore();
            pipe.cmd("INCR").arg(format!("free:{}", i % 500)).ignore();
        }
        pipe.query::<()>(con).unwrap();
    };
    round(&mut con);
    let before = common::settled_memory(&mut con);
    let rounds = if common::soak() { 200 } else { 5 };
    for _ in 0..rounds {
        round(&mut con);
    }
    let growth = common::settled_memory(&mut con) - before;
    assert!(growth < 16 * 1024, "memory grew by {growth} bytes over {} writes", rounds * 20_000);
}

#[test]
fn a_lease_set_written_without_ttl_is_healed_to_its_latest_lease() {
    let server = guarded();
    let mut con = server.connect();
    // A semaphore script that forgot its EXPIRE: leases until 2033.
    run_all(&mut con, &["ZADD rl:sem 2000000000000 worker-1", "ZADD rl:board 1 x"]);
    let expiry: i64 = redis::cmd("PEXPIRETIME").arg("rl:sem").query(&mut con).unwrap();
    assert_eq!(expiry, 2_000_000_000_000);
    assert_eq!(pttl(&mut con, "rl:board"), -1, "not a lease set: left alone");
}

#[test]
fn a_sliding_window_written_without_ttl_is_healed_to_the_end_of_its_counts() {
    let server = guarded();
    let mut con = server.connect();
    // The window of 10^12 ms that holds now began at 10^12; its counts matter until 3 * 10^12.
    run_all(&mut con, &["SET rl:slide slide:1000000000000:1000000000000:0:4", "SET rl:other slide:1000:1:0:1"]);
    let expiry: i64 = redis::cmd("PEXPIRETIME").arg("rl:slide").query(&mut con).unwrap();
    assert_eq!(expiry, 3_000_000_000_000, "healed to the end of the window after its own, not to the rule's");
    assert_eq!(pttl(&mut con, "rl:other"), -1, "not a sliding window's value: left alone");
    assert_eq!(
        redis::cmd("GET").arg("rl:slide").query::<String>(&mut con).unwrap(),
        "slide:1000000000000:1000000000000:0:4"
    );
}
