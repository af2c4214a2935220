//! Module configs (Redis 7's `RedisModule_Register*Config`): settable on the `loadmodule` line or
//! in redis.conf after it, and with `CONFIG SET`/`CONFIG GET ratelimit.<name>`. Redis range-checks
//! numeric values before they reach the setters; a string config validates its own.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_longlong, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;

use redis_module::raw::{
    RedisModuleCtx, RedisModuleString, REDISMODULE_CONFIG_DEFAULT, REDISMODULE_ERR, REDISMODULE_OK,
};

use crate::redis::api::api;
use crate::redis::ctx::{bytes_of, Ctx};

/// One numeric config: its value lives in an atomic, read by the commands and the walk thread.
pub struct Setting {
    name: &'static CStr,
    value: AtomicI64,
    default: i64,
    min: i64,
    max: i64,
}

impl Setting {
    pub fn get(&self) -> i64 {
        self.value.load(Ordering::Relaxed)
    }
}

/// `ratelimit.audit-limit`: how many key names AUDIT and REPAIR list when no LIMIT is given.
pub static AUDIT_LIMIT: Setting =
    Setting { name: c"audit-limit", value: AtomicI64::new(100), default: 100, min: 0, max: 1_000_000 };

/// `ratelimit.walk-slice-us`: how long one slice of an AUDIT/REPAIR walk may hold the server
/// (microseconds): the longest other clients wait because of a walk.
pub static WALK_SLICE_US: Setting =
    Setting { name: c"walk-slice-us", value: AtomicI64::new(1_000), default: 1_000, min: 100, max: 100_000 };

/// `ratelimit.max-walks`: how many AUDIT/REPAIR walks may be in progress at once; past it a call
/// is refused. They share one thread and the server's time, so this bounds memory, not latency.
pub static MAX_WALKS: Setting =
    Setting { name: c"max-walks", value: AtomicI64::new(64), default: 64, min: 1, max: 100_000 };

/// `ratelimit.top-keys`: entries in each of RATELIMIT.TOP's summaries (two views, two intervals
/// each); 0 turns the tracking off. The default keeps the summaries' hot memory (about 14 KB each)
/// small beside the server's own in the CPU caches: a decision's cost depends more on that than
/// on the instructions.
pub static TOP_KEYS: Setting =
    Setting { name: c"top-keys", value: AtomicI64::new(128), default: 128, min: 0, max: 1_000_000 };

/// `ratelimit.top-interval`: the length of RATELIMIT.TOP's intervals, in seconds; an answer covers
/// the current one and the one before it.
pub static TOP_INTERVAL: Setting =
    Setting { name: c"top-interval", value: AtomicI64::new(60), default: 60, min: 1, max: 86_400 };

const SETTINGS: [&Setting; 5] = [&AUDIT_LIMIT, &WALK_SLICE_US, &MAX_WALKS, &TOP_KEYS, &TOP_INTERVAL];

/// A string config: its owner validates and takes each new value (`accept`, which answers the
/// reason for a refusal) and acts once it is in force (`apply`). The text itself is kept here,
/// since Redis asks the module for it on `CONFIG GET` and `CONFIG REWRITE`.
pub struct StringConfig {
    name: &'static CStr,
    accept: fn(&[u8]) -> Result<(), String>,
    apply: fn(&Ctx),
    text: Mutex<Text>,
}

/// The text as last set: a server string retained by the module (null before the first).
struct Text(*mut RedisModuleString);

// SAFETY: the pointer is used only under the mutex, on the main thread (config callbacks).
unsafe impl Send for Text {}

impl StringConfig {
    pub const fn new(name: &'static CStr, accept: fn(&[u8]) -> Result<(), String>, apply: fn(&Ctx)) -> StringConfig {
        StringConfig { name, accept, apply, text: Mutex::new(Text(ptr::null_mut())) }
    }
}

unsafe extern "C" fn get_number(_name: *const c_char, privdata: *mut c_void) -> c_longlong {
    // SAFETY: registered with a `&'static Setting` as its private data.
    unsafe { &*privdata.cast::<Setting>() }.get()
}

unsafe extern "C" fn set_number(
    _name: *const c_char,
    value: c_longlong,
    privdata: *mut c_void,
    _err: *mut *mut RedisModuleString,
) -> c_int {
    // SAFETY: registered with a `&'static Setting` as its private data.
    unsafe { &*privdata.cast::<Setting>() }.value.store(value, Ordering::Relaxed);
    REDISMODULE_OK as c_int
}

