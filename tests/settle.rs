//! Paying for what was used, against a real server (the module, or the library with
//! RATELIMIT_IMPL=library): negative COST and TOKENS give back; RESERVE hands out a reservation
//! that RATELIMIT.SETTLE settles, refunds to the reserved window only while it counts, overages
//! to the current one; every error leaves the keyspace as it was.

use ratelimit_testkit as common;

use std::time::Duration;

use common::{
    assert_within, error_of, gcra, get, hit, info_field, limiter, module_only, reserve, same_terms, settle, settle_all,
    settle_shaped, slide, snapshot, wait_for, Server,
};
use redis::Connection;

fn expiry(con: &mut Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap()
}

fn exists(con: &mut Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(con).unwrap() == 1
}

#[test]
fn a_negative_cost_gives_back_in_the_running_window() {
    let server = Server::start();
    let mut con = server.connect();
    hit(&mut con, "k", &["10", "60", "COST", "7"]).unwrap();
    let window_end = expiry(&mut con, "k");
    let reply = hit(&mut con, "k", &["10", "60", "COST", "-3"]).unwrap();
    assert_eq!(reply[..3], [1, 4, 6]);
    assert_eq!(expiry(&mut con, "k"), window_end, "a give-back never moves the window");
    // Never below 0, and never denied, however much.
    assert_eq!(hit(&mut con, "k", &["10", "60", "COST", "-9223372036854775808"]).unwrap()[..3], [1, 0, 10]);
    assert_eq!(get(&mut con, "k").as_deref(), Some("0"));
    // A missing key stays missing.
    assert_eq!(hit(&mut con, "none", &["10", "60", "COST", "-1"]).unwrap(), [1, 0, 10, 0]);
    assert!(!exists(&mut con, "none"));
    // A counter without TTL heals, as with any call.
    let _: () = redis::cmd("SET").arg("leaked").arg(5).query(&mut con).unwrap();
    assert_eq!(hit(&mut con, "leaked", &["10", "60", "COST", "-2"]).unwrap(), [1, 3, 7, 60_000]);
    assert!(expiry(&mut con, "leaked") > 0);
}

#[test]
fn a_negative_cost_gives_back_to_the_current_sliding_window() {
    let server = Server::start();
    let mut con = server.connect();
    slide(&mut con, "s", &["10", "3600", "COST", "6"]).unwrap();
    let end = expiry(&mut con, "s");
    let reply = slide(&mut con, "s", &["10", "3600", "COST", "-4"]).unwrap();
    assert_eq!(reply[..4], [1, 2, 8, -1]);
    assert_eq!(expiry(&mut con, "s"), end, "the key keeps its expiry");
    assert_eq!(slide(&mut con, "s", &["10", "3600", "COST", "-40"]).unwrap()[..3], [1, 0, 10]);
    assert_eq!(slide(&mut con, "none", &["10", "3600", "COST", "-1"]).unwrap(), [1, 0, 10, -1, 0]);
    assert!(!exists(&mut con, "none"));
}

#[test]
fn negative_tokens_move_the_tat_back_but_not_before_now() {
    let server = Server::start();
    let mut con = server.connect();
    // 5 tokens, one back an hour.
    assert_eq!(gcra(&mut con, "g", &["4", "1", "3600", "TOKENS", "5"]).unwrap()[..3], [0, 5, 0]);
    assert_eq!(gcra(&mut con, "g", &["4", "1", "3600", "TOKENS", "-2"]).unwrap()[..4], [0, 5, 2, -1]);
    assert_eq!(gcra(&mut con, "g", &["4", "1", "3600", "TOKENS", "1"]).unwrap()[..3], [0, 5, 1]);
    // Back to full at most: the bucket holds no more than its capacity.
    let reply = gcra(&mut con, "g", &["4", "1", "3600", "TOKENS", "-100"]).unwrap();
    assert_eq!(reply[..5], [0, 5, 5, -1, 0]);
    assert_eq!(gcra(&mut con, "none", &["4", "1", "3600", "TOKENS", "-1"]).unwrap(), [0, 5, 5, -1, 0]);
    assert!(!exists(&mut con, "none"));
}

