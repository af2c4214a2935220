//! The fixed-window decision: the whole algorithm of `RATELIMIT.HIT`, with no Redis in it.
//!
//! The rules, from the TTL-leak story: a hit is admitted while `count + cost <= limit`; an admitted
//! hit adds `cost`; a counter that has no expiry gets one (`window` from now) whether the hit is
//! admitted or not, which both starts new windows and heals counters leaked by a bare `INCR`; a
//! running window is never extended; a denied hit writes nothing else. The counter is the stored
//! value; a missing key counts as 0 and has no window yet.
//!
//! A negative cost gives back: never denied, it takes the count down by that much but not below
//! 0, creates no key and keeps the window's expiry (it still heals). Settling a reservation gives
//! back to the reserved window only while it runs, and charges an overage to the current one.

use crate::core::stored::{Change, Stored};

/// The largest window accepted, in milliseconds: about 146 million years, so that adding it to
/// any current time stays far inside an `i64` of milliseconds.
pub const MAX_WINDOW_MS: i64 = i64::MAX / 2;

/// One limit a hit is counted against, validated by the parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub limit: i64,
    pub window_ms: i64,
    pub cost: i64,
}

/// The decision for one hit: the reply numbers and the write to make, in one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub allowed: bool,
    /// The counter after this hit.
    pub count: i64,
    /// `max(limit - count, 0)`.
    pub remaining: i64,
    /// Milliseconds until the window ends; 0 when no window runs (a missing key stays missing).
    pub reset_ms: i64,
    pub change: Option<Change>,
}

/// The count before the hit, whether the key exists, and its expiry.
fn state(counter: Stored) -> (i64, bool, Option<i64>) {
    match counter {
        Stored::Missing => (0, false, None),
        Stored::Present { value, expires_at } => (value, true, expires_at),
    }
}

/// The counter after `cost` more hits, if that stays within `limit`. Checked: a counter near
/// i64::MAX (set by hand) is simply over any limit.
fn admitted_count(count: i64, cost: i64, limit: i64) -> Option<i64> {
    count.checked_add(cost).filter(|&c| c <= limit)
}

/// Decides one hit at `now_ms`. `now_ms + limit.window_ms` must not overflow, which the argument
/// parser's bound on the window guarantees for any real clock.
pub fn decide(limit: &Limit, counter: Stored, now_ms: i64) -> Outcome {
    if limit.cost < 0 {
        return give_back(limit, counter, now_ms, limit.cost.unsigned_abs());
    }
    let (count, _, _) = state(counter);
    settle(limit, counter, now_ms, admitted_count(count, limit.cost, limit.limit).is_some())
}

/// Decides a hit with PARTIAL (`limit.cost` >= 1, the parser's rule): as many of its `cost` as
/// the window has left, at least one. With all of them there, it decides as `decide`; with fewer
/// (but one), it counts those, the count reaching the limit; with none, it is denied as `decide`
/// denies (writing nothing but the heal). The outcome, and how many were granted (0: denied).
pub fn decide_partial(limit: &Limit, counter: Stored, now_ms: i64) -> (Outcome, i64) {
    let (count, _, _) = state(counter);
    let granted = match admitted_count(count, limit.cost, limit.limit) {
        Some(_) => limit.cost,
        None => limit.limit.saturating_sub(count).clamp(0, limit.cost),
    };
    let granting = Limit { cost: granted.max(1), ..*limit };
    (settle(&granting, counter, now_ms, granted > 0), granted)
}