unsafe extern "C" fn get_text(_name: *const c_char, privdata: *mut c_void) -> *mut RedisModuleString {
    // SAFETY: registered with a `&'static StringConfig` as its private data.
    let config = unsafe { &*privdata.cast::<StringConfig>() };
    let mut text = config.text.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if text.0.is_null() {
        // SAFETY: a string with no context is the module's own, kept for the module's life.
        text.0 = unsafe { api!(RedisModule_CreateString)(ptr::null_mut(), c"".as_ptr(), 0) };
    }
    text.0
}

/// Validates and takes a new value; a bad one is refused with the reason, and the old one stays.
unsafe extern "C" fn set_text(
    _name: *const c_char,
    value: *mut RedisModuleString,
    privdata: *mut c_void,
    err: *mut *mut RedisModuleString,
) -> c_int {
    // SAFETY: registered with a `&'static StringConfig`; `value` lives through the callback.
    let (config, bytes) = unsafe { (&*privdata.cast::<StringConfig>(), bytes_of(value)) };
    let accepted =
        catch_unwind(AssertUnwindSafe(|| (config.accept)(bytes))).unwrap_or_else(|_| Err("internal error".into()));
    match accepted {
        Ok(()) => {
            let mut text = config.text.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            // SAFETY: retaining the server's string keeps it alive until we free it, below, when
            // the next value replaces it.
            unsafe {
                api!(RedisModule_RetainString)(ptr::null_mut(), value);
                let old = std::mem::replace(&mut text.0, value);
                if !old.is_null() {
                    api!(RedisModule_FreeString)(ptr::null_mut(), old);
                }
            }
            REDISMODULE_OK as c_int
        }
        Err(reason) => {
            let reason = format!("ratelimit.{}: {reason}", config.name.to_string_lossy());
            // SAFETY: the server frees the error string it is handed.
            unsafe { *err = api!(RedisModule_CreateString)(ptr::null_mut(), reason.as_ptr().cast(), reason.len()) };
            REDISMODULE_ERR as c_int
        }
    }
}

unsafe extern "C" fn apply_text(
    ctx: *mut RedisModuleCtx,
    privdata: *mut c_void,
    _err: *mut *mut RedisModuleString,
) -> c_int {
    // SAFETY: registered with a `&'static StringConfig`; `ctx` lives through the callback.
    let (config, ctx) = unsafe { (&*privdata.cast::<StringConfig>(), Ctx::from_raw(ctx)) };
    let _ = catch_unwind(AssertUnwindSafe(|| (config.apply)(&ctx)));
    REDISMODULE_OK as c_int
}

/// Registers every numeric setting and `strings`, then applies the values given at load time.
pub fn register(ctx: &Ctx, strings: &[&'static StringConfig]) -> Result<(), String> {
    for setting in SETTINGS {
        let privdata = (setting as *const Setting).cast_mut().cast::<c_void>();
        // SAFETY: the setting is static, so its address stays valid for the callbacks.
        let registered = unsafe {
            api!(RedisModule_RegisterNumericConfig)(
                ctx.raw(),
                setting.name.as_ptr(),
                setting.default,
                REDISMODULE_CONFIG_DEFAULT,
                setting.min,
                setting.max,
                Some(get_number),
                Some(set_number),
                None,
                privdata,
            )
        };
        if registered != REDISMODULE_OK as c_int {
            return Err(format!("could not register config {:?}", setting.name));
        }
    }
    for &config in strings {
        let privdata = (config as *const StringConfig).cast_mut().cast::<c_void>();
        // SAFETY: the config is static, so its address stays valid for the callbacks.
        let registered = unsafe {
            api!(RedisModule_RegisterStringConfig)(
                ctx.raw(),
                config.name.as_ptr(),
                c"".as_ptr(),
                REDISMODULE_CONFIG_DEFAULT,
                Some(get_text),
                Some(set_text),
                Some(apply_text),
                privdata,
            )
        };
        if registered != REDISMODULE_OK as c_int {
            return Err(format!("could not register config {:?}", config.name));
        }
    }
    // SAFETY: the module's own load-time context.
    match unsafe { api!(RedisModule_LoadConfigs)(ctx.raw()) } {
        s if s == REDISMODULE_OK as c_int => Ok(()),
        _ => Err("a ratelimit.* config given at load time was refused".into()),
    }
}
