//! RATELIMIT.GCRA against real servers: the rules, the reply, errors, healing, concurrency.

use ratelimit_testkit as common;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{assert_within, error_of, gcra, get, info_field, pttl, run_all, snapshot, timed, Server};
use redis::{Connection, Value};

const NS_PER_MS: i64 = 1_000_000;

fn pexpiretime(con: &mut Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap()
}

fn tat(con: &mut Connection, key: &str) -> i64 {
    get(con, key).expect("a bucket").parse().expect("a TAT in nanoseconds")
}

#[test]
fn a_full_bucket_admits_its_burst_then_denies() {
    let server = Server::start();
    let mut con = server.connect();
    // 5 tokens, one back every minute (no token comes back during the test, however slow the
    // machine). The first call's instant anchors the TAT: each call adds a minute to wait for a
    // full bucket, less the time since the first call.
    let first_sent = Instant::now();
    let since_first = || common::ms_since(first_sent);
    for taken in 1..=5 {
        let ((reply, ttl), ms) = timed(|| (gcra(&mut con, "g", &["4", "1", "60"]).unwrap(), pttl(&mut con, "g")));
        assert_eq!(reply[..4], [0, 5, 5 - taken, -1]);
        let full_after = reply[4];
        assert_within(taken * 60_000 - full_after, 0, since_first(), "full_after_ms short of the tokens taken");
        // The key goes when the bucket is full again, never before its TAT.
        assert!(pexpiretime(&mut con, "g") * NS_PER_MS >= tat(&mut con, "g"));
        // The expiry is the TAT rounded up to the ms; PTTL was read up to `ms` later.
        assert_within(ttl, full_after - ms, full_after + 1, "PTTL against full_after_ms");
    }
    let before = snapshot(&mut con, "g");
    let reply = gcra(&mut con, "g", &["4", "1", "60"]).unwrap();
    assert_eq!(reply[..3], [1, 5, 0]);
    assert_within(60_000 - reply[3], 0, since_first(), "retry_after_ms: a token back a minute after the first");
    assert_within(300_000 - reply[4], 0, since_first(), "full_after_ms");
    assert_eq!(snapshot(&mut con, "g"), before, "a denied call writes nothing");
}

#[test]
fn waiting_retry_after_is_always_enough() {
    let server = Server::start();
    let mut con = server.connect();
    // 2 tokens, one back every 100 ms.
    let args = ["1", "10", "1"];
    for _ in 0..5 {
        // Take tokens until denied (a client held up for 100 ms finds one back: ask again).
        let started = Instant::now();
        let denied = loop {
            let reply = gcra(&mut con, "g", &args).unwrap();
            if reply[0] == 1 {
                break reply;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "never denied");
        };
        // Denied, a token is at most one emission away.
        assert_within(denied[3], 1, 100, "retry_after_ms");
        thread::sleep(Duration::from_millis(denied[3] as u64));
        let reply = gcra(&mut con, "g", &args).unwrap();
        assert_eq!(reply[0], 0, "admitted after waiting retry_after_ms: {reply:?}");
    }
}

#[test]
fn tokens_take_several_and_never_more_than_the_capacity() {
    let server = Server::start();
    let mut con = server.connect();
    let ((first, reply), ms) = timed(|| {
        let first = gcra(&mut con, "g", &["4", "1", "60", "TOKENS", "3"]).unwrap();
        (first, gcra(&mut con, "g", &["4", "1", "60", "tokens", "3"]).unwrap())
    });
    assert_eq!(first, [0, 5, 2, -1, 180_000]);
    // One token short: it comes back 60 s after the first call; the bucket is full 180 s after it.
    assert_eq!(reply[..3], [1, 5, 2]);
    assert_within(60_000 - reply[3], 0, ms, "retry_after_ms");
    assert_within(180_000 - reply[4], 0, ms, "full_after_ms");
    // More than the capacity: never admitted, and a fresh key is not created.
    let reply = gcra(&mut con, "fresh", &["4", "1", "60", "TOKENS", "6"]).unwrap();
    assert_eq!(reply, [1, 5, 5, -1, 0]);
    let exists: i64 = redis::cmd("EXISTS").arg("fresh").query(&mut con).unwrap();
    assert_eq!(exists, 0);
}

