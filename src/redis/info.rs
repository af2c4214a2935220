//! `INFO ratelimit`: one section named after the module, fields `ratelimit_<name>`. Every field
//! but the per-command lines (`decisions_hit:admitted=..`, kept for people reading INFO) and the
//! two words (`clock`, `guard_heal_at`) is a number, and each of those has numeric fields too, so
//! that a scraper that takes numbers (redis_exporter's `--script`) takes everything.
//! The counters (stats.rs's registry) only grow, until `CONFIG RESETSTAT` (resetstat.rs); the rest
//! are gauges.

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::raw::RedisModuleInfoCtx;

use crate::redis::api::api;
use crate::redis::stats::{COUNTERS, DECISIONS};
use crate::redis::{clock, lease_set, resetstat, server, slot_migration, tracking, walk};

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
    // A CONFIG RESETSTAT just run shows at once (a crash report reads the counters as they are).
    if for_crash_report == 0 {
        resetstat::check();
    }
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
            for (name, count) in [c"admitted", c"denied", c"shadow_denied"].iter().zip(d.counts()) {
                api!(RedisModule_InfoAddFieldULongLong)(ctx, name.as_ptr(), count.get());
            }
            api!(RedisModule_InfoEndDictField)(ctx);
        }
    }
    for d in DECISIONS {
        for (name, count) in d.fields.iter().zip(d.counts()) {
            number(name, count.get());
        }
    }
    // A crash report may be written in the middle of a command that is updating the summaries, or
    // the leases held.
    if for_crash_report == 0 {
        let (memory, entries) = tracking::usage();
        number(c"top_memory_bytes", memory as u64);
        number(c"top_entries", entries as u64);
        number(c"leases_in_flight", lease_set::in_flight(clock::command_now().ms));
    }
    let (running, queued) = walk::in_progress();
    number(c"walks_running", running as u64);
    number(c"walks_queued", queued as u64);
    number(c"slot_imports", slot_migration::imports_in_progress());
    // What differs between servers, as this one does it: in words, and as 1 or 0.
    let (command_clock, heal_at_command_end) = (server::has_command_clock(), server::has_post_notification_jobs());
    text(c"clock", if command_clock { c"command_us" } else { c"wall_ms" });
    text(c"guard_heal_at", if heal_at_command_end { c"command_end" } else { c"before_sleep" });
    number(c"clock_command_us", u64::from(command_clock));
    number(c"guard_heal_at_command_end", u64::from(heal_at_command_end));
}
