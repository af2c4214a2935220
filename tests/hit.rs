//! RATELIMIT.HIT against a real server: the window rules, the reply, options and every error.

use ratelimit_testkit as common;

use std::thread::sleep;
use std::time::Duration;

use common::{assert_within, error_of, get, hit, pttl, snapshot, timed, Server};

#[test]
fn first_hit_creates_a_counter_with_the_window() {
    let server = Server::start();
    let mut con = server.connect();
    let ((reply, ttl), ms) = timed(|| (hit(&mut con, "user:1", &["10", "60"]).unwrap(), pttl(&mut con, "user:1")));
    // One clock for the whole command: a new counter's reset is exactly its window.
    assert_eq!(reply, [1, 1, 9, 60_000]);
    assert_eq!(get(&mut con, "user:1").as_deref(), Some("1"));
    assert_within(ttl, 60_000 - ms, 60_000, "PTTL after the hit");
}

#[test]
fn counts_up_to_the_limit_then_denies_without_counting() {
    let server = Server::start();
    let mut con = server.connect();
    let (mut replies, ms) = timed(|| (0..4).map(|_| hit(&mut con, "k", &["3", "60"]).unwrap()).collect::<Vec<_>>());
    let ((last, ttl), last_ms) = timed(|| (hit(&mut con, "k", &["3", "60"]).unwrap(), pttl(&mut con, "k")));
    replies.push(last);
    let summary: Vec<[i64; 3]> = replies.iter().map(|r| [r[0], r[1], r[2]]).collect();
    assert_eq!(summary, [[1, 1, 2], [1, 2, 1], [1, 3, 0], [0, 3, 0], [0, 3, 0]]);
    assert_eq!(get(&mut con, "k").as_deref(), Some("3"));
    // reset_ms is the key's PTTL and only goes down.
    assert_eq!(replies[0][3], 60_000);
    for pair in replies.windows(2) {
        assert!(pair[1][3] <= pair[0][3]);
    }
    assert_within(replies[3][3], 60_000 - ms, 60_000, "the fourth reset");
    assert_within(ttl, replies[4][3] - last_ms, replies[4][3], "PTTL after the last hit");
}

#[test]
fn a_running_window_is_never_extended() {
    let server = Server::start();
    let mut con = server.connect();
    hit(&mut con, "k", &["100", "60"]).unwrap();
    let (_, _, expiry) = snapshot(&mut con, "k");
    for _ in 0..3 {
        sleep(Duration::from_millis(15));
        hit(&mut con, "k", &["100", "60"]).unwrap();
        hit(&mut con, "k", &["1", "60"]).unwrap(); // denied
        assert_eq!(snapshot(&mut con, "k").2, expiry);
    }
    assert_eq!(get(&mut con, "k").as_deref(), Some("4"));
}

#[test]
fn cost_counts_as_several_hits() {
    let server = Server::start();
    let mut con = server.connect();
    assert_eq!(hit(&mut con, "k", &["10", "60", "COST", "4"]).unwrap()[..3], [1, 4, 6]);
    assert_eq!(hit(&mut con, "k", &["10", "60", "COST", "4"]).unwrap()[..3], [1, 8, 2]);
    assert_eq!(hit(&mut con, "k", &["10", "60", "COST", "4"]).unwrap()[..3], [0, 8, 2]);
    assert_eq!(hit(&mut con, "k", &["10", "60", "COST", "2"]).unwrap()[..3], [1, 10, 0]);
}

#[test]
fn partial_grants_what_is_left_at_least_one() {
    let server = Server::start();
    let mut con = server.connect();
    let partial = ["10", "60", "COST", "4", "PARTIAL"];
    // All there: as without PARTIAL, the hits granted last.
    assert_eq!(hit(&mut con, "k", &partial).unwrap(), [1, 4, 6, 60_000, 4]);
    assert_eq!(hit(&mut con, "k", &partial).unwrap()[..3], [1, 8, 2]);
    // Fewer: those, the count at the limit.
    let fewer = hit(&mut con, "k", &partial).unwrap();
    assert_eq!((fewer[0], fewer[1], fewer[2], fewer[4]), (1, 10, 0, 2));
    // None: denied, nothing counted.
    let none = hit(&mut con, "k", &partial).unwrap();
    assert_eq!((none[0], none[1], none[2], none[4]), (0, 10, 0, 0));
    assert_eq!(get(&mut con, "k").as_deref(), Some("10"));
    // A cost above the limit on a new counter: the limit, in a window of its own.
    assert_eq!(hit(&mut con, "new", &["3", "60", "COST", "5", "PARTIAL"]).unwrap(), [1, 3, 0, 60_000, 3]);
    // On an aligned window: it ends at a multiple of the window, as without PARTIAL.
    let aligned = hit(&mut con, "a", &["10", "60", "ALIGN", "COST", "30", "PARTIAL"]).unwrap();
    assert_eq!((aligned[0], aligned[1], aligned[4]), (1, 10, 10));
    let expiry: i64 = redis::cmd("PEXPIRETIME").arg("a").query(&mut con).unwrap();
    assert_eq!(expiry % 60_000, 0);
}

