//! `RATELIMIT.PEEK key limit [COST cost]`: what a hit would get, without making it.

use std::os::raw::c_int;

use redis_module::raw::{RedisModuleCtx, RedisModuleString};

use crate::args::parse_peek;
use crate::clock;
use crate::command::{arguments, reply_error, reply_integers};
use crate::counter_key::CounterKey;
use crate::stats;
use crate::window::peek as decide_peek;

/// # Safety
/// Called through `command::run` with the arguments Redis passed.
pub unsafe fn peek(ctx: *mut RedisModuleCtx, argv: &[*mut RedisModuleString]) -> c_int {
    let args = match parse_peek(unsafe { arguments(argv) }) {
        Ok(args) => args,
        Err(e) => return reply_error(ctx, &e.message()),
    };
    stats::PEEKS.add(1);
    let now = clock::command_now();
    let mut key = unsafe { CounterKey::open_read(ctx, argv[1]) };
    let counter = match key.read() {
        Ok(counter) => counter,
        Err(e) => return reply_error(ctx, e.message()),
    };
    drop(key);
    let o = decide_peek(args.limit, args.cost, counter, now.ms);
    reply_integers(ctx, &[i64::from(o.allowed), o.count, o.remaining, o.reset_ms])
}
