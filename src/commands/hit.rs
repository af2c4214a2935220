//! `RATELIMIT.HIT key limit window [COST cost] [MS] [PARTIAL] [RESERVE] [ALIGN] [TZ zone]`: one
//! hit on one fixed-window counter, the window started by its first hit or laid on the clock; a
//! negative cost gives back; PARTIAL grants what is left of the cost, at least one.

use crate::commands::limiter::{answer, decide, Counting};
use crate::commands::HITS;
use crate::core::algorithm::Fixed;
use crate::core::args::{parse_hit, ArgError};
use crate::redis::call::{Call, Error};
use crate::redis::clock;
use crate::redis::key::Written;
use crate::redis::stats;

const COUNTING: Counting = Counting { counted: HITS, decisions: &stats::HIT_DECISIONS, written: Written::Incrby };

pub fn hit(call: &Call) -> Result<(), Error> {
    let args = parse_hit(call.args())?;
    let (Some(name), Some(key)) = (call.key(1), call.arg(1)) else {
        return Err(ArgError::Arity("ratelimit.hit").into());
    };
    // A calendar window's length is what is left of the one running at the call.
    let limit = args.at(clock::command_now().ms)?;
    let mut zone = [0; 6];
    let fixed = Fixed { limit, window: args.window, zone: args.zone.text(&mut zone), partial: args.partial };
    let decided = decide(call, name, key, &fixed, args.reserve, &COUNTING)?;
    answer(call, decided);
    Ok(())
}