#[test]
fn cost_above_the_limit_is_denied_and_creates_nothing() {
    let server = Server::start();
    let mut con = server.connect();
    assert_eq!(hit(&mut con, "k", &["3", "60", "COST", "4"]).unwrap(), [0, 0, 3, 0]);
    let exists: i64 = redis::cmd("EXISTS").arg("k").query(&mut con).unwrap();
    assert_eq!(exists, 0);
}

#[test]
fn ms_windows_end_and_a_new_window_starts() {
    let server = Server::start();
    let mut con = server.connect();
    let ((first, ttl), ms) = timed(|| (hit(&mut con, "k", &["2", "300", "MS"]).unwrap(), pttl(&mut con, "k")));
    assert_eq!(first[3], 300);
    assert_within(ttl, 300 - ms, 300, "PTTL");
    hit(&mut con, "k", &["2", "300", "MS"]).unwrap();
    assert_eq!(hit(&mut con, "k", &["2", "300", "MS"]).unwrap()[0], 0);
    // Longer than the window, which began before the sleep.
    sleep(Duration::from_millis(350));
    assert_eq!(hit(&mut con, "k", &["2", "300", "MS"]).unwrap()[..3], [1, 1, 1]);
}

#[test]
fn options_are_case_insensitive_in_any_order() {
    let server = Server::start();
    let mut con = server.connect();
    for (key, args) in [
        ("a", &["5", "500", "ms", "cost", "2"][..]),
        ("b", &["5", "500", "CoSt", "2", "Ms"][..]),
        ("c", &["5", "500", "MS", "COST", "2"][..]),
    ] {
        let reply = hit(&mut con, key, args).unwrap();
        assert_eq!(reply[..3], [1, 2, 3], "{args:?}");
        assert_eq!(reply[3], 500, "{args:?}: window in ms");
    }
}

/// What the old `GET; SET EX if missing; INCR` code leaves behind after its race: a counter
/// with no TTL.
fn leak(con: &mut redis::Connection, key: &str, count: i64) {
    let _: () = redis::cmd("SET").arg(key).arg(count).query(con).unwrap();
    assert_eq!(pttl(con, key), -1);
}

#[test]
fn a_leaked_counter_heals_when_admitted() {
    let server = Server::start();
    let mut con = server.connect();
    leak(&mut con, "k", 2);
    let ((reply, ttl), ms) = timed(|| (hit(&mut con, "k", &["10", "30"]).unwrap(), pttl(&mut con, "k")));
    assert_eq!(reply, [1, 3, 7, 30_000], "a window from now");
    assert_within(ttl, 30_000 - ms, 30_000, "PTTL");
}

#[test]
fn a_leaked_counter_heals_when_denied() {
    let server = Server::start();
    let mut con = server.connect();
    leak(&mut con, "k", 5_000);
    let ((reply, ttl), ms) = timed(|| (hit(&mut con, "k", &["10", "30"]).unwrap(), pttl(&mut con, "k")));
    assert_eq!(reply, [0, 5_000, 0, 30_000], "a window from now");
    assert_within(ttl, 30_000 - ms, 30_000, "PTTL");
    assert_eq!(get(&mut con, "k").as_deref(), Some("5000"));
}

#[test]
fn counters_made_by_incr_are_adopted() {
    let server = Server::start();
    let mut con = server.connect();
    let _: i64 = redis::cmd("INCR").arg("k").query(&mut con).unwrap();
    let _: i64 = redis::cmd("EXPIRE").arg("k").arg(100).query(&mut con).unwrap();
    let expiry = snapshot(&mut con, "k").2;
    assert_eq!(hit(&mut con, "k", &["10", "60"]).unwrap()[..3], [1, 2, 8]);
    assert_eq!(snapshot(&mut con, "k").2, expiry, "the INCR window keeps running");
    let n: i64 = redis::cmd("INCR").arg("k").query(&mut con).unwrap();
    assert_eq!(n, 3, "and INCR still reads what HIT wrote");
}

