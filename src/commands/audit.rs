//! `RATELIMIT.AUDIT prefix [LIMIT n]`: find leaked counters (integer strings without TTL) under a
//! prefix, walking the keyspace without stalling the server.

use crate::commands::sweep::{self, default_names};
use crate::core::args::parse_audit;
use crate::redis::call::{Call, Error};

pub fn audit(call: &Call) -> Result<(), Error> {
    let args = parse_audit(call.args(), default_names())?;
    sweep::start(call, "RATELIMIT.AUDIT", &args)
}
