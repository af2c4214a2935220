//! The contract of a limiter on one key (the fixed window, the sliding window, GCRA): what one
//! command body (`crate::commands::limiter`) asks of each algorithm, so that the steps around a
//! decision (the ACL check of a give-back, the read, OOM for new keys, shadow mode, the write,
//! INFO, RATELIMIT.TOP, the reply, the reservation) are written once.

use std::cell::Cell;

use super::adaptive::{self, Bounds, State};
use super::calendar::Window;
use super::gcra::{self, Rate};
use super::reservation::Reserved;
use super::slide::{self, Counts};
use super::stored::{Change, Stored, Value};
use super::window;

/// The instant a call is decided at, in Unix ms and in Unix ns (GCRA's resolution).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At {
    pub ms: i64,
    pub ns: i64,
}

/// One call decided on its key, its reply and its write in one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision<V> {
    pub allowed: bool,
    /// What the call counted: its cost, with PARTIAL maybe fewer, 0 when denied or only looking;
    /// a give-back's what it gave back (GCRA's) or its cost.
    pub granted: i64,
    /// The write, with the key's expiry in the same step.
    pub change: Option<Change<V>>,
    /// The reply's numbers: the first `len`.
    pub numbers: [i64; 6],
    pub len: usize,
}

impl<V> Decision<V> {
    pub fn numbers(&self) -> &[i64] {
        &self.numbers[..self.len]
    }
}

/// A limiter call's algorithm, its arguments parsed: what it decides on the value its key holds.
pub trait Algorithm {
    /// What its key stores.
    type Value: Value;

    /// What the call takes: above 0 it asks, below 0 it gives back, 0 only looks (CL.THROTTLE's
    /// quantity 0).
    fn cost(&self) -> i64;

    /// The call decided on `stored` at `at`; `None` where it is refused with nothing written
    /// (`REFUSED`).
    fn decide(&self, stored: Stored<Self::Value>, at: At) -> Option<Decision<Self::Value>>;

    /// A call its limit denied, admitted anyway (shadow mode): its cost counted whatever the
    /// limit; `None` where it cannot be (a count past 2^63).
    fn admit_anyway(&self, stored: Stored<Self::Value>, at: At) -> Option<Decision<Self::Value>>;

    /// With RESERVE, the reservation of an admitted decision (`None` for a denied one).
    fn reserved(&self, stored: Stored<Self::Value>, decided: &Decision<Self::Value>) -> Option<Reserved<'_>>;

    /// The error of a call `decide` refuses.
    const REFUSED: &'static str = "ERR the call cannot be decided";
}

/// HIT's call on one counter: its limit at the call, its window as a reservation records it.
pub struct Fixed<'z> {
    pub limit: window::Limit,
    pub window: Window,
    /// A calendar window's zone as TZ takes it (empty: UTC), for the reservation.
    pub zone: &'z [u8],
    pub partial: bool,
}

impl Fixed<'_> {
    /// HIT's reply: `[allowed, count, remaining, reset_ms]`, with PARTIAL the hits granted.
    fn decision(&self, o: window::Outcome, granted: i64) -> Decision<i64> {
        let numbers = [i64::from(o.allowed), o.count, o.remaining, o.reset_ms, granted, 0];
        Decision { allowed: o.allowed, granted, change: o.change, numbers, len: if self.partial { 5 } else { 4 } }
    }
}

impl Algorithm for Fixed<'_> {
    type Value = i64;

    fn cost(&self) -> i64 {
        self.limit.cost
    }

    fn decide(&self, counter: Stored, at: At) -> Option<Decision<i64>> {
        let (o, granted) = match self.partial {
            true => window::decide_partial(&self.limit, counter, at.ms),
            false => {
                let o = window::decide(&self.limit, counter, at.ms);
                (o, if o.allowed { self.limit.cost } else { 0 })
            }
        };
        Some(self.decision(o, granted))
    }

    fn admit_anyway(&self, counter: Stored, at: At) -> Option<Decision<i64>> {
        window::admit_anyway(&self.limit, counter, at.ms).map(|o| self.decision(o, self.limit.cost))
    }

    fn reserved(&self, counter: Stored, d: &Decision<i64>) -> Option<Reserved<'_>> {
        let window_end_ms = counter.expiry_after(d.change).filter(|_| d.allowed)?;
        let (limit, window, zone, amount) = (self.limit.limit, self.window, self.zone, d.granted);
        Some(Reserved::Hit { limit, window, zone, window_end_ms, amount })
    }
}

