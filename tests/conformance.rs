//! The cases every client runs, with no server. testkit/conformance/arguments.json: each line of
//! arguments with the module's own answer to it, the exact error reply or none.
//! testkit/conformance/replies.json: replies of a scripted run on a server whose clock stands
//! still, each with the decision a client reads from it, by the rules `decision` below (the one
//! statement of them: a client that reads a reply otherwise fails its run of these); the module's
//! replies (the differential holds the library's to them).
//!
//! The argument cases (testkit/conformance/arguments.json): each line of
//! arguments with the module's own answer to it, the exact error reply or none, so that the file
//! cannot drift from the module (the unit test in src/core/args/conformance.rs holds the parsers
//! to it too, with no server). This test fails when the file differs from what the module
//! answers, and under `RATELIMIT_IMPL=library` when the library answers otherwise (but where it
//! refuses in its own words, "ratelimit library: ...", what it documents that only the module does);
//! `RATELIMIT_WRITE_CASES=1 cargo test --test conformance` writes it anew.
//!
//! Each case also carries `call`: the line read by the command's `COMMAND DOCS` alone
//! (positional arguments by name, options by token, integers as numbers), the typed call a client
//! would make. A line the docs cannot read (an unknown or repeated option, a missing value, too
//! few arguments) has none: no typed client can send it. `server_data` marks a refusal that
//! needs the module's own data (its time zone database): a client may leave it to the server.

use ratelimit_testkit as common;

use std::collections::HashMap;

use common::{library, limiter, Server};
use serde_json::{json, Map, Value as Json};

const UNKNOWN_ZONE: &str = "ERR TZ must be UTC, an offset such as +05:30, or a time zone name such as Europe/Paris";

const FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testkit/conformance/arguments.json");
const REPLIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testkit/conformance/replies.json");

/// The calls of the replies' run, in order, on one server (later ones see earlier ones' keys).
const RUN: &[(&str, &str)] = &[
    ("ratelimit.hit", "h 2 60"),
    ("ratelimit.hit", "h 2 60"),
    ("ratelimit.hit", "h 2 60"),
    ("ratelimit.peek", "h 2"),
    ("ratelimit.hit", "n 2 60 COST 5"),
    ("ratelimit.hit", "m 2 1500 MS ALIGN"),
    ("ratelimit.hit", "c 10 day"),
    ("ratelimit.hit", "p 10 60 COST 15 PARTIAL"),
    ("ratelimit.hit", "p 10 60 COST 15 PARTIAL"),
    ("ratelimit.peek", "leaked 10"),
    ("ratelimit.slide", "s 2 60"),
    ("ratelimit.slide", "s 2 60"),
    ("ratelimit.slide", "s 2 60"),
    ("ratelimit.slide", "s 2 60 PEEK"),
    ("ratelimit.slide", "sp 10 60 COST 15 PARTIAL"),
    // Each decision a whole token away from the bucket's edge, whatever a jitter of the clock.
    ("ratelimit.gcra", "g 2 1 60"),
    ("ratelimit.gcra", "g 2 1 60"),
    ("ratelimit.gcra", "g 2 1 60 TOKENS 2"),
    ("ratelimit.gcra", "gp 4 1 60 TOKENS 9 PARTIAL"),
    ("ratelimit.gcra", "gn 1 1 60 TOKENS 5"),
    // A new adaptive limit's bucket holds a sixth of 60: 10 at once, then a token a second.
    ("ratelimit.adapt", "a 6 60 600 60"),
    ("ratelimit.adapt", "a 6 60 600 60 COST 9"),
    ("ratelimit.adapt", "a 6 60 600 60"),
    // Denied twice: the second waits behind the first (2 s). One back at its turn is admitted on a
    // bucket not in debt: a token's debt, the bucket full in 11 s.
    ("ratelimit.adapt", "a 6 60 600 60"),
    ("ratelimit.adapt", "a 6 60 600 60 TURN"),
    ("ratelimit.adapt", "ap 6 60 600 60 COST 15 PARTIAL"),
    ("ratelimit.adapt", "ap 6 60 600 60 COST 15 PARTIAL"),
];

