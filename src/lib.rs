//! redis-ratelimit: an atomic fixed-window rate limiter as native Redis commands.
//!
//! Pure logic (no Redis types): `decimal`, `args`, `window` (fixed window), `gcra`,
//! `audit_filter`, `guard_rules`. Redis glue: `server` (what the server can do), `clock` (the time
//! a command decides with), `command` (entry and replies), `counter_key` (the counter in the
//! keyspace), the commands (`hit`, `peek`, `throttle`, `audit` over `walk`), the `guard`,
//! `slot_migration`, `stats`, `config`, `command_docs`, and the module registration below.

mod args;
mod audit_filter;
mod decimal;
mod gcra;
mod guard_rules;
mod window;

#[cfg(not(test))]
mod audit;
#[cfg(not(test))]
mod clock;
#[cfg(not(test))]
mod command;
#[cfg(not(test))]
mod command_docs;
#[cfg(not(test))]
mod config;
#[cfg(not(test))]
mod counter_key;
#[cfg(not(test))]
mod guard;
#[cfg(not(test))]
mod hit;
#[cfg(not(test))]
mod peek;
#[cfg(not(test))]
mod server;
#[cfg(not(test))]
mod slot_migration;
#[cfg(not(test))]
mod stats;
#[cfg(not(test))]
mod throttle;
#[cfg(not(test))]
mod walk;

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
            RedisModule_GetContextFlags,
            RedisModule_GetSelectedDb,
            RedisModule_SelectDb,
            RedisModule_BlockClient,
            RedisModule_UnblockClient,
            RedisModule_SetDisconnectCallback,
            RedisModule_GetBlockedClientPrivateData,
            RedisModule_GetThreadSafeContext,
            RedisModule_FreeThreadSafeContext,
            RedisModule_ThreadSafeContextLock,
            RedisModule_ThreadSafeContextUnlock,
            RedisModule_ScanCursorCreate,
            RedisModule_ScanCursorDestroy,
            RedisModule_Scan,
            RedisModule_Call,
            RedisModule_CallReplyStringPtr,
            RedisModule_FreeCallReply,
            RedisModule_CreateString,
            RedisModule_FreeString,
            RedisModule_GetCurrentUserName,
            RedisModule_GetModuleUserFromUserName,
            RedisModule_FreeModuleUser,
            RedisModule_ACLCheckKeyPermissions,
            RedisModule_ReplyWithMap,
            RedisModule_ReplyWithCString,
            RedisModule_ReplyWithStringBuffer,
            RedisModule_RegisterInfoFunc,
            RedisModule_GetCommand,
            RedisModule_SetCommandInfo,
            RedisModule_RegisterNumericConfig,
            RedisModule_LoadConfigs,
            RedisModule_IsKeysPositionRequest,
            RedisModule_KeyAtPos,
            RedisModule_InfoAddSection,
            RedisModule_InfoAddFieldULongLong,
            RedisModule_InfoAddFieldCString,
            RedisModule_RegisterStringConfig,
            RedisModule_RetainString,
            RedisModule_SubscribeToKeyspaceEvents,
            RedisModule_SubscribeToServerEvent,
            RedisModule_Log,
        );
        None
    }

    /// The C entry points Redis calls, one per command.
    macro_rules! entry_points {
        ($($entry:ident => $handler:path),* $(,)?) => {$(
            extern "C" fn $entry(ctx: *mut RedisModuleCtx, argv: *mut *mut RedisModuleString, argc: c_int) -> c_int {
                unsafe { command::run(ctx, argv, argc, $handler) }
            }
        )*};
    }
    entry_points! {
        hit_command => crate::hit::hit,
        hitall_command => crate::hit::hitall,
        peek_command => crate::peek::peek,
        gcra_command => crate::throttle::gcra,
        cl_throttle_command => crate::throttle::cl_throttle,
        audit_command => crate::audit::audit,
        repair_command => crate::audit::repair,
    }

    type Entry = extern "C" fn(*mut RedisModuleCtx, *mut *mut RedisModuleString, c_int) -> c_int;

    /// `first_key`: the position of the command's one key, 0 for commands without keys.
    fn create_command(ctx: &Context, name: &CStr, handler: Entry, flags: &CStr, first_key: c_int) -> Status {
        let created = unsafe {
            api!(RedisModule_CreateCommand)(
                ctx.ctx,
                name.as_ptr(),
                Some(handler),
                flags.as_ptr(),
                first_key,
                first_key,
                first_key,
            )
        };
        if created == raw::REDISMODULE_OK as c_int {
            Status::Ok
        } else {
            ctx.log_warning(&format!("ratelimit: could not create command {name:?}"));
            Status::Err
        }
    }

    /// The module arguments (`loadmodule <path> CL.THROTTLE`): whether to answer redis-cell's
    /// command too. Off by default, so that it never collides with a loaded redis-cell.
    fn cl_throttle_wanted(args: &[RedisString]) -> Result<bool, String> {
        let mut wanted = false;
        for arg in args {
            match arg.to_string_lossy() {
                a if a.eq_ignore_ascii_case("CL.THROTTLE") => wanted = true,
                a => return Err(format!("unknown module argument {a:?} (the one known is CL.THROTTLE)")),
            }
        }
        Ok(wanted)
    }

    fn on_load(ctx: &Context, args: &[RedisString]) -> Status {
        if let Some(name) = first_missing_api() {
            ctx.log_warning(&format!("ratelimit: this server lacks {name}; Redis 7.0 or later is required"));
            return Status::Err;
        }
        let cl_throttle = match cl_throttle_wanted(args) {
            Ok(wanted) => wanted,
            Err(e) => {
                ctx.log_warning(&format!("ratelimit: {e}"));
                return Status::Err;
            }
        };
        // We signal WATCH ourselves, only when a counter really changed (a denied hit changes nothing).
        let mut options = raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as c_int;
        // Without it, Valkey 9 refuses CLUSTER MIGRATESLOTS while we are loaded (see slot_migration.rs).
        if crate::server::has_atomic_slot_migration() {
            options |= crate::server::OPTION_HANDLE_ATOMIC_SLOT_MIGRATION;
        }
        unsafe { api!(RedisModule_SetModuleOptions)(ctx.ctx, options) };
        let commands: [(&CStr, Entry, &CStr, c_int); 6] = [
            // Not deny-oom: over maxmemory only new counters are refused (see counter_key.rs).
            (c"ratelimit.hit", hit_command, c"write fast", 1),
            // Keys given by numkeys: a key spec (set with the command docs) for COMMAND GETKEYS and
            // ACLs, and getkeys-api for 7.0's cluster routing, which reads only that.
            (c"ratelimit.hitall", hitall_command, c"write getkeys-api", 0),
            (c"ratelimit.peek", peek_command, c"readonly fast", 1),
            // As HIT: over maxmemory only new buckets are refused.
            (c"ratelimit.gcra", gcra_command, c"write fast", 1),
            // Read-only, so that replicas can be audited; no keys, so it runs on any cluster node.
            (c"ratelimit.audit", audit_command, c"readonly", 0),
            // Not deny-oom: giving leaked counters a TTL is how memory comes back.
            (c"ratelimit.repair", repair_command, c"write", 0),
        ];
        for (name, entry, flags, first_key) in commands {
            if create_command(ctx, name, entry, flags, first_key) == Status::Err {
                return Status::Err;
            }
        }
        // redis-cell registered it `write`; `fast` as GCRA's, and its key for cluster routing.
        if cl_throttle && create_command(ctx, c"cl.throttle", cl_throttle_command, c"write fast", 1) == Status::Err {
            return Status::Err;
        }
        if let Err(e) = crate::config::register(ctx.ctx) {
            ctx.log_warning(&format!("ratelimit: {e}"));
            return Status::Err;
        }
        // Rules given at load time (redis.conf, the command line).
        unsafe { crate::guard::subscribe_when_ruled(ctx.ctx) };
        // Only for the log and INFO: the guard and the walks do not depend on them.
        if !unsafe { crate::slot_migration::subscribe(ctx.ctx) } {
            ctx.log_warning("ratelimit: could not subscribe to the atomic slot migration events");
        }
        if let Err(e) = crate::command_docs::set_all(ctx.ctx) {
            ctx.log_warning(&format!("ratelimit: {e}"));
            return Status::Err;
        }
        // Replaces the crate's default INFO callback, which has nothing to say.
        unsafe { api!(RedisModule_RegisterInfoFunc)(ctx.ctx, Some(crate::stats::info)) };
        Status::Ok
    }

    fn on_unload(ctx: &Context) -> Status {
        match crate::walk::stop() {
            Ok(()) => Status::Ok,
            Err(e) => {
                ctx.log_warning(&format!("ratelimit: cannot unload: {e}"));
                Status::Err
            }
        }
    }

    /// Valkey looks for its own entry point names first, and logs a module that only has the Redis
    /// ones as a "Legacy Redis Module". Both servers pass the same context and arguments.
    #[no_mangle]
    pub extern "C" fn ValkeyModule_OnLoad(
        ctx: *mut RedisModuleCtx,
        argv: *mut *mut RedisModuleString,
        argc: c_int,
    ) -> c_int {
        // SAFETY: the server's own arguments to its module entry point, passed on unchanged.
        unsafe { RedisModule_OnLoad(ctx, argv, argc) }
    }

    #[no_mangle]
    pub extern "C" fn ValkeyModule_OnUnload(ctx: *mut RedisModuleCtx) -> c_int {
        RedisModule_OnUnload(ctx)
    }

    redis_module::redis_module! {
        name: "ratelimit",
        version: 1,
        allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
        data_types: [],
        init: on_load,
        deinit: on_unload,
    }
}
