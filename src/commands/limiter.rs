//! The one body of the limiter commands on one key (HIT, SLIDE, GCRA, CL.THROTTLE) around their
//! algorithm's decision (`core::algorithm`): `decide` checks a give-back's permission, reads the
//! key, refuses a new one over maxmemory, decides (shadow mode admitting a denial where it covers
//! the key) and writes, in that order; `answer` records the decision (INFO, RATELIMIT.TOP, shadow
//! mode's would-be denial), then replies.

use crate::commands::{gave_back, may_give_back, record, shadow, track, Counted};
use crate::core::algorithm::{Algorithm, At, Decision};
use crate::core::args::ArgError;
use crate::core::reservation::{self, Reserved};
use crate::core::stored::Stored;
use crate::redis::call::{Call, Error, KeyName};
use crate::redis::clock::Now;
use crate::redis::key::{refuse_new_over_maxmemory, StoredKey, Written};
use crate::redis::stats::{self, Decisions};

/// What a command counts its decisions in, and how its write reaches replicas and the AOF.
pub struct Counting {
    pub counted: Counted,
    pub decisions: &'static Decisions,
    pub written: Written,
}

/// What a call with or without RESERVE answers last: nothing (no RESERVE), nil (denied), or the
/// reservation.
pub enum Reserving<'a> {
    No,
    Denied,
    Granted(Reserved<'a>),
}

/// A call decided and written, to `answer`.
pub struct Decided<'a, V> {
    counting: &'static Counting,
    key: &'a [u8],
    /// The key as it was before the call.
    stored: Stored<V>,
    decision: Decision<V>,
    cost: i64,
    /// Admitted by shadow mode, its limit having denied it.
    shadowed: bool,
    reserving: Reserving<'a>,
    now_ms: i64,
}

/// A limiter command's whole body on its key (the call's first argument): `decide`, then
/// `answer`; `command` names it in the arity error. `now` is the command's one clock
/// (`clock::command_now`, read once: the algorithm's window may have been laid by it).
pub fn run<A: Algorithm>(
    call: &Call,
    command: &'static str,
    algorithm: &A,
    (reserve, now): (bool, Now),
    counting: &'static Counting,
) -> Result<(), Error> {
    let (Some(name), Some(key)) = (call.key(1), call.arg(1)) else {
        return Err(ArgError::Arity(command).into());
    };
    let decided = decide(call, (name, key), algorithm, (reserve, now), counting)?;
    answer(call, decided);
    Ok(())
}

/// `algorithm`'s call on `key` (named `name`) at `now`, written as `counting` says; with
/// `reserve`, its reservation.
fn decide<'a, A: Algorithm>(
    call: &Call,
    (name, key): (KeyName, &'a [u8]),
    algorithm: &'a A,
    (reserve, now): (bool, Now),
    counting: &'static Counting,
) -> Result<Decided<'a, A::Value>, Error> {
    let cost = algorithm.cost();
    if cost < 0 {
        may_give_back(call, key)?;
    }
    let at = At { ms: now.ms, ns: now.ns };
    let mut stored_key = StoredKey::open(call, name)?;
    let stored = stored_key.read()?;
    if cost >= 0 {
        refuse_new_over_maxmemory(call, &[stored])?;
    }
    let decision = algorithm.decide(stored, at).ok_or(A::REFUSED)?;
    // A call that only looks (CL.THROTTLE's quantity 0) is not shadow mode's to admit.
    let denied = !decision.allowed && cost > 0;
    let anyway = shadow::admitted(key, denied, || algorithm.admit_anyway(stored, at));
    let decision = anyway.unwrap_or(decision);
    if let Some(change) = decision.change {
        stored_key.apply(&change, counting.written)?;
    }
    let reserving = match reserve {
        false => Reserving::No,
        true => algorithm.reserved(stored, &decision).map_or(Reserving::Denied, Reserving::Granted),
    };
    Ok(Decided { counting, key, stored, decision, cost, shadowed: anyway.is_some(), reserving, now_ms: now.ms })
}

/// INFO, RATELIMIT.TOP and shadow mode's record of a decided call, then its reply: a give-back is
/// no decision; a reservation's cost counts for TOP when settled.
pub fn answer<V>(call: &Call, d: Decided<V>) {
    let counting = d.counting;
    let allowed = d.decision.allowed;
    if d.cost < 0 {
        gave_back(&[d.stored]);
    } else {
        record(counting.counted, allowed, &[d.stored]);
    }
    // A call that only looks (CL.THROTTLE's quantity 0) is tracked nowhere.
    if d.cost > 0 {
        let cost = if matches!(d.reserving, Reserving::No) { d.decision.granted } else { 0 };
        track(counting.decisions, allowed, d.now_ms, [(d.key, cost)]);
    }
    if d.shadowed {
        shadow::record(counting.decisions, d.now_ms, [d.key]);
    }
    reply(call, d.key, d.decision.numbers(), d.reserving);
}

/// A limiter call's reply: its numbers, then with RESERVE the reservation (nil when denied).
fn reply(call: &Call, key: &[u8], numbers: &[i64], reserving: Reserving) {
    let reserved = match reserving {
        Reserving::No => return call.reply_integers(numbers),
        Reserving::Denied => None,
        Reserving::Granted(r) => Some(r),
    };
    call.reply_array(numbers.len() + 1);
    for &n in numbers {
        call.reply_integer(n);
    }
    match reserved {
        Some(r) => {
            stats::RESERVED.add(1);
            let mut buf = [0; reservation::MAX_LEN];
            call.reply_bulk(r.write(key, &next_reservation_id(), &mut buf));
        }
        None => call.reply_null(),
    }
}

/// A new reservation's id: this process's next (`reservation::id`), from a seed drawn at random
/// the first time.
pub fn next_reservation_id() -> reservation::Id {
    use std::hash::BuildHasher;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static SEED: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // std's hasher keys are drawn from the OS's randomness.
    let seed = *SEED.get_or_init(|| std::collections::hash_map::RandomState::new().hash_one(0u64));
    reservation::id(seed, NEXT.fetch_add(1, Ordering::Relaxed))
}