#[test]
fn a_logically_expired_key_counts_as_missing() {
    // The clock stands while the window fills (on a busy machine 50 ms could pass between hits),
    // then moves past its end.
    let dir = common::TempDir::new();
    let (clock, server) = at_the_clock(&dir, FEBRUARY_1ST);
    let mut con = server.connect();
    let _: () = redis::cmd("DEBUG").arg("SET-ACTIVE-EXPIRE").arg(0).query(&mut con).unwrap();
    for _ in 0..3 {
        hit(&mut con, "k", &["3", "50", "MS"]).unwrap();
    }
    assert_eq!(hit(&mut con, "k", &["3", "50", "MS"]).unwrap()[0], 0);
    clock.move_to(&mut con, FEBRUARY_1ST + 120);
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(dbsize, 1, "the expired key is still stored, not yet reaped");
    let reply = hit(&mut con, "k", &["3", "50", "MS"]).unwrap();
    assert_eq!(reply, [1, 1, 2, 50], "a new window");
}

#[test]
fn arithmetic_near_the_integer_limits_does_not_wrap() {
    if common::module_only("counters near 2^63 (the library answers its 2^53 error)") {
        return;
    }
    let server = Server::start();
    let mut con = server.connect();
    let max = i64::MAX.to_string();
    leak(&mut con, "full", i64::MAX);
    assert_eq!(hit(&mut con, "full", &["10", "60"]).unwrap()[..3], [0, i64::MAX, 0]);
    assert_eq!(hit(&mut con, "full", &[&max, "60", "COST", &max]).unwrap()[..3], [0, i64::MAX, 0]);

    assert_eq!(hit(&mut con, "big", &[&max, "60", "COST", &max]).unwrap()[..3], [1, i64::MAX, 0]);
    assert_eq!(hit(&mut con, "big", &[&max, "60"]).unwrap()[..3], [0, i64::MAX, 0]);

    leak(&mut con, "negative", -5);
    assert_eq!(hit(&mut con, "negative", &[&max, "60"]).unwrap()[..3], [1, -4, i64::MAX]);
    assert_eq!(get(&mut con, "negative").as_deref(), Some("-4"));
}

#[test]
fn wrong_types_and_non_integers_are_refused_and_left_alone() {
    let server = Server::start();
    let mut con = server.connect();
    let setup: &[&[&str]] = &[
        &["RPUSH", "list", "a"],
        &["HSET", "hash", "f", "1"],
        &["SADD", "set", "1"],
        &["ZADD", "zset", "1", "a"],
        &["SET", "text", "abc"],
        &["SET", "float", "1.5"],
        &["SET", "empty", ""],
        &["SET", "padded", "01"],
        &["SET", "spaced", " 1"],
        &["SET", "long", "123456789012345678901234567890"],
        &["SET", "overflow", "9223372036854775808"],
        &["SET", "with-ttl", "x", "EX", "100"],
    ];
    for cmd in setup {
        let _: redis::Value = redis::cmd(cmd[0]).arg(&cmd[1..]).query(&mut con).unwrap();
    }
    for cmd in setup {
        let key = cmd[1];
        let before = snapshot(&mut con, key);
        let error = error_of(hit(&mut con, key, &["10", "60"]));
        let expected = if cmd[0] == "SET" {
            "ERR value is not an integer or out of range"
        } else {
            "WRONGTYPE Operation against a key holding the wrong kind of value"
        };
        assert_eq!(error, expected, "{key}");
        assert_eq!(snapshot(&mut con, key), before, "{key} changed");
    }
}

