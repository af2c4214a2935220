//! What the module has done since it was loaded (or since `CONFIG RESETSTAT`), for `INFO ratelimit`
//! (info.rs): one registry, where each counter is declared once and from which INFO's fields and
//! the reset both follow. Relaxed atomic counters, cheap enough for the hot path and safe from the
//! walk thread.

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

    fn reset(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

/// Declares every counter once: its static, and its row in `COUNTERS`, from which INFO shows it
/// (as `ratelimit_<field>`) and `CONFIG RESETSTAT` resets it (`reset_all`).
macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident => $field:literal,)*) => {
        $($(#[$doc])* pub static $name: Stat = Stat::new();)*

        /// Every counter with its INFO field, in INFO's order.
        pub static COUNTERS: &[(&CStr, &Stat)] = &[$((c_name(concat!($field, "\0")), &$name)),*];
    };
}

counters! {
    /// Calls of RATELIMIT.HIT and RATELIMIT.HITALL (one each, however many limits).
    HITS => "hits",
    ADMITTED => "admitted",
    DENIED => "denied",
    /// Keys without TTL that a limiter's call (HIT, HITALL, SLIDE, GCRA, the lease commands) gave one.
    HEALED => "healed",
    /// Calls of RATELIMIT.SLIDE (PEEK aside) and of RATELIMIT.HITALL with SLIDE.
    SLIDE_CALLS => "slide_calls",
    SLIDE_ADMITTED => "slide_admitted",
    SLIDE_DENIED => "slide_denied",
    /// Calls of RATELIMIT.ADAPT, and those admitted or denied.
    ADAPT_CALLS => "adapt_calls",
    ADAPT_ADMITTED => "adapt_admitted",
    ADAPT_DENIED => "adapt_denied",
    /// RATELIMIT.REPORT calls applied (on a live adaptive limit).
    REPORTS => "reports",
    /// Adaptive limits cut by a throttle (at most one per limit per epoch).
    ADAPT_DECREASES => "adapt_decreases",
    /// Reports whose Retry-After held a fleet (or held it longer).
    ADAPT_HOLDS => "adapt_holds",
    /// Epochs that earned an adaptive limit a higher limit.
    ADAPT_INCREASES => "adapt_increases",
    /// Calls of RATELIMIT.GCRA.
    GCRA_CALLS => "gcra_calls",
    GCRA_ADMITTED => "gcra_admitted",
    GCRA_DENIED => "gcra_denied",
    PEEKS => "peeks",
    /// Reservations handed out (HIT, SLIDE and GCRA with RESERVE, admitted).
    RESERVED => "reserved",
    /// RATELIMIT.SETTLE calls applied.
    SETTLED => "settled",
    /// Settles of a reservation settled before: nothing applied again.
    SETTLED_AGAIN => "settled_again",
    /// Calls that gave back: a negative COST or TOKENS, or a settle of less than was reserved.
    REFUNDED => "refunded",
    /// Settles of less than was reserved whose window no longer counted: nothing given back.
    REFUNDS_DROPPED => "refunds_dropped",
    /// Settles of more than was reserved: the rest charged.
    OVERAGE => "overage",
    /// Calls of RATELIMIT.ACQUIRE, and those that got a permit or were denied.
    ACQUIRES => "acquires",
    ACQUIRED => "acquired",
    ACQUIRE_DENIED => "acquire_denied",
    /// RELEASE calls that gave a live lease back, and those that found it gone (expired, or never held).
    RELEASED => "released",
    RELEASE_LATE => "release_late",
    /// RENEW calls that extended a live lease, and those that found it gone: holders that lost their permit.
    RENEWED => "renewed",
    RENEW_LOST => "renew_lost",
    /// Leases removed because they expired: holders that crashed, or worked past their lease.
    LEASES_EXPIRED => "leases_expired",
    AUDITS => "audits",
    REPAIRS => "repairs",
    /// Keys visited by AUDIT and REPAIR walks (those the caller may see).
    KEYS_SCANNED => "keys_scanned",
    /// Counters REPAIR gave a TTL.
    REPAIRED => "counters_repaired",
    /// AUDIT and REPAIR calls refused because `ratelimit.max-walks` walks were in progress.
    WALKS_REFUSED => "walks_refused",
    /// Keys written under a guarded prefix that the guard checked, and the counters it gave a TTL.
    GUARD_CHECKED => "guard_checked",
    GUARD_HEALS => "guard_heals",
    /// Decisions RATELIMIT.TOP did not track because the key's name is longer than `core::top::LONGEST_KEY`.
    TOP_UNTRACKED => "top_untracked",
}

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

/// Declares each command's `Decisions` once, its field names spelled once: its static, and its
/// row in `DECISIONS`, which INFO shows and `reset_all` resets.
macro_rules! decisions {
    ($($name:ident => $command:literal,)*) => {
        $(pub static $name: Decisions = Decisions {
            name: c_name(concat!("decisions_", $command, "\0")),
            fields: [
                c_name(concat!("decisions_", $command, "_admitted\0")),
                c_name(concat!("decisions_", $command, "_denied\0")),
                c_name(concat!("decisions_", $command, "_shadow_denied\0")),
            ],
            admitted: Stat::new(),
            denied: Stat::new(),
            shadow_denied: Stat::new(),
        };)*

        /// The per-command decisions, in INFO's order.
        pub static DECISIONS: &[&Decisions] = &[$(&$name),*];
    };
}

decisions! {
    HIT_DECISIONS => "hit",
    HITALL_DECISIONS => "hitall",
    SLIDE_DECISIONS => "slide",
    GCRA_DECISIONS => "gcra",
    ADAPT_DECISIONS => "adapt",
    CL_THROTTLE_DECISIONS => "cl_throttle",
    ACQUIRE_DECISIONS => "acquire",
}

/// Every counter back to zero, as `CONFIG RESETSTAT` does the server's own (resetstat.rs).
pub fn reset_all() {
    for (_, counter) in COUNTERS {
        counter.reset();
    }
    for d in DECISIONS {
        d.counts().iter().for_each(|count| count.reset());
    }
}
