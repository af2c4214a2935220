//! The Redis Functions library (functions/ratelimit.lua) against the module: the same random
//! argument vectors and call sequences sent to both in one server, each to its own keys, in one
//! transaction; every reply and every resulting key must agree.
//!
//! Where the server hands modules the command's cached time (Redis 7.2+, Valkey), a transaction
//! runs at one instant: the module reads it, and so does the library's `TIME`, so everything must
//! be equal, times included. On Redis 7.0 both read the wall clock: a transaction during which the
//! millisecond ticked is not compared (the two read different times), and the library's keys are
//! set back to the module's; GCRA's times, to the µs in the library and to the ms in the module,
//! agree within a millisecond.

use ratelimit_testkit as common;

use common::{error_text, info_field, value_and_expiry, Config, Rng, Server};
use redis::{Connection, ConnectionLike, Value};

/// The library's error for a valid number it cannot compute exactly (a documented difference).
const BEYOND: &str = "ERR ratelimit library: a number above 2^53 cannot be computed exactly here; use the module";

fn with_library() -> Server {
    let server = Server::with(Config { module: false, ..Config::default() });
    common::load_library(&mut server.connect());
    server
}

/// This fuzz test's words and keys.
trait Words {
    fn word(&mut self) -> String;
    fn key(&mut self) -> String;
}

impl Words for Rng {
    /// Numbers, option names and junk; no valid number above 2^53 (the library's own error).
    fn word(&mut self) -> String {
        const WORDS: &[&str] = &[
            "COST",
            "cost",
            "MS",
            "ms",
            "Ms",
            "LIMIT",
            "PEEK",
            "SLIDE",
            "RESERVE",
            "TOKENS",
            "-5",
            "-9223372036854775808",
            "0",
            "1",
            "2",
            "3",
            "-1",
            "10",
            "60",
            "250",
            "",
            "1.5",
            "+1",
            "01",
            "-0",
            "99999999999999999999",
            "-9223372036854775809",
            "4611686018427388",
            "x",
            "ALIGN",
            "align",
            "TZ",
            "day",
            "week",
            "MONTH",
            "year",
            "UTC",
            "+05:30",
            "-08:00",
            "+24:00",
            "Europe/Paris",
        ];
        match self.below(5) {
            0 => (self.next_u64() % 2_000).to_string(),
            1 => (-((self.next_u64() % 2_000) as i64)).to_string(),
            _ => WORDS[self.below(WORDS.len())].to_string(),
        }
    }

    fn key(&mut self) -> String {
        match self.below(8) {
            0 => "fz:list".into(),
            1 => "fz:text".into(),
            _ => format!("fz:{}", self.below(8)),
        }
    }
}

/// A reply with the key's tag taken out of its reservation: the module's keys and the library's
/// have different names (`m:...`, `l:...`), so their reservations differ in the tag alone.
fn untagged(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(untagged).collect()),
        // A HITALL's reservation: each key's entry, joined by ','.
        Value::BulkString(text) if text.contains(&b',') && text.split(|&b| b == b',').all(reservation_shaped) => {
            let entries: Vec<Vec<u8>> = text.split(|&b| b == b',').map(untagged_entry).collect();
            Value::BulkString(entries.join(&b','))
        }
        Value::BulkString(text) => Value::BulkString(untagged_entry(text)),
        v => v.clone(),
    }
}

fn reservation_shaped(text: &[u8]) -> bool {
    [b"h:", b"a:", b"c:", b"s:", b"g:"].iter().any(|kind| text.starts_with(*kind))
}

/// One reservation without its key's tag and its id (a calendar window's: the kind and four
/// numbers, the tag and id, then its zone); any other text as it is but for a tag-shaped end.
fn untagged_entry(text: &[u8]) -> Vec<u8> {
    let hex = |field: &[u8]| [8, 24].contains(&field.len()) && field.iter().all(u8::is_ascii_hexdigit);
    if text.starts_with(b"c:") {
        let colons: Vec<usize> = text.iter().enumerate().filter(|(_, &b)| b == b':').map(|(i, _)| i).collect();
        if let Some(&at) = colons.get(4) {
            let end = colons.get(5).copied().unwrap_or(text.len());
            if hex(&text[at + 1..end]) {
                return [&text[..at], &text[end..]].concat();
            }
        }
    }
    match text.iter().rposition(|&b| b == b':') {
        Some(at) if hex(&text[at + 1..]) => text[..at].to_vec(),
        _ => text.to_vec(),
    }
}

/// A key's settle marks, as both sides must agree on them: what each settle applied (the ids are
/// each side's own), and when the marks expire. `name` is the key's, then `:settled:`.
fn settle_marks(con: &mut Connection, name: &str) -> (Option<String>, i64) {
    let found: Vec<String> = redis::cmd("KEYS").arg(format!("{name}????")).query(con).unwrap();
    let Some(marks) = found.first() else { return (None, -2) };
    let mut applied: Vec<i64> = redis::cmd("HVALS").arg(marks).query(con).unwrap();
    applied.sort();
    let expiry: i64 = redis::cmd("PEXPIRETIME").arg(marks).query(con).unwrap();
    (Some(format!("{applied:?}")), expiry)
}

