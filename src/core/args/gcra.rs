//! The bucket's arguments: `RATELIMIT.GCRA` and redis-cell's `CL.THROTTLE`.

use crate::core::decimal::parse_i64;
use crate::core::gcra::{Overflow, Rate};

use super::error::ArgError;
use super::read::*;

/// `RATELIMIT.GCRA key max_burst tokens_per_period period [TOKENS count] [PARTIAL] [RESERVE] [ALIGN]`,
/// validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcraArgs {
    pub rate: Rate,
    pub reserve: bool,
    /// Grant as many of the tokens as there are, at least one.
    pub partial: bool,
    /// ALIGN: the period in ns, on whose multiples since the epoch the tokens come back.
    pub align_ns: Option<i64>,
}

/// A period in seconds as a decimal number (`60`, `0.5`, `1e-3`), to the nearest nanosecond.
fn period_ns(bytes: &[u8]) -> Result<i64, ArgError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ArgError::PeriodNotFloat)?;
    // Rust's parser also takes "NaN" and a leading '+', as strtod does; NaN is no number here.
    let seconds: f64 = text.parse().ok().filter(|s: &f64| !s.is_nan()).ok_or(ArgError::PeriodNotFloat)?;
    if seconds <= 0.0 {
        return Err(ArgError::PeriodNotPositive);
    }
    let ns = (seconds * 1e9).round();
    // i64::MAX as f64 rounds up to 2^63, which is already out of range.
    (ns < i64::MAX as f64).then_some(ns as i64).ok_or(ArgError::Overflow("period"))
}

/// `key max_burst tokens_per_period period [TOKENS count] [PARTIAL] [RESERVE] [ALIGN]`, after the
/// command name: the
/// shape of Redis's `GCRA` command. The emission interval is `period / tokens_per_period`, to the
/// nanosecond below (at least 1 ns), as redis-cell computes it. Negative TOKENS give back.
pub fn parse_gcra<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<GcraArgs, ArgError> {
    let mut args = args.into_iter();
    let (Some(_key), Some(max_burst), Some(per_period), Some(period)) =
        (args.next(), args.next(), args.next(), args.next())
    else {
        return Err(ArgError::Arity("ratelimit.gcra"));
    };
    // Redis's GCRA says "out of range" for any bad max_burst, an integer or not.
    let max_burst = parse_i64(max_burst).filter(|&b| b >= 0).ok_or(ArgError::OutOfRange("max_burst", 0))?;
    let per_period = at_least(per_period, "tokens_per_period", 1)?;
    let period_ns = period_ns(period)?;
    let spec = [
        Opt { name: "TOKENS", values: 1 },
        Opt { name: "RESERVE", values: 0 },
        Opt { name: "PARTIAL", values: 0 },
        Opt { name: "ALIGN", values: 0 },
    ];
    let [tokens, reserve, partial, align] =
        options(args, spec, "TOKENS, PARTIAL, RESERVE or ALIGN").map_err(|e| match e {
            ArgError::MissingValue(name) => ArgError::Missing(name),
            e => e,
        })?;
    let tokens = match tokens {
        None => 1,
        Some(t) => parse_i64(t).ok_or(ArgError::NotAnInteger("TOKENS")).and_then(|t| match t {
            0 => Err(ArgError::Zero("TOKENS")),
            t => Ok(t),
        })?,
    };
    let reserve = reserved(reserve, tokens, "TOKENS")?;
    // A settle gives back against the running clock, not the boundaries.
    if align.is_some() && reserve {
        return Err(ArgError::Exclusive("ALIGN", "RESERVE"));
    }
    let partial = partial_of(partial, tokens, "TOKENS")?;
    let emission_ns = (period_ns / per_period).max(1);
    let rate = Rate::new(max_burst, emission_ns, tokens).map_err(|o| match o {
        Overflow::Burst => ArgError::Overflow("(max_burst + 1) * period / tokens_per_period"),
        Overflow::Tokens => ArgError::Overflow("TOKENS * period / tokens_per_period"),
    })?;
    Ok(GcraArgs { rate, reserve, partial, align_ns: align.map(|_| period_ns) })
}

