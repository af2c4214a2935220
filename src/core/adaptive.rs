//! The adaptive limit: a limit the whole fleet learns from its provider's answers, with no Redis in
//! it. `RATELIMIT.ADAPT` decides a call against it; `RATELIMIT.REPORT` tells it how the provider
//! answered.
//!
//! Admission is a token bucket at the learned rate: `limit` tokens per window, holding at most a
//! sixth of a window's (`BURST_DIVISOR`: a per-minute limit admits at most 10 s of it at once, as
//! Azure counts), so that the fleet's calls reach the provider paced, not in one burst at a
//! window's start. A call costing more than the burst is admitted on a full bucket and leaves a
//! debt. Every quantity is an integer scaled by the window in ms (a token is `window_ms` units, and
//! `limit` units come back each ms), below 2^53: the Functions library computes the same in Lua's
//! doubles.
//!
//! The controller works in epochs of a sixth of the window (`EPOCHS_PER_WINDOW`: 10 s for a
//! per-minute limit), fleet-wide, since the state is one key:
//! - a throttle (`Outcome::Throttled`, or the provider stating nothing remains) cuts the limit to
//!   `DECREASE_TENTHS` of itself at most once per epoch, however many callers saw the same burst,
//!   and empties the bucket; where the provider states no remaining, a `Throttled` call decided
//!   after that cut (its report's `AGE` says when) cuts again: the cut was not enough, and the
//!   provider, drawing on what it had stored, hid it until then (a stated remaining bounds the
//!   fleet instead: there, more cuts only starved it);
//! - a `RETRY` holds the whole fleet: nothing is admitted before that instant, and the bucket
//!   starts empty there: no stampede when it ends;
//! - an epoch earns growth when nothing cut it and the fleet used at least half the limit's share
//!   of it; the limit then follows CUBIC's curve in earned epochs since the last cut,
//!   `wmax * (1 + (1 - 0.7) * ((t - K) / K)^3)` with `K = 4` epochs (back to `wmax` four earned
//!   epochs after a cut, level there, then probing beyond it ever faster), and where the
//!   provider states a higher limit, at least half the way to it; never above twice the rate the
//!   epoch admitted, nor above the ceiling or the provider's stated limit;
//! - the provider's stated limit caps the learned one; its stated remaining bounds what the fleet
//!   may still take until the provider's next token comes back (its reset over what it lacks of its
//!   stated limit), its reset, or the epoch's end, whichever is first: the next answer says more.

use crate::core::decimal::{format_i64, parse_i64, MAX_LEN};
use crate::core::stored::{Change, Stored, Value, MAX_TEXT};

/// The burst: a sixth of a window's limit.
pub const BURST_DIVISOR: i64 = 6;
/// A cut leaves 7 tenths of the limit (AWS's CUBIC beta, 0.7).
pub const DECREASE_TENTHS: i64 = 7;
/// Epochs in a window.
pub const EPOCHS_PER_WINDOW: i64 = 6;
/// Epochs from a cut back to the limit it cut (CUBIC's K).
pub const RECOVERY_EPOCHS: i64 = 4;
/// Earned epochs counted at most: the curve is 7 times `wmax` there (its arithmetic within
/// 2^53), and `wmax` follows the limit from there on.
const MAX_EARNED: i64 = RECOVERY_EPOCHS + 11;
/// The bound on `ceiling * window_ms`, `cost * window_ms`, and every time and count: every sum
/// and product below stays under 2^53.
pub const MAX_SCALED: i64 = 1 << 50;
/// The bound on a window, a RETRY and a RESET, in ms (about 35 years).
pub const MAX_SPAN_MS: i64 = 1 << 40;
/// An idle state is forgotten after this many windows without a call.
const KEPT_WINDOWS: i64 = 10;

const TAG: &[u8] = b"adapt:";

/// The bounds and window a call of `RATELIMIT.ADAPT` gives: `floor <= start <= ceiling`,
/// `ceiling * window_ms <= MAX_SCALED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub floor: i64,
    pub start: i64,
    pub ceiling: i64,
    pub window_ms: i64,
}

/// What an adaptive key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State {
    pub window_ms: i64,
    /// The bounds of the last ADAPT call: the learned limit stays within them.
    pub floor: i64,
    pub ceiling: i64,
    /// The learned limit, per window.
    pub limit: i64,
    /// The limit the last cut cut (CUBIC's W_max).
    pub wmax: i64,
    /// Epochs that earned growth since the last cut.
    pub earned: i64,
    pub epoch_start: i64,
    /// Tokens admitted in this epoch.
    pub used: i64,
    /// Whether a throttle cut the limit in this epoch.
    pub cut: bool,
    /// When it did (Unix ms): a throttle on a call decided after it cuts again (no remaining stated).
    pub cut_at: i64,
    /// Tokens in the bucket, scaled by `window_ms`; negative: a debt.
    pub level: i64,
    /// When `level` was counted (Unix ms); after now while the fleet is held.
    pub at: i64,
    /// What the provider said remains (-1: nothing said), until `bound_until`.
    pub bound_left: i64,
    pub bound_until: i64,
    /// The provider's stated limit (0: none stated).
    pub stated: i64,
    /// When the last denied caller was told to come back, plus its tokens' time: the next one
    /// is told to come after it, so that a denied fleet comes back one by one, not all at once.
    pub queue_until: i64,
}

