//! Concurrency leases: the whole algorithm of `RATELIMIT.ACQUIRE`, `RATELIMIT.RELEASE` and
//! `RATELIMIT.RENEW`, with no Redis in it.
//!
//! A key is a sorted set: member = lease id, score = the lease's expiry (Unix ms). A lease is live
//! while its expiry is after now. At most `limit` are live. Every write first prunes the expired
//! ones, and leaves the key's own expiry at its latest lease's, so that the key disappears with its
//! last lease and a holder that crashed gives its permit back when its lease ends.

use std::collections::BTreeMap;

/// What a call reads of a lease set at its `now`. Each is asked for only when the decision needs
/// it (a release of the only lease reads its id's score and nothing else), so that the glue can
/// answer from the sorted set lazily.
pub trait Leases {
    /// The call's id's expiry, if it is a member (live or not).
    fn mine(&mut self) -> Option<i64>;
    /// Leases whose expiry has passed: any write removes them.
    fn expired(&mut self) -> i64;
    /// Leases whose expiry is after now.
    fn live(&mut self) -> i64;
    /// The earliest live expiry.
    fn earliest(&mut self) -> Option<i64>;
    /// The latest live expiry among the leases other than the call's id.
    fn latest_other(&mut self) -> Option<i64>;
    /// The key's own expiry; `None` without TTL (or without key).
    fn key_expiry(&mut self) -> Option<i64>;
}

fn mine_live(r: &mut impl Leases, now_ms: i64) -> bool {
    r.mine().is_some_and(|at| at > now_ms)
}

/// What a call writes, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Writes {
    /// Remove every lease whose expiry is at or before now.
    pub prune: bool,
    /// Give the id this expiry (add it, or move its lease).
    pub set_mine: Option<i64>,
    /// Remove the id's live lease.
    pub remove_mine: bool,
    /// The key's new expiry: its latest lease's, where it changes. None when the set ends empty
    /// (the key goes with its last member).
    pub expire_at: Option<i64>,
    /// The set existed without TTL, and `expire_at` gives it one (for INFO's heals).
    pub heals: bool,
    /// The expiry of the id's live lease that `set_mine` moves or `remove_mine` removes: not a
    /// write, but what the count of leases held (`InFlight`) takes back.
    pub ends: Option<i64>,
}

impl Writes {
    pub fn any(&self) -> bool {
        self.prune || self.set_mine.is_some() || self.remove_mine || self.expire_at.is_some()
    }
}

/// The writes of a call that sets the id's lease to `set_mine` or removes it: pruning, the id's
/// change, and the key's expiry set to its latest lease where that moved, or where the key had
/// none (the heal, even for a call that changes nothing else).
fn writes(r: &mut impl Leases, now_ms: i64, set_mine: Option<i64>, remove_mine: bool) -> Writes {
    let prune = r.expired() > 0;
    let mut w = Writes { prune, set_mine, remove_mine, ..Writes::default() };
    if !(prune || set_mine.is_some() || remove_mine) && r.key_expiry().is_some() {
        return w;
    }
    let mine_live = mine_live(r, now_ms);
    w.ends = r.mine().filter(|_| mine_live && (set_mine.is_some() || remove_mine));
    let mine_after = match (set_mine, remove_mine) {
        (Some(at), _) => Some(at),
        (None, true) => None,
        (None, false) => r.mine().filter(|_| mine_live),
    };
    let others_live = r.live() - i64::from(mine_live);
    let latest = if others_live > 0 { r.latest_other().max(mine_after) } else { mine_after };
    w.expire_at = latest.filter(|&at| r.key_expiry() != Some(at));
    w.heals = w.expire_at.is_some() && r.key_expiry().is_none() && r.live() + r.expired() > 0;
    w
}

/// `RATELIMIT.ACQUIRE`'s decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    pub acquired: bool,
    /// Live leases after the call.
    pub in_use: i64,
    pub remaining: i64,
    /// Acquired: ms until this lease expires; denied: ms until the earliest live lease does.
    pub ms: i64,
    pub writes: Writes,
}