#[test]
fn reserve_replies_a_reservation_or_nil() {
    let server = Server::start();
    let mut con = server.connect();
    let (numbers, reservation) = reserve(&mut con, "RATELIMIT.HIT", "k", &["10", "60", "COST", "8"]).unwrap();
    assert_eq!(numbers, [1, 8, 2, 60_000]);
    let reservation = reservation.unwrap();
    assert!(reservation.starts_with("h:10:60000:"), "{reservation}");
    let (numbers, denied) = reserve(&mut con, "RATELIMIT.HIT", "k", &["10", "60", "COST", "8"]).unwrap();
    assert_eq!((numbers[0], denied), (0, None));
    let (numbers, r) = reserve(&mut con, "RATELIMIT.SLIDE", "s", &["10", "60", "COST", "3"]).unwrap();
    assert_eq!(numbers[..4], [1, 3, 7, -1]);
    assert!(r.unwrap().starts_with("s:10:60000:"));
    let (numbers, r) = reserve(&mut con, "RATELIMIT.GCRA", "g", &["4", "1", "60", "TOKENS", "2"]).unwrap();
    assert_eq!(numbers[..3], [0, 5, 3]);
    assert!(r.unwrap().starts_with("g:5:60000000000:2:"));
}

#[test]
fn settling_a_fixed_window_refunds_while_it_runs_and_charges_overage() {
    let server = Server::start();
    let mut con = server.connect();
    let (_, r) = reserve(&mut con, "RATELIMIT.HIT", "k", &["10", "60", "COST", "8"]).unwrap();
    let r = r.unwrap();
    let end = expiry(&mut con, "k");
    // 8 reserved, 3 used: 5 back.
    let reply = settle(&mut con, "k", &r, 3).unwrap();
    assert_eq!(reply[..3], [1, 3, 7]);
    assert_eq!(reply[4], -5);
    assert_eq!(expiry(&mut con, "k"), end);
    // 12 used of 7: 5 more, past the limit.
    let (_, r) = reserve(&mut con, "RATELIMIT.HIT", "k", &["10", "60", "COST", "7"]).unwrap();
    let r = r.unwrap();
    assert_eq!(settle(&mut con, "k", &r, 12).unwrap()[..3], [1, 15, 0]);
    assert_eq!(expiry(&mut con, "k"), end, "an overage in the running window keeps it");
    // At most once: settled again (a retry after a lost reply), whatever it says was used, it
    // changes nothing and answers what the first applied.
    for used in [12, 0] {
        let again = settle(&mut con, "k", &r, used).unwrap();
        assert_eq!([again[0], again[1], again[2], again[4]], [1, 15, 0, 5], "used {used}");
    }
    // Another call's reservation on the same terms settles on its own.
    assert_eq!(settle(&mut con, "k", &same_terms(&r, 1), 12).unwrap()[..3], [1, 20, 0]);
}