/// SLIDE's call on one sliding window.
pub struct Sliding {
    pub limit: window::Limit,
    pub partial: bool,
}

impl Sliding {
    /// SLIDE's reply: `[allowed, count, remaining, retry_after_ms, reset_ms]`, with PARTIAL the
    /// calls granted (PEEK's too).
    pub fn decision(&self, o: slide::Outcome, granted: i64) -> Decision<Counts> {
        let numbers = [i64::from(o.allowed), o.count, o.remaining, o.retry_after_ms, o.reset_ms, granted];
        Decision { allowed: o.allowed, granted, change: o.change, numbers, len: if self.partial { 6 } else { 5 } }
    }
}

impl Algorithm for Sliding {
    type Value = Counts;

    fn cost(&self) -> i64 {
        self.limit.cost
    }

    fn decide(&self, stored: Stored<Counts>, at: At) -> Option<Decision<Counts>> {
        let (o, granted) = match self.partial {
            true => slide::decide_partial(&self.limit, stored, at.ms),
            false => {
                let o = slide::decide(&self.limit, stored, at.ms);
                (o, if o.allowed { self.limit.cost } else { 0 })
            }
        };
        Some(self.decision(o, granted))
    }

    fn admit_anyway(&self, stored: Stored<Counts>, at: At) -> Option<Decision<Counts>> {
        slide::admit_anyway(&self.limit, stored, at.ms).map(|o| self.decision(o, self.limit.cost))
    }

    /// An admitted call stores its counts: the window it counted in is theirs.
    fn reserved(&self, _: Stored<Counts>, d: &Decision<Counts>) -> Option<Reserved<'_>> {
        match d.change {
            Some(Change::Set { value, .. }) if d.allowed => Some(Reserved::Slide {
                limit: self.limit.limit,
                window_ms: self.limit.window_ms,
                start_ms: value.start_ms,
                amount: d.granted,
            }),
            _ => None,
        }
    }
}

/// GCRA's call on one bucket, or CL.THROTTLE's.
pub struct Bucket {
    pub rate: Rate,
    /// ALIGN's period: tokens come back at its boundaries.
    pub align_ns: Option<i64>,
    pub reply: BucketReply,
}

/// How a bucket's call decides and replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BucketReply {
    /// RATELIMIT.GCRA's: `[limited, capacity, remaining, retry_after_ms, full_after_ms]`, with
    /// PARTIAL the tokens granted.
    Gcra { partial: bool },
    /// CL.THROTTLE's: the same in whole seconds, truncated as redis-cell truncates them, and
    /// redis-cell's arithmetic for a give-back.
    Cell,
}

const NS_PER_S: i64 = 1_000_000_000;

impl Bucket {
    /// `decide` at the call's instant, or with ALIGN at the period's boundary just passed.
    fn on_clock(&self, bucket: Stored, at: At, decide: impl Fn(i64) -> Option<gcra::Outcome>) -> Option<gcra::Outcome> {
        match self.align_ns {
            None => decide(at.ns),
            Some(period_ns) => gcra::on_boundaries(period_ns, bucket, at.ns, at.ms, decide),
        }
    }

    fn decision(&self, o: gcra::Outcome) -> Decision<i64> {
        let (limited, capacity, remaining) = (i64::from(o.limited), self.rate.capacity, o.remaining);
        let (numbers, len) = match self.reply {
            BucketReply::Gcra { partial } => (
                [limited, capacity, remaining, o.retry_after_ms(), o.full_after_ms(), o.taken],
                if partial { 6 } else { 5 },
            ),
            BucketReply::Cell => {
                let retry_after_s = o.retry_after_ns.map_or(-1, |ns| ns / NS_PER_S);
                ([limited, capacity, remaining, retry_after_s, o.full_after_ns / NS_PER_S, 0], 5)
            }
        };
        Decision { allowed: !o.limited, granted: o.taken, change: o.change, numbers, len }
    }
}

impl Algorithm for Bucket {
    type Value = i64;

    fn cost(&self) -> i64 {
        self.rate.tokens
    }

    fn decide(&self, bucket: Stored, at: At) -> Option<Decision<i64>> {
        let rate = &self.rate;
        let o = self.on_clock(bucket, at, |ns| match self.reply {
            BucketReply::Gcra { partial: true } => Some(gcra::decide_partial(rate, bucket, ns, at.ms)),
            BucketReply::Gcra { partial: false } => Some(gcra::decide(rate, bucket, ns, at.ms)),
            BucketReply::Cell => gcra::decide_cell(rate, bucket, ns, at.ms),
        })?;
        Some(self.decision(o))
    }

