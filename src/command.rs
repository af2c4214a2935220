//! How Redis enters our commands: the panic guard, argument access and error replies.
//! A panic must never unwind into Redis (it would abort the server), so every handler runs here.

use std::ffi::CString;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::raw::{self, RedisModuleCtx, RedisModuleString};

/// A raw API function pointer, for use inside `unsafe`: the pointers are written once by
/// `RedisModule_Init`, before any command runs. `on_load` refuses to load the module unless every
/// pointer used was resolved, so the `expect` cannot fire on a server that loaded us.
macro_rules! api {
    ($name:ident) => {
        ::redis_module::raw::$name.expect(concat!("Redis module API without ", stringify!($name)))
    };
}
pub(crate) use api;

pub const OK: c_int = raw::REDISMODULE_OK as c_int;

pub type Handler = unsafe fn(*mut RedisModuleCtx, &[*mut RedisModuleString]) -> c_int;

/// Runs `handler` with the command's arguments (`args[0]` is the command name); a panic becomes
/// an error reply instead of a crashed server.
///
/// # Safety
/// `ctx`, `argv` and `argc` must be the ones Redis passed to the command callback.
pub unsafe fn run(ctx: *mut RedisModuleCtx, argv: *mut *mut RedisModuleString, argc: c_int, handler: Handler) -> c_int {
    let args: &[*mut RedisModuleString] = match usize::try_from(argc) {
        Ok(n) if !argv.is_null() => unsafe { std::slice::from_raw_parts(argv, n) },
        _ => &[],
    };
    match catch_unwind(AssertUnwindSafe(|| unsafe { handler(ctx, args) })) {
        Ok(status) => status,
        Err(_) => reply_error(ctx, "ERR ratelimit: internal error, see the server log"),
    }
}

/// The bytes of a Redis string, borrowed for as long as Redis keeps the string alive.
///
/// # Safety
/// `s` must be a live `RedisModuleString`.
pub unsafe fn bytes<'a>(s: *mut RedisModuleString) -> &'a [u8] {
    let mut len = 0;
    let ptr = unsafe { api!(RedisModule_StringPtrLen)(s, &mut len) };
    if ptr.is_null() {
        return &[];
    }
    unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
}

/// The arguments after the command name, as bytes, for the pure parsers.
///
/// # Safety
/// `argv` must be the live arguments of the command being executed.
pub unsafe fn arguments(argv: &[*mut RedisModuleString]) -> impl Iterator<Item = &[u8]> {
    argv.iter().skip(1).map(|&s| unsafe { bytes(s) })
}

pub fn reply_error(ctx: *mut RedisModuleCtx, message: &str) -> c_int {
    // Our messages hold no NUL; should one ever, the reply is cut there rather than lost.
    let end = message.find('\0').unwrap_or(message.len());
    let message = CString::new(&message[..end]).unwrap_or_default();
    unsafe { api!(RedisModule_ReplyWithError)(ctx, message.as_ptr()) }
}

pub fn reply_integers(ctx: *mut RedisModuleCtx, values: &[i64]) -> c_int {
    unsafe {
        api!(RedisModule_ReplyWithArray)(ctx, values.len() as _);
        for &v in values {
            api!(RedisModule_ReplyWithLongLong)(ctx, v);
        }
    }
    OK
}