/// 2026-12-01T12:00:00Z: the replies' run's clock.
const RUN_AT: i64 = 1_796_126_400_000;

/// What a client reads from a limiter's reply: whether it was admitted, the count and what
/// remains, the limit (a bucket's capacity), how long until the window ends (a bucket is full) and
/// until the same call would be admitted, in ms; -1 for never (a counter without TTL, a cost
/// above the limit), null for none (admitted: no wait; no window: PEEK, a calendar window, which
/// varies); and with PARTIAL what was granted.
fn decision(command: &str, call: &Map<String, Json>, reply: &[i64]) -> Json {
    let number = |name: &str| call.get(name).and_then(Json::as_i64);
    let cost = number("COST").unwrap_or(1);
    let ms = call.contains_key("MS");
    let window = |w: Option<&Json>| match w.and_then(Json::as_i64) {
        Some(n) if ms => json!(n),
        Some(n) => json!(n * 1000),
        None => Json::Null,
    };
    let never_if_negative = |n: i64| if n < 0 { -1 } else { n };
    let partial = call.contains_key("PARTIAL");
    let (mut d, granted) = match command {
        "ratelimit.hit" | "ratelimit.peek" => {
            let (allowed, limit, reset) = (reply[0] == 1, number("limit").unwrap(), never_if_negative(reply[3]));
            // PARTIAL's denial is of one hit: again when the window ends, whatever the cost.
            let retry = match allowed {
                true => Json::Null,
                false if cost > limit && !partial => json!(-1),
                false => json!(reset),
            };
            let window = if command == "ratelimit.peek" { Json::Null } else { window(call.get("window")) };
            let d = json!({"allowed": allowed, "count": reply[1], "remaining": reply[2], "limit": limit,
                "reset_after_ms": reset, "retry_after_ms": retry, "window_ms": window});
            (d, reply.get(4))
        }
        "ratelimit.slide" => {
            let allowed = reply[0] == 1;
            let retry = if allowed { Json::Null } else { json!(never_if_negative(reply[3])) };
            let d = json!({"allowed": allowed, "count": reply[1], "remaining": reply[2], "limit": number("limit"),
                "reset_after_ms": never_if_negative(reply[4]), "retry_after_ms": retry, "window_ms": window(call.get("window"))});
            (d, reply.get(5))
        }
        "ratelimit.adapt" => {
            let allowed = reply[0] == 1;
            let retry = if allowed { Json::Null } else { json!(reply[3]) };
            let d = json!({"allowed": allowed, "count": (reply[1] - reply[2]).max(0), "remaining": reply[2],
                "limit": reply[1], "reset_after_ms": reply[4], "retry_after_ms": retry, "window_ms": window(call.get("window"))});
            (d, reply.get(5))
        }
        _ => {
            let allowed = reply[0] == 0;
            let retry = if allowed { Json::Null } else { json!(never_if_negative(reply[3])) };
            let period = call.get("period").and_then(Json::as_i64).map_or(Json::Null, |s| json!(s * 1000));
            let d = json!({"allowed": allowed, "count": reply[1] - reply[2], "remaining": reply[2], "limit": reply[1],
                "reset_after_ms": reply[4], "retry_after_ms": retry, "window_ms": period});
            (d, reply.get(5))
        }
    };
    if let Some(&g) = granted.filter(|_| partial) {
        d["granted"] = json!(g);
    }
    d
}

