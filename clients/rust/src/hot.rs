//! Hot limits: one process's share of a limit many processes share, decided locally from
//! blocks of tokens taken from the server ahead of demand.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::hot_state::HotState;
use crate::{Error, Fixed, Limiter, Transport};

/// A hot limit's options; `HotOptions::default()` is the defaults.
#[derive(Debug, Clone, Copy)]
pub struct HotOptions {
    /// How much of this process's demand a block of tokens covers (10 ms): longer, fewer calls;
    /// shorter, less held by a process that stops needing them.
    pub horizon: Duration,
    /// Taken off each block's deadline, for scheduling and the reply's whole milliseconds (2 ms);
    /// a thousandth of the time the window had left is taken off too, for the hosts' clocks.
    pub guard: Duration,
    /// Admit when Redis cannot be reached and no tokens are held; by default such a take answers
    /// the error. A call the server refuses answers its error whatever this says.
    pub fail_open: bool,
}

impl Default for HotOptions {
    fn default() -> HotOptions {
        HotOptions { horizon: Duration::from_millis(10), guard: Duration::from_millis(2), fail_open: false }
    }
}

/// One process's share of a fixed-window limit on one key that many processes share (a
/// partner's requests a second across a fleet). It takes blocks of tokens from the server
/// (`HIT ... PARTIAL RESERVE`) and decides locally, with no round trip, until a block is spent
/// or its deadline; the same rules as the Python, Node, Go and Java hot limits.
///
/// Never over: a block is used only before its deadline, the instant its request was sent plus
/// the time the server said its window had left, less the guard; the grants of a window sum to
/// at most the limit. One request in flight at a time, sent when what is held covers less than
/// half the horizon of demand. [`HotLimit::close`] gives back what is unused; a process that dies
/// holding tokens loses them for that window. Cheap to clone (clones share the state).
#[derive(Clone)]
pub struct HotLimit<T> {
    shared: Arc<Shared<T>>,
}

struct Shared<T> {
    limiter: Limiter<T>,
    key: String,
    fixed: Fixed,
    origin: Instant,
    fail_open: bool,
    invalid: Option<Error>,
    state: Mutex<Runner>,
}

struct Runner {
    s: HotState,
    closed: bool,
    /// Resolves when the request in flight returns (`None` when none is).
    answered: Option<watch::Receiver<bool>>,
    /// The last request's error, while no block has come since.
    last_error: Option<Error>,
}

impl<T: Transport> Limiter<T> {
    /// This process's share of `f`'s limit on `key` (its cost is not read: [`HotLimit::take`]
    /// says how many). Needs a tokio runtime. Close it when done.
    pub fn hot(&self, key: &str, f: &Fixed, options: HotOptions) -> HotLimit<T> {
        let fixed = f.clone().with_cost(1);
        let invalid = crate::command::window::hit(key, &fixed).err();
        HotLimit {
            shared: Arc::new(Shared {
                limiter: self.clone(),
                key: key.to_string(),
                origin: Instant::now(),
                fail_open: options.fail_open,
                invalid,
                state: Mutex::new(Runner {
                    s: HotState::new(fixed.limit as i64, options.horizon, options.guard, Duration::ZERO),
                    closed: false,
                    answered: None,
                    last_error: None,
                }),
                fixed,
            }),
        }
    }
}

impl<T: Transport> HotLimit<T> {
    fn lock(&self) -> MutexGuard<'_, Runner> {
        // The state is consistent after any step: a panic elsewhere leaves it usable.
        self.shared.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn elapsed(&self) -> Duration {
        self.shared.origin.elapsed()
    }

    /// Admits `n` tokens (at least 1) from what this process holds, waiting for a block when it
    /// holds too few. False when the window has none left for it. Redis out of reach with none
    /// held: the error, or, with [`HotOptions::fail_open`], admitted.
    pub async fn take(&self, n: u64) -> Result<bool, Error> {
        let n = i64::try_from(n).ok().filter(|&n| n >= 1).ok_or_else(|| crate::error::invalid("take needs n >= 1"))?;
        if let Some(e) = &self.shared.invalid {
            return Err(e.clone());
        }
        let (mut tries, mut waited) = (0, false);
        loop {
            let (step, now, answered) = {
                let mut runner = self.lock();
                if runner.closed {
                    if waited {
                        runner.s.gave_up(n);
                    }
                    return Err(Error::Closed);
                }
                let now = self.elapsed();
                let step = runner.s.step(now, n, tries, waited);
                waited = step.wait;
                if step.send > 0 {
                    runner.answered = Some(self.send(step.send));
                }
                if step.admitted || step.denied {
                    return Ok(step.admitted);
                }
                (step, now, runner.answered.clone())
            };
            if !step.wait {
                // The window is ending: the next one's tokens, when it starts.
                tokio::time::sleep(step.sleep_until.saturating_sub(now)).await;
                continue;
            }
            if let Some(mut answered) = answered {
                let _ = answered.wait_for(|done| *done).await;
            }
            tries += 1;
            let error = {
                let mut runner = self.lock();
                let error = runner.last_error.clone();
                if error.is_some() {
                    runner.s.gave_up(n);
                }
                error
            };
            if let Some(e) = error {
                // Out of reach with none held: admitted when failing open (not when refused).
                return if self.shared.fail_open && e.is_unreachable() { Ok(true) } else { Err(e) };
            }
        }
    }

    /// Sends a request for `want` tokens (under the lock): its answer makes a block.
    fn send(&self, want: i64) -> watch::Receiver<bool> {
        let (done, answered) = watch::channel(false);
        let this = self.clone();
        tokio::spawn(async move {
            let f = this.shared.fixed.clone().with_cost(want as u64);
            let sent = this.elapsed();
            let answer = this.shared.limiter.reserve_hit_up_to(&this.shared.key, &f).await;
            let received = this.elapsed();
            let mut runner = this.lock();
            match answer {
                Ok(r) => {
                    runner.s.granted(sent, received, r);
                    runner.last_error = None;
                }
                Err(e) => {
                    runner.s.failed();
                    runner.last_error = Some(e);
                }
            }
            runner.answered = None;
            drop(runner);
            let _ = done.send(true);
        });
        answered
    }

    /// Gives back the tokens held of windows still running (SETTLE), a request in flight's once
    /// it is answered, and makes [`HotLimit::take`] refuse.
    pub async fn close(&self) -> Result<(), Error> {
        let answered = {
            let mut runner = self.lock();
            runner.closed = true;
            runner.answered.clone()
        };
        if let Some(mut answered) = answered {
            let _ = answered.wait_for(|done| *done).await;
        }
        let blocks = self.lock().s.unused(self.elapsed());
        let mut first_error = None;
        for b in blocks {
            let used = (b.grant.amount - b.left).max(0) as u64;
            if let Err(e) = self.shared.limiter.settle(&b.grant, used).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