#[test]
fn every_limiter_settles_a_reservation_at_most_once() {
    let server = Server::start();
    let mut con = server.connect();
    for (command, key, args, applied) in [
        ("RATELIMIT.HIT", "h", &["100", "60", "COST", "10"][..], -7),
        ("RATELIMIT.HIT", "a", &["100", "60", "ALIGN", "COST", "10"], -7),
        ("RATELIMIT.HIT", "c", &["100", "day", "COST", "10"], -7),
        ("RATELIMIT.SLIDE", "s", &["100", "60", "COST", "10"], -7),
        ("RATELIMIT.GCRA", "g", &["99", "100", "60", "TOKENS", "10"], -7),
    ] {
        let (_, r) = reserve(&mut con, command, key, args).unwrap();
        let r = r.unwrap();
        let first = settle(&mut con, key, &r, 3).unwrap();
        assert_eq!(first[first.len() - 1], applied, "{command} {args:?}");
        let value = get(&mut con, key);
        for used in [3, 50] {
            let again = settle(&mut con, key, &r, used).unwrap();
            assert_eq!((again[1], again[again.len() - 1]), (first[1], applied), "{command} {args:?}");
            assert_eq!(get(&mut con, key), value, "{command} {args:?}: settled twice");
        }
        // The key's marks expire when what was reserved stops counting, or with the key.
        let marks: Vec<String> = redis::cmd("KEYS").arg(format!("{key}:settled:*")).query(&mut con).unwrap();
        let (marks_expiry, key_expiry) = (expiry(&mut con, &marks[0]), expiry(&mut con, key));
        assert!(marks_expiry >= key_expiry && key_expiry > 0, "{command} {args:?}: {marks_expiry} {key_expiry}");
        let now = common::server_ms(&mut con);
        let bound = if command == "RATELIMIT.SLIDE" { 120_000 } else { 60_000 };
        assert!(
            marks_expiry <= now + bound || args.contains(&"day"),
            "{command} {args:?}: marks for {} ms",
            marks_expiry - now
        );
    }
    // A HITALL's token keys: each key's marks are its own, settled at most once together.
    let call = ["2", "{t}:m", "{t}:d", "1000", "60", "5000", "day", "TOKENS", "400", "2", "RESERVE"];
    let mut reply: Vec<redis::Value> = limiter("RATELIMIT.HITALL").arg(&call).query(&mut con).unwrap();
    let r: String = redis::from_redis_value(&reply.pop().unwrap()).unwrap();
    let first = common::settle_all(&mut con, &["{t}:m", "{t}:d"], &r, 100).unwrap();
    let again = common::settle_all(&mut con, &["{t}:m", "{t}:d"], &r, 900).unwrap();
    assert_eq!(again.iter().map(|k| (k[1], k[4])).collect::<Vec<_>>(), [(100, -300), (100, -300)]);
    assert_eq!(first.iter().map(|k| (k[1], k[4])).collect::<Vec<_>>(), [(100, -300), (100, -300)]);
}

#[test]
fn a_reservation_without_id_still_settles_without_the_guarantee() {
    let server = Server::start();
    let mut con = server.connect();
    let (_, r) = reserve(&mut con, "RATELIMIT.HIT", "k", &["100", "60", "COST", "10"]).unwrap();
    // As a module before ids wrote it: the tag alone.
    let r = r.unwrap();
    let legacy = &r[..r.len() - 16];
    assert_eq!(settle(&mut con, "k", legacy, 8).unwrap()[..2], [1, 8]);
    assert_eq!(settle(&mut con, "k", legacy, 8).unwrap()[..2], [1, 6], "applied again");
    let marks: Vec<String> = redis::cmd("KEYS").arg("k:settled:*").query(&mut con).unwrap();
    assert!(marks.is_empty(), "{marks:?}");
}

#[test]
fn marks_of_another_kind_are_refused_and_nothing_changes() {
    let server = Server::start();
    let mut con = server.connect();
    let (_, r) = reserve(&mut con, "RATELIMIT.HIT", "k", &["100", "60", "COST", "10"]).unwrap();
    let r = r.unwrap();
    settle(&mut con, "k", &r, 4).unwrap();
    let marks: Vec<String> = redis::cmd("KEYS").arg("k:settled:*").query(&mut con).unwrap();
    let _: () = redis::cmd("DEL").arg(&marks[0]).query(&mut con).unwrap();
    let _: () = redis::cmd("SET").arg(&marks[0]).arg("x").query(&mut con).unwrap();
    let before = snapshot(&mut con, "k");
    let other = same_terms(&r, 1);
    let e = error_of(settle(&mut con, "k", &other, 4));
    assert_eq!(e, "WRONGTYPE the key's settle marks (its name, then ':settled:') hold another kind of value");
    assert_eq!(snapshot(&mut con, "k"), before);
}

#[test]
fn a_partial_grant_reserves_what_it_granted() {
    let server = Server::start();
    let mut con = server.connect();
    hit(&mut con, "k", &["10", "60", "COST", "8"]).unwrap();
    let (numbers, r) = reserve(&mut con, "RATELIMIT.HIT", "k", &["10", "60", "COST", "5", "PARTIAL"]).unwrap();
    assert_eq!((numbers[0], numbers[1], numbers[4]), (1, 10, 2));
    let r = r.unwrap();
    assert!(r.starts_with("h:10:60000:") && r.contains(":2:"), "{r}");
    // One of the two granted used: the other back to the window.
    let reply = settle(&mut con, "k", &r, 1).unwrap();
    assert_eq!((reply[1], reply[4]), (9, -1));
    // Denied: no reservation.
    hit(&mut con, "k", &["10", "60"]).unwrap();
    let (numbers, r) = reserve(&mut con, "RATELIMIT.HIT", "k", &["10", "60", "COST", "5", "PARTIAL"]).unwrap();
    assert_eq!((numbers[0], numbers[4], r), (0, 0, None));
}

