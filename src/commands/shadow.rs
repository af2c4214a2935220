//! Shadow mode: under the prefixes of `ratelimit.shadow`, a limiter call (HIT, SLIDE, HITALL,
//! GCRA, ACQUIRE, CL.THROTTLE) that would be denied is admitted and counted as admitted; what it
//! would have been is reported instead: INFO's `shadow_denied` per command, and RATELIMIT.TOP
//! SHADOWED. A limit is rolled out this way: shadowed first, to see whom it would stop, then
//! enforced. Only a denied call looks the prefixes up: an admitted one pays nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::core::shadow::Prefixes;
use crate::core::top::View;
use crate::redis::config::StringConfig;
use crate::redis::ctx::Ctx;
use crate::redis::stats::Decisions;
use crate::redis::tracking;

/// `ratelimit.shadow`: `prefix [prefix ...]`.
pub static CONFIG: StringConfig = StringConfig::new(c"shadow", set_prefixes, |_: &Ctx| {});

static PREFIXES: Mutex<Prefixes> = Mutex::new(Prefixes::none());
/// Whether any prefix is shadowed: a denial on a server without shadow mode takes no lock.
static ANY: AtomicBool = AtomicBool::new(false);

fn prefixes() -> MutexGuard<'static, Prefixes> {
    PREFIXES.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Validates and takes new prefixes; a bad value is refused with the reason, and the old ones stay.
fn set_prefixes(text: &[u8]) -> Result<(), String> {
    let new = Prefixes::parse(text)?;
    let mut prefixes = prefixes();
    ANY.store(!new.is_empty(), Ordering::Relaxed);
    *prefixes = new;
    Ok(())
}

/// Whether shadow mode is on at all (HITALL then asks key by key).
pub fn on() -> bool {
    ANY.load(Ordering::Relaxed)
}

/// Whether a denied call on `key` is admitted anyway (when shadow mode is `on`).
pub fn covers(key: &[u8]) -> bool {
    prefixes().shadow(key)
}

/// A call on `key` that its limit `denied`, admitted anyway where shadow mode covers the key:
/// `admit`'s outcome (None where it cannot be: a count past 2^63). With shadow mode off, a flag
/// read.
pub fn admitted<O>(key: &[u8], denied: bool, admit: impl FnOnce() -> Option<O>) -> Option<O> {
    (denied && on() && covers(key)).then(admit).flatten()
}

/// A call shadow mode admitted at `now_ms`, counted already as admitted: its would-be denial, in
/// INFO and against each of `keys` (those whose limit would have said no) in RATELIMIT.TOP
/// SHADOWED.
pub fn record<'a>(decisions: &Decisions, now_ms: i64, keys: impl IntoIterator<Item = &'a [u8]>) {
    decisions.shadow_denied.add(1);
    tracking::record(View::Shadowed, now_ms, keys.into_iter().map(|key| (key, 1)));
}
