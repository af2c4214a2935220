//! `RATELIMIT.GCRA key max_burst tokens_per_period period [TOKENS count]`: parse, read the
//! bucket's TAT, decide, write, reply `[limited, capacity, remaining, retry_after_ms,
//! full_after_ms]`. And `CL.THROTTLE key max_burst count_per_period period [quantity]`, for
//! redis-cell's users: the same bucket and decision, redis-cell's arguments and reply (whole
//! seconds, truncated as redis-cell truncates them).

use std::os::raw::c_int;

use redis_module::raw::{RedisModuleCtx, RedisModuleString};

use crate::args::{parse_cl_throttle, parse_gcra, ArgError};
use crate::clock;
use crate::command::{arguments, reply_error, reply_integers};
use crate::counter_key::{refuse_new_counter_over_maxmemory, CounterKey, KeyError};
use crate::gcra::{decide, Bucket, Outcome, Rate, Write};
use crate::stats;
use crate::window::{Counter, Effects};

/// # Safety
/// Called through `command::run` with the arguments Redis passed.
pub unsafe fn gcra(ctx: *mut RedisModuleCtx, argv: &[*mut RedisModuleString]) -> c_int {
    let rate = parse_gcra(unsafe { arguments(argv) });
    unsafe {
        answer(ctx, argv, rate, |rate, o| {
            [i64::from(o.limited), rate.capacity, o.remaining, o.retry_after_ms(), o.full_after_ms()]
        })
    }
}

/// # Safety
/// Called through `command::run` with the arguments Redis passed.
pub unsafe fn cl_throttle(ctx: *mut RedisModuleCtx, argv: &[*mut RedisModuleString]) -> c_int {
    const NS_PER_S: i64 = 1_000_000_000;
    let rate = parse_cl_throttle(unsafe { arguments(argv) });
    unsafe {
        answer(ctx, argv, rate, |rate, o| {
            let retry_after_s = o.retry_after_ns.map_or(-1, |ns| ns / NS_PER_S);
            [i64::from(o.limited), rate.capacity, o.remaining, retry_after_s, o.full_after_ns / NS_PER_S]
        })
    }
}

/// Takes the tokens of a parsed request from the bucket at `argv[1]` and replies with `numbers`
/// of the outcome.
unsafe fn answer(
    ctx: *mut RedisModuleCtx,
    argv: &[*mut RedisModuleString],
    rate: Result<Rate, ArgError>,
    numbers: impl Fn(&Rate, &Outcome) -> [i64; 5],
) -> c_int {
    let rate = match rate {
        Ok(rate) => rate,
        Err(e) => return reply_error(ctx, &e.message()),
    };
    match unsafe { throttle(ctx, argv[1], &rate) } {
        Ok(o) => reply_integers(ctx, &numbers(&rate, &o)),
        Err(e) => reply_error(ctx, e.message()),
    }
}

/// One request against the bucket at `name`, arguments already validated.
unsafe fn throttle(ctx: *mut RedisModuleCtx, name: *mut RedisModuleString, rate: &Rate) -> Result<Outcome, KeyError> {
    let now = clock::command_now();
    let mut key = unsafe { CounterKey::open(ctx, name)? };
    let counter = key.read()?;
    unsafe { refuse_new_counter_over_maxmemory(ctx, &[counter])? };
    let bucket = match counter {
        Counter::Missing => Bucket::Missing,
        Counter::Present { count, expires_at } => Bucket::Present { tat_ns: count, expires_at },
    };
    let outcome = decide(rate, bucket, now.ns, now.ms);
    match outcome.write {
        Write::Store { tat_ns, expires_at } => key.set(tat_ns, expires_at)?,
        Write::Heal { expires_at } => key.apply(&Effects::heal(expires_at))?,
        Write::Nothing => {}
    }
    stats::GCRA_CALLS.add(1);
    if outcome.limited { &stats::GCRA_DENIED } else { &stats::GCRA_ADMITTED }.add(1);
    // A key without TTL gets one whatever the decision (stored with the new TAT, or healed).
    if matches!(bucket, Bucket::Present { expires_at: None, .. }) {
        stats::HEALED.add(1);
    }
    Ok(outcome)
}
