//! `RATELIMIT.PEEK key limit [COST cost]`: what a hit would get, without making it.

use crate::core::args::{parse_peek, ArgError};
use crate::core::window::peek as decide_peek;
use crate::redis::call::{Call, Error};
use crate::redis::key::StoredKey;
use crate::redis::{clock, stats};

pub fn peek(call: &Call) -> Result<(), Error> {
    let args = parse_peek(call.args())?;
    let name = call.key(1).ok_or(ArgError::Arity("ratelimit.peek"))?;
    stats::PEEKS.add(1);
    let now = clock::command_now();
    let counter = StoredKey::open_read(call, name).read()?;
    let o = decide_peek(args.limit, args.cost, counter, now.ms);
    call.reply_integers(&[i64::from(o.allowed), o.count, o.remaining, o.reset_ms]);
    Ok(())
}
