//! The guard: under the prefixes of `ratelimit.guard`, a counter (an integer string) never stays
//! without a TTL, whichever client wrote it.
//!
//! Writes are seen through keyspace events, subscribed the first time rules are set (a server
//! without rules pays nothing; none can unsubscribe). The event callback only records the key.
//! The check and the heal run once the whole command, transaction or script that wrote is over:
//! in a post-notification job where the server has them (Redis 7.2+, Valkey), atomic with the
//! write and replicated with it; on Redis 7.0 in the event loop's before-sleep, before the server
//! waits for more input. So `MULTI; INCR; EXPIRE NX; EXEC` and scripts that set their own expiry
//! are left as they set themselves. Nothing is recorded on a replica (the primary's heals arrive
//! through replication), while the server loads its data (a replay reproduces, not re-decides), or
//! for keys arriving by Valkey 9's atomic slot migration (the source's guard decided for them).

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, RwLock};

use redis_module::raw::{
    self, RedisModuleCtx, RedisModuleEvent, RedisModuleString, REDISMODULE_CONFIG_DEFAULT,
    REDISMODULE_CTX_FLAGS_LOADING, REDISMODULE_CTX_FLAGS_REPLICATED, REDISMODULE_CTX_FLAGS_SLAVE, REDISMODULE_ERR,
    REDISMODULE_EVENT_EVENTLOOP, REDISMODULE_NOTIFY_GENERIC, REDISMODULE_NOTIFY_STRING, REDISMODULE_OK,
    REDISMODULE_SUBEVENT_EVENTLOOP_BEFORE_SLEEP,
};

use crate::clock;
use crate::command::{api, bytes};
use crate::counter_key::{announcing, heal_if_leaked};
use crate::guard_rules::Rules;
use crate::server;
use crate::stats;

static RULES: RwLock<Rules> = RwLock::new(Rules::none());

/// The config's text as last set (a retained `RedisModuleString`, 0 for none): Redis asks the
/// module for it on `CONFIG GET` and `CONFIG REWRITE`.
static TEXT: Mutex<usize> = Mutex::new(0);

/// A key written under a guarded prefix, to check once its writer is done.
struct Written {
    db: c_int,
    key: Vec<u8>,
    window_ms: i64,
}

static WRITTEN: Mutex<Vec<Written>> = Mutex::new(Vec::new());
static SUBSCRIBED: AtomicBool = AtomicBool::new(false);
/// A post-notification job is queued for the current execution unit.
static JOB_QUEUED: AtomicBool = AtomicBool::new(false);

/// Heals not yet in the log, and when the log last spoke (at most once a second).
struct HealLog {
    first: Option<Vec<u8>>,
    more: u64,
    last_ms: i64,
}

static HEAL_LOG: Mutex<HealLog> = Mutex::new(HealLog { first: None, more: 0, last_ms: i64::MIN });

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn rules() -> std::sync::RwLockReadGuard<'static, Rules> {
    RULES.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Registers `ratelimit.guard`, before the module's configs are loaded.
pub fn register_config(ctx: *mut RedisModuleCtx) -> Result<(), String> {
    let registered = unsafe {
        api!(RedisModule_RegisterStringConfig)(
            ctx,
            c"guard".as_ptr(),
            c"".as_ptr(),
            REDISMODULE_CONFIG_DEFAULT,
            Some(get_text),
            Some(set_text),
            Some(apply),
            ptr::null_mut(),
        )
    };
    match registered {
        r if r == REDISMODULE_OK as c_int => Ok(()),
        _ => Err("could not register config \"guard\"".into()),
    }
}

unsafe extern "C" fn get_text(_name: *const c_char, _privdata: *mut c_void) -> *mut RedisModuleString {
    let mut text = locked(&TEXT);
    if *text == 0 {
        *text = unsafe { api!(RedisModule_CreateString)(ptr::null_mut(), c"".as_ptr(), 0) } as usize;
    }
    *text as *mut RedisModuleString
}

/// Validates and takes new rules; a bad value is refused with the reason, and the old rules stay.
unsafe extern "C" fn set_text(
    _name: *const c_char,
    value: *mut RedisModuleString,
    _privdata: *mut c_void,
    err: *mut *mut RedisModuleString,
) -> c_int {
    let parsed = catch_unwind(AssertUnwindSafe(|| Rules::parse(unsafe { bytes(value) })))
        .unwrap_or_else(|_| Err("internal error".into()));
    match parsed {
        Ok(parsed) => {
            *RULES.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = parsed;
            unsafe { api!(RedisModule_RetainString)(ptr::null_mut(), value) };
            let old = std::mem::replace(&mut *locked(&TEXT), value as usize);
            if old != 0 {
                unsafe { api!(RedisModule_FreeString)(ptr::null_mut(), old as *mut RedisModuleString) };
            }
            REDISMODULE_OK as c_int
        }
        Err(reason) => {
            let reason = format!("ratelimit.guard: {reason}");
            unsafe { *err = api!(RedisModule_CreateString)(ptr::null_mut(), reason.as_ptr().cast(), reason.len()) };
            REDISMODULE_ERR as c_int
        }
    }
}

unsafe extern "C" fn apply(
    ctx: *mut RedisModuleCtx,
    _privdata: *mut c_void,
    _err: *mut *mut RedisModuleString,
) -> c_int {
    unsafe { subscribe_when_ruled(ctx) };
    REDISMODULE_OK as c_int
}

