//! `RATELIMIT.ACQUIRE key limit lease [MS] [ID id]`: one of at most `limit` permits in flight, for
//! `lease` seconds; replies `[acquired, in_use, remaining, ms, id]`.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::commands::arg_docs::{LEASES_COMPLEXITY, LEASE_MS};
use crate::commands::{count, shadow, track, ACQUIRES};
use crate::core::args::{parse_acquire, ArgError};
use crate::core::lease::{acquire as decide, acquire_anyway, made_id};
use crate::redis::call::{entry_point, Call, Error};
use crate::redis::command::{arg, option, Arg, Command, Keys, INTEGER, KEY, STRING, WRITES};
use crate::redis::key::KeyError;
use crate::redis::lease_set::LeaseSet;
use crate::redis::{clock, stats};

/// A new id for a call that gave none: unique across calls, and across servers (see `made_id`).
fn new_id() -> String {
    static SEED: OnceLock<u128> = OnceLock::new();
    static CALLS: AtomicU64 = AtomicU64::new(0);
    // std's RandomState is keyed from the OS's randomness once per thread.
    let seed = *SEED.get_or_init(|| {
        let (a, b) = (RandomState::new(), RandomState::new());
        u128::from(a.hash_one(1u8)) << 64 | u128::from(b.hash_one(2u8))
    });
    made_id(seed, CALLS.fetch_add(1, Ordering::Relaxed))
}

/// RATELIMIT.ACQUIRE: its flags, keys and docs, as the server is told them.
pub const COMMAND: Command = Command {
    name: c"ratelimit.acquire",
    // As HIT: over maxmemory only new lease sets are refused.
    flags: c"write fast",
    acl_categories: c"write fast",
    keys: Keys::At(1, WRITES),
    arity: -4,
    entry: entry_point!(acquire),
    opt_in: None,
    summary: c"Takes one of at most limit permits in flight for lease seconds; a live lease of the same ID is renewed and counted once. Replies [acquired, in_use, remaining, ms, id].",
    complexity: LEASES_COMPLEXITY,
    args: &[
        Arg { summary: Some(c"the lease set: lease ids scored by their expiry"), ..arg(c"key", KEY) },
        Arg { summary: Some(c"permits in flight at most"), ..arg(c"limit", INTEGER) },
        Arg { summary: Some(c"the lease's length in seconds (milliseconds with MS)"), ..arg(c"lease", INTEGER) },
        LEASE_MS,
        Arg { summary: Some(c"the lease's id (default: one the module makes)"), ..option(c"id", STRING, c"ID") },
    ],
};

pub fn acquire(call: &Call) -> Result<(), Error> {
    let args = parse_acquire(call.args())?;
    let (Some(name), Some(key)) = (call.key(1), call.arg(1)) else {
        return Err(ArgError::Arity("ratelimit.acquire").into());
    };
    let now = clock::command_now();
    let made = args.id.is_none().then(new_id);
    let id = args.id.unwrap_or_else(|| made.as_deref().unwrap_or_default().as_bytes());
    let mut set = LeaseSet::open(call, name, id)?;
    let mut leases = set.reading(now.ms)?;
    let a = decide(args.limit, args.lease_ms, &mut leases, now.ms);
    let anyway = shadow::admitted(key, !a.acquired, || Some(acquire_anyway(args.lease_ms, &mut leases, now.ms)));
    let a = anyway.unwrap_or(a);
    // Over maxmemory existing sets keep limiting; only a new one is refused.
    if a.acquired && set.is_missing() && call.is_out_of_memory() {
        return Err(KeyError::OutOfMemory.into());
    }
    set.apply(&a.writes, now.ms)?;
    count(ACQUIRES, a.acquired);
    track(&stats::ACQUIRE_DECISIONS, a.acquired, now.ms, [(key, 1)]);
    if anyway.is_some() {
        shadow::record(&stats::ACQUIRE_DECISIONS, now.ms, [key]);
    }
    call.reply_array(5);
    for n in [i64::from(a.acquired), a.in_use, a.remaining, a.ms] {
        call.reply_integer(n);
    }
    match a.acquired {
        true => call.reply_bulk(id),
        false => call.reply_null(),
    }
    Ok(())
}
