//! The calls against `COMMAND DOCS`: every argument the module documents is taken by a call (a
//! parameter, a builder method, or a form the calls fold it into), and the calls send only the
//! tokens it documents. A new option in the module, or a renamed one, fails here.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Kind, Server};
use redis::aio::MultiplexedConnection;
use redis::Value;
use redis_ratelimit_client::{
    Adaptive, AllOptions, Calendar, Error, Fixed, Limit, Limiter, Rate, RedisConnection, Reply, Report, Reservation,
    Sliding, TopOptions, TopView, Transport,
};

/// Where each documented argument of each command is taken.
const TAKEN: &[(&str, &[(&str, &str)])] = &[
    (
        "ratelimit.hit",
        &[
            ("key", "param"),
            ("limit", "Fixed::new"),
            ("window", "Fixed::new"),
            ("cost", "Fixed::with_cost"),
            ("ms", "folded"),
            ("partial", "folded"),
            ("reserve", "folded"),
            ("align", "Fixed::aligned"),
            ("zone", "Fixed::in_zone"),
        ],
    ),
    ("ratelimit.peek", &[("key", "param"), ("limit", "param"), ("cost", "param")]),
    (
        "ratelimit.slide",
        &[
            ("key", "param"),
            ("limit", "Sliding::new"),
            ("window", "Sliding::new"),
            ("cost", "Sliding::with_cost"),
            ("ms", "folded"),
            ("partial", "folded"),
            ("peek", "folded"),
            ("reserve", "folded"),
        ],
    ),
    (
        "ratelimit.hitall",
        &[
            ("numkeys", "folded"),
            ("key", "Limit::new"),
            ("limit", "Limit::new"),
            ("window", "Limit::new"),
            ("cost", "AllOptions::with_cost"),
            ("ms", "folded"),
            ("slide", "AllOptions::sliding"),
            ("align", "AllOptions::aligned"),
            ("zone", "AllOptions::in_zone"),
            ("tokens", "AllOptions::with_tokens"),
            ("numtokenkeys", "AllOptions::with_tokens"),
            ("reserve", "folded"),
        ],
    ),
    (
        "ratelimit.gcra",
        &[
            ("key", "param"),
            ("max_burst", "Rate::new"),
            ("tokens_per_period", "Rate::new"),
            ("period", "Rate::new"),
            ("count", "Rate::with_tokens"),
            ("partial", "folded"),
            ("reserve", "folded"),
            ("align", "Rate::aligned"),
        ],
    ),
    ("ratelimit.settle", &[("key", "Reservation::key"), ("reservation", "Reservation::token"), ("used", "param")]),
    (
        "ratelimit.acquire",
        &[("key", "param"), ("limit", "param"), ("lease", "param"), ("ms", "folded"), ("id", "param")],
    ),
    ("ratelimit.release", &[("key", "param"), ("id", "param")]),
    ("ratelimit.renew", &[("key", "param"), ("id", "param"), ("lease", "param"), ("ms", "folded")]),
    (
        "ratelimit.top",
        &[
            ("denied", "TopOptions::view"),
            ("admitted", "TopOptions::view"),
            ("shadowed", "TopOptions::view"),
            ("count", "TopOptions::count"),
            ("reset", "TopOptions::reset"),
        ],
    ),
    (
        "ratelimit.adapt",
        &[
            ("key", "param"),
            ("floor", "Adaptive::new"),
            ("start", "Adaptive::new"),
            ("ceiling", "Adaptive::new"),
            ("window", "Adaptive::new"),
            ("cost", "Adaptive::with_cost"),
            ("turn", "Adaptive::at_turn"),
            ("ms", "folded"),
            ("partial", "folded"),
            ("reserve", "folded"),
        ],
    ),
    (
        "ratelimit.report",
        &[
            ("key", "param"),
            ("ok", "Report::ok"),
            ("throttled", "Report::throttled"),
            ("retry", "Report::with_retry_after"),
            ("limit", "Report::with_limit"),
            ("remaining", "Report::with_remaining"),
            ("reset", "Report::with_remaining"),
            ("age", "Report::with_age"),
        ],
    ),
];

/// A transport that keeps every module command sent through it.
#[derive(Clone)]
struct Recording {
    inner: RedisConnection<MultiplexedConnection>,
    sent: Arc<Mutex<Vec<Vec<String>>>>,
}

impl Transport for Recording {
    async fn send(&self, key: Option<String>, args: Vec<String>) -> Result<Reply, Error> {
        if args.len() > 1 && args[0].to_ascii_lowercase().starts_with("ratelimit.") {
            self.sent.lock().unwrap().push(args.clone());
        }
        self.inner.send(key, args).await
    }

    async fn send_to_primaries(&self, args: Vec<String>) -> Result<Vec<Result<Reply, Error>>, Error> {
        self.inner.send_to_primaries(args).await
    }
}

