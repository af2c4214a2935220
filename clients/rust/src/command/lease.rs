//! The leases' calls (RATELIMIT.ACQUIRE, RELEASE, RENEW), as the module's
//! `src/core/args/lease.rs` reads them.

use std::time::Duration;

use super::{integers, length, ms, positive, Command};
use crate::error::{invalid, unexpected_reply};
use crate::results::Acquisition;
use crate::Error;

/// A lease id's longest, in bytes.
const MAX_ID_LEN: usize = 256;

/// A fresh lease id: 128 bits in hex, from the standard library's randomly keyed hasher.
pub(crate) fn new_lease_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let half = || {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos(),
        );
        hasher.finish()
    };
    format!("{:016x}{:016x}", half(), half())
}

fn lease_id(id: &str) -> Result<(), Error> {
    if id.is_empty() || id.len() > MAX_ID_LEN {
        return Err(invalid(format!("ID must be 1 to {MAX_ID_LEN} bytes")));
    }
    Ok(())
}

fn lease_args(lease: Duration) -> Result<Vec<String>, Error> {
    let (text, in_ms) = length(lease, "lease")?;
    Ok(if in_ms { vec![text, "MS".to_string()] } else { vec![text] })
}

/// RATELIMIT.ACQUIRE: one of at most `limit` permits in flight, a lease under `id` (`None`: a
/// new one); a retry with the same id is counted once.
pub(crate) fn acquire(key: &str, limit: u64, lease: Duration, id: Option<&str>) -> Result<Command<Acquisition>, Error> {
    let limit = positive(limit, "limit")?;
    let id = id.map_or_else(new_lease_id, str::to_string);
    lease_id(&id)?;
    let mut args = vec![limit.to_string()];
    args.extend(lease_args(lease)?);
    args.extend(["ID".to_string(), id]);
    Ok(Command::new("RATELIMIT.ACQUIRE", Some("ratelimit_acquire"), vec![key.to_string()], args, |reply| {
        let items =
            reply.as_array().filter(|items| items.len() == 5).ok_or_else(|| unexpected_reply("ACQUIRE", reply))?;
        let n =
            integers(&crate::Reply::Array(items[..4].to_vec()), 4).ok_or_else(|| unexpected_reply("ACQUIRE", reply))?;
        Ok(Acquisition {
            acquired: n[0] == 1,
            in_use: n[1],
            remaining: n[2],
            wait: ms(n[3]),
            id: items[4].as_text().filter(|id| !id.is_empty()).map(str::to_string),
        })
    }))
}

/// RATELIMIT.RELEASE: the permit under `id` given back; false if it was not live.
pub(crate) fn release(key: &str, id: &str) -> Result<Command<bool>, Error> {
    lease_id(id)?;
    Ok(Command::new(
        "RATELIMIT.RELEASE",
        Some("ratelimit_release"),
        vec![key.to_string()],
        vec![id.to_string()],
        |reply| reply.as_int().map(|n| n == 1).ok_or_else(|| unexpected_reply("RELEASE", reply)),
    ))
}

/// RATELIMIT.RENEW: the live lease under `id` extended to `lease` from now; the lease it now has,
/// or `None` when it was lost.
pub(crate) fn renew(key: &str, id: &str, lease: Duration) -> Result<Command<Option<Duration>>, Error> {
    lease_id(id)?;
    let mut args = vec![id.to_string()];
    args.extend(lease_args(lease)?);
    Ok(Command::new("RATELIMIT.RENEW", Some("ratelimit_renew"), vec![key.to_string()], args, |reply| {
        let n = reply.as_int().ok_or_else(|| unexpected_reply("RENEW", reply))?;
        Ok((n >= 0).then(|| ms(n)))
    }))
}