/// Decides one hit against several limits, all or nothing: it is admitted only if every limit
/// admits it, and then counts on every counter; otherwise on none (each counter still heals).
/// A limit in shadow mode (`shadowed[i]`) never denies: admitted, its counter counts the hit
/// whatever the limit.
pub fn decide_all(hits: &[(Limit, Stored)], shadowed: &[bool], now_ms: i64) -> (bool, Vec<Outcome>) {
    let fits = |(l, counter): &(Limit, Stored)| admitted_count(state(*counter).0, l.cost, l.limit).is_some();
    let counts = |(l, counter): &(Limit, Stored)| state(*counter).0.checked_add(l.cost).is_some();
    let admit = hits.iter().enumerate().all(|(i, h)| fits(h) || shadowed.get(i) == Some(&true) && counts(h));
    let outcomes = hits.iter().map(|h @ (l, counter)| match admit && !fits(h) {
        true => charge(l, *counter, now_ms, l.cost).unwrap_or_else(|| settle(l, *counter, now_ms, false)),
        false => settle(l, *counter, now_ms, admit),
    });
    (admit, outcomes.collect())
}

/// A hit denied by its limit, admitted anyway (shadow mode): its cost counted in the running
/// window or a new one; `None` when the count would pass `i64::MAX`.
pub fn admit_anyway(l: &Limit, counter: Stored, now_ms: i64) -> Option<Outcome> {
    charge(l, counter, now_ms, l.cost)
}

/// The outcome for one counter of a hit that is admitted (`admit`, which implies it fits) or not.
fn settle(l: &Limit, counter: Stored, now_ms: i64, admit: bool) -> Outcome {
    let (count, exists, expires_at) = state(counter);
    let admitted = admit.then(|| admitted_count(count, l.cost, l.limit)).flatten();
    let final_count = admitted.unwrap_or(count);
    // A key without expiry that is there after the hit gets its window now.
    let new_expiry =
        (expires_at.is_none() && (exists || admitted.is_some())).then(|| now_ms.saturating_add(l.window_ms));
    let final_expiry = expires_at.or(new_expiry);
    let change = match (admitted, new_expiry) {
        (Some(value), Some(expires_at)) => Some(Change::Set { value, expires_at }),
        (Some(value), None) => Some(Change::Add { by: l.cost, value }),
        (None, Some(at)) => Some(Change::Expire { at }),
        (None, None) => None,
    };
    Outcome {
        allowed: admitted.is_some(),
        count: final_count,
        remaining: l.limit.saturating_sub(final_count).max(0),
        reset_ms: final_expiry.map_or(0, |t| t.saturating_sub(now_ms).max(0)),
        change,
    }
}

/// `amount` taken off the count (not below 0; a count already at or below 0 stays), the window's
/// expiry kept; a key without TTL gets its window.
fn give_back(l: &Limit, counter: Stored, now_ms: i64, amount: u64) -> Outcome {
    let (count, exists, expires_at) = state(counter);
    let value = if count > 0 { count - amount.min(count.unsigned_abs()) as i64 } else { count };
    let heal = (exists && expires_at.is_none()).then(|| now_ms.saturating_add(l.window_ms));
    let change = match heal {
        Some(expires_at) => Some(Change::Set { value, expires_at }),
        None => (value != count).then_some(Change::Add { by: value - count, value }),
    };
    counted(l, value, expires_at.or(heal), now_ms, change)
}

/// `amount` more on the count whatever the limit (a cost already incurred), in the running
/// window or a new one; `None` when the count would pass `i64::MAX`.
fn charge(l: &Limit, counter: Stored, now_ms: i64, amount: i64) -> Option<Outcome> {
    let (count, _, expires_at) = state(counter);
    let value = count.checked_add(amount)?;
    let (change, expiry) = match expires_at {
        Some(at) => (Change::Add { by: amount, value }, at),
        None => {
            (Change::Set { value, expires_at: now_ms.saturating_add(l.window_ms) }, now_ms.saturating_add(l.window_ms))
        }
    };
    Some(counted(l, value, Some(expiry), now_ms, Some(change)))
}

/// An admitted outcome for a counter left at `count`, expiring at `expiry`.
fn counted(l: &Limit, count: i64, expiry: Option<i64>, now_ms: i64, change: Option<Change>) -> Outcome {
    Outcome {
        allowed: true,
        count,
        remaining: l.limit.saturating_sub(count).max(0),
        reset_ms: expiry.map_or(0, |t| t.saturating_sub(now_ms).max(0)),
        change,
    }
}