/// The lines, by command: the parsers' unit tests' and the clients' edges.
const CASES: &[(&str, &[&str])] = &[
    (
        "ratelimit.hit",
        &[
            "k 10 60",
            "k 10 60 COST 3",
            "k 10 250 MS",
            "k 10 250 ms cost 2",
            "k 1 1 COST 5",
            "k 10 60 COST -2",
            "k",
            "k 10",
            "k 0 60",
            "k -1 60",
            "k x 60",
            "k 1.5 60",
            "k 99999999999999999999 60",
            "k 10 0",
            "k 10 -5",
            "k 10 ten",
            "k 10 60 COST 0",
            "k 10 60 COST x",
            "k 10 60 COST",
            "k 10 60 COST -2 RESERVE",
            "k 10 60 COST 3 RESERVE",
            "k 10 60 RESERVE",
            "k 10 60 PARTIAL",
            "k 10 60 COST 5 PARTIAL",
            "k 10 60 COST -1 PARTIAL",
            "k 10 60 COST 5 PARTIAL RESERVE",
            "k 10 60 COST -1 PARTIAL RESERVE",
            "k 10 9223372036854775807",
            "k 10 9223372036854775",
            "k 10 4611686018427387",
            "k 10 4611686018427387903 MS",
            "k 10 4611686018427387904 MS",
            "k 10 60 COST 1 COST 2",
            "k 10 60 MS MS",
            "k 10 60 SECONDS",
            "k 10 60 ALIGN",
            "k 10 250 MS ALIGN",
            "k 10 day",
            "k 10 week",
            "k 10 month ALIGN",
            "k 10 year",
            "k 10 days",
            "k 10 day MS",
            "k 10 day TZ America/New_York",
            "k 10 day TZ +05:30",
            "k 10 day TZ Nowhere/City",
            "k 10 day TZ +99:00",
            "k 10 60 TZ UTC",
            "k 10 day COST 3 RESERVE",
        ],
    ),
    (
        "ratelimit.peek",
        &["k 10", "k 10 COST 3", "k", "k 0", "k 10 COST 0", "k 10 COST -1", "k 10 MS", "k 10 COST 2 COST 2"],
    ),
    (
        "ratelimit.slide",
        &[
            "k 10 60",
            "k 10 250 MS COST 2",
            "k 10 60 COST -3",
            "k 10 60 PEEK",
            "k 10 60 RESERVE",
            "k 10 60 COST 4 PARTIAL",
            "k 10 60 COST 4 PARTIAL RESERVE",
            "k 10 60 COST 4 PARTIAL PEEK",
            "k 10 60 PEEK RESERVE",
            "k 10",
            "k 0 60",
            "k 10 0",
            "k 10 day",
            "k 10 60 COST 0",
            "k 10 60 COST -1 RESERVE",
            "k 10 60 COST -1 PARTIAL",
            "k 10 60 ALIGN",
            "k 10 9223372036854775",
        ],
    ),
    (
        "ratelimit.gcra",
        &[
            "k 9 3 1",
            "k 9 2 0.5",
            "k 9 1 1e-3",
            "k 0 10 60 TOKENS 3",
            "k 9 3 1 TOKENS -2",
            "k 9 3 1 TOKENS 2 PARTIAL",
            "k 9 3 1 PARTIAL RESERVE",
            "k 9 3 1 TOKENS 2 RESERVE",
            "k 9 3 1 ALIGN",
            "k 9 3 1 ALIGN RESERVE",
            "k 9 3 1 TOKENS -2 PARTIAL",
            "k 9 3 1 TOKENS -2 RESERVE",
            "k 1 1",
            "k -1 1 1",
            "k 1 0 1",
            "k x 1 1",
            "k 1 x 1",
            "k 1 1 0",
            "k 1 1 -2.5",
            "k 1 1 x",
            "k 1 1 NaN",
            "k 1 1 inf",
            "k 1 1 1e300",
            "k 1 1 9223372036854775807",
            "k 200000000 1 86400",
            "k 1 1 86400 TOKENS 200000000",
            "k 1 1 1 TOKENS 0",
            "k 1 1 1 TOKENS 1.5",
            "k 1 1 1 TOKENS",
            "k 1 1 1 TOKENS 1 TOKENS 1",
            "k 1 1 1 COST 1",
            "k 1 1 1 1 1",
        ],
    ),
    (
        "ratelimit.hitall",
        &[
            "1 a 5 60",
            "2 a b 10 60 5 3600",
            "2 a b 10 60 5 3600 COST 2",
            "2 a b 10 250 5 3600 MS",
            "2 a b 10 60 5 3600 SLIDE",
            "2 a b 10 60 5 3600 ALIGN",
            "2 a b 10 day 5 month TZ +01:00",
            "2 a b 10 60 5 day SLIDE",
            "2 a b 10 60 5 60 TZ UTC",
            "1 a 10 60 SLIDE ALIGN",
            "2 a b 10 60 1000 60 TOKENS 300 1",
            "2 a b 10 60 1000 60 TOKENS 300 1 RESERVE",
            "1 a 5 60 RESERVE",
            "1 a 5 60 TOKENS 0 1",
            "1 a 5 60 TOKENS 5 0",
            "1 a 5 60 TOKENS 5 2",
            "1 a 5 60 TOKENS 5 -1",
            "1 a 5 60 TOKENS 5",
            "2 a a 5 60 5 60",
            "0 a 5 60",
            "2 a b 5 60",
            "1 a 0 60",
            "1 a 5 0",
            "1 a 5 60 COST 0",
            "1 a 5 60 COST -1",
        ],
    ),
    (
        "ratelimit.acquire",
        &[
            "k 3 30",
            "k 3 1500 MS",
            "k 3 30 ID job-7",
            "k 3",
            "k 0 30",
            "k 3 0",
            "k 3 9223372036854775",
            "k 3 30 ID",
            "k 3 30 COST 1",
        ],
    ),
    (
        "ratelimit.adapt",
        &[
            "k 6 60 600 60",
            "k 6 60 600 60 COST 3",
            "k 6 60 600 250 MS",
            "k 6 60 600 60 PARTIAL",
            "k 6 60 600 60 COST 5 PARTIAL",
            "k 6 60 600 60 COST 5 RESERVE",
            "k 6 60 600 60 COST 5 PARTIAL RESERVE",
            "k 6 60 600 60 TURN",
            "k 6 60 600 60 COST 5 PARTIAL RESERVE TURN",
            "k 1 1 1 1",
            "k 6 60 600",
            "k 0 60 600 60",
            "k 6 0 600 60",
            "k 6 60 0 60",
            "k x 60 600 60",
            "k 60 6 600 60",
            "k 6 600 60 60",
            "k 6 60 600 0",
            "k 6 60 600 -1",
            "k 6 60 600 x",
            "k 6 60 600 60 COST 0",
            "k 6 60 600 60 COST -1",
            "k 6 60 600 60 COST",
            "k 1 1 1 1099511627776 MS",
            "k 1 1 1 1099511627777 MS",
            "k 1 1 1 1099511628",
            "k 1 1 18764998447 60",
            "k 1 1 18764998448 60",
            "k 1 1 1 60 COST 18764998447",
            "k 1 1 1 60 COST 18764998448",
            "k 6 60 600 60 MS MS",
            "k 6 60 600 60 RESERVE RESERVE",
            "k 6 60 600 60 TURN TURN",
            "k 6 60 600 60 TOKENS 1",
        ],
    ),
    (
        "ratelimit.report",
        &[
            "k OK",
            "k THROTTLED",
            "k throttled RETRY 1500",
            "k THROTTLED RETRY 0",
            "k OK LIMIT 60",
            "k OK REMAINING 3 RESET 1000",
            "k THROTTLED RETRY 20000 LIMIT 60 REMAINING 0 RESET 20000",
            "k THROTTLED AGE 1500",
            "k OK REMAINING 3 RESET 1000 AGE 0",
            "k THROTTLED RETRY 20000 AGE 1099511627776",
            "k",
            "k 429",
            "k OK RETRY 5",
            "k THROTTLED RETRY -1",
            "k THROTTLED RETRY 1099511627776",
            "k THROTTLED RETRY 1099511627777",
            "k OK LIMIT 0",
            "k OK LIMIT 1125899906842624",
            "k OK LIMIT 1125899906842625",
            "k OK REMAINING 3",
            "k OK RESET 3",
            "k OK REMAINING -1 RESET 3",
            "k OK REMAINING 1125899906842625 RESET 3",
            "k OK REMAINING 3 RESET 1099511627777",
            "k OK REMAINING 3 RESET -1",
            "k OK LIMIT",
            "k OK AGE -1",
            "k OK AGE 1099511627777",
            "k OK AGE",
            "k OK AGE 1 AGE 2",
            "k OK COST 1",
        ],
    ),
    ("ratelimit.release", &["k a", "k", "k a b"]),
    ("ratelimit.renew", &["k a 5", "k a 1500 MS", "k a", "k a 0", "k a 5 ID b"]),
    (
        "ratelimit.top",
        &["", "ADMITTED", "SHADOWED COUNT 3", "COUNT 0", "COUNT -1", "DENIED ADMITTED", "RESET", "COUNT"],
    ),
];

