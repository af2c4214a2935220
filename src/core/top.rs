//! Who is being limited: RATELIMIT.TOP's views (denied calls, admitted cost, shadowed calls), each
//! a Space-Saving summary (core/space_saving.rs) over the current interval and the one before it,
//! counted a batch of decisions at a time.

use std::cmp::Reverse;
use std::mem;

use super::space_saving::SpaceSaving;
pub use super::space_saving::{Estimate, LONGEST_KEY};

/// One view over the current interval and the one before it, so that an answer never comes
/// from a summary started a moment ago: it covers at least the last interval, at most two.
pub struct Recent {
    current: SpaceSaving,
    previous: SpaceSaving,
    /// When the current interval ends, in Unix ms.
    ends_at: i64,
}

impl Recent {
    fn new(capacity: usize, seed: [u64; 2]) -> Recent {
        Recent {
            current: SpaceSaving::new(capacity, seed),
            previous: SpaceSaving::new(capacity, seed),
            ends_at: i64::MIN,
        }
    }

    /// Moves to the interval of `now_ms`: intervals are aligned to multiples of `interval_ms`
    /// since the epoch, so that every node of a cluster covers the same span.
    #[inline]
    fn roll(&mut self, now_ms: i64, interval_ms: i64) {
        if now_ms >= self.ends_at {
            self.next_interval(now_ms, interval_ms);
        }
    }

    #[cold]
    fn next_interval(&mut self, now_ms: i64, interval_ms: i64) {
        // The current one becomes the previous if it ended less than an interval ago.
        if now_ms < self.ends_at.saturating_add(interval_ms) {
            mem::swap(&mut self.current, &mut self.previous);
        } else {
            self.previous.clear();
        }
        self.current.clear();
        self.ends_at = now_ms - now_ms.rem_euclid(interval_ms) + interval_ms;
    }

    /// Every key held in either interval, with its weight over both, heaviest first.
    fn ranked(&self) -> Vec<(&[u8], Estimate)> {
        let over_both = |key: &[u8], this: Estimate, other: &SpaceSaving| {
            let (count, error) =
                other.get(key).map_or_else(|| (other.bound(key), other.bound(key)), |e| (e.count, e.error));
            Estimate { count: this.count.saturating_add(count), error: this.error.saturating_add(error) }
        };
        let mut all: Vec<(&[u8], Estimate)> =
            self.current.iter().map(|(k, e)| (k, over_both(k, e, &self.previous))).collect();
        let only_before = self.previous.iter().filter(|(k, _)| self.current.get(k).is_none());
        all.extend(only_before.map(|(k, e)| (k, over_both(k, e, &self.current))));
        all.sort_unstable_by(|(ka, a), (kb, b)| {
            (Reverse(a.count), Reverse(a.count - a.error), ka).cmp(&(Reverse(b.count), Reverse(b.count - b.error), kb))
        });
        all
    }

    fn clear(&mut self) {
        self.current.clear();
        self.previous.clear();
    }

    fn memory(&self) -> usize {
        self.current.memory() + self.previous.memory()
    }

    fn held(&self) -> usize {
        self.current.held() + self.previous.held()
    }
}

/// Which stream a call counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Denied calls, one each.
    Denied = 0,
    /// Admitted calls, by their cost.
    Admitted = 1,
    /// Calls shadow mode admitted that would have been denied, one each.
    Shadowed = 2,
}

/// Decisions are counted a batch at a time: counting each as it came ran the summaries' code
/// once per command, and evicted as much of the server's own code from the instruction cache
/// again (callgrind: 36 more misses a HIT, for some 170 instructions); a batch runs it hot.
const BATCH: usize = 64;
/// The batch's names, at most: a batch is counted early when the next name would not fit.
const BATCH_BYTES: usize = 4 * LONGEST_KEY;

