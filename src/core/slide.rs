//! The sliding-window decision: the whole algorithm of `RATELIMIT.SLIDE`, with no Redis in it.
//!
//! Windows are aligned to multiples of `window` ms since the Unix epoch. The estimate of the last
//! window's hits is `prev * (window - elapsed) / window + curr`: the previous aligned window's
//! count, weighted by how much of it the sliding window still covers, plus the current one's. A
//! hit is admitted while `estimate + cost <= limit`, and then adds `cost` to `curr`. Everything is
//! computed as integers scaled by `window` (in `i128`), so nothing is rounded in the caller's
//! favour.
//!
//! One key holds both counts and the window they were counted in, as text:
//! `slide:<window_ms>:<start_ms>:<prev>:<curr>`. The server's clock decides rotation, never the
//! TTL: the counts are read relative to the current aligned window whatever the key's expiry.
//! Every write sets the expiry to the end of the window after the current one, when its counts
//! stop mattering.
//!
//! A negative cost gives back from the current window's count (not below 0), never denied, never
//! creating a key, keeping its expiry. Settling a reservation gives back to the window it was
//! counted in while that still counts (current, or previous: it still weighs), and charges an
//! overage to the current window.

use crate::core::decimal::{parse_natural, put_u64};
use crate::core::stored::{Change, Stored, Value, MAX_TEXT};
use crate::core::window::{Limit, MAX_WINDOW_MS};

const TAG: &[u8] = b"slide:";

/// What a sliding-window key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub window_ms: i64,
    /// The start of the window `curr` was counted in, a multiple of `window_ms`.
    pub start_ms: i64,
    /// The count of the window before `start_ms`.
    pub prev: i64,
    pub curr: i64,
}

impl Value for Counts {
    const INVALID: &'static str = "ERR value is not a ratelimit sliding window";

    /// Read on every call: four non-negative decimal integers as Redis reads them, then the rules.
    fn parse(text: &[u8]) -> Option<Counts> {
        let mut fields = text.strip_prefix(TAG)?.splitn(4, |&b| b == b':');
        let mut next = || parse_natural(fields.next()?);
        let c = Counts { window_ms: next()?, start_ms: next()?, prev: next()?, curr: next()? };
        let valid = (1..=MAX_WINDOW_MS).contains(&c.window_ms) && c.start_ms % c.window_ms == 0;
        valid.then_some(c)
    }

    fn write(self, buf: &mut [u8; MAX_TEXT]) -> &[u8] {
        buf[..TAG.len()].copy_from_slice(TAG);
        let mut len = TAG.len();
        for (i, field) in [self.window_ms, self.start_ms, self.prev, self.curr].into_iter().enumerate() {
            if i > 0 {
                buf[len] = b':';
                len += 1;
            }
            // Never negative: the parser and the decisions keep every field >= 0.
            len = put_u64(buf, len, field.unsigned_abs());
        }
        &buf[..len]
    }
}

impl Counts {
    /// When these counts stop mattering: the end of the window after the one `curr` was counted
    /// in (the end of that one if `curr` is 0 and `prev` is not; its start if both are 0).
    pub fn end_ms(&self) -> i64 {
        let windows = if self.curr > 0 { 2 } else { i64::from(self.prev > 0) };
        self.start_ms.saturating_add(self.window_ms.saturating_mul(windows))
    }

    /// The expiry that heals a key holding these counts without TTL at `now_ms`: when they stop
    /// mattering, or 1 ms from now if they already have (an expiry in the past would delete the
    /// key on the primary and only set it on replicas).
    pub fn heal_at(&self, now_ms: i64) -> i64 {
        self.end_ms().max(now_ms.saturating_add(1))
    }

    /// `(prev, curr)` as they stand in this key's own window length at `now_ms`, and the start
    /// of the window they are counted in: the clock's, or (a clock set back) a later one, where
    /// they stay at full weight until the clock reaches it.
    fn current(&self, now_ms: i64) -> (i64, i64, i64) {
        let start = now_ms - now_ms.rem_euclid(self.window_ms);
        match start.saturating_sub(self.start_ms) {
            d if d < 0 => (self.prev, self.curr, self.start_ms),
            0 => (self.prev, self.curr, start),
            d if d == self.window_ms => (self.curr, 0, start),
            _ => (0, 0, start),
        }
    }
}

/// The estimate scaled by `window_ms`: `prev * (window_ms - elapsed) + curr * window_ms`.
fn estimate(prev: i64, curr: i64, elapsed: i64, window_ms: i64) -> i128 {
    i128::from(prev) * i128::from(window_ms - elapsed) + i128::from(curr) * i128::from(window_ms)
}

/// `ceil(scaled / window_ms)`, saturated to an `i64`.
fn ceil_div(scaled: i128, window_ms: i64) -> i64 {
    // Most estimates fit in 64 bits, where division is a fraction of 128-bit division's cost.
    if let (Ok(s), Ok(w)) = (u64::try_from(scaled), u64::try_from(window_ms)) {
        return i64::try_from(s.div_ceil(w)).unwrap_or(i64::MAX);
    }
    let w = i128::from(window_ms);
    i64::try_from((scaled + w - 1).div_euclid(w)).unwrap_or(i64::MAX)
}

/// The decision for one call: the reply numbers and the write to make, in one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub allowed: bool,
    /// The estimate after this call, rounded up.
    pub count: i64,
    /// `max(limit - count, 0)`.
    pub remaining: i64,
    /// -1 when this key admits the call now or never can; else the ms until it would.
    pub retry_after_ms: i64,
    /// The key's PTTL after the call: 0 when there is no key, -1 (PEEK only) when it has no TTL.
    pub reset_ms: i64,
    pub change: Option<Change<Counts>>,
}

