//! The server's events, as safe callbacks: keyspace notifications, post-notification jobs, the
//! event loop's before-sleep, and the cron. Each C callback catches panics and hands a `Ctx` to a
//! plain Rust function registered once.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{OnceLock, RwLock};

use redis_module::raw::{
    self, RedisModuleCtx, RedisModuleEvent, RedisModuleString, REDISMODULE_EVENT_CRON_LOOP,
    REDISMODULE_EVENT_EVENTLOOP, REDISMODULE_NOTIFY_GENERIC, REDISMODULE_NOTIFY_STRING, REDISMODULE_NOTIFY_ZSET,
    REDISMODULE_OK, REDISMODULE_SUBEVENT_EVENTLOOP_BEFORE_SLEEP,
};

use crate::redis::api::api;
use crate::redis::ctx::{bytes_of, Ctx};

/// A write seen: the context, the event's name (`set`, `incrby`, `del`...) and the key's name.
pub type OnWrite = fn(&Ctx, &CStr, &[u8]);

static ON_WRITE: OnceLock<OnWrite> = OnceLock::new();
static BEFORE_SLEEP: OnceLock<fn(&Ctx)> = OnceLock::new();
/// Set again at each load: `MODULE UNLOAD` may leave the library mapped, and these statics with it,
/// while the server drops its subscriptions.
static CRON: RwLock<Option<fn(&Ctx)>> = RwLock::new(None);

/// Calls `on_write` for every string and generic keyspace event from now on (none can
/// unsubscribe). At most one subscriber.
pub fn subscribe_to_writes(ctx: &Ctx, on_write: OnWrite) -> Result<(), String> {
    ON_WRITE.set(on_write).map_err(|_| "already subscribed to keyspace events".to_string())?;
    let classes = (REDISMODULE_NOTIFY_STRING | REDISMODULE_NOTIFY_GENERIC | REDISMODULE_NOTIFY_ZSET) as c_int;
    // SAFETY: a live context; the callback is a plain function for the module's life.
    match unsafe { api!(RedisModule_SubscribeToKeyspaceEvents)(ctx.raw(), classes, Some(written)) } {
        s if s == REDISMODULE_OK as c_int => Ok(()),
        _ => Err("the server refused the keyspace event subscription".into()),
    }
}

unsafe extern "C" fn written(
    ctx: *mut RedisModuleCtx,
    _class: c_int,
    event: *const c_char,
    key: *mut RedisModuleString,
) -> c_int {
    if let Some(on_write) = ON_WRITE.get() {
        // SAFETY: the server's context, event name and key name, live through the callback.
        let (ctx, event, key) = unsafe { (Ctx::from_raw(ctx), CStr::from_ptr(event), bytes_of(key)) };
        let _ = catch_unwind(AssertUnwindSafe(|| on_write(&ctx, event, key)));
    }
    REDISMODULE_OK as c_int
}

/// Runs `job` once the current command, transaction or script is over, inside the same atomic
/// unit (servers with post-notification jobs: Redis 7.2+, Valkey). False if the server refused.
pub fn after_this_command(ctx: &Ctx, job: fn(&Ctx)) -> bool {
    // SAFETY: reading a pointer written once at load time.
    let Some(add_job) = (unsafe { raw::RedisModule_AddPostNotificationJob }) else {
        return false;
    };
    let privdata = job as *mut c_void;
    // SAFETY: a live context; the job's private data is a function pointer, valid forever.
    unsafe { add_job(ctx.raw(), Some(run_job), privdata, None) == REDISMODULE_OK as c_int }
}

unsafe extern "C" fn run_job(ctx: *mut RedisModuleCtx, privdata: *mut c_void) {
    // SAFETY: `privdata` is the `fn(&Ctx)` given to `after_this_command`; the context is live
    // through the callback.
    let (job, ctx) = unsafe { (std::mem::transmute::<*mut c_void, fn(&Ctx)>(privdata), Ctx::from_raw(ctx)) };
    let _ = catch_unwind(AssertUnwindSafe(|| job(&ctx)));
}

/// Calls `f` each time the event loop is about to wait for input (every server has this event).
pub fn subscribe_to_before_sleep(ctx: &Ctx, f: fn(&Ctx)) -> Result<(), String> {
    BEFORE_SLEEP.set(f).map_err(|_| "already subscribed to the event loop".to_string())?;
    let event_loop = RedisModuleEvent { id: REDISMODULE_EVENT_EVENTLOOP, dataver: 1 };
    // SAFETY: a live context; the callback is a plain function for the module's life.
    match unsafe { api!(RedisModule_SubscribeToServerEvent)(ctx.raw(), event_loop, Some(before_sleep)) } {
        s if s == REDISMODULE_OK as c_int => Ok(()),
        _ => Err("the server refused the event loop subscription".into()),
    }
}

unsafe extern "C" fn before_sleep(
    ctx: *mut RedisModuleCtx,
    _event: RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    if let (REDISMODULE_SUBEVENT_EVENTLOOP_BEFORE_SLEEP, Some(f)) = (subevent, BEFORE_SLEEP.get()) {
        // SAFETY: the server's context, live through the callback.
        let ctx = unsafe { Ctx::from_raw(ctx) };
        let _ = catch_unwind(AssertUnwindSafe(|| f(&ctx)));
    }
}

/// Calls `f` at each run of the server's cron (`hz` times a second, 10 by default), in place of
/// any function given before.
pub fn subscribe_to_cron(ctx: &Ctx, f: fn(&Ctx)) -> Result<(), String> {
    *CRON.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(f);
    let cron = RedisModuleEvent { id: REDISMODULE_EVENT_CRON_LOOP, dataver: 1 };
    // SAFETY: a live context; the callback is a plain function for the module's life.
    match unsafe { api!(RedisModule_SubscribeToServerEvent)(ctx.raw(), cron, Some(cron_ran)) } {
        s if s == REDISMODULE_OK as c_int => Ok(()),
        _ => Err("the server refused the cron subscription".into()),
    }
}

unsafe extern "C" fn cron_ran(ctx: *mut RedisModuleCtx, _event: RedisModuleEvent, _subevent: u64, _data: *mut c_void) {
    let f = *CRON.read().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(f) = f {
        // SAFETY: the server's context, live through the callback.
        let ctx = unsafe { Ctx::from_raw(ctx) };
        let _ = catch_unwind(AssertUnwindSafe(|| f(&ctx)));
    }
}
