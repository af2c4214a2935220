//! The fixed and sliding windows' calls (RATELIMIT.HIT, PEEK, SLIDE, HITALL), as the module's
//! `src/core/args/window.rs` reads them.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use super::{counted, granting, integers, length, ms, nonzero, positive, reserving, reserving_up_to, Command, Parse};
use crate::error::{invalid, unexpected_reply};
use crate::limits::{AllOptions, Fixed, Limit, Sliding, Window};
use crate::results::{Decision, Grant, MultiDecision, MultiReservation, Reservation, FOREVER};
use crate::{Error, Reply};

/// Reads a fixed window's four numbers: allowed, count, remaining, reset in ms.
pub(crate) fn read_fixed(limit: i64, window: Option<Duration>, cost: i64) -> Parse<Decision> {
    Box::new(move |reply| {
        let n = integers(reply, 4).ok_or_else(|| unexpected_reply("a fixed window", reply))?;
        Ok(fixed_decision(&n, limit, window, cost))
    })
}

fn fixed_decision(n: &[i64], limit: i64, window: Option<Duration>, cost: i64) -> Decision {
    let allowed = n[0] == 1;
    let reset_after = ms(n[3]);
    let retry_after = (!allowed).then_some(if cost > limit { FOREVER } else { reset_after });
    Decision { allowed, count: n[1], remaining: n[2], limit, reset_after, retry_after, window }
}

/// Reads a sliding window's five numbers: allowed, count, remaining, retry and reset in ms.
pub(crate) fn read_sliding(limit: i64, window: Option<Duration>) -> Parse<Decision> {
    Box::new(move |reply| {
        let n = integers(reply, 5).ok_or_else(|| unexpected_reply("a sliding window", reply))?;
        Ok(sliding_decision(&n, limit, window))
    })
}

fn sliding_decision(n: &[i64], limit: i64, window: Option<Duration>) -> Decision {
    let allowed = n[0] == 1;
    let retry_after = (!allowed).then(|| ms(n[3]));
    Decision { allowed, count: n[1], remaining: n[2], limit, reset_after: ms(n[4]), retry_after, window }
}

/// A fixed window as sent: its text, and whether in ms.
fn fixed_window(window: Window) -> Result<(String, bool), Error> {
    match window {
        Window::Calendar(unit) => Ok((unit.as_str().to_string(), false)),
        Window::Length(d) => length(d, "window"),
    }
}

fn length_of(window: Window) -> Option<Duration> {
    match window {
        Window::Length(d) => Some(d),
        Window::Calendar(_) => None,
    }
}

/// ALIGN and TZ, as sent.
fn laid_on_clock(calendar: bool, align: bool, tz: Option<&str>) -> Result<Vec<String>, Error> {
    let mut args = Vec::new();
    if align {
        args.push("ALIGN".to_string());
    }
    if let Some(tz) = tz {
        if !calendar {
            return Err(invalid("TZ needs a calendar window (day, week, month or year)"));
        }
        args.extend(["TZ".to_string(), tz.to_string()]);
    }
    Ok(args)
}

/// RATELIMIT.HIT with `cost` (negative: given back).
fn hit_costing(key: &str, f: &Fixed, cost: i64) -> Result<Command<Decision>, Error> {
    let limit = positive(f.limit, "limit")?;
    let (window, in_ms) = fixed_window(f.window)?;
    let calendar = matches!(f.window, Window::Calendar(_));
    let clock = laid_on_clock(calendar, f.align, f.tz.as_deref())?;
    let mut args = vec![limit.to_string(), window];
    args.extend(counted(cost, "COST"));
    if in_ms {
        args.push("MS".to_string());
    }
    args.extend(clock);
    let read = read_fixed(limit, length_of(f.window), cost);
    Ok(Command::new("RATELIMIT.HIT", Some("ratelimit_hit"), vec![key.to_string()], args, read))
}

/// RATELIMIT.HIT: a fixed window counted, its expiry set in the same step.
pub(crate) fn hit(key: &str, f: &Fixed) -> Result<Command<Decision>, Error> {
    hit_costing(key, f, nonzero(f.cost, "COST")?)
}

/// RATELIMIT.PEEK: whether a HIT of `cost` would be admitted, writing nothing.
pub(crate) fn peek(key: &str, limit: u64, cost: u64) -> Result<Command<Decision>, Error> {
    let limit = positive(limit, "limit")?;
    let cost = positive(cost, "COST")?;
    let mut args = vec![limit.to_string()];
    args.extend(counted(cost, "COST"));
    let mut call = Command::new(
        "RATELIMIT.PEEK",
        Some("ratelimit_peek"),
        vec![key.to_string()],
        args,
        read_fixed(limit, None, cost),
    );
    call.read_only = true;
    Ok(call)
}

