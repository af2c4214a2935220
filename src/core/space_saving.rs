//! The heaviest keys of one stream in a fixed number of entries, by Filtered Space-Saving
//! (Homem and Carvalho, 2010, after Metwally, Agrawal and El Abbadi's Space-Saving, 2005):
//! RATELIMIT.TOP's summary of one view over one interval (core/top.rs keeps the views and the
//! intervals).
//!
//! The promise, per entry: the key's true weight lies in `[count - error, count]`; a key not held
//! weighs at most its bucket's bound (`bound`), never more than the least count held; and no
//! error exceeds the total weight divided by the number of entries. Heavy keys enter early and
//! stay, with small errors.
//!
//! The filter: a key that is not held adds its weight to its bucket (one of four per entry, by
//! hash) until the bucket could reach the least count held; only then does it take the lightest
//! entry's place, with the bucket as its error. Where plain Space-Saving replaces an entry on
//! every call of a key not held (every call, when many keys share the traffic evenly), this
//! replaces on about half as many, and gives tighter errors.

use std::mem;

/// Longer key names are not tracked, so that the summaries' memory stays bounded by the number of
/// entries (`Top::record` says when it skipped one).
pub const LONGEST_KEY: usize = 1024;

/// A key's weight: the truth is in `[count - error, count]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    pub count: u64,
    pub error: u64,
}

/// The bytes of a key name kept in its entry; longer names live in `SpaceSaving::long`.
const INLINE: usize = 38;

/// One cache line: the counts, the hash, and the name when it is short, so that a probe that
/// finds its key touches its slot and this line only.
#[repr(C, align(64))]
struct Entry {
    count: u64,
    error: u64,
    /// The hash's low half (its home slot) and high half (its bucket).
    tag: u32,
    high: u32,
    len: u16,
    inline: [u8; INLINE],
}

/// The heaviest keys of one stream in `capacity` entries. Adding is a hash and a probe; replacing
/// the lightest entry is amortized O(1) per unit of weight (see `settle_min`).
pub struct SpaceSaving {
    capacity: usize,
    /// The keys held, allocated up front for `capacity`.
    entries: Vec<Entry>,
    /// The names longer than `INLINE`, by entry (grown only when one comes); buffers are kept for
    /// reuse, so that memory stops growing once every entry has held a key.
    long: Vec<Vec<u8>>,
    /// Open addressing with linear probing, at most half full: 0 for empty, else the key's tag
    /// (its hash's low half, which also gives its home slot) above its entry's index + 1.
    slots: Vec<u64>,
    /// Per bucket (by the hash's high half), the most any key of the bucket that is not held may
    /// weigh: the weight of the calls filtered, or the count of an entry that gave its place.
    buckets: Vec<u64>,
    /// Per bucket, how many keys held fall in it (stuck at `u8::MAX` once there): a key whose
    /// bucket holds none is not held, and needs no probe.
    holders: Vec<u8>,
    seed: [u64; 2],
    /// Once every entry is taken: the least count held, as of the last scan, and how many entries
    /// still have it (0: scan again).
    min: u64,
    at_min_live: usize,
    /// Entries that had count `min` at the last scan; some may have grown since.
    at_min: Vec<u32>,
}

impl SpaceSaving {
    /// `capacity` entries (at least 1); `seed` keys the hash, so that nobody can aim key names at
    /// one probe chain.
    pub fn new(capacity: usize, seed: [u64; 2]) -> SpaceSaving {
        let capacity = capacity.clamp(1, 1 << 30);
        // Every allocation at once, so that memory is what the capacity says from the start,
        // whichever summaries have filled.
        SpaceSaving {
            capacity,
            entries: Vec::with_capacity(capacity),
            long: Vec::new(),
            slots: vec![0; (capacity * 2).next_power_of_two()],
            buckets: vec![0; (capacity * 4).next_power_of_two()],
            holders: vec![0; (capacity * 4).next_power_of_two()],
            seed,
            min: 0,
            at_min_live: 0,
            at_min: Vec::with_capacity(capacity),
        }
    }

