//! `RATELIMIT.HIT key limit window [COST cost] [MS] [PARTIAL] [RESERVE] [ALIGN] [TZ zone]`: one
//! hit on one fixed-window counter, the window started by its first hit or laid on the clock; a
//! negative cost gives back; PARTIAL grants what is left of the cost, at least one.

use crate::commands::arg_docs::{ALIGN, COST_OR_REFUND, FIXED_WINDOW, MS, RESERVE, TZ};
use crate::commands::limiter::{run, Counting};
use crate::commands::HITS;
use crate::core::algorithm::Fixed;
use crate::core::args::parse_hit;
use crate::redis::call::{entry_point, Call, Error};
use crate::redis::clock;
use crate::redis::command::{arg, option, Arg, Command, Keys, INTEGER, KEY, PURE_TOKEN, WRITES};
use crate::redis::key::Written;
use crate::redis::stats;

const COUNTING: Counting = Counting { counted: HITS, decisions: &stats::HIT_DECISIONS, written: Written::Incrby };

/// RATELIMIT.HIT: its flags, keys and docs, as the server is told them.
pub const COMMAND: Command = Command {
    name: c"ratelimit.hit",
    // Not deny-oom: over maxmemory only new counters are refused (see redis/key.rs).
    flags: c"write fast",
    acl_categories: c"write fast",
    keys: Keys::At(1, WRITES),
    arity: -4,
    entry: entry_point!(hit),
    opt_in: None,
    summary: c"Counts a hit against a fixed-window limit (started by the first hit, aligned to the epoch, or a calendar window in a time zone) and sets the window's expiry in one step; gives a counter without TTL one. Replies [allowed, count, remaining, reset_ms], with PARTIAL the hits granted, and with RESERVE the reservation.",
    complexity: c"O(1)",
    args: &[
        Arg { summary: Some(c"the counter"), ..arg(c"key", KEY) },
        Arg { summary: Some(c"hits admitted per window"), ..arg(c"limit", INTEGER) },
        FIXED_WINDOW,
        COST_OR_REFUND,
        MS,
        Arg {
            summary: Some(c"grant as many of the cost as the window has left, at least one; the number granted follows reset_ms in the reply"),
            ..option(c"partial", PURE_TOKEN, c"PARTIAL")
        },
        RESERVE,
        ALIGN,
        TZ,
    ],
};

pub fn hit(call: &Call) -> Result<(), Error> {
    let args = parse_hit(call.args())?;
    // A calendar window's length is what is left of the one running at the call: decided at the
    // same instant (on Redis 7.0 each read of the clock is the wall clock's).
    let now = clock::command_now();
    let limit = args.at(now.ms)?;
    let mut zone = [0; 6];
    let fixed = Fixed { limit, window: args.window, zone: args.zone.text(&mut zone), partial: args.partial };
    run(call, "ratelimit.hit", &fixed, (args.reserve, now), &COUNTING)
}
