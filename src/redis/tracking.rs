//! The node's RATELIMIT.TOP summaries (`core::top`): fed by every limiter's decision, read by
//! RATELIMIT.TOP and INFO, sized by `ratelimit.top-keys`. Telemetry only: neither replicated nor
//! persisted, and each node holds its own.

use std::cell::UnsafeCell;
use std::hash::{BuildHasher, RandomState};

use crate::core::top::{Estimate, Top, View};
use crate::redis::{config, stats};

/// The summaries, touched only by commands and the INFO callback: code the server runs with its
/// lock held, one at a time (on the main thread, or a thread that took the lock), so they need no
/// lock of their own, which every decision would pay for.
struct ServerLocked(UnsafeCell<Option<Top>>);

// SAFETY: every access is in `with`, whose callers run with the server's lock held (see there).
unsafe impl Sync for ServerLocked {}

static TOP: ServerLocked = ServerLocked(UnsafeCell::new(None));

/// `f` on the summaries. Only the functions below call it, each once and never from inside
/// another's `f`, and only commands and the INFO callback call them.
fn with<R>(f: impl FnOnce(&mut Option<Top>) -> R) -> R {
    // SAFETY: the callers hold the server's lock (commands, the INFO callback), which serializes
    // them, and none reenters: this is the only reference to the summaries while `f` runs.
    f(unsafe { &mut *TOP.0.get() })
}

fn interval_ms() -> i64 {
    config::TOP_INTERVAL.get().saturating_mul(1_000)
}

/// The summaries as `ratelimit.top-keys` wants them now: made, remade at a new size (which
/// starts afresh), or dropped when it is 0.
#[inline]
fn fitted(top: &mut Option<Top>, keys: i64) -> Option<&mut Top> {
    let capacity = usize::try_from(keys).unwrap_or(0);
    if top.as_ref().is_some_and(|t| t.capacity() == capacity) {
        return top.as_mut();
    }
    refit(top, capacity)
}

#[cold]
fn refit(top: &mut Option<Top>, capacity: usize) -> Option<&mut Top> {
    *top = (capacity > 0).then(|| {
        // std's RandomState is keyed from the OS's randomness.
        let keys = RandomState::new();
        Top::new(capacity, [keys.hash_one(1u8), keys.hash_one(2u8)])
    });
    top.as_mut()
}

/// Counts one decision at `now_ms`: each key with its weight (a denied call weighs 1, an admitted
/// one its cost).
#[inline(always)]
pub fn record<'a>(view: View, now_ms: i64, keys: impl IntoIterator<Item = (&'a [u8], u64)>) {
    let capacity = config::TOP_KEYS.get();
    if capacity == 0 {
        return;
    }
    with(|top| {
        let Some(top) = fitted(top, capacity) else { return };
        let interval_ms = interval_ms();
        for (key, weight) in keys {
            if !top.record(view, key, weight, now_ms, interval_ms) {
                stats::TOP_UNTRACKED.add(1);
            }
        }
    });
}

/// Calls `each` on the keys of `view` at `now_ms`, heaviest first, until it answers false.
pub fn each_ranked(view: View, now_ms: i64, mut each: impl FnMut(&[u8], Estimate) -> bool) {
    with(|top| {
        if let Some(top) = fitted(top, config::TOP_KEYS.get()) {
            for (key, estimate) in top.ranked(view, now_ms, interval_ms()) {
                if !each(key, estimate) {
                    break;
                }
            }
        }
    });
}

/// Forgets both views.
pub fn reset() {
    with(|top| fitted(top, config::TOP_KEYS.get()).map(Top::reset));
}

/// For INFO (not its crash report, which may interrupt a command): bytes held, and entries in use.
pub fn usage() -> (usize, usize) {
    with(|top| fitted(top, config::TOP_KEYS.get()).map_or((0, 0), |top| (top.memory(), top.held())))
}
