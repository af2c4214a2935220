//! The commands, one file each (its handler, and its `COMMAND`: the row of the command table
//! from which the module registers it and tells the server its docs and keys, see
//! `crate::redis::command`), in safe code over `crate::redis`'s values and `crate::core`'s
//! decisions; and what they share. Adding a command: its file here, and its `COMMAND` in
//! `COMMANDS` below.

mod acquire;
mod adapt;
mod arg_docs;
mod audit;
mod cl_throttle;
mod gcra;
pub mod guard;
mod hit;
mod hitall;
mod limiter;
mod peek;
mod release;
mod renew;
mod repair;
mod report;
mod settle;
pub mod shadow;
mod slide;
mod sweep;
mod top;

use crate::core::args::ArgError;
use crate::core::stored::Stored;
use crate::core::top::View;
use crate::redis::acl::AclUser;
use crate::redis::call::{Call, Error};
use crate::redis::command::Command;
use crate::redis::{stats, tracking};

impl From<ArgError> for Error {
    fn from(e: ArgError) -> Error {
        Error::from(e.message())
    }
}

/// INFO's counters of a limiter: calls, admitted, denied.
type Counted = [&'static stats::Stat; 3];
const HITS: Counted = [&stats::HITS, &stats::ADMITTED, &stats::DENIED];
const SLIDES: Counted = [&stats::SLIDE_CALLS, &stats::SLIDE_ADMITTED, &stats::SLIDE_DENIED];
const ACQUIRES: Counted = [&stats::ACQUIRES, &stats::ACQUIRED, &stats::ACQUIRE_DENIED];
const GCRAS: Counted = [&stats::GCRA_CALLS, &stats::GCRA_ADMITTED, &stats::GCRA_DENIED];
const ADAPTS: Counted = [&stats::ADAPT_CALLS, &stats::ADAPT_ADMITTED, &stats::ADAPT_DENIED];

/// One call, admitted or not.
/// A give-back (a negative COST, TOKENS or quantity) is for the callers that may settle on the
/// key (run RATELIMIT.SETTLE, which is in `@ratelimit-refund`): `NOPERM` for the others, before
/// anything is read or written. A call with no ACL user (the server's own) may.
fn may_give_back(call: &Call, key: &[u8]) -> Result<(), Error> {
    let Some(name) = call.user_name() else {
        return Ok(());
    };
    let user = AclUser::named(call, &name).ok_or("ERR ratelimit: cannot tell the caller's ACL user")?;
    match user.may_run(call, &[b"ratelimit.settle", key, b"-", b"0"]) {
        true => Ok(()),
        false => Err("NOPERM giving back (a negative COST, TOKENS or quantity) needs the permission to run RATELIMIT.SETTLE on the key".into()),
    }
}

fn count([calls, admitted, denied]: Counted, allowed: bool) {
    calls.add(1);
    if allowed { admitted } else { denied }.add(1);
}

/// INFO counters for one call on `keys` (as they were before it): one without TTL always gets
/// one, admitted or not.
fn record<V>(counted: Counted, allowed: bool, keys: &[Stored<V>]) {
    count(counted, allowed);
    healed(keys);
}

/// Keys (as they were before a call) without TTL, which the call gave one.
fn healed<V>(keys: &[Stored<V>]) {
    let healed = keys.iter().filter(|c| matches!(c, Stored::Present { expires_at: None, .. })).count();
    stats::HEALED.add(healed as u64);
}

/// INFO counters for a call that gave back (a negative COST or TOKENS): neither admitted nor
/// denied, and not a decision.
fn gave_back<V>(keys: &[Stored<V>]) {
    stats::REFUNDED.add(1);
    healed(keys);
}

/// One decision of a limiter command at `now_ms`, for INFO's per-command line and RATELIMIT.TOP:
/// an admitted call counts its cost against each of `keys`, a denied one counts once against each
/// (the callers pass the keys that refused).
fn track<'a>(
    decisions: &stats::Decisions,
    allowed: bool,
    now_ms: i64,
    keys: impl IntoIterator<Item = (&'a [u8], i64)>,
) {
    decisions.add(allowed);
    let view = if allowed { View::Admitted } else { View::Denied };
    tracking::record(
        view,
        now_ms,
        // A reservation's admitted cost weighs when it is settled (0 here).
        keys.into_iter()
            .map(|(key, cost)| (key, if allowed { cost.unsigned_abs() } else { 1 }))
            .filter(|&(_, w)| w > 0),
    );
}

/// Every command of the module.
pub const COMMANDS: &[Command] = &[
    hit::COMMAND,
    slide::COMMAND,
    hitall::COMMAND,
    peek::COMMAND,
    acquire::COMMAND,
    release::COMMAND,
    renew::COMMAND,
    gcra::COMMAND,
    settle::COMMAND,
    cl_throttle::COMMAND,
    audit::COMMAND,
    top::COMMAND,
    repair::COMMAND,
    adapt::COMMAND,
    report::COMMAND,
];
