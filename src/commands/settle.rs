//! `RATELIMIT.SETTLE key [key ...] reservation used`: a reservation of HIT, SLIDE, GCRA or ADAPT
//! (or of a HITALL's token keys, one entry per key) settled with the amount used. Replies as the
//! reserving command would after it, as admitted, and last how much it applied: negative for what
//! it gave back, positive for an overage charged; with several keys, one such reply per key.
//!
//! A reservation settles at most once: its key's settle marks (`core::settle_marks`) keep what
//! each reservation's settle applied, and a second SETTLE of it changes nothing and answers with
//! the counts as they are and what the first applied.

use crate::commands::healed;
use crate::core::adaptive::{self, State};
use crate::core::args::{parse_settle, ArgError};
use crate::core::calendar::{Window, Zone};
use crate::core::gcra::{self, Rate};
use crate::core::reservation::Reserved;
use crate::core::settle_marks::mark_expiry;
use crate::core::slide::{self, Unsettled};
use crate::core::stored::{Change, Stored};
use crate::core::top::View;
use crate::core::window::{self, Limit};
use crate::redis::call::{entry_point, Call, Error};
use crate::redis::clock::{self, Now};
use crate::redis::command::{arg, Arg, Command, Keys, INTEGER, KEY, STRING, WRITES};
use crate::redis::key::{refuse_new_over_maxmemory, KeyError, StoredKey, Written};
use crate::redis::settle_marks::SettleMarks;
use crate::redis::{stats, tracking};

const OVERFLOW: &str = "ERR increment or decrement would overflow";
const INVALID: &str = "ERR invalid reservation";
const WINDOW_DIFFERS: &str = "ERR the reservation's window differs from the key's";

/// One key's settle, decided and not yet written.
struct Settled<'a> {
    key: StoredKey<'a>,
    write: Write,
    /// The reply's numbers (the reserving command's, then what was applied), and how many.
    reply: ([i64; 6], usize),
    /// What the reservation was of, which ends the reply.
    shape: Shape,
    amount: i64,
    /// The key's marks, for the reservation's id; None for a reservation without id.
    marks: Option<SettleMarks>,
    /// Settled before: nothing to apply, and the reply says what the first settle applied.
    again: bool,
    /// Until when what was reserved counts (`Reserved::counts_until`).
    counts_until: i64,
    /// An adaptive limit's epoch that ended with this settle earned a higher limit.
    increased: bool,
}