impl Value for State {
    const INVALID: &'static str = "ERR value is not a ratelimit adaptive limit";

    fn parse(text: &[u8]) -> Option<State> {
        let mut fields = text.strip_prefix(TAG)?.split(|&b| b == b':');
        let mut f = [0; FIELDS];
        let mut n = 0;
        for slot in &mut f {
            let Some(field) = fields.next() else { break };
            *slot = parse_i64(field)?;
            n += 1;
        }
        if fields.next().is_some() {
            return None;
        }
        let [window_ms, floor, ceiling, limit, wmax, earned, epoch_start, used, cut, level, at, bound_left, bound_until, stated, queue_until, cut_at] =
            f;
        // A state written before the cut's time was kept (15 fields): a cut in its epoch counts as
        // made at its end, so that nothing decided in it cuts again.
        let cut_at = match n {
            FIELDS => cut_at,
            OLD_FIELDS if cut == 1 => MAX_SCALED,
            OLD_FIELDS => 0,
            _ => return None,
        };
        let s = State {
            window_ms,
            floor,
            ceiling,
            limit,
            wmax,
            earned,
            epoch_start,
            used,
            cut: cut == 1,
            cut_at,
            level,
            at,
            bound_left,
            bound_until,
            stated,
            queue_until,
        };
        let time = 0..=MAX_SCALED;
        let valid = (1..=MAX_SPAN_MS).contains(&window_ms)
            && 1 <= floor
            && floor <= limit
            && limit <= ceiling
            && ceiling <= MAX_SCALED / window_ms
            && (1..=MAX_SCALED).contains(&wmax)
            && (0..=MAX_EARNED).contains(&earned)
            && (0..=MAX_SCALED).contains(&used)
            && (0..=1).contains(&cut)
            && (-MAX_SCALED..=MAX_SCALED).contains(&level)
            && (-1..=MAX_SCALED).contains(&bound_left)
            && (0..=MAX_SCALED).contains(&stated)
            && [epoch_start, at, bound_until, queue_until, cut_at].iter().all(|t| time.contains(t));
        valid.then_some(s)
    }

    fn write(self, buf: &mut [u8; MAX_TEXT]) -> &[u8] {
        buf[..TAG.len()].copy_from_slice(TAG);
        let mut len = TAG.len();
        for (i, field) in self.fields().into_iter().enumerate() {
            if i > 0 {
                buf[len] = b':';
                len += 1;
            }
            let mut digits = [0; MAX_LEN];
            let text = format_i64(field, &mut digits);
            buf[len..len + text.len()].copy_from_slice(text);
            len += text.len();
        }
        &buf[..len]
    }
}

const FIELDS: usize = 16;
/// The fields of a state written before `cut_at` was kept.
const OLD_FIELDS: usize = 15;

/// How the provider answered a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// A 429, a 503, or a timeout the caller counts as one.
    Throttled,
}

/// `RATELIMIT.REPORT`'s arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    pub outcome: Outcome,
    /// The provider's Retry-After, in ms (only with `Throttled`).
    pub retry_ms: Option<i64>,
    /// The provider's stated limit per window.
    pub limit: Option<i64>,
    /// The provider's stated remaining, and in how many ms it resets.
    pub remaining: Option<(i64, i64)>,
    /// How many ms ago the reported call was decided (its ADAPT's reply).
    pub age_ms: Option<i64>,
}

/// A call decided: its reply's numbers and the state to store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decided {
    pub allowed: bool,
    /// Tokens taken: the cost, with PARTIAL maybe fewer, 0 when denied.
    pub granted: i64,
    pub limit: i64,
    /// Whole tokens the fleet may still take now.
    pub remaining: i64,
    /// -1 when admitted; else the ms until the same call would be.
    pub retry_after_ms: i64,
    /// The ms until the bucket is full.
    pub reset_ms: i64,
    /// The epoch that ended with this call earned a higher limit.
    pub increased: bool,
    pub state: State,
    pub expires_at: i64,
}

/// A report applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reported {
    pub limit: i64,
    /// This report cut the limit.
    pub decreased: bool,
    /// This report held the fleet (or held it longer).
    pub held: bool,
    /// The epoch that ended with this call earned a higher limit.
    pub increased: bool,
    /// The ms until the fleet may go on; 0 when not held.
    pub hold_ms: i64,
    pub state: State,
    pub expires_at: i64,
}

/// `a / b` rounded up, for `a >= 0`, `b >= 1`.
fn ceil_div(a: i64, b: i64) -> i64 {
    a / b + i64::from(a % b != 0)
}

impl State {
    fn fields(&self) -> [i64; FIELDS] {
        [
            self.window_ms,
            self.floor,
            self.ceiling,
            self.limit,
            self.wmax,
            self.earned,
            self.epoch_start,
            self.used,
            i64::from(self.cut),
            self.level,
            self.at,
            self.bound_left,
            self.bound_until,
            self.stated,
            self.queue_until,
            self.cut_at,
        ]
    }

