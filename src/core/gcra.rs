//! The GCRA decision (generic cell rate algorithm, as redis-cell and Redis's `GCRA` command use it):
//! the whole algorithm of `RATELIMIT.GCRA`, with no Redis in it.
//!
//! One value per key, the theoretical arrival time (TAT, Unix nanoseconds): when the bucket would
//! be full again. Each token moves it `emission` later; a request of `tokens` is admitted if the
//! moved TAT stays within `tolerance = emission * capacity` of now. The key expires at its TAT,
//! when the bucket is full and the key says nothing a missing key doesn't. A denied request
//! writes nothing but the heal: a key without TTL gets one at its TAT, as in the fixed window.
//!
//! Negative tokens give back: the TAT moves back by their emission, never before now (a bucket
//! holds no more than its capacity); never denied, creating no key. Settling a reservation gives
//! back the same way, and an overage moves the TAT forward past the tolerance: a debt that the
//! next requests wait out.

use crate::core::stored::{Change, Stored};

/// Limits validated by the parser: every product below fits in an `i64` of nanoseconds, with room
/// to add to any current time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// `max_burst + 1`: tokens a full bucket holds.
    pub capacity: i64,
    /// Nanoseconds per token: `period / tokens_per_period`.
    pub emission_ns: i64,
    /// `emission_ns * capacity`.
    pub tolerance_ns: i64,
    /// The tokens this request takes; 0 only looks (CL.THROTTLE's quantity 0); negative ones
    /// give back.
    pub tokens: i64,
    /// `emission_ns * tokens`, at most `MAX_SPAN_NS` either way.
    pub increment_ns: i64,
}

/// The largest `tolerance_ns` or `increment_ns` accepted: about 146 years, so that adding either
/// to any current time in nanoseconds stays inside an `i64`.
pub const MAX_SPAN_NS: i64 = i64::MAX / 2;

impl Rate {
    /// Refused when a product would pass `MAX_SPAN_NS`.
    pub fn new(max_burst: i64, emission_ns: i64, tokens: i64) -> Result<Rate, Overflow> {
        let capacity = max_burst.checked_add(1).ok_or(Overflow::Burst)?;
        let within = |v: Option<i64>| v.filter(|&v| v <= MAX_SPAN_NS);
        let tolerance_ns = within(emission_ns.checked_mul(capacity)).ok_or(Overflow::Burst)?;
        let increment_ns =
            within(emission_ns.checked_mul(tokens).and_then(i64::checked_abs)).ok_or(Overflow::Tokens)?;
        let increment_ns = if tokens < 0 { -increment_ns } else { increment_ns };
        Ok(Rate { capacity, emission_ns, tolerance_ns, tokens, increment_ns })
    }
}

/// Which product of the arguments is too large.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// `(max_burst + 1) * period / tokens_per_period`.
    Burst,
    /// `TOKENS * period / tokens_per_period`.
    Tokens,
}

/// The decision for one request: the reply numbers and the writes to make, in one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub limited: bool,
    /// Tokens available right after this request.
    pub remaining: i64,
    /// How long until the same request would be admitted; `None` when admitted, or when it asks
    /// for more than the capacity and never will be.
    pub retry_after_ns: Option<i64>,
    /// How long until the bucket is full again; 0 when it is.
    pub full_after_ns: i64,
    /// A new TAT with its expiry, or the heal's expiry alone, or nothing.
    pub change: Option<Change>,
    /// The tokens this request took: its count when admitted, with PARTIAL maybe fewer, 0 when
    /// denied or giving back.
    pub taken: i64,
}

impl Outcome {
    /// `retry_after_ns` in ms rounded up, so that a client that waits that long is admitted; -1
    /// for none.
    pub fn retry_after_ms(&self) -> i64 {
        self.retry_after_ns.map_or(-1, ceil_ms)
    }

    pub fn full_after_ms(&self) -> i64 {
        ceil_ms(self.full_after_ns)
    }
}

const NS_PER_MS: i64 = 1_000_000;

/// Nanoseconds to milliseconds, rounded up: an expiry or a wait never ends early.
pub fn ceil_ms(ns: i64) -> i64 {
    ns.div_euclid(NS_PER_MS) + i64::from(ns.rem_euclid(NS_PER_MS) != 0)
}

