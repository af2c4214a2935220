//! What the algorithms read from a key and decide to write to it, in storage's own terms: an
//! integer value and its absolute expiry. Each algorithm maps its state into these (the fixed
//! window's count, GCRA's theoretical arrival time); the glue stores them without knowing which.

/// A key as it stands before a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// No key (or one that has logically expired).
    Missing,
    /// An integer; `expires_at` is its absolute expiry in Unix ms, `None` if it has no TTL.
    Present { value: i64, expires_at: Option<i64> },
}

/// A write to a key, value and expiry decided together: whatever it writes, the key ends up with
/// an expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// `by` added to the value, which becomes `value`; the key keeps its running expiry.
    Add { by: i64, value: i64 },
    /// A new value and its absolute expiry (Unix ms).
    Set { value: i64, expires_at: i64 },
    /// Only an expiry (Unix ms), for a key that has none: the heal.
    Expire { at: i64 },
}
