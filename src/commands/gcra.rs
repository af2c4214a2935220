//! `RATELIMIT.GCRA key max_burst tokens_per_period period [TOKENS count] [PARTIAL] [RESERVE] [ALIGN]`:
//! tokens from a GCRA bucket (negative ones given back; with ALIGN refilled at the period's
//! boundaries); replies `[limited, capacity, remaining,
//! retry_after_ms, full_after_ms]`, with PARTIAL the tokens granted, with RESERVE the reservation.

use crate::commands::arg_docs::{ALIGN, RESERVE};
use crate::commands::limiter::{run, Counting};
use crate::commands::GCRAS;
use crate::core::algorithm::{Bucket, BucketReply};
use crate::core::args::parse_gcra;
use crate::redis::call::{entry_point, Call, Error};
use crate::redis::clock;
use crate::redis::command::{arg, option, Arg, Command, Keys, DOUBLE, INTEGER, KEY, PURE_TOKEN, WRITES};
use crate::redis::key::Written;
use crate::redis::stats;

const COUNTING: Counting = Counting { counted: GCRAS, decisions: &stats::GCRA_DECISIONS, written: Written::Set };

/// RATELIMIT.GCRA: its flags, keys and docs, as the server is told them.
pub const COMMAND: Command = Command {
    name: c"ratelimit.gcra",
    // As HIT: over maxmemory only new buckets are refused.
    flags: c"write fast",
    acl_categories: c"write fast",
    keys: Keys::At(1, WRITES),
    arity: -5,
    entry: entry_point!(gcra),
    opt_in: None,
    summary: c"Takes tokens from a GCRA bucket (smooth rate limiting, as redis-cell): value and expiry in one step. Replies [limited, capacity, remaining, retry_after_ms, full_after_ms], with PARTIAL the tokens granted, and with RESERVE the reservation. ALIGN refills at the period's boundaries.",
    complexity: c"O(1)",
    args: &[
        Arg { summary: Some(c"the bucket: its theoretical arrival time in Unix ns"), ..arg(c"key", KEY) },
        Arg { summary: Some(c"the bucket holds max_burst + 1 tokens"), ..arg(c"max_burst", INTEGER) },
        Arg { summary: Some(c"tokens that come back per period"), ..arg(c"tokens_per_period", INTEGER) },
        Arg { summary: Some(c"seconds, a decimal number"), ..arg(c"period", DOUBLE) },
        Arg {
            summary: Some(c"tokens this call takes (default 1); negative ones are given back"),
            ..option(c"count", INTEGER, c"TOKENS")
        },
        Arg {
            summary: Some(c"grant as many of the tokens as the bucket has, at least one; the tokens granted follow full_after_ms in the reply"),
            ..option(c"partial", PURE_TOKEN, c"PARTIAL")
        },
        Arg { summary: Some(c"reply with a reservation (of the tokens granted, with PARTIAL) as the last element, for RATELIMIT.SETTLE"), ..RESERVE },
        Arg {
            summary: Some(c"tokens come back tokens_per_period at once, at multiples of the period since the Unix epoch"),
            ..ALIGN
        },
    ],
};

pub fn gcra(call: &Call) -> Result<(), Error> {
    let args = parse_gcra(call.args())?;
    let now = clock::command_now();
    let bucket =
        Bucket { rate: args.rate, align_ns: args.align_ns, reply: BucketReply::Gcra { partial: args.partial } };
    run(call, "ratelimit.gcra", &bucket, (args.reserve, now), &COUNTING)
}
