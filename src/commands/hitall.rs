//! `RATELIMIT.HITALL numkeys key [key ...] limit window [limit window ...] [COST cost] [MS]
//! [SLIDE | ALIGN] [TZ zone] [TOKENS tokens numtokenkeys [RESERVE]]`: one hit against several
//! fixed-window (or, with SLIDE, sliding-window) limits, all or nothing; with TOKENS, the last
//! keys count a request's tokens, and with RESERVE the reply ends with one reservation of them
//! all for SETTLE.

use crate::commands::arg_docs::{ALIGN, COST, FIXED_WINDOW, MS, RESERVE, TZ};
use crate::commands::limiter::next_reservation_id;
use crate::commands::{record, shadow, track, Counted, HITS, SLIDES};
use crate::core::args::parse_hitall;
use crate::core::decimal::parse_i64;
use crate::core::reservation::{self, Reserved};
use crate::core::stored::{Change, Stored, Value};
use crate::core::window::Limit;
use crate::core::{slide, window};
use crate::redis::call::{entry_point, Call, Error};
use crate::redis::clock::{self, Now};
use crate::redis::command::{arg, Arg, Command, Keys, BLOCK, INTEGER, KEY, ONEOF, PURE_TOKEN, WRITES};
use crate::redis::key::{refuse_new_over_maxmemory, StoredKey, Written};
use crate::redis::stats;

/// RATELIMIT.HITALL: its flags, keys and docs, as the server is told them.
pub const COMMAND: Command = Command {
    name: c"ratelimit.hitall",
    // Keys given by numkeys: a key spec for COMMAND GETKEYS and ACLs, and getkeys-api for 7.0's
    // cluster routing, which reads only that.
    flags: c"write getkeys-api",
    acl_categories: c"write slow",
    keys: Keys::Counted(WRITES),
    arity: -5,
    entry: entry_point!(hitall),
    opt_in: None,
    summary: c"Counts one hit against several limits, all or nothing; with TOKENS, the last keys count a request's tokens. Replies [allowed, [count, remaining, reset_ms] per key]; with SLIDE, sliding windows and [count, remaining, retry_after_ms, reset_ms] per key; with RESERVE, a reservation of the token keys last.",
    complexity: c"O(N) where N is the number of keys",
    args: &[
        arg(c"numkeys", INTEGER),
        Arg { multiple: true, ..arg(c"key", KEY) },
        Arg {
            multiple: true,
            subargs: &[arg(c"limit", INTEGER), FIXED_WINDOW],
            ..arg(c"limit-window", BLOCK)
        },
        COST,
        MS,
        Arg {
            optional: true,
            subargs: &[
                Arg {
                    token: Some(c"SLIDE"),
                    summary: Some(c"sliding windows, as RATELIMIT.SLIDE"),
                    ..arg(c"slide", PURE_TOKEN)
                },
                Arg { optional: false, ..ALIGN },
            ],
            ..arg(c"mode", ONEOF)
        },
        TZ,
        Arg {
            token: Some(c"TOKENS"),
            optional: true,
            summary: Some(c"the last numtokenkeys keys count this many tokens instead of the cost"),
            subargs: &[arg(c"tokens", INTEGER), arg(c"numtokenkeys", INTEGER)],
            ..arg(c"tokens", BLOCK)
        },
        Arg {
            summary: Some(c"reply with a reservation of the token keys as the last element, for RATELIMIT.SETTLE"),
            ..RESERVE
        },
    ],
};

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
    // With RESERVE the token keys' cost counts for TOP when settled, as a HIT's does.
    let reserved_from = if args.reserve { args.first_token_key() } else { limits.len() };
    let mut zone = [0; 6];
    let zone = args.zone.text(&mut zone);
    if args.slide {
        let (allowed, outcomes, _, would_deny) =
            hit_all(call, &args.keys, &limits, now, (SLIDES, Written::Set), slide::decide_all, |o| {
                (o.change, o.remaining)
            })?;
        track_all(&args.keys, &limits, allowed, now, outcomes.iter().map(|o| o.remaining), &would_deny, reserved_from);
        let reserved = |i: usize, l: &Limit| match outcomes[i].change {
            Some(Change::Set { value, .. }) => Some(Reserved::Slide {
                limit: l.limit,
                window_ms: l.window_ms,
                start_ms: value.start_ms,
                amount: l.cost,
            }),
            _ => None,
        };
        let reservation = (args.reserve && allowed).then(|| reservation(&args.keys, &limits, reserved_from, reserved));
        reply(
            call,
            allowed,
            outcomes.iter().map(|o| [o.count, o.remaining, o.retry_after_ms, o.reset_ms]),
            args.reserve,
            reservation,
        );
    } else {
        let (allowed, outcomes, stored, would_deny) =
            hit_all(call, &args.keys, &limits, now, (HITS, Written::Incrby), window::decide_all, |o| {
                (o.change, o.remaining)
            })?;
        track_all(&args.keys, &limits, allowed, now, outcomes.iter().map(|o| o.remaining), &would_deny, reserved_from);
        let reserved = |i: usize, l: &Limit| {
            window::window_end(stored[i], &outcomes[i]).map(|window_end_ms| Reserved::Hit {
                limit: l.limit,
                window: args.limits[i].1,
                zone,
                window_end_ms,
                amount: l.cost,
            })
        };
        let reservation = (args.reserve && allowed).then(|| reservation(&args.keys, &limits, reserved_from, reserved));
        reply(call, allowed, outcomes.iter().map(|o| [o.count, o.remaining, o.reset_ms]), args.reserve, reservation);
    }
    Ok(())
}

