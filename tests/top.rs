//! RATELIMIT.TOP: which keys this node denies most and admits the most cost for, from a bounded
//! summary fed by every limiter command; accurate within its stated bounds, filtered by ACL,
//! consistent across RESET and interval boundaries, flat in memory.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ratelimit_testkit as common;

use common::{error_of, hit, info_field, run_all, top, top_entries, Config, Rng, Server, TopEntry};
use redis::{Connection, Value};

fn server_with(args: &[&str]) -> Server {
    Server::with(Config { args, ..Config::default() })
}

/// A denied call that writes nothing (COST above the limit).
fn deny(con: &mut Connection, key: &str) {
    assert_eq!(hit(con, key, &["1", "60", "COST", "2"]).unwrap()[0], 0);
}

fn top_memory(con: &mut Connection) -> i64 {
    info_field(con, "ratelimit", "ratelimit_top_memory_bytes").unwrap().parse().unwrap()
}

fn keys_and_counts(entries: &[TopEntry]) -> Vec<(&str, i64, i64)> {
    entries.iter().map(|e| (e.key.as_str(), e.count, e.error)).collect()
}

/// Zipf's law with exponent 1 over `n` keys: key `i` (from 1) drawn with weight 1/i.
struct Zipf(Vec<f64>);

impl Zipf {
    fn new(n: usize) -> Zipf {
        let mut total = 0.0;
        Zipf(
            (1..=n)
                .map(|i| {
                    total += 1.0 / i as f64;
                    total
                })
                .collect(),
        )
    }

    fn sample(&self, rng: &mut Rng) -> usize {
        let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * self.0[self.0.len() - 1];
        self.0.partition_point(|&c| c < u) + 1
    }
}

#[test]
fn the_most_denied_keys_of_a_zipf_load_come_back_in_order_within_their_bounds() {
    // 64 entries for about a thousand denied keys: the summary has to evict.
    let server = server_with(&["--ratelimit.top-keys", "64", "--ratelimit.top-interval", "86400"]);
    let mut con = server.connect();
    let zipf = Zipf::new(100_000);
    let mut rng = Rng::new(20_261_201);
    let (mut denied, mut admitted) = (HashMap::<String, i64>::new(), HashMap::<String, i64>::new());
    for _ in 0..30 {
        let keys: Vec<String> = (0..10_000).map(|_| format!("z:{}", zipf.sample(&mut rng))).collect();
        let mut pipe = redis::pipe();
        for key in &keys {
            pipe.cmd("RATELIMIT.HIT").arg(key).arg(20).arg(3600);
        }
        let replies: Vec<Vec<i64>> = pipe.query(&mut con).unwrap();
        for (key, reply) in keys.into_iter().zip(replies) {
            *if reply[0] == 1 { &mut admitted } else { &mut denied }.entry(key).or_default() += 1;
        }
    }
    let mut truth: Vec<(&String, i64)> = denied.iter().map(|(k, &n)| (k, n)).collect();
    truth.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    assert!(truth.len() > 640, "the load denies far more keys than the summary holds: {}", truth.len());
    assert!(truth[..11].windows(2).all(|w| w[0].1 > w[1].1), "the fixture's top 11 are distinct: {truth:?}");

    let answer = top(&mut con, &["DENIED", "COUNT", "10"]).unwrap();
    eprintln!("rank | key | denied (client's count) | count | error");
    for (rank, (e, (key, t))) in answer.iter().zip(&truth).enumerate() {
        eprintln!(
            "{} | {} | {} | {} | {}  (truth's #{}: {key} {t})",
            rank + 1,
            e.key,
            denied[&e.key],
            e.count,
            e.error,
            rank + 1
        );
    }
    let keys: Vec<&str> = answer.iter().map(|e| e.key.as_str()).collect();
    let true_keys: Vec<&str> = truth[..10].iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, true_keys, "the true top 10, in order");
    for e in &answer {
        let t = denied[&e.key];
        assert!(e.count - e.error <= t && t <= e.count, "{e:?}: truth {t}");
    }
    // Admitted cost (one per admitted hit): every answer holds the truth within its bound.
    let answer = top(&mut con, &["ADMITTED", "COUNT", "64"]).unwrap();
    assert!(!answer.is_empty());
    for e in &answer {
        let t = admitted.get(&e.key).copied().unwrap_or(0);
        assert!(e.count - e.error <= t && t <= e.count, "{e:?}: truth {t}");
    }
}