#[test]
fn bad_arguments_are_refused_and_change_nothing() {
    let server = Server::start();
    let mut con = server.connect();
    hit(&mut con, "live", &["10", "60"]).unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&[], "wrong number of arguments"),
        (&["10"], "wrong number of arguments"),
        (&["0", "60"], "limit"),
        (&["-1", "60"], "limit"),
        (&["ten", "60"], "limit"),
        (&["1.5", "60"], "limit"),
        (&["", "60"], "limit"),
        (&["+5", "60"], "limit"),
        (&["99999999999999999999", "60"], "limit"),
        (&["10", "0"], "window"),
        (&["10", "-60"], "window"),
        (&["10", "6e1"], "window"),
        (&["10", "9223372036854775807"], "window is too large"),
        (&["10", "9223372036854775"], "window is too large"),
        (&["10", "9223372036854775807", "MS"], "window is too large"),
        (&["10", "60", "COST"], "COST needs a value"),
        (&["10", "60", "COST", "0"], "COST"),
        (&["10", "60", "COST", "-0"], "COST must be a nonzero integer"),
        (&["10", "60", "COST", "-3", "RESERVE"], "RESERVE needs COST >= 1"),
        (&["10", "60", "RESERVE", "RESERVE"], "RESERVE given more than once"),
        (&["10", "60", "COST", "-2", "PARTIAL"], "PARTIAL needs COST >= 1"),
        (&["10", "60", "PARTIAL", "partial"], "PARTIAL given more than once"),
        (&["10", "60", "COST", "x"], "COST"),
        (&["10", "60", "COST", "1", "COST", "1"], "COST given more than once"),
        (&["10", "60", "MS", "MS"], "MS given more than once"),
        (&["10", "60", "SECONDS"], "unknown option"),
        (&["10", "60", "MS", "extra"], "unknown option"),
        (&["10", "60", "\u{0}\u{1}\r\n"], "unknown option"),
    ];
    for (args, needle) in cases {
        for key in ["live", "absent"] {
            let before = snapshot(&mut con, key);
            let error = error_of(hit(&mut con, key, args));
            assert!(error.starts_with("ERR "), "{args:?}: {error}");
            assert!(error.contains(needle), "{args:?}: {error} lacks {needle:?}");
            assert_eq!(snapshot(&mut con, key), before, "{args:?} changed {key}");
        }
    }
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(dbsize, 1);
}

/// A server with the module (or the library) whose wall clock stands at `unix_ms` until moved.
fn at_the_clock(dir: &common::TempDir, unix_ms: i64) -> (common::TestClock, Server) {
    let clock = common::TestClock::at(&dir.0, unix_ms);
    let server = Server::with(common::Config { clock: Some(&clock), ..common::Config::default() });
    (clock, server)
}

fn expiry_of(con: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap()
}

// 2026-01-31T23:59:59.500Z, 2026-02-01T00:00:00Z and 2026-03-01T00:00:00Z.
const LAST_HALF_SECOND_OF_JANUARY: i64 = 1_769_903_999_500;
const FEBRUARY_1ST: i64 = 1_769_904_000_000;
const MARCH_1ST: i64 = 1_772_323_200_000;

#[test]
fn a_calendar_month_ends_at_midnight_on_the_1st_and_the_next_one_runs_its_own_length() {
    let dir = common::TempDir::new();
    let (clock, server) = at_the_clock(&dir, LAST_HALF_SECOND_OF_JANUARY);
    let mut con = server.connect();
    assert_eq!(hit(&mut con, "m", &["2", "month"]).unwrap(), [1, 1, 1, 500]);
    assert_eq!(hit(&mut con, "m", &["2", "MONTH", "TZ", "UTC"]).unwrap(), [1, 2, 0, 500]);
    assert_eq!(hit(&mut con, "m", &["2", "month"]).unwrap(), [0, 2, 0, 500]);
    assert_eq!(expiry_of(&mut con, "m"), FEBRUARY_1ST);
    // The year ends with January's last day in UTC too, not at +05:30, where it is February.
    assert_eq!(hit(&mut con, "y", &["9", "year"]).unwrap()[3], 334 * 86_400_000 + 500);
    assert_eq!(
        hit(&mut con, "o", &["9", "month", "TZ", "+05:30"]).unwrap()[3],
        MARCH_1ST - 19_800_000 - clock_now(&mut con)
    );
    clock.move_to(&mut con, FEBRUARY_1ST + 100);
    // January's counter ended with January; February 2026 has 28 days.
    assert_eq!(hit(&mut con, "m", &["2", "month"]).unwrap(), [1, 1, 1, MARCH_1ST - FEBRUARY_1ST - 100]);
    assert_eq!(expiry_of(&mut con, "m"), MARCH_1ST);
    // Days, and ISO weeks (2026-02-01 is a Sunday: its week ends at its midnight).
    assert_eq!(hit(&mut con, "d", &["9", "day", "TZ", "-00:00"]).unwrap()[3], 86_400_000 - 100);
    assert_eq!(hit(&mut con, "w", &["9", "week"]).unwrap()[3], 86_400_000 - 100);
    assert_eq!(expiry_of(&mut con, "w"), FEBRUARY_1ST + 86_400_000);
}

fn clock_now(con: &mut redis::Connection) -> i64 {
    common::server_ms(con)
}