#[test]
fn partial_grants_the_tokens_there_are_and_empties_the_bucket() {
    let server = Server::start();
    let mut con = server.connect();
    let partial = ["4", "1", "60", "TOKENS", "3", "PARTIAL"];
    let ((first, second, third), ms) = timed(|| {
        let first = gcra(&mut con, "g", &partial).unwrap();
        (first, gcra(&mut con, "g", &partial).unwrap(), gcra(&mut con, "g", &partial).unwrap())
    });
    // 3 of a full bucket of 5; then the 2 left (and the part of the next token that came back
    // meanwhile), leaving it empty until a whole token comes back.
    assert_eq!(first, [0, 5, 2, -1, 180_000, 3]);
    assert_eq!(second[..4], [0, 5, 0, -1]);
    assert_eq!((second[4], second[5]), (300_000, 2), "{second:?}");
    assert_eq!(third[..3], [1, 5, 0]);
    assert_within(60_000 - third[3], 0, ms, "retry_after_ms");
    assert_eq!(third[5], 0, "none granted: {third:?}");
    let ttl = pttl(&mut con, "g");
    // At the TAT rounded up to the ms (the library's clock has µs).
    assert!(ttl > 300_000 - 1_000 - ms && ttl <= 300_001, "the key expires when the bucket is full: {ttl}");
    // From a missing key, more than the capacity: the capacity.
    assert_eq!(
        gcra(&mut con, "fresh", &["4", "1", "60", "TOKENS", "9", "PARTIAL"]).unwrap(),
        [0, 5, 0, -1, 300_000, 5]
    );
}

#[test]
fn a_bucket_without_ttl_heals_admitted_or_not() {
    let server = Server::start();
    let mut con = server.connect();
    let now_ns = |con: &mut Connection| -> i64 {
        let (s, us): (i64, i64) = redis::cmd("TIME").query(con).unwrap();
        s * 1_000_000_000 + us * 1_000
    };
    // Empty for the next 10 s, as a SET without expiry (or a restored key) would leave it.
    let now = now_ns(&mut con);
    let empty_until = now + 10_000 * NS_PER_MS;
    // And one full again 10 ms ago (the module's clock may be a millisecond behind TIME's).
    let full_since = now - 10 * NS_PER_MS;
    run_all(&mut con, &[&format!("SET denied {empty_until}"), &format!("SET admitted {full_since}")]);
    let reply = gcra(&mut con, "denied", &["4", "1", "1"]).unwrap();
    assert_eq!(reply[0], 1);
    assert_eq!(tat(&mut con, "denied"), empty_until, "only the expiry is written");
    assert_eq!(pexpiretime(&mut con, "denied"), (empty_until + NS_PER_MS - 1) / NS_PER_MS);

    let ((reply, ttl), ms) =
        timed(|| (gcra(&mut con, "admitted", &["4", "1", "1"]).unwrap(), pttl(&mut con, "admitted")));
    assert_eq!(reply[0], 0);
    // A full bucket less one token: its TAT a second on, the expiry that rounded up to the ms.
    assert_within(ttl, 1_000 - ms, 1_001, "PTTL");
    if !common::library() {
        assert_eq!(info_field(&mut con, "ratelimit", "ratelimit_healed").as_deref(), Some("2"));
    }
}

/// The server's clock in ms.
fn server_ms(con: &mut Connection) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query(con).unwrap();
    s * 1_000 + us / 1_000
}