/// A reservation made by both sides of one call, each for its own keys, and those keys' names
/// (a HITALL's token keys).
struct Reservation {
    module: String,
    library: String,
    keys: Vec<String>,
}

/// The reservation a reply ends with, if any.
fn reservation_in(reply: &Value) -> Option<String> {
    match reply {
        Value::Array(items) => match items.last() {
            Some(Value::BulkString(text)) => String::from_utf8(text.clone())
                .ok()
                .filter(|t| t.len() > 9 && ["h:", "a:", "c:", "s:", "g:"].iter().any(|kind| t.starts_with(kind))),
            _ => None,
        },
        _ => None,
    }
}

/// A reply's integers, flattened, and its shape; None for anything else.
fn numbers(value: &Value) -> Option<Vec<i64>> {
    match value {
        Value::Int(n) => Some(vec![*n]),
        Value::Array(items) => items.iter().map(numbers).collect::<Option<Vec<_>>>().map(|v| v.concat()),
        _ => None,
    }
}

/// The module's reply and the library's agree: errors word for word, numbers exactly, except
/// that GCRA's times (`retry_after_ms`, `full_after_ms`) may differ by `gcra_ms`, and its
/// `remaining` by the tokens that come back in that time (`gcra_tokens`).
fn agree(command: &str, module: &Value, library: &Value, gcra_ms: i64, gcra_tokens: i64) -> bool {
    let (module, library) = (&untagged(module), &untagged(library));
    // A reservation (or its nil) ends the reply: the same on both sides, the numbers before it
    // compared as any reply's.
    if let (Value::Array(m), Value::Array(l)) = (module, library) {
        let ends = |v: &[Value]| matches!(v.last(), Some(Value::Nil | Value::BulkString(_)));
        if ends(m) && ends(l) && m.len() == l.len() {
            let (m_numbers, l_numbers) =
                (Value::Array(m[..m.len() - 1].to_vec()), Value::Array(l[..l.len() - 1].to_vec()));
            return m.last() == l.last() && agree(command, &m_numbers, &l_numbers, gcra_ms, gcra_tokens);
        }
        // A settle's shape (its limiter, limit and window) ends its reply: the same on both sides.
        let shaped = |v: &[Value]| v.len() >= 3 && matches!(v[v.len() - 3], Value::BulkString(_));
        if shaped(m) && shaped(l) && m.len() == l.len() {
            let (m_numbers, l_numbers) =
                (Value::Array(m[..m.len() - 3].to_vec()), Value::Array(l[..l.len() - 3].to_vec()));
            return m[m.len() - 3..] == l[l.len() - 3..]
                && agree(command, &m_numbers, &l_numbers, gcra_ms, gcra_tokens);
        }
    }
    match (module, library) {
        (Value::ServerError(a), Value::ServerError(b)) => {
            error_text(&a.clone().into()) == error_text(&b.clone().into())
        }
        // Exactly the same (a lease's id in its reply, too).
        (a, b) if a == b => true,
        (a, b) => {
            let shape = |v: &Value| format!("{v:?}").chars().filter(|c| "[]".contains(*c)).collect::<String>();
            let (Some(x), Some(y)) = (numbers(a), numbers(b)) else { return false };
            let slack = |i: usize| match (command == "RATELIMIT.GCRA", i) {
                (true, 2) => gcra_tokens,
                (true, 3..) => gcra_ms,
                _ => 0,
            };
            x.len() == y.len()
                && shape(a) == shape(b)
                && x.iter().zip(&y).enumerate().all(|(i, (p, q))| p.abs_diff(*q) <= slack(i) as u64)
        }
    }
}

/// One raw reply, errors kept as values (the client would turn an error inside EXEC into an
/// error for the whole transaction).
fn raw(con: &mut Connection, cmd: &redis::Cmd) -> Value {
    con.req_packed_command(&cmd.get_packed_command()).unwrap()
}

/// `[TIME, module call, library call, TIME]` in one transaction; None if the transaction was
/// refused (a call with the wrong number of arguments is refused as it is queued).
fn in_one_transaction(con: &mut Connection, calls: [&redis::Cmd; 2]) -> Option<Vec<Value>> {
    let time = redis::cmd("TIME");
    raw(con, &redis::cmd("MULTI"));
    for cmd in [&time, calls[0], calls[1], &time] {
        raw(con, cmd);
    }
    match raw(con, &redis::cmd("EXEC")) {
        Value::Array(replies) => Some(replies),
        _ => None,
    }
}

