//! The arguments several commands document alike (in `COMMAND DOCS`).

use crate::redis::command::{arg, option, Arg, INTEGER, PURE_TOKEN, STRING};

pub const COST: Arg =
    Arg { summary: Some(c"how many hits this call counts for (default 1)"), ..option(c"cost", INTEGER, c"COST") };
pub const COST_OR_REFUND: Arg = Arg {
    summary: Some(c"how many hits this call counts for (default 1); a negative cost gives that many back"),
    ..COST
};
pub const RESERVE: Arg = Arg {
    summary: Some(c"reply with a reservation as the last element, for RATELIMIT.SETTLE"),
    ..option(c"reserve", PURE_TOKEN, c"RESERVE")
};
pub const MS: Arg = Arg { summary: Some(c"the window is in milliseconds"), ..option(c"ms", PURE_TOKEN, c"MS") };
pub const FIXED_WINDOW: Arg = Arg {
    summary: Some(
        c"the window's length in seconds (milliseconds with MS), or day, week, month or year: a calendar window",
    ),
    ..arg(c"window", STRING)
};
pub const ALIGN: Arg = Arg {
    summary: Some(c"windows start at multiples of their length since the Unix epoch, not at the first hit"),
    ..option(c"align", PURE_TOKEN, c"ALIGN")
};
pub const TZ: Arg = Arg {
    summary: Some(c"the calendar windows' time zone: UTC (default), +HH:MM or -HH:MM, or an IANA name"),
    ..option(c"zone", STRING, c"TZ")
};
pub const LEASE_MS: Arg = Arg { summary: Some(c"the lease is in milliseconds"), ..option(c"ms", PURE_TOKEN, c"MS") };
pub const LEASE_ID: Arg = Arg { summary: Some(c"the lease's id"), ..arg(c"id", STRING) };
pub const LEASES_COMPLEXITY: &std::ffi::CStr = c"O(log N + M) where N is the leases held and M the expired ones pruned";
pub const NAMES: Arg =
    Arg { summary: Some(c"how many key names to list (default 100)"), ..option(c"count", INTEGER, c"LIMIT") };