/// One argument of a command's docs.
struct Doc {
    name: String,
    kind: String,
    token: Option<String>,
    optional: bool,
    subargs: Vec<Doc>,
}

fn docs_of(arguments: &redis::Value) -> Vec<Doc> {
    let arguments: Vec<HashMap<String, redis::Value>> = redis::from_redis_value(arguments).unwrap();
    let text = |a: &HashMap<String, redis::Value>, field: &str| -> Option<String> {
        a.get(field).map(|v| redis::from_redis_value(v).unwrap())
    };
    arguments
        .iter()
        .map(|a| Doc {
            name: text(a, "name").unwrap(),
            kind: text(a, "type").unwrap(),
            token: text(a, "token"),
            optional: a
                .get("flags")
                .is_some_and(|f| redis::from_redis_value::<Vec<String>>(f).unwrap().iter().any(|f| f == "optional")),
            subargs: a.get("arguments").map(docs_of).unwrap_or_default(),
        })
        .collect()
}

fn command_docs(con: &mut redis::Connection, command: &str) -> Vec<Doc> {
    let docs: Vec<redis::Value> = redis::cmd("COMMAND").arg("DOCS").arg(command).query(con).unwrap();
    let doc: HashMap<String, redis::Value> = redis::from_redis_value(&docs[1]).unwrap();
    docs_of(&doc["arguments"])
}

