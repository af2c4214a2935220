//! The fixed-window decision: the whole algorithm of `RATELIMIT.HIT`, with no Redis in it.
//!
//! The rules, from the TTL-leak story: a hit is admitted while `count + cost <= limit`; an admitted
//! hit adds `cost`; a counter that has no expiry gets one (`window` from now) whether the hit is
//! admitted or not, which both starts new windows and heals counters leaked by a bare `INCR`; a
//! running window is never extended; a denied hit writes nothing else.

use crate::args::HitArgs;

/// What the key holds before the hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// No key (or one that has logically expired): counts as 0 and has no window yet.
    Missing,
    /// An integer string; `expires_at` is its absolute expiry in Unix ms, `None` if it has no TTL.
    Present { count: i64, expires_at: Option<i64> },
}

/// The decision for one hit: the reply numbers and the writes to make, in one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub allowed: bool,
    /// The counter after this hit.
    pub count: i64,
    /// `max(limit - count, 0)`.
    pub remaining: i64,
    /// Milliseconds until the window ends; 0 when no window runs (a missing key stays missing).
    pub reset_ms: i64,
    pub effects: Effects,
}

/// Writes to a counter. Whenever a value is stored the key also ends up with an expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Effects {
    pub store: Option<Store>,
    /// The absolute expiry (Unix ms) to give a key that has none.
    pub set_expiry: Option<i64>,
}

/// A new counter value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Store {
    pub count: i64,
    /// What this hit added (`count` minus the value before).
    pub added: i64,
    /// The key's absolute expiry (Unix ms) once the effects are applied.
    pub expires_at: i64,
}

impl Effects {
    /// Only an expiry, for a counter that has none: the heal.
    pub fn heal(expires_at: i64) -> Effects {
        Effects { store: None, set_expiry: Some(expires_at) }
    }
}

/// The count before the hit, whether the key exists, and its expiry.
fn state(counter: Counter) -> (i64, bool, Option<i64>) {
    match counter {
        Counter::Missing => (0, false, None),
        Counter::Present { count, expires_at } => (count, true, expires_at),
    }
}

/// The counter after `cost` more hits, if that stays within `limit`. Checked: a counter near
/// i64::MAX (set by hand) is simply over any limit.
fn admitted_count(count: i64, cost: i64, limit: i64) -> Option<i64> {
    count.checked_add(cost).filter(|&c| c <= limit)
}

/// Decides one hit at `now_ms`. `now_ms + args.window_ms` must not overflow, which the argument
/// parser's bound on the window guarantees for any real clock.
pub fn decide(args: &HitArgs, counter: Counter, now_ms: i64) -> Outcome {
    let (count, _, _) = state(counter);
    settle(args, counter, now_ms, admitted_count(count, args.cost, args.limit).is_some())
}

/// Decides one hit against several limits, all or nothing: it is admitted only if every limit
/// admits it, and then counts on every counter; otherwise on none (each counter still heals).
pub fn decide_all(hits: &[(HitArgs, Counter)], now_ms: i64) -> (bool, Vec<Outcome>) {
    let admit = hits.iter().all(|(args, counter)| admitted_count(state(*counter).0, args.cost, args.limit).is_some());
    (admit, hits.iter().map(|(args, counter)| settle(args, *counter, now_ms, admit)).collect())
}

/// The outcome for one counter of a hit that is admitted (`admit`, which implies it fits) or not.
fn settle(args: &HitArgs, counter: Counter, now_ms: i64, admit: bool) -> Outcome {
    let (count, exists, expires_at) = state(counter);
    let admitted = admit.then(|| admitted_count(count, args.cost, args.limit)).flatten();
    let final_count = admitted.unwrap_or(count);
    let key_exists_after = exists || admitted.is_some();

    let set_expiry = match expires_at {
        None if key_exists_after => Some(now_ms.saturating_add(args.window_ms)),
        _ => None,
    };
    let final_expiry = expires_at.or(set_expiry);
    Outcome {
        allowed: admitted.is_some(),
        count: final_count,
        remaining: args.limit.saturating_sub(final_count).max(0),
        reset_ms: final_expiry.map_or(0, |t| t.saturating_sub(now_ms).max(0)),
        effects: Effects {
            store: admitted.zip(final_expiry).map(|(count, expires_at)| Store { count, added: args.cost, expires_at }),
            set_expiry,
        },
    }
}

