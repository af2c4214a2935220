//! What the server that loaded us can do, read from its module API rather than from its name or
//! version: Redis 7.0 and 8.0, Valkey 8.1 and 9 differ in what they hand to modules, and each
//! difference is decided here once, at load time.

use std::ffi::CStr;
use std::os::raw::{c_int, c_void};
use std::ptr;

use redis_module::raw;

/// Valkey's `VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION` (Valkey 9): the module copes with
/// keys that arrive in slots being imported before they are the node's. The `redis-module` crate
/// does not know it; the bit means something only to a server that speaks Valkey's API.
pub const OPTION_HANDLE_ATOMIC_SLOT_MIGRATION: c_int = 1 << 5;

/// Whether the server exports Valkey's own API names: then Valkey's option bits and event ids
/// apply, which Redis may one day give other meanings.
fn speaks_valkey_api() -> bool {
    // SAFETY: reading a pointer written once at load time.
    let Some(get_api) = (unsafe { raw::RedisModule_GetApi }) else {
        return false;
    };
    let mut function: *mut c_void = ptr::null_mut();
    let name: &CStr = c"ValkeyModule_GetModuleOptionsAll";
    // SAFETY: GetApi writes one function pointer to the address given, or nothing.
    let found = unsafe { get_api(name.as_ptr(), (&mut function as *mut *mut c_void).cast()) };
    found == raw::REDISMODULE_OK as c_int && !function.is_null()
}

/// The module options this server knows, 0 where it cannot tell (Redis 7.0).
fn known_options() -> c_int {
    // SAFETY: the pointer, once resolved at load, is the server's own function, taking nothing.
    unsafe { raw::RedisModule_GetModuleOptionsAll }.map_or(0, |all| unsafe { all() })
}

/// Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`), which refuses to run while a loaded
/// module has not declared that it handles it.
pub fn has_atomic_slot_migration() -> bool {
    speaks_valkey_api() && known_options() & OPTION_HANDLE_ATOMIC_SLOT_MIGRATION != 0
}

/// Post-notification jobs (Redis 7.2+, Valkey): work that runs right after the command, script
/// or transaction whose writes it follows, inside the same atomic unit.
pub fn has_post_notification_jobs() -> bool {
    // SAFETY: reading a pointer written once at load time.
    unsafe { raw::RedisModule_AddPostNotificationJob }.is_some()
}

/// The command's cached time, to the microsecond (Redis 7.2+, Valkey): the time the server itself
/// checks expiries against during that command.
pub fn has_command_clock() -> bool {
    // SAFETY: reading a pointer written once at load time.
    unsafe { raw::RedisModule_CachedMicroseconds }.is_some()
}