    /// A new limit at `start`, its bucket full, as if it had just recovered to `start`: the next
    /// earned epoch probes above it.
    fn new(b: &Bounds, now: i64) -> State {
        let mut s = State {
            window_ms: b.window_ms,
            floor: b.floor,
            ceiling: b.ceiling,
            limit: b.start,
            wmax: b.start,
            earned: RECOVERY_EPOCHS,
            epoch_start: now,
            used: 0,
            cut: false,
            cut_at: 0,
            level: 0,
            at: now,
            bound_left: -1,
            bound_until: 0,
            stated: 0,
            queue_until: 0,
        };
        s.level = s.capacity();
        s
    }

    /// The bucket's size, scaled.
    fn capacity(&self) -> i64 {
        (self.limit / BURST_DIVISOR).max(1) * self.window_ms
    }

    /// The highest the limit may be: the ceiling, or the provider's stated limit below it.
    fn cap(&self) -> i64 {
        match self.stated {
            0 => self.ceiling,
            stated => self.ceiling.min(stated).max(self.floor),
        }
    }

    /// CUBIC's limit after `earned` epochs since the cut from `wmax`, at least 1.
    fn cubic(&self) -> i64 {
        let d = self.earned - RECOVERY_EPOCHS;
        // wmax * 0.3 * d^3 / 64, floored (the library splits wmax by 640 to stay under 2^53).
        let delta = (i128::from(self.wmax) * 3 * i128::from(d * d * d)).div_euclid(640);
        (i128::from(self.wmax) + delta).clamp(1, i128::from(MAX_SCALED)) as i64
    }

    fn epoch_ms(&self) -> i64 {
        (self.window_ms / EPOCHS_PER_WINDOW).max(1)
    }

    /// Ends the epochs that `now` is past: the one that ran earns growth when nothing cut it and
    /// the fleet used at least half the limit's share of it. Returns whether the limit grew.
    fn roll(&mut self, now: i64) -> bool {
        let e = self.epoch_ms();
        if now < self.epoch_start + e {
            return false;
        }
        let before = self.limit;
        // The epoch's use at the window's rate (at most 2^50 * 6: within 2^53).
        let rate = self.used * EPOCHS_PER_WINDOW;
        if !self.cut && rate * 2 >= self.limit {
            self.earned = (self.earned + 1).min(MAX_EARNED);
            let steered = match self.stated > self.limit {
                true => self.limit + (self.stated - self.limit) / 2,
                false => 0,
            };
            let grown = self.cubic().max(steered).min(rate * 2).min(self.cap());
            self.limit = self.limit.max(grown);
            // At the curve's end, it starts again from here: growth is then twice the rate.
            if self.earned == MAX_EARNED {
                self.wmax = self.limit;
            }
        }
        self.epoch_start += (now - self.epoch_start) / e * e;
        self.used = 0;
        self.cut = false;
        self.level = self.level.min(self.capacity());
        self.limit > before
    }

    /// The bucket refilled up to `now` (not while the fleet is held).
    fn refill(&mut self, now: i64) {
        if now <= self.at {
            return;
        }
        let full = self.capacity();
        if self.level >= full || now - self.at >= ceil_div(full - self.level, self.limit) {
            self.level = full;
        } else {
            self.level += (now - self.at) * self.limit;
        }
        self.at = now;
    }

    /// The limit within the bounds of a call (an ADAPT's, or the stored ones).
    fn bounded(&mut self) {
        self.limit = self.limit.clamp(self.floor, self.cap());
        self.wmax = self.wmax.min(self.cap()).max(1);
        self.level = self.level.min(self.capacity());
    }

    /// What the provider's stated remaining still lets through at `now`.
    fn bound_at(&self, now: i64) -> Option<i64> {
        (self.bound_left >= 0 && now < self.bound_until).then_some(self.bound_left)
    }

    /// Whole tokens the fleet may take at `now`: none while it is held, and no more than the
    /// provider's stated remaining.
    fn whole(&self, now: i64) -> i64 {
        let whole = match now < self.at {
            true => 0,
            false => (self.level / self.window_ms).max(0),
        };
        self.bound_at(now).map_or(whole, |left| whole.min(left))
    }

    /// The ms from `now` until `level` holds `need` (scaled).
    fn wait_for(&self, need: i64, now: i64) -> i64 {
        let from = self.at.max(now) - now;
        from + ceil_div((need - self.level).max(0), self.limit)
    }

    /// When the state may be forgotten: `KEPT_WINDOWS` after its last call, its hold, its bound, or
    /// its last denied caller's turn.
    fn expiry(&self, now: i64) -> i64 {
        self.at.max(now).max(self.bound_until).max(self.queue_until) + KEPT_WINDOWS * self.window_ms
    }
}

/// `RATELIMIT.ADAPT`'s call of `cost` (with `partial`, as many as the bucket has, at least one)
/// on `stored` at `now` (Unix ms). With `turn`, the caller comes back at the turn a denial gave
/// it, and is admitted on a bucket not in debt.
pub fn decide(b: &Bounds, cost: i64, partial: bool, turn: bool, stored: Stored<State>, now: i64) -> Decided {
    decide_or_admit(b, cost, partial, stored, now, Admission::Decided { turn })
}

