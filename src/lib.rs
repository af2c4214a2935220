//! redis-ratelimit: an atomic fixed-window rate limiter as native Redis commands.
//!
//! Pure logic (no Redis types): `decimal`, `args`, `window`. Redis glue: `command` (entry and
//! replies), `counter_key` (the counter in the keyspace), `hit` (the command), and the module
//! registration below.

mod args;
mod decimal;
mod window;

#[cfg(not(test))]
mod command;
#[cfg(not(test))]
mod counter_key;
#[cfg(not(test))]
mod hit;

// Registration is compiled out of unit tests: the module's allocator needs a running Redis.
#[cfg(not(test))]
mod module {
    use std::ffi::CStr;
    use std::os::raw::c_int;

    use redis_module::raw::{self, RedisModuleCtx, RedisModuleString};
    use redis_module::{Context, RedisString, Status};

    use crate::command::{self, api};

    /// Every raw API function the commands call; a server lacking one is refused at load time
    /// rather than failing later in a command.
    fn first_missing_api() -> Option<&'static str> {
        macro_rules! check {
            ($($name:ident),* $(,)?) => {
                $(if unsafe { raw::$name }.is_none() { return Some(stringify!($name)); })*
            };
        }
        check!(
            RedisModule_CreateCommand,
            RedisModule_SetModuleOptions,
            RedisModule_StringPtrLen,
            RedisModule_ReplyWithError,
            RedisModule_ReplyWithArray,
            RedisModule_ReplyWithLongLong,
            RedisModule_Milliseconds,
            RedisModule_OpenKey,
            RedisModule_CloseKey,
            RedisModule_KeyType,
            RedisModule_ValueLength,
            RedisModule_StringDMA,
            RedisModule_StringTruncate,
            RedisModule_GetAbsExpire,
            RedisModule_SetAbsExpire,
            RedisModule_Replicate,
            RedisModule_NotifyKeyspaceEvent,
            RedisModule_SignalModifiedKey,
        );
        None
    }

    extern "C" fn hit_command(
        ctx: *mut RedisModuleCtx,
        argv: *mut *mut RedisModuleString,
        argc: c_int,
    ) -> c_int {
        unsafe { command::run(ctx, argv, argc, crate::hit::hit) }
    }

    fn create_command(
        ctx: &Context,
        name: &CStr,
        handler: extern "C" fn(*mut RedisModuleCtx, *mut *mut RedisModuleString, c_int) -> c_int,
        flags: &CStr,
    ) -> Status {
        let created = unsafe {
            api!(RedisModule_CreateCommand)(ctx.ctx, name.as_ptr(), Some(handler), flags.as_ptr(), 1, 1, 1)
        };
        if created == raw::REDISMODULE_OK as c_int {
            Status::Ok
        } else {
            ctx.log_warning(&format!("ratelimit: could not create command {name:?}"));
            Status::Err
        }
    }

    fn on_load(ctx: &Context, _args: &[RedisString]) -> Status {
        if let Some(name) = first_missing_api() {
            ctx.log_warning(&format!("ratelimit: this server lacks {name}; Redis 7.0 or later is required"));
            return Status::Err;
        }
        // We signal WATCH ourselves, only when a counter really changed (a denied hit changes nothing).
        unsafe {
            api!(RedisModule_SetModuleOptions)(ctx.ctx, raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as c_int)
        };
        create_command(ctx, c"ratelimit.hit", hit_command, c"write deny-oom fast")
    }

    redis_module::redis_module! {
        name: "ratelimit",
        version: 1,
        allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
        data_types: [],
        init: on_load,
    }
}
