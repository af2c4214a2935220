//! The adaptive limit's calls (RATELIMIT.ADAPT and RATELIMIT.REPORT), as the module's
//! `src/core/args/adaptive.rs` reads them.

use std::time::Duration;

use super::{counted, granting, integers, length, ms, positive, reserving, reserving_up_to, Command, Parse};
use crate::error::{invalid, unexpected_reply};
use crate::limits::{Adaptive, Report};
use crate::reply::Reply;
use crate::results::{Decision, Grant, Learned, Reservation};
use crate::Error;

/// Every scaled quantity of the module's adaptive limit stays within 2^50, every span within 2^40 ms.
const MAX_SCALED: i64 = 1 << 50;
const MAX_SPAN_MS: u128 = 1 << 40;

/// RATELIMIT.ADAPT: a call decided against the limit the fleet learns.
pub(crate) fn adapt(key: &str, a: &Adaptive) -> Result<Command<Decision>, Error> {
    let (floor, start, ceiling) =
        (positive(a.floor, "floor")?, positive(a.start, "start")?, positive(a.ceiling, "ceiling")?);
    let cost = positive(a.cost, "COST")?;
    let (window, in_ms) = length(a.window, "window")?;
    let window_ms = a.window.as_millis();
    if window_ms > MAX_SPAN_MS {
        return Err(invalid("window is too large"));
    }
    let window_ms = window_ms as i64;
    if floor > start || start > ceiling {
        return Err(invalid("floor <= start <= ceiling must hold"));
    }
    if ceiling > MAX_SCALED / window_ms {
        return Err(invalid("ceiling * window is too large"));
    }
    if cost > MAX_SCALED / window_ms {
        return Err(invalid("COST * window is too large"));
    }
    let mut args = vec![floor.to_string(), start.to_string(), ceiling.to_string(), window];
    if in_ms {
        args.push("MS".to_string());
    }
    args.extend(counted(cost, "COST"));
    if a.turn {
        args.push("TURN".to_string());
    }
    Ok(Command::new("RATELIMIT.ADAPT", Some("ratelimit_adapt"), vec![key.to_string()], args, read_adaptive(a.window)))
}

/// ADAPT's `[allowed, limit, remaining, retry_after_ms, reset_ms]`.
pub(crate) fn read_adaptive(window: Duration) -> Parse<Decision> {
    Box::new(move |reply: &Reply| {
        let n = integers(reply, 5).ok_or_else(|| unexpected_reply("an adaptive limit", reply))?;
        let allowed = n[0] == 1;
        Ok(Decision {
            allowed,
            count: (n[1] - n[2]).max(0),
            remaining: n[2],
            limit: n[1],
            reset_after: ms(n[4]),
            retry_after: (!allowed).then(|| ms(n[3])),
            window: Some(window),
        })
    })
}

/// RATELIMIT.ADAPT with PARTIAL: as many of the cost as the bucket has whole, at least one.
pub(crate) fn adapt_up_to(key: &str, a: &Adaptive) -> Result<Command<Grant>, Error> {
    Ok(granting(adapt(key, a)?, None, 5))
}

/// RATELIMIT.ADAPT with RESERVE: the cost is an estimate, settled with what was used.
pub(crate) fn reserve_adapt(key: &str, a: &Adaptive) -> Result<Command<Reservation>, Error> {
    reserving(adapt(key, a)?, positive(a.cost, "COST")?, "COST")
}

/// RATELIMIT.ADAPT with PARTIAL and RESERVE.
pub(crate) fn reserve_adapt_up_to(key: &str, a: &Adaptive) -> Result<Command<Reservation>, Error> {
    reserving_up_to(adapt(key, a)?, positive(a.cost, "COST")?, "COST", None, 5)
}

/// A provider's wait in whole ms, rounded up, within the module's bound.
fn span_ms(d: Duration, name: &str) -> Result<String, Error> {
    let ms = d.as_nanos().div_ceil(1_000_000);
    if ms > MAX_SPAN_MS {
        return Err(invalid(format!("{name} is too large")));
    }
    Ok(ms.to_string())
}

/// RATELIMIT.REPORT: how the provider answered a call decided at `key`; `None` where no limit is
/// learned there.
pub(crate) fn report(key: &str, r: &Report) -> Result<Command<Option<Learned>>, Error> {
    let mut args = vec![if r.throttled { "THROTTLED" } else { "OK" }.to_string()];
    if let Some(wait) = r.retry_after {
        if !r.throttled {
            return Err(invalid("syntax error: RETRY needs THROTTLED"));
        }
        args.extend(["RETRY".to_string(), span_ms(wait, "RETRY")?]);
    }
    if let Some(limit) = r.limit {
        if positive(limit, "LIMIT")? > MAX_SCALED {
            return Err(invalid("LIMIT is too large"));
        }
        args.extend(["LIMIT".to_string(), limit.to_string()]);
    }
    if let Some((remaining, reset)) = r.remaining {
        if remaining > MAX_SCALED as u64 {
            return Err(invalid("REMAINING is too large"));
        }
        args.extend(["REMAINING".to_string(), remaining.to_string(), "RESET".to_string(), span_ms(reset, "RESET")?]);
    }
    if let Some(age) = r.age {
        args.extend(["AGE".to_string(), span_ms(age, "AGE")?]);
    }
    let parse = Box::new(|reply: &Reply| {
        if matches!(reply, Reply::Nil) {
            return Ok(None);
        }
        let n = integers(reply, 3).ok_or_else(|| unexpected_reply("a report", reply))?;
        Ok(Some(Learned { limit: n[0], decreased: n[1] == 1, hold: ms(n[2]) }))
    });
    Ok(Command::new("RATELIMIT.REPORT", Some("ratelimit_report"), vec![key.to_string()], args, parse))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_terms_are_checked_before_a_round_trip() {
        let minute = Duration::from_secs(60);
        let refused = |a: Adaptive| adapt("k", &a).err().map(|e| e.to_string());
        assert!(refused(Adaptive::new(10, 5, 100, minute)).unwrap().contains("floor <= start <= ceiling must hold"));
        assert!(refused(Adaptive::new(1, 1, 1 << 40, minute)).unwrap().contains("ceiling * window is too large"));
        let call = adapt("k", &Adaptive::new(1, 2, 3, Duration::from_millis(1500)).with_cost(2)).unwrap();
        assert_eq!(call.args, ["1", "2", "3", "1500", "MS", "COST", "2"]);
        let r = Report::throttled().with_retry_after(Duration::from_secs(1)).with_limit(5);
        let call = report("k", &r.with_remaining(2, Duration::from_micros(2500))).unwrap();
        assert_eq!(call.args, ["THROTTLED", "RETRY", "1000", "LIMIT", "5", "REMAINING", "2", "RESET", "3"]);
        assert!(report("k", &Report::ok().with_retry_after(Duration::from_secs(1))).is_err());
    }
}
