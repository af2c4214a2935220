//! Waiting and timing: bounded waits for a condition, and the measured bounds that timing
//! assertions allow (never a guess in ms).

use std::thread::sleep;
use std::time::{Duration, Instant};

/// Runs `f` and returns its result with the milliseconds that passed, rounded up: the most that
/// the server's millisecond clock can have moved between any two of its reads inside `f`. Timing
/// assertions allow exactly this, never a guess.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, i64) {
    let started = Instant::now();
    let value = f();
    (value, ms_since(started))
}

/// The milliseconds since `started`, rounded up (see `timed`).
pub fn ms_since(started: Instant) -> i64 {
    started.elapsed().as_micros().div_ceil(1_000) as i64
}

/// `value` is in `low..=high`.
#[track_caller]
pub fn assert_within(value: i64, low: i64, high: i64, what: &str) {
    assert!((low..=high).contains(&value), "{what}: {value} is not within {low}..={high}");
}

/// Waits (bounded) until `condition` holds; panics with `what` otherwise.
pub fn wait_for(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        sleep(Duration::from_millis(20));
    }
}
