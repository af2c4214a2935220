//! Argument parsing for `RATELIMIT.HIT key limit window [COST cost] [MS]`, free of Redis types
//! so that every rule is unit-tested here and the command glue only moves bytes in and errors out.

use std::ffi::CStr;

use crate::decimal::parse_i64;

/// A validated limit: everything the window decision needs besides the key's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HitArgs {
    pub limit: i64,
    pub window_ms: i64,
    pub cost: i64,
}

/// Why the arguments were refused; `message()` is the Redis error reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgError {
    /// Too few arguments: answered with Redis's standard arity error.
    Arity,
    BadLimit,
    BadWindow,
    WindowTooLarge,
    BadCost,
    CostMissing,
    Repeated(Opt),
    UnknownOption,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opt {
    Cost,
    Ms,
}

impl ArgError {
    pub fn message(self) -> &'static CStr {
        match self {
            ArgError::Arity => c"ERR wrong number of arguments for 'ratelimit.hit' command",
            ArgError::BadLimit => c"ERR limit must be an integer >= 1",
            ArgError::BadWindow => c"ERR window must be an integer >= 1",
            ArgError::WindowTooLarge => c"ERR window is too large",
            ArgError::BadCost => c"ERR COST must be an integer >= 1",
            ArgError::CostMissing => c"ERR syntax error: COST needs a value",
            ArgError::Repeated(Opt::Cost) => c"ERR syntax error: COST given more than once",
            ArgError::Repeated(Opt::Ms) => c"ERR syntax error: MS given more than once",
            ArgError::UnknownOption => c"ERR syntax error: unknown option (expected COST or MS)",
        }
    }
}

/// The largest window accepted, in milliseconds: about 292 million years, so that adding it to
/// any current time stays far inside an `i64` of milliseconds.
pub const MAX_WINDOW_MS: i64 = i64::MAX / 2;

fn positive(bytes: &[u8]) -> Option<i64> {
    parse_i64(bytes).filter(|&v| v >= 1)
}

/// Parses the arguments after the command name: `key limit window [COST cost] [MS]`.
/// The key itself is not inspected here; it is only counted.
pub fn parse_hit<'a, I>(args: I) -> Result<HitArgs, ArgError>
where
    I: IntoIterator<Item = &'a [u8]>,
{
    let mut args = args.into_iter();
    let (Some(_key), Some(limit), Some(window)) = (args.next(), args.next(), args.next()) else {
        return Err(ArgError::Arity);
    };
    let limit = positive(limit).ok_or(ArgError::BadLimit)?;
    let window = positive(window).ok_or(ArgError::BadWindow)?;

    let mut cost = None;
    let mut in_ms = false;
    while let Some(word) = args.next() {
        if word.eq_ignore_ascii_case(b"COST") {
            if cost.is_some() {
                return Err(ArgError::Repeated(Opt::Cost));
            }
            let value = args.next().ok_or(ArgError::CostMissing)?;
            cost = Some(positive(value).ok_or(ArgError::BadCost)?);
        } else if word.eq_ignore_ascii_case(b"MS") {
            if in_ms {
                return Err(ArgError::Repeated(Opt::Ms));
            }
            in_ms = true;
        } else {
            return Err(ArgError::UnknownOption);
        }
    }

    let window_ms = if in_ms { Some(window) } else { window.checked_mul(1000) };
    let window_ms = window_ms
        .filter(|&ms| ms <= MAX_WINDOW_MS)
        .ok_or(ArgError::WindowTooLarge)?;
    Ok(HitArgs { limit, window_ms, cost: cost.unwrap_or(1) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<HitArgs, ArgError> {
        parse_hit(line.split(' ').map(str::as_bytes))
    }

    fn ok(limit: i64, window_ms: i64, cost: i64) -> Result<HitArgs, ArgError> {
        Ok(HitArgs { limit, window_ms, cost })
    }

    #[test]
    fn positional_only() {
        assert_eq!(parse("k 10 60"), ok(10, 60_000, 1));
    }

    #[test]
    fn options_any_order_any_case() {
        assert_eq!(parse("k 10 60 COST 3"), ok(10, 60_000, 3));
        assert_eq!(parse("k 10 250 MS"), ok(10, 250, 1));
        assert_eq!(parse("k 10 250 ms cost 2"), ok(10, 250, 2));
        assert_eq!(parse("k 10 250 CoSt 2 Ms"), ok(10, 250, 2));
    }

    #[test]
    fn cost_above_limit_is_accepted_here() {
        assert_eq!(parse("k 1 1 COST 5"), ok(1, 1000, 5));
    }

    #[test]
    fn arity() {
        assert_eq!(parse_hit(std::iter::empty()), Err(ArgError::Arity));
        assert_eq!(parse("k"), Err(ArgError::Arity));
        assert_eq!(parse("k 10"), Err(ArgError::Arity));
    }

    #[test]
    fn bad_numbers() {
        for (line, err) in [
            ("k 0 60", ArgError::BadLimit),
            ("k -1 60", ArgError::BadLimit),
            ("k x 60", ArgError::BadLimit),
            ("k 1.5 60", ArgError::BadLimit),
            ("k 99999999999999999999 60", ArgError::BadLimit),
            ("k 10 0", ArgError::BadWindow),
            ("k 10 -5", ArgError::BadWindow),
            ("k 10 ten", ArgError::BadWindow),
            ("k 10 60 COST 0", ArgError::BadCost),
            ("k 10 60 COST -2", ArgError::BadCost),
            ("k 10 60 COST MS", ArgError::BadCost),
            ("k 10 60 COST", ArgError::CostMissing),
        ] {
            assert_eq!(parse(line), Err(err), "{line}");
        }
    }

    #[test]
    fn window_overflow() {
        assert_eq!(parse("k 10 9223372036854775807"), Err(ArgError::WindowTooLarge));
        assert_eq!(parse("k 10 9223372036854775"), Err(ArgError::WindowTooLarge));
        assert_eq!(parse("k 10 4611686018427387"), ok(10, 4_611_686_018_427_387_000, 1));
        assert_eq!(parse("k 10 9223372036854775807 MS"), Err(ArgError::WindowTooLarge));
        assert_eq!(parse("k 10 4611686018427387903 MS"), ok(10, MAX_WINDOW_MS, 1));
    }

    #[test]
    fn syntax() {
        assert_eq!(parse("k 10 60 COST 1 COST 2"), Err(ArgError::Repeated(Opt::Cost)));
        assert_eq!(parse("k 10 60 MS MS"), Err(ArgError::Repeated(Opt::Ms)));
        assert_eq!(parse("k 10 60 SECONDS"), Err(ArgError::UnknownOption));
        assert_eq!(parse("k 10 60 MS extra"), Err(ArgError::UnknownOption));
        assert_eq!(parse("k 10 60 "), Err(ArgError::UnknownOption));
    }

    #[test]
    fn every_message_is_a_redis_error() {
        for e in [
            ArgError::Arity,
            ArgError::BadLimit,
            ArgError::BadWindow,
            ArgError::WindowTooLarge,
            ArgError::BadCost,
            ArgError::CostMissing,
            ArgError::Repeated(Opt::Cost),
            ArgError::Repeated(Opt::Ms),
            ArgError::UnknownOption,
        ] {
            assert!(e.message().to_bytes().starts_with(b"ERR "), "{e:?}");
        }
    }
}