/// A `TIME` reply in whole milliseconds.
fn time_ms(value: &Value) -> i64 {
    let (s, us): (i64, i64) = redis::from_redis_value(value).unwrap();
    s * 1_000 + us / 1_000
}

/// The library's copy of `key` made the module's again: value and absolute expiry, and its settle
/// marks' expiry (their ids are each side's own).
fn realign(con: &mut Connection, key: &str) {
    let marks = |con: &mut Connection, side: &str| -> Option<String> {
        let found: Vec<String> = redis::cmd("KEYS").arg(format!("{side}:{key}:settled:????")).query(con).unwrap();
        found.into_iter().next()
    };
    if let (Some(m), Some(l)) = (marks(con, "m"), marks(con, "l")) {
        let expiry: i64 = redis::cmd("PEXPIRETIME").arg(m).query(con).unwrap();
        let _: Value = redis::cmd("PEXPIREAT").arg(l).arg(expiry).query(con).unwrap();
    }
    let dump: Value = redis::cmd("DUMP").arg(format!("m:{key}")).query(con).unwrap();
    let expiry: i64 = redis::cmd("PEXPIRETIME").arg(format!("m:{key}")).query(con).unwrap();
    let _: () = redis::cmd("DEL").arg(format!("l:{key}")).query(con).unwrap();
    if let Value::BulkString(dump) = dump {
        let mut restore = redis::cmd("RESTORE");
        restore.arg(format!("l:{key}")).arg(expiry.max(0)).arg(dump).arg("REPLACE");
        if expiry > 0 {
            restore.arg("ABSTTL");
        }
        let _: Value = restore.query(con).unwrap();
    }
}

/// Each entry's reservation id in a reservation's text (None for an entry without one): the 16
/// hex digits after the tag, which follow the kind and its numbers (three for GCRA, four else).
fn reservation_ids(text: &str) -> Vec<Option<String>> {
    text.split(',')
        .map(|entry| {
            let numbers = if entry.starts_with("g:") { 3 } else { 4 };
            entry.split(':').nth(numbers + 1).filter(|t| t.len() == 24).map(|t| t[8..].to_string())
        })
        .collect()
}

/// After a settle the module applied and the library refused with a documented error, a mark the
/// module wrote and the library did not (it wrote nothing) removed: the sides' marks agree again,
/// and each settles that reservation afresh if it comes again, from the counts `realign` made the
/// same.
fn unmark(con: &mut Connection, keys: &[String], module: &str, library: &str) {
    let ids = reservation_ids(module).into_iter().zip(reservation_ids(library));
    for (key, ids) in keys.iter().zip(ids) {
        let (Some(module_id), Some(library_id)) = ids else { continue };
        let mut marked = |side: &str, id: &str| -> Option<String> {
            let found: Vec<String> = redis::cmd("KEYS").arg(format!("{side}:{key}:settled:????")).query(con).unwrap();
            let marks = found.into_iter().next()?;
            let marked: bool = redis::cmd("HEXISTS").arg(&marks).arg(id).query(con).unwrap();
            marked.then_some(marks)
        };
        if let (Some(marks), None) = (marked("m", &module_id), marked("l", &library_id)) {
            let _: i64 = redis::cmd("HDEL").arg(marks).arg(&module_id).query(con).unwrap();
        }
    }
}

