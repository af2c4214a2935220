//! `RATELIMIT.HITALL numkeys key [key ...] limit window [limit window ...] [COST cost] [MS]
//! [SLIDE | ALIGN] [TZ zone]`: one hit against several fixed-window (or, with SLIDE,
//! sliding-window) limits, all or nothing.

use crate::commands::{record, shadow, track, Counted, HITS, SLIDES};
use crate::core::args::parse_hitall;
use crate::core::decimal::parse_i64;
use crate::core::stored::{Change, Stored, Value};
use crate::core::window::Limit;
use crate::core::{slide, window};
use crate::redis::call::{Call, Error};
use crate::redis::clock::{self, Now};
use crate::redis::key::{refuse_new_over_maxmemory, StoredKey, Written};
use crate::redis::stats;

pub fn hitall(call: &Call) -> Result<(), Error> {
    // Redis 7.0's cluster routing asks for the keys this way (it ignores the key specs that
    // COMMAND GETKEYS and ACLs use): without it, HITALL would run on any node.
    if call.wants_key_positions() {
        report_key_positions(call);
        return Ok(());
    }
    let args = parse_hitall(call.args())?;
    let now = clock::command_now();
    let limits = args.at(now.ms)?;
    if args.slide {
        let (allowed, outcomes, would_deny) =
            hit_all(call, &limits, now, (SLIDES, Written::Set), slide::decide_all, |o| (o.change, o.remaining))?;
        track_all(call, &limits, allowed, now, outcomes.iter().map(|o| o.remaining), &would_deny);
        reply(call, allowed, outcomes.iter().map(|o| [o.count, o.remaining, o.retry_after_ms, o.reset_ms]));
    } else {
        let (allowed, outcomes, would_deny) =
            hit_all(call, &limits, now, (HITS, Written::Incrby), window::decide_all, |o| (o.change, o.remaining))?;
        track_all(call, &limits, allowed, now, outcomes.iter().map(|o| o.remaining), &would_deny);
        reply(call, allowed, outcomes.iter().map(|o| [o.count, o.remaining, o.reset_ms]));
    }
    Ok(())
}

/// RATELIMIT.TOP's share: an admitted call counts against every key, a denied one against the keys
/// whose own limit refused it (those with less than the cost `remaining`); and a call shadow mode
/// admitted, its would-be denial against the shadowed keys that refused it (`would_deny`).
fn track_all(
    call: &Call,
    limits: &[Limit],
    allowed: bool,
    now: Now,
    remaining: impl Iterator<Item = i64>,
    would_deny: &[bool],
) {
    let refused = limits.iter().zip(remaining).map(|(l, left)| allowed || l.cost > left);
    let keys = limits.iter().zip(refused).enumerate().filter(|(_, (_, counts))| *counts);
    track(
        &stats::HITALL_DECISIONS,
        allowed,
        now.ms,
        keys.filter_map(|(i, (l, _))| call.arg(2 + i).map(|key| (key, l.cost))),
    );
    if would_deny.contains(&true) {
        let shadowed = would_deny.iter().enumerate().filter(|(_, &no)| no).filter_map(|(i, _)| call.arg(2 + i));
        shadow::record(&stats::HITALL_DECISIONS, now.ms, shadowed);
    }
}

/// An algorithm's all-or-nothing decision, with the keys in shadow mode: `(allowed, outcome per
/// key)`.
type DecideAll<V, O> = fn(&[(Limit, Stored<V>)], &[bool], i64) -> (bool, Vec<O>);

/// The one hit on every key, decided by `decide_all` and written; the parser read `limits.len()`
/// keys from the third argument on. Also, for a call shadow mode admitted, which keys would have
/// denied it (else empty).
fn hit_all<V: Value, O>(
    call: &Call,
    limits: &[Limit],
    now: Now,
    (counted, written): (Counted, Written),
    decide_all: DecideAll<V, O>,
    change_and_remaining: fn(&O) -> (Option<Change<V>>, i64),
) -> Result<(bool, Vec<O>, Vec<bool>), Error> {
    // Every key is read before anything is written, so an error on any of them changes none.
    let names = (2..2 + limits.len()).filter_map(|i| call.key(i));
    let mut keys = names.map(|name| StoredKey::open(call, name)).collect::<Result<Vec<_>, _>>()?;
    let stored = keys.iter_mut().map(StoredKey::read).collect::<Result<Vec<_>, _>>()?;
    refuse_new_over_maxmemory(call, &stored)?;
    let calls: Vec<(Limit, Stored<V>)> = limits.iter().copied().zip(stored.iter().copied()).collect();
    let (mut allowed, mut outcomes) = decide_all(&calls, &[], now.ms);
    // Only a denied call looks its keys up in shadow mode's prefixes.
    let mut would_deny = Vec::new();
    if !allowed && shadow::on() {
        let shadowed: Vec<bool> = (2..2 + limits.len()).map(|i| call.arg(i).is_some_and(shadow::covers)).collect();
        if shadowed.contains(&true) {
            let refused = limits.iter().zip(&outcomes).map(|(l, o)| l.cost > change_and_remaining(o).1);
            let refused: Vec<bool> = refused.zip(&shadowed).map(|(no, &shadow)| no && shadow).collect();
            (allowed, outcomes) = decide_all(&calls, &shadowed, now.ms);
            if allowed {
                would_deny = refused;
            }
        }
    }
    for (key, outcome) in keys.iter_mut().zip(&outcomes) {
        if let Some(change) = change_and_remaining(outcome).0 {
            key.apply(&change, written)?;
        }
    }
    record(counted, allowed, &stored);
    Ok((allowed, outcomes, would_deny))
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