/// A call the limit denied, admitted anyway (shadow mode): its cost taken whatever the bucket.
pub fn admit_anyway(b: &Bounds, cost: i64, stored: Stored<State>, now: i64) -> Decided {
    decide_or_admit(b, cost, false, stored, now, Admission::Anyway)
}

#[derive(Clone, Copy)]
enum Admission {
    Decided { turn: bool },
    Anyway,
}

fn decide_or_admit(b: &Bounds, cost: i64, partial: bool, stored: Stored<State>, now: i64, how: Admission) -> Decided {
    let mut s = match stored {
        Stored::Present { value, .. } if value.window_ms == b.window_ms => value,
        _ => State::new(b, now),
    };
    (s.floor, s.ceiling) = (b.floor, b.ceiling);
    s.bounded();
    let increased = s.roll(now);
    s.refill(now);
    let w = s.window_ms;
    let burst = s.capacity() / w;
    let bound = s.bound_at(now);
    let whole = s.whole(now);
    // Back at its turn, a caller is admitted on a bucket not in debt: if someone not waiting took
    // the token it was told to come for, it takes it from the next one (a debt of at most its
    // own tokens), and the line keeps its order instead of each next turn arriving before its
    // token.
    let turn = matches!(how, Admission::Decided { turn: true }) && s.level >= 0 && now >= s.at;
    let granted = if matches!(how, Admission::Anyway) {
        cost
    } else if partial {
        if whole >= 1 {
            cost.min(whole)
        } else if turn && bound.is_none_or(|left| left >= 1) {
            1
        } else {
            0
        }
    } else {
        let fits = (s.level >= cost.min(burst) * w || turn) && now >= s.at;
        match fits && bound.is_none_or(|left| cost <= left) {
            true => cost,
            false => 0,
        }
    };
    let allowed = granted > 0;
    let retry_after_ms = if allowed {
        -1
    } else {
        let need = if partial { 1 } else { cost.min(burst) };
        let bucket = s.wait_for(need * w, now);
        let provider = match bound {
            Some(left) if left < if partial { 1 } else { cost } => s.bound_until - now,
            _ => 0,
        };
        // After those told to come back before it, then its tokens' time for the next one; the
        // line never reaches past the state's keeping (however many are denied, the numbers
        // stay bounded).
        let retry = bucket.max(provider).max(s.queue_until - now);
        s.queue_until = (now + retry + ceil_div(need * w, s.limit)).min(now + KEPT_WINDOWS * w);
        retry
    };
    if allowed {
        s.level = (s.level - granted * w).max(-MAX_SCALED);
        s.used = (s.used + granted).min(MAX_SCALED);
        if bound.is_some() {
            s.bound_left = (s.bound_left - granted).max(0);
        }
    }
    let remaining = s.whole(now);
    let reset_ms = s.wait_for(s.capacity(), now);
    Decided {
        allowed,
        granted,
        limit: s.limit,
        remaining,
        retry_after_ms,
        reset_ms,
        increased,
        expires_at: s.expiry(now),
        state: s,
    }
}

/// `RATELIMIT.REPORT`'s report on `stored` at `now`; `None` for a missing key (nothing to steer).
pub fn report(r: &Report, stored: Stored<State>, now: i64) -> Option<Reported> {
    let Stored::Present { value: mut s, .. } = stored else {
        return None;
    };
    let increased = s.roll(now);
    s.refill(now);
    if let Some(stated) = r.limit {
        s.stated = stated;
        s.bounded();
    }
    if let Some((left, reset_ms)) = r.remaining {
        // Until the provider's next token (it refills to its stated limit by the reset), the
        // reset, or the epoch's end: whichever is first; the next answer says more.
        let next_token = match s.stated > left {
            true => ceil_div(reset_ms, s.stated - left),
            false => reset_ms,
        };
        (s.bound_left, s.bound_until) = (left, now + reset_ms.min(s.epoch_ms()).min(next_token));
    }
    let mut decreased = false;
    let mut held = false;
    let spent = matches!(r.remaining, Some((0, _)));
    if r.outcome == Outcome::Throttled || spent {
        // Once per epoch for the burst that many saw; again for a call the last cut admitted and
        // a provider that states nothing throttled: one that states what remains bounds the fleet.
        let after_the_cut = r.outcome == Outcome::Throttled
            && r.remaining.is_none()
            && r.age_ms.is_some_and(|age| now - age > s.cut_at);
        if !s.cut || after_the_cut {
            s.wmax = s.limit;
            s.limit = (s.limit * DECREASE_TENTHS / 10).max(s.floor);
            s.earned = 0;
            (s.cut, s.cut_at) = (true, now);
            decreased = true;
        }
        s.level = s.level.min(0);
    }
    if r.outcome == Outcome::Throttled {
        if let Some(retry_ms) = r.retry_ms {
            let until = now + retry_ms;
            if until > s.at {
                (s.at, held) = (until, true);
            }
        }
    }
    Some(Reported {
        limit: s.limit,
        decreased,
        held,
        increased,
        hold_ms: (s.at - now).max(0),
        expires_at: s.expiry(now),
        state: s,
    })
}

