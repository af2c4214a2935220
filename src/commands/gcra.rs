//! `RATELIMIT.GCRA key max_burst tokens_per_period period [TOKENS count]`: tokens from a GCRA
//! bucket; replies `[limited, capacity, remaining, retry_after_ms, full_after_ms]`.

use crate::commands::track;
use crate::core::args::{parse_gcra, ArgError};
use crate::core::gcra::{decide, Outcome, Rate};
use crate::core::stored::Stored;
use crate::redis::call::{Call, Error};
use crate::redis::clock;
use crate::redis::key::{refuse_new_over_maxmemory, StoredKey, Written};
use crate::redis::stats::{self, Decisions};

pub fn gcra(call: &Call) -> Result<(), Error> {
    let rate = parse_gcra(call.args())?;
    let o = take(call, &rate, "ratelimit.gcra", &stats::GCRA_DECISIONS)?;
    call.reply_integers(&[i64::from(o.limited), rate.capacity, o.remaining, o.retry_after_ms(), o.full_after_ms()]);
    Ok(())
}

/// One request of a parsed rate against the bucket at the call's first argument (GCRA's and
/// CL.THROTTLE's).
pub fn take(call: &Call, rate: &Rate, command: &'static str, decisions: &Decisions) -> Result<Outcome, Error> {
    let name = call.key(1).ok_or(ArgError::Arity(command))?;
    let now = clock::command_now();
    let mut key = StoredKey::open(call, name)?;
    let bucket = key.read()?;
    refuse_new_over_maxmemory(call, &[bucket])?;
    let outcome = decide(rate, bucket, now.ns, now.ms);
    if let Some(change) = outcome.change {
        key.apply(&change, Written::Set)?;
    }
    stats::GCRA_CALLS.add(1);
    if outcome.limited { &stats::GCRA_DENIED } else { &stats::GCRA_ADMITTED }.add(1);
    // A key without TTL gets one whatever the decision (stored with the new TAT, or healed).
    if matches!(bucket, Stored::Present { expires_at: None, .. }) {
        stats::HEALED.add(1);
    }
    // CL.THROTTLE's quantity 0 only looks.
    if rate.tokens > 0 {
        track(decisions, !outcome.limited, now.ms, call.arg(1).map(|key| (key, rate.tokens)));
    }
    Ok(outcome)
}
