//! `RATELIMIT.SLIDE key limit window [COST cost] [MS] [PARTIAL] [PEEK | RESERVE]`: one call on
//! one sliding window; a negative cost gives back; PARTIAL grants what the estimate has room for
//! of the cost, at least one.

use crate::commands::{answer, may_give_back, shadow, Asked, SLIDES};
use crate::core::args::{parse_slide, ArgError};
use crate::core::reservation::Reserved;
use crate::core::slide::{admit_anyway, decide, decide_partial, peek, peek_partial, Outcome};
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
    let replied = if args.partial { 6 } else { 5 };
    if args.peek {
        stats::PEEKS.add(1);
        let stored = StoredKey::open_read(call, name).read()?;
        let (o, granted) = match args.partial {
            true => peek_partial(&l, stored, now.ms),
            false => (peek(&l, stored, now.ms), 0),
        };
        call.reply_integers(&numbers(&o, granted)[..replied]);
        return Ok(());
    }
    let mut key = StoredKey::open(call, name)?;
    let stored = key.read()?;
    if l.cost > 0 {
        refuse_new_over_maxmemory(call, &[stored])?;
    }
    let (o, granted) = match args.partial {
        true => decide_partial(&l, stored, now.ms),
        false => (decide(&l, stored, now.ms), l.cost),
    };
    let anyway = shadow::admitted(call, !o.allowed, || admit_anyway(&l, stored, now.ms));
    let (o, granted) = anyway.map_or((o, granted), |o| (o, l.cost));
    if let Some(change) = o.change {
        key.apply(&change, Written::Set)?;
    }
    // An admitted call stores its counts: the window it counted in is theirs.
    let reserved = args.reserve.then_some(match o.change {
        Some(Change::Set { value, .. }) if o.allowed => {
            Some(Reserved::Slide { limit: l.limit, window_ms: l.window_ms, start_ms: value.start_ms, amount: granted })
        }
        _ => None,
    });
    let asked = Asked { counted: SLIDES, decisions: &stats::SLIDE_DECISIONS, cost: granted, reserved };
    answer(call, asked, stored, now.ms, &numbers(&o, granted)[..replied]);
    if anyway.is_some() {
        shadow::record(&stats::SLIDE_DECISIONS, now.ms, call.arg(1));
    }
    Ok(())
}

/// The reply's numbers, with PARTIAL's count granted last.
fn numbers(o: &Outcome, granted: i64) -> [i64; 6] {
    [i64::from(o.allowed), o.count, o.remaining, o.retry_after_ms, o.reset_ms, granted]
}
