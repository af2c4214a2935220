//! `RATELIMIT.HIT key limit window [COST cost] [MS]`: parse, read the counter, decide, write, reply.

use std::os::raw::c_int;

use redis_module::raw::{RedisModuleCtx, RedisModuleString, REDISMODULE_CTX_FLAGS_OOM};

use crate::args::{parse_hit, ArgError, HitArgs};
use crate::command::{api, bytes, reply_error, reply_integers};
use crate::counter_key::{CounterKey, KeyError};
use crate::window::{decide, Counter, Outcome};

/// # Safety
/// Called through `command::run` with the arguments Redis passed.
pub unsafe fn hit(ctx: *mut RedisModuleCtx, argv: &[*mut RedisModuleString]) -> c_int {
    let args = match parse_hit(argv.iter().skip(1).map(|&s| unsafe { bytes(s) })) {
        Ok(args) => args,
        Err(e) => return reply_error(ctx, &e.message()),
    };
    let Some(&name) = argv.get(1) else {
        return reply_error(ctx, &ArgError::Arity("ratelimit.hit").message());
    };
    match unsafe { hit_counter(ctx, name, &args) } {
        Ok(o) => reply_integers(ctx, &[i64::from(o.allowed), o.count, o.remaining, o.reset_ms]),
        Err(e) => reply_error(ctx, e.message()),
    }
}

/// One hit on one counter, arguments already validated.
unsafe fn hit_counter(
    ctx: *mut RedisModuleCtx,
    name: *mut RedisModuleString,
    args: &HitArgs,
) -> Result<Outcome, KeyError> {
    // Redis 7.0 has no module call for the command's cached time (CachedMicroseconds is 7.2+).
    let now_ms = unsafe { api!(RedisModule_Milliseconds)() };
    let mut key = unsafe { CounterKey::open(ctx, name)? };
    let counter = key.read()?;
    // Not flagged deny-oom, so that existing counters keep limiting when memory is full (an
    // increment in place allocates nothing); only a new counter is refused.
    if counter == Counter::Missing && unsafe { out_of_memory(ctx) } {
        return Err(KeyError::OutOfMemory);
    }
    let outcome = decide(args, counter, now_ms);
    key.apply(&outcome.effects)?;
    Ok(outcome)
}

/// Whether the server is over `maxmemory` (asked only when a counter would be created: the
/// flags cost a memory-state computation when maxmemory is set).
unsafe fn out_of_memory(ctx: *mut RedisModuleCtx) -> bool {
    let flags = unsafe { api!(RedisModule_GetContextFlags)(ctx) } as u32;
    flags & REDISMODULE_CTX_FLAGS_OOM != 0
}
