//! `RATELIMIT.ADAPT key floor start ceiling window [COST cost] [MS] [PARTIAL] [RESERVE] [TURN]`: a call
//! decided against the limit the fleet learns (`core::adaptive`), the key created at `start` with
//! a full bucket; replies `[allowed, limit, remaining, retry_after_ms, reset_ms]`, with PARTIAL
//! the tokens granted, with RESERVE a reservation (`RATELIMIT.SETTLE`).

use std::cell::Cell;

use crate::commands::arg_docs::COST;
use crate::commands::limiter::{run, Counting};
use crate::commands::ADAPTS;
use crate::core::algorithm::Adaptive;
use crate::core::args::parse_adapt;
use crate::redis::call::{entry_point, Call, Error};
use crate::redis::clock;
use crate::redis::command::{arg, option, Arg, Command, Keys, INTEGER, KEY, PURE_TOKEN, WRITES};
use crate::redis::key::Written;
use crate::redis::stats;

const COUNTING: Counting = Counting { counted: ADAPTS, decisions: &stats::ADAPT_DECISIONS, written: Written::Set };

/// RATELIMIT.ADAPT: its flags, keys and docs, as the server is told them.
pub const COMMAND: Command = Command {
    name: c"ratelimit.adapt",
    // As HIT: over maxmemory only new limits are refused.
    flags: c"write fast",
    acl_categories: c"write fast",
    keys: Keys::At(1, WRITES),
    arity: -6,
    entry: entry_point!(adapt),
    opt_in: None,
    summary: c"Decides a call against an adaptive limit: a rate the fleet learns from its provider's answers (RATELIMIT.REPORT), between a floor and a ceiling, starting at start; the calls are paced, at most a sixth of a window's limit at once. Replies [allowed, limit, remaining, retry_after_ms, reset_ms], with PARTIAL the tokens granted, with RESERVE a reservation.",
    complexity: c"O(1)",
    args: &[
        Arg { summary: Some(c"the adaptive limit"), ..arg(c"key", KEY) },
        Arg { summary: Some(c"the lowest the learned limit goes, per window"), ..arg(c"floor", INTEGER) },
        Arg { summary: Some(c"the limit a new key starts at"), ..arg(c"start", INTEGER) },
        Arg { summary: Some(c"the highest the learned limit goes"), ..arg(c"ceiling", INTEGER) },
        Arg { summary: Some(c"the window (and epoch) in seconds, milliseconds with MS"), ..arg(c"window", INTEGER) },
        Arg { summary: Some(c"tokens this call takes (default 1)"), ..COST },
        Arg { summary: Some(c"the window is in milliseconds"), ..option(c"ms", PURE_TOKEN, c"MS") },
        Arg {
            summary: Some(c"grant as many of the cost as the bucket has, at least one; the number granted follows reset_ms in the reply"),
            ..option(c"partial", PURE_TOKEN, c"PARTIAL")
        },
        Arg {
            summary: Some(c"reply with a reservation as the last element, to settle with the tokens used (RATELIMIT.SETTLE)"),
            ..option(c"reserve", PURE_TOKEN, c"RESERVE")
        },
        Arg {
            summary: Some(c"the caller is back at the turn a denial told it: admitted on a bucket not in debt, what it lacks a debt"),
            ..option(c"turn", PURE_TOKEN, c"TURN")
        },
    ],
};

pub fn adapt(call: &Call) -> Result<(), Error> {
    let args = parse_adapt(call.args())?;
    let now = clock::command_now();
    let limit = Adaptive {
        bounds: args.bounds,
        cost: args.cost,
        partial: args.partial,
        turn: args.turn,
        increased: Cell::new(false),
    };
    run(call, "ratelimit.adapt", &limit, (args.reserve, now), &COUNTING)?;
    if limit.increased.get() {
        stats::ADAPT_INCREASES.add(1);
    }
    Ok(())
}