#[test]
fn aligned_windows_reset_at_multiples_of_the_window() {
    let dir = common::TempDir::new();
    let (clock, server) = at_the_clock(&dir, 1_800_000_012_345);
    let mut con = server.connect();
    assert_eq!(hit(&mut con, "a", &["2", "60", "ALIGN"]).unwrap(), [1, 1, 1, 47_655]);
    assert_eq!(expiry_of(&mut con, "a"), 1_800_000_060_000);
    assert_eq!(hit(&mut con, "b", &["2", "250", "MS", "align"]).unwrap(), [1, 1, 1, 155]);
    // Not aligned: the window starts with the hit.
    assert_eq!(hit(&mut con, "c", &["2", "60"]).unwrap(), [1, 1, 1, 60_000]);
    clock.move_to(&mut con, 1_800_000_059_999);
    assert_eq!(hit(&mut con, "a", &["2", "60", "ALIGN"]).unwrap(), [1, 2, 0, 1]);
    assert_eq!(hit(&mut con, "a", &["2", "60", "ALIGN"]).unwrap(), [0, 2, 0, 1]);
    // The server keeps a key through the ms its expiry names: the next window's first ms counts
    // in the one before it (as with any window).
    assert_eq!(hit(&mut con, "a", &["2", "60", "ALIGN"]).unwrap(), [0, 2, 0, 1]);
    clock.move_to(&mut con, 1_800_000_060_001);
    assert_eq!(hit(&mut con, "a", &["2", "60", "ALIGN"]).unwrap(), [1, 1, 1, 59_999]);
    // HITALL lays each window on the clock the same way, all or nothing.
    let reply: redis::Value = common::limiter("RATELIMIT.HITALL")
        .arg(2)
        .arg("{t}:s")
        .arg("{t}:d")
        .arg(&["5", "10", "100", "day", "ALIGN"])
        .query(&mut con)
        .unwrap();
    let fields: (i64, Vec<i64>, Vec<i64>) = redis::from_redis_value(&reply).unwrap();
    // 2027-01-15T08:01:00.001Z: 15 h 59 min less a ms to midnight.
    assert_eq!(fields, (1, vec![1, 4, 9_999], vec![1, 99, (15 * 60 + 59) * 60_000 - 1]));
}

// New York springs forward on 2026-03-08 (a day of 23 hours) and falls back on 2026-11-01 (25).
const NEW_YORK_MARCH_8TH_1AM: i64 = 1_772_949_600_000; // 06:00Z, 01:00 EST
const NEW_YORK_MARCH_9TH: i64 = 1_773_028_800_000; // 04:00Z, 00:00 EDT
const NEW_YORK_NOVEMBER_1ST: i64 = 1_793_505_600_000; // 04:00Z, 00:00 EDT
const NEW_YORK_NOVEMBER_2ND: i64 = 1_793_595_600_000; // 05:00Z, 00:00 EST

#[test]
fn calendar_days_follow_daylight_saving_in_a_named_zone() {
    if common::module_only("named time zones") {
        return;
    }
    let dir = common::TempDir::new();
    let (clock, server) = at_the_clock(&dir, NEW_YORK_MARCH_8TH_1AM);
    let mut con = server.connect();
    let new_york = ["10", "day", "TZ", "America/New_York"];
    // 22 hours left of a 23-hour day.
    assert_eq!(hit(&mut con, "spring", &new_york).unwrap(), [1, 1, 9, 22 * 3_600_000]);
    assert_eq!(expiry_of(&mut con, "spring"), NEW_YORK_MARCH_9TH);
    clock.move_to(&mut con, NEW_YORK_NOVEMBER_1ST);
    assert_eq!(hit(&mut con, "fall", &new_york).unwrap(), [1, 1, 9, 25 * 3_600_000]);
    assert_eq!(expiry_of(&mut con, "fall"), NEW_YORK_NOVEMBER_2ND);
    // An unknown zone is refused and writes nothing.
    let refused = error_of(hit(&mut con, "none", &["10", "day", "TZ", "America/Gotham"]));
    assert_eq!(refused, "ERR TZ must be UTC, an offset such as +05:30, or a time zone name such as Europe/Paris");
    assert_eq!(get(&mut con, "none"), None);
}

#[test]
fn the_library_refuses_named_zones() {
    if !common::library() {
        return;
    }
    let server = Server::start();
    let mut con = server.connect();
    let refused = error_of(hit(&mut con, "k", &["10", "day", "TZ", "America/New_York"]));
    assert!(refused.starts_with("ERR ratelimit library: TZ takes UTC or an offset"), "{refused}");
    assert_eq!(get(&mut con, "k"), None);
}