#[test]
fn aligned_buckets_refill_at_the_period_boundaries() {
    let server = Server::start();
    let mut con = server.connect();
    // 10 an hour (one every 6 minutes), capacity 10: 3 taken in this hour leave the TAT 18
    // minutes past the hour, and the key lives to the next hour, when the 3 come back together.
    const HOUR_MS: i64 = 3_600_000;
    let (before, reply, after) = loop {
        let before = server_ms(&mut con);
        let reply = gcra(&mut con, "g", &["9", "10", "3600", "TOKENS", "3", "ALIGN"]).unwrap();
        let after = server_ms(&mut con);
        // Called across an hour's boundary: once more, in the next hour.
        if before / HOUR_MS == after / HOUR_MS {
            break (before, reply, after);
        }
        run_all(&mut con, &["DEL g"]);
    };
    let next_hour = (before / HOUR_MS + 1) * HOUR_MS;
    assert_eq!(reply[..4], [0, 10, 7, -1]);
    assert_within(reply[4], next_hour - after, next_hour - before, "full_after_ms: to the next hour");
    assert_eq!(tat(&mut con, "g"), (next_hour - HOUR_MS + 18 * 60_000) * NS_PER_MS);
    assert_eq!(pexpiretime(&mut con, "g"), next_hour, "the key lives to the boundary where the bucket is full");
    // Without ALIGN the same bucket counts from now: 3 tokens 18 minutes ahead of it.
    gcra(&mut con, "running", &["9", "10", "3600", "TOKENS", "3"]).unwrap();
    assert!(tat(&mut con, "running") >= (before + 18 * 60_000) * NS_PER_MS);

    // One a second: a request denied waits to the next second's boundary, never longer.
    let one = ["0", "1", "1", "ALIGN"];
    let first = gcra(&mut con, "s", &one).unwrap();
    let denied = gcra(&mut con, "s", &one).unwrap();
    if first[0] == 0 && denied[0] == 1 {
        assert!((1..=1_000).contains(&denied[3]), "retry_after_ms within the second: {denied:?}");
        thread::sleep(Duration::from_millis(denied[3] as u64));
        assert_eq!(gcra(&mut con, "s", &one).unwrap()[0], 0, "admitted at the boundary");
    } else {
        // The two calls fell in two seconds: both admitted.
        assert_eq!((first[0], denied[0]), (0, 0));
    }
}

#[test]
fn errors_change_nothing() {
    let server = Server::start();
    let mut con = server.connect();
    gcra(&mut con, "g", &["4", "1", "60"]).unwrap();
    run_all(&mut con, &["HSET hash f 1", "SET text abc"]);
    let cases: &[(&str, &[&str], &str)] = &[
        ("g", &["4", "1"], "ERR wrong number of arguments for 'ratelimit.gcra' command"),
        ("g", &["-1", "1", "60"], "out of range"),
        ("g", &["x", "1", "60"], "out of range"),
        ("g", &["4", "0", "60"], "out of range"),
        ("g", &["4", "x", "60"], "not an integer"),
        ("g", &["4", "1", "0"], "ERR period must be > 0"),
        ("g", &["4", "1", "x"], "ERR period is not a valid float"),
        ("g", &["4", "1", "60", "TOKENS"], "ERR Missing TOKENS value"),
        ("g", &["4", "1", "60", "TOKENS", "0"], "ERR TOKENS must be a nonzero integer"),
        ("g", &["4", "1", "60", "TOKENS", "-1", "RESERVE"], "ERR RESERVE needs TOKENS >= 1"),
        ("g", &["4", "1", "60", "TOKENS", "x"], "not an integer"),
        ("g", &["1", "1", "86400", "TOKENS", "200000000"], "would cause an overflow"),
        ("g", &["200000000", "1", "86400"], "would cause an overflow"),
        (
            "g",
            &["4", "1", "60", "COST", "1"],
            "ERR syntax error: unknown option (expected TOKENS, PARTIAL, RESERVE or ALIGN)",
        ),
        ("g", &["4", "1", "60", "ALIGN", "RESERVE"], "ERR syntax error: ALIGN and RESERVE cannot be given together"),
        ("g", &["4", "1", "60", "ALIGN", "ALIGN"], "ERR syntax error: ALIGN given more than once"),
        ("g", &["4", "1", "60", "TOKENS", "-2", "PARTIAL"], "ERR PARTIAL needs TOKENS >= 1"),
        ("hash", &["4", "1", "60"], "WRONGTYPE"),
        ("text", &["4", "1", "60"], "ERR value is not an integer or out of range"),
    ];
    for (key, args, expected) in cases {
        let before = [snapshot(&mut con, "g"), snapshot(&mut con, key)];
        let error = error_of(gcra(&mut con, key, args));
        assert!(error.starts_with("ERR ") || error.starts_with("WRONGTYPE"), "{args:?}: {error}");
        assert!(error.contains(expected), "{args:?}: {error}");
        assert_eq!([snapshot(&mut con, "g"), snapshot(&mut con, key)], before, "{args:?} changed a key");
    }
}