/// What a reservation was of, ending SETTLE's reply so that a client reads the reply without
/// reading the reservation: the limiter (`fixed`, `sliding`, `bucket` or `adaptive`), its limit
/// (a bucket's capacity, an adaptive limit's learned one), and its window in ms (-1 for a
/// calendar window, whose length varies, and for a bucket, which has none).
#[derive(Clone, Copy)]
struct Shape(&'static [u8], i64, i64);

impl Shape {
    /// The shape of a reservation of any limiter but an adaptive one, whose limit is the key's.
    fn of(reserved: &Reserved) -> Shape {
        match *reserved {
            Reserved::Hit { limit, window: Window::Rolling(ms) | Window::Aligned(ms), .. } => {
                Shape(b"fixed", limit, ms)
            }
            Reserved::Hit { limit, window: Window::Calendar(_), .. } => Shape(b"fixed", limit, -1),
            Reserved::Slide { limit, window_ms, .. } => Shape(b"sliding", limit, window_ms),
            Reserved::Gcra { capacity, .. } => Shape(b"bucket", capacity, -1),
            Reserved::Adapt { bounds, .. } => Shape(b"adaptive", bounds.start, bounds.window_ms),
        }
    }
}

/// One key's reply: the numbers, then the shape.
fn reply_one(call: &Call, s: &Settled) {
    let Shape(kind, limit, window_ms) = s.shape;
    call.reply_array(s.reply.1 + 3);
    for &n in &s.reply.0[..s.reply.1] {
        call.reply_integer(n);
    }
    call.reply_bulk(kind);
    call.reply_integer(limit);
    call.reply_integer(window_ms);
}

/// What a settle writes: a fixed window's or a bucket's integer, a sliding window's counts, or
/// an adaptive limit's state.
enum Write {
    Integer(Stored<i64>, Option<Change<i64>>, Written),
    Counts(Stored<slide::Counts>, Option<Change<slide::Counts>>),
    Adaptive(Stored<State>, Option<Change<State>>),
}

/// RATELIMIT.SETTLE: its flags, keys and docs, as the server is told them.
pub const COMMAND: Command = Command {
    name: c"ratelimit.settle",
    // As HIT: over maxmemory only new keys are refused (an overage after the window ended).
    flags: c"write fast",
    acl_categories: c"write fast",
    keys: Keys::AllButLastTwo(WRITES),
    arity: -4,
    entry: entry_point!(settle),
    opt_in: None,
    summary: c"Settles a reservation of HIT, SLIDE, GCRA, ADAPT or HITALL's TOKENS with the amount used: gives the unused part back to the reserved window while it counts, charges more to the current one. Replies as the reserving command, with how much it applied last; one such reply per key for several.",
    complexity: c"O(N) where N is the number of keys",
    args: &[
        Arg {
            summary: Some(c"the key the reservation was made on; HITALL's token keys, in order"),
            multiple: true,
            ..arg(c"key", KEY)
        },
        Arg { summary: Some(c"the reservation, as RESERVE replied it"), ..arg(c"reservation", STRING) },
        Arg { summary: Some(c"the amount used, an integer >= 0"), ..arg(c"used", INTEGER) },
    ],
};

pub fn settle(call: &Call) -> Result<(), Error> {
    let args = parse_settle(call.args())?;
    let entries = args.reservation.split(|&b| b == b',');
    if entries.clone().count() != args.keys {
        return Err(Error::from(format!("ERR the reservation is for {} keys", entries.count())));
    }
    let names: Vec<&[u8]> = (1..=args.keys).filter_map(|i| call.arg(i)).collect();
    if names.iter().enumerate().any(|(i, name)| names[..i].contains(name)) {
        return Err(ArgError::DuplicateKey.into());
    }
    let now = clock::command_now();
    // Every entry is read and decided, and every key checked, before anything is written: an
    // error on any of them changes none.
    let mut settled = Vec::with_capacity(args.keys);
    for (i, entry) in entries.enumerate() {
        let (Some(name), Some(key_name)) = (call.key(1 + i), call.arg(1 + i)) else {
            return Err(ArgError::Arity("ratelimit.settle").into());
        };
        let (reserved, id) = Reserved::parse(entry, key_name).map_err(|r| Error::from(r.message()))?;
        let marks = id.map(|id| SettleMarks::open(call, key_name, id)).transpose()?;
        let first = marks.as_ref().map(SettleMarks::settled).transpose()?.flatten();
        // Settled before: decided as if exactly what was reserved was used, which changes no count.
        let used = if first.is_some() { reserved.amount() } else { args.used };
        let mut s = decide(call, StoredKey::open(call, name)?, reserved, used, now)?;
        if let Some(applied) = first {
            s.reply.0[s.reply.1 - 1] = applied;
        }
        (s.marks, s.again, s.counts_until) = (marks, first.is_some(), reserved.counts_until(now.ms));
        settled.push(s);
    }
    // Marks of a key that has none yet are a new key: refused over maxmemory, as a first hit is.
    let new_marks = settled.iter().any(|s| !s.again && s.marks.as_ref().is_some_and(SettleMarks::is_missing));
    if new_marks && call.is_out_of_memory() {
        return Err(KeyError::OutOfMemory.into());
    }
    let used = args.used;
    for s in &mut settled {
        let key_expiry = match &s.write {
            Write::Integer(stored, change, written) => apply(&mut s.key, *stored, *change, *written)?,
            Write::Counts(stored, change) => apply(&mut s.key, *stored, *change, Written::Set)?,
            // An adaptive limit is kept ten windows past its last call: its marks guard only
            // what the reservation counted (an overage is a debt the bucket pays off in time).
            Write::Adaptive(stored, change) => apply(&mut s.key, *stored, *change, Written::Set).map(|_| None)?,
        };
        if let (false, Some(marks)) = (s.again, &mut s.marks) {
            let at = mark_expiry(s.counts_until, key_expiry, marks.expiry());
            // Marks that would expire at once guard nothing: what was reserved no longer counts,
            // and the settle wrote to no window.
            if at > now.ms {
                marks.mark(s.reply.0[s.reply.1 - 1], at)?;
            }
        }
    }
    for (i, s) in settled.iter().enumerate() {
        if s.increased {
            stats::ADAPT_INCREASES.add(1);
        }
        let applied = s.reply.0[s.reply.1 - 1];
        if s.again {
            stats::SETTLED_AGAIN.add(1);
            continue;
        }
        stats::SETTLED.add(1);
        match applied {
            a if a > 0 => stats::OVERAGE.add(1),
            a if a < 0 => stats::REFUNDED.add(1),
            _ if used < s.amount => stats::REFUNDS_DROPPED.add(1),
            _ => {}
        }
        // What was used is the call's admitted cost, for RATELIMIT.TOP.
        if used > 0 {
            tracking::record(View::Admitted, now.ms, [(names[i], used.unsigned_abs())]);
        }
    }
    if let [one] = &settled[..] {
        reply_one(call, one);
    } else {
        call.reply_array(settled.len());
        for s in &settled {
            reply_one(call, s);
        }
    }
    Ok(())
}

/// One key's settle of `reserved` with `used`: its reply and its write, checked (a write that may
/// make a key is refused over maxmemory, as a first hit is) but not made.
fn decide<'a>(
    call: &Call,
    mut key: StoredKey<'a>,
    reserved: Reserved,
    used: i64,
    now: Now,
) -> Result<Settled<'a>, Error> {
    let amount = reserved.amount();
    let (mut shape, mut increased) = (Shape::of(&reserved), false);
    let (write, reply) = match reserved {
        Reserved::Hit { limit, window, zone, window_end_ms, .. } => {
            let zone = if zone.is_empty() { Zone::Offset(0) } else { Zone::parse(zone).map_err(|_| INVALID)? };
            // An overage after the reserved window ended counts in the one laid now.
            let window_ms = window.left(now.ms, &zone).ok_or("ERR window is too large")?;
            let counter = key.read::<i64>()?;
            let l = Limit { limit, window_ms, cost: amount };
            let (o, applied) =
                window::settle_reserved(&l, window_end_ms, amount, used, counter, now.ms).ok_or(OVERFLOW)?;
            (Write::Integer(counter, o.change, Written::Incrby), ([1, o.count, o.remaining, o.reset_ms, applied, 0], 5))
        }
        Reserved::Slide { limit, window_ms, start_ms, .. } => {
            let stored = key.read::<slide::Counts>()?;
            let l = Limit { limit, window_ms, cost: amount };
            let (o, applied) =
                slide::settle_reserved(&l, start_ms, amount, used, stored, now.ms).map_err(|e| match e {
                    Unsettled::WindowDiffers => WINDOW_DIFFERS,
                    Unsettled::Overflow => OVERFLOW,
                })?;
            (Write::Counts(stored, o.change), ([1, o.count, o.remaining, o.retry_after_ms, o.reset_ms, applied], 6))
        }
        Reserved::Gcra { capacity, emission_ns, .. } => {
            let bucket = key.read::<i64>()?;
            let rate = Rate::new(capacity - 1, emission_ns, 1).map_err(|_| INVALID)?;
            let (o, applied) = gcra::settle_reserved(&rate, amount, used, bucket, now.ns, now.ms).ok_or(OVERFLOW)?;
            let reply = [0, capacity, o.remaining, o.retry_after_ms(), o.full_after_ms(), applied];
            (Write::Integer(bucket, o.change, Written::Set), (reply, 6))
        }
        Reserved::Adapt { bounds, epoch_start_ms, .. } => {
            let stored = key.read::<State>()?;
            let o = adaptive::settle_reserved(&bounds, epoch_start_ms, amount, used, stored, now.ms)
                .ok_or(WINDOW_DIFFERS)?;
            increased = o.increased;
            shape = Shape(b"adaptive", o.limit, bounds.window_ms);
            let change = o.write.map(|(state, at)| adaptive::change(state, at));
            (Write::Adaptive(stored, change), ([1, o.limit, o.remaining, -1, o.reset_ms, o.applied], 6))
        }
    };
    if used > amount {
        match &write {
            Write::Integer(stored, ..) => refuse_new_over_maxmemory(call, &[*stored])?,
            Write::Counts(stored, _) => refuse_new_over_maxmemory(call, &[*stored])?,
            Write::Adaptive(stored, _) => refuse_new_over_maxmemory(call, &[*stored])?,
        }
    }
    Ok(Settled { key, write, reply, shape, amount, marks: None, again: false, counts_until: 0, increased })
}

/// Makes a settle's change on the key read as `stored`; the key's expiry after it.
fn apply<V: crate::core::stored::Value>(
    key: &mut StoredKey<'_>,
    stored: Stored<V>,
    change: Option<Change<V>>,
    written: Written,
) -> Result<Option<i64>, Error> {
    if let Some(change) = change {
        key.apply(&change, written)?;
    }
    healed(&[stored]);
    Ok(stored.expiry_after(change))
}