/// The counts of `stored` at the call, and what the call needs of them.
struct Now {
    /// The window length the counts decay by: the call's, or the one they were kept with.
    window_ms: i64,
    prev: i64,
    curr: i64,
    /// The window's start: the clock's, or a later one the counts were kept in.
    start: i64,
    now_ms: i64,
    /// The estimate scaled by `window_ms`.
    scaled: i128,
    /// What an admitted call stores, before its cost.
    base: Counts,
}

fn now_of(l: &Limit, stored: Stored<Counts>, now_ms: i64) -> Now {
    let kept = match stored {
        Stored::Missing => Counts { window_ms: l.window_ms, start_ms: 0, prev: 0, curr: 0 },
        Stored::Present { value, .. } => value,
    };
    let (prev, curr, start) = kept.current(now_ms);
    let scaled = estimate(prev, curr, (now_ms - start).max(0), kept.window_ms);
    // Counts kept with another window length go on decaying by it, so that each call sees their
    // estimate as it is then; a write carries it over, rounded up, into the call's window.
    let base = match kept.window_ms == l.window_ms {
        true => Counts { window_ms: l.window_ms, start_ms: start, prev, curr },
        false => Counts {
            window_ms: l.window_ms,
            start_ms: now_ms - now_ms.rem_euclid(l.window_ms),
            prev: 0,
            curr: ceil_div(scaled, kept.window_ms),
        },
    };
    Now { window_ms: kept.window_ms, prev, curr, start, now_ms, scaled, base }
}

/// Whether `cost` more fits: `estimate + cost <= limit`, scaled.
fn fits(l: &Limit, n: &Now) -> bool {
    let w = i128::from(n.window_ms);
    n.scaled + i128::from(l.cost) * w <= i128::from(l.limit) * w
}

/// The ms after which a call that does not fit now would fit, if nothing else happened: `prev`'s
/// weight decays by `prev` per ms until the window ends, then `curr` becomes the previous
/// window's count and decays the same way. -1 when it never can (`cost > limit`).
fn retry_after(l: &Limit, n: &Now) -> i64 {
    if l.cost > l.limit {
        return -1;
    }
    let w = i128::from(n.window_ms);
    let budget = (i128::from(l.limit) - i128::from(l.cost)) * w;
    let (prev, curr) = (i128::from(n.prev), i128::from(n.curr));
    // In this window: prev * (w - e) + curr * w <= budget, for the least elapsed e.
    let left = budget - curr * w;
    if left >= 0 && prev > 0 {
        let e = w - left / prev;
        if e < w {
            return after(n, e);
        }
    }
    // In the next one: curr * (w - e) <= budget (at its end, nothing is left to count).
    let e = if curr == 0 { 0 } else { (w - budget / curr).max(0) };
    after(n, w + e)
}

/// The ms from now to `e` ms after the window's start.
fn after(n: &Now, e: i128) -> i64 {
    (i128::from(n.start) + e - i128::from(n.now_ms)).min(i128::from(i64::MAX)) as i64
}

/// The reply for a call that is `allowed` or not; `counted` when its cost is in the count.
fn outcome(l: &Limit, n: &Now, allowed: bool, counted: bool, reset_ms: i64, change: Option<Change<Counts>>) -> Outcome {
    let added = if counted { i128::from(l.cost) * i128::from(n.window_ms) } else { 0 };
    let count = ceil_div(n.scaled + added, n.window_ms);
    Outcome {
        allowed,
        count,
        remaining: l.limit.saturating_sub(count).max(0),
        // Per key: a key that admits the call now says -1, even where another key denied it.
        retry_after_ms: if fits(l, n) { -1 } else { retry_after(l, n) },
        reset_ms,
        change,
    }
}

/// Decides one call at `now_ms`. An admitted call stores the rotated counts with `curr + cost`
/// and the expiry at the end of the next window; a denied one writes nothing but the heal of a
/// key without TTL.
pub fn decide(l: &Limit, stored: Stored<Counts>, now_ms: i64) -> Outcome {
    if l.cost < 0 {
        return give_back(l, stored, now_ms, None, l.cost.unsigned_abs()).0;
    }
    let n = now_of(l, stored, now_ms);
    let admit = fits(l, &n);
    settle(l, stored, &n, now_ms, admit)
}

/// How many of the call's cost the estimate has room for: the most `g <= cost` with
/// `estimate + g <= limit`, scaled (0 when none).
fn room(l: &Limit, n: &Now) -> i64 {
    let w = i128::from(n.window_ms);
    let whole = (i128::from(l.limit) * w - n.scaled).max(0) / w;
    // At most the cost, an i64.
    whole.min(i128::from(l.cost)) as i64
}

/// Decides a call with PARTIAL (`l.cost` >= 1, the parser's rule): as many of its cost as the
/// estimate has room for, at least one (else denied, as a call of one would be); the outcome and
/// how many were granted, each counted as `decide` counts a call of that cost.
pub fn decide_partial(l: &Limit, stored: Stored<Counts>, now_ms: i64) -> (Outcome, i64) {
    let n = now_of(l, stored, now_ms);
    let granted = room(l, &n);
    let granting = Limit { cost: granted.max(1), ..*l };
    (settle(&granting, stored, &n, now_ms, granted > 0), granted)
}

/// What a call with PARTIAL would get, without making it: `peek`'s reply for what it would be
/// granted (one when nothing), and that number.
pub fn peek_partial(l: &Limit, stored: Stored<Counts>, now_ms: i64) -> (Outcome, i64) {
    let granted = room(l, &now_of(l, stored, now_ms));
    (peek(&Limit { cost: granted.max(1), ..*l }, stored, now_ms), granted)
}

