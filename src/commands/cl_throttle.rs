//! `CL.THROTTLE key max_burst count_per_period period [quantity]`, for redis-cell's users (opt-in:
//! `loadmodule ... CL.THROTTLE`): GCRA's bucket and decision with redis-cell's arguments and reply
//! (whole seconds, truncated as redis-cell truncates them); a negative quantity gives back as
//! redis-cell's arithmetic does.

use crate::commands::gcra::take;
use crate::core::args::parse_cl_throttle;
use crate::core::gcra::decide_cell;
use crate::redis::call::{Call, Error};
use crate::redis::stats;

const NS_PER_S: i64 = 1_000_000_000;

pub fn cl_throttle(call: &Call) -> Result<(), Error> {
    let rate = parse_cl_throttle(call.args())?;
    let o = take(call, &rate, "cl.throttle", &stats::CL_THROTTLE_DECISIONS, false, None, decide_cell)?;
    let retry_after_s = o.retry_after_ns.map_or(-1, |ns| ns / NS_PER_S);
    call.reply_integers(&[i64::from(o.limited), rate.capacity, o.remaining, retry_after_s, o.full_after_ns / NS_PER_S]);
    Ok(())
}