#[test]
fn a_partial_bucket_grant_reserves_what_it_granted() {
    let server = Server::start();
    let mut con = server.connect();
    // A bucket of 10, one back every 6 s: 6 free after 4 taken.
    gcra(&mut con, "g", &["9", "10", "60", "TOKENS", "4"]).unwrap();
    let (numbers, r) = reserve(&mut con, "RATELIMIT.GCRA", "g", &["9", "10", "60", "TOKENS", "9", "PARTIAL"]).unwrap();
    assert_eq!((numbers[0], numbers[2], numbers[5]), (0, 0, 6));
    let r = r.unwrap();
    assert!(r.starts_with("g:10:6000000000:6:"), "{r}");
    // Two of the six used: four back.
    let reply = settle(&mut con, "g", &r, 2).unwrap();
    assert_eq!((reply[2], reply[5]), (4, -4));
    // None whole: denied, no reservation.
    gcra(&mut con, "g", &["9", "10", "60", "TOKENS", "4"]).unwrap();
    let (numbers, r) = reserve(&mut con, "RATELIMIT.GCRA", "g", &["9", "10", "60", "TOKENS", "9", "PARTIAL"]).unwrap();
    assert_eq!((numbers[0], numbers[5], r), (1, 0, None));
}

#[test]
fn a_refund_for_a_window_that_has_ended_is_dropped() {
    let server = Server::start();
    let mut con = server.connect();
    let (_, r) = reserve(&mut con, "RATELIMIT.HIT", "k", &["10", "100", "MS", "COST", "8"]).unwrap();
    let r = r.unwrap();
    wait_for("the window to end", Duration::from_secs(10), || !exists(&mut con, "k"));
    hit(&mut con, "k", &["10", "60", "COST", "6"]).unwrap();
    // The new window's count is never lowered by the old window's refund.
    let reply = settle(&mut con, "k", &r, 0).unwrap();
    assert_eq!((reply[1], reply[4]), (6, 0));
    // An overage still counts, in the current window (another call's reservation of the first
    // window: that one is settled).
    assert_eq!(settle(&mut con, "k", &same_terms(&r, 1), 10).unwrap()[1], 8);
    // And after that one ends too, on a new counter with a window of its own.
    let _: () = redis::cmd("DEL").arg("k").query(&mut con).unwrap();
    let reply = settle(&mut con, "k", &same_terms(&r, 2), 11).unwrap();
    assert_eq!(reply, [1, 3, 7, 100, 3]);
}

/// A server with the module (or the library) whose wall clock stands at `unix_ms` until moved.
fn at_the_clock(dir: &common::TempDir, unix_ms: i64) -> (common::TestClock, Server) {
    let clock = common::TestClock::at(&dir.0, unix_ms);
    let server = Server::with(common::Config { clock: Some(&clock), ..common::Config::default() });
    (clock, server)
}

// 2026-02-01T00:00:00 and 2026-03-01T00:00:00 at +05:30, in Unix ms.
const FEBRUARY_AT_0530: i64 = 1_769_904_000_000 - 19_800_000;
const MARCH_AT_0530: i64 = 1_772_323_200_000 - 19_800_000;