/// Settles a reservation of `amount` in the window that ends at `window_end_ms`, of `used`:
/// what was unused goes back while that window runs (and is dropped once it has ended), what
/// was used beyond it is charged to the current window. The outcome and how much it changed the
/// count; `None` when the count would pass `i64::MAX`.
pub fn settle_reserved(
    l: &Limit,
    window_end_ms: i64,
    amount: i64,
    used: i64,
    counter: Stored,
    now_ms: i64,
) -> Option<(Outcome, i64)> {
    let before = state(counter).0;
    let o = match used - amount {
        over if over > 0 => charge(l, counter, now_ms, over)?,
        under => {
            let live = matches!(counter, Stored::Present { expires_at: Some(end), .. } if end == window_end_ms);
            give_back(l, counter, now_ms, if live { under.unsigned_abs() } else { 0 })
        }
    };
    Some((o, o.count - before))
}

/// The absolute end of the window a counter read as `counter` runs in after the outcome `o`.
pub fn window_end(counter: Stored, o: &Outcome) -> Option<i64> {
    counter.expiry_after(o.change)
}

/// What a hit of `cost` would get, without making it: the counter as it is, and `reset_ms` -1
/// for a counter without TTL (a leaked one), 0 for a missing one.
pub fn peek(limit: i64, cost: i64, counter: Stored, now_ms: i64) -> Outcome {
    let (count, _, expires_at) = state(counter);
    let reset_ms = match (counter, expires_at) {
        (Stored::Missing, _) => 0,
        (_, None) => -1,
        (_, Some(t)) => t.saturating_sub(now_ms).max(0),
    };
    Outcome {
        allowed: admitted_count(count, cost, limit).is_some(),
        count,
        remaining: limit.saturating_sub(count).max(0),
        reset_ms,
        change: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_000;

    fn args(limit: i64, window_ms: i64, cost: i64) -> Limit {
        Limit { limit, window_ms, cost }
    }

    fn present(value: i64, expires_at: Option<i64>) -> Stored {
        Stored::Present { value, expires_at }
    }

    fn set(value: i64, expires_at: i64) -> Option<Change> {
        Some(Change::Set { value, expires_at })
    }

    fn add(by: i64, value: i64) -> Option<Change> {
        Some(Change::Add { by, value })
    }

    fn heal(at: i64) -> Option<Change> {
        Some(Change::Expire { at })
    }

    #[test]
    fn first_hit_creates_counter_with_window() {
        let o = decide(&args(10, 60_000, 1), Stored::Missing, NOW);
        assert_eq!(
            o,
            Outcome { allowed: true, count: 1, remaining: 9, reset_ms: 60_000, change: set(1, NOW + 60_000) }
        );
    }

    #[test]
    fn admitted_hit_keeps_running_window() {
        let o = decide(&args(10, 60_000, 1), present(4, Some(NOW + 1_500)), NOW);
        assert!(o.allowed);
        assert_eq!((o.count, o.remaining, o.reset_ms), (5, 5, 1_500));
        assert_eq!(o.change, add(1, 5));
    }

    #[test]
    fn last_admitted_hit_reaches_limit_exactly() {
        let o = decide(&args(5, 1_000, 2), present(3, Some(NOW + 10)), NOW);
        assert!(o.allowed);
        assert_eq!((o.count, o.remaining), (5, 0));
        assert_eq!(o.change, add(2, 5));
    }

    #[test]
    fn shadow_mode_counts_what_the_limit_denies() {
        let o = admit_anyway(&args(5, 1_000, 2), present(5, Some(NOW + 700)), NOW).unwrap();
        assert_eq!((o.allowed, o.count, o.remaining, o.reset_ms, o.change), (true, 7, 0, 700, add(2, 7)));
        let o = admit_anyway(&args(5, 1_000, 9), Stored::Missing, NOW).unwrap();
        assert_eq!(o.change, set(9, NOW + 1_000), "a new window, as any admitted hit's");
        assert_eq!(admit_anyway(&args(5, 1_000, 2), present(i64::MAX, None), NOW), None);
        // Only the enforced limit may deny; the shadowed one counts past its limit.
        let (second, day) = (args(5, 1_000, 1), args(1, 86_400_000, 1));
        let hits = [(second, present(2, Some(NOW + 500))), (day, present(1, Some(NOW + 9_000)))];
        let (admit, o) = decide_all(&hits, &[false, true], NOW);
        assert!(admit);
        assert_eq!((o[0].change, o[1].change), (add(1, 3), add(1, 2)));
        let (admit, o) = decide_all(&hits, &[true, false], NOW);
        assert!(!admit && o.iter().all(|o| o.change.is_none()));
    }

    #[test]
    fn denied_hit_writes_nothing() {
        let o = decide(&args(5, 1_000, 1), present(5, Some(NOW + 700)), NOW);
        assert!(!o.allowed);
        assert_eq!((o.count, o.remaining, o.reset_ms), (5, 0, 700));
        assert_eq!(o.change, None);
    }

    #[test]
    fn leaked_counter_heals_when_admitted() {
        let o = decide(&args(10, 30_000, 1), present(2, None), NOW);
        assert!(o.allowed);
        assert_eq!(o.change, set(3, NOW + 30_000));
        assert_eq!(o.reset_ms, 30_000);
    }

    #[test]
    fn leaked_counter_heals_when_denied() {
        let o = decide(&args(10, 30_000, 1), present(5_000, None), NOW);
        assert!(!o.allowed);
        assert_eq!((o.count, o.remaining), (5_000, 0));
        assert_eq!(o.change, heal(NOW + 30_000));
        assert_eq!(o.reset_ms, 30_000);
    }

    #[test]
    fn cost_above_limit_on_missing_key_creates_nothing() {
        let o = decide(&args(3, 1_000, 4), Stored::Missing, NOW);
        assert!(!o.allowed);
        assert_eq!((o.count, o.remaining, o.reset_ms), (0, 3, 0));
        assert_eq!(o.change, None);
    }

    #[test]
    fn huge_values_do_not_wrap() {
        let o = decide(&args(i64::MAX, 1_000, i64::MAX), present(i64::MAX, Some(NOW + 5)), NOW);
        assert!(!o.allowed);
        assert_eq!((o.count, o.remaining), (i64::MAX, 0));

        let o = decide(&args(i64::MAX, 1_000, 1), present(-10, Some(NOW + 5)), NOW);
        assert!(o.allowed);
        assert_eq!((o.count, o.remaining), (-9, i64::MAX));

        let o = decide(&args(i64::MAX, 1_000, i64::MAX), present(0, None), NOW);
        assert!(o.allowed);
        assert_eq!((o.count, o.remaining), (i64::MAX, 0));
    }

    #[test]
    fn all_limits_admit_or_none_counts() {
        let second = args(2, 1_000, 1);
        let hour = args(100, 3_600_000, 1);
        let (admit, o) = decide_all(&[(second, present(1, Some(NOW + 500))), (hour, Stored::Missing)], &[], NOW);
        assert!(admit);
        assert_eq!((o[0].count, o[1].count), (2, 1));
        assert_eq!(o[1].change, set(1, NOW + 3_600_000));

        // The per-second budget is spent: the hourly counter must not be burnt either.
        let (admit, o) = decide_all(&[(second, present(2, Some(NOW + 500))), (hour, present(7, None))], &[], NOW);
        assert!(!admit);
        assert!(o.iter().all(|o| !o.allowed && !matches!(o.change, Some(Change::Add { .. } | Change::Set { .. }))));
        assert_eq!((o[0].count, o[1].count), (2, 7));
        assert_eq!(o[1].change, heal(NOW + 3_600_000), "still heals");
        assert_eq!(o[1].remaining, 93);
    }

    #[test]
    fn peek_reads_without_writing() {
        let o = peek(10, 1, present(4, Some(NOW + 700)), NOW);
        assert_eq!((o.allowed, o.count, o.remaining, o.reset_ms), (true, 4, 6, 700));
        assert_eq!(o.change, None);
        let o = peek(10, 7, present(4, Some(NOW + 700)), NOW);
        assert_eq!((o.allowed, o.count, o.remaining), (false, 4, 6));
        assert_eq!(peek(10, 1, Stored::Missing, NOW).reset_ms, 0);
        assert_eq!(peek(10, 1, present(3, None), NOW).reset_ms, -1, "a leaked counter shows as such");
        assert!(!peek(10, 1, present(i64::MAX, Some(NOW)), NOW).allowed);
    }

    #[test]
    fn a_negative_cost_gives_back_within_the_window() {
        let o = decide(&args(10, 60_000, -3), present(5, Some(NOW + 700)), NOW);
        assert_eq!((o.allowed, o.count, o.remaining, o.reset_ms), (true, 2, 8, 700));
        assert_eq!(o.change, add(-3, 2), "the window keeps its expiry");
        let o = decide(&args(10, 60_000, -9), present(5, Some(NOW + 700)), NOW);
        assert_eq!((o.count, o.change), (0, add(-5, 0)), "never below 0");
        let o = decide(&args(10, 60_000, i64::MIN), present(5, Some(NOW + 700)), NOW);
        assert_eq!((o.count, o.change), (0, add(-5, 0)));
        let o = decide(&args(10, 60_000, -1), present(-4, Some(NOW + 700)), NOW);
        assert_eq!((o.count, o.change), (-4, None), "a count at or below 0 stays");
        let o = decide(&args(10, 60_000, -1), Stored::Missing, NOW);
        assert_eq!((o.allowed, o.count, o.remaining, o.reset_ms, o.change), (true, 0, 10, 0, None), "no key made");
        let o = decide(&args(10, 60_000, -2), present(7, None), NOW);
        assert_eq!((o.count, o.reset_ms, o.change), (5, 60_000, set(5, NOW + 60_000)), "and it heals");
        let o = decide(&args(10, 60_000, -2), present(0, None), NOW);
        assert_eq!(o.change, set(0, NOW + 60_000));
    }

    #[test]
    fn settling_gives_back_to_the_reserved_window_only() {
        let l = args(10, 60_000, 1);
        let end = NOW + 700;
        // 4 reserved, 1 used: 3 back while the window runs.
        let (o, applied) = settle_reserved(&l, end, 4, 1, present(6, Some(end)), NOW).unwrap();
        assert_eq!((o.allowed, o.count, o.remaining, o.reset_ms, applied), (true, 3, 7, 700, -3));
        assert_eq!(o.change, add(-3, 3));
        // A later window: dropped, never taken off another window's count.
        let (o, applied) = settle_reserved(&l, end, 4, 1, present(6, Some(end + 60_000)), NOW).unwrap();
        assert_eq!((o.count, applied, o.change), (6, 0, None));
        let (o, applied) = settle_reserved(&l, end, 4, 1, Stored::Missing, NOW).unwrap();
        assert_eq!((o.count, applied, o.change), (0, 0, None));
        // Without TTL: no window of ours, but it heals.
        let (o, applied) = settle_reserved(&l, end, 4, 1, present(6, None), NOW).unwrap();
        assert_eq!((applied, o.change), (0, heal_set(6)));
        // Exactly as reserved: nothing to do.
        let (o, applied) = settle_reserved(&l, end, 4, 4, present(6, Some(end)), NOW).unwrap();
        assert_eq!((o.count, applied, o.change), (6, 0, None));
    }

    fn heal_set(value: i64) -> Option<Change> {
        set(value, NOW + 60_000)
    }

    #[test]
    fn settling_charges_an_overage_to_the_current_window_past_the_limit() {
        let l = args(10, 60_000, 1);
        let end = NOW + 700;
        let (o, applied) = settle_reserved(&l, end, 4, 9, present(8, Some(end)), NOW).unwrap();
        assert_eq!((o.allowed, o.count, o.remaining, applied), (true, 13, 0, 5));
        assert_eq!(o.change, add(5, 13));
        // The reserved window has ended: a new one.
        let (o, applied) = settle_reserved(&l, end, 4, 9, Stored::Missing, NOW).unwrap();
        assert_eq!((o.count, o.reset_ms, applied, o.change), (5, 60_000, 5, set(5, NOW + 60_000)));
        assert_eq!(settle_reserved(&l, end, 1, i64::MAX, present(2, Some(end)), NOW), None, "past i64");
    }

    #[test]
    fn the_window_end_is_the_expiry_the_hit_left() {
        let l = args(10, 60_000, 1);
        let counter = present(4, Some(NOW + 1_500));
        assert_eq!(window_end(counter, &decide(&l, counter, NOW)), Some(NOW + 1_500));
        assert_eq!(window_end(Stored::Missing, &decide(&l, Stored::Missing, NOW)), Some(NOW + 60_000));
        let leaked = present(50, None);
        assert_eq!(window_end(leaked, &decide(&l, leaked, NOW)), Some(NOW + 60_000), "healed");
        assert_eq!(window_end(Stored::Missing, &decide(&args(1, 60_000, 5), Stored::Missing, NOW)), None);
    }

    #[test]
    fn partial_grants_what_is_left_at_least_one() {
        // All there: as without PARTIAL.
        let (o, granted) = decide_partial(&args(10, 60_000, 4), present(3, Some(NOW + 500)), NOW);
        assert_eq!((o.allowed, o.count, o.remaining, granted, o.change), (true, 7, 3, 4, add(4, 7)));
        // Fewer: those, the count at the limit.
        let (o, granted) = decide_partial(&args(10, 60_000, 4), present(8, Some(NOW + 500)), NOW);
        assert_eq!((o.allowed, o.count, o.remaining, o.reset_ms, granted), (true, 10, 0, 500, 2));
        assert_eq!(o.change, add(2, 10));
        // A new window: its first hits, with its expiry.
        let (o, granted) = decide_partial(&args(3, 60_000, 5), Stored::Missing, NOW);
        assert_eq!((o.count, granted, o.change), (3, 3, set(3, NOW + 60_000)));
        // None: denied, only the heal written.
        let (o, granted) = decide_partial(&args(10, 60_000, 4), present(10, None), NOW);
        assert_eq!((o.allowed, o.count, granted, o.change), (false, 10, 0, heal(NOW + 60_000)));
        let (o, granted) = decide_partial(&args(10, 60_000, 1), present(12, Some(NOW + 5)), NOW);
        assert_eq!((o.allowed, granted, o.change), (false, 0, None));
    }

    #[test]
    fn window_already_past_reports_zero_reset() {
        let o = decide(&args(10, 1_000, 1), present(1, Some(NOW - 1)), NOW);
        assert_eq!(o.reset_ms, 0);
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    fn any_args() -> impl Strategy<Value = Limit> {
        (1..=i64::MAX, 1..=MAX_WINDOW_MS, 1..=i64::MAX).prop_map(|(limit, window_ms, cost)| Limit {
            limit,
            window_ms,
            cost,
        })
    }

    fn any_counter(now: i64) -> impl Strategy<Value = Stored> {
        prop_oneof![
            Just(Stored::Missing),
            (any::<i64>(), proptest::option::of(now - 1_000..now + 10_000_000))
                .prop_map(|(value, expires_at)| Stored::Present { value, expires_at }),
        ]
    }

    proptest! {
        #[test]
        fn every_rule_holds(
            (args, counter, now) in (0i64..4_000_000_000_000).prop_flat_map(|now| (any_args(), any_counter(now), Just(now)))
        ) {
            let o = decide(&args, counter, now);
            let (before, exists, old_expiry) = match counter {
                Stored::Missing => (0, false, None),
                Stored::Present { value, expires_at } => (value, true, expires_at),
            };
            // Saturates where a negative counter puts it beyond i64.
            let remaining = (i128::from(args.limit) - i128::from(o.count)).clamp(0, i128::from(i64::MAX));
            prop_assert_eq!(i128::from(o.remaining), remaining);
            prop_assert!(o.reset_ms >= 0);
            // Every write leaves the key with an expiry, and a running window is never moved: an
            // admitted hit adds to a key with one, sets value and window on a key without one; a
            // denied hit only gives a key without expiry its window.
            let window = now + args.window_ms;
            if o.allowed {
                prop_assert_eq!(i128::from(o.count), i128::from(before) + i128::from(args.cost));
                prop_assert!(o.count <= args.limit);
                let expected = match old_expiry {
                    Some(_) => Change::Add { by: args.cost, value: o.count },
                    None => Change::Set { value: o.count, expires_at: window },
                };
                prop_assert_eq!(o.change, Some(expected));
                prop_assert_eq!(o.reset_ms, old_expiry.unwrap_or(window).saturating_sub(now).max(0));
            } else {
                prop_assert_eq!(o.count, before);
                prop_assert!(i128::from(before) + i128::from(args.cost) > i128::from(args.limit));
                let heal = (exists && old_expiry.is_none()).then_some(Change::Expire { at: window });
                prop_assert_eq!(o.change, heal);
            }
            if !exists && !o.allowed {
                prop_assert_eq!(o.change, None);
                prop_assert_eq!(o.reset_ms, 0);
            }
        }

        #[test]
        fn partial_grants_at_most_what_is_left(
            (args, counter, now) in (0i64..4_000_000_000_000).prop_flat_map(|now| (any_args(), any_counter(now), Just(now)))
        ) {
            let (o, granted) = decide_partial(&args, counter, now);
            let whole = decide(&args, counter, now);
            let before = match counter { Stored::Missing => 0, Stored::Present { value, .. } => value };
            prop_assert!((0..=args.cost).contains(&granted));
            prop_assert_eq!(o.allowed, granted > 0);
            if whole.allowed {
                // All there: exactly as without PARTIAL.
                prop_assert_eq!((o, granted), (whole, args.cost));
            } else if granted > 0 {
                // Fewer: what was left, the count at the limit, the window kept or started.
                prop_assert_eq!(o.count, args.limit);
                prop_assert_eq!(i128::from(granted), i128::from(args.limit) - i128::from(before));
                let reset = match counter {
                    Stored::Present { expires_at: Some(at), .. } => at.saturating_sub(now).max(0),
                    _ => args.window_ms,
                };
                prop_assert_eq!(o.reset_ms, reset);
            } else {
                prop_assert_eq!(o, whole);
            }
        }

        #[test]
        fn a_give_back_only_lowers_towards_zero_and_keeps_the_window(
            (args, counter, now) in (0i64..4_000_000_000_000)
                .prop_flat_map(|now| (any_args(), any_counter(now), Just(now)))
                .prop_map(|(a, c, now)| (Limit { cost: -a.cost, ..a }, c, now))
        ) {
            let o = decide(&args, counter, now);
            prop_assert!(o.allowed);
            match counter {
                Stored::Missing => prop_assert_eq!((o.count, o.change), (0, None)),
                Stored::Present { value, expires_at } => {
                    prop_assert!(o.count <= value.max(0) && o.count >= value.min(0));
                    prop_assert_eq!(o.count, if value > 0 { (value + args.cost).max(0) } else { value });
                    match (expires_at, o.change) {
                        (None, Some(Change::Set { value: v, expires_at: at })) => prop_assert_eq!((v, at), (o.count, now + args.window_ms)),
                        (Some(_), Some(Change::Add { by, value: v })) => prop_assert_eq!((by, v), (o.count - value, o.count)),
                        (Some(_), None) => prop_assert_eq!(o.count, value),
                        (e, c) => prop_assert!(false, "{e:?} {c:?}"),
                    }
                }
            }
        }
    }
}