#[test]
fn the_library_answers_as_the_module_does() {
    let (mut rng, seed) = Rng::from_env();
    let server = Server::start();
    let mut con = server.connect();
    common::load_library(&mut con);
    let one_instant = info_field(&mut con, "ratelimit", "ratelimit_clock").as_deref() == Some("command_us");
    for side in ["m", "l"] {
        // A list, a text, and two counters leaked without TTL (the heal paths).
        // And GCRA's: a list, a text, a bucket without TTL.
        // And the sliding window's: a list, a counter (not a window), windows without TTL (one
        // counted with 3 s windows, one stale).
        let setup = ["RPUSH {}fz:list x", "SET {}fz:text abc", "SET {}fz:5 3", "SET {}fz:6 -7", "RPUSH {}fg:list x"];
        let slide =
            ["RPUSH {}fs:list x", "SET {}fs:text 12", "SET {}fs:5 slide:3000:0:4:9", "SET {}fs:6 slide:10:0:0:1"];
        // And the leases': a list, a text, a set without TTL holding an expired and a live lease.
        let leases = ["RPUSH {}fl:list x", "SET {}fl:text 12", "ZADD {}fl:5 1000000000000 b 9000000000000 c"];
        let setup = setup
            .iter()
            .chain(&["SET {}fg:text abc", "SET {}fg:5 3"])
            .chain(&slide)
            .chain(&leases)
            .map(|l| l.replace("{}", &format!("{side}:")));
        common::run_all(&mut con, &setup.collect::<Vec<_>>().iter().map(String::as_str).collect::<Vec<_>>());
    }
    // GCRA's times: the module's clock is in whole ms on Redis 7.0, the library's TIME in µs.
    let gcra_ms = if one_instant { 0 } else { 1 };
    let (mut compared, mut gcra_replies, mut slide_replies, mut ticked, mut mismatches) = (0, 0, 0, 0, Vec::new());
    let (mut beyond, mut lease_replies, mut settle_replies, mut laid_replies) = (0, 0, 0, 0);
    let (mut token_replies, mut multi_settles, mut partial_replies, mut marks_compared) = (0, 0, 0, 0);
    let mut aligned_buckets = 0;
    let mut reservations: Vec<Reservation> = Vec::new();
    for i in 0..7_000 {
        let (command, function) = [
            ("RATELIMIT.HIT", "ratelimit_hit"),
            ("RATELIMIT.PEEK", "ratelimit_peek"),
            ("RATELIMIT.HITALL", "ratelimit_hitall"),
            ("RATELIMIT.GCRA", "ratelimit_gcra"),
            ("RATELIMIT.SLIDE", "ratelimit_slide"),
            ("RATELIMIT.ACQUIRE", "ratelimit_acquire"),
            ("RATELIMIT.RELEASE", "ratelimit_release"),
            ("RATELIMIT.RENEW", "ratelimit_renew"),
            ("RATELIMIT.SETTLE", "ratelimit_settle"),
        ][rng.below(9)];
        // Now and then a request's call that certainly gets through, so that reservations of
        // several keys are made (and then settled) whatever the random stream's limits.
        let tokens_call = i % 100 == 50;
        let (command, function) =
            if tokens_call { ("RATELIMIT.HITALL", "ratelimit_hitall") } else { (command, function) };
        // A settle of a reservation both sides made (now and then with one of its digits
        // changed, or on another key), or of junk.
        let settle = command == "RATELIMIT.SETTLE";
        let settled = (settle && !reservations.is_empty() && rng.below(5) != 0).then(|| {
            let r = &reservations[rng.below(reservations.len())];
            let (mut module, mut library) = (r.module.clone(), r.library.clone());
            if rng.below(4) == 0 {
                // A byte of the first entry's kind or numbers, the same on both sides (not of a
                // tag: the sides' tags differ, and one may already hold the new byte).
                let numbers = if module.starts_with("g:") { 3 } else { 4 };
                let tag_at = module.match_indices(':').nth(numbers).map_or(module.len() - 9, |(i, _)| i);
                let at = rng.below(tag_at);
                let by = ["0", "1", "9", ":", "x", ""][rng.below(6)];
                module.replace_range(at..at + 1, by);
                library.replace_range(at..at + 1, by);
            }
            let keys = if rng.below(8) == 0 { vec![rng.key()] } else { r.keys.clone() };
            (module, library, keys)
        });
        let lease = ["RATELIMIT.ACQUIRE", "RATELIMIT.RELEASE", "RATELIMIT.RENEW"].contains(&command);
        let hitall = command == "RATELIMIT.HITALL";
        let gcra = command == "RATELIMIT.GCRA";
        // HITALL's SLIDE on sliding keys, half the time.
        let slide = command == "RATELIMIT.SLIDE" || hitall && rng.below(2) == 0;
        let prefix = if gcra {
            "fg:"
        } else if slide {
            "fs:"
        } else if lease {
            "fl:"
        } else {
            "fz:"
        };
        let mut keys: Vec<String> =
            (0..if hitall { 1 + rng.below(3) } else { 1 }).map(|_| rng.key().replace("fz:", prefix)).collect();
        // Mostly distinct (a key given twice is refused, which a quarter of the calls still try).
        if hitall && rng.below(4) != 0 {
            keys.sort();
            keys.dedup();
        }
        if let Some((_, _, settled_keys)) = &settled {
            keys = settled_keys.clone();
        }
        let mut args: Vec<String> = Vec::new();
        let mut laid_on_clock = false;
        // Half the vectors start well formed (three settles in four, which need a reservation
        // made before), so that the writes get exercised; most of those get no junk after them.
        let well_formed = if settle { rng.below(4) != 0 } else { rng.below(2) == 0 };
        if well_formed {
            let number = |rng: &mut Rng| ["1", "3", "10", "250", "60"][rng.below(5)].to_string();
            let pairs = if command == "RATELIMIT.PEEK" || gcra || lease || settle { 0 } else { keys.len() };
            // Leases: ids from a few, some in ms (so that they end during the run).
            let id = ["a", "b", "c"][rng.below(3)].to_string();
            match command {
                "RATELIMIT.ACQUIRE" => args.extend([number(&mut rng), number(&mut rng), "ID".into(), id]),
                "RATELIMIT.RELEASE" => args.push(id),
                "RATELIMIT.RENEW" => args.extend([id, number(&mut rng)]),
                _ => {}
            }
            if lease && command != "RATELIMIT.RELEASE" && rng.below(2) == 0 {
                args.push("MS".into());
            }
            if command == "RATELIMIT.PEEK" {
                args.push(number(&mut rng));
            }
            // Slow rates (a token back every 6 minutes or more): on Redis 7.0 the two clocks
            // differ by up to a millisecond, and a token coming back in between would part them.
            if gcra {
                args.push(["0", "1", "4", "9"][rng.below(4)].to_string());
                args.push(["1", "2", "10"][rng.below(3)].to_string());
                args.push(["3600", "86400", "3600.5", "7200"][rng.below(4)].to_string());
                if rng.below(3) == 0 {
                    args.extend(["TOKENS".to_string(), ["1", "2", "7"][rng.below(3)].to_string()]);
                }
            }
            // Fixed windows laid on the clock: calendar ones (in UTC, an offset, and now and then
            // a named zone, the module's alone), and ALIGNed ones.
            let fixed = command == "RATELIMIT.HIT" || hitall && !slide;
            for _ in 0..pairs {
                args.push(number(&mut rng));
                let calendar = fixed && rng.below(4) == 0;
                args.push(if calendar {
                    ["day", "week", "month", "YEAR"][rng.below(4)].into()
                } else {
                    number(&mut rng)
                });
            }
            if fixed && rng.below(4) == 0 {
                args.push("ALIGN".into());
            }
            if fixed
                && ["day", "week", "month", "YEAR"].iter().any(|u| args.iter().any(|a| a == u))
                && rng.below(2) == 0
            {
                args.extend([
                    "TZ".to_string(),
                    ["UTC", "+05:30", "-08:00", "+00:00", "Europe/Paris"][rng.below(5)].into(),
                ]);
            }
            laid_on_clock = args.iter().any(|a| ["ALIGN", "day", "week", "month", "YEAR"].contains(&a.as_str()));
            if slide && hitall {
                args.push("SLIDE".into());
            }
            if command == "RATELIMIT.SLIDE" && rng.below(4) == 0 {
                args.push("PEEK".into());
            }
            // Costs and tokens, given back now and then; reservations, often.
            let single = ["RATELIMIT.HIT", "RATELIMIT.SLIDE"].contains(&command);
            if (single || gcra) && rng.below(3) == 0 {
                let name = if gcra { "TOKENS" } else { "COST" };
                args.extend([name.to_string(), ["-1", "-3", "-250", "2", "7"][rng.below(5)].to_string()]);
            }
            // Part of a hit granted (with a give-back now and then: refused alike).
            if single && rng.below(3) == 0 {
                args.push("PARTIAL".into());
            }
            if (single || gcra) && rng.below(2) == 0 {
                args.push("RESERVE".into());
            }
            // Part of a request granted (with RESERVE now and then: a reservation of what was granted).
            let reserving = args.iter().any(|a| a == "RESERVE");
            if gcra && (!reserving || rng.below(8) == 0) && rng.below(2) == 0 {
                args.push("PARTIAL".into());
            }
            // Buckets refilled at their period's boundaries (with RESERVE now and then: refused).
            if gcra && (!reserving || rng.below(8) == 0) && rng.below(3) == 0 {
                args.push("ALIGN".into());
            }
            // A request's tokens on HITALL's last keys (now and then a count it does not have),
            // reserved often.
            if hitall && rng.below(2) == 0 {
                let count = match rng.below(8) {
                    0 => rng.below(5),
                    1..=4 => keys.len(),
                    _ => 1 + rng.below(keys.len()),
                };
                args.extend(["TOKENS".to_string(), ["1", "2", "4", "30"][rng.below(4)].into(), count.to_string()]);
                if rng.below(3) != 0 {
                    args.push("RESERVE".into());
                }
            }
            if settle {
                args.push(["0", "1", "2", "5", "9", "300"][rng.below(6)].to_string());
            }
        }
        if tokens_call {
            let tag = i / 100 % 3;
            keys = vec![format!("fz:r{tag}"), format!("fz:t{tag}")];
            args = ["1000000", "3600", "1000000", "day", "TOKENS", "4", "2", "RESERVE"].map(String::from).to_vec();
            laid_on_clock = true;
        }
        let junk = if (well_formed && rng.below(3) != 0) || tokens_call { 0 } else { rng.below(5) };
        for _ in 0..junk {
            args.push(rng.word());
        }
        let on = |side: &str| keys.iter().map(|k| format!("{side}:{k}")).collect::<Vec<_>>();
        // A settle's reservation is each side's own; junk is the same for both.
        let junk_reservation = rng.word();
        let reservation = |side: usize| match &settled {
            Some((module, library, _)) => vec![[module, library][side].clone()],
            None if settle && well_formed => vec![junk_reservation.clone()],
            None => Vec::new(),
        };
        let mut module_call = redis::cmd(command);
        if hitall {
            module_call.arg(keys.len());
        }
        module_call.arg(on("m")).arg(reservation(0)).arg(&args);
        let mut library_call = redis::cmd("FCALL");
        library_call.arg(function).arg(keys.len()).arg(on("l")).arg(reservation(1)).arg(&args);
        let (module, library) = match in_one_transaction(&mut con, [&module_call, &library_call]) {
            Some(replies) => {
                let (before, after) = (time_ms(&replies[0]), time_ms(&replies[3]));
                if one_instant {
                    assert_eq!(replies[0], replies[3], "a transaction runs at one instant here");
                } else if before != after {
                    ticked += 1;
                    keys.iter().for_each(|key| realign(&mut con, key));
                    continue;
                }
                (replies[1].clone(), replies[2].clone())
            }
            // Refused as queued (arity): errors that depend on no clock, and write nothing.
            None => (raw(&mut con, &module_call), raw(&mut con, &library_call)),
        };
        // Numbers past 2^53 (a sliding window's limit near 2^52 by a long window, a count an
        // overage took there) get the library's own error where the module answers, and so does
        // an ACQUIRE without ID: documented differences.
        let documented = match &library {
            Value::ServerError(e) => {
                let text = error_text(&e.clone().into());
                text == BEYOND
                    || text.starts_with("ERR ratelimit library: ACQUIRE needs an ID")
                    || text.starts_with("ERR ratelimit library: TZ takes UTC or an offset")
                    || text.starts_with("ERR ratelimit library: SETTLE's keys are FCALL's keys")
            }
            _ => false,
        };
        if documented {
            beyond += 1;
            if let Some((module_made, library_made, _)) = &settled {
                unmark(&mut con, &keys, module_made, library_made);
            }
            keys.iter().for_each(|key| realign(&mut con, key));
            continue;
        }
        // Both sides' reservations, to settle later (only a limiter's: an ACQUIRE's reply ends
        // with its lease's ID, which a junk ID can make look like one).
        let reserving = ["RATELIMIT.HIT", "RATELIMIT.SLIDE", "RATELIMIT.GCRA", "RATELIMIT.HITALL"].contains(&command);
        if let (true, Some(module_made), Some(library_made)) =
            (reserving, reservation_in(&module), reservation_in(&library))
        {
            // A HITALL's is for its last keys, one per entry.
            let entries = module_made.split(',').count();
            let keys = keys[keys.len().saturating_sub(entries)..].to_vec();
            reservations.push(Reservation { module: module_made, library: library_made, keys });
        }
        settle_replies += usize::from(settle && !matches!(module, Value::ServerError(_)));
        multi_settles += usize::from(settle && keys.len() > 1 && !matches!(module, Value::ServerError(_)));
        token_replies +=
            usize::from(hitall && args.iter().any(|a| a == "TOKENS") && !matches!(module, Value::ServerError(_)));
        partial_replies += usize::from(
            (gcra || ["RATELIMIT.HIT", "RATELIMIT.SLIDE"].contains(&command))
                && args.iter().any(|a| a == "PARTIAL")
                && !matches!(module, Value::ServerError(_)),
        );
        aligned_buckets +=
            usize::from(gcra && args.iter().any(|a| a == "ALIGN") && !matches!(module, Value::ServerError(_)));
        // A GCRA bucket's settle answers as GCRA does, times and all.
        let settles_gcra = settled.as_ref().is_some_and(|(module, _, _)| module.starts_with("g:"));
        let command = if settles_gcra { "RATELIMIT.GCRA" } else { command };
        compared += 1;
        gcra_replies += usize::from(gcra && !matches!(module, Value::ServerError(_)));
        slide_replies += usize::from(slide && !matches!(module, Value::ServerError(_)));
        lease_replies += usize::from(lease && !matches!(module, Value::ServerError(_)));
        laid_replies += usize::from(laid_on_clock && !matches!(module, Value::ServerError(_)));
        // Tokens that come back within `gcra_ms`: a bucket's emission is period / tokens_per_period.
        let gcra_tokens = match (gcra, args.get(1).and_then(|t| t.parse::<f64>().ok()), args.get(2)) {
            (true, Some(per_period), Some(period)) if gcra_ms > 0 => period
                .parse::<f64>()
                .map_or(0, |period| (gcra_ms as f64 * 1e6 * per_period / (period * 1e9)).ceil() as i64 + 1),
            _ => 0,
        };
        if !agree(command, &module, &library, gcra_ms, gcra_tokens) {
            mismatches.push(format!("vector {i}: {command} {keys:?} {args:?}: module {module:?}, library {library:?}"));
        }
    }
    // The same keys, with the same values and expiry instants. Leases of a few ms end during the
    // comparison: a key missing on one side is one that expired between the two reads (its
    // other side's expiry has passed by the server's clock), or a mismatch.
    // A key's settle marks are listed by the name they share on both sides: the key's, then
    // `:settled:` (the four characters after it put them in their key's slot).
    let listed = |con: &mut Connection, side: &str| -> Vec<String> {
        let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{side}:f[zgsl]:*")).query(con).unwrap();
        keys.into_iter()
            .map(|k| k[2..].to_string())
            .map(|k| k.find(":settled:").map_or(k.clone(), |at| k[..at + 9].into()))
            .collect()
    };
    let mut keys = listed(&mut con, "m");
    keys.extend(listed(&mut con, "l"));
    keys.sort();
    keys.dedup();
    for key in keys.iter().filter(|k| !k.ends_with("list")) {
        let marks = key.ends_with(":settled:");
        marks_compared += usize::from(marks);
        let read = |con: &mut Connection, name: String| match marks {
            true => settle_marks(con, &name),
            false => value_and_expiry(con, &name),
        };
        let (value_m, expiry_m) = read(&mut con, format!("m:{key}"));
        let (value_l, expiry_l) = read(&mut con, format!("l:{key}"));
        let now = time_ms(&redis::cmd("TIME").query(&mut con).unwrap());
        let expired_between =
            |value: &Option<String>, other_expiry: i64| value.is_none() && (0..=now).contains(&other_expiry);
        if expired_between(&value_m, expiry_l) || expired_between(&value_l, expiry_m) {
            continue;
        }
        // A GCRA bucket's TAT is in ns: on Redis 7.0 the two clocks' readings differ below the ms.
        let tat = |v: &Option<String>| v.as_deref().and_then(|v| v.parse::<i64>().ok());
        let same = match (key.starts_with("fg:"), tat(&value_m), tat(&value_l)) {
            (true, Some(a), Some(b)) => (a - b).abs() <= gcra_ms * 1_000_000 && (expiry_m - expiry_l).abs() <= gcra_ms,
            // A bucket's marks last from the settle's instant, which the two clocks read apart.
            (true, ..) if marks => value_m == value_l && (expiry_m - expiry_l).abs() <= gcra_ms,
            _ => value_m == value_l && expiry_m == expiry_l,
        };
        if !same {
            mismatches.push(format!(
                "key {key}: module {value_m:?} expires {expiry_m}, library {value_l:?} expires {expiry_l}"
            ));
        }
    }
    // The module's settles of a reservation settled before, which the library answered alike.
    let settled_again: usize =
        common::info_field(&mut con, "ratelimit", "ratelimit_settled_again").unwrap().parse().unwrap();
    eprintln!(
        "{compared} calls ({gcra_replies} GCRA, {slide_replies} sliding-window, {lease_replies} lease, {settle_replies} settle ({multi_settles} of several keys, {settled_again} settled again, {marks_compared} keys' settle marks compared), {token_replies} HITALL with TOKENS, {partial_replies} GCRA, HIT or SLIDE with PARTIAL, {aligned_buckets} with ALIGN, {laid_replies} aligned or calendar replies) and {} keys compared, {ticked} transactions across a \
         millisecond's tick and {beyond} documented differences (2^53, ACQUIRE without ID, a named zone) left out, {} mismatches (seed {seed})",
        keys.len(),
        mismatches.len()
    );
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    assert!(gcra_replies > 100, "too few GCRA calls got through to compare: {gcra_replies}");
    assert!(slide_replies > 100, "too few sliding-window calls got through to compare: {slide_replies}");
    assert!(lease_replies > 100, "too few lease calls got through to compare: {lease_replies}");
    assert!(settle_replies > 100, "too few settles got through to compare: {settle_replies}");
    assert!(laid_replies > 50, "too few aligned or calendar windows got through to compare: {laid_replies}");
    assert!(token_replies > 30, "too few HITALL with TOKENS got through to compare: {token_replies}");
    assert!(multi_settles > 5, "too few settles of several keys got through to compare: {multi_settles}");
    assert!(settled_again > 10, "too few settles of a reservation settled before: {settled_again}");
    assert!(marks_compared > 5, "too few keys' settle marks compared: {marks_compared}");
    assert!(partial_replies > 10, "too few GCRA calls with PARTIAL got through to compare: {partial_replies}");
    assert!(aligned_buckets > 10, "too few GCRA calls with ALIGN got through to compare: {aligned_buckets}");
}

