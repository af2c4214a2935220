//! `RATELIMIT.HITALL numkeys key [key ...] limit window [limit window ...] [COST cost] [MS]
//! [SLIDE]`: one hit against several fixed-window (or, with SLIDE, sliding-window) limits, all or
//! nothing.

use crate::commands::{record, Counted, HITS, SLIDES};
use crate::core::args::parse_hitall;
use crate::core::decimal::parse_i64;
use crate::core::stored::{Change, Stored, Value};
use crate::core::window::Limit;
use crate::core::{slide, window};
use crate::redis::call::{Call, Error};
use crate::redis::clock;
use crate::redis::key::{refuse_new_over_maxmemory, StoredKey, Written};

pub fn hitall(call: &Call) -> Result<(), Error> {
    // Redis 7.0's cluster routing asks for the keys this way (it ignores the key specs that
    // COMMAND GETKEYS and ACLs use): without it, HITALL would run on any node.
    if call.wants_key_positions() {
        report_key_positions(call);
        return Ok(());
    }
    let args = parse_hitall(call.args())?;
    if args.slide {
        let (allowed, outcomes) = hit_all(call, &args.limits, (SLIDES, Written::Set), slide::decide_all, |o| o.change)?;
        reply(call, allowed, outcomes.iter().map(|o| [o.count, o.remaining, o.retry_after_ms, o.reset_ms]));
    } else {
        let (allowed, outcomes) =
            hit_all(call, &args.limits, (HITS, Written::Incrby), window::decide_all, |o| o.change)?;
        reply(call, allowed, outcomes.iter().map(|o| [o.count, o.remaining, o.reset_ms]));
    }
    Ok(())
}

/// An algorithm's all-or-nothing decision: `(allowed, outcome per key)`.
type DecideAll<V, O> = fn(&[(Limit, Stored<V>)], i64) -> (bool, Vec<O>);

/// The one hit on every key, decided by `decide_all` and written; the parser read `limits.len()`
/// keys from the third argument on.
fn hit_all<V: Value, O>(
    call: &Call,
    limits: &[Limit],
    (counted, written): (Counted, Written),
    decide_all: DecideAll<V, O>,
    change: fn(&O) -> Option<Change<V>>,
) -> Result<(bool, Vec<O>), Error> {
    let now = clock::command_now();
    // Every key is read before anything is written, so an error on any of them changes none.
    let names = (2..2 + limits.len()).filter_map(|i| call.key(i));
    let mut keys = names.map(|name| StoredKey::open(call, name)).collect::<Result<Vec<_>, _>>()?;
    let stored = keys.iter_mut().map(StoredKey::read).collect::<Result<Vec<_>, _>>()?;
    refuse_new_over_maxmemory(call, &stored)?;
    let calls: Vec<(Limit, Stored<V>)> = limits.iter().copied().zip(stored.iter().copied()).collect();
    let (allowed, outcomes) = decide_all(&calls, now.ms);
    for (key, outcome) in keys.iter_mut().zip(&outcomes) {
        if let Some(change) = change(outcome) {
            key.apply(&change, written)?;
        }
    }
    record(counted, allowed, &stored);
    Ok((allowed, outcomes))
}

/// `[allowed, [fields of key 1], [fields of key 2], ...]`.
fn reply<const N: usize>(call: &Call, allowed: bool, fields: impl ExactSizeIterator<Item = [i64; N]>) {
    call.reply_array(1 + fields.len());
    call.reply_integer(i64::from(allowed));
    for f in fields {
        call.reply_integers(&f);
    }
}

/// The positions of HITALL's keys: `numkeys` arguments from the third on, as far as they go.
fn report_key_positions(call: &Call) {
    let numkeys = call.arg(1).and_then(parse_i64).unwrap_or(0);
    let available = call.len().saturating_sub(2) as i64;
    for pos in 2..2 + numkeys.clamp(0, available) {
        call.key_at(pos as usize);
    }
}