/// The options of a command's docs, by token: how many values each takes.
fn options(docs: &[Doc], into: &mut Vec<(String, usize)>) {
    for a in docs {
        match (&a.token, a.kind.as_str()) {
            (Some(token), "block") => into.push((token.clone(), a.subargs.len())),
            (Some(token), "pure-token") => into.push((token.clone(), 0)),
            (Some(token), _) => into.push((token.clone(), 1)),
            (None, "oneof") => options(&a.subargs, into),
            (None, _) => {}
        }
    }
}

/// An argument's value: an integer as a number, anything else as it was written.
fn value(word: &str) -> Json {
    word.parse::<i64>().map_or_else(|_| json!(word), |n| json!(n))
}

/// The line as a typed call reads it, by the command's docs (None: it cannot).
fn call(command: &str, docs: &[Doc], words: &[&str]) -> Option<Map<String, Json>> {
    let mut known = vec![];
    options(docs, &mut known);
    let is_option = |w: &str| known.iter().any(|(t, _)| t.eq_ignore_ascii_case(w));
    let mut call = Map::new();
    let mut rest = words.iter().copied().peekable();
    if command == "ratelimit.hitall" {
        let n: usize = rest.next()?.parse().ok().filter(|&n| n >= 1)?;
        let keys: Vec<&str> = rest.by_ref().take(n).collect();
        let mut limits = vec![];
        while let Some(limit) = rest.next_if(|w| !is_option(w)) {
            limits.push(json!([value(limit), value(rest.next()?)]));
        }
        if keys.len() != n || limits.len() != n {
            return None;
        }
        call.insert("keys".into(), json!(keys));
        call.insert("limits".into(), json!(limits));
    } else {
        for a in docs.iter().filter(|a| a.token.is_none() && !a.optional && a.kind != "oneof") {
            call.insert(a.name.clone(), value(rest.next()?));
        }
    }
    while let Some(word) = rest.next() {
        let (token, values) = known.iter().find(|(t, _)| t.eq_ignore_ascii_case(word))?;
        let read = (0..*values).map(|_| rest.next().map(value)).collect::<Option<Vec<Json>>>()?;
        let entry = match values {
            0 => json!(true),
            1 => read[0].clone(),
            _ => json!(read),
        };
        if call.insert(token.clone(), entry).is_some() {
            return None;
        }
    }
    Some(call)
}

fn words(line: &str) -> Vec<&str> {
    if line.is_empty() {
        vec![]
    } else {
        line.split(' ').collect()
    }
}

/// The server's answer to a line: its error reply, or None.
fn answer(con: &mut redis::Connection, command: &str, words: &[&str]) -> Option<String> {
    let reply: redis::RedisResult<redis::Value> = limiter(&command.to_uppercase()).arg(words).query(con);
    reply.err().map(|e| {
        let code = e.code().unwrap_or("ERR");
        format!("{code} {}", e.detail().unwrap_or_default())
    })
}

