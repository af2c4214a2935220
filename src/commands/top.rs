//! `RATELIMIT.TOP [DENIED | ADMITTED] [COUNT n] [RESET]`: the keys this node denied most (or
//! admitted the most cost for) over the current interval and the one before it, best first, each
//! with its count and the count's error bound; only keys the caller may read.

use crate::core::args::parse_top;
use crate::redis::acl::AclUser;
use crate::redis::call::{Call, Error};
use crate::redis::{clock, tracking};

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
