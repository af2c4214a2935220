//! `RATELIMIT.SLIDE key limit window [COST cost] [MS] [PEEK | RESERVE]`: one call on one sliding
//! window; a negative cost gives back.

use crate::commands::{answer, may_give_back, shadow, Asked, SLIDES};
use crate::core::args::{parse_slide, ArgError};
use crate::core::reservation::Reserved;
use crate::core::slide::{admit_anyway, decide, peek};
use crate::core::stored::Change;
use crate::redis::call::{Call, Error};
use crate::redis::key::{refuse_new_over_maxmemory, StoredKey, Written};
use crate::redis::{clock, stats};

pub fn slide(call: &Call) -> Result<(), Error> {
    let args = parse_slide(call.args())?;
    let l = args.limit;
    let name = call.key(1).ok_or(ArgError::Arity("ratelimit.slide"))?;
    if l.cost < 0 {
        may_give_back(call)?;
    }
    let now = clock::command_now();
    if args.peek {
        stats::PEEKS.add(1);
        let o = peek(&l, StoredKey::open_read(call, name).read()?, now.ms);
        call.reply_integers(&[i64::from(o.allowed), o.count, o.remaining, o.retry_after_ms, o.reset_ms]);
        return Ok(());
    }
    let mut key = StoredKey::open(call, name)?;
    let stored = key.read()?;
    if l.cost > 0 {
        refuse_new_over_maxmemory(call, &[stored])?;
    }
    let o = decide(&l, stored, now.ms);
    let anyway = shadow::admitted(call, !o.allowed, || admit_anyway(&l, stored, now.ms));
    let o = anyway.unwrap_or(o);
    if let Some(change) = o.change {
        key.apply(&change, Written::Set)?;
    }
    let numbers = [i64::from(o.allowed), o.count, o.remaining, o.retry_after_ms, o.reset_ms];
    // An admitted call stores its counts: the window it counted in is theirs.
    let reserved = args.reserve.then_some(match o.change {
        Some(Change::Set { value, .. }) if o.allowed => {
            Some(Reserved::Slide { limit: l.limit, window_ms: l.window_ms, start_ms: value.start_ms, amount: l.cost })
        }
        _ => None,
    });
    let asked = Asked { counted: SLIDES, decisions: &stats::SLIDE_DECISIONS, cost: l.cost, reserved };
    answer(call, asked, stored, now.ms, &numbers);
    if anyway.is_some() {
        shadow::record(&stats::SLIDE_DECISIONS, now.ms, call.arg(1));
    }
    Ok(())
}