/// What a hit of `cost` would get, without making it: the counter as it is, and `reset_ms` -1
/// for a counter without TTL (a leaked one), 0 for a missing one.
pub fn peek(limit: i64, cost: i64, counter: Counter, now_ms: i64) -> Outcome {
    let (count, _, expires_at) = state(counter);
    let reset_ms = match (counter, expires_at) {
        (Counter::Missing, _) => 0,
        (_, None) => -1,
        (_, Some(t)) => t.saturating_sub(now_ms).max(0),
    };
    Outcome {
        allowed: admitted_count(count, cost, limit).is_some(),
        count,
        remaining: limit.saturating_sub(count).max(0),
        reset_ms,
        effects: Effects::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_000;

    fn args(limit: i64, window_ms: i64, cost: i64) -> HitArgs {
        HitArgs { limit, window_ms, cost }
    }

    fn present(count: i64, expires_at: Option<i64>) -> Counter {
        Counter::Present { count, expires_at }
    }

    fn store(count: i64, added: i64, expires_at: i64) -> Option<Store> {
        Some(Store { count, added, expires_at })
    }

    #[test]
    fn first_hit_creates_counter_with_window() {
        let o = decide(&args(10, 60_000, 1), Counter::Missing, NOW);
        assert_eq!(
            o,
            Outcome {
                allowed: true,
                count: 1,
                remaining: 9,
                reset_ms: 60_000,
                effects: Effects { store: store(1, 1, NOW + 60_000), set_expiry: Some(NOW + 60_000) },
            }
        );
    }

    #[test]
    fn admitted_hit_keeps_running_window() {
        let o = decide(&args(10, 60_000, 1), present(4, Some(NOW + 1_500)), NOW);
        assert!(o.allowed);
        assert_eq!((o.count, o.remaining, o.reset_ms), (5, 5, 1_500));
        assert_eq!(o.effects, Effects { store: store(5, 1, NOW + 1_500), set_expiry: None });
    }

    #[test]
    fn last_admitted_hit_reaches_limit_exactly() {
        let o = decide(&args(5, 1_000, 2), present(3, Some(NOW + 10)), NOW);
        assert!(o.allowed);
        assert_eq!((o.count, o.remaining), (5, 0));
        assert_eq!(o.effects.store, store(5, 2, NOW + 10));
    }

    #[test]
    fn denied_hit_writes_nothing() {
        let o = decide(&args(5, 1_000, 1), present(5, Some(NOW + 700)), NOW);
        assert!(!o.allowed);
        assert_eq!((o.count, o.remaining, o.reset_ms), (5, 0, 700));
        assert_eq!(o.effects, Effects::default());
    }

    #[test]
    fn leaked_counter_heals_when_admitted() {
        let o = decide(&args(10, 30_000, 1), present(2, None), NOW);
        assert!(o.allowed);
        assert_eq!(o.effects, Effects { store: store(3, 1, NOW + 30_000), set_expiry: Some(NOW + 30_000) });
        assert_eq!(o.reset_ms, 30_000);
    }

    #[test]
    fn leaked_counter_heals_when_denied() {
        let o = decide(&args(10, 30_000, 1), present(5_000, None), NOW);
        assert!(!o.allowed);
        assert_eq!((o.count, o.remaining), (5_000, 0));
        assert_eq!(o.effects, Effects::heal(NOW + 30_000));
        assert_eq!(o.reset_ms, 30_000);
    }

    #[test]
    fn cost_above_limit_on_missing_key_creates_nothing() {
        let o = decide(&args(3, 1_000, 4), Counter::Missing, NOW);
        assert!(!o.allowed);
        assert_eq!((o.count, o.remaining, o.reset_ms), (0, 3, 0));
        assert_eq!(o.effects, Effects::default());
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
        let (admit, o) = decide_all(&[(second, present(1, Some(NOW + 500))), (hour, Counter::Missing)], NOW);
        assert!(admit);
        assert_eq!((o[0].count, o[1].count), (2, 1));
        assert_eq!(o[1].effects.set_expiry, Some(NOW + 3_600_000));

        // The per-second budget is spent: the hourly counter must not be burnt either.
        let (admit, o) = decide_all(&[(second, present(2, Some(NOW + 500))), (hour, present(7, None))], NOW);
        assert!(!admit);
        assert!(o.iter().all(|o| !o.allowed && o.effects.store.is_none()));
        assert_eq!((o[0].count, o[1].count), (2, 7));
        assert_eq!(o[1].effects, Effects::heal(NOW + 3_600_000), "still heals");
        assert_eq!(o[1].remaining, 93);
    }

    #[test]
    fn peek_reads_without_writing() {
        let o = peek(10, 1, present(4, Some(NOW + 700)), NOW);
        assert_eq!((o.allowed, o.count, o.remaining, o.reset_ms), (true, 4, 6, 700));
        assert_eq!(o.effects, Effects::default());
        let o = peek(10, 7, present(4, Some(NOW + 700)), NOW);
        assert_eq!((o.allowed, o.count, o.remaining), (false, 4, 6));
        assert_eq!(peek(10, 1, Counter::Missing, NOW).reset_ms, 0);
        assert_eq!(peek(10, 1, present(3, None), NOW).reset_ms, -1, "a leaked counter shows as such");
        assert!(!peek(10, 1, present(i64::MAX, Some(NOW)), NOW).allowed);
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
    use crate::args::MAX_WINDOW_MS;

    fn any_args() -> impl Strategy<Value = HitArgs> {
        (1..=i64::MAX, 1..=MAX_WINDOW_MS, 1..=i64::MAX).prop_map(|(limit, window_ms, cost)| HitArgs {
            limit,
            window_ms,
            cost,
        })
    }

    fn any_counter(now: i64) -> impl Strategy<Value = Counter> {
        prop_oneof![
            Just(Counter::Missing),
            (any::<i64>(), proptest::option::of(now - 1_000..now + 10_000_000))
                .prop_map(|(count, expires_at)| Counter::Present { count, expires_at }),
        ]
    }

    proptest! {
        #[test]
        fn every_rule_holds(
            (args, counter, now) in (0i64..4_000_000_000_000).prop_flat_map(|now| (any_args(), any_counter(now), Just(now)))
        ) {
            let o = decide(&args, counter, now);
            let (before, exists, old_expiry) = match counter {
                Counter::Missing => (0, false, None),
                Counter::Present { count, expires_at } => (count, true, expires_at),
            };
            // Saturates where a negative counter puts it beyond i64.
            let remaining = (i128::from(args.limit) - i128::from(o.count)).clamp(0, i128::from(i64::MAX));
            prop_assert_eq!(i128::from(o.remaining), remaining);
            prop_assert!(o.reset_ms >= 0);
            if o.allowed {
                prop_assert_eq!(i128::from(o.count), i128::from(before) + i128::from(args.cost));
                prop_assert!(o.count <= args.limit);
                let store = o.effects.store.expect("an admitted hit stores");
                prop_assert_eq!((store.count, store.added), (o.count, args.cost));
                // Every write leaves the key with an expiry, and a running window is never moved.
                prop_assert_eq!(store.expires_at, old_expiry.unwrap_or(now + args.window_ms));
            } else {
                prop_assert_eq!(o.count, before);
                prop_assert!(o.effects.store.is_none());
                prop_assert!(i128::from(before) + i128::from(args.cost) > i128::from(args.limit));
            }
            match (exists || o.allowed, old_expiry) {
                (true, None) => prop_assert_eq!(o.effects.set_expiry, Some(now + args.window_ms)),
                _ => prop_assert_eq!(o.effects.set_expiry, None),
            }
            if !exists && !o.allowed {
                prop_assert_eq!(o.effects, Effects::default());
                prop_assert_eq!(o.reset_ms, 0);
            }
        }
    }
}
