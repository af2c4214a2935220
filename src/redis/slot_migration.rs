//! Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`), seen from the target. The source
//! streams the slots' keys, then their changes, to the target, where they stay out of clients'
//! sight until ownership moves: they are not yet this node's keys. So the guard leaves them alone
//! (it skips writes that arrive over a link, see guard.rs), and AUDIT/REPAIR never meet them: the
//! server's keyspace scan skips slots being imported. A counter that arrives without a TTL keeps
//! none, as after loading a snapshot, until a client writes it under a guarded prefix, a HIT heals
//! it, or REPAIR finds it; the source's guard and HITs already healed what they saw written there.
//!
//! The migration events tell operators which slots are arriving (the log, and INFO's
//! `ratelimit_slot_imports`).

use std::os::raw::{c_char, c_int, c_void};
use std::panic::catch_unwind;
use std::sync::atomic::{AtomicU64, Ordering};

use redis_module::raw::{RedisModuleCtx, RedisModuleEvent, REDISMODULE_OK};

use crate::redis::api::api;
use crate::redis::ctx::Ctx;
use crate::redis::server;

/// Valkey's `VALKEYMODULE_EVENT_ATOMIC_SLOT_MIGRATION` and its sub-events (Valkey 9, which has
/// them wherever it has the option; its `IsSubEventSupported` does not list them).
const EVENT_ATOMIC_SLOT_MIGRATION: u64 = 19;
const SUBEVENT_IMPORT_STARTED: u64 = 0;
const SUBEVENT_IMPORT_ABORTED: u64 = 2;
const SUBEVENT_IMPORT_COMPLETED: u64 = 4;

/// Imports in progress on this node (as the target, or as a replica of the target).
static IMPORTS: AtomicU64 = AtomicU64::new(0);

pub fn imports_in_progress() -> u64 {
    IMPORTS.load(Ordering::Relaxed)
}

/// Valkey's `ValkeyModuleSlotRange`.
#[repr(C)]
struct SlotRange {
    start: c_int,
    end: c_int,
}

/// Valkey's `ValkeyModuleAtomicSlotMigrationInfoV1`, the event's data.
#[repr(C)]
struct MigrationInfo {
    version: u64,
    /// Not read: it places the fields after it.
    job_name: [c_char; 41],
    slot_ranges: *const SlotRange,
    num_slot_ranges: u32,
}

/// Subscribes to the migration events where the server has atomic slot migration; false if the
/// server refused.
pub fn subscribe(ctx: &Ctx) -> bool {
    if !server::has_atomic_slot_migration() {
        return true;
    }
    let event = RedisModuleEvent { id: EVENT_ATOMIC_SLOT_MIGRATION, dataver: 1 };
    // SAFETY: a live context; the callback is a plain function for the module's life.
    unsafe {
        api!(RedisModule_SubscribeToServerEvent)(ctx.raw(), event, Some(migration_event)) == REDISMODULE_OK as c_int
    }
}

unsafe extern "C" fn migration_event(
    ctx: *mut RedisModuleCtx,
    _event: RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    let what = match subevent {
        SUBEVENT_IMPORT_STARTED => {
            IMPORTS.fetch_add(1, Ordering::Relaxed);
            "arriving by atomic slot migration: until the import completes, the guard leaves their keys to the \
             migration and AUDIT/REPAIR do not see them"
        }
        SUBEVENT_IMPORT_COMPLETED | SUBEVENT_IMPORT_ABORTED => {
            let _ = IMPORTS.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
            match subevent {
                SUBEVENT_IMPORT_COMPLETED => {
                    "imported: their keys are this node's now (a counter that came without a TTL keeps none until \
                     written under the guard, hit, or REPAIRed)"
                }
                _ => "not imported: the migration was cancelled or failed, their keys stay with the source",
            }
        }
        _ => return,
    };
    let _ = catch_unwind(|| {
        // SAFETY: for this event the server passes its migration info (or nothing), and a context
        // live through the callback.
        let (info, ctx) = unsafe { (data.cast::<MigrationInfo>().as_ref(), Ctx::from_raw(ctx)) };
        // SAFETY: the server's migration info, valid through the callback.
        let slots = info.map_or_else(String::new, |info| unsafe { slot_ranges(info) });
        ctx.log_notice(&format!("slots {slots} {what}"));
    });
}

/// `0-100,200-300`, read from the event's data.
///
/// # Safety
/// `info` must be the server's migration info, valid for the event's callback.
unsafe fn slot_ranges(info: &MigrationInfo) -> String {
    if info.version < 1 || info.slot_ranges.is_null() {
        return String::new();
    }
    // SAFETY: the server gives `num_slot_ranges` ranges at `slot_ranges`.
    let ranges = unsafe { std::slice::from_raw_parts(info.slot_ranges, info.num_slot_ranges as usize) };
    ranges.iter().map(|r| format!("{}-{}", r.start, r.end)).collect::<Vec<_>>().join(",")
}