#[test]
fn a_monthly_budget_refunds_to_its_month_and_charges_an_overage_to_the_next() {
    let dir = common::TempDir::new();
    let (clock, server) = at_the_clock(&dir, FEBRUARY_AT_0530 - 500);
    let mut con = server.connect();
    let month = ["1000", "month", "TZ", "+05:30", "COST", "400"];
    let (numbers, r) = reserve(&mut con, "RATELIMIT.HIT", "m", &month).unwrap();
    assert_eq!(numbers, [1, 400, 600, 500]);
    let r = r.unwrap();
    assert!(r.starts_with(&format!("c:1000:2:{FEBRUARY_AT_0530}:400:")) && r.ends_with(":+05:30"), "{r}");
    // In January, at +05:30: 300 of the 400 back.
    assert_eq!(settle(&mut con, "m", &r, 100).unwrap(), [1, 100, 900, 500, -300]);
    let (_, late) = reserve(&mut con, "RATELIMIT.HIT", "m", &month).unwrap();
    clock.move_to(&mut con, FEBRUARY_AT_0530 + 1_000);
    // February now: nothing back to January, and 600 over its estimate counted in February,
    // which ends with February at +05:30, not a month of ms from now.
    let (used, window_left) = (1_000, MARCH_AT_0530 - FEBRUARY_AT_0530 - 1_000);
    assert_eq!(settle(&mut con, "m", late.as_deref().unwrap(), used).unwrap(), [1, 600, 400, window_left, 600]);
    assert_eq!(expiry(&mut con, "m"), MARCH_AT_0530);
}

#[test]
fn an_aligned_window_settles_into_the_window_laid_at_settle() {
    let dir = common::TempDir::new();
    let (clock, server) = at_the_clock(&dir, 1_800_000_012_345);
    let mut con = server.connect();
    let (_, r) = reserve(&mut con, "RATELIMIT.HIT", "a", &["100", "60", "ALIGN", "COST", "10"]).unwrap();
    let r = r.unwrap();
    assert!(r.starts_with("a:100:60000:1800000060000:10:"), "{r}");
    assert_eq!(settle(&mut con, "a", &r, 4).unwrap(), [1, 4, 96, 47_655, -6]);
    clock.move_to(&mut con, 1_800_000_060_001);
    // The overage's new window ends at the next multiple of 60 s, as a HIT's would (another
    // call's reservation of the first window: that one is settled).
    assert_eq!(settle(&mut con, "a", &same_terms(&r, 1), 30).unwrap(), [1, 20, 80, 59_999, 20]);
    assert_eq!(expiry(&mut con, "a"), 1_800_000_120_000);
    // A refund for the ended window is dropped.
    assert_eq!(settle(&mut con, "a", &same_terms(&r, 2), 0).unwrap()[4], 0);
}

#[test]
fn a_named_zones_calendar_reservation_carries_its_name() {
    if module_only("named time zones") {
        return;
    }
    let server = Server::start();
    let mut con = server.connect();
    let day = ["50", "day", "TZ", "Europe/Paris", "COST", "5"];
    let (_, r) = reserve(&mut con, "RATELIMIT.HIT", "d", &day).unwrap();
    let r = r.unwrap();
    assert!(r.starts_with("c:50:0:") && r.ends_with(":Europe/Paris"), "{r}");
    assert_eq!(settle(&mut con, "d", &r, 2).unwrap()[..3], [1, 2, 48]);
    // A zone the server does not know is no reservation of its.
    let unknown = r.replace("Europe/Paris", "Europe/Nowhere");
    assert_eq!(error_of(settle(&mut con, "d", &unknown, 2)), "ERR invalid reservation");
}

#[test]
fn a_sliding_window_refund_counts_in_its_window_current_or_previous() {
    let server = Server::start();
    let mut con = server.connect();
    let (_, r) = reserve(&mut con, "RATELIMIT.SLIDE", "s", &["100", "1000", "MS", "COST", "40"]).unwrap();
    let r = r.unwrap();
    let start: i64 = r.split(':').nth(3).unwrap().parse().unwrap();
    // Settled in one transaction with the server's clock: where the refund belongs follows from it.
    let (time, reply, value): ((i64, i64), redis::Value, Option<String>) = redis::pipe()
        .atomic()
        .cmd("TIME")
        .add_command(limiter("RATELIMIT.SETTLE").arg("s").arg(&r).arg(10).clone())
        .cmd("GET")
        .arg("s")
        .query(&mut con)
        .unwrap();
    let now = time.0 * 1_000 + time.1 / 1_000;
    let value = value.unwrap_or_default();
    let reply = common::shaped(reply).unwrap().0;
    match (now - start) / 1000 {
        0 => assert_eq!((reply[5], value.ends_with(":0:10")), (-30, true), "{value}"),
        1 => assert_eq!((reply[5], value.ends_with(":10:0")), (-30, true), "{value}"),
        _ => assert_eq!(reply[5], 0),
    }
    // Two windows on, it no longer weighs: another call's reservation of that window, dropped.
    wait_for("two windows to pass", Duration::from_secs(10), || common::server_ms(&mut con) >= start + 2_000);
    slide(&mut con, "s", &["100", "1000", "MS", "COST", "5"]).unwrap();
    let reply = settle(&mut con, "s", &same_terms(&r, 1), 0).unwrap();
    assert_eq!((reply[1], reply[5]), (5, 0));
}

