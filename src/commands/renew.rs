//! `RATELIMIT.RENEW key id lease [MS]`: extends a live lease; the ms until it now expires, or -1
//! if it is no longer live (the holder lost its permit).

use crate::commands::arg_docs::{LEASES_COMPLEXITY, LEASE_ID, LEASE_MS};
use crate::core::args::{parse_renew, ArgError};
use crate::core::lease::renew as decide;
use crate::redis::call::{entry_point, Call, Error};
use crate::redis::clock;
use crate::redis::command::{arg, Arg, Command, Keys, INTEGER, KEY, WRITES};
use crate::redis::lease_set::LeaseSet;
use crate::redis::stats;

/// RATELIMIT.RENEW: its flags, keys and docs, as the server is told them.
pub const COMMAND: Command = Command {
    name: c"ratelimit.renew",
    flags: c"write fast",
    acl_categories: c"write fast",
    keys: Keys::At(1, WRITES),
    arity: -4,
    entry: entry_point!(renew),
    opt_in: None,
    summary: c"Extends a live lease to lease seconds from now. Replies the ms until it expires, or -1 if it is no longer live.",
    complexity: LEASES_COMPLEXITY,
    args: &[
        arg(c"key", KEY),
        LEASE_ID,
        Arg { summary: Some(c"the lease's new length in seconds (milliseconds with MS)"), ..arg(c"lease", INTEGER) },
        LEASE_MS,
    ],
};

pub fn renew(call: &Call) -> Result<(), Error> {
    let (id, lease_ms) = parse_renew(call.args())?;
    let name = call.key(1).ok_or(ArgError::Arity("ratelimit.renew"))?;
    let now = clock::command_now();
    let mut set = LeaseSet::open(call, name, id)?;
    let (ms, writes) = decide(lease_ms, &mut set.reading(now.ms)?, now.ms);
    set.apply(&writes, now.ms)?;
    if ms >= 0 { &stats::RENEWED } else { &stats::RENEW_LOST }.add(1);
    call.reply_integer(ms);
    Ok(())
}
