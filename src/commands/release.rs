//! `RATELIMIT.RELEASE key id`: gives a permit back; 1 if the lease was live, 0 if not.

use crate::commands::arg_docs::{LEASES_COMPLEXITY, LEASE_ID};
use crate::core::args::{parse_release, ArgError};
use crate::core::lease::release as decide;
use crate::redis::call::{entry_point, Call, Error};
use crate::redis::clock;
use crate::redis::command::{arg, Command, Keys, KEY, WRITES};
use crate::redis::lease_set::LeaseSet;
use crate::redis::stats;

/// RATELIMIT.RELEASE: its flags, keys and docs, as the server is told them.
pub const COMMAND: Command = Command {
    name: c"ratelimit.release",
    flags: c"write fast",
    acl_categories: c"write fast",
    keys: Keys::At(1, WRITES),
    arity: 3,
    entry: entry_point!(release),
    opt_in: None,
    summary: c"Gives a permit back. Replies 1 if the lease was live, 0 if not (it had expired, or never existed).",
    complexity: LEASES_COMPLEXITY,
    args: &[arg(c"key", KEY), LEASE_ID],
};

pub fn release(call: &Call) -> Result<(), Error> {
    let id = parse_release(call.args())?;
    let name = call.key(1).ok_or(ArgError::Arity("ratelimit.release"))?;
    let now = clock::command_now();
    let mut set = LeaseSet::open(call, name, id)?;
    let (released, writes) = decide(&mut set.reading(now.ms)?, now.ms);
    set.apply(&writes, now.ms)?;
    if released { &stats::RELEASED } else { &stats::RELEASE_LATE }.add(1);
    call.reply_integer(i64::from(released));
    Ok(())
}