/// Decides one request at `now_ns` (Unix nanoseconds; `now_ms` is the same instant in ms) on a
/// bucket whose stored value is its TAT (a missing key is a full bucket).
pub fn decide(rate: &Rate, bucket: Stored, now_ns: i64, now_ms: i64) -> Outcome {
    if rate.tokens < 0 {
        return give_back(rate, bucket, now_ns, now_ms, rate.tokens.unsigned_abs()).0;
    }
    arrive(rate, bucket, now_ns, now_ms)
}

/// A request with PARTIAL: as many of its tokens as the bucket has whole, at least one. When it has
/// fewer than asked, they are granted and the bucket is left empty, the part of the next token
/// going with them (as go-redis/redis_rate's AllowAtMost); with none whole, it is denied, and
/// `retry_after` says when one will be.
pub fn decide_partial(rate: &Rate, bucket: Stored, now_ns: i64, now_ms: i64) -> Outcome {
    let tat = match bucket {
        Stored::Missing => now_ns,
        Stored::Present { value, .. } => value.max(now_ns),
    };
    let free_ns = i128::from(now_ns) + i128::from(rate.tolerance_ns) - i128::from(tat);
    let whole = (free_ns.max(0) / i128::from(rate.emission_ns)) as i64;
    if whole >= rate.tokens {
        return arrive(rate, bucket, now_ns, now_ms);
    }
    if whole < 1 {
        let one = Rate { tokens: 1, increment_ns: rate.emission_ns, ..*rate };
        return arrive(&one, bucket, now_ns, now_ms);
    }
    // now + tolerance: past the TAT, since at least one whole token is free.
    let empty = now_ns + rate.tolerance_ns;
    let change = Change::Set { value: empty, expires_at: expiry_of(empty, now_ms) };
    Outcome { taken: whole, ..admitted(rate, empty, now_ns, Some(change)) }
}

/// CL.THROTTLE's decision: `decide`'s for a quantity of 0 or more; for a negative one, redis-cell
/// 0.2.2's arithmetic (the TAT moves back from `max(TAT, now)`, with no floor at now, and a TAT
/// before now is stored to expire in a millisecond: it reads as a full bucket). None where
/// redis-cell fails to set the key's expiry (the TAT 2 ms or more before now) and leaves it
/// without TTL: the caller answers an error and writes nothing.
pub fn decide_cell(rate: &Rate, bucket: Stored, now_ns: i64, now_ms: i64) -> Option<Outcome> {
    let o = arrive(rate, bucket, now_ns, now_ms);
    match o.change {
        // redis-cell's TTL is the TAT less now, in ms truncated towards 0.
        Some(Change::Set { value, .. })
            if rate.tokens < 0 && (i128::from(value) - i128::from(now_ns)) / 1_000_000 <= -2 =>
        {
            None
        }
        _ => Some(o),
    }
}

/// One request's arrival: the TAT moves `increment_ns` from `max(TAT, now)`, admitted while it
/// stays within the tolerance of now.
fn arrive(rate: &Rate, bucket: Stored, now_ns: i64, now_ms: i64) -> Outcome {
    let (tat, expires_at) = match bucket {
        Stored::Missing => (now_ns, None),
        Stored::Present { value: tat_ns, expires_at } => (tat_ns.max(now_ns), expires_at),
    };
    // A TAT far in the future (written by hand) is simply over any limit: widen, don't wrap.
    let new_tat = i128::from(tat) + i128::from(rate.increment_ns);
    let late_by = new_tat - i128::from(now_ns) - i128::from(rate.tolerance_ns);
    let admitted = late_by <= 0;
    let tat_after = if admitted { new_tat as i64 } else { tat };
    // A request of 0 tokens (CL.THROTTLE's look) changes nothing but the heal.
    let stores = admitted && rate.tokens != 0;
    let change = match (stores, bucket, expires_at) {
        (true, _, _) => Some(Change::Set { value: tat_after, expires_at: expiry_of(tat_after, now_ms) }),
        (false, Stored::Present { value: tat_ns, .. }, None) => Some(Change::Expire { at: expiry_of(tat_ns, now_ms) }),
        (false, _, _) => None,
    };
    // Both spans are within i64: tat_after <= i64::MAX, now_ns >= 0 for any real clock, and a
    // negative increment (CL.THROTTLE's) is at most 2^62.
    let used_ns = i128::from(tat_after) - i128::from(now_ns);
    let free_ns = i128::from(rate.tolerance_ns) - used_ns;
    let never = rate.increment_ns > rate.tolerance_ns;
    Outcome {
        limited: !admitted,
        remaining: (free_ns.max(0) / i128::from(rate.emission_ns)) as i64,
        retry_after_ns: (!admitted && !never).then(|| late_by.min(i128::from(i64::MAX)) as i64),
        full_after_ns: used_ns.clamp(0, i128::from(i64::MAX)) as i64,
        change,
        taken: if admitted { rate.tokens } else { 0 },
    }
}

