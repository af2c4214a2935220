//! `RATELIMIT.HIT key limit window [COST cost] [MS]`: one hit on one fixed-window counter.

use crate::commands::{record, track, HITS};
use crate::core::args::{parse_hit, ArgError};
use crate::core::stored::Stored;
use crate::core::window::{decide, Limit, Outcome};
use crate::redis::call::{Call, Error, KeyName};
use crate::redis::clock::{self, Now};
use crate::redis::key::{refuse_new_over_maxmemory, StoredKey, Written};
use crate::redis::stats;

pub fn hit(call: &Call) -> Result<(), Error> {
    let limit = parse_hit(call.args())?;
    let name = call.key(1).ok_or(ArgError::Arity("ratelimit.hit"))?;
    let now = clock::command_now();
    let (counter, o) = hit_counter(call, name, &limit, now)?;
    record(HITS, o.allowed, &[counter]);
    track(&stats::HIT_DECISIONS, o.allowed, now.ms, call.arg(1).map(|key| (key, limit.cost)));
    call.reply_integers(&[i64::from(o.allowed), o.count, o.remaining, o.reset_ms]);
    Ok(())
}

/// One hit on one counter, arguments already validated.
fn hit_counter(call: &Call, name: KeyName, limit: &Limit, now: Now) -> Result<(Stored, Outcome), Error> {
    let mut key = StoredKey::open(call, name)?;
    let counter = key.read()?;
    refuse_new_over_maxmemory(call, &[counter])?;
    let outcome = decide(limit, counter, now.ms);
    if let Some(change) = outcome.change {
        key.apply(&change, Written::Incrby)?;
    }
    Ok((counter, outcome))
}