    /// Counts `weight` more for `key` (at most `LONGEST_KEY` bytes).
    pub fn add(&mut self, key: &[u8], weight: u64) {
        if weight == 0 {
            return;
        }
        let hash = self.hash(key);
        let (tag, high) = (hash as u32, (hash >> 32) as u32);
        let b = self.bucket(high);
        if self.holders[b] > 0 || self.entries.len() < self.capacity {
            match self.probe(tag, key) {
                (_, Some(i)) => {
                    let e = &mut self.entries[i];
                    self.at_min_live -= usize::from(e.count == self.min && self.at_min_live > 0);
                    e.count = e.count.saturating_add(weight);
                    return;
                }
                (slot, None) if self.entries.len() < self.capacity => {
                    return self.push(slot, tag, high, key, weight);
                }
                (_, None) => {}
            }
        }
        // Filtered: the common case of a key not held, kept inline; what is rarer (a new least, a
        // replacement) is out of line, so that the path every decision takes stays short in the
        // instruction cache, which it shares with the server.
        self.settle_min();
        let bound = self.buckets[b].saturating_add(weight);
        // A newcomer's count is always above the least, so that the least only rises.
        if bound <= self.min {
            self.buckets[b] = bound;
        } else {
            self.replace_lightest(tag, high, key, weight);
        }
    }

    /// A key not held takes a free entry (nothing was filtered yet: the buckets fill only once
    /// every entry is taken).
    #[cold]
    #[inline(never)]
    fn push(&mut self, slot: usize, tag: u32, high: u32, key: &[u8], weight: u64) {
        self.entries.push(Entry { count: weight, error: 0, tag, high, len: 0, inline: [0; INLINE] });
        let i = self.entries.len() - 1;
        self.name(i, key);
        self.hold(high, 1);
        self.slots[slot] = u64::from(tag) << 32 | (i as u64 + 1);
    }

    fn bucket(&self, high: u32) -> usize {
        high as usize & (self.buckets.len() - 1)
    }

    /// The lightest entry gives its place to `key`, which may have weighed its bucket's bound
    /// while it was not held: that is its error. The entry's key leaves with its count as its
    /// bucket's bound.
    #[cold]
    #[inline(never)]
    fn replace_lightest(&mut self, tag: u32, high: u32, key: &[u8], weight: u64) {
        let i = self.lightest();
        self.unlink(i);
        let (left, left_count) = (self.bucket(self.entries[i].high), self.entries[i].count);
        self.buckets[left] = self.buckets[left].max(left_count);
        self.hold(self.entries[i].high, -1);
        self.hold(high, 1);
        let error = self.buckets[self.bucket(high)];
        let e = &mut self.entries[i];
        e.error = error;
        e.count = error.saturating_add(weight);
        (e.tag, e.high) = (tag, high);
        self.name(i, key);
        // Unlinking may have moved the empty slot a probe would have found.
        let (slot, _) = self.probe(tag, key);
        self.slots[slot] = u64::from(tag) << 32 | (i as u64 + 1);
    }

    /// One key more (`by` 1) or fewer (-1) held in the bucket of `high`; a count stuck at the
    /// most stays there (it only means a probe).
    fn hold(&mut self, high: u32, by: i8) {
        let b = self.bucket(high);
        if self.holders[b] < u8::MAX {
            self.holders[b] = self.holders[b].wrapping_add_signed(by);
        }
    }

    /// Gives entry `i` the name `key`.
    fn name(&mut self, i: usize, key: &[u8]) {
        let e = &mut self.entries[i];
        e.len = key.len().min(LONGEST_KEY) as u16;
        if key.len() <= INLINE {
            e.inline[..key.len()].copy_from_slice(key);
        } else {
            if self.long.len() <= i {
                self.long.resize_with(i + 1, Vec::new);
            }
            self.long[i].clear();
            self.long[i].extend_from_slice(key);
        }
    }

    fn key(&self, i: usize) -> &[u8] {
        let e = &self.entries[i];
        match usize::from(e.len) {
            len @ 0..=INLINE => &e.inline[..len],
            _ => &self.long[i],
        }
    }

    /// The estimate for `key` if it is held.
    pub fn get(&self, key: &[u8]) -> Option<Estimate> {
        let (_, found) = self.probe(self.hash(key) as u32, key);
        found.map(|i| Estimate { count: self.entries[i].count, error: self.entries[i].error })
    }

    /// The most `key` can weigh if it is not held: its bucket's bound.
    pub fn bound(&self, key: &[u8]) -> u64 {
        self.buckets[self.bucket((self.hash(key) >> 32) as u32)]
    }

