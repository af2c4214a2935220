//! `RATELIMIT.GCRA key max_burst tokens_per_period period [TOKENS count] [PARTIAL] [RESERVE] [ALIGN]`:
//! tokens from a GCRA bucket (negative ones given back; with ALIGN refilled at the period's
//! boundaries); replies `[limited, capacity, remaining,
//! retry_after_ms, full_after_ms]`, with PARTIAL the tokens granted, with RESERVE the reservation.

use crate::commands::limiter::{answer, decide, Counting};
use crate::commands::GCRAS;
use crate::core::algorithm::{Bucket, BucketReply};
use crate::core::args::{parse_gcra, ArgError};
use crate::redis::call::{Call, Error};
use crate::redis::key::Written;
use crate::redis::stats;

const COUNTING: Counting = Counting { counted: GCRAS, decisions: &stats::GCRA_DECISIONS, written: Written::Set };

pub fn gcra(call: &Call) -> Result<(), Error> {
    let args = parse_gcra(call.args())?;
    let (Some(name), Some(key)) = (call.key(1), call.arg(1)) else {
        return Err(ArgError::Arity("ratelimit.gcra").into());
    };
    let bucket =
        Bucket { rate: args.rate, align_ns: args.align_ns, reply: BucketReply::Gcra { partial: args.partial } };
    let decided = decide(call, name, key, &bucket, args.reserve, &COUNTING)?;
    answer(call, decided);
    Ok(())
}