#[test]
fn every_case_is_what_the_server_answers() {
    let server = Server::start();
    let mut con = server.connect();
    let mut made = vec![];
    let mut differ = vec![];
    for &(command, lines) in CASES {
        // TOP is the module's alone.
        if library() && command == "ratelimit.top" {
            continue;
        }
        let docs = if library() { vec![] } else { command_docs(&mut con, command) };
        for line in lines {
            let words = words(line);
            // Each line on an empty server: what an earlier one stored changes nothing.
            let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
            let error = answer(&mut con, command, &words);
            let call = (!library()).then(|| call(command, &docs, &words)).flatten();
            // Refused by the module's time zone database, which no client holds: a client may
            // send it and let the server refuse.
            let zones = error.as_deref() == Some(UNKNOWN_ZONE);
            made.push(json!({ "command": command, "args": words, "error": error, "call": call, "server_data": zones }));
        }
    }
    let text = |cases: &[Json]| {
        let lines: Vec<String> = cases.iter().map(Json::to_string).collect();
        format!("[\n{}\n]\n", lines.join(",\n"))
    };
    if library() {
        let kept: Vec<Json> = serde_json::from_str(&std::fs::read_to_string(FILE).unwrap()).unwrap();
        let kept: HashMap<String, &Json> =
            kept.iter().map(|c| (format!("{} {}", c["command"], c["args"]), &c["error"])).collect();
        for case in &made {
            let key = format!("{} {}", case["command"], case["args"]);
            // The library's documented limits (docs/functions.md): refused in its own words.
            let limited = case["error"].as_str().is_some_and(|e| e.starts_with("ERR ratelimit library: "));
            if !limited && kept.get(&key) != Some(&&case["error"]) {
                differ.push(format!("{key}: the library answers {}, the module {:?}", case["error"], kept.get(&key)));
            }
        }
        assert!(differ.is_empty(), "{}", differ.join("\n"));
        return;
    }
    if std::env::var_os("RATELIMIT_WRITE_CASES").is_some() {
        std::fs::write(FILE, text(&made)).unwrap();
    }
    assert!(
        std::fs::read_to_string(FILE).unwrap_or_default() == text(&made),
        "{FILE} is not what the module answers: write it anew with RATELIMIT_WRITE_CASES=1 cargo test --test conformance"
    );
}

#[test]
fn every_reply_case_is_what_the_server_answers() {
    // The module's replies only: the differential (tests/functions.rs) holds the library's to
    // them, with the millisecond it allows (beside another make test, Valkey 9.1's TIME under a
    // stood clock was off it by a fraction of one, enough to move a GCRA decision on its edge).
    if library() {
        return;
    }
    let dir = common::TempDir::new();
    let clock = common::TestClock::at(&dir.0, RUN_AT);
    let server = Server::with(common::Config { clock: Some(&clock), ..common::Config::default() });
    let mut con = server.connect();
    let _: () = redis::cmd("SET").arg("leaked").arg(7).query(&mut con).unwrap();
    let mut made = vec![];
    for &(command, line) in RUN {
        let words = words(line);
        let reply: Vec<i64> = limiter(&command.to_uppercase()).arg(&words).query(&mut con).unwrap();
        let docs = command_docs(&mut con, command);
        let call = call(command, &docs, &words).unwrap();
        let decision = decision(command, &call, &reply);
        made.push(json!({ "command": command, "args": words, "call": call, "reply": reply, "decision": decision }));
    }
    let lines: Vec<String> = made.iter().map(Json::to_string).collect();
    let text = format!("[\n{}\n]\n", lines.join(",\n"));
    if std::env::var_os("RATELIMIT_WRITE_CASES").is_some() {
        std::fs::write(REPLIES, &text).unwrap();
    }
    assert!(
        std::fs::read_to_string(REPLIES).unwrap_or_default() == text,
        "{REPLIES} is not what the server answers: write it anew with RATELIMIT_WRITE_CASES=1 cargo test --test conformance"
    );
}
