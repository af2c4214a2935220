//! `RATELIMIT.SLIDE key limit window [COST cost] [MS] [PEEK]`: one call on one sliding window.

use crate::commands::{record, track, SLIDES};
use crate::core::args::{parse_slide, ArgError};
use crate::core::slide::{decide, peek};
use crate::redis::call::{Call, Error};
use crate::redis::key::{refuse_new_over_maxmemory, StoredKey, Written};
use crate::redis::{clock, stats};

pub fn slide(call: &Call) -> Result<(), Error> {
    let args = parse_slide(call.args())?;
    let name = call.key(1).ok_or(ArgError::Arity("ratelimit.slide"))?;
    let now = clock::command_now();
    let o = if args.peek {
        stats::PEEKS.add(1);
        peek(&args.limit, StoredKey::open_read(call, name).read()?, now.ms)
    } else {
        let mut key = StoredKey::open(call, name)?;
        let stored = key.read()?;
        refuse_new_over_maxmemory(call, &[stored])?;
        let o = decide(&args.limit, stored, now.ms);
        if let Some(change) = o.change {
            key.apply(&change, Written::Set)?;
        }
        record(SLIDES, o.allowed, &[stored]);
        track(&stats::SLIDE_DECISIONS, o.allowed, now.ms, call.arg(1).map(|key| (key, args.limit.cost)));
        o
    };
    call.reply_integers(&[i64::from(o.allowed), o.count, o.remaining, o.retry_after_ms, o.reset_ms]);
    Ok(())
}