fn slide_costing(key: &str, s: &Sliding, cost: i64) -> Result<Command<Decision>, Error> {
    let limit = positive(s.limit, "limit")?;
    let (window, in_ms) = length(s.window, "window")?;
    let mut args = vec![limit.to_string(), window];
    args.extend(counted(cost, "COST"));
    if in_ms {
        args.push("MS".to_string());
    }
    let read = read_sliding(limit, Some(s.window));
    Ok(Command::new("RATELIMIT.SLIDE", Some("ratelimit_slide"), vec![key.to_string()], args, read))
}

/// RATELIMIT.SLIDE: a sliding window (the previous window weighed by its overlap).
pub(crate) fn slide(key: &str, s: &Sliding) -> Result<Command<Decision>, Error> {
    slide_costing(key, s, nonzero(s.cost, "COST")?)
}

/// RATELIMIT.SLIDE with PEEK: the decision without counting.
pub(crate) fn slide_peek(key: &str, s: &Sliding) -> Result<Command<Decision>, Error> {
    Ok(slide(key, s)?.then(&["PEEK"], |reply, own| own(reply)))
}

/// A give-back's amount, at least 1: the cost it sends is its negative.
pub(crate) fn amount(n: u64) -> Result<i64, Error> {
    positive(n, "amount").map(|n| -n)
}

/// RATELIMIT.HIT with a negative cost: `amount` given back to the window running now.
pub(crate) fn refund_hit(key: &str, f: &Fixed, amount_back: u64) -> Result<Command<Decision>, Error> {
    hit_costing(key, f, amount(amount_back)?)
}

/// RATELIMIT.SLIDE with a negative cost.
pub(crate) fn refund_slide(key: &str, s: &Sliding, amount_back: u64) -> Result<Command<Decision>, Error> {
    slide_costing(key, s, amount(amount_back)?)
}

/// RATELIMIT.HIT with PARTIAL: as much of the cost as the window has left, at least one; none
/// left, it is denied until the window ends, whatever the cost.
pub(crate) fn hit_up_to(key: &str, f: &Fixed) -> Result<Command<Grant>, Error> {
    let call = hit(key, f)?;
    let limit = positive(f.limit, "limit")?;
    Ok(granting(call, Some(read_fixed(limit, length_of(f.window), 1)), 4))
}

/// RATELIMIT.SLIDE with PARTIAL (a denial's retry is for one).
pub(crate) fn slide_up_to(key: &str, s: &Sliding) -> Result<Command<Grant>, Error> {
    Ok(granting(slide(key, s)?, None, 5))
}

/// RATELIMIT.HIT with RESERVE: the cost (an estimate) counted now, and a reservation to settle.
pub(crate) fn reserve_hit(key: &str, f: &Fixed) -> Result<Command<Reservation>, Error> {
    reserving(hit(key, f)?, nonzero(f.cost, "COST")?, "COST")
}

/// RATELIMIT.HIT with PARTIAL and RESERVE.
pub(crate) fn reserve_hit_up_to(key: &str, f: &Fixed) -> Result<Command<Reservation>, Error> {
    let call = hit(key, f)?;
    let limit = positive(f.limit, "limit")?;
    // Denied only with none left: then again when the window ends, whatever the cost.
    reserving_up_to(call, nonzero(f.cost, "COST")?, "COST", Some(read_fixed(limit, length_of(f.window), 1)), 4)
}

/// RATELIMIT.SLIDE with RESERVE.
pub(crate) fn reserve_slide(key: &str, s: &Sliding) -> Result<Command<Reservation>, Error> {
    reserving(slide(key, s)?, nonzero(s.cost, "COST")?, "COST")
}

/// RATELIMIT.SLIDE with PARTIAL and RESERVE.
pub(crate) fn reserve_slide_up_to(key: &str, s: &Sliding) -> Result<Command<Reservation>, Error> {
    reserving_up_to(slide(key, s)?, nonzero(s.cost, "COST")?, "COST", None, 5)
}