/// When a key holding `tat_ns` expires: at its TAT, and never at or before `now_ms` (an expiry
/// in the past would delete the key on the primary and only set it on replicas).
fn expiry_of(tat_ns: i64, now_ms: i64) -> i64 {
    ceil_ms(tat_ns).max(now_ms + 1)
}

/// The reply for a bucket left at `tat_ns`, as of an admitted request.
fn admitted(rate: &Rate, tat_ns: i64, now_ns: i64, change: Option<Change>) -> Outcome {
    let used_ns = (i128::from(tat_ns) - i128::from(now_ns)).max(0);
    let free_ns = (i128::from(rate.tolerance_ns) - used_ns).max(0);
    Outcome {
        limited: false,
        remaining: (free_ns / i128::from(rate.emission_ns)) as i64,
        retry_after_ns: None,
        full_after_ns: used_ns.min(i128::from(i64::MAX)) as i64,
        change,
        taken: 0,
    }
}

/// ALIGN: the bucket reads the clock in whole periods since the Unix epoch (`period_ns`), so that its
/// tokens come back `tokens_per_period` at once, at each boundary (as Spring Cloud Gateway's bucket
/// refills at each whole second). `decide` runs at the boundary just passed; the times it answers
/// are then counted from now to the boundary where they fall, and a key expires at the boundary
/// where its bucket is full (expiring at the TAT itself would hand out tokens before their
/// boundary).
pub fn on_boundaries(
    period_ns: i64,
    bucket: Stored,
    now_ns: i64,
    now_ms: i64,
    decide: impl FnOnce(i64) -> Option<Outcome>,
) -> Option<Outcome> {
    let p = i128::from(period_ns);
    let boundary = now_ns - now_ns.rem_euclid(period_ns);
    let up = |t: i128| (t + (-t).rem_euclid(p)).min(i128::from(i64::MAX)) as i64;
    let from_now = |t: i128| (i128::from(up(t)) - i128::from(now_ns)).max(0) as i64;
    let o = decide(boundary)?;
    let change = match (o.change, bucket) {
        (Some(Change::Set { value, .. }), _) => {
            Some(Change::Set { value, expires_at: expiry_of(up(i128::from(value)), now_ms) })
        }
        // The heal's expiry, at the stored TAT's boundary.
        (Some(Change::Expire { .. }), Stored::Present { value, .. }) => {
            Some(Change::Expire { at: expiry_of(up(i128::from(value)), now_ms) })
        }
        (change, _) => change,
    };
    let at = |after_ns: i64| i128::from(boundary) + i128::from(after_ns);
    Some(Outcome {
        retry_after_ns: o.retry_after_ns.map(|r| from_now(at(r))),
        full_after_ns: if o.full_after_ns == 0 { 0 } else { from_now(at(o.full_after_ns)) },
        change,
        ..o
    })
}

/// `tokens` given back: the TAT moves back by their emission, not before now. The outcome, and
/// how many tokens that gave back (the last one maybe in part).
fn give_back(rate: &Rate, bucket: Stored, now_ns: i64, now_ms: i64, tokens: u64) -> (Outcome, i64) {
    let Stored::Present { value: tat, expires_at } = bucket else {
        return (admitted(rate, now_ns, now_ns, None), 0);
    };
    if tat <= now_ns || tokens == 0 {
        let heal = expires_at.is_none().then(|| Change::Expire { at: expiry_of(tat, now_ms) });
        return (admitted(rate, tat, now_ns, heal), 0);
    }
    let e = i128::from(rate.emission_ns);
    let ahead = i128::from(tat) - i128::from(now_ns);
    let back = (i128::from(tokens) * e).min(ahead);
    let given = (back + e - 1) / e;
    let new_tat = (i128::from(tat) - back) as i64;
    let change = Change::Set { value: new_tat, expires_at: expiry_of(new_tat, now_ms) };
    (admitted(rate, new_tat, now_ns, Some(change)), given as i64)
}