/// A reservation of ADAPT settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    pub limit: i64,
    pub remaining: i64,
    pub reset_ms: i64,
    /// Tokens given back to the bucket (negative, the last maybe in part) or charged (positive).
    pub applied: i64,
    /// The epoch that ended with this call earned a higher limit.
    pub increased: bool,
    /// The state to store and its expiry; None when nothing is stored (a forgotten state and
    /// nothing to charge).
    pub write: Option<(State, i64)>,
}

/// The settle of `amount` tokens that ADAPT reserved on a limit of `b` in the epoch that started
/// at `epoch_start`, with `used` at `now`; None when the key's window is another than `b`'s.
///
/// The unused part goes back to the bucket, never past full, and never while the fleet is held
/// (the bucket starts empty when a hold ends); it leaves the epoch's use when it is still that
/// epoch, so that an estimate never earns growth the fleet did not use. More than reserved is
/// charged: a debt in the bucket, the epoch's use, the provider's stated remaining. A forgotten
/// state is started again, as ADAPT would, when there is something to charge.
pub fn settle_reserved(
    b: &Bounds,
    epoch_start: i64,
    amount: i64,
    used: i64,
    stored: Stored<State>,
    now: i64,
) -> Option<Settled> {
    let (mut s, present) = match stored {
        Stored::Present { value, .. } if value.window_ms != b.window_ms => return None,
        Stored::Present { value, .. } => (value, true),
        Stored::Missing => (State::new(b, now), false),
    };
    let increased = s.roll(now);
    s.refill(now);
    let w = s.window_ms;
    let applied = match used - amount {
        more if more > 0 => {
            s.level = s.level.saturating_sub(more.saturating_mul(w)).max(-MAX_SCALED);
            s.used = s.used.saturating_add(more).min(MAX_SCALED);
            if s.bound_at(now).is_some() {
                s.bound_left = (s.bound_left - more).max(0);
            }
            more
        }
        fewer if fewer < 0 => {
            let back = -fewer;
            if s.epoch_start == epoch_start {
                s.used = (s.used - back).max(0);
            }
            let room = match now < s.at {
                true => 0,
                false => (s.capacity() - s.level).max(0),
            };
            let given = back.saturating_mul(w).min(room);
            s.level += given;
            -ceil_div(given, w)
        }
        _ => 0,
    };
    Some(Settled {
        limit: s.limit,
        remaining: s.whole(now),
        reset_ms: s.wait_for(s.capacity(), now),
        applied,
        increased,
        write: (present || applied > 0).then(|| (s, s.expiry(now))),
    })
}