/// Decides one call against several sliding windows, all or nothing: admitted only if every one
/// admits it, and then counted on each; otherwise on none (each key without TTL still heals). A
/// window in shadow mode (`shadowed[i]`) never denies: admitted, it counts the call whatever the
/// limit.
pub fn decide_all(calls: &[(Limit, Stored<Counts>)], shadowed: &[bool], now_ms: i64) -> (bool, Vec<Outcome>) {
    let nows: Vec<Now> = calls.iter().map(|(l, stored)| now_of(l, *stored, now_ms)).collect();
    let counts = |(l, _): &(Limit, Stored<Counts>), n: &Now| n.base.curr.checked_add(l.cost).is_some();
    let admit = calls
        .iter()
        .zip(&nows)
        .enumerate()
        .all(|(i, (c, n))| fits(&c.0, n) || shadowed.get(i) == Some(&true) && counts(c, n));
    let outcomes = calls.iter().zip(&nows).map(|((l, stored), n)| match admit && !fits(l, n) {
        true => charge(l, *stored, now_ms, l.cost).unwrap_or_else(|| settle(l, *stored, n, now_ms, false)),
        false => settle(l, *stored, n, now_ms, admit),
    });
    (admit, outcomes.collect())
}

/// A call denied by its limit, admitted anyway (shadow mode): its cost counted in the current
/// window; `None` when a count would pass `i64::MAX`.
pub fn admit_anyway(l: &Limit, stored: Stored<Counts>, now_ms: i64) -> Option<Outcome> {
    charge(l, stored, now_ms, l.cost)
}

fn settle(l: &Limit, stored: Stored<Counts>, n: &Now, now_ms: i64, admit: bool) -> Outcome {
    if admit {
        // curr + cost <= limit: the estimate, which includes curr, fits.
        let value = Counts { curr: n.base.curr + l.cost, ..n.base };
        let expires_at = value.end_ms();
        return outcome(l, n, true, true, expires_at - now_ms, Some(Change::Set { value, expires_at }));
    }
    let (change, expiry) = match stored {
        Stored::Missing => (None, None),
        Stored::Present { value, expires_at: None } => {
            let at = value.heal_at(now_ms);
            (Some(Change::Expire { at }), Some(at))
        }
        Stored::Present { expires_at, .. } => (None, expires_at),
    };
    outcome(l, n, false, false, expiry.map_or(0, |t| t.saturating_sub(now_ms).max(0)), change)
}

/// Why a reservation cannot be settled on a sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsettled {
    /// The key's counts are kept with another window length than the reservation's.
    WindowDiffers,
    /// A count would pass `i64::MAX`.
    Overflow,
}

/// `amount` taken off the window that starts at `window` (`None`: the current one) if it still
/// counts, not below 0; the key keeps its expiry, or heals. The outcome, and how much was taken.
fn give_back(l: &Limit, stored: Stored<Counts>, now_ms: i64, window: Option<i64>, amount: u64) -> (Outcome, i64) {
    let Stored::Present { value: kept, expires_at } = stored else {
        return (admitted(l, None, None, now_ms, None), 0);
    };
    let (prev, curr, start) = kept.current(now_ms);
    let mut counts = Counts { window_ms: kept.window_ms, start_ms: start, prev, curr };
    let take = |n: &mut i64| {
        let taken = amount.min(n.unsigned_abs()) as i64;
        *n -= taken;
        taken
    };
    let taken = match window.unwrap_or(start) {
        w if w == start => take(&mut counts.curr),
        w if w == start - kept.window_ms => take(&mut counts.prev),
        _ => 0,
    };
    let (change, expiry) = match (taken > 0, expires_at) {
        (true, Some(at)) => (Some(Change::Replace { value: counts }), at),
        (true, None) => {
            let at = counts.heal_at(now_ms);
            (Some(Change::Set { value: counts, expires_at: at }), at)
        }
        (false, Some(at)) => (None, at),
        (false, None) => {
            let at = kept.heal_at(now_ms);
            (Some(Change::Expire { at }), at)
        }
    };
    (admitted(l, Some(counts), Some(expiry), now_ms, change), taken)
}

/// `amount` more on the current window whatever the limit (a cost already incurred); `None` when
/// a count would pass `i64::MAX`.
fn charge(l: &Limit, stored: Stored<Counts>, now_ms: i64, amount: i64) -> Option<Outcome> {
    let n = now_of(l, stored, now_ms);
    let value = Counts { curr: n.base.curr.checked_add(amount)?, ..n.base };
    let expires_at = value.end_ms();
    Some(admitted(l, Some(value), Some(expires_at), now_ms, Some(Change::Set { value, expires_at })))
}

/// The reply for counts left as `counts` (none: no key) expiring at `expiry`, as of an admitted
/// call: no retry.
fn admitted(
    l: &Limit,
    counts: Option<Counts>,
    expiry: Option<i64>,
    now_ms: i64,
    change: Option<Change<Counts>>,
) -> Outcome {
    let stored = counts.map_or(Stored::Missing, |value| Stored::Present { value, expires_at: expiry });
    let l = Limit { window_ms: counts.map_or(l.window_ms, |c| c.window_ms), cost: 0, ..*l };
    let n = now_of(&l, stored, now_ms);
    let reset_ms = expiry.map_or(0, |t| t.saturating_sub(now_ms).max(0));
    Outcome { retry_after_ms: -1, ..outcome(&l, &n, true, false, reset_ms, change) }
}

/// Settles a reservation of `amount` counted in the window that starts at `start_ms` (of
/// `l.window_ms`), of `used`: what was unused goes back to that window while it counts, what was
/// used beyond it is charged to the current window. The outcome and how much it changed the
/// count of the window it went to.
pub fn settle_reserved(
    l: &Limit,
    start_ms: i64,
    amount: i64,
    used: i64,
    stored: Stored<Counts>,
    now_ms: i64,
) -> Result<(Outcome, i64), Unsettled> {
    if matches!(stored, Stored::Present { value, .. } if value.window_ms != l.window_ms) {
        return Err(Unsettled::WindowDiffers);
    }
    match used - amount {
        over if over > 0 => charge(l, stored, now_ms, over).map(|o| (o, over)).ok_or(Unsettled::Overflow),
        under => {
            let (o, taken) = give_back(l, stored, now_ms, Some(start_ms), under.unsigned_abs());
            Ok((o, -taken))
        }
    }
}

