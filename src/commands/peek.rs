//! `RATELIMIT.PEEK key limit [COST cost]`: what a hit would get, without making it.

use crate::commands::arg_docs::COST;
use crate::core::args::{parse_peek, ArgError};
use crate::core::window::peek as decide_peek;
use crate::redis::call::{entry_point, Call, Error};
use crate::redis::command::{arg, Command, Keys, INTEGER, KEY, READS};
use crate::redis::key::StoredKey;
use crate::redis::{clock, stats};

/// RATELIMIT.PEEK: its flags, keys and docs, as the server is told them.
pub const COMMAND: Command = Command {
    name: c"ratelimit.peek",
    flags: c"readonly fast",
    acl_categories: c"read fast",
    keys: Keys::At(1, READS),
    arity: -3,
    entry: entry_point!(peek),
    opt_in: None,
    summary: c"Tells what a hit would get without making it. Replies [allowed, count, remaining, reset_ms]; reset_ms is -1 for a counter without TTL.",
    complexity: c"O(1)",
    args: &[arg(c"key", KEY), arg(c"limit", INTEGER), COST],
};

pub fn peek(call: &Call) -> Result<(), Error> {
    let args = parse_peek(call.args())?;
    let name = call.key(1).ok_or(ArgError::Arity("ratelimit.peek"))?;
    stats::PEEKS.add(1);
    let now = clock::command_now();
    let counter = StoredKey::open_read(call, name).read()?;
    let o = decide_peek(args.limit, args.cost, counter, now.ms);
    call.reply_integers(&[i64::from(o.allowed), o.count, o.remaining, o.reset_ms]);
    Ok(())
}
