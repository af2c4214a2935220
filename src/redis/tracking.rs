//! The node's RATELIMIT.TOP summaries (`core::top`) behind one lock: fed by every limiter's
//! decision, read by RATELIMIT.TOP and INFO, sized by `ratelimit.top-keys`. Telemetry only:
//! neither replicated nor persisted, and each node holds its own.

use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, MutexGuard};

use crate::core::top::{Estimate, Top, View};
use crate::redis::{config, stats};

static TOP: Mutex<Option<Top>> = Mutex::new(None);

fn interval_ms() -> i64 {
    config::TOP_INTERVAL.get().saturating_mul(1_000)
}

/// The summaries as `ratelimit.top-keys` wants them now: made, remade at a new size (which
/// starts afresh), or dropped when it is 0.
#[inline]
fn fitted(top: &mut Option<Top>) -> Option<&mut Top> {
    let capacity = usize::try_from(config::TOP_KEYS.get()).unwrap_or(0);
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

fn lock() -> MutexGuard<'static, Option<Top>> {
    // Only the main thread takes it, and nothing in it can be left half-changed by a panic.
    TOP.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Counts one decision at `now_ms`: each key with its weight (a denied call weighs 1, an admitted
/// one its cost).
pub fn record<'a>(view: View, now_ms: i64, keys: impl IntoIterator<Item = (&'a [u8], u64)>) {
    if config::TOP_KEYS.get() == 0 {
        return;
    }
    let mut guard = lock();
    let Some(top) = fitted(&mut guard) else { return };
    let interval_ms = interval_ms();
    for (key, weight) in keys {
        if !top.record(view, key, weight, now_ms, interval_ms) {
            stats::TOP_UNTRACKED.add(1);
        }
    }
}

/// Calls `each` on the keys of `view` at `now_ms`, heaviest first, until it answers false.
pub fn each_ranked(view: View, now_ms: i64, mut each: impl FnMut(&[u8], Estimate) -> bool) {
    let mut guard = lock();
    if let Some(top) = fitted(&mut guard) {
        for (key, estimate) in top.ranked(view, now_ms, interval_ms()) {
            if !each(key, estimate) {
                break;
            }
        }
    }
}

/// Forgets both views.
pub fn reset() {
    if let Some(top) = fitted(&mut lock()) {
        top.reset();
    }
}

/// For INFO: bytes held, and entries in use.
pub fn usage() -> (usize, usize) {
    fitted(&mut lock()).map_or((0, 0), |top| (top.memory(), top.held()))
}
