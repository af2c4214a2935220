//! `RATELIMIT.HIT key limit window [COST cost] [MS] [PARTIAL] [RESERVE] [ALIGN] [TZ zone]`: one
//! hit on one fixed-window counter, the window started by its first hit or laid on the clock; a
//! negative cost gives back; PARTIAL grants what is left of the cost, at least one.

use crate::commands::{answer, may_give_back, shadow, Asked, HITS};
use crate::core::args::{parse_hit, ArgError};
use crate::core::reservation::Reserved;
use crate::core::stored::Stored;
use crate::core::window::{admit_anyway, decide, decide_partial, window_end, Limit, Outcome};
use crate::redis::call::{Call, Error, KeyName};
use crate::redis::clock::{self, Now};
use crate::redis::key::{refuse_new_over_maxmemory, StoredKey, Written};
use crate::redis::stats;

pub fn hit(call: &Call) -> Result<(), Error> {
    let args = parse_hit(call.args())?;
    let name = call.key(1).ok_or(ArgError::Arity("ratelimit.hit"))?;
    if args.cost < 0 {
        may_give_back(call)?;
    }
    let now = clock::command_now();
    let limit = args.at(now.ms)?;
    let (counter, o, granted, shadowed) = hit_counter(call, name, &limit, args.partial, now)?;
    let numbers = [i64::from(o.allowed), o.count, o.remaining, o.reset_ms, granted];
    let numbers = if args.partial { &numbers[..] } else { &numbers[..4] };
    let mut zone = [0; 6];
    let reserved = args.reserve.then(|| {
        window_end(counter, &o).filter(|_| o.allowed).map(|window_end_ms| Reserved::Hit {
            limit: limit.limit,
            window: args.window,
            zone: args.zone.text(&mut zone),
            window_end_ms,
            amount: granted,
        })
    });
    let asked = Asked { counted: HITS, decisions: &stats::HIT_DECISIONS, cost: granted, reserved };
    answer(call, asked, counter, now.ms, numbers);
    if shadowed {
        shadow::record(&stats::HIT_DECISIONS, now.ms, call.arg(1));
    }
    Ok(())
}

/// One hit on one counter, arguments already validated (`partial`: PARTIAL's); what it counted
/// (its cost, fewer with PARTIAL, 0 when denied; a give-back its negative cost), and whether
/// shadow mode admitted it (counting all).
fn hit_counter(
    call: &Call,
    name: KeyName,
    limit: &Limit,
    partial: bool,
    now: Now,
) -> Result<(Stored, Outcome, i64, bool), Error> {
    let mut key = StoredKey::open(call, name)?;
    let counter = key.read()?;
    if limit.cost > 0 {
        refuse_new_over_maxmemory(call, &[counter])?;
    }
    let (outcome, granted) = match partial {
        true => decide_partial(limit, counter, now.ms),
        false => {
            let o = decide(limit, counter, now.ms);
            (o, if o.allowed { limit.cost } else { 0 })
        }
    };
    let anyway = shadow::admitted(call, !outcome.allowed, || admit_anyway(limit, counter, now.ms));
    let (outcome, granted) = anyway.map_or((outcome, granted), |o| (o, limit.cost));
    if let Some(change) = outcome.change {
        key.apply(&change, Written::Incrby)?;
    }
    Ok((counter, outcome, granted, anyway.is_some()))
}