    /// Every key held, in no order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], Estimate)> {
        (0..self.entries.len())
            .map(|i| (self.key(i), Estimate { count: self.entries[i].count, error: self.entries[i].error }))
    }

    /// Keys held.
    pub fn held(&self) -> usize {
        self.entries.len()
    }

    /// Forgets every key; the long names' buffers stay for reuse.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.slots.fill(0);
        self.buckets.fill(0);
        self.holders.fill(0);
        (self.min, self.at_min_live) = (0, 0);
        self.at_min.clear();
    }

    /// Bytes held, long names included.
    pub fn memory(&self) -> usize {
        mem::size_of::<Self>()
            + self.entries.capacity() * mem::size_of::<Entry>()
            + self.long.capacity() * mem::size_of::<Vec<u8>>()
            + self.long.iter().map(Vec::capacity).sum::<usize>()
            + (self.slots.capacity() + self.buckets.capacity()) * mem::size_of::<u64>()
            + self.holders.capacity()
            + self.at_min.capacity() * mem::size_of::<u32>()
    }

    /// A keyed 64-bit hash in the manner of wyhash: a key of up to 16 bytes is read as two
    /// (overlapping) words and costs two multiplies; a longer one folds 16 bytes at a time.
    #[inline(always)]
    fn hash(&self, key: &[u8]) -> u64 {
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let fold = |a: u64, b: u64| {
            let p = u128::from(a) * u128::from(b);
            p as u64 ^ (p >> 64) as u64
        };
        let n = key.len();
        let mut h = self.seed[0];
        // Every byte is read at least once, and the length is folded in last: a key's words and
        // length tell it apart from every other.
        let (a, b) = match n {
            0 => (0, 0),
            1..=3 => (u64::from(key[0]) << 16 | u64::from(key[n / 2]) << 8 | u64::from(key[n - 1]), 0),
            4..=8 => (u64::from(half(key, 0)), u64::from(half(key, n - 4))),
            9..=16 => (word(key, 0), word(key, n - 8)),
            _ => {
                let mut at = 0;
                while n - at > 16 {
                    h = fold(word(key, at) ^ self.seed[1], word(key, at + 8) ^ h);
                    at += 16;
                }
                (word(key, n - 16), word(key, n - 8))
            }
        };
        fold(fold(a ^ self.seed[1], b ^ h) ^ n as u64, K)
    }

    /// The slot where `key` is, or the empty one where it would go; and its entry if held. Only
    /// the entries whose tag matches are read.
    #[inline(always)]
    fn probe(&self, tag: u32, key: &[u8]) -> (usize, Option<usize>) {
        let mask = self.slots.len() - 1;
        let mut slot = tag as usize & mask;
        loop {
            match self.slots[slot] {
                0 => return (slot, None),
                s if (s >> 32) as u32 == tag && same(self.key(s as u32 as usize - 1), key) => {
                    return (slot, Some(s as u32 as usize - 1));
                }
                _ => slot = (slot + 1) & mask,
            }
        }
    }

    /// Takes entry `i` out of the slots, shifting back the ones that probed past it.
    fn unlink(&mut self, i: usize) {
        let mask = self.slots.len() - 1;
        let mut hole = self.entries[i].tag as usize & mask;
        while self.slots[hole] as u32 as usize != i + 1 {
            hole = (hole + 1) & mask;
        }
        let mut next = (hole + 1) & mask;
        while let s @ 1.. = self.slots[next] {
            let home = (s >> 32) as usize & mask;
            // It may move into the hole if the hole lies between its home and where it is.
            if next.wrapping_sub(home) & mask >= next.wrapping_sub(hole) & mask {
                self.slots[hole] = s;
                hole = next;
            }
            next = (next + 1) & mask;
        }
        self.slots[hole] = 0;
    }

    /// Makes `min` the least count held again once no entry has it any more. The least never
    /// falls (counts only grow, and a newcomer's is above it), so each scan finds a higher one than
    /// the last: the scans cost at most the total weight added, in all.
    #[inline(always)]
    fn settle_min(&mut self) {
        if self.at_min_live == 0 {
            self.scan_min();
        }
    }

    #[cold]
    #[inline(never)]
    fn scan_min(&mut self) {
        let live = &self.entries;
        let min = live.iter().map(|e| e.count).min().unwrap_or(0);
        self.at_min.clear();
        self.at_min.extend((0..live.len() as u32).filter(|&i| live[i as usize].count == min));
        (self.min, self.at_min_live) = (min, self.at_min.len());
    }

    /// An entry with the least count (the list also holds entries that have grown since the scan).
    fn lightest(&mut self) -> usize {
        loop {
            self.settle_min();
            while let Some(i) = self.at_min.pop() {
                if self.entries[i as usize].count == self.min {
                    self.at_min_live -= 1;
                    return i as usize;
                }
            }
            self.at_min_live = 0;
        }
    }
}