#[test]
fn a_bucket_refund_and_an_overage_debt() {
    let server = Server::start();
    let mut con = server.connect();
    let (_, r) = reserve(&mut con, "RATELIMIT.GCRA", "g", &["4", "1", "3600", "TOKENS", "5"]).unwrap();
    let r = r.unwrap();
    // Times count down from the reservation: within a minute of it, whatever the machine's pace.
    let hours = |n: i64, ms: i64| assert_within(ms, n * 3_600_000 - 60_000, n * 3_600_000, "the bucket's time");
    let reply = settle(&mut con, "g", &r, 2).unwrap();
    assert_eq!([reply[0], reply[1], reply[2], reply[3], reply[5]], [0, 5, 3, -1, -3]);
    hours(2, reply[4]);
    // Used 9 of 5 (another call's reservation): the TAT moves 4 more hours ahead, past the
    // bucket's tolerance.
    let reply = settle(&mut con, "g", &same_terms(&r, 1), 9).unwrap();
    assert_eq!((reply[2], reply[5]), (0, 4));
    hours(6, reply[4]);
    let denied = gcra(&mut con, "g", &["4", "1", "3600"]).unwrap();
    assert_eq!(denied[0], 1, "the debt is waited out");
    hours(2, denied[3]);
}

#[test]
fn bad_settles_change_nothing() {
    let server = Server::start();
    let mut con = server.connect();
    let (_, hit_r) = reserve(&mut con, "RATELIMIT.HIT", "k", &["10", "60", "COST", "4"]).unwrap();
    let (_, slide_r) = reserve(&mut con, "RATELIMIT.SLIDE", "s", &["10", "60", "COST", "4"]).unwrap();
    let (hit_r, slide_r) = (hit_r.unwrap(), slide_r.unwrap());
    // The sliding window counted with another length since.
    slide(&mut con, "s", &["10", "30"]).unwrap();
    let _: () = redis::cmd("SET").arg("text").arg("abc").query(&mut con).unwrap();
    let before: Vec<_> = ["k", "s", "text"].iter().map(|k| snapshot(&mut con, k)).collect();
    let malformed = "ERR invalid reservation";
    for (key, reservation, used, error) in [
        ("k", hit_r.as_str(), -1, "ERR used must be an integer >= 0"),
        ("k", "garbage", 1, malformed),
        ("k", &hit_r[..hit_r.len() - 1], 1, malformed),
        ("k", &hit_r.replacen("h:10:", "h:0:", 1), 1, malformed),
        ("s", hit_r.as_str(), 1, "ERR the reservation is for another key"),
        ("s", slide_r.as_str(), 1, "ERR the reservation's window differs from the key's"),
    ] {
        assert_eq!(error_of(settle(&mut con, key, reservation, used)), error, "{key} {reservation} {used}");
    }
    // A key holding another kind of value than the reservation's.
    let (_, text_r) = reserve(&mut con, "RATELIMIT.HIT", "text2", &["10", "60"]).unwrap();
    let _: () = redis::cmd("SET").arg("text2").arg("abc").query(&mut con).unwrap();
    let text_before = snapshot(&mut con, "text2");
    let e = error_of(settle(&mut con, "text2", &text_r.unwrap(), 1));
    assert_eq!(e, "ERR value is not an integer or out of range");
    assert_eq!(snapshot(&mut con, "text2"), text_before);
    let arity: redis::RedisResult<redis::Value> = limiter("RATELIMIT.SETTLE").arg("k").arg(&hit_r).query(&mut con);
    assert!(error_of(arity).contains("wrong number of arguments"));
    let after: Vec<_> = ["k", "s", "text"].iter().map(|k| snapshot(&mut con, k)).collect();
    assert_eq!(before, after);
    // RESERVE with a give-back, or with PEEK, is refused.
    let e = error_of(
        limiter("RATELIMIT.HIT").arg(&["k", "10", "60", "COST", "-1", "RESERVE"]).query::<redis::Value>(&mut con),
    );
    assert_eq!(e, "ERR RESERVE needs COST >= 1");
    let e =
        error_of(limiter("RATELIMIT.SLIDE").arg(&["s", "10", "60", "PEEK", "RESERVE"]).query::<redis::Value>(&mut con));
    assert_eq!(e, "ERR syntax error: PEEK and RESERVE cannot be given together");
    let e = error_of(gcra(&mut con, "g", &["4", "1", "60", "TOKENS", "0"]));
    assert_eq!(e, "ERR TOKENS must be a nonzero integer");
    let e = error_of(hit(&mut con, "k", &["10", "60", "COST", "0"]));
    assert_eq!(e, "ERR COST must be a nonzero integer");
}

