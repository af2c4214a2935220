//! Module configs (Redis 7 `RedisModule_RegisterNumericConfig`): settable on the `loadmodule`
//! line or in redis.conf after it, and with `CONFIG SET`/`CONFIG GET ratelimit.<name>`.
//! Redis range-checks the values before they reach the setters.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_longlong, c_void};
use std::sync::atomic::{AtomicI64, Ordering};

use redis_module::raw::{RedisModuleCtx, RedisModuleString, REDISMODULE_CONFIG_DEFAULT, REDISMODULE_OK};

use crate::command::api;

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

const SETTINGS: [&Setting; 3] = [&AUDIT_LIMIT, &WALK_SLICE_US, &MAX_WALKS];

unsafe extern "C" fn get(_name: *const c_char, privdata: *mut c_void) -> c_longlong {
    unsafe { &*privdata.cast::<Setting>() }.get()
}

unsafe extern "C" fn set(
    _name: *const c_char,
    value: c_longlong,
    privdata: *mut c_void,
    _err: *mut *mut RedisModuleString,
) -> c_int {
    unsafe { &*privdata.cast::<Setting>() }.value.store(value, Ordering::Relaxed);
    REDISMODULE_OK as c_int
}

/// Registers every setting (and the guard's rules), then applies the values given at load time.
pub fn register(ctx: *mut RedisModuleCtx) -> Result<(), String> {
    for setting in SETTINGS {
        let privdata = (setting as *const Setting).cast_mut().cast::<c_void>();
        let registered = unsafe {
            api!(RedisModule_RegisterNumericConfig)(
                ctx,
                setting.name.as_ptr(),
                setting.default,
                REDISMODULE_CONFIG_DEFAULT,
                setting.min,
                setting.max,
                Some(get),
                Some(set),
                None,
                privdata,
            )
        };
        if registered != REDISMODULE_OK as c_int {
            return Err(format!("could not register config {:?}", setting.name));
        }
    }
    crate::guard::register_config(ctx)?;
    match unsafe { api!(RedisModule_LoadConfigs)(ctx) } {
        s if s == REDISMODULE_OK as c_int => Ok(()),
        _ => Err("a ratelimit.* config given at load time was refused".into()),
    }
}
