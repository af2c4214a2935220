//! What the families' unit tests share.

use crate::core::window::Limit;

use super::{parse_hit, ArgError};

/// A nanosecond count: a second.
pub const SECOND: i64 = 1_000_000_000;

pub fn words(line: &str) -> impl Iterator<Item = &[u8]> {
    line.split(' ').map(str::as_bytes)
}

/// HIT's limit at the Unix epoch (a rolling window's is its whole length at any time).
pub fn hit(line: &str) -> Result<Limit, ArgError> {
    parse_hit(words(line)).and_then(|a| a.at(0))
}

pub fn ok(limit: i64, window_ms: i64, cost: i64) -> Result<Limit, ArgError> {
    Ok(Limit { limit, window_ms, cost })
}
