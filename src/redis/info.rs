//! `INFO ratelimit`: one section named after the module, fields `ratelimit_<name>`.

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::raw::RedisModuleInfoCtx;

use crate::redis::api::api;
use crate::redis::stats::*;
use crate::redis::{server, slot_migration, tracking, walk};

const COUNTERS: [(&CStr, &Stat); 31] = [
    (c"hits", &HITS),
    (c"admitted", &ADMITTED),
    (c"denied", &DENIED),
    (c"healed", &HEALED),
    (c"slide_calls", &SLIDE_CALLS),
    (c"slide_admitted", &SLIDE_ADMITTED),
    (c"slide_denied", &SLIDE_DENIED),
    (c"gcra_calls", &GCRA_CALLS),
    (c"gcra_admitted", &GCRA_ADMITTED),
    (c"gcra_denied", &GCRA_DENIED),
    (c"peeks", &PEEKS),
    (c"reserved", &RESERVED),
    (c"settled", &SETTLED),
    (c"refunded", &REFUNDED),
    (c"refunds_dropped", &REFUNDS_DROPPED),
    (c"overage", &OVERAGE),
    (c"acquires", &ACQUIRES),
    (c"acquired", &ACQUIRED),
    (c"acquire_denied", &ACQUIRE_DENIED),
    (c"released", &RELEASED),
    (c"release_late", &RELEASE_LATE),
    (c"renewed", &RENEWED),
    (c"renew_lost", &RENEW_LOST),
    (c"leases_expired", &LEASES_EXPIRED),
    (c"audits", &AUDITS),
    (c"repairs", &REPAIRS),
    (c"keys_scanned", &KEYS_SCANNED),
    (c"counters_repaired", &REPAIRED),
    (c"walks_refused", &WALKS_REFUSED),
    (c"guard_checked", &GUARD_CHECKED),
    (c"guard_heals", &GUARD_HEALS),
];

const DECISIONS: [&Decisions; 6] =
    [&HIT_DECISIONS, &HITALL_DECISIONS, &SLIDE_DECISIONS, &GCRA_DECISIONS, &CL_THROTTLE_DECISIONS, &ACQUIRE_DECISIONS];

/// The INFO callback, registered at load time.
pub unsafe extern "C" fn info(ctx: *mut RedisModuleInfoCtx, for_crash_report: c_int) {
    let number = |name: &CStr, value: u64| {
        // SAFETY: the callback's live INFO context and a static field name.
        unsafe { api!(RedisModule_InfoAddFieldULongLong)(ctx, name.as_ptr(), value) };
    };
    let text = |name: &CStr, value: &CStr| {
        // SAFETY: as above, with a static value.
        unsafe { api!(RedisModule_InfoAddFieldCString)(ctx, name.as_ptr(), value.as_ptr()) };
    };
    // SAFETY: the callback's live INFO context; "" names the section after the module.
    unsafe { api!(RedisModule_InfoAddSection)(ctx, c"".as_ptr()) };
    for (name, counter) in COUNTERS {
        number(name, counter.get());
    }
    for d in DECISIONS {
        // SAFETY: the callback's live INFO context and static names:
        // `decisions_hit:admitted=..,denied=..,shadow_denied=..`.
        unsafe {
            api!(RedisModule_InfoBeginDictField)(ctx, d.name.as_ptr());
            api!(RedisModule_InfoAddFieldULongLong)(ctx, c"admitted".as_ptr(), d.admitted.get());
            api!(RedisModule_InfoAddFieldULongLong)(ctx, c"denied".as_ptr(), d.denied.get());
            api!(RedisModule_InfoAddFieldULongLong)(ctx, c"shadow_denied".as_ptr(), d.shadow_denied.get());
            api!(RedisModule_InfoEndDictField)(ctx);
        }
    }
    // A crash report may be written in the middle of a command that is updating the summaries.
    if for_crash_report == 0 {
        let (memory, entries) = tracking::usage();
        number(c"top_memory_bytes", memory as u64);
        number(c"top_entries", entries as u64);
    }
    number(c"top_untracked", TOP_UNTRACKED.get());
    let (running, queued) = walk::in_progress();
    number(c"walks_running", running as u64);
    number(c"walks_queued", queued as u64);
    number(c"slot_imports", slot_migration::imports_in_progress());
    // What differs between servers, as this one does it.
    text(c"clock", if server::has_command_clock() { c"command_us" } else { c"wall_ms" });
    text(c"guard_heal_at", if server::has_post_notification_jobs() { c"command_end" } else { c"before_sleep" });
}