/// Subscribes to writes the first time there are rules (at load time or on `CONFIG SET`).
///
/// # Safety
/// `ctx` must be a context of this module, on the main thread.
pub unsafe fn subscribe_when_ruled(ctx: *mut RedisModuleCtx) {
    if rules().is_empty() || SUBSCRIBED.swap(true, Ordering::Relaxed) {
        return;
    }
    let classes = (REDISMODULE_NOTIFY_STRING | REDISMODULE_NOTIFY_GENERIC) as c_int;
    unsafe { api!(RedisModule_SubscribeToKeyspaceEvents)(ctx, classes, Some(written)) };
    if !server::has_post_notification_jobs() {
        let event_loop = RedisModuleEvent { id: REDISMODULE_EVENT_EVENTLOOP, dataver: 1 };
        unsafe { api!(RedisModule_SubscribeToServerEvent)(ctx, event_loop, Some(before_sleep)) };
    }
}

/// Events that never leave a key without a TTL behind them.
const HARMLESS: [&CStr; 5] = [c"del", c"expire", c"rename_from", c"move_from", c"evicted"];

/// The keyspace-event callback: inside the writing command, so it only records the key.
unsafe extern "C" fn written(
    ctx: *mut RedisModuleCtx,
    _class: c_int,
    event: *const c_char,
    key: *mut RedisModuleString,
) -> c_int {
    // The module's own writes (HIT, GCRA, REPAIR, the guard's heals) always leave a TTL.
    if announcing() {
        return REDISMODULE_OK as c_int;
    }
    let recorded = catch_unwind(AssertUnwindSafe(|| unsafe { record(ctx, event, key) }));
    if recorded.is_ok_and(|queued| queued) {
        if let Some(add_job) = unsafe { raw::RedisModule_AddPostNotificationJob } {
            // A job refused (it should not be) must not leave the flag set and the guard dead.
            if !JOB_QUEUED.swap(true, Ordering::Relaxed)
                && unsafe { add_job(ctx, Some(post_job), ptr::null_mut(), None) } != REDISMODULE_OK as c_int
            {
                JOB_QUEUED.store(false, Ordering::Relaxed);
            }
        }
    }
    REDISMODULE_OK as c_int
}

/// Records `key` if it is under a guarded prefix; true if it did.
unsafe fn record(ctx: *mut RedisModuleCtx, event: *const c_char, key: *mut RedisModuleString) -> bool {
    let name = unsafe { bytes(key) };
    let Some(window_ms) = rules().window_for(name) else {
        return false;
    };
    if !event.is_null() && HARMLESS.contains(&unsafe { CStr::from_ptr(event) }) {
        return false;
    }
    // Reproductions, not decisions: on a replica, while loading, and for writes that arrive over a
    // link (Valkey 9 flags a slot import's as replicated too: its keys are not yet this node's).
    let flags = unsafe { api!(RedisModule_GetContextFlags)(ctx) } as u32;
    if flags & (REDISMODULE_CTX_FLAGS_SLAVE | REDISMODULE_CTX_FLAGS_LOADING | REDISMODULE_CTX_FLAGS_REPLICATED) != 0 {
        return false;
    }
    let db = unsafe { api!(RedisModule_GetSelectedDb)(ctx) };
    locked(&WRITTEN).push(Written { db, key: name.to_vec(), window_ms });
    true
}

unsafe extern "C" fn post_job(ctx: *mut RedisModuleCtx, _privdata: *mut c_void) {
    JOB_QUEUED.store(false, Ordering::Relaxed);
    let _ = catch_unwind(AssertUnwindSafe(|| unsafe { heal_written(ctx) }));
}

unsafe extern "C" fn before_sleep(
    ctx: *mut RedisModuleCtx,
    _event: RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    if subevent == REDISMODULE_SUBEVENT_EVENTLOOP_BEFORE_SLEEP && !locked(&WRITTEN).is_empty() {
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe { heal_written(ctx) }));
    }
}

/// Checks every recorded key and gives a TTL to each counter that has none.
unsafe fn heal_written(ctx: *mut RedisModuleCtx) {
    let written = std::mem::take(&mut *locked(&WRITTEN));
    if written.is_empty() {
        return;
    }
    let selected = unsafe { api!(RedisModule_GetSelectedDb)(ctx) };
    let now = clock::command_now();
    for Written { db, key, window_ms } in written {
        stats::GUARD_CHECKED.add(1);
        if unsafe { api!(RedisModule_SelectDb)(ctx, db) } != REDISMODULE_OK as c_int {
            continue;
        }
        if unsafe { heal_if_leaked(ctx, &key, window_ms, now.ms) } {
            stats::GUARD_HEALS.add(1);
            unsafe { note_heal(ctx, key) };
        }
    }
    unsafe { api!(RedisModule_SelectDb)(ctx, selected) };
}

/// Tells the log, at most once a second, that some client still writes counters without TTL.
unsafe fn note_heal(ctx: *mut RedisModuleCtx, key: Vec<u8>) {
    let now_ms = clock::wall_ms();
    let mut log = locked(&HEAL_LOG);
    match &log.first {
        None => log.first = Some(key),
        Some(_) => log.more += 1,
    }
    if now_ms.saturating_sub(log.last_ms) < 1_000 {
        return;
    }
    let first = String::from_utf8_lossy(log.first.as_deref().unwrap_or_default()).into_owned();
    let more = match log.more {
        0 => String::new(),
        n => format!(" and {n} more since the last notice"),
    };
    let line =
        format!("ratelimit guard: gave a TTL to counter '{first}'{more}: a client writes counters without expiry");
    (log.first, log.more, log.last_ms) = (None, 0, now_ms);
    drop(log);
    if let Ok(line) = std::ffi::CString::new(line) {
        unsafe { api!(RedisModule_Log)(ctx, c"notice".as_ptr(), c"%s".as_ptr(), line.as_ptr()) };
    }
}
