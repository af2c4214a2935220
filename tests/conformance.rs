//! The argument cases every client runs (testkit/conformance/arguments.json): each line of
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