/// Takes one of `limit` permits for `lease_ms`: the id's own live lease is renewed and counted
/// once (a retry after a lost reply never takes a second permit); else a new lease if fewer than
/// `limit` are live; else denied, writing nothing but the pruning and the heal.
pub fn acquire(limit: i64, lease_ms: i64, r: &mut impl Leases, now_ms: i64) -> Acquired {
    let at = now_ms.saturating_add(lease_ms);
    let mine_live = mine_live(r, now_ms);
    let live = r.live();
    let (acquired, in_use) = if mine_live {
        (true, live)
    } else if live < limit {
        (true, live + 1)
    } else {
        (false, live)
    };
    let ms = if acquired { at - now_ms } else { r.earliest().map_or(0, |e| e - now_ms) };
    Acquired {
        acquired,
        in_use,
        remaining: (limit - in_use).max(0),
        ms,
        writes: writes(r, now_ms, acquired.then_some(at), false),
    }
}

/// A permit `acquire` denied, taken anyway (shadow mode): a new lease past the limit.
pub fn acquire_anyway(lease_ms: i64, r: &mut impl Leases, now_ms: i64) -> Acquired {
    let at = now_ms.saturating_add(lease_ms);
    Acquired {
        acquired: true,
        in_use: r.live() + 1,
        remaining: 0,
        ms: at - now_ms,
        writes: writes(r, now_ms, Some(at), false),
    }
}

/// `RATELIMIT.RELEASE`: whether the id held a live lease, which it then no longer does.
pub fn release(r: &mut impl Leases, now_ms: i64) -> (bool, Writes) {
    let live = mine_live(r, now_ms);
    (live, writes(r, now_ms, None, live))
}

/// `RATELIMIT.RENEW`: the ms until the id's lease now expires, or -1 if it was not live (the
/// holder lost its permit).
pub fn renew(lease_ms: i64, r: &mut impl Leases, now_ms: i64) -> (i64, Writes) {
    if !mine_live(r, now_ms) {
        return (-1, writes(r, now_ms, None, false));
    }
    let at = now_ms.saturating_add(lease_ms);
    (at - now_ms, writes(r, now_ms, Some(at), false))
}

/// The leases held now, over every lease set: each lease granted counts from its grant until it is
/// released, moved, or its expiry's second has passed. Counted by that second, so that what the
/// count keeps is bounded by the seconds leases run for, and a lease removed behind the module's
/// back (`DEL`, `FLUSHALL`) leaves it when its lease would have ended.
#[derive(Debug, Default)]
pub struct InFlight {
    by_second: BTreeMap<i64, u64>,
    total: u64,
}

impl InFlight {
    pub const fn new() -> InFlight {
        InFlight { by_second: BTreeMap::new(), total: 0 }
    }

    /// The second a lease expiring at `at_ms` stops counting: the first whole second at or after it.
    fn second_of(at_ms: i64) -> i64 {
        at_ms.div_euclid(1_000) + i64::from(at_ms.rem_euclid(1_000) > 0)
    }

    /// A lease granted until `at_ms`, at `now_ms`.
    pub fn held(&mut self, at_ms: i64, now_ms: i64) {
        self.forget_passed(now_ms);
        *self.by_second.entry(Self::second_of(at_ms)).or_default() += 1;
        self.total += 1;
    }

    /// A lease that was granted until `at_ms` ended before then (released, or moved).
    pub fn ended(&mut self, at_ms: i64) {
        let second = Self::second_of(at_ms);
        if let Some(n) = self.by_second.get_mut(&second) {
            *n -= 1;
            self.total -= 1;
            if *n == 0 {
                self.by_second.remove(&second);
            }
        }
    }

    /// The leases held at `now_ms`.
    pub fn count(&mut self, now_ms: i64) -> u64 {
        self.forget_passed(now_ms);
        self.total
    }

    fn forget_passed(&mut self, now_ms: i64) {
        while let Some(entry) = self.by_second.first_entry() {
            if entry.key().saturating_mul(1_000) > now_ms {
                break;
            }
            self.total -= entry.remove();
        }
    }
}

