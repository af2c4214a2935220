//! What AUDIT and REPAIR count, free of Redis types. A leaked key is one under the prefix that
//! holds a limiter's value and has no TTL: an integer string (what HIT, GCRA or a bare INCR would
//! count), a sliding window's counts, or a lease set (a sorted set scored by expiry times).

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};

use crate::core::decimal::parse_i64;
use crate::core::slide::Counts;
use crate::core::stored::Value;

/// The longest value AUDIT recognises: a sliding window's counts (`slide:` and four 19-digit
/// fields) fit; an adaptive limit's state always has its TTL written with it.
const LONGEST: usize = 96;

/// What the keyspace walk can ask of a key without reading its value; each answer costs a
/// server call, so `classify` asks only what it needs.
pub trait Probe {
    fn is_string(&mut self) -> bool;
    fn is_zset(&mut self) -> bool;
    fn has_ttl(&mut self) -> bool;
    /// The string's length in bytes.
    fn len(&mut self) -> usize;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Not under the prefix: counted as scanned only.
    Outside,
    /// Under the prefix, and certainly not a leaked counter.
    Healthy,
    /// Under the prefix, a short string or a sorted set without TTL: leaked if its value is a
    /// limiter's.
    Suspect,
}

/// Sorts a key by its name, then (under the prefix only) by what the scan can tell without
/// reading the value, so that only suspects need their value read. Prefixes compare byte for
/// byte: glob characters are literal.
pub fn classify(name: &[u8], prefix: &[u8], key: &mut impl Probe) -> Seen {
    if !name.starts_with(prefix) {
        Seen::Outside
    } else if key.is_string() {
        match !key.has_ttl() && (1..=LONGEST).contains(&key.len()) {
            true => Seen::Suspect,
            false => Seen::Healthy,
        }
    } else if key.is_zset() && !key.has_ttl() {
        Seen::Suspect
    } else {
        Seen::Healthy
    }
}

/// What a limiter's key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limiter {
    /// An integer: a fixed window's count (or a GCRA bucket's time, or a bare INCR's).
    Counter,
    Slide(Counts),
    /// A lease set, and its latest lease's expiry.
    Leases {
        latest: i64,
    },
}

/// The scores a lease set's can have: Unix times in ms from 2001 (10^12) to where doubles stop
/// counting every ms (2^53, the year 287,396). A sorted set with any other score is something
/// else (a leaderboard, say), never given an expiry from its scores.
const LEASE_SCORES: std::ops::Range<f64> = 1e12..9_007_199_254_740_992.0;

impl Limiter {
    /// What a suspect's value is, if it is a limiter's.
    pub fn of(value: &[u8]) -> Option<Limiter> {
        match parse_i64(value) {
            Some(_) => Some(Limiter::Counter),
            None => Counts::parse(value).map(Limiter::Slide),
        }
    }

    /// A sorted set with these lowest and highest scores, if it is a lease set.
    pub fn lease_set(lowest: f64, highest: f64) -> Option<Limiter> {
        (LEASE_SCORES.contains(&lowest) && LEASE_SCORES.contains(&highest))
            .then(|| Limiter::Leases { latest: highest.ceil() as i64 })
    }

    /// The expiry that heals it at `now_ms`: a counter gets the `window_ms` it is given (REPAIR's,
    /// the guard's rule); a sliding window the end of its own counts, and a lease set its latest
    /// lease's expiry, which they hold (1 ms from now where those have passed).
    pub fn heal_at(self, window_ms: i64, now_ms: i64) -> i64 {
        match self {
            Limiter::Counter => now_ms.saturating_add(window_ms),
            Limiter::Slide(counts) => counts.heal_at(now_ms),
            Limiter::Leases { latest } => latest.max(now_ms.saturating_add(1)),
        }
    }
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

    /// A probe with fixed answers that records which questions were asked.
    #[derive(Default)]
    struct Facts {
        is_string: bool,
        is_zset: bool,
        has_ttl: bool,
        len: usize,
        asked: Vec<&'static str>,
    }

    impl Probe for Facts {
        fn is_string(&mut self) -> bool {
            self.asked.push("is_string");
            self.is_string
        }
        fn is_zset(&mut self) -> bool {
            self.asked.push("is_zset");
            self.is_zset
        }
        fn has_ttl(&mut self) -> bool {
            self.asked.push("has_ttl");
            self.has_ttl
        }
        fn len(&mut self) -> usize {
            self.asked.push("len");
            self.len
        }
    }

