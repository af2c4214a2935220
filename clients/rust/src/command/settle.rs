//! RATELIMIT.SETTLE's calls: a reservation passed through as the server made it, the reply read
//! by the shape that ends it.

use super::adaptive::read_adaptive;
use super::window::{read_fixed, read_sliding};
use super::{gcra::read_bucket, ms, Command};
use crate::error::{invalid, unexpected_reply};
use crate::results::{MultiReservation, Reservation, Settlement};
use crate::{Error, Reply};

/// One key's SETTLE reply: the reserving command's numbers, what was applied, then what the
/// reservation was of (its limiter, its limit, its window in ms: -1 for none).
fn read_settled(reply: &Reply) -> Result<Settlement, Error> {
    let items = reply.as_array().filter(|items| items.len() >= 5).ok_or_else(|| unexpected_reply("SETTLE", reply))?;
    let n = items.len();
    let numbers = [items[n - 4].as_int(), items[n - 2].as_int(), items[n - 1].as_int()];
    let [Some(applied), Some(limit), Some(window_ms)] = numbers else {
        return Err(unexpected_reply("SETTLE", reply));
    };
    let window = (window_ms > 0).then(|| ms(window_ms));
    let read = match items[n - 3].as_text() {
        Some("fixed") => read_fixed(limit, window, 1),
        Some("sliding") => read_sliding(limit, window),
        Some("adaptive") => read_adaptive(ms(window_ms)),
        _ => read_bucket(None),
    };
    Ok(Settlement { decision: read(&Reply::Array(items[..n - 4].to_vec()))?, applied })
}

/// SETTLE's arguments after its keys, checked.
fn settle_args(token: Option<&str>, used: u64) -> Result<Vec<String>, Error> {
    let token = token.ok_or_else(|| invalid("a denied call has no reservation to settle"))?;
    let used = i64::try_from(used).map_err(|_| invalid("used must be an integer >= 0"))?;
    Ok(vec![token.to_string(), used.to_string()])
}

/// RATELIMIT.SETTLE: a reservation settled with what was used, at most once.
pub(crate) fn settle(r: &Reservation, used: u64) -> Result<Command<Settlement>, Error> {
    let args = settle_args(r.token(), used)?;
    Ok(Command::new("RATELIMIT.SETTLE", Some("ratelimit_settle"), vec![r.key.clone()], args, read_settled))
}

/// RATELIMIT.SETTLE of a HITALL reservation: one settlement per token key.
pub(crate) fn settle_all(r: &MultiReservation, used: u64) -> Result<Command<Vec<Settlement>>, Error> {
    let args = settle_args(r.token(), used)?;
    let count = r.keys.len();
    Ok(Command::new("RATELIMIT.SETTLE", Some("ratelimit_settle"), r.keys.clone(), args, move |reply| {
        // One key's reply is flat, several keys' one per key.
        if count == 1 {
            return Ok(vec![read_settled(reply)?]);
        }
        let items =
            reply.as_array().filter(|items| items.len() == count).ok_or_else(|| unexpected_reply("SETTLE", reply))?;
        items.iter().map(read_settled).collect()
    }))
}