/// A lease id the module makes: 32 hex digits of a seed drawn once per server process, then the
/// call's number in that process: unique across calls, and across servers but for a chance of
/// 2^-128.
pub fn made_id(seed: u128, n: u64) -> String {
    format!("{seed:032x}-{n}")
}

/// A lease set with every reading known up front: the tests' store. It counts the range reads
/// (earliest, latest_other), the ones the glue pays most for.
#[cfg(test)]
#[derive(Debug, Clone, Copy, Default)]
struct View {
    live: i64,
    expired: i64,
    earliest: Option<i64>,
    latest_other: Option<i64>,
    mine: Option<i64>,
    key_expiry: Option<i64>,
    range_reads: u32,
}

#[cfg(test)]
impl Leases for View {
    fn mine(&mut self) -> Option<i64> {
        self.mine
    }
    fn expired(&mut self) -> i64 {
        self.expired
    }
    fn live(&mut self) -> i64 {
        self.live
    }
    fn earliest(&mut self) -> Option<i64> {
        self.range_reads += 1;
        self.earliest
    }
    fn latest_other(&mut self) -> Option<i64> {
        self.range_reads += 1;
        self.latest_other
    }
    fn key_expiry(&mut self) -> Option<i64> {
        self.key_expiry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_000;

    fn view(live: &[i64], expired: i64, mine: Option<i64>, key_expiry: Option<i64>) -> View {
        let others: Vec<i64> = live.iter().copied().filter(|&at| Some(at) != mine).collect();
        View {
            live: live.len() as i64,
            expired,
            earliest: live.iter().copied().min(),
            latest_other: others.into_iter().max(),
            mine,
            key_expiry,
            range_reads: 0,
        }
    }

    #[test]
    fn made_ids_differ_by_call_and_by_seed() {
        assert_eq!(made_id(0xabc, 7), "00000000000000000000000000000abc-7");
        assert_ne!(made_id(1, 2), made_id(1, 3));
        assert_ne!(made_id(1, 2), made_id(2, 2));
    }

    #[test]
    fn first_lease_creates_the_set_with_its_expiry() {
        let a = acquire(2, 5_000, &mut View::default(), NOW);
        let writes = Writes { set_mine: Some(NOW + 5_000), expire_at: Some(NOW + 5_000), ..Writes::default() };
        assert_eq!(a, Acquired { acquired: true, in_use: 1, remaining: 1, ms: 5_000, writes });
    }

    #[test]
    fn a_permit_taken_anyway_is_a_lease_past_the_limit() {
        let mut full = view(&[NOW + 700, NOW + 9_000], 0, None, Some(NOW + 9_000));
        let a = acquire_anyway(5_000, &mut full, NOW);
        assert_eq!((a.acquired, a.in_use, a.remaining, a.ms), (true, 3, 0, 5_000));
        assert_eq!(a.writes.set_mine, Some(NOW + 5_000), "its own lease, which ends by itself");
    }

    #[test]
    fn the_limit_holds_and_a_denial_says_when_a_permit_frees_itself() {
        let mut full = view(&[NOW + 700, NOW + 9_000], 0, None, Some(NOW + 9_000));
        let a = acquire(2, 5_000, &mut full, NOW);
        assert_eq!((a.acquired, a.in_use, a.remaining, a.ms), (false, 2, 0, 700));
        assert!(!a.writes.any(), "a denied call that prunes nothing writes nothing");
        // The same denial on a key that lost its TTL heals it to its latest lease.
        let mut leaked = View { key_expiry: None, ..full };
        assert_eq!(
            acquire(2, 5_000, &mut leaked, NOW).writes,
            Writes { expire_at: Some(NOW + 9_000), heals: true, ..Writes::default() }
        );
    }

    #[test]
    fn a_retry_with_the_same_id_is_counted_once() {
        let mut held = view(&[NOW + 700, NOW + 9_000], 0, Some(NOW + 700), Some(NOW + 9_000));
        let a = acquire(2, 5_000, &mut held, NOW);
        assert_eq!((a.acquired, a.in_use, a.ms), (true, 2, 5_000));
        assert_eq!(held.range_reads, 1, "an admitted call does not look for the earliest lease");
        // Renewed to now + 5 s; the key keeps the other lease's later expiry.
        assert_eq!(a.writes, Writes { set_mine: Some(NOW + 5_000), ends: Some(NOW + 700), ..Writes::default() });
    }

    #[test]
    fn expired_leases_are_pruned_and_free_their_permits() {
        let mut v = view(&[NOW + 9_000], 3, None, Some(NOW + 9_000));
        let a = acquire(2, 20_000, &mut v, NOW);
        assert_eq!((a.acquired, a.in_use), (true, 2));
        let writes =
            Writes { prune: true, set_mine: Some(NOW + 20_000), expire_at: Some(NOW + 20_000), ..Writes::default() };
        assert_eq!(a.writes, writes);
    }

    #[test]
    fn release_frees_a_live_lease_and_moves_the_expiry_back() {
        let mut v = view(&[NOW + 700, NOW + 9_000], 0, Some(NOW + 9_000), Some(NOW + 9_000));
        let (released, w) = release(&mut v, NOW);
        assert!(released);
        let moved_back =
            Writes { remove_mine: true, expire_at: Some(NOW + 700), ends: Some(NOW + 9_000), ..Writes::default() };
        assert_eq!(w, moved_back);
        // The last lease: the key goes with it, no expiry to set.
        let mut last = view(&[NOW + 700], 0, Some(NOW + 700), Some(NOW + 700));
        assert_eq!(release(&mut last, NOW).1, Writes { remove_mine: true, ends: Some(NOW + 700), ..Writes::default() });
        assert_eq!(last.range_reads, 0, "the set's order is not read when no other lease is live");
        // An expired lease is no longer held: 0, and it is pruned.
        let mut gone = view(&[NOW + 700], 1, Some(NOW - 1), Some(NOW + 700));
        assert_eq!(release(&mut gone, NOW), (false, Writes { prune: true, ..Writes::default() }));
    }

    #[test]
    fn renew_moves_only_a_live_lease() {
        let mut v = view(&[NOW + 700], 0, Some(NOW + 700), Some(NOW + 700));
        let w = Writes {
            set_mine: Some(NOW + 60_000),
            expire_at: Some(NOW + 60_000),
            ends: Some(NOW + 700),
            ..Writes::default()
        };
        assert_eq!(renew(60_000, &mut v, NOW), (60_000, w));
        assert_eq!(renew(60_000, &mut view(&[NOW + 700], 0, None, Some(NOW + 700)), NOW), (-1, Writes::default()));
        // A shorter lease on the latest one brings the key's expiry back to the next latest.
        let mut v = view(&[NOW + 700, NOW + 9_000], 0, Some(NOW + 9_000), Some(NOW + 9_000));
        assert_eq!(renew(100, &mut v, NOW).1.expire_at, Some(NOW + 700));
    }

    #[test]
    fn a_lease_is_in_flight_until_it_ends_or_its_second_passes() {
        let mut f = InFlight::new();
        f.held(NOW + 1_500, NOW);
        f.held(NOW + 1_500, NOW);
        f.held(NOW + 4_000, NOW);
        assert_eq!(f.count(NOW), 3);
        f.ended(NOW + 1_500);
        assert_eq!(f.count(NOW + 1_999), 2, "counted to the end of the second its lease ends in");
        assert_eq!(f.count(NOW + 2_000), 1);
        // Ending a lease whose second is no longer counted takes nothing from the others.
        f.ended(NOW + 1_500);
        f.ended(NOW - 60_000);
        assert_eq!(f.count(NOW + 2_000), 1);
        assert_eq!(f.count(NOW + 4_000), 0);
        assert!(f.by_second.is_empty(), "nothing kept for seconds that have passed");
        // Before 1970 as after it.
        f.held(-1_500, -3_000);
        assert_eq!((f.count(-1_001), f.count(-1_000)), (1, 0));
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    const NOW: i64 = 1_700_000_000_000;

    /// A set of leases (expiries around now), the call's id among them or not, a TTL or not.
    fn any_set() -> impl Strategy<Value = (Vec<i64>, Option<usize>, bool)> {
        (prop::collection::vec(-5_000i64..5_000, 0..8), any::<prop::sample::Index>(), any::<bool>(), any::<bool>())
            .prop_map(|(offsets, index, has_mine, ttl)| {
                let leases: Vec<i64> = offsets.iter().map(|o| NOW + o).collect();
                let mine = (has_mine && !leases.is_empty()).then(|| index.index(leases.len()));
                (leases, mine, ttl)
            })
    }

    fn view_of(leases: &[i64], mine: Option<usize>, ttl: bool) -> View {
        let live: Vec<i64> = leases.iter().copied().filter(|&at| at > NOW).collect();
        let others = leases.iter().enumerate().filter(|&(i, &at)| Some(i) != mine && at > NOW).map(|(_, &at)| at);
        View {
            live: live.len() as i64,
            expired: (leases.len() - live.len()) as i64,
            earliest: live.iter().copied().min(),
            latest_other: others.max(),
            mine: mine.map(|i| leases[i]),
            key_expiry: ttl.then(|| leases.iter().copied().max()).flatten(),
            range_reads: 0,
        }
    }

    /// The set after `w`, as the glue would leave it: (leases, the key's expiry).
    fn apply(leases: &[i64], mine: Option<usize>, key_expiry: Option<i64>, w: &Writes) -> (Vec<i64>, Option<i64>) {
        let mut after: Vec<(bool, i64)> = leases.iter().enumerate().map(|(i, &at)| (Some(i) == mine, at)).collect();
        if w.prune {
            after.retain(|&(_, at)| at > NOW);
        }
        if let Some(at) = w.set_mine {
            after.retain(|&(is_mine, _)| !is_mine);
            after.push((true, at));
        }
        if w.remove_mine {
            after.retain(|&(is_mine, _)| !is_mine);
        }
        let expiry = if after.is_empty() { None } else { w.expire_at.or(key_expiry) };
        (after.into_iter().map(|(_, at)| at).collect(), expiry)
    }

    proptest! {
        #[test]
        fn every_write_leaves_the_set_pruned_with_its_latest_lease_as_expiry(
            (leases, mine, ttl) in any_set(), limit in 1i64..6, lease in 1i64..10_000, op in 0..3,
        ) {
            let mut v = view_of(&leases, mine, ttl);
            let w = match op {
                0 => acquire(limit, lease, &mut v, NOW).writes,
                1 => release(&mut v, NOW).1,
                _ => renew(lease, &mut v, NOW).1,
            };
            let (after, expiry) = apply(&leases, mine, v.key_expiry, &w);
            prop_assert_eq!(w.heals, w.expire_at.is_some() && v.key_expiry.is_none() && !leases.is_empty());
            if w.any() {
                // Pruned, and the key's expiry is its latest lease's (or it is gone).
                prop_assert!(after.iter().all(|&at| at > NOW));
                prop_assert_eq!(expiry, after.iter().copied().max());
            } else {
                // Nothing written only where nothing needed pruning or healing.
                prop_assert!(v.expired == 0 && (v.key_expiry.is_some() || v.live == 0));
            }
            // Every lease counted as held: after the write, the count is the live leases.
            let mut in_flight = InFlight::new();
            for &at in &leases {
                in_flight.held(at, NOW - 5_000);
            }
            if let Some(at) = w.ends {
                in_flight.ended(at);
            }
            if let Some(at) = w.set_mine {
                in_flight.held(at, NOW);
            }
            prop_assert_eq!(in_flight.count(NOW), after.len() as u64);
            if op == 0 {
                let a = acquire(limit, lease, &mut v, NOW);
                let live_after = after.iter().filter(|&&at| at > NOW).count() as i64;
                prop_assert!(live_after <= limit.max(v.live), "never more than limit, unless already over");
                prop_assert_eq!(a.in_use, live_after);
                prop_assert_eq!(a.acquired, v.mine.is_some_and(|at| at > NOW) || v.live < limit);
            }
        }
    }
}
