//! `RATELIMIT.GCRA key max_burst tokens_per_period period [TOKENS count] [PARTIAL] [RESERVE] [ALIGN]`:
//! tokens from a GCRA bucket (negative ones given back; with ALIGN refilled at the period's
//! boundaries); replies `[limited, capacity, remaining,
//! retry_after_ms, full_after_ms]`, with PARTIAL the tokens granted, with RESERVE the reservation.

use crate::commands::{gave_back, may_give_back, reply, shadow, track};
use crate::core::args::{parse_gcra, ArgError};
use crate::core::gcra::{admit_anyway, decide, decide_partial, on_boundaries, Outcome, Rate};
use crate::core::reservation::Reserved;
use crate::core::stored::Stored;
use crate::redis::call::{Call, Error};
use crate::redis::clock;
use crate::redis::key::{refuse_new_over_maxmemory, StoredKey, Written};
use crate::redis::stats::{self, Decisions};

pub fn gcra(call: &Call) -> Result<(), Error> {
    let args = parse_gcra(call.args())?;
    let rate = args.rate;
    let decision = |r: &Rate, b: Stored, ns, ms| match args.partial {
        true => Some(decide_partial(r, b, ns, ms)),
        false => Some(decide(r, b, ns, ms)),
    };
    let o = take(call, &rate, "ratelimit.gcra", &stats::GCRA_DECISIONS, args.reserve, args.align_ns, decision)?;
    let numbers = [i64::from(o.limited), rate.capacity, o.remaining, o.retry_after_ms(), o.full_after_ms(), o.taken];
    // With PARTIAL the tokens granted follow, and a reservation is of them.
    let (numbers, amount) = match args.partial {
        true => (&numbers[..], o.taken),
        false => (&numbers[..5], rate.tokens),
    };
    let reserved = args.reserve.then_some((!o.limited).then_some(Reserved::Gcra {
        capacity: rate.capacity,
        emission_ns: rate.emission_ns,
        amount,
    }));
    reply(call, numbers, reserved);
    Ok(())
}

/// The error of a CL.THROTTLE give-back that redis-cell fails on (see `gcra::decide_cell`).
const GIVES_BACK_TOO_MUCH: &str =
    "ERR quantity gives back more than the bucket holds (redis-cell 0.2.2 fails here too, and leaves the key without TTL)";

/// One request of a parsed rate against the bucket at the call's first argument, decided by
/// `decide` (GCRA's or CL.THROTTLE's; None: refused, nothing written); `reserving`: its tokens
/// count for RATELIMIT.TOP when settled; `align_ns`: ALIGN's period.
pub fn take(
    call: &Call,
    rate: &Rate,
    command: &'static str,
    decisions: &Decisions,
    reserving: bool,
    align_ns: Option<i64>,
    decide: impl Fn(&Rate, Stored, i64, i64) -> Option<Outcome>,
) -> Result<Outcome, Error> {
    let name = call.key(1).ok_or(ArgError::Arity(command))?;
    if rate.tokens < 0 {
        may_give_back(call)?;
    }
    let now = clock::command_now();
    let mut key = StoredKey::open(call, name)?;
    let bucket = key.read()?;
    if rate.tokens >= 0 {
        refuse_new_over_maxmemory(call, &[bucket])?;
    }
    // Decided at now, or with ALIGN at the period's boundary just passed.
    let at = |decide: &dyn Fn(i64) -> Option<Outcome>| match align_ns {
        None => decide(now.ns),
        Some(period_ns) => on_boundaries(period_ns, bucket, now.ns, now.ms, decide),
    };
    let outcome = at(&|ns| decide(rate, bucket, ns, now.ms)).ok_or(GIVES_BACK_TOO_MUCH)?;
    // CL.THROTTLE's quantity 0 only looks: shadow mode admits what takes tokens.
    let denied = outcome.limited && rate.tokens > 0;
    let anyway = shadow::admitted(call, denied, || at(&|ns| admit_anyway(rate, bucket, ns, now.ms)));
    let outcome = anyway.unwrap_or(outcome);
    if let Some(change) = outcome.change {
        key.apply(&change, Written::Set)?;
    }
    if rate.tokens < 0 {
        gave_back(&[bucket]);
        return Ok(outcome);
    }
    stats::GCRA_CALLS.add(1);
    if outcome.limited { &stats::GCRA_DENIED } else { &stats::GCRA_ADMITTED }.add(1);
    // A key without TTL gets one whatever the decision (stored with the new TAT, or healed).
    if matches!(bucket, Stored::Present { expires_at: None, .. }) {
        stats::HEALED.add(1);
    }
    // CL.THROTTLE's quantity 0 only looks.
    if rate.tokens > 0 {
        let tokens = match (reserving, outcome.limited) {
            (true, _) => 0,
            (false, true) => rate.tokens,
            (false, false) => outcome.taken,
        };
        track(decisions, !outcome.limited, now.ms, call.arg(1).map(|key| (key, tokens)));
    }
    if anyway.is_some() {
        shadow::record(decisions, now.ms, call.arg(1));
    }
    Ok(outcome)
}
