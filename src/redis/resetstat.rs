//! `CONFIG RESETSTAT` resets INFO's counters (stats.rs) as it does the server's own. The server tells
//! modules nothing of it; but it sets its own `total_commands_processed` back to zero, which
//! otherwise only grows. So the module reads that count at each INFO and at the server's cron (at
//! most once a second: a reading builds INFO's stats section, about 290,000 instructions), and
//! resets its counters when it went down. Nothing runs per command; a RESETSTAT the caller may not
//! run, or queued in a MULTI that is discarded, changes nothing.
//!
//! A RESETSTAT followed, before the next reading, by more commands than the server had counted at
//! the last one goes unseen: two RESETSTATs a moment apart under load, or one right after a start.

use std::os::raw::c_int;
use std::sync::atomic::{AtomicI64, AtomicPtr, AtomicU64, Ordering};

use redis_module::raw::RedisModuleCtx;

use crate::redis::api::api;
use crate::redis::ctx::Ctx;
use crate::redis::{events, stats};

/// A context of the module's own, for readings from the INFO callback (which is handed none).
static CONTEXT: AtomicPtr<RedisModuleCtx> = AtomicPtr::new(std::ptr::null_mut());
/// The server's count of commands at the last reading.
static LAST_COUNT: AtomicU64 = AtomicU64::new(0);
static LAST_READ_MS: AtomicI64 = AtomicI64::new(0);
const CRON_EVERY_MS: i64 = 1_000;

/// Starts watching, at load time.
pub fn watch(ctx: &Ctx) -> Result<(), String> {
    // SAFETY: the module's load-time context; the detached context lives until `stop`.
    let own = unsafe { api!(RedisModule_GetDetachedThreadSafeContext)(ctx.raw()) };
    CONTEXT.store(own, Ordering::Relaxed);
    check();
    events::subscribe_to_cron(ctx, |_| {
        // SAFETY: a function of the API, taking nothing.
        let now_ms = unsafe { api!(RedisModule_Milliseconds)() };
        if now_ms - LAST_READ_MS.load(Ordering::Relaxed) >= CRON_EVERY_MS {
            LAST_READ_MS.store(now_ms, Ordering::Relaxed);
            check();
        }
    })
}

/// At unload, once the server has agreed to it.
pub fn stop() {
    let own = CONTEXT.swap(std::ptr::null_mut(), Ordering::Relaxed);
    if !own.is_null() {
        // SAFETY: the detached context made by `watch`, freed once.
        unsafe { api!(RedisModule_FreeThreadSafeContext)(own) };
    }
}

/// Resets the counters if the server's count of commands went down since the last reading.
pub fn check() {
    let Some(count) = commands_processed() else { return };
    if count < LAST_COUNT.swap(count, Ordering::Relaxed) {
        stats::reset_all();
    }
}

/// INFO's `total_commands_processed`.
fn commands_processed() -> Option<u64> {
    let ctx = CONTEXT.load(Ordering::Relaxed);
    if ctx.is_null() {
        return None;
    }
    // SAFETY: the module's detached context, and a static section name.
    let stats = unsafe { api!(RedisModule_GetServerInfo)(ctx, c"stats".as_ptr()) };
    if stats.is_null() {
        return None;
    }
    let mut missing: c_int = 0;
    // SAFETY: the data just returned, and a static field name; freed once, after.
    let count = unsafe {
        let count =
            api!(RedisModule_ServerInfoGetFieldUnsigned)(stats, c"total_commands_processed".as_ptr(), &mut missing);
        api!(RedisModule_FreeServerInfo)(ctx, stats);
        count
    };
    (missing == 0).then_some(count)
}
