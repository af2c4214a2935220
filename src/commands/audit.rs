//! `RATELIMIT.AUDIT prefix [LIMIT n]`: find leaked counters (integer strings without TTL) under a
//! prefix, walking the keyspace without stalling the server.

use crate::commands::arg_docs::NAMES;
use crate::commands::sweep::{self, default_names};
use crate::core::args::parse_audit;
use crate::redis::call::{entry_point, Call, Error};
use crate::redis::command::{arg, Arg, Command, Keys, STRING};

/// RATELIMIT.AUDIT: its flags, keys and docs, as the server is told them.
pub const COMMAND: Command = Command {
    name: c"ratelimit.audit",
    // Read-only, so that replicas can be audited; no keys, so it runs on any cluster node.
    flags: c"readonly",
    acl_categories: c"read slow keyspace",
    keys: Keys::None,
    arity: -2,
    entry: entry_point!(audit),
    opt_in: None,
    summary: c"Counts the counters under a prefix that have no TTL, walking the keyspace without stalling the server.",
    complexity: c"O(N) where N is the number of keys in the database",
    args: &[
        Arg { summary: Some(c"compared byte for byte, glob characters are literal"), ..arg(c"prefix", STRING) },
        NAMES,
    ],
};

pub fn audit(call: &Call) -> Result<(), Error> {
    let args = parse_audit(call.args(), default_names())?;
    sweep::start(call, "RATELIMIT.AUDIT", &args)
}
