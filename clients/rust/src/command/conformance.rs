//! The shared conformance cases (testkit/conformance/): with no server, the builders refuse
//! exactly what the module refuses, and read each shared reply as the module means it.

use std::time::Duration;

use serde_json::{Map, Value};

use super::{adaptive, gcra, lease, top, window, Command};
use crate::limits::{Adaptive, AllOptions, Calendar, Fixed, Limit, Rate, Report, Sliding, TopOptions, TopView, Window};
use crate::results::{Decision, Grant, FOREVER};
use crate::{Error, Reply};

const CASES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testkit/conformance/");

/// A built call's reply read into what the replies' cases state (a decision, and what was granted).
type Read = Box<dyn Fn(&Reply) -> Result<Value, Error>>;

fn reading<T: 'static>(call: Result<Command<T>, Error>, state: fn(T) -> Value) -> Result<Read, Error> {
    let call = call?;
    Ok(Box::new(move |reply| (call.parse)(reply).map(state)))
}

fn ignored<T>(_: T) -> Value {
    Value::Null
}

/// A value the client's types cannot hold (a limit of "x" or -1, a period of "inf"): not its to send.
struct NotTyped;

fn count(v: &Value) -> Result<u64, NotTyped> {
    v.as_u64().filter(|&n| n < 1 << 53).ok_or(NotTyped)
}

/// COST or TOKENS: absent is 1; negative is a give-back of that much.
fn signed(c: &Map<String, Value>, name: &str) -> Result<i64, NotTyped> {
    match c.get(name) {
        None => Ok(1),
        Some(v) => v.as_i64().filter(|n| n.unsigned_abs() < 1 << 53).ok_or(NotTyped),
    }
}

fn length(v: &Value, ms: bool) -> Result<Duration, NotTyped> {
    let n = count(v)?;
    Ok(if ms { Duration::from_millis(n) } else { Duration::from_secs(n) })
}

fn window_of(v: &Value, ms: bool) -> Result<Window, NotTyped> {
    match v.as_str() {
        Some("day") if !ms => Ok(Window::Calendar(Calendar::Day)),
        Some("week") if !ms => Ok(Window::Calendar(Calendar::Week)),
        Some("month") if !ms => Ok(Window::Calendar(Calendar::Month)),
        Some("year") if !ms => Ok(Window::Calendar(Calendar::Year)),
        Some(_) => Err(NotTyped),
        None => length(v, ms).map(Window::Length),
    }
}

fn period(v: &Value) -> Result<Duration, NotTyped> {
    let seconds = match v {
        Value::String(text) => text.parse::<f64>().map_err(|_| NotTyped)?,
        v => v.as_f64().ok_or(NotTyped)?,
    };
    let ns = (seconds * 1e9).round();
    (ns.is_finite() && ns >= 0.0 && ns < u64::MAX as f64).then(|| Duration::from_nanos(ns as u64)).ok_or(NotTyped)
}

