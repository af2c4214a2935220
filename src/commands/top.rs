//! `RATELIMIT.TOP [DENIED | ADMITTED] [COUNT n] [RESET]`: the keys this node denied most (or
//! admitted the most cost for) over the current interval and the one before it, best first, each
//! with its count and the count's error bound; only keys the caller may read.

use crate::core::args::parse_top;
use crate::redis::acl::AclUser;
use crate::redis::call::{entry_point, Call, Error};
use crate::redis::command::{arg, option, Arg, Command, Keys, INTEGER, ONEOF, PURE_TOKEN};
use crate::redis::{clock, tracking};

/// RATELIMIT.TOP: its flags, keys and docs, as the server is told them.
pub const COMMAND: Command = Command {
    name: c"ratelimit.top",
    // Telemetry of this node, no keys: it runs on any node, replicas included. Not `fast`: it
    // sorts the summaries.
    flags: c"readonly",
    acl_categories: c"read slow",
    keys: Keys::None,
    arity: -1,
    entry: entry_point!(top),
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
};

pub fn top(call: &Call) -> Result<(), Error> {
    let args = parse_top(call.args())?;
    let user = call.user_name().and_then(|name| AclUser::named(call, &name));
    let user = user.ok_or("ERR ratelimit: cannot tell the caller's ACL user")?;
    // Starting afresh takes the answer away from every caller: as CONFIG RESETSTAT does for INFO.
    if args.reset && !user.may_run(call, &[b"config", b"resetstat"]) {
        return Err("NOPERM RATELIMIT.TOP RESET needs the permission to run CONFIG RESETSTAT".into());
    }
    let mut best = Vec::new();
    tracking::each_ranked(args.view, clock::command_now().ms, |key, estimate| {
        // Key names never reach a caller that could not read the keys.
        if user.may_read(call, key) {
            best.push((key.to_vec(), estimate));
        }
        best.len() < args.count
    });
    if args.reset {
        tracking::reset();
    }
    call.reply_array(best.len());
    for (key, estimate) in best {
        call.reply_map(3);
        call.reply_simple(c"key");
        call.reply_bulk(&key);
        call.reply_simple(c"count");
        call.reply_integer(i64::try_from(estimate.count).unwrap_or(i64::MAX));
        call.reply_simple(c"error");
        call.reply_integer(i64::try_from(estimate.error).unwrap_or(i64::MAX));
    }
    Ok(())
}
