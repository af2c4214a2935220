//! `CL.THROTTLE key max_burst count_per_period period [quantity]`, for redis-cell's users (opt-in:
//! `loadmodule ... CL.THROTTLE`): GCRA's bucket and decision with redis-cell's arguments and reply
//! (whole seconds, truncated as redis-cell truncates them); a negative quantity gives back as
//! redis-cell's arithmetic does.

use crate::commands::limiter::{answer, decide, Counting};
use crate::commands::GCRAS;
use crate::core::algorithm::{Bucket, BucketReply};
use crate::core::args::{parse_cl_throttle, ArgError};
use crate::redis::call::{Call, Error};
use crate::redis::key::Written;
use crate::redis::stats;

const COUNTING: Counting = Counting { counted: GCRAS, decisions: &stats::CL_THROTTLE_DECISIONS, written: Written::Set };

pub fn cl_throttle(call: &Call) -> Result<(), Error> {
    let rate = parse_cl_throttle(call.args())?;
    let (Some(name), Some(key)) = (call.key(1), call.arg(1)) else {
        return Err(ArgError::Arity("cl.throttle").into());
    };
    let bucket = Bucket { rate, align_ns: None, reply: BucketReply::Cell };
    let decided = decide(call, name, key, &bucket, false, &COUNTING)?;
    answer(call, decided);
    Ok(())
}