/// A case's call built as the client builds it (`Err(NotTyped)`: the client cannot send it).
fn typed_call(command: &str, c: &Map<String, Value>) -> Result<Result<Read, Error>, NotTyped> {
    let flag = |name: &str| c.get(name) == Some(&Value::Bool(true));
    let key = c.get("key").and_then(Value::as_str).unwrap_or("k").to_string();
    let (partial, reserve) = (flag("PARTIAL"), flag("RESERVE"));
    Ok(match command {
        "ratelimit.hit" => {
            let cost = signed(c, "COST")?;
            let mut f = Fixed::new(count(&c["limit"])?, window_of(&c["window"], flag("MS"))?);
            f.align = flag("ALIGN");
            f.tz = c.get("TZ").and_then(Value::as_str).map(str::to_string);
            if cost < 0 {
                if partial || reserve {
                    return Err(NotTyped);
                }
                return Ok(reading(window::refund_hit(&key, &f, cost.unsigned_abs()), decision));
            }
            f.cost = cost as u64;
            match (partial, reserve) {
                (false, false) => reading(window::hit(&key, &f), decision),
                (true, false) => reading(window::hit_up_to(&key, &f), grant),
                (false, true) => reading(window::reserve_hit(&key, &f), ignored),
                (true, true) => reading(window::reserve_hit_up_to(&key, &f), ignored),
            }
        }
        "ratelimit.peek" => {
            let cost = signed(c, "COST")?;
            reading(window::peek(&key, count(&c["limit"])?, u64::try_from(cost).map_err(|_| NotTyped)?), decision)
        }
        "ratelimit.slide" => {
            let cost = signed(c, "COST")?;
            let mut s = Sliding::new(count(&c["limit"])?, length(&c["window"], flag("MS"))?);
            if cost < 0 {
                if partial || reserve || flag("PEEK") {
                    return Err(NotTyped);
                }
                return Ok(reading(window::refund_slide(&key, &s, cost.unsigned_abs()), decision));
            }
            s.cost = cost as u64;
            match (partial, reserve, flag("PEEK")) {
                (false, false, false) => reading(window::slide(&key, &s), decision),
                (false, false, true) => reading(window::slide_peek(&key, &s), decision),
                (true, false, false) => reading(window::slide_up_to(&key, &s), grant),
                (false, true, false) => reading(window::reserve_slide(&key, &s), ignored),
                (true, true, false) => reading(window::reserve_slide_up_to(&key, &s), ignored),
                _ => return Err(NotTyped),
            }
        }
        "ratelimit.gcra" => {
            let tokens = signed(c, "TOKENS")?;
            let mut r = Rate::new(count(&c["max_burst"])?, count(&c["tokens_per_period"])?, period(&c["period"])?);
            r.align = flag("ALIGN");
            if tokens < 0 {
                if partial || reserve {
                    return Err(NotTyped);
                }
                return Ok(reading(gcra::refund_gcra(&key, &r, tokens.unsigned_abs()), decision));
            }
            r.tokens = tokens as u64;
            match (partial, reserve) {
                (false, false) => reading(gcra::gcra(&key, &r), decision),
                (true, false) => reading(gcra::gcra_up_to(&key, &r), grant),
                (false, true) => reading(gcra::reserve_gcra(&key, &r), ignored),
                (true, true) => reading(gcra::reserve_gcra_up_to(&key, &r), ignored),
            }
        }
        "ratelimit.hitall" => {
            let keys = c["keys"].as_array().ok_or(NotTyped)?;
            let pairs = c["limits"].as_array().ok_or(NotTyped)?;
            let mut limits = Vec::new();
            for (key, pair) in keys.iter().zip(pairs) {
                let key = key.as_str().ok_or(NotTyped)?;
                limits.push(Limit::new(key, count(&pair[0])?, window_of(&pair[1], flag("MS"))?));
            }
            let mut o = AllOptions::new();
            o.cost = u64::try_from(signed(c, "COST")?).map_err(|_| NotTyped)?;
            (o.sliding, o.align) = (flag("SLIDE"), flag("ALIGN"));
            o.tz = c.get("TZ").and_then(Value::as_str).map(str::to_string);
            if let Some(tokens) = c.get("TOKENS") {
                let keys = usize::try_from(count(&tokens[1])?).map_err(|_| NotTyped)?;
                o.tokens = Some((count(&tokens[0])?, keys));
            }
            if reserve {
                reading(window::reserve_all(&limits, &o), ignored)
            } else {
                reading(window::hit_all(&limits, &o), ignored)
            }
        }
        "ratelimit.acquire" => {
            let id = c.get("ID").map(|id| id.as_str().filter(|id| !id.is_empty()).ok_or(NotTyped)).transpose()?;
            reading(lease::acquire(&key, count(&c["limit"])?, length(&c["lease"], flag("MS"))?, id), ignored)
        }
        "ratelimit.release" => reading(lease::release(&key, c["id"].as_str().ok_or(NotTyped)?), ignored),
        "ratelimit.renew" => {
            let id = c["id"].as_str().ok_or(NotTyped)?;
            reading(lease::renew(&key, id, length(&c["lease"], flag("MS"))?), ignored)
        }
        "ratelimit.top" => {
            let views: Vec<TopView> =
                [("DENIED", TopView::Denied), ("ADMITTED", TopView::Admitted), ("SHADOWED", TopView::Shadowed)]
                    .into_iter()
                    .filter(|(name, _)| flag(name))
                    .map(|(_, view)| view)
                    .collect();
            if views.len() > 1 {
                return Err(NotTyped);
            }
            let count = c.get("COUNT").map(count).transpose()?;
            let o = TopOptions { view: views.first().copied().unwrap_or_default(), count, reset: flag("RESET") };
            reading(top::top(&o), ignored)
        }
        "ratelimit.adapt" => {
            let cost = u64::try_from(signed(c, "COST")?).map_err(|_| NotTyped)?;
            let a = Adaptive::new(
                count(&c["floor"])?,
                count(&c["start"])?,
                count(&c["ceiling"])?,
                length(&c["window"], flag("MS"))?,
            )
            .with_cost(cost);
            let a = if flag("TURN") { a.at_turn() } else { a };
            match (partial, reserve) {
                (false, false) => reading(adaptive::adapt(&key, &a), decision),
                (true, false) => reading(adaptive::adapt_up_to(&key, &a), grant),
                (false, true) => reading(adaptive::reserve_adapt(&key, &a), ignored),
                (true, true) => reading(adaptive::reserve_adapt_up_to(&key, &a), ignored),
            }
        }
        "ratelimit.report" => {
            // A typed report has one outcome, and a remaining with its reset.
            if flag("OK") == flag("THROTTLED") || c.contains_key("REMAINING") != c.contains_key("RESET") {
                return Err(NotTyped);
            }
            let mut r = if flag("OK") { Report::ok() } else { Report::throttled() };
            if let Some(retry) = c.get("RETRY") {
                r = r.with_retry_after(Duration::from_millis(count(retry)?));
            }
            if let Some(limit) = c.get("LIMIT") {
                r = r.with_limit(count(limit)?);
            }
            if let (Some(left), Some(reset)) = (c.get("REMAINING"), c.get("RESET")) {
                r = r.with_remaining(count(left)?, Duration::from_millis(count(reset)?));
            }
            if let Some(age) = c.get("AGE") {
                r = r.with_age(Duration::from_millis(count(age)?));
            }
            reading(adaptive::report(&key, &r), ignored)
        }
        other => panic!("a case of {other}, which this test does not know"),
    })
}