/// RATELIMIT.HITALL: one call counted against several limits, all or nothing.
pub(crate) fn hit_all(limits: &[Limit], o: &AllOptions) -> Result<Command<MultiDecision>, Error> {
    if limits.is_empty() {
        return Err(invalid("HITALL needs at least one limit"));
    }
    let mut seen = HashSet::new();
    let (mut any_ms, mut calendar) = (false, false);
    let mut quotas = Vec::with_capacity(limits.len());
    for l in limits {
        if !seen.insert(l.key.as_str()) {
            return Err(invalid("each key may be given only once"));
        }
        let (_, in_ms) = fixed_window(l.window)?;
        quotas.push(positive(l.limit, "limit")?);
        any_ms |= in_ms;
        calendar |= matches!(l.window, Window::Calendar(_));
    }
    if o.sliding && calendar {
        return Err(invalid("syntax error: SLIDE and a calendar window cannot be given together"));
    }
    let mut args = Vec::with_capacity(2 * limits.len() + 6);
    for (l, quota) in limits.iter().zip(&quotas) {
        // One unit for all the lengths: ms if any needs them.
        let window = match l.window {
            Window::Calendar(unit) => unit.as_str().to_string(),
            Window::Length(d) if any_ms => d.as_millis().to_string(),
            Window::Length(d) => d.as_secs().to_string(),
        };
        args.extend([quota.to_string(), window]);
    }
    let cost = nonzero(o.cost, "COST")?;
    args.extend(counted(cost, "COST"));
    if any_ms {
        args.push("MS".to_string());
    }
    if o.sliding {
        if o.align {
            return Err(invalid("syntax error: SLIDE and ALIGN cannot be given together"));
        }
        args.push("SLIDE".to_string());
    }
    args.extend(laid_on_clock(calendar, o.align, o.tz.as_deref())?);
    let mut costs = vec![cost; limits.len()];
    if let Some((tokens, keys)) = o.tokens {
        let tokens = positive(tokens, "TOKENS")?;
        if keys < 1 || keys > limits.len() {
            return Err(invalid("TOKENS' key count must be between 1 and numkeys"));
        }
        let first = limits.len() - keys;
        costs[first..].fill(tokens);
        args.extend(["TOKENS".to_string(), tokens.to_string(), keys.to_string()]);
    }
    let shapes: Arc<Vec<(i64, Option<Duration>, i64)>> =
        Arc::new(limits.iter().zip(quotas).zip(costs).map(|((l, q), c)| (q, length_of(l.window), c)).collect());
    let sliding = o.sliding;
    let keys = limits.iter().map(|l| l.key.clone()).collect();
    let parse = move |reply: &Reply| {
        let items = reply.as_array().filter(|items| items.len() == shapes.len() + 1);
        let items = items.ok_or_else(|| unexpected_reply("HITALL", reply))?;
        let allowed = items[0].as_int() == Some(1);
        let mut decisions = Vec::with_capacity(shapes.len());
        for (item, &(limit, window, cost)) in items[1..].iter().zip(shapes.iter()) {
            let n = integers(item, if sliding { 4 } else { 3 }).ok_or_else(|| unexpected_reply("HITALL", reply))?;
            decisions.push(if sliding {
                let fits = i64::from(n[2] < 0);
                sliding_decision(&[fits, n[0], n[1], n[2], n[3]], limit, window)
            } else {
                let fits = i64::from(allowed || n[0].saturating_add(cost) <= limit);
                fixed_decision(&[fits, n[0], n[1], n[2]], limit, window, cost)
            });
        }
        Ok(MultiDecision { allowed, decisions })
    };
    let mut call = Command::new("RATELIMIT.HITALL", Some("ratelimit_hitall"), keys, args, parse);
    call.numkeys = true;
    Ok(call)
}

/// RATELIMIT.HITALL with TOKENS and RESERVE: the limits decided together, the estimated tokens
/// counted on the last token keys (1 unless given) and reserved there.
pub(crate) fn reserve_all(limits: &[Limit], o: &AllOptions) -> Result<Command<MultiReservation>, Error> {
    let mut o = o.clone();
    let (tokens, keys) = o.tokens.unwrap_or((0, 1));
    if tokens < 1 {
        return Err(invalid("RESERVE needs TOKENS >= 1"));
    }
    o.tokens = Some((tokens, keys));
    let call = hit_all(limits, &o)?;
    let token_keys = call.keys[call.keys.len() - keys..].to_vec();
    let amount = positive(tokens, "TOKENS")?;
    Ok(call.then(&["RESERVE"], move |reply, decision| {
        let (token, numbers) = super::split_last(reply).ok_or_else(|| unexpected_reply("a reservation", reply))?;
        Ok(MultiReservation { decision: decision(&numbers)?, keys: token_keys.clone(), token, amount })
    }))
}
