//! The leases' arguments: `RATELIMIT.ACQUIRE`, `RELEASE` and `RENEW`.

use super::error::ArgError;
use super::read::*;

/// `RATELIMIT.ACQUIRE key limit lease [MS] [ID id]`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquireArgs<'a> {
    pub limit: i64,
    pub lease_ms: i64,
    /// The caller's id; `None`: the module makes one.
    pub id: Option<&'a [u8]>,
}

/// `key limit lease [MS] [ID id]`, after the command name.
pub fn parse_acquire<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<AcquireArgs<'a>, ArgError> {
    let mut args = args.into_iter();
    let (Some(_key), Some(limit), Some(lease)) = (args.next(), args.next(), args.next()) else {
        return Err(ArgError::Arity("ratelimit.acquire"));
    };
    let limit = positive(limit, "limit")?;
    let spec = [Opt { name: "MS", values: 0 }, Opt { name: "ID", values: 1 }];
    let [ms, id] = options(args, spec, "MS or ID")?;
    let lease_ms = duration_ms(lease, ms.is_some(), "lease")?;
    Ok(AcquireArgs { limit, lease_ms, id: id.map(lease_id).transpose()? })
}

/// `key id`, after `RATELIMIT.RELEASE`: the id.
pub fn parse_release<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<&'a [u8], ArgError> {
    let mut args = args.into_iter();
    let (Some(_key), Some(id), None) = (args.next(), args.next(), args.next()) else {
        return Err(ArgError::Arity("ratelimit.release"));
    };
    lease_id(id)
}

/// `key id lease [MS]`, after `RATELIMIT.RENEW`: the id and the lease in ms.
pub fn parse_renew<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Result<(&'a [u8], i64), ArgError> {
    let mut args = args.into_iter();
    let (Some(_key), Some(id), Some(lease)) = (args.next(), args.next(), args.next()) else {
        return Err(ArgError::Arity("ratelimit.renew"));
    };
    let id = lease_id(id)?;
    let [ms] = options(args, [Opt { name: "MS", values: 0 }], "MS")?;
    Ok((id, duration_ms(lease, ms.is_some(), "lease")?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::args::testing::words;

    #[test]
    fn leases() {
        let acquire = |line| parse_acquire(words(line));
        let ok = |limit, lease_ms, id: Option<&'static [u8]>| Ok(AcquireArgs { limit, lease_ms, id });
        assert_eq!(acquire("k 3 30"), ok(3, 30_000, None));
        assert_eq!(acquire("k 3 30 id job-7 ms"), ok(3, 30, Some(b"job-7")));
        assert_eq!(acquire("k 3"), Err(ArgError::Arity("ratelimit.acquire")));
        assert_eq!(acquire("k 0 30"), Err(ArgError::NotPositive("limit")));
        assert_eq!(acquire("k 3 0"), Err(ArgError::NotPositive("lease")));
        assert_eq!(acquire("k 3 9223372036854775"), Err(ArgError::TooLarge("lease")));
        assert_eq!(acquire("k 3 30 ID"), Err(ArgError::MissingValue("ID")));
        assert_eq!(acquire("k 3 30 ID "), Err(ArgError::IdLength(MAX_ID_LEN)));
        assert_eq!(acquire("k 3 30 COST 1"), Err(ArgError::UnknownOption("MS or ID")));
        let long = format!("k 3 30 ID {}", "x".repeat(MAX_ID_LEN + 1));
        assert_eq!(parse_acquire(words(&long)), Err(ArgError::IdLength(MAX_ID_LEN)));
        let longest = format!("k 3 30 ID {}", "x".repeat(MAX_ID_LEN));
        assert!(parse_acquire(words(&longest)).is_ok());
        assert_eq!(parse_release(words("k a")), Ok(&b"a"[..]));
        assert_eq!(parse_release(words("k")), Err(ArgError::Arity("ratelimit.release")));
        assert_eq!(parse_release(words("k a b")), Err(ArgError::Arity("ratelimit.release")));
        assert_eq!(parse_renew(words("k a 5 MS")), Ok((&b"a"[..], 5)));
        assert_eq!(parse_renew(words("k a 5")), Ok((&b"a"[..], 5_000)));
        assert_eq!(parse_renew(words("k a")), Err(ArgError::Arity("ratelimit.renew")));
        assert_eq!(parse_renew(words("k a 5 ID b")), Err(ArgError::UnknownOption("MS")));
    }
}