    fn facts(is_string: bool, has_ttl: bool, len: usize) -> Facts {
        Facts { is_string, is_zset: false, has_ttl, len, asked: Vec::new() }
    }

    fn string_no_ttl() -> Facts {
        facts(true, false, 3)
    }

    #[test]
    fn prefix_is_literal_bytes() {
        assert_eq!(classify(b"rl:1", b"rl:", &mut string_no_ttl()), Seen::Suspect);
        assert_eq!(classify(b"rl:1", b"rl:*", &mut string_no_ttl()), Seen::Outside);
        assert_eq!(classify(b"rl:*1", b"rl:*", &mut string_no_ttl()), Seen::Suspect);
        assert_eq!(classify(b"RL:1", b"rl:", &mut string_no_ttl()), Seen::Outside);
        assert_eq!(classify(b"r", b"rl:", &mut string_no_ttl()), Seen::Outside);
        assert_eq!(classify(b"anything", b"", &mut string_no_ttl()), Seen::Suspect);
        assert_eq!(classify(b"\xff\x00k", b"\xff\x00", &mut string_no_ttl()), Seen::Suspect);
    }

    #[test]
    fn only_short_strings_without_ttl_are_suspects() {
        assert_eq!(classify(b"rl:1", b"rl:", &mut facts(true, true, 3)), Seen::Healthy);
        assert_eq!(classify(b"rl:1", b"rl:", &mut facts(false, false, 3)), Seen::Healthy);
        assert_eq!(classify(b"rl:1", b"rl:", &mut facts(true, false, 0)), Seen::Healthy);
        assert_eq!(classify(b"rl:1", b"rl:", &mut facts(true, false, 97)), Seen::Healthy);
        assert_eq!(classify(b"rl:1", b"rl:", &mut facts(true, false, 96)), Seen::Suspect);
    }

    #[test]
    fn asks_only_what_it_needs() {
        let mut outside = string_no_ttl();
        classify(b"x", b"rl:", &mut outside);
        assert!(outside.asked.is_empty());
        let mut hash = facts(false, false, 3);
        classify(b"rl:1", b"rl:", &mut hash);
        assert_eq!(hash.asked, ["is_string", "is_zset"]);
        let mut zset = Facts { is_zset: true, ..facts(false, false, 3) };
        assert_eq!(classify(b"rl:1", b"rl:", &mut zset), Seen::Suspect);
        assert_eq!(zset.asked, ["is_string", "is_zset", "has_ttl"]);
        let mut zset = Facts { is_zset: true, ..facts(false, true, 3) };
        assert_eq!(classify(b"rl:1", b"rl:", &mut zset), Seen::Healthy);
        let mut healthy = facts(true, true, 3);
        classify(b"rl:1", b"rl:", &mut healthy);
        assert_eq!(healthy.asked, ["is_string", "has_ttl"]);
    }

    #[test]
    fn limiter_values() {
        assert_eq!(Limiter::of(b"0"), Some(Limiter::Counter));
        assert_eq!(Limiter::of(b"-12"), Some(Limiter::Counter));
        for other in [&b"abc"[..], b"1.5", b"01", b"slide:60000:1:0:1", b""] {
            assert_eq!(Limiter::of(other), None);
        }
        let counts = Counts { window_ms: 60_000, start_ms: 120_000, prev: 0, curr: 1 };
        assert_eq!(Limiter::of(b"slide:60000:120000:0:1"), Some(Limiter::Slide(counts)));
        assert_eq!(Limiter::Slide(counts).heal_at(5, 130_000), 240_000);
        assert_eq!(Limiter::Slide(counts).heal_at(5, 300_000), 300_001);
        assert_eq!(Limiter::Counter.heal_at(5, 130_000), 130_005);
        let leases = Limiter::lease_set(1.7e12, 1.8e12);
        assert_eq!(leases, Some(Limiter::Leases { latest: 1_800_000_000_000 }));
        assert_eq!(leases.unwrap().heal_at(5, 1.75e12 as i64), 1_800_000_000_000);
        assert_eq!(leases.unwrap().heal_at(5, 1.9e12 as i64), 1_900_000_000_001);
        assert_eq!(Limiter::lease_set(3.0, 1.8e12), None, "a leaderboard");
        assert_eq!(Limiter::lease_set(1.7e12, f64::INFINITY), None);
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
