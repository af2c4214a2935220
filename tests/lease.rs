//! RATELIMIT.ACQUIRE, RELEASE and RENEW against a real server: the limit, retries counted once,
//! expiry and pruning, the key's own expiry, the heal, every error, MULTI and scripts, OOM, a race
//! of many clients, and a holder killed mid-lease.

use ratelimit_testkit as common;

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, sleep};
use std::time::Duration;

use common::{error_of, limiter, pttl, run_all, server_ms, snapshot, wait_for, Server};
use redis::{Connection, Value};

/// `[acquired, in_use, remaining, ms]` and the id (None when denied).
fn acquire(con: &mut Connection, key: &str, args: &[&str]) -> redis::RedisResult<(Vec<i64>, Option<String>)> {
    let reply: Vec<Value> = limiter("RATELIMIT.ACQUIRE").arg(key).arg(args).query(con)?;
    let numbers = reply[..4].iter().map(|v| redis::from_redis_value(v).unwrap()).collect();
    Ok((numbers, redis::from_redis_value(&reply[4]).unwrap()))
}

fn release(con: &mut Connection, key: &str, id: &str) -> redis::RedisResult<i64> {
    limiter("RATELIMIT.RELEASE").arg(key).arg(id).query(con)
}

fn renew(con: &mut Connection, key: &str, id: &str, args: &[&str]) -> redis::RedisResult<i64> {
    limiter("RATELIMIT.RENEW").arg(key).arg(id).arg(args).query(con)
}

/// (member, expiry) of every lease in the set, by expiry.
fn leases(con: &mut Connection, key: &str) -> Vec<(String, i64)> {
    redis::cmd("ZRANGE").arg(key).arg(0).arg(-1).arg("WITHSCORES").query(con).unwrap()
}

fn expiry(con: &mut Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap()
}