#[test]
fn every_limiter_command_counts_and_only_its_decisions_do() {
    let server = Server::with(Config { module_args: &["CL.THROTTLE"], ..Config::default() });
    let mut con = server.connect();
    run_all(
        &mut con,
        &[
            "RATELIMIT.HIT h 1 60",
            "RATELIMIT.HIT h 1 60",
            "RATELIMIT.HIT h 5 60 COST 3",
            "RATELIMIT.PEEK h 1",
            "RATELIMIT.HITALL 2 a1 a2 1 60 5 60",
            // Denied by a1's limit only: a2 does not count a denial.
            "RATELIMIT.HITALL 2 a1 a2 1 60 5 60",
            "RATELIMIT.SLIDE s 1 60",
            "RATELIMIT.SLIDE s 1 60",
            "RATELIMIT.SLIDE s 1 60 PEEK",
            "RATELIMIT.GCRA g 0 1 60",
            "RATELIMIT.GCRA g 0 1 60",
            "CL.THROTTLE c 0 1 60",
            "CL.THROTTLE c 0 1 60",
            "CL.THROTTLE c 0 1 60 0",
            "RATELIMIT.ACQUIRE q 1 30 ID one",
            "RATELIMIT.ACQUIRE q 1 30 ID two",
            "RATELIMIT.RELEASE q one",
        ],
    );
    let denied = top(&mut con, &[]).unwrap();
    let ones = |keys: &[&'static str]| keys.iter().map(|&k| (k, 1, 0)).collect::<Vec<_>>();
    assert_eq!(keys_and_counts(&denied), ones(&["a1", "c", "g", "h", "q", "s"]), "ties by name");
    let admitted = top(&mut con, &["ADMITTED", "COUNT", "100"]).unwrap();
    let mut expected = vec![("h", 4, 0)];
    expected.extend(ones(&["a1", "a2", "c", "g", "q", "s"]));
    assert_eq!(keys_and_counts(&admitted), expected, "HIT's cost 1 + 3");
    for command in ["hit", "hitall", "slide", "gcra", "cl_throttle", "acquire"] {
        let want = if command == "hit" {
            "admitted=2,denied=1,shadow_denied=0"
        } else {
            "admitted=1,denied=1,shadow_denied=0"
        };
        assert_eq!(info_field(&mut con, "ratelimit", &format!("ratelimit_decisions_{command}")).unwrap(), want);
    }
}

#[test]
fn a_reservation_counts_what_was_used_when_settled_and_a_give_back_nowhere() {
    let server = Server::start();
    let mut con = server.connect();
    let (_, reservation) = common::reserve(&mut con, "RATELIMIT.HIT", "r", &["100", "60", "COST", "40"]).unwrap();
    run_all(&mut con, &["RATELIMIT.HIT g 100 60 COST 5", "RATELIMIT.HIT g 100 60 COST -5"]);
    let admitted = |con: &mut Connection| {
        let entries = top(con, &["ADMITTED"]).unwrap();
        keys_and_counts(&entries).into_iter().map(|(k, c, e)| (k.to_string(), c, e)).collect::<Vec<_>>()
    };
    assert_eq!(admitted(&mut con), [("g".to_string(), 5, 0)], "reserved, not yet counted; the give-back not at all");
    common::settle(&mut con, "r", &reservation.unwrap(), 7).unwrap();
    assert_eq!(admitted(&mut con), [("r".to_string(), 7, 0), ("g".to_string(), 5, 0)]);
    assert_eq!(
        info_field(&mut con, "ratelimit", "ratelimit_decisions_hit").unwrap(),
        "admitted=2,denied=0,shadow_denied=0"
    );
}

#[test]
fn answers_stay_consistent_across_reset_and_interval_boundaries() {
    let server = server_with(&["--ratelimit.top-interval", "1"]);
    let mut con = server.connect();
    let first_sent = Instant::now();
    (0..5).for_each(|_| deny(&mut con, "b:1"));
    let last_done = Instant::now();
    // Covered: at least the last interval (1 s), at most two.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let asked = Instant::now();
        let answer = top(&mut con, &[]).unwrap();
        let answered = Instant::now();
        if answered - first_sent < Duration::from_millis(1_000) {
            assert_eq!(keys_and_counts(&answer), [("b:1", 5, 0)], "within an interval of the calls");
        } else if asked - last_done >= Duration::from_millis(2_000) {
            assert_eq!(answer, [], "two intervals after the calls");
            break;
        } else if let Some(e) = answer.first() {
            assert_eq!(keys_and_counts(&answer), [("b:1", e.count, 0)]);
            assert!(e.count <= 5);
        }
        assert!(Instant::now() < deadline, "b:1 still answered 10 s after its calls: {answer:?}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // RESET answers what was there, then starts afresh: both views, both intervals.
    (0..3).for_each(|_| deny(&mut con, "r:1"));
    hit(&mut con, "r:2", &["10", "60"]).unwrap();
    let before = top(&mut con, &["RESET"]).unwrap();
    assert_eq!(keys_and_counts(&before)[0].0, "r:1");
    assert_eq!(top(&mut con, &[]).unwrap(), []);
    assert_eq!(top(&mut con, &["ADMITTED"]).unwrap(), []);
    deny(&mut con, "r:1");
    let after = top(&mut con, &[]).unwrap();
    assert_eq!(keys_and_counts(&after)[0], ("r:1", 1, 0), "only what came after RESET");
}

#[test]
fn a_restricted_user_sees_only_the_keys_it_may_read_and_cannot_reset() {
    let server = server_with(&[]);
    let mut admin = server.connect();
    for key in ["app:1", "app:2", "other:1", "other:2"] {
        (0..2).for_each(|_| {
            hit(&mut admin, key, &["1", "60"]).unwrap();
        });
    }
    run_all(&mut admin, &["ACL SETUSER app on >pw ~app:* +@all -@admin", "ACL SETUSER blind on >pw +ratelimit.top"]);
    let mut app = server.connect();
    run_all(&mut app, &["AUTH app pw"]);
    let seen: Vec<String> = top(&mut app, &["COUNT", "100"]).unwrap().into_iter().map(|e| e.key).collect();
    assert_eq!(seen, ["app:1", "app:2"]);
    let seen: Vec<String> = top(&mut app, &["ADMITTED", "COUNT", "1"]).unwrap().into_iter().map(|e| e.key).collect();
    assert_eq!(seen, ["app:1"], "COUNT counts what the caller may see");
    let error = error_of(top(&mut app, &["RESET"]));
    assert!(error.starts_with("NOPERM") && error.contains("CONFIG RESETSTAT"), "{error}");
    assert_eq!(top(&mut admin, &[]).unwrap().len(), 4, "a refused RESET changes nothing");

    let mut blind = server.connect();
    run_all(&mut blind, &["AUTH blind pw"]);
    assert_eq!(top(&mut blind, &[]).unwrap(), []);
    assert_eq!(top(&mut admin, &["RESET"]).unwrap().len(), 4);
    assert_eq!(top(&mut admin, &[]).unwrap(), []);
}

#[test]
fn resp3_gets_a_map_per_entry() {
    let server = server_with(&[]);
    let client = redis::Client::open(format!("{}?protocol=resp3", server.url())).unwrap();
    let mut con = client.get_connection().unwrap();
    (0..3).for_each(|_| {
        hit(&mut con, "k", &["1", "60"]).unwrap();
    });
    let reply: Value = redis::cmd("RATELIMIT.TOP").query(&mut con).unwrap();
    let Value::Array(entries) = &reply else { panic!("{reply:?}") };
    assert!(matches!(entries[0], Value::Map(_)), "{reply:?}");
    assert_eq!(keys_and_counts(&top_entries(reply)), [("k", 2, 0)]);
}

#[test]
fn the_top_keys_config_sizes_the_summary_and_zero_turns_it_off() {
    // The server's clock stands mid-interval: an interval that ended between the calls would
    // split them between two summaries, whose answer then differs.
    let dir = common::TempDir::new();
    let clock = common::TestClock::at(&dir.0, 1_764_590_430_000);
    let server = Server::with(Config { clock: Some(&clock), ..Config::default() });
    let mut con = server.connect();
    deny(&mut con, "before");
    assert!(top_memory(&mut con) > 0);

    run_all(&mut con, &["CONFIG SET ratelimit.top-keys 0"]);
    deny(&mut con, "off");
    assert_eq!(top(&mut con, &[]).unwrap(), [], "off, and a new size starts afresh");
    assert_eq!(top_memory(&mut con), 0);

    // Two entries: c waits in its bucket until it passes the least count (b's, 2), then takes
    // b's place with its bucket's bound (2) as its error.
    run_all(&mut con, &["CONFIG SET ratelimit.top-keys 2"]);
    for key in ["a", "a", "a", "b", "b", "c", "c", "c"] {
        deny(&mut con, key);
    }
    assert_eq!(keys_and_counts(&top(&mut con, &[]).unwrap()), [("a", 3, 0), ("c", 3, 2)]);

    // Names over 1 KiB are counted in INFO, not tracked.
    let long = "x".repeat(1025);
    deny(&mut con, &long);
    assert_eq!(info_field(&mut con, "ratelimit", "ratelimit_top_untracked").unwrap(), "1");
    assert!(top(&mut con, &[]).unwrap().iter().all(|e| e.key != long));
}

#[test]
fn memory_stays_flat_over_a_million_decisions_on_distinct_keys() {
    let server = server_with(&[]);
    let mut con = server.connect();
    let mut seen = Vec::new();
    for batch in 0..100u64 {
        // Denied without writing (COST above the limit): the keyspace stays empty.
        let mut pipe = redis::pipe();
        for i in 0..10_000 {
            pipe.cmd("RATELIMIT.HIT")
                .arg(format!("flat:{:012}", batch * 10_000 + i))
                .arg(1)
                .arg(60)
                .arg("COST")
                .arg(2)
                .ignore();
        }
        pipe.query::<()>(&mut con).unwrap();
        if batch % 10 == 9 {
            seen.push(top_memory(&mut con));
        }
    }
    eprintln!("top_memory_bytes every 100,000 decisions: {seen:?}");
    assert!(seen.iter().all(|&m| m == seen[0]), "{seen:?}");
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(dbsize, 0);
}

#[test]
fn the_terminal_view_shows_both_views() {
    let server = server_with(&[]);
    let mut con = server.connect();
    (0..3).for_each(|_| {
        hit(&mut con, "rl:noisy", &["1", "60"]).unwrap();
    });
    hit(&mut con, "rl:quiet", &["5", "60", "COST", "4"]).unwrap();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/top.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .args(["--port", &server.port.to_string(), "--once"])
        .env("COLUMNS", "120")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("admitted 2 so far  denied 2 so far"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let row = lines.iter().find(|l| l.starts_with(" 1 ")).unwrap_or_else(|| panic!("{text}"));
    let (denied, admitted) = row.split_once(" | ").unwrap();
    assert_eq!(denied.split_whitespace().collect::<Vec<_>>(), ["1", "rl:noisy", "2"], "{text}");
    assert_eq!(admitted.split_whitespace().collect::<Vec<_>>(), ["1", "rl:quiet", "4"], "{text}");
}

#[test]
fn bad_arguments_get_errors() {
    let server = server_with(&[]);
    let mut con = server.connect();
    for (args, needle) in [
        (&["DENIED", "ADMITTED"][..], "DENIED and ADMITTED cannot be given together"),
        (&["COUNT", "0"][..], "COUNT must be an integer >= 1"),
        (&["COUNT", "x"][..], "COUNT must be an integer >= 1"),
        (&["COUNT"][..], "COUNT needs a value"),
        (&["RESET", "reset"][..], "RESET given more than once"),
        (&["LIMIT", "3"][..], "unknown option (expected DENIED, ADMITTED, SHADOWED, COUNT or RESET)"),
    ] {
        let error = error_of(top(&mut con, args));
        assert!(error.starts_with("ERR ") && error.contains(needle), "{args:?}: {error}");
    }
}
