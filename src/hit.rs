//! `RATELIMIT.HIT key limit window [COST cost] [MS]` and `RATELIMIT.HITALL numkeys key [key ...]
//! limit window [limit window ...] [COST cost] [MS]`: parse, read the counters, decide, write, reply.

use std::os::raw::c_int;

use redis_module::raw::{RedisModuleCtx, RedisModuleString};

use crate::args::{parse_hit, parse_hitall, ArgError, HitArgs};
use crate::clock;
use crate::command::{api, arguments, bytes, reply_error, reply_integers, OK};
use crate::counter_key::{refuse_new_counter_over_maxmemory, CounterKey, KeyError};
use crate::stats;
use crate::window::{decide, decide_all, Counter, Outcome};

/// # Safety
/// Called through `command::run` with the arguments Redis passed.
pub unsafe fn hit(ctx: *mut RedisModuleCtx, argv: &[*mut RedisModuleString]) -> c_int {
    let args = match parse_hit(unsafe { arguments(argv) }) {
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
    let now = clock::command_now();
    let mut key = unsafe { CounterKey::open(ctx, name)? };
    let counter = key.read()?;
    unsafe { refuse_new_counter_over_maxmemory(ctx, &[counter])? };
    let outcome = decide(args, counter, now.ms);
    key.apply(&outcome.effects)?;
    record(outcome.allowed, &[(counter, outcome)]);
    Ok(outcome)
}

/// # Safety
/// Called through `command::run` with the arguments Redis passed.
pub unsafe fn hitall(ctx: *mut RedisModuleCtx, argv: &[*mut RedisModuleString]) -> c_int {
    // Redis 7.0's cluster routing asks for the keys this way (it ignores the key specs that
    // COMMAND GETKEYS and ACLs use): without it, HITALL would run on any node.
    if unsafe { api!(RedisModule_IsKeysPositionRequest)(ctx) } != 0 {
        return unsafe { report_key_positions(ctx, argv) };
    }
    let args = match parse_hitall(unsafe { arguments(argv) }) {
        Ok(args) => args,
        Err(e) => return reply_error(ctx, &e.message()),
    };
    // The parser read numkeys keys from argv[2..].
    let names = &argv[2..2 + args.keys.len()];
    match unsafe { hit_counters(ctx, names, &args.limits) } {
        Ok((allowed, outcomes)) => unsafe {
            api!(RedisModule_ReplyWithArray)(ctx, 1 + outcomes.len() as std::os::raw::c_long);
            api!(RedisModule_ReplyWithLongLong)(ctx, i64::from(allowed));
            for (_, o) in outcomes {
                reply_integers(ctx, &[o.count, o.remaining, o.reset_ms]);
            }
            OK
        },
        Err(e) => reply_error(ctx, e.message()),
    }
}

/// The positions of HITALL's keys: `numkeys` arguments from the third on, as far as they go.
unsafe fn report_key_positions(ctx: *mut RedisModuleCtx, argv: &[*mut RedisModuleString]) -> c_int {
    let numkeys = argv.get(1).and_then(|&s| crate::decimal::parse_i64(unsafe { bytes(s) })).unwrap_or(0);
    let available = argv.len().saturating_sub(2) as i64;
    for pos in 2..2 + numkeys.clamp(0, available) {
        unsafe { api!(RedisModule_KeyAtPos)(ctx, pos as c_int) };
    }
    OK
}

/// One hit on several counters, all or nothing. Every key is read before anything is written, so
/// an error on any of them changes none.
unsafe fn hit_counters(
    ctx: *mut RedisModuleCtx,
    names: &[*mut RedisModuleString],
    limits: &[HitArgs],
) -> Result<(bool, Vec<(Counter, Outcome)>), KeyError> {
    let now = clock::command_now();
    let mut keys = names.iter().map(|&name| unsafe { CounterKey::open(ctx, name) }).collect::<Result<Vec<_>, _>>()?;
    let counters = keys.iter_mut().map(CounterKey::read).collect::<Result<Vec<_>, _>>()?;
    unsafe { refuse_new_counter_over_maxmemory(ctx, &counters)? };
    let hits: Vec<(HitArgs, Counter)> = limits.iter().copied().zip(counters.iter().copied()).collect();
    let (allowed, outcomes) = decide_all(&hits, now.ms);
    for (key, outcome) in keys.iter_mut().zip(&outcomes) {
        key.apply(&outcome.effects)?;
    }
    let outcomes: Vec<(Counter, Outcome)> = counters.into_iter().zip(outcomes).collect();
    record(allowed, &outcomes);
    Ok((allowed, outcomes))
}

/// INFO counters for one HIT or HITALL call.
fn record(allowed: bool, outcomes: &[(Counter, Outcome)]) {
    stats::HITS.add(1);
    if allowed { &stats::ADMITTED } else { &stats::DENIED }.add(1);
    let healed = outcomes
        .iter()
        .filter(|(counter, o)| matches!(counter, Counter::Present { .. }) && o.effects.set_expiry.is_some())
        .count();
    stats::HEALED.add(healed as u64);
}