#[test]
fn numbers_beyond_2_53_get_the_library_error_and_write_nothing() {
    let library = with_library();
    let mut con = library.connect();
    for args in [
        &["ratelimit_hit", "1", "k", "9007199254740993", "60"][..],
        &["ratelimit_hit", "1", "k", "10", "60", "COST", "9223372036854775807"],
    ] {
        let error = common::error_of(redis::cmd("FCALL").arg(args).query::<Value>(&mut con));
        assert_eq!(error, BEYOND, "{args:?}");
    }
    // ALIGN on a period of a fraction of a microsecond (the module's alone).
    let args = ["ratelimit_gcra", "1", "k", "1", "1", "0.0000015", "ALIGN"];
    let error = common::error_of(redis::cmd("FCALL").arg(&args).query::<Value>(&mut con));
    assert_eq!(error, "ERR ratelimit library: ALIGN needs a period of whole microseconds here; use the module");
    let exists: i64 = redis::cmd("EXISTS").arg("k").query(&mut con).unwrap();
    assert_eq!(exists, 0);
    // Invalid numbers get the module's errors, not the library's.
    let error =
        common::error_of(redis::cmd("FCALL").arg(&["ratelimit_hit", "1", "k", "0", "60"]).query::<Value>(&mut con));
    assert_eq!(error, "ERR limit must be an integer >= 1");
    // FCALL_RO serves PEEK (flag no-writes).
    let reply: Vec<i64> = redis::cmd("FCALL_RO").arg(&["ratelimit_peek", "1", "k", "5"]).query(&mut con).unwrap();
    assert_eq!(reply, [1, 0, 5, 0]);
}

