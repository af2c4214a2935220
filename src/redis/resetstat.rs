//! `CONFIG RESETSTAT` resets INFO's counters (info.rs) as it does the server's own. The server tells
//! modules nothing of it, so a command filter spots the command, and a timer that runs once the
//! commands read with it have run checks that it really ran (the caller may not be allowed to, or
//! it may wait in a MULTI that is discarded): the server's `total_commands_processed`, which the
//! command sets back to zero, is then below what it was when the filter saw the command.
//!
//! The filter runs before every command, so it only counts arguments and, for commands of two,
//! compares the first with `config`.

use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use redis_module::raw::{
    self, RedisModuleClientInfo, RedisModuleCommandFilterCtx, RedisModuleCtx, REDISMODULE_CLIENTINFO_FLAG_MULTI,
    REDISMODULE_CLIENTINFO_VERSION, REDISMODULE_CMDFILTER_NOSELF, REDISMODULE_OK,
};

use crate::redis::api::api;
use crate::redis::ctx::{bytes_of, Ctx};
use crate::redis::info;

/// A context of the module's own for the filter, which is handed none (detached: no client).
static CONTEXT: AtomicPtr<RedisModuleCtx> = AtomicPtr::new(std::ptr::null_mut());
/// The client whose queued `CONFIG RESETSTAT` runs at its EXEC (0: none).
static QUEUED_BY: AtomicU64 = AtomicU64::new(0);

/// Starts watching for `CONFIG RESETSTAT`, at load time.
pub fn watch(ctx: &Ctx) -> Result<(), String> {
    // SAFETY: the module's load-time context; the detached context lives as long as the module.
    let own = unsafe { api!(RedisModule_GetDetachedThreadSafeContext)(ctx.raw()) };
    CONTEXT.store(own, Ordering::Relaxed);
    // NOSELF: the module's own calls (RedisModule_Call) never run CONFIG RESETSTAT.
    // SAFETY: the module's load-time context; the callback is a plain function.
    let filter = unsafe {
        api!(RedisModule_RegisterCommandFilter)(ctx.raw(), Some(seen), REDISMODULE_CMDFILTER_NOSELF as c_int)
    };
    match filter.is_null() {
        true => Err("the server refused the command filter".into()),
        false => Ok(()),
    }
}

/// At unload, once the server has agreed to it (the filter goes with the module).
pub fn stop() {
    let own = CONTEXT.swap(std::ptr::null_mut(), Ordering::Relaxed);
    if !own.is_null() {
        // SAFETY: the detached context made by `watch`, freed once.
        unsafe { api!(RedisModule_FreeThreadSafeContext)(own) };
    }
}

unsafe extern "C" fn seen(filter: *mut RedisModuleCommandFilterCtx) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the filter's context is live through the callback, and so are its arguments.
        let arg = |pos: c_int| unsafe { bytes_of(api!(RedisModule_CommandFilterArgGet)(filter, pos)) };
        // SAFETY: as above.
        match unsafe { api!(RedisModule_CommandFilterArgsCount)(filter) } {
            2 if arg(0).eq_ignore_ascii_case(b"config") && arg(1).eq_ignore_ascii_case(b"resetstat") => {
                match client_of(filter).filter(|&id| in_multi(id)) {
                    Some(id) => QUEUED_BY.store(id, Ordering::Relaxed),
                    None => check_after_this_batch(),
                }
            }
            1 if QUEUED_BY.load(Ordering::Relaxed) != 0
                && arg(0).eq_ignore_ascii_case(b"exec")
                && client_of(filter) == Some(QUEUED_BY.load(Ordering::Relaxed)) =>
            {
                QUEUED_BY.store(0, Ordering::Relaxed);
                check_after_this_batch();
            }
            _ => {}
        }
    }));
}

/// The client that sent the filtered command, on servers that tell (Redis 7.2+, Valkey). On Redis
/// 7.0, a `CONFIG RESETSTAT` inside MULTI is checked for after the commands read with it: missed
/// unless its EXEC came with them (a pipelined transaction).
fn client_of(filter: *mut RedisModuleCommandFilterCtx) -> Option<u64> {
    // SAFETY: reading a pointer written once at load time; the filter's context is live.
    unsafe { raw::RedisModule_CommandFilterGetClientId }.map(|id_of| unsafe { id_of(filter) })
}

fn in_multi(id: u64) -> bool {
    // SAFETY: plain C data, filled by the server.
    let mut info: RedisModuleClientInfo = unsafe { std::mem::zeroed() };
    info.version = REDISMODULE_CLIENTINFO_VERSION as u64;
    // SAFETY: a version-1 struct, as the version field says.
    let found = unsafe { api!(RedisModule_GetClientInfoById)((&mut info as *mut RedisModuleClientInfo).cast(), id) };
    found == REDISMODULE_OK as c_int && info.flags & REDISMODULE_CLIENTINFO_FLAG_MULTI as u64 != 0
}

/// The server's count of commands now, and a timer to compare it with once the commands read in
/// this pass of the event loop (the RESETSTAT among them) have run.
fn check_after_this_batch() {
    let ctx = CONTEXT.load(Ordering::Relaxed);
    if ctx.is_null() {
        return;
    }
    let Some(before) = commands_processed(ctx) else { return };
    // SAFETY: the module's detached context; the data is a number, not a pointer.
    unsafe { api!(RedisModule_CreateTimer)(ctx, 0, Some(ran), before as usize as *mut c_void) };
}

unsafe extern "C" fn ran(ctx: *mut RedisModuleCtx, before: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if commands_processed(ctx).is_some_and(|now| now < before as usize as u64) {
            info::reset_counters();
        }
    }));
}

/// INFO's `total_commands_processed`.
fn commands_processed(ctx: *mut RedisModuleCtx) -> Option<u64> {
    // SAFETY: a live context of this module, and a static section name.
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
