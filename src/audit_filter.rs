//! What AUDIT and REPAIR count, free of Redis types. A leaked counter is a key under the prefix
//! that holds an integer string (what HIT would count) and has no TTL.

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};

use crate::decimal::{parse_i64, MAX_LEN};

/// What the keyspace walk knows of a key without reading its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyFacts {
    pub is_string: bool,
    pub has_ttl: bool,
    /// The string's length in bytes (meaningless for other types).
    pub len: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Not under the prefix: counted as scanned only.
    Outside,
    /// Under the prefix, and certainly not a leaked counter.
    Healthy,
    /// Under the prefix, a short string without TTL: leaked if its value is an integer.
    Suspect,
}

/// Sorts a key by its name, then (under the prefix only) by the facts the scan gives without
/// reading the value, so that only suspects need their value read. Prefixes compare byte for
/// byte: glob characters are literal.
pub fn classify(name: &[u8], prefix: &[u8], facts: impl FnOnce() -> KeyFacts) -> Seen {
    if !name.starts_with(prefix) {
        return Seen::Outside;
    }
    let facts = facts();
    if facts.is_string && !facts.has_ttl && (1..=MAX_LEN).contains(&facts.len) {
        Seen::Suspect
    } else {
        Seen::Healthy
    }
}

/// Whether a suspect's value is a counter.
pub fn is_counter_value(value: &[u8]) -> bool {
    parse_i64(value).is_some()
}

/// The counts a walk replies with. `found` (leaked for AUDIT, repaired for REPAIR) never counts
/// one key twice, even where the scan visits it twice (as SCAN may when the table shrinks).
#[derive(Debug)]
pub struct Tally {
    pub scanned: u64,
    pub matched: u64,
    pub found: u64,
    /// The first `names_limit` found keys, in the order found.
    pub names: Vec<Vec<u8>>,
    names_limit: usize,
    seen: HashSet<u64>,
    hasher: RandomState,
}

impl Tally {
    pub fn new(names_limit: usize) -> Tally {
        Tally {
            scanned: 0,
            matched: 0,
            found: 0,
            names: Vec::new(),
            names_limit,
            seen: HashSet::new(),
            hasher: RandomState::new(),
        }
    }

    pub fn count(&mut self, seen: Seen) {
        self.scanned += 1;
        if seen != Seen::Outside {
            self.matched += 1;
        }
    }

    /// Records a leaked (or repaired) key; false if this key was already recorded.
    pub fn found(&mut self, name: &[u8]) -> bool {
        // 64-bit hashes keep this at 8 bytes a found key, whatever the names' length.
        if !self.seen.insert(self.hasher.hash_one(name)) {
            return false;
        }
        self.found += 1;
        if self.names.len() < self.names_limit {
            self.names.push(name.to_vec());
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRING_NO_TTL: KeyFacts = KeyFacts { is_string: true, has_ttl: false, len: 3 };

    #[test]
    fn prefix_is_literal_bytes() {
        assert_eq!(classify(b"rl:1", b"rl:", || STRING_NO_TTL), Seen::Suspect);
        assert_eq!(classify(b"rl:1", b"rl:*", || STRING_NO_TTL), Seen::Outside);
        assert_eq!(classify(b"rl:*1", b"rl:*", || STRING_NO_TTL), Seen::Suspect);
        assert_eq!(classify(b"RL:1", b"rl:", || STRING_NO_TTL), Seen::Outside);
        assert_eq!(classify(b"r", b"rl:", || STRING_NO_TTL), Seen::Outside);
        assert_eq!(classify(b"anything", b"", || STRING_NO_TTL), Seen::Suspect);
        assert_eq!(classify(b"\xff\x00k", b"\xff\x00", || STRING_NO_TTL), Seen::Suspect);
    }

    #[test]
    fn only_short_strings_without_ttl_are_suspects() {
        let facts = |is_string, has_ttl, len| move || KeyFacts { is_string, has_ttl, len };
        assert_eq!(classify(b"rl:1", b"rl:", facts(true, true, 3)), Seen::Healthy);
        assert_eq!(classify(b"rl:1", b"rl:", facts(false, false, 3)), Seen::Healthy);
        assert_eq!(classify(b"rl:1", b"rl:", facts(true, false, 0)), Seen::Healthy);
        assert_eq!(classify(b"rl:1", b"rl:", facts(true, false, 21)), Seen::Healthy);
        assert_eq!(classify(b"rl:1", b"rl:", facts(true, false, 20)), Seen::Suspect);
    }

    #[test]
    fn counter_values() {
        assert!(is_counter_value(b"0"));
        assert!(is_counter_value(b"-12"));
        assert!(!is_counter_value(b"abc"));
        assert!(!is_counter_value(b"1.5"));
        assert!(!is_counter_value(b"01"));
    }

    #[test]
    fn tally_counts_and_caps_names_and_never_counts_twice() {
        let mut t = Tally::new(2);
        for seen in [Seen::Outside, Seen::Healthy, Seen::Suspect, Seen::Suspect] {
            t.count(seen);
        }
        assert!(t.found(b"a"));
        assert!(t.found(b"b"));
        assert!(!t.found(b"a"));
        assert!(t.found(b"c"));
        assert_eq!((t.scanned, t.matched, t.found), (4, 3, 3));
        assert_eq!(t.names, [b"a".to_vec(), b"b".to_vec()]);
    }

    #[test]
    fn limit_zero_names_nothing() {
        let mut t = Tally::new(0);
        assert!(t.found(b"a"));
        assert_eq!(t.found, 1);
        assert!(t.names.is_empty());
    }
}