/// The library remembers its arguments' parsed values: past as many distinct ones as it keeps, a
/// text it refused is still refused, and every other still reads as its first parse did.
#[test]
fn remembered_arguments_read_as_parsed_and_refused_ones_stay_refused() {
    let library = with_library();
    let mut con = library.connect();
    let hit = |con: &mut Connection, key: &str, limit: &str| {
        redis::cmd("FCALL").arg(&["ratelimit_hit", "1", key, limit, "60", "COST", "1"]).query::<Vec<i64>>(con)
    };
    for round in 0..2 {
        let key = format!("k{round}");
        for (count, limit) in (1..).step_by(2).zip(10_000..11_100) {
            let reply = hit(&mut con, &key, &limit.to_string()).unwrap();
            assert_eq!(reply[..3], [1, count, limit - count], "round {round}, limit {limit}");
            // Without options, HIT looks its limit up among the remembered ones first.
            let usual: Vec<i64> = redis::cmd("FCALL")
                .arg(&["ratelimit_hit", "1", &key, &limit.to_string(), "60"])
                .query(&mut con)
                .unwrap();
            assert_eq!(usual[..3], [1, count + 1, limit - count - 1], "round {round}, limit {limit}");
            for refused in ["0", "01", "abc", "-5"] {
                let error = common::error_of(hit(&mut con, &key, refused));
                assert_eq!(error, "ERR limit must be an integer >= 1", "round {round}, {refused:?}");
                let error = common::error_of(
                    redis::cmd("FCALL").arg(&["ratelimit_hit", "1", &key, refused, "60"]).query::<Vec<i64>>(&mut con),
                );
                assert_eq!(error, "ERR limit must be an integer >= 1", "round {round}, {refused:?} without options");
            }
        }
    }
}

