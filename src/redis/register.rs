//! Loading and unloading the module: the API check, the module's arguments and options, the
//! commands of the table, the configs, the subscriptions, INFO. The crate's root names what to
//! load (`module!`), so that this layer never reaches up into the commands.

use std::os::raw::c_int;

use redis_module::raw;
use redis_module::{Context, RedisString, Status};

use crate::redis::api::{self, api};
use crate::redis::command::{self, Command};
use crate::redis::config::{self, StringConfig};
use crate::redis::ctx::Ctx;
use crate::redis::{info, resetstat, server, slot_migration, walk};

/// What the module is made of.
pub struct Module {
    pub commands: &'static [Command],
    pub configs: &'static [&'static StringConfig],
    /// Runs once the configs given at load time are in force.
    pub loaded: fn(&Ctx),
}

/// The module arguments (`loadmodule <path> CL.THROTTLE`): which opt-in commands to register.
fn opted_in(commands: &[Command], args: &[RedisString]) -> Result<Vec<String>, String> {
    let known: Vec<&str> = commands.iter().filter_map(|c| c.opt_in).collect();
    args.iter()
        .map(|arg| {
            let arg = arg.to_string_lossy();
            match known.iter().find(|k| k.eq_ignore_ascii_case(&arg)) {
                Some(k) => Ok(k.to_string()),
                None => Err(format!("unknown module argument {arg:?} (the one known is {})", known.join(", "))),
            }
        })
        .collect()
}

pub fn on_load(module: &Module, context: &Context, args: &[RedisString]) -> Status {
    // SAFETY: the module's own load-time context, live through this call.
    let ctx = unsafe { Ctx::from_raw(context.ctx) };
    match load(module, &ctx, args) {
        Ok(()) => Status::Ok,
        Err(e) => {
            ctx.log_warning(&format!("ratelimit: {e}"));
            Status::Err
        }
    }
}

fn load(module: &Module, ctx: &Ctx, args: &[RedisString]) -> Result<(), String> {
    if let Some(name) = api::first_missing() {
        return Err(format!("this server lacks {name}; Redis 7.0 or later is required"));
    }
    let opted_in = opted_in(module.commands, args)?;
    // We signal WATCH ourselves, only when a counter really changed (a denied hit changes nothing).
    let mut options = raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as c_int;
    // Without it, Valkey 9 refuses CLUSTER MIGRATESLOTS while we are loaded (see slot_migration.rs).
    if server::has_atomic_slot_migration() {
        options |= server::OPTION_HANDLE_ATOMIC_SLOT_MIGRATION;
    }
    // SAFETY: the module's load-time context.
    unsafe { api!(RedisModule_SetModuleOptions)(ctx.raw(), options) };
    let own_category = command::add_acl_category(ctx);
    for row in module.commands {
        if row.opt_in.is_none_or(|arg| opted_in.iter().any(|a| a == arg)) {
            command::register(ctx, row, own_category)?;
        }
    }
    config::register(ctx, module.configs)?;
    resetstat::watch(ctx)?;
    (module.loaded)(ctx);
    // Only for the log and INFO: the guard and the walks do not depend on them.
    if !slot_migration::subscribe(ctx) {
        ctx.log_warning("ratelimit: could not subscribe to the atomic slot migration events");
    }
    // Replaces the crate's default INFO callback, which has nothing to say.
    // SAFETY: the module's load-time context; the callback is a plain function.
    unsafe { api!(RedisModule_RegisterInfoFunc)(ctx.raw(), Some(info::info)) };
    Ok(())
}

pub fn on_unload(context: &Context) -> Status {
    match walk::stop() {
        Ok(()) => {
            resetstat::stop();
            Status::Ok
        }
        Err(e) => {
            context.log_warning(&format!("ratelimit: cannot unload: {e}"));
            Status::Err
        }
    }
}

/// Quiets the `redis-module` crate on a server without defrag callbacks (Redis 7.0): the crate
/// warns on every load that it cannot register them, though this module registers none. Given to
/// the crate's macro as a data type, the one hook it runs between filling in the server's API and
/// that check; it creates no type, and where the server has the call it changes nothing.
pub struct NoDefragCallbacks;

impl NoDefragCallbacks {
    pub fn create_data_type(&self, _ctx: *mut raw::RedisModuleCtx) -> Result<(), &'static str> {
        // SAFETY: the crate's init filled in the server's API a moment ago, on the server's main
        // thread, which is the only one that reads or writes these pointers during a load.
        unsafe {
            if std::ptr::addr_of!(raw::RedisModule_RegisterDefragCallbacks).read().is_none() {
                raw::RedisModule_RegisterDefragCallbacks = Some(no_defrag_callbacks);
            }
        }
        Ok(())
    }
}

/// Stands in for the missing call: the crate calls it only to register callbacks, and with none
/// to register it never does; if it did, the load would fail rather than pretend.
unsafe extern "C" fn no_defrag_callbacks(
    _ctx: *mut raw::RedisModuleCtx,
    _start: raw::RedisModuleDefragFunc,
    _end: raw::RedisModuleDefragFunc,
) -> c_int {
    raw::REDISMODULE_ERR as c_int
}

/// The module's entry points for `$module` (a `Module`): Redis's, through the `redis-module`
/// crate, and Valkey's. Valkey looks for its own names first, and logs a module that has only the
/// Redis ones as a "Legacy Redis Module"; both servers pass the same context and arguments.
macro_rules! module {
    ($module:expr) => {
        fn on_load(ctx: &::redis_module::Context, args: &[::redis_module::RedisString]) -> ::redis_module::Status {
            $crate::redis::register::on_load(&$module, ctx, args)
        }

        fn on_unload(ctx: &::redis_module::Context) -> ::redis_module::Status {
            $crate::redis::register::on_unload(ctx)
        }

        // (The macro takes its data types by name.)
        const NO_DEFRAG_CALLBACKS: $crate::redis::register::NoDefragCallbacks =
            $crate::redis::register::NoDefragCallbacks;

        ::redis_module::redis_module! {
            name: "ratelimit",
            version: $crate::core::version::MODULE_VERSION,
            allocator: (::redis_module::alloc::RedisAlloc, ::redis_module::alloc::RedisAlloc),
            data_types: [NO_DEFRAG_CALLBACKS],
            init: on_load,
            deinit: on_unload,
        }

        /// # Safety
        /// Called by the server with its own arguments, as `RedisModule_OnLoad` is.
        #[no_mangle]
        pub unsafe extern "C" fn ValkeyModule_OnLoad(
            ctx: *mut ::redis_module::raw::RedisModuleCtx,
            argv: *mut *mut ::redis_module::raw::RedisModuleString,
            argc: ::std::os::raw::c_int,
        ) -> ::std::os::raw::c_int {
            // SAFETY: the server's own arguments to its module entry point, passed on unchanged.
            unsafe { RedisModule_OnLoad(ctx, argv, argc) }
        }

        #[no_mangle]
        pub extern "C" fn ValkeyModule_OnUnload(
            ctx: *mut ::redis_module::raw::RedisModuleCtx,
        ) -> ::std::os::raw::c_int {
            RedisModule_OnUnload(ctx)
        }
    };
}
pub(crate) use module;
