//! `RATELIMIT.SLIDE key limit window [COST cost] [MS] [PARTIAL] [PEEK | RESERVE]`: one call on
//! one sliding window; a negative cost gives back; PARTIAL grants what the estimate has room for
//! of the cost, at least one.

use crate::commands::limiter::{answer, decide, Counting};
use crate::commands::SLIDES;
use crate::core::algorithm::Sliding;
use crate::core::args::{parse_slide, ArgError};
use crate::core::slide::{peek, peek_partial};
use crate::redis::call::{Call, Error};
use crate::redis::clock;
use crate::redis::key::{StoredKey, Written};
use crate::redis::stats;

const COUNTING: Counting = Counting { counted: SLIDES, decisions: &stats::SLIDE_DECISIONS, written: Written::Set };

pub fn slide(call: &Call) -> Result<(), Error> {
    let args = parse_slide(call.args())?;
    let l = args.limit;
    let (Some(name), Some(key)) = (call.key(1), call.arg(1)) else {
        return Err(ArgError::Arity("ratelimit.slide").into());
    };
    if args.peek {
        stats::PEEKS.add(1);
        let now = clock::command_now();
        let stored = StoredKey::open_read(call, name).read()?;
        let (o, granted) = match args.partial {
            true => peek_partial(&l, stored, now.ms),
            false => (peek(&l, stored, now.ms), 0),
        };
        let numbers = [i64::from(o.allowed), o.count, o.remaining, o.retry_after_ms, o.reset_ms, granted];
        call.reply_integers(&numbers[..if args.partial { 6 } else { 5 }]);
        return Ok(());
    }
    let sliding = Sliding { limit: l, partial: args.partial };
    let decided = decide(call, name, key, &sliding, args.reserve, &COUNTING)?;
    answer(call, decided);
    Ok(())
}
