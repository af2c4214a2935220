//! `RATELIMIT.RENEW key id lease [MS]`: extends a live lease; the ms until it now expires, or -1
//! if it is no longer live (the holder lost its permit).

use crate::core::args::{parse_renew, ArgError};
use crate::core::lease::renew as decide;
use crate::redis::call::{Call, Error};
use crate::redis::clock;
use crate::redis::lease_set::LeaseSet;
use crate::redis::stats;

pub fn renew(call: &Call) -> Result<(), Error> {
    let (id, lease_ms) = parse_renew(call.args())?;
    let name = call.key(1).ok_or(ArgError::Arity("ratelimit.renew"))?;
    let now = clock::command_now();
    let mut set = LeaseSet::open(call, name, id)?;
    let (ms, writes) = decide(lease_ms, &mut set.reading(now.ms)?, now.ms);
    set.apply(&writes, now.ms)?;
    if ms >= 0 { &stats::RENEWED } else { &stats::RENEW_LOST }.add(1);
    call.reply_integer(ms);
    Ok(())
}
