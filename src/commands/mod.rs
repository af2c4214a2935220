//! The commands, one file each, in safe code over `crate::redis`'s values and `crate::core`'s
//! decisions; and the command table, from which the module registers each command and tells the
//! server its docs and keys (see `crate::redis::command`). Adding a command: its file here, and
//! its row below.

mod acquire;
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
mod settle;
pub mod shadow;
mod slide;
mod sweep;
mod top;

use crate::core::args::ArgError;
use crate::core::stored::Stored;
use crate::core::top::View;
use crate::redis::acl::AclUser;
use crate::redis::call::{entry_point, Call, Error};
use crate::redis::command::{
    arg, option, Arg, Command, Keys, BLOCK, DOUBLE, INTEGER, KEY, ONEOF, PURE_TOKEN, READS, STRING, WRITES,
};
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

const COST: Arg =
    Arg { summary: Some(c"how many hits this call counts for (default 1)"), ..option(c"cost", INTEGER, c"COST") };
const COST_OR_REFUND: Arg = Arg {
    summary: Some(c"how many hits this call counts for (default 1); a negative cost gives that many back"),
    ..COST
};
const RESERVE: Arg = Arg {
    summary: Some(c"reply with a reservation as the last element, for RATELIMIT.SETTLE"),
    ..option(c"reserve", PURE_TOKEN, c"RESERVE")
};
const MS: Arg = Arg { summary: Some(c"the window is in milliseconds"), ..option(c"ms", PURE_TOKEN, c"MS") };
const FIXED_WINDOW: Arg = Arg {
    summary: Some(
        c"the window's length in seconds (milliseconds with MS), or day, week, month or year: a calendar window",
    ),
    ..arg(c"window", STRING)
};
const ALIGN: Arg = Arg {
    summary: Some(c"windows start at multiples of their length since the Unix epoch, not at the first hit"),
    ..option(c"align", PURE_TOKEN, c"ALIGN")
};
const TZ: Arg = Arg {
    summary: Some(c"the calendar windows' time zone: UTC (default), +HH:MM or -HH:MM, or an IANA name"),
    ..option(c"zone", STRING, c"TZ")
};
const LEASE_MS: Arg = Arg { summary: Some(c"the lease is in milliseconds"), ..option(c"ms", PURE_TOKEN, c"MS") };
const LEASE_ID: Arg = Arg { summary: Some(c"the lease's id"), ..arg(c"id", STRING) };
const LEASES_COMPLEXITY: &std::ffi::CStr = c"O(log N + M) where N is the leases held and M the expired ones pruned";
const NAMES: Arg =
    Arg { summary: Some(c"how many key names to list (default 100)"), ..option(c"count", INTEGER, c"LIMIT") };