/// The 8 bytes of `s` from `at`, little-endian.
#[inline(always)]
fn word(s: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(s[at..at + 8].try_into().unwrap_or_default())
}

/// The 4 bytes of `s` from `at`, little-endian.
#[inline(always)]
fn half(s: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(s[at..at + 4].try_into().unwrap_or_default())
}

/// Whether two names are equal, read as the hash reads them: a few (overlapping) words, no loop
/// for names of up to 16 bytes (names are short: a call to `memcmp` would cost more than this).
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        _ => {
            let mut at = 0;
            while at + 8 < n {
                if word(a, at) != word(b, at) {
                    return false;
                }
                at += 8;
            }
            word(a, n - 8) == word(b, n - 8)
        }
    }
}

#[cfg(test)]
pub(super) mod testing {
    use std::collections::HashMap;

    use super::INLINE;

    // Full 64-bit words, as the server's are: smaller ones leave the folds without high halves.
    pub const SEED: [u64; 2] = [0x243F_6A88_85A3_08D3, 0x1319_8A2E_0370_7344];

    /// Names of every length class the hash reads differently; every fifth is longer than an
    /// entry holds.
    pub fn key(i: u64) -> Vec<u8> {
        let pad = [INLINE, 0, 5, 11, 20][(i % 5) as usize];
        let name = format!("{i}:{}", "x".repeat(pad)).into_bytes();
        if i == 1 {
            name[..1].to_vec()
        } else {
            name
        }
    }

