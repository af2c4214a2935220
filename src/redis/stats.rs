//! What the module has done since it was loaded, for `INFO ratelimit` (info.rs). Relaxed atomic
//! counters, cheap enough for the hot path and safe from the walk thread.

use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct Stat(AtomicU64);

impl Stat {
    const fn new() -> Stat {
        Stat(AtomicU64::new(0))
    }

    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Back to zero: `CONFIG RESETSTAT` (see resetstat.rs).
    pub fn reset(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

/// Calls of RATELIMIT.HIT and RATELIMIT.HITALL (one each, however many limits).
pub static HITS: Stat = Stat::new();
pub static ADMITTED: Stat = Stat::new();
pub static DENIED: Stat = Stat::new();
/// Calls of RATELIMIT.SLIDE (PEEK aside) and of RATELIMIT.HITALL with SLIDE.
pub static SLIDE_CALLS: Stat = Stat::new();
pub static SLIDE_ADMITTED: Stat = Stat::new();
pub static SLIDE_DENIED: Stat = Stat::new();
/// Keys without TTL that a limiter's call (HIT, HITALL, SLIDE, GCRA, the lease commands) gave one.
pub static HEALED: Stat = Stat::new();
/// Calls of RATELIMIT.GCRA.
pub static GCRA_CALLS: Stat = Stat::new();
pub static GCRA_ADMITTED: Stat = Stat::new();
pub static GCRA_DENIED: Stat = Stat::new();
pub static PEEKS: Stat = Stat::new();
/// Reservations handed out (HIT, SLIDE and GCRA with RESERVE, admitted).
pub static RESERVED: Stat = Stat::new();
/// RATELIMIT.SETTLE calls applied.
pub static SETTLED: Stat = Stat::new();
/// Calls that gave back: a negative COST or TOKENS, or a settle of less than was reserved.
pub static REFUNDED: Stat = Stat::new();
/// Settles of less than was reserved whose window no longer counted: nothing given back.
pub static REFUNDS_DROPPED: Stat = Stat::new();
/// Settles of more than was reserved: the rest charged.
pub static OVERAGE: Stat = Stat::new();
/// Calls of RATELIMIT.ACQUIRE, and those that got a permit or were denied.
pub static ACQUIRES: Stat = Stat::new();
pub static ACQUIRED: Stat = Stat::new();
pub static ACQUIRE_DENIED: Stat = Stat::new();
/// RELEASE calls that gave a live lease back, and those that found it gone (expired, or never held).
pub static RELEASED: Stat = Stat::new();
pub static RELEASE_LATE: Stat = Stat::new();
/// RENEW calls that extended a live lease, and those that found it gone: holders that lost their permit.
pub static RENEWED: Stat = Stat::new();
pub static RENEW_LOST: Stat = Stat::new();
/// Leases removed because they expired: holders that crashed, or worked past their lease.
pub static LEASES_EXPIRED: Stat = Stat::new();
pub static AUDITS: Stat = Stat::new();
pub static REPAIRS: Stat = Stat::new();
/// Keys visited by AUDIT and REPAIR walks (those the caller may see).
pub static KEYS_SCANNED: Stat = Stat::new();
/// Counters REPAIR gave a TTL.
pub static REPAIRED: Stat = Stat::new();
/// AUDIT and REPAIR calls refused because `ratelimit.max-walks` walks were in progress.
pub static WALKS_REFUSED: Stat = Stat::new();
/// Keys written under a guarded prefix that the guard checked, and the counters it gave a TTL.
pub static GUARD_CHECKED: Stat = Stat::new();
pub static GUARD_HEALS: Stat = Stat::new();
/// Decisions RATELIMIT.TOP did not track because the key's name is longer than `core::top::LONGEST_KEY`.
pub static TOP_UNTRACKED: Stat = Stat::new();

/// Admitted and denied calls of one limiter command, and the admitted ones shadow mode would have
/// denied: INFO's `decisions_<command>` line, and one numeric field each
/// (`decisions_<command>_admitted`, `_denied`, `_shadow_denied`) for scrapers that read numbers.
pub struct Decisions {
    pub name: &'static CStr,
    pub fields: [&'static CStr; 3],
    pub admitted: Stat,
    pub denied: Stat,
    pub shadow_denied: Stat,
}

impl Decisions {
    pub fn add(&self, allowed: bool) {
        if allowed { &self.admitted } else { &self.denied }.add(1);
    }

    /// The counts, in the order of `fields`.
    pub fn counts(&self) -> [&Stat; 3] {
        [&self.admitted, &self.denied, &self.shadow_denied]
    }
}

const fn c_name(with_nul: &'static str) -> &'static CStr {
    match CStr::from_bytes_with_nul(with_nul.as_bytes()) {
        Ok(name) => name,
        Err(_) => panic!("a field name with a NUL inside"),
    }
}

/// The `Decisions` of one command, its field names spelled once.
macro_rules! decisions {
    ($command:literal) => {
        Decisions {
            name: c_name(concat!("decisions_", $command, "\0")),
            fields: [
                c_name(concat!("decisions_", $command, "_admitted\0")),
                c_name(concat!("decisions_", $command, "_denied\0")),
                c_name(concat!("decisions_", $command, "_shadow_denied\0")),
            ],
            admitted: Stat::new(),
            denied: Stat::new(),
            shadow_denied: Stat::new(),
        }
    };
}

pub static HIT_DECISIONS: Decisions = decisions!("hit");
pub static HITALL_DECISIONS: Decisions = decisions!("hitall");
pub static SLIDE_DECISIONS: Decisions = decisions!("slide");
pub static GCRA_DECISIONS: Decisions = decisions!("gcra");
pub static CL_THROTTLE_DECISIONS: Decisions = decisions!("cl_throttle");
pub static ACQUIRE_DECISIONS: Decisions = decisions!("acquire");