#[test]
fn permits_up_to_the_limit_then_a_denial_says_when_one_frees_itself() {
    let server = Server::start();
    let mut con = server.connect();
    let before = server_ms(&mut con);
    let (first, a) = acquire(&mut con, "k", &["2", "60", "ID", "a"]).unwrap();
    let (second, b) = acquire(&mut con, "k", &["2", "90", "ID", "b"]).unwrap();
    let (third, none) = acquire(&mut con, "k", &["2", "60", "ID", "c"]).unwrap();
    let after = server_ms(&mut con);
    assert_eq!((first, a.as_deref()), (vec![1, 1, 1, 60_000], Some("a")));
    assert_eq!((second, b.as_deref()), (vec![1, 2, 0, 90_000], Some("b")));
    assert_eq!((&third[..3], none), (&[0, 2, 0][..], None));
    // Denied: the ms until the earliest lease (a's) expires.
    let held = leases(&mut con, "k");
    assert_eq!(held.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    assert!(held[0].1 - after <= third[3] && third[3] <= held[0].1 - before, "{third:?} {held:?}");
    // The key expires with its latest lease.
    assert_eq!(expiry(&mut con, "k"), held[1].1);
}

#[test]
fn a_retry_with_the_same_id_is_counted_once() {
    let server = Server::start();
    let mut con = server.connect();
    for _ in 0..3 {
        let (reply, id) = acquire(&mut con, "k", &["1", "60", "ID", "job-7"]).unwrap();
        assert_eq!((reply[..3].to_vec(), id.as_deref()), (vec![1, 1, 0], Some("job-7")));
    }
    assert_eq!(leases(&mut con, "k").len(), 1);
    assert_eq!(acquire(&mut con, "k", &["1", "60", "ID", "job-8"]).unwrap().0[0], 0, "the one permit is held");
}

#[test]
fn ids_the_module_makes_are_unique() {
    if common::module_only("the library requires ID (documented)") {
        return;
    }
    let server = Server::start();
    let mut con = server.connect();
    let ids: HashSet<String> = (0..200).map(|_| acquire(&mut con, "k", &["1000", "60"]).unwrap().1.unwrap()).collect();
    assert_eq!(ids.len(), 200);
    assert_eq!(leases(&mut con, "k").len(), 200);
}

#[test]
fn release_gives_the_permit_back_once_and_the_key_goes_with_its_last_lease() {
    let server = Server::start();
    let mut con = server.connect();
    acquire(&mut con, "k", &["2", "60", "ID", "short"]).unwrap();
    acquire(&mut con, "k", &["2", "90", "ID", "long"]).unwrap();
    let short_expiry = leases(&mut con, "k")[0].1;
    assert_eq!(release(&mut con, "k", "long").unwrap(), 1);
    assert_eq!(release(&mut con, "k", "long").unwrap(), 0, "released already");
    assert_eq!(release(&mut con, "k", "never").unwrap(), 0);
    assert_eq!(expiry(&mut con, "k"), short_expiry, "the key's expiry comes back to its latest lease");
    assert_eq!(release(&mut con, "k", "short").unwrap(), 1);
    let exists: i64 = redis::cmd("EXISTS").arg("k").query(&mut con).unwrap();
    assert_eq!(exists, 0);
}

#[test]
fn renew_extends_a_live_lease_only() {
    let server = Server::start();
    let mut con = server.connect();
    acquire(&mut con, "k", &["2", "1000", "MS", "ID", "a"]).unwrap();
    let before = server_ms(&mut con);
    assert_eq!(renew(&mut con, "k", "a", &["60"]).unwrap(), 60_000);
    let after = server_ms(&mut con);
    let at = leases(&mut con, "k")[0].1;
    assert!(before + 60_000 <= at && at <= after + 60_000);
    assert_eq!(expiry(&mut con, "k"), at);
    assert_eq!(renew(&mut con, "k", "b", &["60"]).unwrap(), -1, "no such lease");
    assert_eq!(leases(&mut con, "k").len(), 1, "a failed renew adds nothing");
}

#[test]
fn expired_leases_free_their_permits_and_are_pruned() {
    let server = Server::start();
    let mut con = server.connect();
    acquire(&mut con, "k", &["1", "60", "ID", "long"]).unwrap();
    let (_, short) = acquire(&mut con, "k2", &["1", "50", "MS", "ID", "gone"]).unwrap();
    assert_eq!(short.as_deref(), Some("gone"));
    let (denied, _) = acquire(&mut con, "k2", &["1", "60", "ID", "next"]).unwrap();
    assert_eq!(denied[0], 0);
    // The lease ends on the server's clock: the permit is back then, not before.
    let asked = server_ms(&mut con);
    wait_for("the short lease to end", Duration::from_secs(10), || server_ms(&mut con) >= asked + denied[3]);
    assert_eq!(renew(&mut con, "k2", "gone", &["60"]).unwrap(), -1, "an expired lease is lost");
    let (reply, _) = acquire(&mut con, "k2", &["1", "60", "ID", "next"]).unwrap();
    assert_eq!(reply[..2], [1, 1]);
    assert_eq!(leases(&mut con, "k2").iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>(), ["next"], "pruned");
}

#[test]
fn a_set_without_ttl_gets_it_back_and_a_denial_that_prunes_nothing_writes_nothing() {
    let server = Server::start();
    let mut con = server.connect();
    acquire(&mut con, "k", &["1", "60", "ID", "a"]).unwrap();
    let held = snapshot(&mut con, "k");
    let (denied, _) = acquire(&mut con, "k", &["1", "60", "ID", "b"]).unwrap();
    assert_eq!(denied[0], 0);
    assert_eq!(snapshot(&mut con, "k"), held, "a denied ACQUIRE that prunes nothing writes nothing");
    run_all(&mut con, &["PERSIST k"]);
    assert_eq!(pttl(&mut con, "k"), -1);
    acquire(&mut con, "k", &["1", "60", "ID", "b"]).unwrap();
    assert_eq!(snapshot(&mut con, "k"), held, "healed: the same lease, its expiry back");
}

#[test]
fn info_counts_permits_given_denied_returned_lost_and_expired() {
    if common::module_only("INFO ratelimit is the module's") {
        return;
    }
    let server = Server::start();
    let mut con = server.connect();
    acquire(&mut con, "k", &["1", "60", "ID", "a"]).unwrap();
    acquire(&mut con, "k", &["1", "60", "ID", "b"]).unwrap();
    renew(&mut con, "k", "a", &["60"]).unwrap();
    release(&mut con, "k", "a").unwrap();
    release(&mut con, "k", "a").unwrap();
    renew(&mut con, "k", "a", &["60"]).unwrap();
    // Two leases whose holders never came back, found by the next write.
    let past = server_ms(&mut con) - 1_000;
    run_all(&mut con, &[&format!("ZADD gone {past} x {past} y"), "PEXPIRE gone 60000"]);
    acquire(&mut con, "gone", &["1", "60", "ID", "c"]).unwrap();
    // A set that lost its TTL, given it back by a denial.
    run_all(&mut con, &["PERSIST gone"]);
    acquire(&mut con, "gone", &["1", "60", "ID", "d"]).unwrap();
    let field = |con: &mut Connection, name: &str| common::info_field(con, "ratelimit", name).unwrap();
    let expected = [
        ("acquires", "4"),
        ("acquired", "2"),
        ("acquire_denied", "2"),
        ("healed", "1"),
        ("renewed", "1"),
        ("released", "1"),
        ("release_late", "1"),
        ("renew_lost", "1"),
        ("leases_expired", "2"),
    ];
    for (name, value) in expected {
        assert_eq!(field(&mut con, &format!("ratelimit_{name}")), value, "{name}");
    }
}

#[test]
fn info_reports_the_leases_held_now_as_a_gauge() {
    if common::module_only("INFO ratelimit is the module's") {
        return;
    }
    let server = Server::start();
    let mut con = server.connect();
    let held = |con: &mut Connection| -> i64 {
        common::info_field(con, "ratelimit", "ratelimit_leases_in_flight").unwrap().parse().unwrap()
    };
    assert_eq!(held(&mut con), 0);
    acquire(&mut con, "k", &["2", "60", "ID", "a"]).unwrap();
    acquire(&mut con, "k", &["2", "60", "ID", "b"]).unwrap();
    acquire(&mut con, "k", &["2", "60", "ID", "a"]).unwrap();
    acquire(&mut con, "k", &["2", "60", "ID", "c"]).unwrap();
    assert_eq!(held(&mut con), 2, "a retry counted once, a denial not at all");
    renew(&mut con, "k", "b", &["120"]).unwrap();
    release(&mut con, "k", "a").unwrap();
    release(&mut con, "k", "a").unwrap();
    assert_eq!(held(&mut con), 1, "released once; renewed, still one");
    run_all(&mut con, &["CONFIG RESETSTAT"]);
    assert_eq!(held(&mut con), 1, "a gauge: CONFIG RESETSTAT leaves it");
    // A lease whose holder never comes back leaves the count by itself, by the end of its second,
    // with no call on its key (the key expires with it).
    acquire(&mut con, "short", &["1", "1", "MS", "ID", "x"]).unwrap();
    common::wait_for("the short lease to leave the count", Duration::from_secs(10), || held(&mut con) == 1);
    assert_eq!(snapshot(&mut con, "short"), snapshot(&mut con, "never written"));
}

#[test]
fn every_error_leaves_the_keyspace_as_it_was() {
    let server = Server::start();
    let mut con = server.connect();
    run_all(&mut con, &["SET text 1", "RPUSH list x"]);
    acquire(&mut con, "k", &["1", "60", "ID", "a"]).unwrap();
    let long_id = "x".repeat(257);
    let cases: &[(&str, &[&str], &str)] = &[
        ("RATELIMIT.ACQUIRE", &["k", "1"], "ERR wrong number of arguments for 'ratelimit.acquire' command"),
        ("RATELIMIT.ACQUIRE", &["k", "0", "60"], "ERR limit must be an integer >= 1"),
        ("RATELIMIT.ACQUIRE", &["k", "1", "0"], "ERR lease must be an integer >= 1"),
        ("RATELIMIT.ACQUIRE", &["k", "1", "9223372036854775"], "ERR lease is too large"),
        ("RATELIMIT.ACQUIRE", &["k", "1", "60", "ID"], "ERR syntax error: ID needs a value"),
        ("RATELIMIT.ACQUIRE", &["k", "1", "60", "ID", ""], "ERR ID must be 1 to 256 bytes"),
        ("RATELIMIT.ACQUIRE", &["k", "1", "60", "ID", &long_id], "ERR ID must be 1 to 256 bytes"),
        ("RATELIMIT.ACQUIRE", &["k", "1", "60", "MS", "MS"], "ERR syntax error: MS given more than once"),
        ("RATELIMIT.ACQUIRE", &["k", "1", "60", "COST", "1"], "ERR syntax error: unknown option (expected MS or ID)"),
        (
            "RATELIMIT.ACQUIRE",
            &["text", "1", "60", "ID", "a"],
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        ("RATELIMIT.RELEASE", &["k"], "ERR wrong number of arguments for 'ratelimit.release' command"),
        ("RATELIMIT.RELEASE", &["k", ""], "ERR ID must be 1 to 256 bytes"),
        ("RATELIMIT.RELEASE", &["list", "a"], "WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("RATELIMIT.RENEW", &["k", "a"], "ERR wrong number of arguments for 'ratelimit.renew' command"),
        ("RATELIMIT.RENEW", &["k", "a", "x"], "ERR lease must be an integer >= 1"),
        ("RATELIMIT.RENEW", &["k", "a", "60", "ID", "b"], "ERR syntax error: unknown option (expected MS)"),
        ("RATELIMIT.RENEW", &["text", "a", "60"], "WRONGTYPE Operation against a key holding the wrong kind of value"),
    ];
    for (command, args, expected) in cases {
        let before: Vec<_> = ["k", "text", "list"].iter().map(|k| snapshot(&mut con, k)).collect();
        let error = error_of(limiter(command).arg(*args).query::<Value>(&mut con));
        assert!(error.starts_with(expected), "{command} {args:?}: {error}");
        let after: Vec<_> = ["k", "text", "list"].iter().map(|k| snapshot(&mut con, k)).collect();
        assert_eq!(before, after, "{command} {args:?} changed the keyspace");
    }
}

#[test]
fn in_multi_and_in_scripts_it_is_one_atomic_step() {
    let server = Server::start();
    let mut con = server.connect();
    let (first, second): (Vec<Value>, Vec<Value>) = redis::pipe()
        .atomic()
        .add_command(limiter("RATELIMIT.ACQUIRE").arg(&["k", "1", "60", "ID", "a"]).clone())
        .add_command(limiter("RATELIMIT.ACQUIRE").arg(&["k", "1", "60", "ID", "b"]).clone())
        .query(&mut con)
        .unwrap();
    assert_eq!((&first[0], &second[0]), (&Value::Int(1), &Value::Int(0)));
    if common::module_only("FCALL cannot be called from a script") {
        return;
    }
    let released: i64 = redis::cmd("EVAL")
        .arg("return redis.call('RATELIMIT.RELEASE', KEYS[1], ARGV[1])")
        .arg(1)
        .arg("k")
        .arg("a")
        .query(&mut con)
        .unwrap();
    assert_eq!(released, 1);
}

#[test]
fn over_maxmemory_only_new_sets_are_refused() {
    if common::module_only("over maxmemory FCALL refuses every write; the module only new keys") {
        return;
    }
    let server = Server::start();
    let mut con = server.connect();
    acquire(&mut con, "existing", &["5", "60", "ID", "a"]).unwrap();
    run_all(&mut con, &["CONFIG SET maxmemory 1"]);
    let refused = error_of(acquire(&mut con, "new", &["5", "60", "ID", "a"]));
    let more = acquire(&mut con, "existing", &["5", "60", "ID", "b"]);
    let released = release(&mut con, "existing", "a");
    run_all(&mut con, &["CONFIG SET maxmemory 0"]);
    assert!(refused.starts_with("OOM "), "{refused}");
    assert_eq!(more.unwrap().0[..2], [1, 2]);
    assert_eq!(released.unwrap(), 1);
}

/// The race: clients acquire, hold a little, release (or let the lease run out), while a sampler
/// counts the live leases of every key; no sample may show more than the limit.
#[test]
fn many_clients_never_hold_more_than_the_limit() {
    let server = Server::start();
    // 10 s against the module; the library runs the same race shorter (the same rules, in Lua).
    let seconds = if common::library() { 3 } else { 10 };
    let (limit, keys, clients) = (3, 5, 50);
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..clients)
        .map(|c| {
            let (stop, mut con) = (stop.clone(), server.connect());
            thread::spawn(move || {
                let (mut acquired, mut released, mut abandoned) = (0, 0, 0);
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let key = format!("race:{}", (c + i) % keys);
                    let id = format!("{c}-{i}");
                    let (reply, _) = acquire(&mut con, &key, &[&limit.to_string(), "2000", "MS", "ID", &id]).unwrap();
                    if reply[0] == 0 {
                        continue;
                    }
                    acquired += 1;
                    // One holder in 50 "crashes": its lease runs out by itself.
                    if i % 50 == 0 {
                        abandoned += 1;
                        continue;
                    }
                    sleep(Duration::from_millis(1));
                    // 0 only if this thread stalled past its lease (a busy machine): it expired.
                    released += release(&mut con, &key, &id).unwrap();
                }
                (acquired, released, abandoned)
            })
        })
        .collect();
    let mut sampler = server.connect();
    let (mut samples, mut most) = (0, 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(seconds);
    while std::time::Instant::now() < deadline {
        for k in 0..keys {
            // Live leases at the server's own instant.
            let live: i64 = redis::cmd("EVAL")
                .arg("local t = redis.call('TIME') return redis.call('ZCOUNT', KEYS[1], '(' .. (t[1] * 1000 + math.floor(t[2] / 1000)), '+inf')")
                .arg(1)
                .arg(format!("race:{k}"))
                .query(&mut sampler)
                .unwrap();
            most = most.max(live);
            samples += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (mut acquired, mut released, mut abandoned) = (0, 0, 0);
    for w in workers {
        let (a, r, x) = w.join().unwrap();
        (acquired, released, abandoned) = (acquired + a, released + r, abandoned + x);
    }
    let expired = acquired - released;
    eprintln!(
        "{samples} samples, at most {most} live leases on a key (limit {limit}); {acquired} acquired, {released} \
         released, {expired} expired ({abandoned} abandoned on purpose)"
    );
    assert!(most <= limit, "a key held {most} live leases, limit {limit}");
    assert!(samples > 50 && acquired > 100, "the race should run: {samples} samples, {acquired} acquired");
    // The abandoned ones expire: the keys go with their last lease.
    let mut con = server.connect();
    wait_for("every lease to end", Duration::from_secs(10), || {
        (0..keys).all(|k| redis::cmd("EXISTS").arg(format!("race:{k}")).query::<i64>(&mut con).unwrap() == 0)
    });
}

#[test]
fn a_holder_killed_mid_lease_gives_its_permit_back_when_the_lease_ends_and_not_before() {
    let server = Server::start();
    let mut con = server.connect();
    // Another process takes the one permit for 1.5 s, then is killed with SIGKILL.
    let cli = common::server_binary().replace("-server", "-cli");
    let cli = if std::path::Path::new(&cli).exists() { cli } else { "redis-cli".to_string() };
    let port = server.port.to_string();
    let mut holder = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{cli} -p {port} {} crash 1 1500 MS ID holder >/dev/null && exec sleep 60",
            if common::library() { "FCALL ratelimit_acquire 1" } else { "RATELIMIT.ACQUIRE" }
        ))
        // Nothing of the test's own output is held by the holder: a runner reading it sees its end
        // when the test ends, not a minute later (`exec`: the kill reaches the sleep).
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the holder's lease", Duration::from_secs(10), || leases(&mut con, "crash").len() == 1);
    holder.kill().unwrap();
    holder.wait().unwrap();
    let ends = leases(&mut con, "crash")[0].1;
    // Before its end: denied, however often asked; a retry with its id counts once.
    while server_ms(&mut con) < ends - 50 {
        let (reply, _) = acquire(&mut con, "crash", &["1", "60", "ID", "other"]).unwrap();
        assert_eq!(reply[0], 0, "a permit came back before its lease ended");
        sleep(Duration::from_millis(100));
    }
    wait_for("the lease's end", Duration::from_secs(10), || server_ms(&mut con) >= ends);
    let (reply, id) = acquire(&mut con, "crash", &["1", "60", "ID", "other"]).unwrap();
    assert_eq!((reply[0], id.as_deref()), (1, Some("other")));
}