    fn admit_anyway(&self, bucket: Stored, at: At) -> Option<Decision<i64>> {
        let o = self.on_clock(bucket, at, |ns| gcra::admit_anyway(&self.rate, bucket, ns, at.ms))?;
        Some(self.decision(o))
    }

    /// Of the tokens granted (all of them but with PARTIAL).
    fn reserved(&self, _: Stored, d: &Decision<i64>) -> Option<Reserved<'_>> {
        let (capacity, emission_ns) = (self.rate.capacity, self.rate.emission_ns);
        d.allowed.then_some(Reserved::Gcra { capacity, emission_ns, amount: d.granted })
    }

    /// CL.THROTTLE's give-back that redis-cell fails on (see `gcra::decide_cell`).
    const REFUSED: &'static str =
        "ERR quantity gives back more than the bucket holds (redis-cell 0.2.2 fails here too, and leaves the key without TTL)";
}

/// ADAPT's call on one adaptive limit.
pub struct Adaptive {
    pub bounds: Bounds,
    pub cost: i64,
    pub partial: bool,
    /// The caller is back for the turn a denial gave it (`TURN`).
    pub turn: bool,
    /// Whether the call ended an epoch that earned a higher limit (INFO counts the increases).
    pub increased: Cell<bool>,
}

impl Adaptive {
    /// ADAPT's reply: `[allowed, limit, remaining, retry_after_ms, reset_ms]`, with PARTIAL the
    /// tokens granted. The whole state is written with its expiry, denied or not: the call may
    /// have ended an epoch and refilled the bucket.
    fn decision(&self, d: adaptive::Decided) -> Decision<State> {
        self.increased.set(d.increased);
        let numbers = [i64::from(d.allowed), d.limit, d.remaining, d.retry_after_ms, d.reset_ms, d.granted];
        let change = Some(adaptive::change(d.state, d.expires_at));
        Decision { allowed: d.allowed, granted: d.granted, change, numbers, len: if self.partial { 6 } else { 5 } }
    }
}

impl Algorithm for Adaptive {
    type Value = State;

    fn cost(&self) -> i64 {
        self.cost
    }

    fn decide(&self, stored: Stored<State>, at: At) -> Option<Decision<State>> {
        Some(self.decision(adaptive::decide(&self.bounds, self.cost, self.partial, self.turn, stored, at.ms)))
    }

    fn admit_anyway(&self, stored: Stored<State>, at: At) -> Option<Decision<State>> {
        Some(self.decision(adaptive::admit_anyway(&self.bounds, self.cost, stored, at.ms)))
    }

