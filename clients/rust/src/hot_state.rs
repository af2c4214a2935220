//! What a hot limit decides, with no I/O and no clock of its own: every instant is a `Duration`
//! on the process's monotonic clock, given by the caller. The blocks of granted tokens held, the
//! local demand, and the deny until the window resets. The same rules as the Python, Node, Go
//! and Java hot limits; [`HotLimit`](crate::HotLimit) runs it under its lock, the simulation
//! (tests/hot_simulation.rs) against a model of the server.

use std::time::Duration;

use crate::Reservation;

/// One grant: tokens left, usable before `deadline`, and the reservation that settles what was
/// not used.
#[derive(Debug, Clone)]
pub(crate) struct HotBlock {
    /// Tokens not spent yet.
    pub(crate) left: i64,
    /// The instant it is usable before.
    pub(crate) deadline: Duration,
    /// The grant.
    pub(crate) grant: Reservation,
}

/// A hot limit's state (see the module's documentation).
#[derive(Debug)]
pub(crate) struct HotState {
    limit: i64,
    horizon: Duration,
    guard: Duration,
    blocks: Vec<HotBlock>,
    asking: bool,
    waiting: i64,
    denied_until: Duration,
    paused_until: Duration,
    taken: i64,
    since: Duration,
    rate: f64,
    remaining: i64,
    window_end: Duration,
}

/// What to do for a take: admit or deny it, and send a request (for `send` tokens), or wait for
/// the one in flight, or until `sleep_until`, then step again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct HotStep {
    /// Admitted from the blocks held.
    pub(crate) admitted: bool,
    /// Denied: the server said the window has none left.
    pub(crate) denied: bool,
    /// Send a request for this many tokens (0: none).
    pub(crate) send: i64,
    /// Wait for the request in flight's answer.
    pub(crate) wait: bool,
    /// Else sleep until this instant (the next window), then step again.
    pub(crate) sleep_until: Duration,
}

impl HotState {
    /// A state for `limit`, covering `horizon` of demand per block, `guard` off each deadline.
    pub(crate) fn new(limit: i64, horizon: Duration, guard: Duration, now: Duration) -> HotState {
        HotState {
            limit,
            horizon,
            guard,
            blocks: Vec::new(),
            asking: false,
            waiting: 0,
            denied_until: Duration::ZERO,
            paused_until: Duration::ZERO,
            taken: 0,
            since: now,
            rate: 0.0,
            remaining: -1,
            window_end: Duration::ZERO,
        }
    }

    /// The tokens usable at `now`.
    fn held(&self, now: Duration) -> i64 {
        self.blocks.iter().filter(|b| now < b.deadline).map(|b| b.left).sum()
    }

    /// Spends `n` tokens at `now` if the blocks hold them (the first to expire first).
    fn take(&mut self, now: Duration, mut n: i64) -> bool {
        self.drop_spent(now);
        if self.held(now) < n {
            return false;
        }
        for block in &mut self.blocks {
            let spent = n.min(block.left);
            block.left -= spent;
            n -= spent;
        }
        self.drop_spent(now);
        true
    }

    /// Forgets the blocks spent or past their deadline.
    fn drop_spent(&mut self, now: Duration) {
        self.blocks.retain(|b| b.left > 0 && now < b.deadline);
    }

    /// Whether the server said none remain in the window running at `now`.
    pub(crate) fn denied(&self, now: Duration) -> bool {
        now < self.denied_until
    }

    /// Whether to send a request at `now`, and for how many tokens, when `need` more are wanted:
    /// one in flight at a time, none while denied, when what is held covers less than half a
    /// horizon of demand (or less than `need`); a horizon of demand, at least `need`, no more
    /// than the demand spends before the window ends, nor than an eighth of what the server had
    /// left.
    fn ask(&mut self, now: Duration, need: i64) -> Option<i64> {
        if self.asking || self.denied(now) || now < self.paused_until {
            return None;
        }
        let held = self.held(now);
        let elapsed = now.saturating_sub(self.since);
        if elapsed >= self.horizon {
            self.rate = self.taken as f64 / elapsed.as_secs_f64();
            self.taken = 0;
            self.since = now;
        }
        let mut want = (self.rate * self.horizon.as_secs_f64()).ceil() as i64;
        if held >= need && (held > want / 2 || want == 0) {
            return None;
        }
        let mut left = self.limit;
        if now < self.window_end {
            want = want.min((self.rate * (self.window_end - now).as_secs_f64()).ceil() as i64);
            left = self.remaining;
        }
        want = want.min((left / 8).max(1));
        want = want.max(need - held).max(1);
        self.asking = true;
        Some(want)
    }

    /// The answer to the request sent at `sent`, received at `received`: a block usable until
    /// the window's end as the server saw it, less the guard (and a thousandth of the time the
    /// window had left, for the clocks' rates), counted from the send.
    pub(crate) fn granted(&mut self, sent: Duration, received: Duration, r: Reservation) {
        self.asking = false;
        let reset_after = r.decision.reset_after;
        let guard = self.guard + reset_after / 1000;
        let reset = received.saturating_add(reset_after).saturating_add(guard);
        let deadline = sent.saturating_add(reset_after).saturating_sub(guard);
        let (amount, remaining) = (r.amount, r.decision.remaining);
        if amount > 0 && received < deadline {
            self.remaining = remaining;
            self.window_end = deadline;
            self.blocks.push(HotBlock { left: amount, deadline, grant: r });
        } else if amount > 0 {
            // Granted in a window that ends before they could be used: the next request waits
            // for the next window.
            self.paused_until = reset;
            return;
        }
        if amount == 0 || remaining == 0 {
            self.denied_until = reset;
        }
    }

    /// A take of `n` at `now`, its `tries`th step (`waited`: it was counted among those waiting
    /// for an answer, and is not any more). A take is denied only when the server said the
    /// window has none left.
    pub(crate) fn step(&mut self, now: Duration, n: i64, tries: u32, waited: bool) -> HotStep {
        if waited {
            self.waiting -= n;
        }
        if tries == 0 {
            self.taken += n;
        }
        if self.take(now, n) {
            let send = self.ask(now, self.waiting).unwrap_or(0);
            return HotStep { admitted: true, send, ..HotStep::default() };
        }
        if self.denied(now) {
            return HotStep { denied: true, ..HotStep::default() };
        }
        let ask = self.ask(now, n + self.waiting);
        if ask.is_some() || self.asking {
            self.waiting += n;
            return HotStep { send: ask.unwrap_or(0), wait: true, ..HotStep::default() };
        }
        HotStep { sleep_until: self.paused_until, ..HotStep::default() }
    }

    /// A take that stopped waiting for the answer.
    pub(crate) fn gave_up(&mut self, n: i64) {
        self.waiting -= n;
    }

    /// A request that got no answer.
    pub(crate) fn failed(&mut self) {
        self.asking = false;
    }

    /// What to settle at the end: each live block.
    pub(crate) fn unused(&mut self, now: Duration) -> Vec<HotBlock> {
        self.drop_spent(now);
        std::mem::take(&mut self.blocks)
    }
}
