//! `RATELIMIT.HIT key limit window [COST cost] [MS]`: parse, read the counter, decide, write, reply.

use std::os::raw::c_int;

use redis_module::raw::{RedisModuleCtx, RedisModuleString};

use crate::args::{parse_hit, ArgError};
use crate::command::{api, bytes, reply_error, reply_integers};
use crate::counter_key::CounterKey;
use crate::window::decide;

/// # Safety
/// Called through `command::run` with the arguments Redis passed.
pub unsafe fn hit(ctx: *mut RedisModuleCtx, argv: &[*mut RedisModuleString]) -> c_int {
    let parsed = parse_hit(argv.iter().skip(1).map(|&s| unsafe { bytes(s) }));
    let args = match parsed {
        Ok(args) => args,
        Err(e) => return reply_error(ctx, e.message()),
    };
    let Some(&name) = argv.get(1) else {
        return reply_error(ctx, ArgError::Arity.message());
    };
    // Redis 7.0 has no module call for the command's cached time (CachedMicroseconds is 7.2+).
    let now_ms = unsafe { api!(RedisModule_Milliseconds)() };

    let mut key = unsafe { CounterKey::open(ctx, name) };
    let counter = match key.read() {
        Ok(counter) => counter,
        Err(e) => return reply_error(ctx, e.message()),
    };
    let outcome = decide(&args, counter, now_ms);
    if let Err(e) = key.apply(&outcome) {
        return reply_error(ctx, e.message());
    }
    drop(key);
    reply_integers(
        ctx,
        &[i64::from(outcome.allowed), outcome.count, outcome.remaining, outcome.reset_ms],
    )
}