#[test]
fn a_settle_of_several_keys_checks_them_all_before_writing_any() {
    let server = Server::start();
    let mut con = server.connect();
    let call = ["2", "{t}:m", "{t}:d", "1000", "60", "5000", "day", "TOKENS", "400", "2", "RESERVE"];
    let mut reply: Vec<redis::Value> = limiter("RATELIMIT.HITALL").arg(&call).query(&mut con).unwrap();
    let r: String = redis::from_redis_value(&reply.pop().unwrap()).unwrap();
    let settle_all =
        |con: &mut Connection, keys: &[&str], reservation: &str| common::settle_all(con, keys, reservation, 100);
    let _: () = redis::cmd("SET").arg("{t}:text").arg("abc").query(&mut con).unwrap();
    let _: () = redis::cmd("RPUSH").arg("{t}:list").arg("x").query(&mut con).unwrap();
    let (m, d) = (r.split(',').next().unwrap().to_string(), r.split(',').nth(1).unwrap().to_string());
    let cases: Vec<(Vec<&str>, String, &str)> = vec![
        (vec!["{t}:m"], r.clone(), "ERR the reservation is for 2 keys"),
        (vec!["{t}:m", "{t}:d", "{t}:x"], r.clone(), "ERR the reservation is for 2 keys"),
        (vec!["{t}:m", "{t}:m"], r.clone(), "ERR each key may be given only once"),
        (vec!["{t}:d", "{t}:m"], r.clone(), "ERR the reservation is for another key"),
        (vec!["{t}:m", "{t}:d"], format!("{m},garbage"), "ERR invalid reservation"),
        (
            vec!["{t}:m", "{t}:list"],
            format!("{m},{}", d.replace(&d[d.len() - 24..d.len() - 16], &tag_of("{t}:list"))),
            "WRONGTYPE",
        ),
    ];
    for (keys, reservation, expected) in cases {
        let before = (snapshot(&mut con, "{t}:m"), snapshot(&mut con, "{t}:d"));
        let error = error_of(settle_all(&mut con, &keys, &reservation));
        assert!(error.starts_with(expected), "{keys:?} {reservation}: {error}");
        assert_eq!((snapshot(&mut con, "{t}:m"), snapshot(&mut con, "{t}:d")), before, "{keys:?} changed a key");
    }
    // Each entry settles into its own key's window, whatever order it names them in.
    let per_key = settle_all(&mut con, &["{t}:m", "{t}:d"], &r).unwrap();
    assert_eq!(per_key.iter().map(|k| (k[1], k[4])).collect::<Vec<_>>(), [(100, -300), (100, -300)]);
    let swapped = same_terms(&format!("{d},{m}"), 1);
    let per_key = settle_all(&mut con, &["{t}:d", "{t}:m"], &swapped).unwrap();
    assert_eq!(per_key.iter().map(|k| (k[1], k[4])).collect::<Vec<_>>(), [(0, -100), (0, -100)]);
}

