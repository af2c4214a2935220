//! What the algorithms read from a key and decide to write to it, in storage's own terms: a value
//! and its absolute expiry. The fixed window and GCRA store an integer (a count, a theoretical
//! arrival time); the sliding window its counts as one text (`slide::Counts`). The glue stores
//! any `Value` without knowing which algorithm wrote it.

use crate::core::decimal::{format_i64, parse_i64};

/// The longest stored text of any value: the adaptive limit's, 217 bytes with every field at its
/// bound (`adaptive::tests::the_longest_state_is_written_whole`).
pub const MAX_TEXT: usize = 256;

/// A value as stored in a plain Redis string.
pub trait Value: Copy {
    /// The error reply for a string that is not such a value.
    const INVALID: &'static str;
    fn parse(text: &[u8]) -> Option<Self>;
    /// Writes the text into `buf` and returns it.
    fn write(self, buf: &mut [u8; MAX_TEXT]) -> &[u8];
}

impl Value for i64 {
    const INVALID: &'static str = "ERR value is not an integer or out of range";

    fn parse(text: &[u8]) -> Option<i64> {
        parse_i64(text)
    }

    fn write(self, buf: &mut [u8; MAX_TEXT]) -> &[u8] {
        let mut digits = [0; crate::core::decimal::MAX_LEN];
        let text = format_i64(self, &mut digits);
        buf[..text.len()].copy_from_slice(text);
        &buf[..text.len()]
    }
}

/// A key as it stands before a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored<V = i64> {
    /// No key (or one that has logically expired).
    Missing,
    /// A value; `expires_at` is its absolute expiry in Unix ms, `None` if it has no TTL.
    Present { value: V, expires_at: Option<i64> },
}

impl<V: Copy> Stored<V> {
    /// The key's expiry after `change`: the one it sets, or else the one it had.
    pub fn expiry_after(self, change: Option<Change<V>>) -> Option<i64> {
        match (change, self) {
            (Some(Change::Set { expires_at, .. }), _) => Some(expires_at),
            (Some(Change::Expire { at }), _) => Some(at),
            (_, Stored::Present { expires_at, .. }) => expires_at,
            (_, Stored::Missing) => None,
        }
    }
}

/// A write to a key, value and expiry decided together: whatever it writes, the key ends up with
/// an expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change<V = i64> {
    /// `by` added to the value, which becomes `value`; the key keeps its running expiry.
    Add { by: i64, value: V },
    /// A new value and its absolute expiry (Unix ms).
    Set { value: V, expires_at: i64 },
    /// Only an expiry (Unix ms), for a key that has none: the heal.
    Expire { at: i64 },
    /// A new value; the key keeps its running expiry (a sliding window's give-back).
    Replace { value: V },
}
