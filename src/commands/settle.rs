//! `RATELIMIT.SETTLE key reservation used`: a reservation of HIT, SLIDE or GCRA settled with the
//! amount used. Replies as the reserving command would after it, as admitted, and last how much
//! it applied: negative for what it gave back, positive for an overage charged.

use crate::commands::healed;
use crate::core::args::{parse_settle, ArgError};
use crate::core::calendar::Zone;
use crate::core::gcra::{self, Rate};
use crate::core::reservation::Reserved;
use crate::core::slide::{self, Unsettled};
use crate::core::stored::{Change, Stored, Value};
use crate::core::top::View;
use crate::core::window::{self, Limit};
use crate::redis::call::{Call, Error};
use crate::redis::clock;
use crate::redis::key::{refuse_new_over_maxmemory, StoredKey, Written};
use crate::redis::{stats, tracking};

const OVERFLOW: &str = "ERR increment or decrement would overflow";
const INVALID: &str = "ERR invalid reservation";

pub fn settle(call: &Call) -> Result<(), Error> {
    let args = parse_settle(call.args())?;
    let (Some(name), Some(key_name)) = (call.key(1), call.arg(1)) else {
        return Err(ArgError::Arity("ratelimit.settle").into());
    };
    let reserved = Reserved::parse(args.reservation, key_name).map_err(|r| Error::from(r.message()))?;
    let (amount, used) = (reserved.amount(), args.used);
    let now = clock::command_now();
    let mut key = StoredKey::open(call, name)?;
    // The reply: the reserving command's numbers, then what was applied.
    let (reply, len): ([i64; 6], usize) = match reserved {
        Reserved::Hit { limit, window, zone, window_end_ms, .. } => {
            let zone = if zone.is_empty() { Zone::Offset(0) } else { Zone::parse(zone).map_err(|_| INVALID)? };
            // An overage after the reserved window ended counts in the one laid now.
            let window_ms = window.left(now.ms, &zone).ok_or("ERR window is too large")?;
            let counter = key.read::<i64>()?;
            let l = Limit { limit, window_ms, cost: amount };
            let (o, applied) =
                window::settle_reserved(&l, window_end_ms, amount, used, counter, now.ms).ok_or(OVERFLOW)?;
            write(call, &mut key, counter, o.change, Written::Incrby, used > amount)?;
            ([1, o.count, o.remaining, o.reset_ms, applied, 0], 5)
        }
        Reserved::Slide { limit, window_ms, start_ms, .. } => {
            let stored = key.read::<slide::Counts>()?;
            let l = Limit { limit, window_ms, cost: amount };
            let (o, applied) =
                slide::settle_reserved(&l, start_ms, amount, used, stored, now.ms).map_err(|e| match e {
                    Unsettled::WindowDiffers => "ERR the reservation's window differs from the key's",
                    Unsettled::Overflow => OVERFLOW,
                })?;
            write(call, &mut key, stored, o.change, Written::Set, used > amount)?;
            ([1, o.count, o.remaining, o.retry_after_ms, o.reset_ms, applied], 6)
        }
        Reserved::Gcra { capacity, emission_ns, .. } => {
            let bucket = key.read::<i64>()?;
            let rate = Rate::new(capacity - 1, emission_ns, 1).map_err(|_| INVALID)?;
            let (o, applied) = gcra::settle_reserved(&rate, amount, used, bucket, now.ns, now.ms).ok_or(OVERFLOW)?;
            write(call, &mut key, bucket, o.change, Written::Set, used > amount)?;
            ([0, capacity, o.remaining, o.retry_after_ms(), o.full_after_ms(), applied], 6)
        }
    };
    let applied = reply[len - 1];
    stats::SETTLED.add(1);
    match applied {
        a if a > 0 => stats::OVERAGE.add(1),
        a if a < 0 => stats::REFUNDED.add(1),
        _ if used < amount => stats::REFUNDS_DROPPED.add(1),
        _ => {}
    }
    // What was used is the call's admitted cost, for RATELIMIT.TOP.
    if used > 0 {
        tracking::record(View::Admitted, now.ms, [(key_name, used.unsigned_abs())]);
    }
    call.reply_integers(&reply[..len]);
    Ok(())
}

/// Applies a settle's change to the key read as `stored`; `overage`: it may make a key, which is
/// refused over maxmemory, as a first hit is.
fn write<V: Value>(
    call: &Call,
    key: &mut StoredKey,
    stored: Stored<V>,
    change: Option<Change<V>>,
    written: Written,
    overage: bool,
) -> Result<(), Error> {
    if overage {
        refuse_new_over_maxmemory(call, &[stored])?;
    }
    if let Some(change) = change {
        key.apply(&change, written)?;
    }
    healed(&[stored]);
    Ok(())
}
