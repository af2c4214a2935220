//! `INFO ratelimit`: what the module has done since it was loaded. Relaxed atomic counters, cheap
//! enough for the hot path and safe from the walk thread.

use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, Ordering};

use redis_module::raw::RedisModuleInfoCtx;

use crate::command::api;
use crate::server;

pub struct Stat(AtomicU64);

impl Stat {
    const fn new() -> Stat {
        Stat(AtomicU64::new(0))
    }

    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Calls of RATELIMIT.HIT and RATELIMIT.HITALL (one each, however many limits).
pub static HITS: Stat = Stat::new();
pub static ADMITTED: Stat = Stat::new();
pub static DENIED: Stat = Stat::new();
/// Counters and GCRA keys without TTL that HIT, HITALL or GCRA gave one.
pub static HEALED: Stat = Stat::new();
/// Calls of RATELIMIT.GCRA.
pub static GCRA_CALLS: Stat = Stat::new();
pub static GCRA_ADMITTED: Stat = Stat::new();
pub static GCRA_DENIED: Stat = Stat::new();
pub static PEEKS: Stat = Stat::new();
pub static AUDITS: Stat = Stat::new();
pub static REPAIRS: Stat = Stat::new();
/// Keys visited by AUDIT and REPAIR walks (those the caller may see).
pub static KEYS_SCANNED: Stat = Stat::new();
/// Counters REPAIR gave a TTL.
pub static REPAIRED: Stat = Stat::new();
/// AUDIT and REPAIR calls refused because `ratelimit.max-walks` walks were in progress.
pub static WALKS_REFUSED: Stat = Stat::new();
/// Keys written under a guarded prefix that the guard checked, and the counters it gave a TTL.
pub static GUARD_CHECKED: Stat = Stat::new();
pub static GUARD_HEALS: Stat = Stat::new();

const FIELDS: [(&std::ffi::CStr, &Stat); 15] = [
    (c"hits", &HITS),
    (c"admitted", &ADMITTED),
    (c"denied", &DENIED),
    (c"healed", &HEALED),
    (c"gcra_calls", &GCRA_CALLS),
    (c"gcra_admitted", &GCRA_ADMITTED),
    (c"gcra_denied", &GCRA_DENIED),
    (c"peeks", &PEEKS),
    (c"audits", &AUDITS),
    (c"repairs", &REPAIRS),
    (c"keys_scanned", &KEYS_SCANNED),
    (c"counters_repaired", &REPAIRED),
    (c"walks_refused", &WALKS_REFUSED),
    (c"guard_checked", &GUARD_CHECKED),
    (c"guard_heals", &GUARD_HEALS),
];

/// The INFO callback: one section named after the module, fields `ratelimit_<name>`.
pub unsafe extern "C" fn info(ctx: *mut RedisModuleInfoCtx, _for_crash_report: c_int) {
    unsafe {
        api!(RedisModule_InfoAddSection)(ctx, c"".as_ptr());
        for (name, counter) in FIELDS {
            api!(RedisModule_InfoAddFieldULongLong)(ctx, name.as_ptr(), counter.get());
        }
        let (running, queued) = crate::walk::in_progress();
        api!(RedisModule_InfoAddFieldULongLong)(ctx, c"walks_running".as_ptr(), running as u64);
        api!(RedisModule_InfoAddFieldULongLong)(ctx, c"walks_queued".as_ptr(), queued as u64);
        let imports = crate::slot_migration::imports_in_progress();
        api!(RedisModule_InfoAddFieldULongLong)(ctx, c"slot_imports".as_ptr(), imports);
        // What differs between servers, as this one does it.
        let clock = if server::has_command_clock() { c"command_us" } else { c"wall_ms" };
        api!(RedisModule_InfoAddFieldCString)(ctx, c"clock".as_ptr(), clock.as_ptr());
        let heal_at = if server::has_post_notification_jobs() { c"command_end" } else { c"before_sleep" };
        api!(RedisModule_InfoAddFieldCString)(ctx, c"guard_heal_at".as_ptr(), heal_at.as_ptr());
    }
}