/// A decision as the replies' cases state it: ms, -1 for never, null for none.
fn decision(d: Decision) -> Value {
    let ms = |d: Duration| if d == FOREVER { Value::from(-1) } else { Value::from(d.as_millis() as u64) };
    serde_json::json!({
        "allowed": d.allowed,
        "count": d.count,
        "remaining": d.remaining,
        "limit": d.limit,
        "reset_after_ms": ms(d.reset_after),
        "retry_after_ms": d.retry_after.map_or(Value::Null, ms),
        "window_ms": d.window.map_or(Value::Null, ms),
    })
}

fn grant(g: Grant) -> Value {
    let mut stated = decision(g.decision);
    stated["granted"] = Value::from(g.granted);
    stated
}

fn cases(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(format!("{CASES}{file}")).expect("the shared cases");
    serde_json::from_str(&text).expect("JSON")
}

#[test]
fn refuses_exactly_what_the_module_refuses() {
    let cases = cases("arguments.json");
    let mut sent = 0;
    let mut wrong = Vec::new();
    for case in &cases {
        let (Some(call), Some(command)) = (case["call"].as_object(), case["command"].as_str()) else { continue };
        let Ok(built) = typed_call(command, call) else { continue };
        sent += 1;
        let refused = match built {
            Ok(_) => None,
            Err(Error::InvalidArgument(message)) => Some(message),
            Err(other) => panic!("{case}: {other:?}"),
        };
        if case["server_data"] == Value::Bool(true) && refused.is_none() {
            continue;
        }
        if refused.is_some() == case["error"].is_null() {
            wrong.push(format!(
                "{command} {}: the module answers {}, the client {refused:?}",
                case["args"], case["error"]
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(sent >= 85, "only {sent} of the {} cases sent as typed calls", cases.len());
}

#[test]
fn reads_each_reply_as_the_module_means_it() {
    for case in cases("replies.json") {
        let call = case["call"].as_object().expect("a call");
        let Ok(Ok(read)) = typed_call(case["command"].as_str().expect("a command"), call) else {
            panic!("{case}: no call");
        };
        let reply = Reply::Array(
            case["reply"]
                .as_array()
                .expect("a reply")
                .iter()
                .map(|n| Reply::Int(n.as_i64().expect("an integer")))
                .collect(),
        );
        let read = read(&reply).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(read, case["decision"], "{} {}", case["command"], case["args"]);
    }
}