#[test]
fn inside_multi_and_lua_with_acls_and_info() {
    if common::module_only("INFO counters, COMMAND DOCS, ACL rules on the module's command") {
        return;
    }
    let server = Server::start();
    let mut con = server.connect();
    let replies: Vec<Vec<i64>> = redis::pipe()
        .atomic()
        .cmd("RATELIMIT.GCRA")
        .arg(&["g", "0", "1", "60"])
        .cmd("RATELIMIT.GCRA")
        .arg(&["g", "0", "1", "60"])
        .query(&mut con)
        .unwrap();
    assert_eq!((replies[0][0], replies[1][0]), (0, 1));
    let script = "return redis.call('RATELIMIT.GCRA', KEYS[1], 0, 1, 60)";
    let reply: Vec<i64> = redis::cmd("EVAL").arg(&[script, "1", "lua"]).query(&mut con).unwrap();
    assert_eq!(reply[..3], [0, 1, 0]);

    run_all(&mut con, &["ACL SETUSER tenant on >pw ~t:* +ratelimit.gcra"]);
    let mut tenant = server.connect();
    run_all(&mut tenant, &["AUTH tenant pw"]);
    assert_eq!(gcra(&mut tenant, "t:1", &["0", "1", "60"]).unwrap()[0], 0);
    assert!(error_of(gcra(&mut tenant, "other", &["0", "1", "60"])).starts_with("NOPERM"));

    let field = |con: &mut Connection, name: &str| info_field(con, "ratelimit", &format!("ratelimit_gcra_{name}"));
    assert_eq!(field(&mut con, "calls").as_deref(), Some("4"));
    assert_eq!(field(&mut con, "admitted").as_deref(), Some("3"));
    assert_eq!(field(&mut con, "denied").as_deref(), Some("1"));
    let keys: Vec<String> =
        redis::cmd("COMMAND").arg(&["GETKEYS", "RATELIMIT.GCRA", "g", "0", "1", "60"]).query(&mut con).unwrap();
    assert_eq!(keys, ["g"]);
    let docs: Value = redis::cmd("COMMAND").arg(&["DOCS", "ratelimit.gcra"]).query(&mut con).unwrap();
    assert!(format!("{docs:?}").contains("tokens_per_period"));
}