/// Every command of the module.
pub const COMMANDS: &[Command] = &[
    Command {
        name: c"ratelimit.hit",
        // Not deny-oom: over maxmemory only new counters are refused (see redis/key.rs).
        flags: c"write fast",
        acl_categories: c"write fast",
        keys: Keys::At(1, WRITES),
        arity: -4,
        entry: entry_point!(hit::hit),
        opt_in: None,
        summary: c"Counts a hit against a fixed-window limit (started by the first hit, aligned to the epoch, or a calendar window in a time zone) and sets the window's expiry in one step; gives a counter without TTL one. Replies [allowed, count, remaining, reset_ms], with PARTIAL the hits granted, and with RESERVE the reservation.",
        complexity: c"O(1)",
        args: &[
            Arg { summary: Some(c"the counter"), ..arg(c"key", KEY) },
            Arg { summary: Some(c"hits admitted per window"), ..arg(c"limit", INTEGER) },
            FIXED_WINDOW,
            COST_OR_REFUND,
            MS,
            Arg {
                summary: Some(c"grant as many of the cost as the window has left, at least one; the number granted follows reset_ms in the reply"),
                ..option(c"partial", PURE_TOKEN, c"PARTIAL")
            },
            RESERVE,
            ALIGN,
            TZ,
        ],
    },
    Command {
        name: c"ratelimit.slide",
        // As HIT: over maxmemory only new keys are refused.
        flags: c"write fast",
        acl_categories: c"write fast",
        keys: Keys::At(1, WRITES),
        arity: -4,
        entry: entry_point!(slide::slide),
        opt_in: None,
        summary: c"Counts a call against a sliding-window limit (the previous window's count weighted by its overlap), in one key that always expires. Replies [allowed, count, remaining, retry_after_ms, reset_ms], with PARTIAL the calls granted, and with RESERVE the reservation.",
        complexity: c"O(1)",
        args: &[
            Arg { summary: Some(c"the window's counts"), ..arg(c"key", KEY) },
            Arg { summary: Some(c"calls admitted per sliding window"), ..arg(c"limit", INTEGER) },
            Arg { summary: Some(c"the window's length in seconds (milliseconds with MS)"), ..arg(c"window", INTEGER) },
            COST_OR_REFUND,
            MS,
            Arg {
                summary: Some(c"grant as many of the cost as the estimate has room for, at least one; the number granted follows reset_ms in the reply"),
                ..option(c"partial", PURE_TOKEN, c"PARTIAL")
            },
            Arg {
                optional: true,
                subargs: &[
                    Arg { token: Some(c"PEEK"), summary: Some(c"answer without writing"), ..arg(c"peek", PURE_TOKEN) },
                    Arg { optional: false, ..RESERVE },
                ],
                ..arg(c"mode", ONEOF)
            },
        ],
    },
    Command {
        name: c"ratelimit.hitall",
        // Keys given by numkeys: a key spec for COMMAND GETKEYS and ACLs, and getkeys-api for 7.0's
        // cluster routing, which reads only that.
        flags: c"write getkeys-api",
        acl_categories: c"write slow",
        keys: Keys::Counted(WRITES),
        arity: -5,
        entry: entry_point!(hitall::hitall),
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
    },
    Command {
        name: c"ratelimit.peek",
        flags: c"readonly fast",
        acl_categories: c"read fast",
        keys: Keys::At(1, READS),
        arity: -3,
        entry: entry_point!(peek::peek),
        opt_in: None,
        summary: c"Tells what a hit would get without making it. Replies [allowed, count, remaining, reset_ms]; reset_ms is -1 for a counter without TTL.",
        complexity: c"O(1)",
        args: &[arg(c"key", KEY), arg(c"limit", INTEGER), COST],
    },
    Command {
        name: c"ratelimit.acquire",
        // As HIT: over maxmemory only new lease sets are refused.
        flags: c"write fast",
        acl_categories: c"write fast",
        keys: Keys::At(1, WRITES),
        arity: -4,
        entry: entry_point!(acquire::acquire),
        opt_in: None,
        summary: c"Takes one of at most limit permits in flight for lease seconds; a live lease of the same ID is renewed and counted once. Replies [acquired, in_use, remaining, ms, id].",
        complexity: LEASES_COMPLEXITY,
        args: &[
            Arg { summary: Some(c"the lease set: lease ids scored by their expiry"), ..arg(c"key", KEY) },
            Arg { summary: Some(c"permits in flight at most"), ..arg(c"limit", INTEGER) },
            Arg { summary: Some(c"the lease's length in seconds (milliseconds with MS)"), ..arg(c"lease", INTEGER) },
            LEASE_MS,
            Arg { summary: Some(c"the lease's id (default: one the module makes)"), ..option(c"id", STRING, c"ID") },
        ],
    },
    Command {
        name: c"ratelimit.release",
        flags: c"write fast",
        acl_categories: c"write fast",
        keys: Keys::At(1, WRITES),
        arity: 3,
        entry: entry_point!(release::release),
        opt_in: None,
        summary: c"Gives a permit back. Replies 1 if the lease was live, 0 if not (it had expired, or never existed).",
        complexity: LEASES_COMPLEXITY,
        args: &[arg(c"key", KEY), LEASE_ID],
    },
    Command {
        name: c"ratelimit.renew",
        flags: c"write fast",
        acl_categories: c"write fast",
        keys: Keys::At(1, WRITES),
        arity: -4,
        entry: entry_point!(renew::renew),
        opt_in: None,
        summary: c"Extends a live lease to lease seconds from now. Replies the ms until it expires, or -1 if it is no longer live.",
        complexity: LEASES_COMPLEXITY,
        args: &[
            arg(c"key", KEY),
            LEASE_ID,
            Arg { summary: Some(c"the lease's new length in seconds (milliseconds with MS)"), ..arg(c"lease", INTEGER) },
            LEASE_MS,
        ],
    },
    Command {
        name: c"ratelimit.gcra",
        // As HIT: over maxmemory only new buckets are refused.
        flags: c"write fast",
        acl_categories: c"write fast",
        keys: Keys::At(1, WRITES),
        arity: -5,
        entry: entry_point!(gcra::gcra),
        opt_in: None,
        summary: c"Takes tokens from a GCRA bucket (smooth rate limiting, as redis-cell): value and expiry in one step. Replies [limited, capacity, remaining, retry_after_ms, full_after_ms], with PARTIAL the tokens granted, and with RESERVE the reservation. ALIGN refills at the period's boundaries.",
        complexity: c"O(1)",
        args: &[
            Arg { summary: Some(c"the bucket: its theoretical arrival time in Unix ns"), ..arg(c"key", KEY) },
            Arg { summary: Some(c"the bucket holds max_burst + 1 tokens"), ..arg(c"max_burst", INTEGER) },
            Arg { summary: Some(c"tokens that come back per period"), ..arg(c"tokens_per_period", INTEGER) },
            Arg { summary: Some(c"seconds, a decimal number"), ..arg(c"period", DOUBLE) },
            Arg {
                summary: Some(c"tokens this call takes (default 1); negative ones are given back"),
                ..option(c"count", INTEGER, c"TOKENS")
            },
            Arg {
                summary: Some(c"grant as many of the tokens as the bucket has, at least one; the tokens granted follow full_after_ms in the reply"),
                ..option(c"partial", PURE_TOKEN, c"PARTIAL")
            },
            Arg { summary: Some(c"reply with a reservation (of the tokens granted, with PARTIAL) as the last element, for RATELIMIT.SETTLE"), ..RESERVE },
            Arg {
                summary: Some(c"tokens come back tokens_per_period at once, at multiples of the period since the Unix epoch"),
                ..ALIGN
            },
        ],
    },
    Command {
        name: c"ratelimit.settle",
        // As HIT: over maxmemory only new keys are refused (an overage after the window ended).
        flags: c"write fast",
        acl_categories: c"write fast",
        keys: Keys::AllButLastTwo(WRITES),
        arity: -4,
        entry: entry_point!(settle::settle),
        opt_in: None,
        summary: c"Settles a reservation of HIT, SLIDE, GCRA or HITALL's TOKENS with the amount used: gives the unused part back to the reserved window while it counts, charges more to the current one. Replies as the reserving command, with how much it applied last; one such reply per key for several.",
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
    },
    Command {
        name: c"cl.throttle",
        // redis-cell registered it `write`; `fast` as GCRA's, and its key for cluster routing.
        flags: c"write fast",
        acl_categories: c"write fast",
        keys: Keys::At(1, WRITES),
        arity: -5,
        entry: entry_point!(cl_throttle::cl_throttle),
        // Off by default, so that it never collides with a loaded redis-cell.
        opt_in: Some("CL.THROTTLE"),
        summary: c"redis-cell's command on the same GCRA bucket, for its users (enabled by the module argument CL.THROTTLE). Replies [limited, limit, remaining, retry_after, reset_after] in whole seconds.",
        complexity: c"O(1)",
        args: &[
            arg(c"key", KEY),
            arg(c"max_burst", INTEGER),
            arg(c"count_per_period", INTEGER),
            Arg { summary: Some(c"whole seconds"), ..arg(c"period", INTEGER) },
            Arg { optional: true, summary: Some(c"tokens to take (default 1; 0 only looks)"), ..arg(c"quantity", INTEGER) },
        ],
    },
    Command {
        name: c"ratelimit.audit",
        // Read-only, so that replicas can be audited; no keys, so it runs on any cluster node.
        flags: c"readonly",
        acl_categories: c"read slow keyspace",
        keys: Keys::None,
        arity: -2,
        entry: entry_point!(audit::audit),
        opt_in: None,
        summary: c"Counts the counters under a prefix that have no TTL, walking the keyspace without stalling the server.",
        complexity: c"O(N) where N is the number of keys in the database",
        args: &[Arg { summary: Some(c"compared byte for byte, glob characters are literal"), ..arg(c"prefix", STRING) }, NAMES],
    },
    Command {
        name: c"ratelimit.top",
        // Telemetry of this node, no keys: it runs on any node, replicas included. Not `fast`: it
        // sorts the summaries.
        flags: c"readonly",
        acl_categories: c"read slow",
        keys: Keys::None,
        arity: -1,
        entry: entry_point!(top::top),
        opt_in: None,
        summary: c"The keys this node denied most (or admitted the most cost for, or would have denied most in shadow mode) over the current interval and the one before it, best first: [{key, count, error}, ...]; only keys the caller may read.",
        complexity: c"O(K log K) where K is the ratelimit.top-keys config",
        args: &[
            Arg {
                optional: true,
                subargs: &[
                    Arg {
                        token: Some(c"DENIED"),
                        summary: Some(c"denied calls, one each (default)"),
                        ..arg(c"denied", PURE_TOKEN)
                    },
                    Arg {
                        token: Some(c"ADMITTED"),
                        summary: Some(c"admitted calls, by their cost"),
                        ..arg(c"admitted", PURE_TOKEN)
                    },
                    Arg {
                        token: Some(c"SHADOWED"),
                        summary: Some(c"calls shadow mode admitted that would have been denied, one each"),
                        ..arg(c"shadowed", PURE_TOKEN)
                    },
                ],
                ..arg(c"view", ONEOF)
            },
            Arg { summary: Some(c"how many keys at most (default 10)"), ..option(c"count", INTEGER, c"COUNT") },
            Arg {
                summary: Some(c"start afresh after answering (needs CONFIG RESETSTAT's permission)"),
                ..option(c"reset", PURE_TOKEN, c"RESET")
            },
        ],
    },
    Command {
        name: c"ratelimit.repair",
        // Not deny-oom: giving leaked counters a TTL is how memory comes back.
        flags: c"write",
        acl_categories: c"write slow keyspace",
        keys: Keys::None,
        arity: -3,
        entry: entry_point!(repair::repair),
        opt_in: None,
        summary: c"Gives every counter under a prefix that has no TTL a window's expiry, walking the keyspace without stalling the server.",
        complexity: c"O(N) where N is the number of keys in the database",
        args: &[arg(c"prefix", STRING), arg(c"window", INTEGER), MS, NAMES],
    },
];