    /// Truth per key over a stream, for the properties.
    pub fn truth(stream: &[(u64, u64)]) -> HashMap<Vec<u8>, u64> {
        let mut t = HashMap::new();
        for &(k, w) in stream {
            *t.entry(key(k)).or_insert(0) += w;
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::testing::{key, truth, SEED};
    use super::*;

    #[test]
    fn every_byte_and_the_length_count_in_the_hash() {
        for seed in
            [SEED, [0xB7E1_5162_8AED_2A6A, 0xBF71_5880_9CF4_F3C7], [0x9216_D5D9_8979_FB1B, 0xD131_0BA6_98DF_B5AC]]
        {
            distinct_for_every_byte_and_length(&SpaceSaving::new(1, seed));
        }
    }

    #[test]
    fn names_are_the_same_only_when_equal() {
        for len in 0..=40 {
            let one_byte_set = |at: usize| {
                let mut k = vec![b'a'; len];
                if at < len {
                    k[at] = b'b';
                }
                k
            };
            for i in 0..=len {
                for j in 0..=len {
                    assert_eq!(same(&one_byte_set(i), &one_byte_set(j)), i == j, "length {len}, bytes {i} and {j}");
                }
            }
        }
        assert!(!same(b"ab", b"abc"));
    }

    fn distinct_for_every_byte_and_length(s: &SpaceSaving) {
        let mut seen = HashMap::new();
        for len in 0..=40 {
            for at in 0..=len {
                let mut k = vec![0; len];
                if at < len {
                    k[at] = 1;
                }
                if let Some(other) = seen.insert(s.hash(&k), k.clone()) {
                    panic!("{k:?} and {other:?}");
                }
            }
        }
    }

    #[test]
    fn exact_while_every_key_fits() {
        let mut s = SpaceSaving::new(4, SEED);
        for (k, w) in [(1, 3), (2, 1), (1, 2), (3, 7)] {
            s.add(&key(k), w);
        }
        assert_eq!(s.get(&key(1)), Some(Estimate { count: 5, error: 0 }));
        assert_eq!(s.get(&key(3)), Some(Estimate { count: 7, error: 0 }));
        assert_eq!(s.get(&key(9)), None);
        assert_eq!((s.held(), s.bound(&key(9))), (3, 0));
    }

    #[test]
    fn a_newcomer_waits_in_its_bucket_then_takes_the_lightest_place() {
        let mut s = SpaceSaving::new(2, SEED);
        s.add(b"a", 5);
        s.add(b"b", 2);
        // c's bucket holds its weight while it could not pass the least count (2).
        s.add(b"c", 1);
        s.add(b"c", 1);
        assert_eq!((s.get(b"c"), s.bound(b"c")), (None, 2));
        s.add(b"c", 1);
        assert_eq!(s.get(b"c"), Some(Estimate { count: 3, error: 2 }));
        assert_eq!(s.get(b"b"), None);
        assert!(s.bound(b"b") >= 2, "b left with its count as its bucket's bound");
        assert_eq!(s.get(b"a"), Some(Estimate { count: 5, error: 0 }));
    }

    #[test]
    fn a_bucket_holding_too_many_to_count_is_always_probed() {
        let mut s = SpaceSaving::new(1, SEED);
        (0..300).for_each(|_| s.hold(7, 1));
        (0..300).for_each(|_| s.hold(7, -1));
        assert_eq!(s.holders[s.bucket(7)], u8::MAX);
        s.hold(8, 1);
        s.hold(8, -1);
        assert_eq!(s.holders[s.bucket(8)], 0);
    }

    #[test]
    fn zero_weight_changes_nothing() {
        let mut s = SpaceSaving::new(1, SEED);
        s.add(b"a", 0);
        assert_eq!(s.held(), 0);
    }

    #[test]
    fn clear_forgets_and_keeps_buffers() {
        let mut s = SpaceSaving::new(8, SEED);
        let short = |i: u64| format!("s{i}").into_bytes();
        (0..100).for_each(|i| s.add(&short(i), 1));
        let memory = s.memory();
        s.clear();
        assert_eq!((s.held(), s.bound(&short(99)), s.get(&short(99))), (0, 0, None));
        assert_eq!(s.memory(), memory);
        (100..200).for_each(|i| s.add(&short(i), 1));
        assert_eq!(s.memory(), memory);
    }

    #[test]
    fn memory_is_flat_over_distinct_keys() {
        let mut s = SpaceSaving::new(64, SEED);
        let name = |i: u64| format!("user:{i:012}").into_bytes();
        (0..1_000).for_each(|i| s.add(&name(i), 1));
        let warm = s.memory();
        (1_000..200_000).for_each(|i| s.add(&name(i), 1 + i % 3));
        assert_eq!(s.memory(), warm, "short names live in the entries");
        // Long names keep a buffer per entry, reused: bounded by the longest name an entry held.
        let long = |i: u64| format!("user:{i:012}:{}", "-".repeat(100 + (i % 3) as usize)).into_bytes();
        (0..200_000).for_each(|i| s.add(&long(i), 1));
        let warm = s.memory();
        (200_000..400_000).for_each(|i| s.add(&long(i), 1));
        assert_eq!(s.memory(), warm);
    }

    proptest! {
        /// Every key's truth lies within its estimate; a key not held weighs at most its bound;
        /// no error exceeds the total over the capacity; the slots find every entry.
        #[test]
        fn estimates_bound_the_truth(
            capacity in 1usize..12,
            stream in prop::collection::vec((0u64..40, 1u64..5), 0..400),
        ) {
            let mut s = SpaceSaving::new(capacity, SEED);
            for &(k, w) in &stream {
                s.add(&key(k), w);
            }
            let total: u64 = stream.iter().map(|&(_, w)| w).sum();
            let truth = truth(&stream);
            prop_assert!(s.held() <= capacity);
            prop_assert!(s.iter().map(|(_, e)| e.count).sum::<u64>() <= total);
            for (k, &t) in &truth {
                match s.get(k) {
                    Some(e) => {
                        prop_assert!(e.count - e.error <= t && t <= e.count, "{:?} {} {:?}", k, t, e);
                        prop_assert!(e.error <= total / capacity as u64);
                    }
                    None => prop_assert!(t <= s.bound(k)),
                }
            }
            for (k, e) in s.iter() {
                prop_assert_eq!(s.get(k), Some(e));
                prop_assert!(truth.contains_key(k));
            }
        }
    }
}
