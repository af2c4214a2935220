//! The walks' arguments: `RATELIMIT.AUDIT` and `RATELIMIT.REPAIR`.

use crate::core::decimal::parse_i64;

use super::error::ArgError;
use super::read::*;

/// `RATELIMIT.AUDIT prefix [LIMIT n]` and `RATELIMIT.REPAIR prefix window [MS] [LIMIT n]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkArgs<'a> {
    pub prefix: &'a [u8],
    /// How many key names the reply lists at most.
    pub names: usize,
    /// The TTL REPAIR gives each leaked counter; `None` for AUDIT.
    pub repair_window_ms: Option<i64>,
}

fn names_limit(value: Option<&[u8]>, default: usize) -> Result<usize, ArgError> {
    let Some(value) = value else { return Ok(default) };
    let n = parse_i64(value).filter(|&n| n >= 0).ok_or(ArgError::Negative("LIMIT"))?;
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// `prefix [LIMIT n]`, after the command name; `default_names` stands for a missing LIMIT.
pub fn parse_audit<'a>(
    args: impl IntoIterator<Item = &'a [u8]>,
    default_names: usize,
) -> Result<WalkArgs<'a>, ArgError> {
    let mut args = args.into_iter();
    let Some(prefix) = args.next() else {
        return Err(ArgError::Arity("ratelimit.audit"));
    };
    let [limit] = options(args, [Opt { name: "LIMIT", values: 1 }], "LIMIT")?;
    Ok(WalkArgs { prefix, names: names_limit(limit, default_names)?, repair_window_ms: None })
}

/// `prefix window [MS] [LIMIT n]`, after the command name; `default_names` stands for a missing LIMIT.
pub fn parse_repair<'a>(
    args: impl IntoIterator<Item = &'a [u8]>,
    default_names: usize,
) -> Result<WalkArgs<'a>, ArgError> {
    let mut args = args.into_iter();
    let (Some(prefix), Some(window)) = (args.next(), args.next()) else {
        return Err(ArgError::Arity("ratelimit.repair"));
    };
    let spec = [Opt { name: "MS", values: 0 }, Opt { name: "LIMIT", values: 1 }];
    let [ms, limit] = options(args, spec, "MS or LIMIT")?;
    let window_ms = window_ms(window, ms.is_some())?;
    Ok(WalkArgs { prefix, names: names_limit(limit, default_names)?, repair_window_ms: Some(window_ms) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::args::testing::words;

    const DEFAULT: usize = 100;

    fn parse_audit_<'a>(words: impl IntoIterator<Item = &'a [u8]>) -> Result<WalkArgs<'a>, ArgError> {
        parse_audit(words, DEFAULT)
    }

    fn parse_repair_<'a>(words: impl IntoIterator<Item = &'a [u8]>) -> Result<WalkArgs<'a>, ArgError> {
        parse_repair(words, DEFAULT)
    }

    fn walk(prefix: &[u8], names: usize, repair_window_ms: Option<i64>) -> Result<WalkArgs<'_>, ArgError> {
        Ok(WalkArgs { prefix, names, repair_window_ms })
    }

    #[test]
    fn audit() {
        assert_eq!(parse_audit_(words("rl:")), walk(b"rl:", DEFAULT, None));
        assert_eq!(parse_audit_([&b""[..]]), walk(b"", DEFAULT, None));
        assert_eq!(parse_audit_(words("rl:* limit 0")), walk(b"rl:*", 0, None));
        assert_eq!(parse_audit_(words("rl: LIMIT 7")), walk(b"rl:", 7, None));
        assert_eq!(parse_audit_(std::iter::empty()), Err(ArgError::Arity("ratelimit.audit")));
        assert_eq!(parse_audit_(words("rl: LIMIT")), Err(ArgError::MissingValue("LIMIT")));
        assert_eq!(parse_audit_(words("rl: LIMIT -1")), Err(ArgError::Negative("LIMIT")));
        assert_eq!(parse_audit_(words("rl: LIMIT x")), Err(ArgError::Negative("LIMIT")));
        assert_eq!(parse_audit_(words("rl: LIMIT 1 LIMIT 2")), Err(ArgError::Repeated("LIMIT")));
        assert_eq!(parse_audit_(words("rl: 60")), Err(ArgError::UnknownOption("LIMIT")));
        assert_eq!(parse_audit_(words("rl: MS")), Err(ArgError::UnknownOption("LIMIT")));
    }

    #[test]
    fn repair() {
        assert_eq!(parse_repair_(words("rl: 60")), walk(b"rl:", DEFAULT, Some(60_000)));
        assert_eq!(parse_repair_(words("rl: 60 ms")), walk(b"rl:", DEFAULT, Some(60)));
        assert_eq!(parse_repair_(words("rl: 60 LIMIT 3 MS")), walk(b"rl:", 3, Some(60)));
        assert_eq!(parse_repair_(words("rl:")), Err(ArgError::Arity("ratelimit.repair")));
        assert_eq!(parse_repair_(words("rl: 0")), Err(ArgError::NotPositive("window")));
        assert_eq!(parse_repair_(words("rl: -5")), Err(ArgError::NotPositive("window")));
        assert_eq!(parse_repair_(words("rl: LIMIT")), Err(ArgError::NotPositive("window")));
        assert_eq!(parse_repair_(words("rl: 60 LIMIT -2")), Err(ArgError::Negative("LIMIT")));
        assert_eq!(parse_repair_(words("rl: 60 MS MS")), Err(ArgError::Repeated("MS")));
        assert_eq!(parse_repair_(words("rl: 60 COST 1")), Err(ArgError::UnknownOption("MS or LIMIT")));
        assert_eq!(parse_repair_(words("rl: 9223372036854775")), Err(ArgError::TooLarge("window")));
    }
}
