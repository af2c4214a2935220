//! GCRA's calls (RATELIMIT.GCRA), as the module's `src/core/args/gcra.rs` reads them.

use std::time::Duration;

use super::{counted, granting, integers, ms, nonzero, positive, reserving, reserving_up_to, Command, Parse};
use crate::error::{invalid, unexpected_reply};
use crate::limits::Rate;
use crate::results::{Decision, Grant, Reservation};
use crate::Error;

/// The module's bound on a bucket's spans in ns: half of i64.
const MAX_SPAN_NS: i128 = (i64::MAX / 2) as i128;

/// Reads a bucket's five numbers: limited, capacity, remaining, retry and reset in ms.
pub(crate) fn read_bucket(period: Option<Duration>) -> Parse<Decision> {
    Box::new(move |reply| {
        let n = integers(reply, 5).ok_or_else(|| unexpected_reply("a GCRA bucket", reply))?;
        let allowed = n[0] == 0;
        Ok(Decision {
            allowed,
            count: n[1] - n[2],
            remaining: n[2],
            limit: n[1],
            reset_after: ms(n[4]),
            retry_after: (!allowed).then(|| ms(n[3])),
            window: period,
        })
    })
}

/// A period in decimal seconds, to the nanosecond.
fn period_text(d: Duration) -> String {
    let text = format!("{}.{:09}", d.as_secs(), d.subsec_nanos());
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// RATELIMIT.GCRA with `tokens` (negative: given back).
fn gcra_taking(key: &str, r: &Rate, tokens: i64, align: bool) -> Result<Command<Decision>, Error> {
    let max_burst = i64::try_from(r.max_burst).map_err(|_| invalid("max_burst is out of range, must be >= 0"))?;
    let per_period = positive(r.per_period, "tokens_per_period")?;
    if r.period.is_zero() {
        return Err(invalid("period must be > 0"));
    }
    // The module's spans, in ns: the emission interval times the capacity, and times the tokens.
    let emission = (r.period.as_nanos() as i128 / i128::from(per_period)).max(1);
    if r.period.as_nanos() >= i64::MAX as u128 {
        return Err(invalid("period would cause an overflow"));
    }
    if emission * (i128::from(max_burst) + 1) > MAX_SPAN_NS {
        return Err(invalid("(max_burst + 1) * period / tokens_per_period would cause an overflow"));
    }
    if emission * i128::from(tokens).abs() > MAX_SPAN_NS {
        return Err(invalid("TOKENS * period / tokens_per_period would cause an overflow"));
    }
    let mut args = vec![max_burst.to_string(), per_period.to_string(), period_text(r.period)];
    args.extend(counted(tokens, "TOKENS"));
    if align {
        args.push("ALIGN".to_string());
    }
    Ok(Command::new("RATELIMIT.GCRA", Some("ratelimit_gcra"), vec![key.to_string()], args, read_bucket(Some(r.period))))
}

/// RATELIMIT.GCRA: tokens from a GCRA bucket (smooth limiting).
pub(crate) fn gcra(key: &str, r: &Rate) -> Result<Command<Decision>, Error> {
    gcra_taking(key, r, nonzero(r.tokens, "TOKENS")?, r.align)
}

/// RATELIMIT.GCRA with PARTIAL: as many of the tokens as the bucket has whole, at least one.
pub(crate) fn gcra_up_to(key: &str, r: &Rate) -> Result<Command<Grant>, Error> {
    Ok(granting(gcra(key, r)?, None, 5))
}

/// RATELIMIT.GCRA with negative tokens: the bucket's TAT moves back, never before now.
pub(crate) fn refund_gcra(key: &str, r: &Rate, amount_back: u64) -> Result<Command<Decision>, Error> {
    gcra_taking(key, r, super::window::amount(amount_back)?, false)
}

fn unaligned(r: &Rate) -> Result<(), Error> {
    if r.align {
        // A settle gives back against the running clock, not the boundaries.
        return Err(invalid("syntax error: ALIGN and RESERVE cannot be given together"));
    }
    Ok(())
}

/// RATELIMIT.GCRA with RESERVE.
pub(crate) fn reserve_gcra(key: &str, r: &Rate) -> Result<Command<Reservation>, Error> {
    unaligned(r)?;
    reserving(gcra(key, r)?, nonzero(r.tokens, "TOKENS")?, "TOKENS")
}

/// RATELIMIT.GCRA with PARTIAL and RESERVE.
pub(crate) fn reserve_gcra_up_to(key: &str, r: &Rate) -> Result<Command<Reservation>, Error> {
    unaligned(r)?;
    reserving_up_to(gcra(key, r)?, nonzero(r.tokens, "TOKENS")?, "TOKENS", None, 5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_in_decimal_seconds() {
        assert_eq!(period_text(Duration::from_secs(60)), "60");
        assert_eq!(period_text(Duration::from_millis(1500)), "1.5");
        assert_eq!(period_text(Duration::from_nanos(1)), "0.000000001");
    }
}
