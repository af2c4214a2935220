//! `RATELIMIT.REPAIR prefix window [MS] [LIMIT n]`: give every leaked counter under a prefix a
//! window's expiry, walking the keyspace without stalling the server.

use crate::commands::arg_docs::{MS, NAMES};
use crate::commands::sweep::{self, default_names};
use crate::core::args::parse_repair;
use crate::redis::call::{entry_point, Call, Error};
use crate::redis::command::{arg, Command, Keys, INTEGER, STRING};

/// RATELIMIT.REPAIR: its flags, keys and docs, as the server is told them.
pub const COMMAND: Command = Command {
    name: c"ratelimit.repair",
    // Not deny-oom: giving leaked counters a TTL is how memory comes back.
    flags: c"write",
    acl_categories: c"write slow keyspace",
    keys: Keys::None,
    arity: -3,
    entry: entry_point!(repair),
    opt_in: None,
    summary: c"Gives every counter under a prefix that has no TTL a window's expiry, walking the keyspace without stalling the server.",
    complexity: c"O(N) where N is the number of keys in the database",
    args: &[arg(c"prefix", STRING), arg(c"window", INTEGER), MS, NAMES],
};

pub fn repair(call: &Call) -> Result<(), Error> {
    let args = parse_repair(call.args(), default_names())?;
    sweep::start(call, "RATELIMIT.REPAIR", &args)
}
