//! One clock per command. A command reads the time once and decides everything with it: the
//! server's cached time for the command where the server hands it to modules (Redis 7.2+, Valkey:
//! the time it checks expiries against during that command, the same for a whole transaction or
//! script), else the wall clock at the call (Redis 7.0, to the millisecond). So a new counter's
//! reset is exactly its window, and the module never disagrees with the server about whether a key
//! has expired.

use redis_module::raw;

use crate::redis::api::api;

/// An instant in Unix time, in nanoseconds and the same instant in whole milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub ns: i64,
    pub ms: i64,
}

/// The current command's time. Only for commands and jobs running on the main thread: elsewhere
/// the cached time is whatever the last command left.
pub fn command_now() -> Now {
    // SAFETY: both are the server's own functions, resolved at load time and taking nothing.
    match unsafe { raw::RedisModule_CachedMicroseconds } {
        Some(cached) => {
            // SAFETY: as above.
            let us = unsafe { cached() };
            Now { ns: us.saturating_mul(1_000), ms: us.div_euclid(1_000) }
        }
        None => {
            let ms = wall_ms();
            Now { ns: ms.saturating_mul(1_000_000), ms }
        }
    }
}

/// The wall clock, in Unix milliseconds: for work outside a command (the walk thread).
pub fn wall_ms() -> i64 {
    // SAFETY: the server's own function, resolved at load time (checked in `on_load`).
    unsafe { api!(RedisModule_Milliseconds)() }
}