/// The reservation of an admitted call's token keys (from `from` on): each key's own, joined by
/// ','; None if one of them has no window to settle into (it cannot: an admitted hit writes).
fn reservation<'z>(
    keys: &[&[u8]],
    limits: &[Limit],
    from: usize,
    reserved: impl Fn(usize, &Limit) -> Option<Reserved<'z>>,
) -> Option<Vec<u8>> {
    let mut text = Vec::new();
    let mut buf = [0; reservation::MAX_LEN];
    // One id for the call: each key's marks are its own.
    let id = next_reservation_id();
    for (i, l) in limits.iter().enumerate().skip(from) {
        if i > from {
            text.push(b',');
        }
        text.extend_from_slice(reserved(i, l)?.write(keys[i], &id, &mut buf));
    }
    Some(text)
}

/// RATELIMIT.TOP's share: an admitted call counts against every key, a denied one against the keys
/// whose own limit refused it (those with less than the cost `remaining`); and a call shadow mode
/// admitted, its would-be denial against the shadowed keys that refused it (`would_deny`).
fn track_all(
    names: &[&[u8]],
    limits: &[Limit],
    allowed: bool,
    now: Now,
    remaining: impl Iterator<Item = i64>,
    would_deny: &[bool],
    reserved_from: usize,
) {
    let refused = limits.iter().zip(remaining).map(|(l, left)| allowed || l.cost > left);
    let keys = limits.iter().zip(refused).enumerate().filter(|(_, (_, counts))| *counts);
    let cost = |i: usize, l: &Limit| if i >= reserved_from { 0 } else { l.cost };
    track(&stats::HITALL_DECISIONS, allowed, now.ms, keys.map(|(i, (l, _))| (names[i], cost(i, l))));
    if would_deny.contains(&true) {
        let shadowed = would_deny.iter().enumerate().filter(|(_, &no)| no).map(|(i, _)| names[i]);
        shadow::record(&stats::HITALL_DECISIONS, now.ms, shadowed);
    }
}

/// An algorithm's all-or-nothing decision, with the keys in shadow mode: `(allowed, outcome per
/// key)`.
type DecideAll<V, O> = fn(&[(Limit, Stored<V>)], &[bool], i64) -> (bool, Vec<O>);

/// The one hit on every key, decided by `decide_all` and written; the parser read `limits.len()`
/// keys from the third argument on. Also each key as it was read, and for a call shadow mode
/// admitted, which keys would have denied it (else empty).
#[allow(clippy::type_complexity)]
fn hit_all<V: Value, O>(
    call: &Call,
    names: &[&[u8]],
    limits: &[Limit],
    now: Now,
    (counted, written): (Counted, Written),
    decide_all: DecideAll<V, O>,
    change_and_remaining: fn(&O) -> (Option<Change<V>>, i64),
) -> Result<(bool, Vec<O>, Vec<Stored<V>>, Vec<bool>), Error> {
    // Every key is read before anything is written, so an error on any of them changes none.
    let opened = (2..2 + limits.len()).filter_map(|i| call.key(i));
    let mut keys = opened.map(|name| StoredKey::open(call, name)).collect::<Result<Vec<_>, _>>()?;
    let stored = keys.iter_mut().map(StoredKey::read).collect::<Result<Vec<_>, _>>()?;
    refuse_new_over_maxmemory(call, &stored)?;
    let calls: Vec<(Limit, Stored<V>)> = limits.iter().copied().zip(stored.iter().copied()).collect();
    let (mut allowed, mut outcomes) = decide_all(&calls, &[], now.ms);
    // Only a denied call looks its keys up in shadow mode's prefixes.
    let mut would_deny = Vec::new();
    if !allowed && shadow::on() {
        let shadowed: Vec<bool> = names.iter().map(|key| shadow::covers(key)).collect();
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
    Ok((allowed, outcomes, stored, would_deny))
}

/// `[allowed, [fields of key 1], [fields of key 2], ...]`, and with RESERVE (`reserving`) the
/// reservation last (nil when denied).
fn reply<const N: usize>(
    call: &Call,
    allowed: bool,
    fields: impl ExactSizeIterator<Item = [i64; N]>,
    reserving: bool,
    reservation: Option<Option<Vec<u8>>>,
) {
    call.reply_array(1 + fields.len() + usize::from(reserving));
    call.reply_integer(i64::from(allowed));
    for f in fields {
        call.reply_integers(&f);
    }
    if reserving {
        match reservation.flatten() {
            Some(text) => {
                stats::RESERVED.add(1);
                call.reply_bulk(&text);
            }
            None => call.reply_null(),
        }
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
