//! `RATELIMIT.REPAIR prefix window [MS] [LIMIT n]`: give every leaked counter under a prefix a
//! window's expiry, walking the keyspace without stalling the server.

use crate::commands::sweep::{self, default_names};
use crate::core::args::parse_repair;
use crate::redis::call::{Call, Error};

pub fn repair(call: &Call) -> Result<(), Error> {
    let args = parse_repair(call.args(), default_names())?;
    sweep::start(call, "RATELIMIT.REPAIR", &args)
}