#[test]
fn concurrent_clients_never_get_more_than_the_rate() {
    let server = Server::start();
    // 5 tokens, one back every 50 ms.
    let args = ["4", "20", "1"];
    let (admitted, calls) = (Arc::new(AtomicI64::new(0)), Arc::new(AtomicI64::new(0)));
    let started = Instant::now();
    let run = Duration::from_millis(if common::soak() { 10_000 } else { 1_500 });
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let mut con = server.connect();
            let (admitted, calls) = (Arc::clone(&admitted), Arc::clone(&calls));
            thread::spawn(move || {
                while started.elapsed() < run {
                    calls.fetch_add(1, Ordering::Relaxed);
                    if gcra(&mut con, "hot", &args).unwrap()[0] == 0 {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    clients.into_iter().for_each(|c| c.join().unwrap());
    let elapsed_ms = started.elapsed().as_millis() as i64;
    let (admitted, calls) = (admitted.load(Ordering::Relaxed), calls.load(Ordering::Relaxed));
    // capacity + elapsed / emission, plus one token for the clock's millisecond on Redis 7.0.
    let bound = 5 + elapsed_ms / 50 + 1;
    eprintln!("8 clients for {elapsed_ms} ms: {calls} calls, {admitted} admitted, bound {bound}");
    assert!(admitted <= bound, "{admitted} admitted, at most {bound} allowed");
    // The first five calls meet a full bucket, whenever they come (that no client waits longer
    // than it must is waiting_retry_after_is_always_enough's).
    assert!(admitted >= calls.min(5), "{admitted} admitted of {calls} calls: the burst was refused");
}

/// One sequence of redis-cell calls: a burst to the limit, denials, a look (quantity 0), several
/// tokens, give-backs (negative quantities), more than the capacity, a look at a missing key,
/// sub-minute rates.
const CELL_CALLS: &[&str] = &[
    "k1 4 1 60",
    "k1 4 1 60",
    "k1 4 1 60",
    "k1 4 1 60",
    "k1 4 1 60",
    "k1 4 1 60",
    "k1 4 1 60",
    "k1 4 1 60 0",
    "k1 4 1 60 3",
    "k1 4 1 60 -2",
    "k1 4 1 60",
    "k1 4 1 60 -1",
    "k2 15 30 60",
    "k2 15 30 60 4",
    "k2 15 30 60 20",
    "k2 15 30 60 12",
    "k2 15 30 60",
    "k3 4 1 60 0",
    "k4 0 2 1",
    "k4 0 2 1",
    "k4 0 2 1",
    "k5 99 10 3600 50",
    "k5 99 10 3600 50",
    "k5 99 10 3600 1",
    "k5 99 10 3600 -30",
    "k5 99 10 3600 -69",
];

#[test]
fn cl_throttle_answers_as_redis_cell_does() {
    if common::module_only("CL.THROTTLE") {
        return;
    }
    let cell = Server::with(common::Config {
        module: false,
        args: &["--loadmodule", common::redis_cell_module().to_str().unwrap()],
        ..Default::default()
    });
    let ours = Server::with(common::Config { module_args: &["CL.THROTTLE"], ..Default::default() });
    let (mut cell_con, mut our_con) = (cell.connect(), ours.connect());
    // Each server decides on its own clock, so the replies are the same while the sequence runs
    // faster than its shortest time step (k4: a token every 500 ms, whole seconds in the reply).
    // A run held up longer proves nothing either way: it runs again on fresh keys.
    let mut attempt = 0;
    let (calls, ms) = loop {
        attempt += 1;
        let (calls, ms) = timed(|| {
            CELL_CALLS
                .iter()
                .map(|line| {
                    let mut words: Vec<String> = line.split(' ').map(String::from).collect();
                    words[0] = format!("{attempt}:{}", words[0]);
                    let theirs: Vec<i64> = redis::cmd("CL.THROTTLE").arg(&words).query(&mut cell_con).unwrap();
                    let mine: Vec<i64> = redis::cmd("CL.THROTTLE").arg(&words).query(&mut our_con).unwrap();
                    // Neither clock may read the same instant for two calls (ours has ms on 7.0).
                    thread::sleep(Duration::from_millis(3));
                    (line, theirs, mine)
                })
                .collect::<Vec<_>>()
        });
        if ms < 400 {
            break (calls, ms);
        }
        eprintln!("the sequence took {ms} ms, longer than its time steps allow: again on fresh keys");
        assert!(attempt < 10, "the sequence never ran within 400 ms");
    };
    for (line, theirs, mine) in calls {
        eprintln!("CL.THROTTLE {line:<22} redis-cell {theirs:?}  ratelimit {mine:?}");
        assert_eq!(mine, theirs, "CL.THROTTLE {line}");
    }
    // The same bucket as RATELIMIT.GCRA's, in the same nanoseconds redis-cell stores, each from
    // its own clock during the sequence.
    let k1 = format!("{attempt}:k1");
    let (theirs, mine) = (tat(&mut cell_con, &k1), tat(&mut our_con, &k1));
    assert!((theirs - mine).abs() <= ms * NS_PER_MS, "TATs {theirs} and {mine}");
    // Three of five in use (the give-backs made room): GCRA admits, leaving one.
    let reply = gcra(&mut our_con, &k1, &["4", "1", "60"]).unwrap();
    assert_eq!(reply[..3], [0, 5, 1]);
    let exists: i64 = redis::cmd("EXISTS").arg(format!("{attempt}:k3")).query(&mut our_con).unwrap();
    assert_eq!(exists, 0, "a look creates nothing");
    // Giving back more than is in use takes the TAT 2 ms or more before now: redis-cell fails to
    // set the expiry (after writing the key without one); here an error too, and nothing written.
    let k1_before = common::snapshot(&mut our_con, &k1);
    let give_back = ["4", "1", "60", "-9"];
    let theirs = error_of(redis::cmd("CL.THROTTLE").arg(&k1).arg(&give_back).query::<Value>(&mut cell_con));
    let mine = error_of(redis::cmd("CL.THROTTLE").arg(&k1).arg(&give_back).query::<Value>(&mut our_con));
    assert_eq!(theirs, "Cell error: Error while setting key expire");
    assert!(mine.starts_with("ERR quantity gives back more than the bucket holds"), "{mine}");
    assert_eq!(common::snapshot(&mut our_con, &k1), k1_before);
    assert_eq!(common::pttl(&mut cell_con, &k1), -1, "redis-cell's leak, which the module does not copy");
}

#[test]
fn cl_throttle_is_off_unless_asked_for() {
    if common::module_only("CL.THROTTLE") {
        return;
    }
    let server = Server::with(common::Config { args: &["--enable-module-command", "yes"], ..Default::default() });
    let mut con = server.connect();
    let error = error_of(redis::cmd("CL.THROTTLE").arg(&["k", "4", "1", "60"]).query::<Value>(&mut con));
    assert!(error.starts_with("ERR unknown command"), "{error}");
    let module = common::module_path();
    let _: () = redis::cmd("MODULE").arg(&["UNLOAD", "ratelimit"]).query(&mut con).unwrap();
    let refused = redis::cmd("MODULE").arg("LOAD").arg(module.to_str().unwrap()).arg("BOGUS").query::<()>(&mut con);
    assert!(refused.is_err(), "an unknown module argument is refused");
    assert!(server.log().contains("unknown module argument \"BOGUS\""), "the log says why");
    let _: () =
        redis::cmd("MODULE").arg("LOAD").arg(module.to_str().unwrap()).arg("cl.throttle").query(&mut con).unwrap();
    let reply: Vec<i64> = redis::cmd("CL.THROTTLE").arg(&["k", "4", "1", "60"]).query(&mut con).unwrap();
    assert_eq!(reply, [0, 5, 4, -1, 60]);
    let docs: Value = redis::cmd("COMMAND").arg(&["DOCS", "cl.throttle"]).query(&mut con).unwrap();
    assert!(format!("{docs:?}").contains("count_per_period"));
    let error = error_of(redis::cmd("CL.THROTTLE").arg(&["k", "4", "0", "60"]).query::<Value>(&mut con));
    assert!(error.contains("count per period is out of range"), "{error}");
}

#[test]
fn over_maxmemory_new_buckets_are_refused_and_existing_ones_keep_limiting() {
    if common::module_only("over maxmemory FCALL refuses every write; the module only new buckets") {
        return;
    }
    let server = Server::start();
    let mut con = server.connect();
    gcra(&mut con, "existing", &["1", "1", "60"]).unwrap();
    run_all(&mut con, &["CONFIG SET maxmemory 1"]);
    let error = error_of(gcra(&mut con, "new", &["1", "1", "60"]));
    assert!(error.starts_with("OOM command not allowed"), "{error}");
    let exists: i64 = redis::cmd("EXISTS").arg("new").query(&mut con).unwrap();
    assert_eq!(exists, 0);
    assert_eq!(gcra(&mut con, "existing", &["1", "1", "60"]).unwrap()[..3], [0, 2, 0]);
    assert_eq!(gcra(&mut con, "existing", &["1", "1", "60"]).unwrap()[..3], [1, 2, 0]);
    run_all(&mut con, &["CONFIG SET maxmemory 0"]);
    assert_eq!(gcra(&mut con, "new", &["1", "1", "60"]).unwrap()[..3], [0, 2, 1]);
}