/// What a call would get, without making it; `reset_ms` is the key's PTTL as it is.
pub fn peek(l: &Limit, stored: Stored<Counts>, now_ms: i64) -> Outcome {
    let n = now_of(l, stored, now_ms);
    let reset_ms = match stored {
        Stored::Missing => 0,
        Stored::Present { expires_at: None, .. } => -1,
        Stored::Present { expires_at: Some(t), .. } => t.saturating_sub(now_ms).max(0),
    };
    outcome(l, &n, fits(l, &n), false, reset_ms, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: i64 = 60_000;
    /// A window start.
    const T0: i64 = 1_700_000_040_000;

    fn limit(limit: i64, cost: i64) -> Limit {
        Limit { limit, window_ms: W, cost }
    }

    fn counts(start_ms: i64, prev: i64, curr: i64) -> Counts {
        Counts { window_ms: W, start_ms, prev, curr }
    }

    fn present(c: Counts, expires_at: Option<i64>) -> Stored<Counts> {
        Stored::Present { value: c, expires_at }
    }

    #[test]
    fn text_round_trips_and_rejects_anything_else() {
        let c = counts(T0, 3, 7);
        let mut buf = [0; MAX_TEXT];
        assert_eq!(c.write(&mut buf), b"slide:60000:1700000040000:3:7");
        assert_eq!(Counts::parse(b"slide:60000:1700000040000:3:7"), Some(c));
        let max = Counts { window_ms: MAX_WINDOW_MS, start_ms: 0, prev: i64::MAX, curr: i64::MAX };
        assert_eq!(Counts::parse(max.write(&mut buf)), Some(max));
        for bad in [
            &b""[..],
            b"12",
            b"slide:",
            b"slide:60000:1700000040000:3",
            b"slide:60000:1700000040000:3:7:1",
            b"slide:60000:1700000040001:3:7",
            b"slide:0:0:3:7",
            b"slide:60000:-60000:3:7",
            b"slide:60000:1700000040000:-3:7",
            b"slide:60000:1700000040000:3:+7",
            b"slide:60000:1700000040000:3:07",
            b"slide:4611686018427387904:0:0:1",
            b"SLIDE:60000:1700000040000:3:7",
            b"slide:60000:1700000040000:3:7 ",
        ] {
            assert_eq!(Counts::parse(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_negative_cost_gives_back_from_the_current_window_keeping_the_expiry() {
        let now = T0 + W / 2;
        let c = present(counts(T0, 8, 6), Some(T0 + 2 * W));
        let o = decide(&limit(20, -4), c, now);
        assert_eq!(
            (o.allowed, o.count, o.remaining, o.retry_after_ms, o.reset_ms),
            (true, 6, 14, -1, T0 + 2 * W - now)
        );
        assert_eq!(o.change, Some(Change::Replace { value: counts(T0, 8, 2) }));
        assert_eq!(decide(&limit(20, i64::MIN), c, now).change, Some(Change::Replace { value: counts(T0, 8, 0) }));
        // Nothing in the current window: nothing to give back, nothing written.
        assert_eq!(decide(&limit(20, -4), present(counts(T0 - W, 0, 6), Some(T0 + W)), now).change, None);
        let o = decide(&limit(20, -4), Stored::Missing, now);
        assert_eq!((o.allowed, o.count, o.reset_ms, o.change), (true, 0, 0, None));
        // Without TTL: written with the expiry its counts give, or only healed.
        let o = decide(&limit(20, -1), present(counts(T0, 8, 6), None), now);
        assert_eq!(o.change, Some(Change::Set { value: counts(T0, 8, 5), expires_at: T0 + 2 * W }));
    }

    #[test]
    fn settling_refunds_the_reserved_window_while_it_weighs() {
        let l = limit(20, 1);
        let c = present(counts(T0, 0, 10), Some(T0 + 2 * W));
        // In the reserved window itself: off curr.
        let (o, applied) = settle_reserved(&l, T0, 8, 3, c, T0 + 10).unwrap();
        assert_eq!((o.count, applied, o.change), (5, -5, Some(Change::Replace { value: counts(T0, 0, 5) })));
        // A window later, it is the previous one: off prev, rotated.
        let now = T0 + W + W / 2;
        let (o, applied) = settle_reserved(&l, T0, 8, 3, c, now).unwrap();
        assert_eq!((applied, o.change), (-5, Some(Change::Replace { value: counts(T0 + W, 5, 0) })));
        assert_eq!(o.count, 3, "5 at half weight, rounded up");
        // Two windows later it weighs nothing: dropped.
        let (o, applied) = settle_reserved(&l, T0, 8, 3, c, T0 + 2 * W).unwrap();
        assert_eq!((applied, o.change), (0, None));
        // A reservation of another window length than the key's counts.
        assert_eq!(
            settle_reserved(
                &limit(20, 1),
                T0,
                8,
                3,
                present(Counts { window_ms: 1_000, ..counts(T0, 0, 1) }, None),
                T0
            ),
            Err(Unsettled::WindowDiffers)
        );
    }

    #[test]
    fn settling_charges_an_overage_to_the_current_window() {
        let l = limit(20, 1);
        let (o, applied) =
            settle_reserved(&l, T0, 8, 30, present(counts(T0, 0, 10), Some(T0 + 2 * W)), T0 + W).unwrap();
        assert_eq!(applied, 22);
        assert_eq!(o.change, Some(Change::Set { value: counts(T0 + W, 10, 22), expires_at: T0 + 3 * W }));
        assert_eq!((o.count, o.remaining, o.retry_after_ms), (32, 0, -1), "past the limit");
        let (o, _) = settle_reserved(&l, T0, 8, 9, Stored::Missing, T0 + 5).unwrap();
        assert_eq!(o.change, Some(Change::Set { value: counts(T0, 0, 1), expires_at: T0 + 2 * W }));
        let full = present(counts(T0, 0, i64::MAX), Some(T0 + 2 * W));
        assert_eq!(settle_reserved(&l, T0, 1, 2, full, T0), Err(Unsettled::Overflow));
    }

    #[test]
    fn first_call_counts_in_the_current_window() {
        let now = T0 + 15_000;
        let o = decide(&limit(10, 1), Stored::Missing, now);
        let value = counts(T0, 0, 1);
        assert_eq!(
            o,
            Outcome {
                allowed: true,
                count: 1,
                remaining: 9,
                retry_after_ms: -1,
                reset_ms: T0 + 2 * W - now,
                change: Some(Change::Set { value, expires_at: T0 + 2 * W }),
            }
        );
    }

    #[test]
    fn previous_window_weighs_by_what_is_left_of_it() {
        // A quarter into the window: 3/4 of prev = 7.5 of 10, plus 2: 9.5; one more fits (10.5 no).
        let stored = present(counts(T0 - W, 0, 10), Some(T0 + W));
        let now = T0 + W / 4;
        let c = present(counts(T0, 10, 2), Some(T0 + 2 * W));
        let o = decide(&limit(11, 1), c, now);
        assert!(o.allowed);
        assert_eq!((o.count, o.remaining), (11, 0), "10.5 rounds up");
        let o = decide(&limit(10, 1), c, now);
        assert!(!o.allowed);
        assert_eq!((o.count, o.remaining, o.change), (10, 0, None));
        // 10 * (W - e) / W + 2 + 1 <= 10 once e >= 0.3 W: 18,000 ms in, 3,000 after now.
        assert_eq!(o.retry_after_ms, 3_000);
        // The stored key rotates by the clock: last window's curr is this one's prev.
        let o = decide(&limit(10, 1), stored, now);
        assert!(o.allowed);
        assert_eq!(o.count, 9, "7.5 + 1 rounds up to 9");
        assert_eq!(o.change, Some(Change::Set { value: counts(T0, 10, 1), expires_at: T0 + 2 * W }));
    }

    #[test]
    fn counts_older_than_the_previous_window_do_not_matter() {
        let o = decide(&limit(1, 1), present(counts(T0 - 2 * W, 5, 5), None), T0 + 1);
        assert!(o.allowed);
        assert_eq!(o.change, Some(Change::Set { value: counts(T0, 0, 1), expires_at: T0 + 2 * W }));
    }

    #[test]
    fn retry_after_reaches_into_the_next_window() {
        // limit 4, curr 4 in this window, no prev: the next window starts with prev 4, full
        // weight; the call fits when 4 * (W - e) / W + 1 <= 4: e >= W / 4.
        let c = present(counts(T0, 0, 4), Some(T0 + 2 * W));
        let now = T0 + 10_000;
        let o = decide(&limit(4, 1), c, now);
        assert!(!o.allowed);
        assert_eq!(o.retry_after_ms, W - 10_000 + W / 4);
        assert_eq!(o.reset_ms, T0 + 2 * W - now);
        // cost == limit: only an empty estimate admits it, at the end of the next window.
        assert_eq!(decide(&limit(4, 4), c, now).retry_after_ms, 2 * W - 10_000);
        assert_eq!(decide(&limit(4, 5), c, now).retry_after_ms, -1);
    }

    #[test]
    fn denied_call_heals_a_key_without_ttl_and_writes_nothing_else() {
        let c = counts(T0, 0, 4);
        let o = decide(&limit(4, 1), present(c, None), T0 + 1);
        assert_eq!(o.change, Some(Change::Expire { at: T0 + 2 * W }));
        assert_eq!(o.reset_ms, T0 + 2 * W - (T0 + 1));
        // Counts that stopped mattering heal 1 ms from now (cost > limit is denied on nothing).
        let o = decide(&limit(4, 5), present(counts(T0 - 5 * W, 1, 1), None), T0);
        assert_eq!(o.change, Some(Change::Expire { at: T0 + 1 }));
        let o = decide(&limit(4, 5), Stored::Missing, T0);
        assert_eq!((o.allowed, o.change, o.reset_ms, o.count), (false, None, 0, 0));
    }

    #[test]
    fn another_window_length_carries_over_its_estimate() {
        // Written with a 10 s window: prev 10 half-decayed + curr 1 = 6; now read with 60 s.
        let c = Counts { window_ms: 10_000, start_ms: T0, prev: 10, curr: 1 };
        let o = decide(&limit(100, 1), present(c, Some(T0 + 20_000)), T0 + 5_000);
        assert_eq!(o.change, Some(Change::Set { value: counts(T0, 0, 7), expires_at: T0 + 2 * W }));
    }

    #[test]
    fn a_window_in_the_clocks_future_keeps_its_counts_at_full_weight() {
        let o = decide(&limit(10, 1), present(counts(T0 + W, 2, 3), Some(T0 + 3 * W)), T0 + 1);
        assert_eq!(o.change, Some(Change::Set { value: counts(T0 + W, 2, 4), expires_at: T0 + 3 * W }));
        assert_eq!(o.count, 6);
    }

    #[test]
    fn peek_answers_without_writing() {
        let c = counts(T0, 10, 2);
        let o = peek(&limit(10, 1), present(c, None), T0 + W / 4);
        assert_eq!(
            o,
            Outcome { allowed: false, count: 10, remaining: 0, retry_after_ms: 3_000, reset_ms: -1, change: None }
        );
        let o = peek(&limit(11, 1), present(c, Some(T0 + 2 * W)), T0 + W / 4);
        assert_eq!((o.allowed, o.count, o.retry_after_ms, o.reset_ms), (true, 10, -1, 2 * W - W / 4));
        assert_eq!(peek(&limit(1, 1), Stored::Missing, T0).reset_ms, 0);
    }

    #[test]
    fn partial_grants_what_the_estimate_has_room_for_at_least_one() {
        // Estimate at a quarter in: 8 * 3/4 + 2 = 8 of 20.
        let now = T0 + W / 4;
        let c = present(counts(T0, 8, 2), Some(T0 + 2 * W));
        // All of it fits: as without PARTIAL.
        assert_eq!(decide_partial(&limit(20, 5), c, now), (decide(&limit(20, 5), c, now), 5));
        // Room for 12 of 30: those, counted as a call of 12.
        let (o, granted) = decide_partial(&limit(20, 30), c, now);
        assert_eq!((granted, o.allowed, o.count, o.remaining, o.retry_after_ms), (12, true, 20, 0, -1));
        assert_eq!(o, decide(&limit(20, 12), c, now));
        // A fraction of room is not a whole one: 8 * 3/4 + 2 = 8.0, 9 * 3/4 + 2 = 8.75 leaves 11.
        let (_, granted) = decide_partial(&limit(20, 30), present(counts(T0, 9, 2), None), now);
        assert_eq!(granted, 11);
        // None: denied as a call of one, nothing counted, a key without TTL healed.
        let full = present(counts(T0, 8, 14), None);
        let (o, granted) = decide_partial(&limit(20, 30), full, now);
        assert_eq!(granted, 0);
        assert_eq!(o, decide(&limit(20, 1), full, now));
        assert!(!o.allowed && matches!(o.change, Some(Change::Expire { .. })));
        // Over the limit already (a smaller limit than the counts were kept with): none.
        assert_eq!(decide_partial(&limit(5, 3), c, now).1, 0);
        // PEEK PARTIAL: what the call would get, nothing written.
        let (p, granted) = peek_partial(&limit(20, 30), c, now);
        assert_eq!((p.allowed, p.count, p.change, granted), (true, 8, None, 12));
        assert_eq!(peek_partial(&limit(20, 30), full, now).1, 0);
    }

    #[test]
    fn all_or_nothing() {
        let full = present(counts(T0, 0, 2), Some(T0 + 2 * W));
        let (allowed, o) = decide_all(&[(limit(5, 1), Stored::Missing), (limit(2, 1), full)], &[], T0);
        assert!(!allowed);
        assert_eq!((o[0].change, o[0].count, o[1].change), (None, 0, None));
        // The key that would admit it says -1; the one that denied it when it would admit it.
        assert_eq!((o[0].retry_after_ms, o[1].retry_after_ms), (-1, W + W / 2));
        let (allowed, o) = decide_all(&[(limit(5, 1), Stored::Missing), (limit(3, 1), full)], &[], T0);
        assert!(allowed);
        assert_eq!((o[0].count, o[1].count), (1, 3));
    }

    #[test]
    fn shadow_mode_admits_what_a_window_denies() {
        let full = present(counts(T0, 0, 2), Some(T0 + 2 * W));
        let o = admit_anyway(&limit(2, 1), full, T0).unwrap();
        assert_eq!((o.allowed, o.count, o.remaining, o.retry_after_ms), (true, 3, 0, -1));
        assert!(
            matches!(o.change, Some(Change::Set { value, expires_at }) if value.curr == 3 && expires_at == T0 + 2 * W)
        );
        assert_eq!(admit_anyway(&limit(2, 1), present(counts(T0, 0, i64::MAX), None), T0), None);
        // Only the enforced window may deny: a shadowed one counts past its limit.
        let (allowed, o) = decide_all(&[(limit(5, 1), Stored::Missing), (limit(2, 1), full)], &[false, true], T0);
        assert!(allowed);
        assert_eq!((o[0].count, o[1].count, o[1].allowed), (1, 3, true));
        let (allowed, o) = decide_all(&[(limit(5, 1), Stored::Missing), (limit(2, 1), full)], &[true, false], T0);
        assert!(!allowed && o.iter().all(|o| o.change.is_none()));
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    fn any_limit() -> impl Strategy<Value = Limit> {
        prop_oneof![
            3 => (1..=20i64, 1..=10_000i64, 1..=5i64),
            1 => (1..=i64::MAX, 1..=MAX_WINDOW_MS, 1..=i64::MAX),
        ]
        .prop_map(|(limit, window_ms, cost)| Limit { limit, window_ms, cost })
    }

    fn any_stored(window_ms: i64, now: i64) -> impl Strategy<Value = Stored<Counts>> {
        let start = now - now.rem_euclid(window_ms);
        prop_oneof![
            Just(Stored::Missing),
            (
                prop_oneof![Just(window_ms), 1..=MAX_WINDOW_MS],
                -3i64..=1,
                prop_oneof![0..=30i64, 0..=i64::MAX],
                prop_oneof![0..=30i64, 0..=i64::MAX],
                proptest::option::of(now - 1_000..now + 10_000_000),
            )
                .prop_map(move |(w, back, prev, curr, expires_at)| {
                    let own = start - start.rem_euclid(w);
                    let start_ms = own.saturating_add(back.saturating_mul(w)).max(0);
                    let start_ms = start_ms - start_ms.rem_euclid(w);
                    Stored::Present { value: Counts { window_ms: w, start_ms, prev, curr }, expires_at }
                }),
        ]
    }

    fn case() -> impl Strategy<Value = (Limit, Stored<Counts>, i64)> {
        (0i64..4_000_000_000_000, any_limit())
            .prop_flat_map(|(now, l)| (Just(l), any_stored(l.window_ms, now), Just(now)))
    }

    proptest! {
        #[test]
        fn every_rule_holds((l, stored, now) in case()) {
            let o = decide(&l, stored, now);
            prop_assert_eq!(o.remaining, l.limit.saturating_sub(o.count).max(0));
            let leaked = matches!(stored, Stored::Present { expires_at: None, .. });
            match o.change {
                Some(Change::Set { value, expires_at }) => {
                    prop_assert!(o.allowed);
                    prop_assert!(expires_at > now);
                    prop_assert_eq!(expires_at, value.end_ms());
                    prop_assert!(value.start_ms >= now - now.rem_euclid(l.window_ms));
                    prop_assert!(value.curr <= l.limit && o.count <= l.limit);
                    // The text round-trips.
                    prop_assert_eq!(Counts::parse(value.write(&mut [0; MAX_TEXT])), Some(value));
                }
                Some(Change::Expire { at }) => {
                    prop_assert!(!o.allowed && at > now);
                    prop_assert!(leaked);
                }
                Some(Change::Add { .. }) => prop_assert!(false, "SLIDE never adds"),
                Some(Change::Replace { .. }) => prop_assert!(false, "a call of cost >= 1 gives nothing back"),
                None => {
                    prop_assert!(!o.allowed);
                    prop_assert!(!leaked);
                }
            }
            // Admitted exactly when the estimate fits, as the same call through peek says.
            let p = peek(&l, stored, now);
            prop_assert_eq!(p.allowed, o.allowed);
            prop_assert_eq!(p.change, None);
            prop_assert_eq!(p.retry_after_ms, o.retry_after_ms);
        }

        #[test]
        fn partial_grants_the_most_that_fits((l, stored, now) in case()) {
            let (o, granted) = decide_partial(&l, stored, now);
            prop_assert!((0..=l.cost).contains(&granted));
            prop_assert_eq!(o.allowed, granted > 0);
            if granted > 0 {
                // Exactly a call of what was granted, which fits where one more would not.
                let granting = Limit { cost: granted, ..l };
                prop_assert_eq!(o, decide(&granting, stored, now));
                if granted < l.cost {
                    let one_more = Limit { cost: granted + 1, ..l };
                    prop_assert!(!decide(&one_more, stored, now).allowed);
                }
            } else {
                let one = Limit { cost: 1, ..l };
                prop_assert_eq!(o, decide(&one, stored, now));
            }
            let granting = Limit { cost: granted.max(1), ..l };
            prop_assert_eq!(peek_partial(&l, stored, now), (peek(&granting, stored, now), granted));
        }

        #[test]
        fn retry_after_is_exact((l, stored, now) in case()) {
            let o = decide(&l, stored, now);
            if !o.allowed && o.retry_after_ms > 0 && o.retry_after_ms < i64::MAX / 4 {
                // Nothing else happening, the same call fits at now + retry, not a ms before.
                let later = |t: i64| decide(&l, stored, now + t).allowed;
                prop_assert!(later(o.retry_after_ms));
                prop_assert!(!later(o.retry_after_ms - 1));
            }
        }
    }

    /// The one-pass parser against the rules read plainly: fields split on ':', each an integer
    /// as Redis reads it.
    fn parse_plainly(text: &[u8]) -> Option<Counts> {
        use crate::core::decimal::parse_i64;
        let mut fields = text.strip_prefix(b"slide:")?.split(|&b| b == b':').map(parse_i64);
        let mut next = || fields.next().flatten();
        let c = Counts { window_ms: next()?, start_ms: next()?, prev: next()?, curr: next()? };
        let valid = fields.next().is_none()
            && (1..=MAX_WINDOW_MS).contains(&c.window_ms)
            && c.start_ms >= 0
            && c.start_ms % c.window_ms == 0
            && c.prev >= 0
            && c.curr >= 0;
        valid.then_some(c)
    }

    proptest! {
        #[test]
        fn the_parser_reads_what_the_rules_say(
            words in prop::collection::vec(
                prop_oneof![
                    Just("slide".to_string()), Just(":".to_string()), Just("0".to_string()),
                    Just("-".to_string()), Just("00".to_string()), Just("9223372036854775808".to_string()),
                    Just("4611686018427387904".to_string()), Just(" ".to_string()), Just("+1".to_string()),
                    any::<i64>().prop_map(|n| n.to_string()), (0..100_000i64).prop_map(|n| n.to_string()),
                ],
                0..12,
            ),
            fields in (1..=MAX_WINDOW_MS, 0..=5i64, any::<i64>(), any::<i64>()),
        ) {
            let text = words.concat();
            prop_assert_eq!(Counts::parse(text.as_bytes()), parse_plainly(text.as_bytes()));
            let (w, k, p, c) = fields;
            let text = format!("slide:{w}:{}:{p}:{c}", w.saturating_mul(k));
            prop_assert_eq!(Counts::parse(text.as_bytes()), parse_plainly(text.as_bytes()));
        }
    }

    /// retry_after_ms against a search, on small windows where every ms can be tried.
    #[test]
    fn retry_after_matches_a_search() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % n) as i64
        };
        for _ in 0..20_000 {
            let w = 1 + next(50);
            let l = Limit { limit: 1 + next(12), window_ms: w, cost: 1 + next(4) };
            let now = 1_000 + next(1_000);
            let start = now - now.rem_euclid(w) - next(3) * w;
            let stored = present_(Counts { window_ms: w, start_ms: start, prev: next(15), curr: next(15) });
            let o = decide(&l, stored, now);
            let first = (0..4 * w).find(|&t| decide(&l, stored, now + t).allowed).unwrap_or(-1);
            let expected = if o.allowed { -1 } else { first };
            assert_eq!(o.retry_after_ms, expected, "{l:?} {stored:?} {now}");
        }
    }

    fn present_(c: Counts) -> Stored<Counts> {
        Stored::Present { value: c, expires_at: Some(c.end_ms()) }
    }
}

/// The estimate against an exact sliding log, on the same arrival times: how many calls the
/// sliding window admits in any window-length interval, and how often more than `limit`. The
/// fixed window (`window::decide`) on the same arrivals for comparison. `cargo test --release
/// --lib accuracy -- --nocapture` prints the table that docs/performance.md shows.
#[cfg(test)]
mod accuracy {
    use std::collections::VecDeque;

    use super::*;
    use crate::core::window;

    const W: i64 = 60_000;
    const LIMIT: i64 = 100;
    const WINDOWS: i64 = 200;
    const T0: i64 = 1_700_000_040_000;

    /// Arrival times (ms, sorted) of one pattern.
    fn pattern(name: &str) -> Vec<i64> {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut uniform = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng >> 11) as f64 / (1u64 << 53) as f64
        };
        let end = T0 + WINDOWS * W;
        let mut times = Vec::new();
        match name {
            // Twice the limit, evenly spaced.
            "uniform" => times.extend((T0..end).step_by((W / (2 * LIMIT)) as usize)),
            // Twice the limit on average, exponential gaps.
            "poisson" => {
                let mut t = T0 as f64;
                while (t as i64) < end {
                    times.push(t as i64);
                    t += -(1.0 - uniform()).ln() * (W as f64 / (2 * LIMIT) as f64);
                }
            }
            // Twice the limit in the last ms of each window and again in the first of the next
            // (the fixed window's weakness: one call at T0 starts its windows on these edges).
            "boundary bursts" => {
                times.push(T0);
                for k in 1..WINDOWS {
                    let edge = T0 + k * W;
                    times.extend(std::iter::repeat_n(edge - 1, 2 * LIMIT as usize));
                    times.extend(std::iter::repeat_n(edge, 2 * LIMIT as usize));
                }
            }
            // The approximation's worst case: the limit in the last ms of a window, then a call
            // every ms through the next; every other window.
            "adversarial" => {
                for k in (1..WINDOWS).step_by(2) {
                    let edge = T0 + k * W;
                    times.extend(std::iter::repeat_n(edge - 1, LIMIT as usize));
                    times.extend(edge..edge + W);
                }
            }
            _ => unreachable!(),
        }
        times.sort_unstable();
        times
    }

    struct Seen {
        admitted: usize,
        /// The most admitted calls in any interval (t - W, t].
        most: usize,
        /// Admitted calls after which the interval ending there holds more than LIMIT.
        over: usize,
    }

    /// Runs the arrivals through `admit(now) -> bool` and measures what it let through.
    fn measure(times: &[i64], mut admit: impl FnMut(i64) -> bool) -> Seen {
        let mut recent = VecDeque::new();
        let mut seen = Seen { admitted: 0, most: 0, over: 0 };
        for &t in times {
            if !admit(t) {
                continue;
            }
            recent.push_back(t);
            while recent.front().is_some_and(|&f| f <= t - W) {
                recent.pop_front();
            }
            seen.admitted += 1;
            seen.most = seen.most.max(recent.len());
            seen.over += usize::from(recent.len() > LIMIT as usize);
        }
        seen
    }

    #[test]
    fn accuracy_against_an_exact_sliding_log() {
        let l = Limit { limit: LIMIT, window_ms: W, cost: 1 };
        println!("| arrivals | exact log admits | sliding window admits | most in any {W} ms, ×limit | admitted calls that left more than limit in the window before them | fixed window: most, ×limit |");
        println!("| --- | ---: | ---: | ---: | ---: | ---: |");
        for name in ["uniform", "poisson", "boundary bursts", "adversarial"] {
            let times = pattern(name);
            let mut log = VecDeque::new();
            let exact = measure(&times, |t| {
                while log.front().is_some_and(|&f| f <= t - W) {
                    log.pop_front();
                }
                let fits = log.len() < LIMIT as usize;
                if fits {
                    log.push_back(t);
                }
                fits
            });
            let mut stored = Stored::Missing;
            let sliding = measure(&times, |t| {
                let o = decide(&l, stored, t);
                if let Some(Change::Set { value, expires_at }) = o.change {
                    stored = Stored::Present { value, expires_at: Some(expires_at) };
                }
                o.allowed
            });
            let mut counter = Stored::Missing;
            let fixed = measure(&times, |t| {
                if matches!(counter, Stored::Present { expires_at: Some(e), .. } if e <= t) {
                    counter = Stored::Missing;
                }
                let o = window::decide(&l, counter, t);
                counter = match (o.change, counter) {
                    (Some(Change::Set { value, expires_at }), _) => {
                        Stored::Present { value, expires_at: Some(expires_at) }
                    }
                    (Some(Change::Add { value, .. }), Stored::Present { expires_at, .. }) => {
                        Stored::Present { value, expires_at }
                    }
                    (_, c) => c,
                };
                o.allowed
            });
            let ratio = |s: &Seen| s.most as f64 / LIMIT as f64;
            println!(
                "| {name} | {} | {} | {:.2} | {:.2}% | {:.2} |",
                exact.admitted,
                sliding.admitted,
                ratio(&sliding),
                100.0 * sliding.over as f64 / sliding.admitted as f64,
                ratio(&fixed)
            );
            // The exact log is exact; the sliding window stays under twice the limit, always.
            assert!(exact.most <= LIMIT as usize && exact.over == 0);
            assert!(sliding.most < 2 * LIMIT as usize, "{name}: {}", sliding.most);
            match name {
                // Spread evenly, the previous window's calls are what the estimate assumes.
                "uniform" => assert!(sliding.most <= LIMIT as usize + 1, "{name}: {}", sliding.most),
                // The fixed window's weakness is not the sliding window's.
                "boundary bursts" => {
                    assert!(sliding.most <= LIMIT as usize && fixed.most > 19 * LIMIT as usize / 10, "{name}")
                }
                // Its worst case comes close to the bound.
                "adversarial" => assert!(sliding.most > 19 * LIMIT as usize / 10, "{name}: {}", sliding.most),
                _ => {}
            }
        }
    }
}
