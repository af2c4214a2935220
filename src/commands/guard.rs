//! The guard: under the prefixes of `ratelimit.guard`, a counter (an integer string) never stays
//! without a TTL, whichever client wrote it. Not a command: the module's behaviour on writes, as
//! the commands are its behaviour on calls.
//!
//! Writes are seen through keyspace events, subscribed the first time rules are set (a server
//! without rules pays nothing; none can unsubscribe). The event callback only records the key.
//! The check and the heal run once the whole command, transaction or script that wrote is over:
//! in a post-notification job where the server has them (Redis 7.2+, Valkey), atomic with the
//! write and replicated with it; on Redis 7.0 in the event loop's before-sleep, before the server
//! waits for more input. So `MULTI; INCR; EXPIRE NX; EXEC` and scripts that set their own expiry
//! are left as they set themselves. Nothing is recorded on a replica (the primary's heals arrive
//! through replication), while the server loads its data (a replay reproduces, not re-decides), or
//! for keys arriving by Valkey 9's atomic slot migration (the source's guard decided for them).

use std::ffi::CStr;
use std::sync::{Mutex, MutexGuard};

use crate::core::guard_rules::Rules;
use crate::redis::config::StringConfig;
use crate::redis::ctx::Ctx;
use crate::redis::key::announcing;
use crate::redis::leaked::heal_if_leaked;
use crate::redis::{clock, events, server, stats};

/// `ratelimit.guard`: `prefix window [prefix window ...]`.
pub static CONFIG: StringConfig = StringConfig::new(c"guard", set_rules, subscribe_when_ruled);

/// Everything the guard keeps, behind one lock.
struct Guard {
    rules: Rules,
    /// Keys written under a guarded prefix, to check once their writer is done.
    written: Vec<Written>,
    /// A post-notification job is queued for the current execution unit.
    job_queued: bool,
    subscribed: bool,
    log: HealLog,
}

struct Written {
    db: i32,
    key: Vec<u8>,
    window_ms: i64,
}

/// Heals not yet in the log, and when the log last spoke (at most once a second).
struct HealLog {
    first: Option<Vec<u8>>,
    more: u64,
    last_ms: i64,
}

static GUARD: Mutex<Guard> = Mutex::new(Guard {
    rules: Rules::none(),
    written: Vec::new(),
    job_queued: false,
    subscribed: false,
    log: HealLog { first: None, more: 0, last_ms: i64::MIN },
});

fn guard() -> MutexGuard<'static, Guard> {
    GUARD.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Validates and takes new rules; a bad value is refused with the reason, and the old rules stay.
fn set_rules(text: &[u8]) -> Result<(), String> {
    guard().rules = Rules::parse(text)?;
    Ok(())
}

/// Subscribes to writes the first time there are rules (at load time or on `CONFIG SET`). A
/// subscription the server refuses is logged: the guard cannot work without it.
pub fn subscribe_when_ruled(ctx: &Ctx) {
    {
        let mut guard = guard();
        if guard.rules.is_empty() || guard.subscribed {
            return;
        }
        guard.subscribed = true;
    }
    let subscribed =
        events::subscribe_to_writes(ctx, written).and_then(|()| match server::has_post_notification_jobs() {
            true => Ok(()),
            false => events::subscribe_to_before_sleep(ctx, heal_written),
        });
    if let Err(e) = subscribed {
        ctx.log_warning(&format!("ratelimit guard: {e}; counters written without TTL will not be healed"));
    }
}

/// Events that never leave a key without a TTL behind them.
const HARMLESS: [&CStr; 5] = [c"del", c"expire", c"rename_from", c"move_from", c"evicted"];

/// The keyspace-event callback: inside the writing command, so it only records the key.
fn written(ctx: &Ctx, event: &CStr, key: &[u8]) {
    // The module's own writes (HIT, GCRA, REPAIR, the guard's heals) always leave a TTL.
    if announcing() || HARMLESS.contains(&event) {
        return;
    }
    let queue_job = {
        let mut guard = guard();
        let Some(window_ms) = guard.rules.window_for(key) else {
            return;
        };
        // Reproductions, not decisions: on a replica, while loading, and for writes that arrive
        // over a link (Valkey 9 flags a slot import's as replicated too: not yet this node's keys).
        if ctx.is_reproducing() {
            return;
        }
        guard.written.push(Written { db: ctx.selected_db(), key: key.to_vec(), window_ms });
        server::has_post_notification_jobs() && !std::mem::replace(&mut guard.job_queued, true)
    };
    // A job refused (it should not be) must not leave the flag set and the guard dead.
    if queue_job && !events::after_this_command(ctx, heal_written) {
        guard().job_queued = false;
    }
}

/// Checks every recorded key and gives a TTL to each counter that has none.
fn heal_written(ctx: &Ctx) {
    let written = {
        let mut guard = guard();
        guard.job_queued = false;
        std::mem::take(&mut guard.written)
    };
    if written.is_empty() {
        return;
    }
    let selected = ctx.selected_db();
    let now = clock::command_now();
    for Written { db, key, window_ms } in written {
        stats::GUARD_CHECKED.add(1);
        if ctx.select_db(db) && heal_if_leaked(ctx, &key, window_ms, now.ms) {
            stats::GUARD_HEALS.add(1);
            note_heal(ctx, key);
        }
    }
    ctx.select_db(selected);
}

/// Tells the log, at most once a second, that some client still writes counters without TTL.
fn note_heal(ctx: &Ctx, key: Vec<u8>) {
    let now_ms = clock::wall_ms();
    let line = {
        let log = &mut guard().log;
        match &log.first {
            None => log.first = Some(key),
            Some(_) => log.more += 1,
        }
        if now_ms.saturating_sub(log.last_ms) < 1_000 {
            return;
        }
        let first = String::from_utf8_lossy(log.first.as_deref().unwrap_or_default()).into_owned();
        let more = match log.more {
            0 => String::new(),
            n => format!(" and {n} more since the last notice"),
        };
        (log.first, log.more, log.last_ms) = (None, 0, now_ms);
        format!("ratelimit guard: gave a TTL to counter '{first}'{more}: a client writes counters without expiry")
    };
    ctx.log_notice(&line);
}