fn refused(r: Result<(), Error>) {
    assert!(!matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
}

/// Every call with every option set, as the limiter sends it to the module (the replies do not
/// matter: the words sent do).
async fn every_option(rl: &Limiter<Recording>) {
    let ms = Duration::from_millis(1500);
    refused(
        rl.hit("k", &Fixed::new(5, Calendar::Month).with_cost(2).aligned().in_zone("Europe/Paris")).await.map(drop),
    );
    refused(rl.reserve_hit("k", &Fixed::new(5, ms).with_cost(2)).await.map(drop));
    refused(rl.reserve_hit_up_to("k", &Fixed::new(5, Duration::from_secs(60)).with_cost(9)).await.map(drop));
    refused(rl.peek("k", 5, 2).await.map(drop));
    refused(rl.slide_peek("k", &Sliding::new(5, ms).with_cost(2)).await.map(drop));
    refused(rl.reserve_slide_up_to("k", &Sliding::new(5, Duration::from_secs(1)).with_cost(9)).await.map(drop));
    let limits = [Limit::new("{a}1", 1, ms), Limit::new("{a}2", 2, Calendar::Day)];
    let options = AllOptions::new().with_cost(2).aligned().in_zone("+01:00").with_tokens(40, 1);
    refused(rl.reserve_all(&limits, &options).await.map(drop));
    refused(rl.hit_all(&limits[..1], &AllOptions::new().sliding()).await.map(drop));
    let rate = Rate::new(1, 2, Duration::from_millis(500)).with_tokens(2);
    refused(rl.gcra_up_to("g", &rate.aligned()).await.map(drop));
    refused(rl.reserve_gcra("g", &rate).await.map(drop));
    let decision = rl.peek("k", 5, 1).await.unwrap();
    refused(rl.settle(&Reservation::from_parts("k", "h:1:1:1:1:01234567", 3, decision), 3).await.map(drop));
    refused(rl.acquire("l", 2, ms, Some("i")).await.map(drop));
    refused(rl.release("l", "i").await.map(drop));
    refused(rl.renew("l", "i", ms).await.map(drop));
    refused(rl.top(&TopOptions { view: TopView::Admitted, count: Some(3), reset: true }).await.map(drop));
    refused(rl.adapt_up_to("a", &Adaptive::new(1, 2, 3, ms).with_cost(2).at_turn()).await.map(drop));
    refused(rl.reserve_adapt("a", &Adaptive::new(1, 2, 3, ms).with_cost(2)).await.map(drop));
    refused(rl.reserve_adapt_up_to("a", &Adaptive::new(1, 2, 3, ms).with_cost(9)).await.map(drop));
    let report = Report::throttled().with_retry_after(ms).with_limit(5).with_remaining(2, ms).with_age(ms);
    refused(rl.report("a", &report).await.map(drop));
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

fn fields(v: &Value) -> BTreeMap<String, Value> {
    match v {
        Value::Array(items) => items.chunks_exact(2).filter_map(|p| Some((text(&p[0])?, p[1].clone()))).collect(),
        Value::Map(pairs) => pairs.iter().filter_map(|(k, v)| Some((text(k)?, v.clone()))).collect(),
        _ => BTreeMap::new(),
    }
}

/// Each documented argument's name (but blocks' and choices'), and each token.
fn walk(args: &Value, names: &mut BTreeSet<String>, tokens: &mut BTreeSet<String>) {
    let Value::Array(args) = args else { return };
    for arg in args {
        let f = fields(arg);
        let kind = f.get("type").and_then(text).unwrap_or_default();
        if kind != "block" && kind != "oneof" {
            names.extend(f.get("name").and_then(text));
        }
        tokens.extend(f.get("token").and_then(text).map(|t| t.to_ascii_uppercase()));
        if let Some(nested) = f.get("arguments") {
            walk(nested, names, tokens);
        }
    }
}

#[tokio::test]
async fn calls_match_command_docs() {
    let server = Server::start(Kind::Module);
    let recording = Recording { inner: RedisConnection::new(server.connection().await), sent: Arc::default() };
    let rl = Limiter::new(recording.clone());
    every_option(&rl).await;
    let sent = recording.sent.lock().unwrap().clone();
    let mut con = server.connection().await;
    let mut errors = Vec::new();
    for (command, taken) in TAKEN {
        let reply: Value = redis::cmd("COMMAND").arg("DOCS").arg(*command).query_async(&mut con).await.unwrap();
        let docs = fields(&reply).remove(*command).unwrap_or_else(|| panic!("{command}: no docs"));
        let (mut names, mut tokens) = (BTreeSet::new(), BTreeSet::new());
        walk(fields(&docs).get("arguments").unwrap(), &mut names, &mut tokens);
        let taken: BTreeSet<String> = taken.iter().map(|(name, _)| name.to_string()).collect();
        for name in names.difference(&taken) {
            errors.push(format!("{command}: {name} is documented, and taken nowhere"));
        }
        for name in taken.difference(&names) {
            errors.push(format!("{command}: {name} is taken, and not documented"));
        }
        let calls: Vec<&Vec<String>> = sent.iter().filter(|args| args[0].eq_ignore_ascii_case(command)).collect();
        if calls.is_empty() {
            errors.push(format!("{command}: no call sent it"));
        }
        for args in calls {
            for word in
                args.iter().skip(1).filter(|w| w.chars().all(|c| c.is_ascii_uppercase() || c == '_') && !w.is_empty())
            {
                if !tokens.contains(word) {
                    errors.push(format!("{command}: sent {word}, which COMMAND DOCS does not document"));
                }
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}