/// A key's tag in a reservation: FNV-1a, 32 bits, in hex.
fn tag_of(key: &str) -> String {
    let hash = key.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    format!("{hash:08x}")
}

#[test]
fn info_counts_reservations_settles_refunds_and_overage() {
    if module_only("INFO ratelimit") {
        return;
    }
    let server = Server::start();
    let mut con = server.connect();
    let (_, r) = reserve(&mut con, "RATELIMIT.HIT", "k", &["10", "100", "MS", "COST", "4"]).unwrap();
    let r = r.unwrap();
    settle(&mut con, "k", &r, 1).unwrap();
    settle(&mut con, "k", &r, 1).unwrap();
    settle(&mut con, "k", &same_terms(&r, 1), 9).unwrap();
    hit(&mut con, "k", &["10", "60", "COST", "-1"]).unwrap();
    wait_for("the window to end", Duration::from_secs(10), || !exists(&mut con, "k"));
    hit(&mut con, "k", &["10", "60"]).unwrap();
    settle(&mut con, "k", &same_terms(&r, 2), 1).unwrap();
    let field = |con: &mut Connection, name: &str| info_field(con, "ratelimit", &format!("ratelimit_{name}")).unwrap();
    let counts: Vec<String> = ["reserved", "settled", "settled_again", "refunded", "refunds_dropped", "overage"]
        .iter()
        .map(|n| field(&mut con, n))
        .collect();
    assert_eq!(counts, ["1", "3", "1", "2", "1", "1"]);
    // A give-back is no decision: one hit admitted, the reservation, and the last hit.
    assert_eq!(field(&mut con, "hits"), "2");
}

#[test]
fn a_settle_says_what_its_reservation_was_of() {
    let server = Server::start();
    let mut con = server.connect();
    let shape = |con: &mut Connection, command: &str, key: &str, args: &[&str]| {
        let (_, r) = reserve(con, command, key, args).unwrap();
        settle_shaped(con, key, &r.unwrap(), 1).unwrap().1
    };
    let of = |kind: &str, limit: i64, window_ms: i64| (kind.to_string(), limit, window_ms);
    assert_eq!(shape(&mut con, "RATELIMIT.HIT", "h", &["10", "60", "COST", "3"]), of("fixed", 10, 60_000));
    assert_eq!(shape(&mut con, "RATELIMIT.HIT", "a", &["10", "1500", "MS", "ALIGN"]), of("fixed", 10, 1_500));
    assert_eq!(shape(&mut con, "RATELIMIT.HIT", "c", &["10", "month", "TZ", "+01:00"]), of("fixed", 10, -1));
    assert_eq!(shape(&mut con, "RATELIMIT.SLIDE", "s", &["20", "2", "COST", "4"]), of("sliding", 20, 2_000));
    assert_eq!(shape(&mut con, "RATELIMIT.GCRA", "g", &["4", "1", "1", "TOKENS", "2"]), of("bucket", 5, -1));
    // A HITALL's token keys: one reply per key, each with its shape.
    let reply: Vec<redis::Value> = limiter("RATELIMIT.HITALL")
        .arg(2)
        .arg(&["{t}r", "{t}t", "1000", "60", "2000", "2", "TOKENS", "300", "2", "RESERVE"])
        .query(&mut con)
        .unwrap();
    let r: String = redis::from_redis_value(reply.last().unwrap()).unwrap();
    let keys = ["{t}r", "{t}t"];
    let mut cmd = if common::library() { redis::cmd("FCALL") } else { redis::cmd("RATELIMIT.SETTLE") };
    if common::library() {
        cmd.arg("ratelimit_settle").arg(2);
    }
    let replies: Vec<redis::Value> = cmd.arg(&keys).arg(&r).arg(100).query(&mut con).unwrap();
    let shapes: Vec<_> = replies.into_iter().map(|reply| common::shaped(reply).unwrap().1).collect();
    assert_eq!(shapes, [of("fixed", 1_000, 60_000), of("fixed", 2_000, 2_000)]);
    assert_eq!(settle_all(&mut con, &keys, &r, 100).unwrap().len(), 2, "settled again, with the same shapes");
}
