//! `RATELIMIT.SLIDE key limit window [COST cost] [MS] [PARTIAL] [PEEK | RESERVE]`: one call on
//! one sliding window; a negative cost gives back; PARTIAL grants what the estimate has room for
//! of the cost, at least one.

use crate::commands::arg_docs::{COST_OR_REFUND, MS, RESERVE};
use crate::commands::limiter::{run, Counting};
use crate::commands::SLIDES;
use crate::core::algorithm::Sliding;
use crate::core::args::{parse_slide, ArgError};
use crate::core::slide::{peek, peek_partial};
use crate::redis::call::{entry_point, Call, Error};
use crate::redis::clock;
use crate::redis::command::{arg, option, Arg, Command, Keys, INTEGER, KEY, ONEOF, PURE_TOKEN, WRITES};
use crate::redis::key::{StoredKey, Written};
use crate::redis::stats;

const COUNTING: Counting = Counting { counted: SLIDES, decisions: &stats::SLIDE_DECISIONS, written: Written::Set };

/// RATELIMIT.SLIDE: its flags, keys and docs, as the server is told them.
pub const COMMAND: Command = Command {
    name: c"ratelimit.slide",
    // As HIT: over maxmemory only new keys are refused.
    flags: c"write fast",
    acl_categories: c"write fast",
    keys: Keys::At(1, WRITES),
    arity: -4,
    entry: entry_point!(slide),
    opt_in: None,
    summary: c"Counts a call against a sliding-window limit (the previous window's count weighted by its overlap), in one key that always expires. Replies [allowed, count, remaining, retry_after_ms, reset_ms], with PARTIAL the calls granted, and with RESERVE the reservation.",
    complexity: c"O(1)",
    args: &[
        Arg { summary: Some(c"the window's counts"), ..arg(c"key", KEY) },
        Arg { summary: Some(c"calls admitted per sliding window"), ..arg(c"limit", INTEGER) },
        Arg { summary: Some(c"the window's length in seconds (milliseconds with MS)"), ..arg(c"window", INTEGER) },
        COST_OR_REFUND,
        MS,
        Arg {
            summary: Some(c"grant as many of the cost as the estimate has room for, at least one; the number granted follows reset_ms in the reply"),
            ..option(c"partial", PURE_TOKEN, c"PARTIAL")
        },
        Arg {
            optional: true,
            subargs: &[
                Arg { token: Some(c"PEEK"), summary: Some(c"answer without writing"), ..arg(c"peek", PURE_TOKEN) },
                Arg { optional: false, ..RESERVE },
            ],
            ..arg(c"mode", ONEOF)
        },
    ],
};

pub fn slide(call: &Call) -> Result<(), Error> {
    let args = parse_slide(call.args())?;
    let l = args.limit;
    let now = clock::command_now();
    let sliding = Sliding { limit: l, partial: args.partial };
    if args.peek {
        let name = call.key(1).ok_or(ArgError::Arity("ratelimit.slide"))?;
        stats::PEEKS.add(1);
        let stored = StoredKey::open_read(call, name).read()?;
        let (o, granted) = match args.partial {
            true => peek_partial(&l, stored, now.ms),
            false => (peek(&l, stored, now.ms), 0),
        };
        call.reply_integers(sliding.decision(o, granted).numbers());
        return Ok(());
    }
    run(call, "ratelimit.slide", &sliding, (args.reserve, now), &COUNTING)
}