/// A decision waiting in the batch; its name is in `Batch::names`, ending at `end`.
#[derive(Clone, Copy)]
struct Decision {
    now_ms: i64,
    interval_ms: i64,
    weight: u64,
    end: u32,
    view: View,
}

const NO_DECISION: Decision = Decision { now_ms: 0, interval_ms: 0, weight: 0, end: 0, view: View::Denied };

/// Decisions not counted yet, in the order they came, in fixed arrays: adding one is a few
/// stores, with nothing to grow.
struct Batch {
    decisions: [Decision; BATCH],
    len: usize,
    names: [u8; BATCH_BYTES],
    names_len: usize,
}

/// A node's three views.
pub struct Top {
    /// By `View`.
    views: [Recent; 3],
    capacity: usize,
    /// Every read counts it first.
    batch: Box<Batch>,
}

impl Top {
    /// `capacity` entries per view and interval.
    pub fn new(capacity: usize, seed: [u64; 2]) -> Top {
        Top {
            views: [Recent::new(capacity, seed), Recent::new(capacity, seed), Recent::new(capacity, seed)],
            capacity,
            batch: Box::new(Batch { decisions: [NO_DECISION; BATCH], len: 0, names: [0; BATCH_BYTES], names_len: 0 }),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Counts `weight` for `key` in `view` at `now_ms` (in the batch: reads see it); false if the
    /// key's name is too long to track. Inlined into the commands, whose registers are saved
    /// already.
    #[inline(always)]
    pub fn record(&mut self, view: View, key: &[u8], weight: u64, now_ms: i64, interval_ms: i64) -> bool {
        let b = &mut *self.batch;
        let (len, start, end) = (b.len, b.names_len, b.names_len + key.len());
        if len >= BATCH || end > BATCH_BYTES || key.len() > LONGEST_KEY {
            return self.record_after_counting(view, key, weight, now_ms, interval_ms);
        }
        copy_name(&mut b.names[start..end], key);
        b.decisions[len] = Decision { now_ms, interval_ms, weight, end: end as u32, view };
        (b.len, b.names_len) = (len + 1, end);
        true
    }

    /// `record` when the batch is full, or the name too long.
    #[cold]
    #[inline(never)]
    fn record_after_counting(&mut self, view: View, key: &[u8], weight: u64, now_ms: i64, interval_ms: i64) -> bool {
        if key.len() > LONGEST_KEY {
            return false;
        }
        self.count_batch();
        self.record(view, key, weight, now_ms, interval_ms)
    }

    /// Counts the batch's decisions into the views, in order (one copy of this loop, for every
    /// caller).
    #[inline(never)]
    fn count_batch(&mut self) {
        let b = &mut *self.batch;
        let mut start = 0;
        for d in &b.decisions[..b.len] {
            let end = d.end as usize;
            let recent = &mut self.views[d.view as usize];
            recent.roll(d.now_ms, d.interval_ms);
            recent.current.add(&b.names[start..end], d.weight);
            start = end;
        }
        (b.len, b.names_len) = (0, 0);
    }

    /// The keys of `view` at `now_ms`, heaviest first (ties: the surer count, then the name).
    pub fn ranked(&mut self, view: View, now_ms: i64, interval_ms: i64) -> Vec<(&[u8], Estimate)> {
        self.count_batch();
        let recent = &mut self.views[view as usize];
        recent.roll(now_ms, interval_ms);
        recent.ranked()
    }

    /// Forgets every view, and the batch.
    pub fn reset(&mut self) {
        (self.batch.len, self.batch.names_len) = (0, 0);
        self.views.iter_mut().for_each(Recent::clear);
    }

    /// Bytes held by the views and the batch.
    pub fn memory(&mut self) -> usize {
        self.count_batch();
        mem::size_of::<Self>() + self.views.iter().map(Recent::memory).sum::<usize>() + mem::size_of::<Batch>()
    }

    /// Entries in use, over every view and interval.
    pub fn held(&mut self) -> usize {
        self.count_batch();
        self.views.iter().map(Recent::held).sum()
    }
}

/// Copies a name into `to`, of its length: names are short, and a call to `memcpy` would cost
/// more than the (overlapping) word copies `same` reads them with.
#[inline(always)]
fn copy_name(to: &mut [u8], name: &[u8]) {
    let n = name.len();
    match n {
        0 => {}
        1..=3 => (to[0], to[n / 2], to[n - 1]) = (name[0], name[n / 2], name[n - 1]),
        4..=8 => {
            to[..4].copy_from_slice(&name[..4]);
            to[n - 4..].copy_from_slice(&name[n - 4..]);
        }
        9..=16 => {
            to[..8].copy_from_slice(&name[..8]);
            to[n - 8..].copy_from_slice(&name[n - 8..]);
        }
        _ => copy_long_name(to, name),
    }
}

/// Out of line, so that the common path makes no call (and saves no registers for one).
#[cold]
#[inline(never)]
fn copy_long_name(to: &mut [u8], name: &[u8]) {
    to.copy_from_slice(name);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::core::space_saving::testing::{key, truth, SEED};

    #[test]
    fn names_are_copied_whole_whatever_their_length() {
        for len in 0..=40 {
            let name: Vec<u8> = (1..=len as u8).collect();
            let mut to = vec![0; len];
            copy_name(&mut to, &name);
            assert_eq!(to, name);
        }
    }

    #[test]
    fn intervals_roll_at_aligned_boundaries_and_keep_one_before() {
        let mut top = Top::new(8, SEED);
        let ranked = |top: &mut Top, now| -> Vec<(Vec<u8>, u64)> {
            top.ranked(View::Denied, now, 1_000).into_iter().map(|(k, e)| (k.to_vec(), e.count)).collect()
        };
        top.record(View::Denied, b"a", 1, 10_500, 1_000);
        top.record(View::Denied, b"a", 1, 10_999, 1_000);
        top.record(View::Denied, b"b", 1, 11_000, 1_000);
        assert_eq!(ranked(&mut top, 11_999), [(b"a".to_vec(), 2), (b"b".to_vec(), 1)]);
        // 12_000 starts a new interval: [11_000, 12_000) is the one before, b is in it.
        assert_eq!(ranked(&mut top, 12_000), [(b"b".to_vec(), 1)]);
        assert_eq!(ranked(&mut top, 12_999), [(b"b".to_vec(), 1)]);
        assert_eq!(ranked(&mut top, 13_000), []);
        // Admitted is its own view.
        assert!(top.ranked(View::Admitted, 13_000, 1_000).is_empty());
    }

    #[test]
    fn a_gap_of_two_intervals_forgets_both() {
        let mut top = Top::new(8, SEED);
        top.record(View::Admitted, b"a", 5, 1_000, 1_000);
        assert_eq!(top.ranked(View::Admitted, 2_999, 1_000).len(), 1);
        top.record(View::Admitted, b"b", 1, 4_000, 1_000);
        let keys: Vec<_> = top.ranked(View::Admitted, 4_000, 1_000).into_iter().map(|(k, _)| k.to_vec()).collect();
        assert_eq!(keys, [b"b".to_vec()]);
    }

    #[test]
    fn a_clock_that_steps_back_stays_in_the_interval() {
        let mut top = Top::new(8, SEED);
        top.record(View::Denied, b"a", 1, 5_500, 1_000);
        top.record(View::Denied, b"a", 1, 4_000, 1_000);
        assert_eq!(top.ranked(View::Denied, 5_600, 1_000)[0].1, Estimate { count: 2, error: 0 });
    }

    #[test]
    fn long_names_are_not_tracked() {
        let mut top = Top::new(8, SEED);
        assert!(top.record(View::Denied, &[b'x'; LONGEST_KEY], 1, 0, 1_000));
        assert!(!top.record(View::Denied, &[b'x'; LONGEST_KEY + 1], 1, 0, 1_000));
        assert_eq!(top.held(), 1);
    }

    #[test]
    fn memory_is_allocated_up_front_and_kept_after_reset() {
        let mut top = Top::new(16, SEED);
        assert_eq!(top.capacity(), 16);
        let empty = top.memory();
        let short = |i: u64| format!("s{i}").into_bytes();
        for now in [0, 1_000, 2_000] {
            (0..100).for_each(|i| {
                top.record(View::Denied, &short(i), 1, now, 1_000);
                top.record(View::Admitted, &short(i), 2, now, 1_000);
            });
        }
        assert_eq!(top.memory(), empty, "allocated up front, whichever summaries filled");
        (0..100).for_each(|i| {
            top.record(View::Denied, &key(i), 1, 2_000, 1_000);
        });
        let used = top.memory();
        assert!(used > empty, "names longer than an entry holds have buffers of their own");
        top.reset();
        assert_eq!(top.memory(), used, "buffers kept for reuse");
    }

    #[test]
    fn reads_count_the_batch_first_whatever_fills_it() {
        let mut top = Top::new(8, SEED);
        let empty = top.memory();
        let long = |i: u8| vec![i; LONGEST_KEY];
        // Five longest names overflow the batch's bytes before its count.
        for i in 0..5 {
            assert!(top.record(View::Admitted, &long(i), u64::from(i) + 1, 0, 1_000));
        }
        let ranked = top.ranked(View::Admitted, 0, 1_000);
        let counts: Vec<u64> = ranked.iter().map(|(_, e)| e.count).collect();
        assert_eq!(counts, [5, 4, 3, 2, 1]);
        assert_eq!(ranked[0].0, &long(4)[..]);
        assert!(!top.record(View::Admitted, &[0; LONGEST_KEY + 1], 1, 0, 1_000));
        // Held by its view at once, though the batch is not full.
        top.record(View::Denied, b"d", 1, 0, 1_000);
        assert_eq!(top.held(), 6);
        assert!(top.memory() > empty, "the long names' buffers");
        top.record(View::Denied, b"d", 1, 0, 1_000);
        top.reset();
        assert!(top.ranked(View::Denied, 0, 1_000).is_empty(), "the batch is forgotten too");
    }

    #[test]
    fn reset_forgets_both_views() {
        let mut top = Top::new(8, SEED);
        top.record(View::Denied, b"a", 1, 0, 1_000);
        top.record(View::Admitted, b"a", 1, 0, 1_000);
        top.reset();
        assert_eq!(top.held(), 0);
    }

    proptest! {
        /// Over two intervals, the merged estimate bounds the truth of the span it covers.
        #[test]
        fn ranked_bounds_the_truth_over_both_intervals(
            capacity in 1usize..8,
            stream in prop::collection::vec((0u64..20, 1u64..4, 0i64..3_000), 0..300),
        ) {
            let mut stream = stream;
            stream.sort_by_key(|&(_, _, t)| t);
            let mut top = Top::new(capacity, SEED);
            for &(k, w, t) in &stream {
                top.record(View::Admitted, &key(k), w, t, 1_000);
            }
            let now = stream.last().map_or(0, |&(_, _, t)| t);
            let since = now - now.rem_euclid(1_000) - 1_000;
            let covered: Vec<(u64, u64)> = stream.iter().filter(|&&(_, _, t)| t >= since).map(|&(k, w, _)| (k, w)).collect();
            let truth = truth(&covered);
            let ranked = top.ranked(View::Admitted, now, 1_000);
            for (k, e) in &ranked {
                let t = truth.get(*k).copied().unwrap_or(0);
                prop_assert!(e.count - e.error <= t && t <= e.count, "{:?} {} {:?}", k, t, e);
            }
            prop_assert!(ranked.windows(2).all(|w| w[0].1.count >= w[1].1.count));
        }
    }
}
