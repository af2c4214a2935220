//! `RATELIMIT.REPORT key OK|THROTTLED [RETRY ms] [LIMIT limit] [REMAINING remaining RESET ms] [AGE ms]`: how
//! the provider answered a call, steering the adaptive limit at `key` (`core::adaptive`). Replies
//! `[limit, decreased, hold_ms]`, or nil where no limit is learned at `key` (nothing to steer, and
//! nothing written).

use crate::core::adaptive::{self, State};
use crate::core::args::{parse_report, ArgError};
use crate::redis::call::{entry_point, Call, Error};
use crate::redis::clock;
use crate::redis::command::{arg, option, Arg, Command, Keys, INTEGER, KEY, ONEOF, PURE_TOKEN, WRITES};
use crate::redis::key::{StoredKey, Written};
use crate::redis::stats;

/// RATELIMIT.REPORT: its flags, keys and docs, as the server is told them.
pub const COMMAND: Command = Command {
    name: c"ratelimit.report",
    // It never creates a key.
    flags: c"write fast",
    acl_categories: c"write fast",
    keys: Keys::At(1, WRITES),
    arity: -3,
    entry: entry_point!(report),
    opt_in: None,
    summary: c"Tells an adaptive limit how its provider answered: THROTTLED cuts the limit (once per epoch for the whole fleet, and again for a call decided after the cut, as AGE tells) and with RETRY holds every caller until then; the provider's stated LIMIT caps the limit, its REMAINING bounds the fleet until RESET. Replies [limit, decreased, hold_ms], or nil when the key holds no limit.",
    complexity: c"O(1)",
    args: &[
        Arg { summary: Some(c"the adaptive limit"), ..arg(c"key", KEY) },
        Arg {
            summary: Some(c"how the provider answered: THROTTLED for a 429, a 503, or a timeout you count as one"),
            subargs: &[
                Arg { token: Some(c"OK"), ..arg(c"ok", PURE_TOKEN) },
                Arg { token: Some(c"THROTTLED"), ..arg(c"throttled", PURE_TOKEN) },
            ],
            ..arg(c"outcome", ONEOF)
        },
        Arg { summary: Some(c"the provider's Retry-After in ms: no caller is admitted before it"), ..option(c"retry", INTEGER, c"RETRY") },
        Arg { summary: Some(c"the provider's stated limit per window"), ..option(c"limit", INTEGER, c"LIMIT") },
        Arg { summary: Some(c"what the provider says remains, until RESET"), ..option(c"remaining", INTEGER, c"REMAINING") },
        Arg { summary: Some(c"in how many ms the provider's REMAINING resets"), ..option(c"reset", INTEGER, c"RESET") },
        Arg {
            summary: Some(c"how many ms ago the call was decided (its ADAPT's reply): throttled after the epoch's cut with no REMAINING stated, it cuts again"),
            ..option(c"age", INTEGER, c"AGE")
        },
    ],
};

pub fn report(call: &Call) -> Result<(), Error> {
    let report = parse_report(call.args())?;
    let Some(name) = call.key(1) else {
        return Err(ArgError::Arity("ratelimit.report").into());
    };
    let now = clock::command_now();
    let mut key = StoredKey::open(call, name)?;
    let stored = key.read::<State>()?;
    let Some(r) = adaptive::report(&report, stored, now.ms) else {
        call.reply_null();
        return Ok(());
    };
    key.apply(&adaptive::change(r.state, r.expires_at), Written::Set)?;
    stats::REPORTS.add(1);
    for (happened, counter) in
        [(r.decreased, &stats::ADAPT_DECREASES), (r.held, &stats::ADAPT_HOLDS), (r.increased, &stats::ADAPT_INCREASES)]
    {
        counter.add(u64::from(happened));
    }
    call.reply_integers(&[r.limit, i64::from(r.decreased), r.hold_ms]);
    Ok(())
}
