//! `RATELIMIT.HITALL numkeys key [key ...] limit window [limit window ...] [COST cost] [MS]`: one
//! hit against several fixed-window limits, all or nothing.

use crate::commands::record_hits;
use crate::core::args::parse_hitall;
use crate::core::decimal::parse_i64;
use crate::core::stored::Stored;
use crate::core::window::{decide_all, Limit};
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
    let now = clock::command_now();
    // The parser read numkeys keys from the third argument on: every key is read before anything
    // is written, so an error on any of them changes none.
    let names = (2..2 + args.keys.len()).filter_map(|i| call.key(i));
    let mut keys = names.map(|name| StoredKey::open(call, name)).collect::<Result<Vec<_>, _>>()?;
    let counters = keys.iter_mut().map(StoredKey::read).collect::<Result<Vec<_>, _>>()?;
    refuse_new_over_maxmemory(call, &counters)?;
    let hits: Vec<(Limit, Stored)> = args.limits.iter().copied().zip(counters.iter().copied()).collect();
    let (allowed, outcomes) = decide_all(&hits, now.ms);
    for (key, outcome) in keys.iter_mut().zip(&outcomes) {
        if let Some(change) = outcome.change {
            key.apply(&change, Written::Incrby)?;
        }
    }
    record_hits(allowed, &counters);
    call.reply_array(1 + outcomes.len());
    call.reply_integer(i64::from(allowed));
    for o in outcomes {
        call.reply_integers(&[o.count, o.remaining, o.reset_ms]);
    }
    Ok(())
}

/// The positions of HITALL's keys: `numkeys` arguments from the third on, as far as they go.
fn report_key_positions(call: &Call) {
    let numkeys = call.arg(1).and_then(parse_i64).unwrap_or(0);
    let available = call.len().saturating_sub(2) as i64;
    for pos in 2..2 + numkeys.clamp(0, available) {
        call.key_at(pos as usize);
    }
}