/// The write of a decided or reported state: the whole value with its expiry.
pub const fn change(state: State, expires_at: i64) -> Change<State> {
    Change::Set { value: state, expires_at }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_000;
    const MINUTE: Bounds = Bounds { floor: 6, start: 60, ceiling: 600, window_ms: 60_000 };

    fn stored(s: State) -> Stored<State> {
        Stored::Present { value: s, expires_at: Some(NOW + 600_000) }
    }

    fn throttled(retry_ms: Option<i64>) -> Report {
        Report { outcome: Outcome::Throttled, retry_ms, limit: None, remaining: None, age_ms: None }
    }

    /// `n` calls of 1 at `now`, the state carried: how many were admitted.
    fn calls(state: &mut Stored<State>, n: i64, now: i64) -> i64 {
        (0..n)
            .filter(|_| {
                let d = decide(&MINUTE, 1, false, false, *state, now);
                *state = stored(d.state);
                d.allowed
            })
            .count() as i64
    }

    #[test]
    fn a_new_limit_admits_its_burst_then_paces() {
        let d = decide(&MINUTE, 1, false, false, Stored::Missing, NOW);
        assert_eq!((d.allowed, d.limit, d.remaining, d.retry_after_ms, d.reset_ms), (true, 60, 9, -1, 1_000));
        let mut s = stored(d.state);
        assert_eq!(calls(&mut s, 20, NOW), 9);
        // The twelfth denied in a row: its turn comes after the eleven before it.
        let denied = decide(&MINUTE, 1, false, false, s, NOW);
        assert_eq!((denied.allowed, denied.remaining, denied.retry_after_ms), (false, 0, 12_000));
        // A token a second comes back: 60 a minute.
        assert_eq!(calls(&mut s, 5, NOW + 999), 0);
        assert_eq!(calls(&mut s, 5, NOW + 1_000), 1);
        assert_eq!(calls(&mut s, 100, NOW + 30_000), 10);
        assert_eq!(d.expires_at, NOW + 600_000);
    }

    #[test]
    fn denied_callers_are_told_to_come_back_one_by_one() {
        let mut s = stored(decide(&MINUTE, 10, false, false, Stored::Missing, NOW).state);
        let turns: Vec<i64> = (0..4)
            .map(|_| {
                let d = decide(&MINUTE, 1, false, false, s, NOW);
                s = stored(d.state);
                d.retry_after_ms
            })
            .collect();
        assert_eq!(turns, [1_000, 2_000, 3_000, 4_000]);
        // Each comes back at its turn and finds its token.
        for turn in [1_000, 2_000, 3_000, 4_000] {
            let d = decide(&MINUTE, 1, false, false, s, NOW + turn);
            assert!(d.allowed, "{turn}");
            s = stored(d.state);
        }
        // Once the turns have passed, a denied caller waits only for the bucket.
        assert_eq!(decide(&MINUTE, 1, false, false, s, NOW + 4_000).retry_after_ms, 1_000);
    }

    #[test]
    fn a_caller_back_at_its_turn_is_admitted_on_a_bucket_not_in_debt() {
        let mut s = stored(decide(&MINUTE, 10, false, false, Stored::Missing, NOW).state);
        for _ in 0..3 {
            s = stored(decide(&MINUTE, 1, false, false, s, NOW).state);
        }
        // Told 1 s, 2 s and 3 s; someone not waiting takes the first turn's token at 1 s.
        let taken = decide(&MINUTE, 1, false, false, s, NOW + 1_000);
        assert!(taken.allowed);
        // The first comes back 10 ms later: admitted all the same, in debt of what it lacked.
        let back = decide(&MINUTE, 1, false, true, stored(taken.state), NOW + 1_010);
        assert!(back.allowed);
        assert_eq!(back.state.level, 600 - 60_000);
        s = stored(back.state);
        // No one else is admitted on the debt: a caller not waiting joins the line's end (4 s),
        // and one saying it is back at its turn waits there too.
        assert_eq!(decide(&MINUTE, 1, false, false, s, NOW + 1_020).retry_after_ms, 2_980);
        assert_eq!(decide(&MINUTE, 1, false, true, s, NOW + 1_500).retry_after_ms, 2_500);
        // The next turns come as the debt is paid, each admitted on time.
        for turn in [2_000, 3_000] {
            let d = decide(&MINUTE, 1, false, true, s, NOW + turn);
            assert!(d.allowed, "{turn}");
            s = stored(d.state);
        }
        // With PARTIAL, a turn is granted one token on a bucket not in debt.
        let partial = decide(&MINUTE, 5, true, true, s, NOW + 4_000);
        assert_eq!((partial.allowed, partial.granted), (true, 1));
    }

    #[test]
    fn the_longest_state_is_written_whole() {
        // A window of 1 ms lets every count reach 2^50 (`ceiling * window <= 2^50`).
        let big = MAX_SCALED;
        let longest = State {
            window_ms: 1,
            floor: big,
            ceiling: big,
            limit: big,
            wmax: big,
            earned: MAX_EARNED,
            epoch_start: big,
            used: big,
            cut: true,
            cut_at: big,
            level: -big,
            at: big,
            bound_left: big,
            bound_until: big,
            stated: big,
            queue_until: big,
        };
        let mut buf = [0; MAX_TEXT];
        let text = longest.write(&mut buf);
        assert_eq!(text.len(), 234);
        assert_eq!(State::parse(text), Some(longest));
    }

    #[test]
    fn the_line_of_denied_callers_stays_within_the_states_keeping() {
        let huge = Bounds { floor: 1, start: 1, ceiling: 1, window_ms: MAX_SPAN_MS };
        let mut s = stored(decide(&huge, 1, false, false, Stored::Missing, NOW).state);
        for _ in 0..100 {
            let d = decide(&huge, 1, false, false, s, NOW);
            assert!(!d.allowed);
            s = stored(d.state);
        }
        let Stored::Present { value, .. } = s else { unreachable!() };
        assert_eq!(value.queue_until, NOW + KEPT_WINDOWS * MAX_SPAN_MS);
        assert_eq!(State::parse(value.write(&mut [0; MAX_TEXT])), Some(value));
    }

    #[test]
    fn a_call_above_the_burst_waits_for_a_full_bucket_and_leaves_a_debt() {
        let d = decide(&MINUTE, 30, false, false, Stored::Missing, NOW);
        assert!(d.allowed);
        assert_eq!((d.remaining, d.reset_ms), (0, 30_000));
        let again = decide(&MINUTE, 30, false, false, stored(d.state), NOW + 20_000);
        assert_eq!((again.allowed, again.retry_after_ms), (false, 10_000));
        let partial = decide(&MINUTE, 30, true, false, stored(d.state), NOW + 25_000);
        assert_eq!((partial.allowed, partial.granted), (true, 5));
    }

    #[test]
    fn a_throttle_cuts_once_per_epoch_whoever_reports_it() {
        let s = decide(&MINUTE, 1, false, false, Stored::Missing, NOW).state;
        let first = report(&throttled(None), stored(s), NOW + 10).unwrap();
        assert_eq!((first.limit, first.decreased, first.held), (42, true, false));
        let second = report(&throttled(None), stored(first.state), NOW + 20).unwrap();
        assert_eq!((second.limit, second.decreased), (42, false));
        // A call decided after the cut, and throttled, cuts again (the cut was not enough); one
        // decided before it is the burst already cut for.
        let before = Report { age_ms: Some(20), ..throttled(None) };
        assert!(!report(&before, stored(first.state), NOW + 30).unwrap().decreased);
        let after = Report { age_ms: Some(19), ..throttled(None) };
        let again = report(&after, stored(first.state), NOW + 30).unwrap();
        assert_eq!((again.limit, again.decreased, again.state.cut_at), (29, true, NOW + 30));
        assert!(!report(&before, stored(again.state), NOW + 40).unwrap().decreased);
        // Where the provider states what remains, its bound steers the fleet: once per epoch.
        let stating = Report { remaining: Some((3, 1_000)), ..after };
        assert!(!report(&stating, stored(first.state), NOW + 30).unwrap().decreased);
        // The next epoch may cut again, not below the floor.
        let mut state = second.state;
        for i in 1..20 {
            state = report(&throttled(None), stored(state), NOW + i * 60_000).unwrap().state;
        }
        assert_eq!(state.limit, MINUTE.floor);
        assert_eq!(report(&throttled(None), Stored::Missing, NOW), None);
    }

    #[test]
    fn a_hold_stops_the_fleet_and_no_stampede_follows_it() {
        let s = decide(&MINUTE, 1, false, false, Stored::Missing, NOW).state;
        let held = report(&throttled(Some(30_000)), stored(s), NOW).unwrap();
        assert_eq!((held.held, held.hold_ms, held.limit), (true, 30_000, 42));
        let mut state = stored(held.state);
        let d = decide(&MINUTE, 1, false, false, state, NOW + 29_999);
        assert_eq!((d.allowed, d.retry_after_ms), (false, 1 + 60_000 / 42 + 1));
        assert_eq!(calls(&mut state, 50, NOW + 29_999), 0);
        // From the hold's end the bucket fills from empty: its first epoch (10 s) takes at most
        // its share of 42 a minute, however many ask every second.
        let admitted: i64 = (0..10).map(|s| calls(&mut state, 50, NOW + 30_000 + s * 1_000)).sum();
        assert_eq!(admitted, 6);
        // A shorter Retry-After after it changes nothing.
        let later = report(&throttled(Some(1)), stored(held.state), NOW + 10).unwrap();
        assert_eq!((later.held, later.hold_ms), (false, 29_990));
    }

    #[test]
    fn growth_is_earned_by_use_and_follows_cubic_in_epochs() {
        let b = Bounds { floor: 1, start: 1_000, ceiling: 100_000, window_ms: 60_000 };
        let mut s = State::new(&b, NOW);
        let curve: Vec<i64> = [0, 1, 2, 3, 4, 5, 8, 10]
            .into_iter()
            .map(|t| {
                s.earned = t;
                s.cubic()
            })
            .collect();
        assert_eq!(curve, [700, 873, 962, 995, 1_000, 1_004, 1_300, 2_012]);
        // An epoch (10 s) that used less than half the limit's share (1000 / 6 / 2) earns nothing.
        let mut state = State::new(&b, NOW);
        state.used = 83;
        let d = decide(&b, 1, false, false, stored(state), NOW + 10_000);
        assert_eq!((d.limit, d.increased), (1_000, false));
        state.used = 84;
        let d = decide(&b, 1, false, false, stored(state), NOW + 10_000);
        assert_eq!((d.limit, d.increased, d.state.earned), (1_004, true, 5));
        // At most twice the rate admitted.
        state.stated = 3_000;
        assert_eq!(decide(&b, 1, false, false, stored(state), NOW + 10_000).limit, 1_008);
        // A stated limit above steers it half the way there.
        state.used = 200;
        assert_eq!(decide(&b, 1, false, false, stored(state), NOW + 10_000).limit, 2_000);
        // An epoch with a cut earns nothing; the ceiling caps.
        state.cut = true;
        assert_eq!(decide(&b, 1, false, false, stored(state), NOW + 10_000).limit, 1_000);
        state.cut = false;
        let low = Bounds { ceiling: 1_002, ..b };
        assert_eq!(decide(&low, 1, false, false, stored(state), NOW + 10_000).limit, 1_002);
    }

    #[test]
    fn the_providers_figures_cap_the_limit_and_bound_the_window() {
        let s = decide(&MINUTE, 1, false, false, Stored::Missing, NOW).state;
        let stated =
            Report { outcome: Outcome::Ok, retry_ms: None, limit: Some(30), remaining: Some((2, 5_000)), age_ms: None };
        let r = report(&stated, stored(s), NOW).unwrap();
        assert_eq!((r.limit, r.decreased, r.held), (30, false, false));
        let mut state = stored(r.state);
        assert_eq!(calls(&mut state, 2, NOW), 2);
        // Bound until the provider's next token: its 28 missing come back over 5 s, one in 179 ms.
        let d = decide(&MINUTE, 1, false, false, state, NOW);
        assert_eq!((d.allowed, d.retry_after_ms, d.remaining), (false, 179, 0));
        // Past it, the bucket's own pace: full again (5, a sixth of 30) 5 s later.
        assert_eq!(calls(&mut state, 10, NOW + 5_000), 5);
        // Nothing remaining cuts the limit, as a throttle would, before any 429; without a
        // stated limit, the bound holds to the reset or the epoch's end.
        let spent = Report { limit: None, remaining: Some((0, 60_000)), ..stated };
        let r = report(&spent, stored(s), NOW).unwrap();
        assert_eq!((r.limit, r.decreased), (42, true));
        let held = decide(&MINUTE, 1, false, false, stored(r.state), NOW + 9_999);
        assert_eq!((held.allowed, held.retry_after_ms), (false, 1));
        // A stated limit never takes it under the floor.
        let tiny = Report { limit: Some(1), ..stated };
        assert_eq!(report(&tiny, stored(s), NOW).unwrap().limit, MINUTE.floor);
    }

    #[test]
    fn shadow_mode_takes_the_cost_whatever_the_bucket() {
        let mut s = stored(decide(&MINUTE, 1, false, false, Stored::Missing, NOW).state);
        calls(&mut s, 20, NOW);
        let d = admit_anyway(&MINUTE, 5, s, NOW);
        assert!(d.allowed);
        assert_eq!(d.state.level, -5 * 60_000);
    }

    #[test]
    fn a_settle_gives_back_to_the_bucket_and_the_epoch_and_charges_the_rest() {
        // A reservation of the whole burst (10 of a 60-a-minute limit).
        let d = decide(&MINUTE, 10, false, false, Stored::Missing, NOW);
        let reserved = stored(d.state);
        let settled = |used, s, now| settle_reserved(&MINUTE, NOW, 10, used, s, now).unwrap();
        // 3 used: 7 back to the bucket and out of the epoch's use, which then earns no growth.
        let back = settled(3, reserved, NOW + 100);
        assert_eq!((back.applied, back.remaining, back.limit), (-7, 7, 60));
        let (state, expires_at) = back.write.unwrap();
        assert_eq!((state.used, expires_at), (3, NOW + 100 + 600_000));
        assert_eq!(decide(&MINUTE, 1, false, false, stored(state), NOW + 10_000).state.earned, RECOVERY_EPOCHS);
        assert_eq!(decide(&MINUTE, 1, false, false, reserved, NOW + 10_000).state.earned, RECOVERY_EPOCHS + 1);
        // Never past a full bucket; in a later epoch, the bucket only.
        assert_eq!(settled(0, reserved, NOW + 5_000).applied, -5);
        let later = settled(0, reserved, NOW + 10_000);
        assert_eq!((later.applied, later.write.unwrap().0.used), (0, 0));
        // 15 used: 5 more charged, a debt the next calls wait out.
        let more = settled(15, reserved, NOW + 100);
        assert_eq!((more.applied, more.remaining, more.write.unwrap().0.level), (5, 0, -5 * 60_000 + 100 * 60));
        // Nothing comes back while the fleet is held.
        let held = report(&throttled(Some(5_000)), reserved, NOW).unwrap();
        assert_eq!(settled(0, stored(held.state), NOW + 100).applied, 0);
        // A forgotten state: nothing to give back, nothing written; an overage starts it again.
        assert_eq!(settled(0, Stored::Missing, NOW).write, None);
        assert_eq!(settled(12, Stored::Missing, NOW).write.unwrap().0.used, 2);
        // Another window is another limit.
        let other = Bounds { window_ms: 1_000, ..MINUTE };
        assert_eq!(settle_reserved(&other, NOW, 10, 3, reserved, NOW), None);
    }

    #[test]
    fn a_stored_state_reads_back_and_junk_is_refused() {
        let d = decide(&MINUTE, 3, false, false, Stored::Missing, NOW);
        let mut buf = [0; MAX_TEXT];
        let text = d.state.write(&mut buf);
        assert_eq!(text, b"adapt:60000:6:600:60:60:4:1700000000000:3:0:420000:1700000000000:-1:0:0:0:0");
        assert_eq!(State::parse(text), Some(d.state));
        // A state of 15 fields (written before the cut's time was kept) reads back; a cut in its
        // epoch as made at the epoch's end.
        let old = State::parse(b"adapt:60000:6:600:42:60:0:1700000000000:3:1:0:1700000000000:-1:0:0:0").unwrap();
        assert_eq!((old.limit, old.cut, old.cut_at), (42, true, MAX_SCALED));
        let old = State::parse(b"adapt:60000:6:600:60:60:4:1700000000000:3:0:420000:1700000000000:-1:0:0:0").unwrap();
        assert_eq!((old.cut, old.cut_at), (false, 0));
        for junk in [
            &b"adapt:60000:6:600:60:60:2:1700000000000:3:0:420000:1700000000000:-1:0:0"[..],
            b"adapt:60000:6:600:60:60:2:1700000000000:3:0:420000:1700000000000:-1:0:0:0:0:0",
            b"adapt:60000:6:600:60:60:2:1700000000000:3:0:420000:1700000000000:-1:0:0:0:-1",
            b"adapt:60000:6:600:700:60:2:1700000000000:3:0:420000:1700000000000:-1:0:0:0",
            b"adapt:0:6:600:60:60:2:1700000000000:3:0:420000:1700000000000:-1:0:0:0",
            b"adapt:60000:6:600:60:60:2:1700000000000:3:2:420000:1700000000000:-1:0:0:0",
            b"adapt:60000:6:600:60:60:2:+1700000000000:3:0:420000:1700000000000:-1:0:0:0",
            b"adapt:60000:6:600:60:60:2:1700000000000:3:0:420000:1700000000000:-1:0:0:0:",
            b"12",
        ] {
            assert_eq!(State::parse(junk), None, "{}", String::from_utf8_lossy(junk));
        }
        // Another window starts afresh.
        let other = Bounds { window_ms: 1_000, ..MINUTE };
        assert_eq!(decide(&other, 1, false, false, stored(d.state), NOW).state.window_ms, 1_000);
    }
}
