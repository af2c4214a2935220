//! `RATELIMIT.RELEASE key id`: gives a permit back; 1 if the lease was live, 0 if not.

use crate::core::args::{parse_release, ArgError};
use crate::core::lease::release as decide;
use crate::redis::call::{Call, Error};
use crate::redis::clock;
use crate::redis::lease_set::LeaseSet;
use crate::redis::stats;

pub fn release(call: &Call) -> Result<(), Error> {
    let id = parse_release(call.args())?;
    let name = call.key(1).ok_or(ArgError::Arity("ratelimit.release"))?;
    let now = clock::command_now();
    let mut set = LeaseSet::open(call, name, id)?;
    let (released, writes) = decide(&mut set.reading(now.ms)?, now.ms);
    set.apply(&writes, now.ms)?;
    if released { &stats::RELEASED } else { &stats::RELEASE_LATE }.add(1);
    call.reply_integer(i64::from(released));
    Ok(())
}