/// `tokens` more taken whatever the tolerance (a cost already incurred): the TAT moves forward by
/// their emission from `max(TAT, now)`; `None` when it would pass `i64::MAX`.
fn charge(rate: &Rate, bucket: Stored, now_ns: i64, now_ms: i64, tokens: i64) -> Option<Outcome> {
    let tat = match bucket {
        Stored::Missing => now_ns,
        Stored::Present { value, .. } => value.max(now_ns),
    };
    let new_tat = i64::try_from(i128::from(tat) + i128::from(tokens) * i128::from(rate.emission_ns)).ok()?;
    let change = Change::Set { value: new_tat, expires_at: expiry_of(new_tat, now_ms) };
    Some(admitted(rate, new_tat, now_ns, Some(change)))
}

/// A request its bucket limited, admitted anyway (shadow mode): its tokens taken; `None` when the
/// TAT would pass `i64::MAX`.
pub fn admit_anyway(rate: &Rate, bucket: Stored, now_ns: i64, now_ms: i64) -> Option<Outcome> {
    let o = charge(rate, bucket, now_ns, now_ms, rate.tokens)?;
    Some(Outcome { taken: rate.tokens, ..o })
}

/// Settles a reservation of `amount` tokens of `rate`'s bucket, of `used`: unused tokens go
/// back (the TAT moves back, not before now), used ones beyond it move the TAT forward whatever
/// the tolerance. The outcome and the tokens applied; `None` when the TAT would pass `i64::MAX`.
pub fn settle_reserved(
    rate: &Rate,
    amount: i64,
    used: i64,
    bucket: Stored,
    now_ns: i64,
    now_ms: i64,
) -> Option<(Outcome, i64)> {
    match used - amount {
        over if over > 0 => Some((charge(rate, bucket, now_ns, now_ms, over)?, over)),
        under => {
            let (o, given) = give_back(rate, bucket, now_ns, now_ms, under.unsigned_abs());
            Some((o, -given))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW_MS: i64 = 1_700_000_000_000;
    const NOW: i64 = NOW_MS * NS_PER_MS;
    const SECOND: i64 = 1_000_000_000;

    /// 5 tokens of capacity (max_burst 4), one per second.
    fn rate(tokens: i64) -> Rate {
        Rate::new(4, SECOND, tokens).unwrap()
    }

    fn at(tat_ns: i64) -> Stored {
        Stored::Present { value: tat_ns, expires_at: Some(ceil_ms(tat_ns)) }
    }

    fn store(value: i64, expires_at: i64) -> Option<Change> {
        Some(Change::Set { value, expires_at })
    }

    fn heal(at: i64) -> Option<Change> {
        Some(Change::Expire { at })
    }

    fn decide_at(rate: &Rate, bucket: Stored, now_ns: i64) -> Outcome {
        decide(rate, bucket, now_ns, now_ns.div_euclid(NS_PER_MS))
    }

    #[test]
    fn shadow_mode_takes_tokens_the_bucket_has_not() {
        let empty = at(NOW + 5 * SECOND);
        assert!(decide_at(&rate(1), empty, NOW).limited);
        let o = admit_anyway(&rate(1), empty, NOW, NOW_MS).unwrap();
        assert_eq!((o.limited, o.remaining, o.retry_after_ms(), o.full_after_ms()), (false, 0, -1, 6_000));
        assert_eq!(o.change, store(NOW + 6 * SECOND, NOW_MS + 6_000));
        assert_eq!(admit_anyway(&rate(1), at(i64::MAX), NOW, NOW_MS), None);
    }

    #[test]
    fn negative_tokens_give_back_not_before_now() {
        let empty = at(NOW + 5 * SECOND);
        let o = decide_at(&rate(-2), empty, NOW);
        assert_eq!((o.limited, o.remaining, o.retry_after_ms(), o.full_after_ms()), (false, 2, -1, 3_000));
        assert_eq!(o.change, store(NOW + 3 * SECOND, NOW_MS + 3_000));
        let o = decide_at(&Rate::new(4, SECOND, -100).unwrap(), empty, NOW);
        assert_eq!((o.remaining, o.change), (5, store(NOW, NOW_MS + 1)), "full at most");
        assert_eq!(decide_at(&rate(-1), Stored::Missing, NOW).change, None, "a missing key stays missing");
        assert_eq!(decide_at(&rate(-1), at(NOW - 1), NOW).change, None);
        let leaked = Stored::Present { value: NOW - 1, expires_at: None };
        assert_eq!(decide_at(&rate(-1), leaked, NOW).change, heal(NOW_MS + 1), "it still heals");
    }

    #[test]
    fn settling_gives_back_or_runs_into_debt() {
        let r = rate(1);
        let empty = at(NOW + 5 * SECOND);
        let (o, applied) = settle_reserved(&r, 5, 2, empty, NOW, NOW_MS).unwrap();
        assert_eq!((o.remaining, applied, o.change), (3, -3, store(NOW + 2 * SECOND, NOW_MS + 2_000)));
        // Half a token ahead of now: one token given, the TAT stops at now.
        let (o, applied) = settle_reserved(&r, 5, 2, at(NOW + SECOND / 2), NOW, NOW_MS).unwrap();
        assert_eq!((o.remaining, applied, o.change), (5, -1, store(NOW, NOW_MS + 1)));
        // 7 used of 5: 2 more past the tolerance, a debt.
        let (o, applied) = settle_reserved(&r, 5, 7, empty, NOW, NOW_MS).unwrap();
        assert_eq!((o.remaining, o.full_after_ms(), applied), (0, 7_000, 2));
        assert_eq!(settle_reserved(&r, 5, 7, Stored::Missing, NOW, NOW_MS).unwrap().0.full_after_ms(), 2_000);
        assert_eq!(settle_reserved(&r, 1, i64::MAX, empty, NOW, NOW_MS), None, "past i64");
        let (o, applied) = settle_reserved(&r, 5, 5, empty, NOW, NOW_MS).unwrap();
        assert_eq!((applied, o.change), (0, None));
    }

    #[test]
    fn cl_throttle_gives_back_as_redis_cell_computes() {
        let empty = at(NOW + 5 * SECOND);
        // From max(TAT, now), with no floor at now: 2 back of 5 in use.
        let o = decide_cell(&rate(-2), empty, NOW, NOW_MS).unwrap();
        assert_eq!((o.limited, o.remaining, o.change), (false, 2, store(NOW + 3 * SECOND, NOW_MS + 3_000)));
        // A TAT up to 2 ms before now: stored to expire at once (a full bucket), where redis-cell
        // leaves the key without TTL at -1 ms.
        let o = decide_cell(&rate(-1), at(NOW + SECOND - 1_999_999), NOW, NOW_MS).unwrap();
        assert_eq!(o.change, store(NOW - 1_999_999, NOW_MS + 1));
        assert_eq!(decide_cell(&rate(-1), at(NOW + SECOND - 2_000_000), NOW, NOW_MS), None, "redis-cell fails");
        assert_eq!(decide_cell(&rate(-1), Stored::Missing, NOW, NOW_MS), None);
        // Quantities of 0 and more: RATELIMIT.GCRA's decision.
        assert_eq!(decide_cell(&rate(2), empty, NOW, NOW_MS), Some(decide_at(&rate(2), empty, NOW)));
    }

    #[test]
    fn a_full_bucket_admits_its_capacity_then_denies() {
        let mut bucket = Stored::Missing;
        for remaining in (0..5).rev() {
            let o = decide_at(&rate(1), bucket, NOW);
            assert_eq!((o.limited, o.remaining, o.retry_after_ms()), (false, remaining, -1));
            let Some(Change::Set { value: tat_ns, expires_at }) = o.change else { panic!("{o:?}") };
            assert_eq!(tat_ns, NOW + (5 - remaining) * SECOND);
            assert_eq!(expires_at, ceil_ms(tat_ns), "the key goes when the bucket is full again");
            assert_eq!(o.full_after_ms(), (5 - remaining) * 1_000);
            bucket = at(tat_ns);
        }
        let o = decide_at(&rate(1), bucket, NOW);
        assert_eq!((o.limited, o.remaining, o.retry_after_ms(), o.full_after_ms()), (true, 0, 1_000, 5_000));
        assert_eq!(o.change, None, "a denied request writes nothing");
    }

    #[test]
    fn partial_grants_the_whole_tokens_there_are_and_empties_the_bucket() {
        let partial = |tokens, bucket, now| decide_partial(&rate(tokens), bucket, now, now / NS_PER_MS);
        // 2.5 tokens free of 5, 4 asked: 2 granted, the half token with them.
        let o = partial(4, at(NOW + 2 * SECOND + SECOND / 2), NOW);
        assert_eq!((o.limited, o.taken, o.remaining, o.full_after_ms()), (false, 2, 0, 5_000));
        assert_eq!(o.change, store(NOW + 5 * SECOND, NOW_MS + 5_000));
        // Enough there: as without PARTIAL.
        let o = partial(2, at(NOW + 2 * SECOND + SECOND / 2), NOW);
        assert_eq!(o, Outcome { taken: 2, ..decide_at(&rate(2), at(NOW + 2 * SECOND + SECOND / 2), NOW) });
        assert_eq!((o.remaining, o.full_after_ms()), (0, 4_500));
        // Half a token: denied, retry when one is whole; nothing written.
        let o = partial(4, at(NOW + 4 * SECOND + SECOND / 2), NOW);
        assert_eq!((o.limited, o.taken, o.remaining, o.retry_after_ms(), o.change), (true, 0, 0, 500, None));
        // More than the capacity from a full bucket: the capacity.
        let o = partial(9, Stored::Missing, NOW);
        assert_eq!((o.limited, o.taken, o.change), (false, 5, store(NOW + 5 * SECOND, NOW_MS + 5_000)));
        // A debt: denied, retry once a token is whole past it.
        let o = partial(1, at(NOW + 7 * SECOND), NOW);
        assert_eq!((o.limited, o.retry_after_ms()), (true, 3_000));
    }

    #[test]
    fn one_token_comes_back_per_emission_interval() {
        let empty = at(NOW + 5 * SECOND);
        assert!(decide_at(&rate(1), empty, NOW + SECOND - 1).limited);
        let o = decide_at(&rate(1), empty, NOW + SECOND);
        assert_eq!((o.limited, o.remaining), (false, 0));
        let o = decide_at(&rate(1), empty, NOW + 3 * SECOND);
        assert_eq!((o.limited, o.remaining), (false, 2));
    }

    #[test]
    fn retry_after_rounds_up_and_is_never_early() {
        let empty = at(NOW + 5 * SECOND);
        let o = decide_at(&rate(1), empty, NOW + 1);
        assert_eq!(o.retry_after_ns, Some(SECOND - 1));
        assert_eq!(o.retry_after_ms(), 1_000, "999.999999 ms rounds up");
        assert!(!decide_at(&rate(1), empty, NOW + 1 + o.retry_after_ms() * NS_PER_MS).limited);
        let o = decide_at(&rate(3), empty, NOW);
        assert_eq!(o.retry_after_ms(), 3_000);
    }

    #[test]
    fn tokens_take_several_at_once() {
        let o = decide_at(&rate(3), Stored::Missing, NOW);
        assert_eq!((o.limited, o.remaining), (false, 2));
        let o = decide_at(&rate(3), at(NOW + 3 * SECOND), NOW);
        assert_eq!((o.limited, o.remaining, o.retry_after_ms()), (true, 2, 1_000));
    }

    #[test]
    fn more_tokens_than_the_capacity_are_never_admitted() {
        let o = decide_at(&rate(6), Stored::Missing, NOW);
        assert_eq!((o.limited, o.remaining, o.retry_after_ms(), o.full_after_ms()), (true, 5, -1, 0));
        assert_eq!(o.change, None, "a fresh key denied creates nothing");
    }

    #[test]
    fn a_key_without_ttl_heals_admitted_or_not() {
        let leaked = Stored::Present { value: NOW + 5 * SECOND, expires_at: None };
        let o = decide_at(&rate(1), leaked, NOW);
        assert_eq!(o.change, heal(NOW_MS + 5_000));
        let o = decide_at(&rate(1), leaked, NOW + 2 * SECOND);
        assert_eq!(o.change, store(NOW + 6 * SECOND, NOW_MS + 6_000));
        // A TAT in the past: the bucket is full; the heal must not expire it in the past.
        let stale = Stored::Present { value: NOW - SECOND, expires_at: None };
        assert_eq!(decide_at(&rate(6), stale, NOW).change, heal(NOW_MS + 1));
    }

    #[test]
    fn zero_tokens_only_look() {
        let half = at(NOW + 2 * SECOND);
        let o = decide_at(&rate(0), half, NOW);
        assert_eq!((o.limited, o.remaining, o.full_after_ns), (false, 3, 2 * SECOND));
        assert_eq!(o.change, None);
        assert_eq!(decide_at(&rate(0), Stored::Missing, NOW).change, None);
        let leaked = Stored::Present { value: NOW + 2 * SECOND, expires_at: None };
        assert_eq!(decide_at(&rate(0), leaked, NOW).change, heal(NOW_MS + 2_000));
    }

    #[test]
    fn a_past_tat_counts_from_now() {
        let o = decide_at(&rate(1), at(NOW - 60 * SECOND), NOW);
        assert_eq!((o.limited, o.remaining), (false, 4));
        assert_eq!(o.change, store(NOW + SECOND, NOW_MS + 1_000));
    }

    #[test]
    fn huge_tats_do_not_wrap() {
        let o = decide_at(&rate(1), at(i64::MAX), NOW);
        assert!(o.limited);
        assert_eq!(o.remaining, 0);
        assert!(o.retry_after_ms() > 0 && o.full_after_ms() > 0);
    }

    #[test]
    fn aligned_tokens_come_back_at_the_period_boundaries() {
        // One token a second, capacity 1; NOW is a whole second.
        let r = Rate::new(0, SECOND, 1).unwrap();
        let aligned = |bucket, now_ns: i64| {
            on_boundaries(SECOND, bucket, now_ns, now_ns.div_euclid(NS_PER_MS), |ns| {
                Some(decide(&r, bucket, ns, now_ns.div_euclid(NS_PER_MS)))
            })
            .unwrap()
        };
        // At 0.1 s: admitted, and the key lives to the next boundary.
        let o = aligned(Stored::Missing, NOW + SECOND / 10);
        assert_eq!((o.limited, o.full_after_ms()), (false, 900));
        assert_eq!(o.change, store(NOW + SECOND, NOW_MS + 1_000));
        let bucket = at(NOW + SECOND);
        // At 0.9 s: denied, retry at the boundary; at 1.0 s admitted (running GCRA waits to 1.1 s).
        let o = aligned(bucket, NOW + 9 * SECOND / 10);
        assert_eq!((o.limited, o.remaining, o.retry_after_ms(), o.change), (true, 0, 100, None));
        assert!(!aligned(bucket, NOW + SECOND).limited);
        // Two a second: the key expires at the boundary, not at its TAT half-way.
        let two = Rate::new(1, SECOND / 2, 1).unwrap();
        let o = on_boundaries(SECOND, Stored::Missing, NOW + SECOND / 10, NOW_MS + 100, |ns| {
            Some(decide(&two, Stored::Missing, ns, NOW_MS + 100))
        })
        .unwrap();
        assert_eq!((o.remaining, o.full_after_ms(), o.change), (1, 900, store(NOW + SECOND / 2, NOW_MS + 1_000)));
        // A heal expires at the stored TAT's boundary.
        let leaked = Stored::Present { value: NOW + SECOND + 1, expires_at: None };
        assert_eq!(aligned(leaked, NOW + SECOND / 10).change, heal(NOW_MS + 2_000));
    }

    #[test]
    fn products_past_146_years_are_refused() {
        let day = 86_400 * SECOND;
        assert_eq!(Rate::new(0, day, 200_000_000), Err(Overflow::Tokens));
        assert_eq!(Rate::new(200_000_000, day, 1), Err(Overflow::Burst));
        assert_eq!(Rate::new(i64::MAX, 1, 1), Err(Overflow::Burst));
        assert!(Rate::new(1_000, day, 1_000).is_ok());
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    fn any_rate() -> impl Strategy<Value = Rate> {
        (0i64..1_000, 1i64..10_000_000_000, 1i64..2_000)
            .prop_filter_map("fits", |(burst, emission, tokens)| Rate::new(burst, emission, tokens).ok())
    }

    proptest! {
        /// Over any run of requests at rising instants, the tokens admitted never pass
        /// `capacity + elapsed / emission`, and every write leaves the key with an expiry.
        #[test]
        fn never_admits_more_than_the_rate(
            rate in any_rate(),
            steps in proptest::collection::vec(0i64..3_000_000_000, 1..60),
        ) {
            let start = 1_700_000_000_000 * NS_PER_MS;
            let (mut bucket, mut now, mut admitted) = (Stored::Missing, start, 0i64);
            for step in steps {
                now += step;
                let o = decide(&rate, bucket, now, now.div_euclid(NS_PER_MS));
                prop_assert!(o.remaining >= 0 && o.remaining <= rate.capacity);
                match o.change {
                    Some(Change::Set { value: tat_ns, expires_at }) => {
                        prop_assert!(!o.limited);
                        prop_assert!(expires_at * NS_PER_MS >= tat_ns && expires_at > now.div_euclid(NS_PER_MS));
                        admitted += rate.tokens;
                        bucket = Stored::Present { value: tat_ns, expires_at: Some(expires_at) };
                    }
                    None => prop_assert!(o.limited),
                    Some(other) => prop_assert!(false, "every key here has a TTL: {:?}", other),
                }
                let allowance = rate.capacity as i128 + (now - start) as i128 / rate.emission_ns as i128;
                prop_assert!(admitted as i128 <= allowance);
                if o.limited && o.retry_after_ms() >= 0 {
                    let later = now + o.retry_after_ms() * NS_PER_MS;
                    prop_assert!(!decide(&rate, bucket, later, later.div_euclid(NS_PER_MS)).limited);
                }
            }
        }

        /// ALIGN with `max_burst = burst - 1` over one-second periods decides as Spring Cloud
        /// Gateway's Lua bucket (its `request_rate_limiter.lua`): tokens refilled `rate` per whole
        /// second of the clock, capped at `burst`, both keys kept `floor(2 * burst / rate)` s after
        /// each call. Same decisions, same tokens left, at any instants.
        #[test]
        fn aligned_decides_as_spring_cloud_gateways_bucket(
            per_second in 1i64..1_000,
            burst in 1i64..3_000,
            calls in proptest::collection::vec((0i64..1_500_000_000, 1i64..40), 1..80),
        ) {
            let ttl_s = 2 * burst / per_second;
            prop_assume!(ttl_s > 0);
            // The script's state: (tokens, last refill in whole seconds), and when its keys expire.
            let mut script: Option<(i64, i64, i64)> = None;
            let mut bucket = Stored::Missing;
            let mut now = 1_700_000_000_000 * NS_PER_MS + 123_456_789;
            for (step, requested) in calls {
                now += step;
                let now_ms = now.div_euclid(NS_PER_MS);
                let now_s = now.div_euclid(1_000_000_000);
                let (tokens, last) = match script {
                    Some((tokens, last, expires_ms)) if now_ms < expires_ms => (tokens, last),
                    _ => (burst, 0),
                };
                let filled = burst.min(tokens + (now_s - last).max(0) * per_second);
                let allowed = filled >= requested;
                let left = if allowed { filled - requested } else { filled };
                script = Some((left, now_s, now_ms + ttl_s * 1_000));

                let rate = Rate::new(burst - 1, 1_000_000_000 / per_second, requested).unwrap();
                if let Stored::Present { expires_at: Some(at), .. } = bucket {
                    if now_ms >= at {
                        bucket = Stored::Missing;
                    }
                }
                let o = on_boundaries(1_000_000_000, bucket, now, now_ms, |ns| Some(decide(&rate, bucket, ns, now_ms)))
                    .unwrap();
                prop_assert_eq!((!o.limited, o.remaining), (allowed, left));
                if let Some(Change::Set { value, expires_at }) = o.change {
                    bucket = Stored::Present { value, expires_at: Some(expires_at) };
                }
            }
        }

        /// With PARTIAL the same bound holds for the tokens granted, each grant is between one and
        /// the count asked, a denial's retry_after admits one token, and a grant of fewer than asked
        /// leaves nothing whole.
        #[test]
        fn partial_grants_never_pass_the_rate(
            rate in any_rate(),
            steps in proptest::collection::vec(0i64..3_000_000_000, 1..60),
        ) {
            let start = 1_700_000_000_000 * NS_PER_MS;
            let (mut bucket, mut now, mut granted) = (Stored::Missing, start, 0i64);
            for step in steps {
                now += step;
                let o = decide_partial(&rate, bucket, now, now.div_euclid(NS_PER_MS));
                if let Some(Change::Set { value: tat_ns, expires_at }) = o.change {
                    prop_assert!(!o.limited && (1..=rate.tokens).contains(&o.taken));
                    prop_assert!(expires_at * NS_PER_MS >= tat_ns && expires_at > now.div_euclid(NS_PER_MS));
                    prop_assert!(o.taken == rate.tokens || o.remaining == 0);
                    granted += o.taken;
                    bucket = Stored::Present { value: tat_ns, expires_at: Some(expires_at) };
                } else {
                    prop_assert!(o.limited && o.taken == 0 && o.change.is_none());
                    let later = now + o.retry_after_ms() * NS_PER_MS;
                    let one = Rate::new(rate.capacity - 1, rate.emission_ns, 1).unwrap();
                    prop_assert!(!decide(&one, bucket, later, later.div_euclid(NS_PER_MS)).limited);
                }
                let allowance = rate.capacity as i128 + (now - start) as i128 / rate.emission_ns as i128;
                prop_assert!(granted as i128 <= allowance);
            }
        }
    }
}