/// Stored texts are remembered too (counts, sliding-window values): the same text in another key
/// reads the same, and a refused one is refused every time.
#[test]
fn remembered_stored_values_read_as_parsed_and_refused_ones_stay_refused() {
    let library = with_library();
    let mut con = library.connect();
    let call = |con: &mut Connection, function: &str, key: &str| {
        redis::cmd("FCALL").arg(&[function, "1", key, "100", "60"]).query::<Vec<i64>>(con)
    };
    let now: Vec<i64> = redis::cmd("TIME").query(&mut con).unwrap();
    // Counts kept in a window ten windows ahead stay at full weight until the clock gets there:
    // the reply does not depend on when the call runs.
    let ahead = (now[0] * 1000 / 60_000 + 10) * 60_000;
    let slide = format!("slide:60000:{ahead}:3:4");
    for key in ["a", "b", "c"] {
        let _: () = redis::cmd("SET").arg(&[&format!("count:{key}"), "5", "EX", "60"]).query(&mut con).unwrap();
        assert_eq!(call(&mut con, "ratelimit_hit", &format!("count:{key}")).unwrap()[..3], [1, 6, 94], "{key}");
        let _: () = redis::cmd("SET").arg(&[&format!("slide:{key}"), &slide, "EX", "60"]).query(&mut con).unwrap();
        assert_eq!(call(&mut con, "ratelimit_slide", &format!("slide:{key}")).unwrap()[..4], [1, 8, 92, -1], "{key}");
        let stored: String = redis::cmd("GET").arg(format!("slide:{key}")).query(&mut con).unwrap();
        assert_eq!(stored, format!("slide:60000:{ahead}:3:5"), "{key}");
        for (function, refused, error) in [
            ("ratelimit_hit", "05", "ERR value is not an integer or out of range"),
            ("ratelimit_slide", "slide:60000:01:0:0", "ERR value is not a ratelimit sliding window"),
        ] {
            let _: () = redis::cmd("SET").arg(&["refused", refused]).query(&mut con).unwrap();
            assert_eq!(common::error_of(call(&mut con, function, "refused")), error, "{key}: {refused}");
        }
    }
}
