//! `CL.THROTTLE key max_burst count_per_period period [quantity]`, for redis-cell's users (opt-in:
//! `loadmodule ... CL.THROTTLE`): GCRA's bucket and decision with redis-cell's arguments and reply
//! (whole seconds, truncated as redis-cell truncates them); a negative quantity gives back as
//! redis-cell's arithmetic does.

use crate::commands::limiter::{run, Counting};
use crate::commands::GCRAS;
use crate::core::algorithm::{Bucket, BucketReply};
use crate::core::args::parse_cl_throttle;
use crate::redis::call::{entry_point, Call, Error};
use crate::redis::clock;
use crate::redis::command::{arg, Arg, Command, Keys, INTEGER, KEY, WRITES};
use crate::redis::key::Written;
use crate::redis::stats;

const COUNTING: Counting = Counting { counted: GCRAS, decisions: &stats::CL_THROTTLE_DECISIONS, written: Written::Set };

/// CL.THROTTLE: its flags, keys and docs, as the server is told them.
pub const COMMAND: Command = Command {
    name: c"cl.throttle",
    // redis-cell registered it `write`; `fast` as GCRA's, and its key for cluster routing.
    flags: c"write fast",
    acl_categories: c"write fast",
    keys: Keys::At(1, WRITES),
    arity: -5,
    entry: entry_point!(cl_throttle),
    // Off by default, so that it never collides with a loaded redis-cell.
    opt_in: Some("CL.THROTTLE"),
    summary: c"redis-cell's command on the same GCRA bucket, for its users (enabled by the module argument CL.THROTTLE). Replies [limited, limit, remaining, retry_after, reset_after] in whole seconds.",
    complexity: c"O(1)",
    args: &[
        arg(c"key", KEY),
        arg(c"max_burst", INTEGER),
        arg(c"count_per_period", INTEGER),
        Arg { summary: Some(c"whole seconds"), ..arg(c"period", INTEGER) },
        Arg { optional: true, summary: Some(c"tokens to take (default 1; 0 only looks)"), ..arg(c"quantity", INTEGER) },
    ],
};

pub fn cl_throttle(call: &Call) -> Result<(), Error> {
    let rate = parse_cl_throttle(call.args())?;
    let now = clock::command_now();
    let bucket = Bucket { rate, align_ns: None, reply: BucketReply::Cell };
    run(call, "cl.throttle", &bucket, (false, now), &COUNTING)
}