    /// An admitted call's tokens, in the epoch the call counted them in.
    fn reserved(&self, _: Stored<State>, d: &Decision<State>) -> Option<Reserved<'_>> {
        match d.change {
            Some(Change::Set { value, .. }) if d.allowed => {
                Some(Reserved::Adapt { bounds: self.bounds, epoch_start_ms: value.epoch_start, amount: d.granted })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::slide::Counts;

    const AT: At = At { ms: 1_000, ns: 1_000_000_000 };

    fn fixed(limit: i64, cost: i64, partial: bool) -> Fixed<'static> {
        let l = window::Limit { limit, window_ms: 60_000, cost };
        Fixed { limit: l, window: Window::Rolling(60_000), zone: b"", partial }
    }

    #[test]
    fn a_fixed_window_replies_as_hit_and_reserves_its_window() {
        let one = fixed(2, 1, false);
        assert_eq!(one.cost(), 1);
        let d = one.decide(Stored::Missing, AT).unwrap();
        assert_eq!((d.allowed, d.granted, d.numbers()), (true, 1, &[1, 1, 1, 60_000][..]));
        let r = one.reserved(Stored::Missing, &d);
        assert!(matches!(r, Some(Reserved::Hit { window_end_ms: 61_000, amount: 1, limit: 2, .. })), "{r:?}");
        let full = Stored::Present { value: 2, expires_at: Some(50_000) };
        let d = fixed(2, 1, false).decide(full, AT).unwrap();
        assert_eq!((d.allowed, d.granted, d.numbers()), (false, 0, &[0, 2, 0, 49_000][..]));
        assert_eq!(fixed(2, 1, false).reserved(full, &d), None);
        let anyway = fixed(2, 1, false).admit_anyway(full, AT).unwrap();
        assert_eq!((anyway.allowed, anyway.granted, anyway.numbers()), (true, 1, &[1, 3, 0, 49_000][..]));
        let d = fixed(2, 5, true).decide(Stored::Missing, AT).unwrap();
        assert_eq!((d.granted, d.numbers()), (2, &[1, 2, 0, 60_000, 2][..]));
    }

    #[test]
    fn a_sliding_window_replies_as_slide_and_reserves_its_window() {
        let sliding = |partial| Sliding { limit: window::Limit { limit: 2, window_ms: 1_000, cost: 3 }, partial };
        let up_to = sliding(true);
        let d = up_to.decide(Stored::Missing, AT).unwrap();
        assert_eq!((d.allowed, d.granted, d.len), (true, 2, 6));
        assert_eq!(d.numbers()[..3], [1, 2, 0]);
        let r = up_to.reserved(Stored::Missing, &d);
        assert!(matches!(r, Some(Reserved::Slide { start_ms: 1_000, amount: 2, .. })), "{r:?}");
        let d = sliding(false).decide(Stored::<Counts>::Missing, AT).unwrap();
        assert_eq!((d.allowed, d.granted, d.len, d.numbers()[0]), (false, 0, 5, 0));
        assert_eq!(sliding(false).reserved(Stored::Missing, &d), None);
    }

    #[test]
    fn a_bucket_replies_as_gcra_or_as_redis_cell() {
        let rate = Rate::new(1, 1_000_000_000, 1).unwrap();
        let gcra = Bucket { rate, align_ns: None, reply: BucketReply::Gcra { partial: false } };
        let d = gcra.decide(Stored::Missing, AT).unwrap();
        assert_eq!((d.allowed, d.granted, d.numbers()), (true, 1, &[0, 2, 1, -1, 1_000][..]));
        let r = gcra.reserved(Stored::Missing, &d);
        assert!(matches!(r, Some(Reserved::Gcra { capacity: 2, amount: 1, .. })), "{r:?}");
        let cell = Bucket { reply: BucketReply::Cell, ..gcra };
        let d = cell.decide(Stored::Missing, AT).unwrap();
        assert_eq!(d.numbers(), [0, 2, 1, -1, 1]);
        let emptied = Stored::Present { value: 3_000_000_000, expires_at: Some(3_000) };
        let limited = gcra.decide(emptied, AT).unwrap();
        assert_eq!((limited.allowed, limited.numbers()[3]), (false, 1_000));
        assert!(gcra.admit_anyway(emptied, AT).unwrap().allowed);
        // redis-cell's give-back on a bucket whose TAT is 2 ms or more before now.
        let back = Bucket { rate: Rate::new(1, 1_000_000_000, -1).unwrap(), ..cell };
        assert_eq!(back.decide(Stored::Present { value: 0, expires_at: Some(500) }, AT), None);
        assert!(Bucket::REFUSED.starts_with("ERR quantity gives back more"));
        assert_eq!(<Sliding as Algorithm>::REFUSED, "ERR the call cannot be decided");
    }

    #[test]
    fn an_adaptive_limit_replies_as_adapt_and_always_writes_its_state() {
        let bounds = adaptive::Bounds { floor: 1, start: 6, ceiling: 60, window_ms: 60_000 };
        let limit = |partial| Adaptive { bounds, cost: 2, partial, turn: false, increased: Cell::new(false) };
        let d = limit(false).decide(Stored::Missing, AT).unwrap();
        // Above the burst (1 of 6): admitted on a full bucket, leaving a token's debt.
        assert_eq!((d.allowed, d.granted, d.numbers()), (true, 2, &[1, 6, 0, -1, 20_000][..]));
        assert!(matches!(d.change, Some(Change::Set { expires_at: 601_000, .. })), "{:?}", d.change);
        let Some(Change::Set { value, expires_at }) = d.change else { unreachable!() };
        let full = Stored::Present { value, expires_at: Some(expires_at) };
        let denied = limit(true).decide(full, AT).unwrap();
        assert_eq!((denied.allowed, denied.len, denied.numbers()[3]), (false, 6, 20_000));
        assert!(denied.change.is_some());
        assert!(limit(false).admit_anyway(full, AT).unwrap().allowed);
        let one = limit(false);
        assert_eq!(
            one.reserved(Stored::Missing, &d),
            Some(Reserved::Adapt { bounds, epoch_start_ms: AT.ms, amount: 2 })
        );
        assert_eq!(limit(true).reserved(full, &denied), None);
        assert!(!limit(false).increased.get());
    }
}