/// `key max_burst count_per_period period [quantity]` after `CL.THROTTLE`, as redis-cell reads it:
/// integers as Rust's `i64` parser takes them (`+5` and `007` too), `period` in whole seconds, the
/// emission interval computed in floating point as redis-cell computes it, `quantity` 0 a look, a
/// negative one a give-back. Where redis-cell takes any integer and computes nonsense (a count of
/// 0, a negative period), these are refused.
pub fn parse_cl_throttle<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<Rate, ArgError> {
    let args: Vec<&[u8]> = args.into_iter().take(6).collect();
    let [_key, max_burst, per_period, period, ref rest @ ..] = args[..] else {
        return Err(ArgError::Arity("cl.throttle"));
    };
    if rest.len() > 1 {
        return Err(ArgError::Arity("cl.throttle"));
    }
    let integer = |bytes: &[u8], name: &'static str, min: i64| -> Result<i64, ArgError> {
        let value: i64 =
            std::str::from_utf8(bytes).ok().and_then(|t| t.parse().ok()).ok_or(ArgError::NotAnInteger(name))?;
        (value >= min).then_some(value).ok_or(ArgError::OutOfRange(name, min))
    };
    let max_burst = integer(max_burst, "max_burst", 0)?;
    let per_period = integer(per_period, "count per period", 1)?;
    let period = integer(period, "period", 1)?;
    let quantity = rest.first().map_or(Ok(1), |q| integer(q, "quantity", i64::MIN))?;
    let period_ns = period.checked_mul(1_000_000_000).ok_or(ArgError::Overflow("period"))?;
    let emission_ns = ((period_ns as f64 / per_period as f64) as i64).max(1);
    Rate::new(max_burst, emission_ns, quantity).map_err(|o| match o {
        Overflow::Burst => ArgError::Overflow("(max_burst + 1) * period / count per period"),
        Overflow::Tokens => ArgError::Overflow("quantity * period / count per period"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::args::testing::words;

    fn gcra(line: &str) -> Result<Rate, ArgError> {
        parse_gcra(words(line)).map(|a| a.rate)
    }

    const SECOND: i64 = 1_000_000_000;

    #[test]
    fn gcra_arguments() {
        assert_eq!(gcra("k 4 1 1"), Ok(Rate::new(4, SECOND, 1).unwrap()));
        let r = gcra("k 0 10 60 TOKENS 3").unwrap();
        assert_eq!((r.capacity, r.emission_ns, r.tokens, r.increment_ns), (1, 6 * SECOND, 3, 18 * SECOND));
        assert_eq!(gcra("k 9 2 0.5").unwrap().emission_ns, SECOND / 4);
        assert_eq!(gcra("k 9 3 1").unwrap().emission_ns, 333_333_333, "the nanosecond below");
        assert_eq!(gcra("k 9 1 0.3").unwrap().emission_ns, 300_000_000, "the nearest nanosecond");
        assert_eq!(gcra("k 9 1 1e-3").unwrap().emission_ns, 1_000_000);
        assert_eq!(gcra("k 9 1000 0.000000001").unwrap().emission_ns, 1, "at least 1 ns");
        assert_eq!(gcra("k 1 1 1 tokens 2").unwrap().tokens, 2);
        let aligned = |line| parse_gcra(words(line)).map(|a| a.align_ns);
        assert_eq!(
            aligned("k 9 3 1.5 align TOKENS 2 PARTIAL"),
            Ok(Some(3 * SECOND / 2)),
            "the period, not the emission"
        );
        assert_eq!(aligned("k 9 3 1.5"), Ok(None));
    }

    #[test]
    fn gcra_errors() {
        for (line, err) in [
            ("k 1 1", ArgError::Arity("ratelimit.gcra")),
            ("k -1 1 1", ArgError::OutOfRange("max_burst", 0)),
            ("k x 1 1", ArgError::OutOfRange("max_burst", 0)),
            ("k 1 0 1", ArgError::OutOfRange("tokens_per_period", 1)),
            ("k 1 x 1", ArgError::NotAnInteger("tokens_per_period")),
            ("k 1 1 0", ArgError::PeriodNotPositive),
            ("k 1 1 -2.5", ArgError::PeriodNotPositive),
            ("k 1 1 x", ArgError::PeriodNotFloat),
            ("k 1 1 NaN", ArgError::PeriodNotFloat),
            ("k 1 1 1s", ArgError::PeriodNotFloat),
            ("k 1 1 1 TOKENS", ArgError::Missing("TOKENS")),
            ("k 1 1 1 TOKENS 0", ArgError::Zero("TOKENS")),
            ("k 1 1 1 TOKENS 1.5", ArgError::NotAnInteger("TOKENS")),
            ("k 1 1 1 TOKENS 1 TOKENS 1", ArgError::Repeated("TOKENS")),
            ("k 1 1 1 COST 1", ArgError::UnknownOption("TOKENS, PARTIAL, RESERVE or ALIGN")),
            ("k 1 1 1 ALIGN RESERVE", ArgError::Exclusive("ALIGN", "RESERVE")),
            ("k 1 1 1 align ALIGN", ArgError::Repeated("ALIGN")),
            ("k 1 1 1 TOKENS -2 PARTIAL", ArgError::PartialNeeds("TOKENS")),
            ("k 1 1 1 PARTIAL partial", ArgError::Repeated("PARTIAL")),
            ("k 1 1 86400 TOKENS 200000000", ArgError::Overflow("TOKENS * period / tokens_per_period")),
            ("k 200000000 1 86400", ArgError::Overflow("(max_burst + 1) * period / tokens_per_period")),
            ("k 1 1 1e300", ArgError::Overflow("period")),
            ("k 1 1 inf", ArgError::Overflow("period")),
        ] {
            assert_eq!(gcra(line), Err(err), "{line}");
        }
        assert_eq!(ArgError::Missing("TOKENS").message(), "ERR Missing TOKENS value");
        assert_eq!(ArgError::PeriodNotPositive.message(), "ERR period must be > 0");
        assert_eq!(ArgError::PeriodNotFloat.message(), "ERR period is not a valid float");
        assert!(ArgError::OutOfRange("max_burst", 0).message().contains("out of range"));
        assert!(ArgError::NotAnInteger("TOKENS").message().contains("not an integer"));
        assert!(ArgError::Overflow("period").message().ends_with("would cause an overflow"));
    }

    #[test]
    fn cl_throttle_arguments() {
        let cl = |line| parse_cl_throttle(words(line));
        let r = cl("k 15 30 60").unwrap();
        assert_eq!((r.capacity, r.emission_ns, r.tokens), (16, 2 * SECOND, 1));
        assert_eq!(cl("k 15 30 60 0").unwrap().increment_ns, 0, "quantity 0 looks");
        assert_eq!(cl("k +1 007 60 3").unwrap().tokens, 3, "as Rust's i64 parser reads them");
        assert_eq!(cl("k 1 3 1").unwrap().emission_ns, 333_333_333);
        for (line, err) in [
            ("k 1 1", ArgError::Arity("cl.throttle")),
            ("k 1 1 1 1 1", ArgError::Arity("cl.throttle")),
            ("k -1 1 1", ArgError::OutOfRange("max_burst", 0)),
            ("k 1 0 1", ArgError::OutOfRange("count per period", 1)),
            ("k 1 1 0", ArgError::OutOfRange("period", 1)),
            ("k 1 1 1.5", ArgError::NotAnInteger("period")),
            ("k 1 1 1 x", ArgError::NotAnInteger("quantity")),
            ("k 1 1 9223372036854775807", ArgError::Overflow("period")),
            ("k 200000000 1 86400", ArgError::Overflow("(max_burst + 1) * period / count per period")),
        ] {
            assert_eq!(cl(line), Err(err), "{line}");
        }
    }
}
