//! A rate-limit counter in the keyspace: a plain string holding a decimal integer, with an expiry.
//! Reading it, and applying a window decision to it with the expiry in the same step, the
//! keyspace notifications of the equivalent core commands, and absolute-time effects for replicas
//! and the AOF.
//!
//! The value is edited in place (`StringDMA`/`StringTruncate`), never with `RedisModule_StringSet`:
//! that one deletes the key and its TTL before setting, the very leak this module exists to prevent.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

use redis_module::raw::{
    RedisModuleCallReply, RedisModuleCtx, RedisModuleKey, RedisModuleString, REDISMODULE_CTX_FLAGS_OOM,
    REDISMODULE_KEYTYPE_EMPTY, REDISMODULE_KEYTYPE_STRING, REDISMODULE_NOTIFY_GENERIC, REDISMODULE_NOTIFY_STRING,
    REDISMODULE_NO_EXPIRE, REDISMODULE_OK, REDISMODULE_READ, REDISMODULE_WRITE,
};

use crate::audit_filter::is_counter_value;
use crate::command::api;
use crate::decimal::{format_i64, parse_i64, MAX_LEN};
use crate::window::{Counter, Effects, Store};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyError {
    WrongType,
    NotInteger,
    /// Over `maxmemory`: new counters are refused, existing ones keep counting.
    OutOfMemory,
    /// A write the server refused; never expected, reported rather than ignored.
    WriteFailed,
}

impl KeyError {
    pub fn message(self) -> &'static str {
        match self {
            KeyError::WrongType => "WRONGTYPE Operation against a key holding the wrong kind of value",
            KeyError::NotInteger => "ERR value is not an integer or out of range",
            KeyError::OutOfMemory => "OOM command not allowed when used memory > 'maxmemory'.",
            KeyError::WriteFailed => "ERR ratelimit: the server refused to write the counter",
        }
    }
}

/// Set while this module announces its own writes. They always leave the key with a TTL, so the
/// guard has nothing to check in their events.
static ANNOUNCING: AtomicBool = AtomicBool::new(false);

pub fn announcing() -> bool {
    ANNOUNCING.load(Ordering::Relaxed)
}

/// A counter key opened for reading and writing; closed when dropped.
pub struct CounterKey {
    ctx: *mut RedisModuleCtx,
    name: *mut RedisModuleString,
    key: *mut RedisModuleKey,
}

impl CounterKey {
    /// Opens `name` in the caller's database to read and write. A logically expired key is
    /// deleted here, as any core write command would, so it reads as missing.
    ///
    /// # Safety
    /// `ctx` and `name` must be live for the whole command call.
    pub unsafe fn open(ctx: *mut RedisModuleCtx, name: *mut RedisModuleString) -> Result<Self, KeyError> {
        let key = unsafe { CounterKey::open_with(ctx, name, REDISMODULE_READ | REDISMODULE_WRITE) };
        // Redis never returns NULL for a key opened for writing; every later call would crash on it.
        if key.key.is_null() {
            return Err(KeyError::WriteFailed);
        }
        Ok(key)
    }

    /// Opens `name` only to read it (on a replica too); a missing key reads as missing.
    ///
    /// # Safety
    /// As `open`.
    pub unsafe fn open_read(ctx: *mut RedisModuleCtx, name: *mut RedisModuleString) -> Self {
        unsafe { CounterKey::open_with(ctx, name, REDISMODULE_READ) }
    }

    unsafe fn open_with(ctx: *mut RedisModuleCtx, name: *mut RedisModuleString, mode: u32) -> Self {
        let key = unsafe { api!(RedisModule_OpenKey)(ctx, name, mode as c_int) }.cast::<RedisModuleKey>();
        CounterKey { ctx, name, key }
    }

    /// A string key with no TTL, looked at without reading its value.
    fn is_string_without_ttl(&self) -> bool {
        let key_type = unsafe { api!(RedisModule_KeyType)(self.key) } as isize;
        key_type == REDISMODULE_KEYTYPE_STRING
            && unsafe { api!(RedisModule_GetAbsExpire)(self.key) } == REDISMODULE_NO_EXPIRE as i64
    }

    pub fn read(&mut self) -> Result<Counter, KeyError> {
        // Opened read-only, a missing key has no handle.
        if self.key.is_null() {
            return Ok(Counter::Missing);
        }
        let key_type = unsafe { api!(RedisModule_KeyType)(self.key) } as isize;
        if key_type == REDISMODULE_KEYTYPE_EMPTY {
            return Ok(Counter::Missing);
        }
        if key_type != REDISMODULE_KEYTYPE_STRING {
            return Err(KeyError::WrongType);
        }
        let mut len = 0;
        let ptr = unsafe { api!(RedisModule_StringDMA)(self.key, &mut len, REDISMODULE_READ as c_int) };
        if ptr.is_null() {
            return Err(KeyError::WrongType);
        }
        let text = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
        let count = parse_i64(text).ok_or(KeyError::NotInteger)?;
        let expire = unsafe { api!(RedisModule_GetAbsExpire)(self.key) };
        let expires_at = (expire != REDISMODULE_NO_EXPIRE as i64).then_some(expire);
        Ok(Counter::Present { count, expires_at })
    }

    /// Makes a fixed window's writes, value and expiry together, then tells the rest of the
    /// server: keyspace notifications, WATCH, and absolute-time effects for replicas and the AOF.
    pub fn apply(&mut self, effects: &Effects) -> Result<(), KeyError> {
        self.apply_as(effects, c"incrby")
    }

    /// Replaces the value and its expiry together (a GCRA write): `SET key value PXAT expires_at`
    /// for replicas and the AOF, with the `set` and `expire` events that command has.
    pub fn set(&mut self, value: i64, expires_at: i64) -> Result<(), KeyError> {
        // `added` only matters to a store without an expiry, which replicates as INCRBY.
        let store = Store { count: value, added: 0, expires_at };
        self.apply_as(&Effects { store: Some(store), set_expiry: Some(expires_at) }, c"set")
    }

    /// `stored_event` names the keyspace event of a value written.
    fn apply_as(&mut self, effects: &Effects, stored_event: &CStr) -> Result<(), KeyError> {
        let mut result = Ok(());
        if let Some(store) = effects.store {
            result = self.store(store.count);
        }
        // Even if storing failed, an expiry on whatever is there beats a key without one.
        if let Some(at) = effects.set_expiry {
            if unsafe { api!(RedisModule_SetAbsExpire)(self.key, at) } != REDISMODULE_OK as c_int {
                result = Err(KeyError::WriteFailed);
            }
        }
        self.announce(effects, stored_event);
        result
    }

    fn store(&mut self, count: i64) -> Result<(), KeyError> {
        let mut buf = [0; MAX_LEN];
        let digits = format_i64(count, &mut buf);
        let write = REDISMODULE_WRITE as c_int;
        let mut len = 0;
        // A missing key reads as an empty string, so it always takes the truncate branch.
        let mut ptr = unsafe { api!(RedisModule_StringDMA)(self.key, &mut len, write) };
        if len != digits.len() {
            if unsafe { api!(RedisModule_StringTruncate)(self.key, digits.len()) } != REDISMODULE_OK as c_int {
                return Err(KeyError::WriteFailed);
            }
            ptr = unsafe { api!(RedisModule_StringDMA)(self.key, &mut len, write) };
        }
        if ptr.is_null() || len != digits.len() {
            return Err(KeyError::WriteFailed);
        }
        unsafe { std::ptr::copy_nonoverlapping(digits.as_ptr(), ptr.cast::<u8>(), len) };
        Ok(())
    }

    fn announce(&self, effects: &Effects, stored_event: &CStr) {
        let (ctx, name) = (self.ctx, self.name);
        let notify = |class: c_int, event: &CStr| unsafe {
            api!(RedisModule_NotifyKeyspaceEvent)(ctx, class, event.as_ptr(), name);
        };
        // Replicas and the AOF get plain commands with absolute times; the cheapest that does it.
        match (effects.store, effects.set_expiry) {
            (Some(store), None) => unsafe {
                api!(RedisModule_Replicate)(ctx, c"INCRBY".as_ptr(), c"sl".as_ptr(), name, store.added);
            },
            (Some(store), Some(_)) => unsafe {
                let (count, at) = (store.count, store.expires_at);
                api!(RedisModule_Replicate)(ctx, c"SET".as_ptr(), c"slcl".as_ptr(), name, count, c"PXAT".as_ptr(), at);
            },
            (None, Some(at)) => unsafe {
                api!(RedisModule_Replicate)(ctx, c"PEXPIREAT".as_ptr(), c"sl".as_ptr(), name, at);
            },
            (None, None) => return,
        }
        ANNOUNCING.store(true, Ordering::Relaxed);
        if effects.store.is_some() {
            notify(REDISMODULE_NOTIFY_STRING, stored_event);
        }
        if effects.set_expiry.is_some() {
            notify(REDISMODULE_NOTIFY_GENERIC, c"expire");
        }
        ANNOUNCING.store(false, Ordering::Relaxed);
        unsafe { api!(RedisModule_SignalModifiedKey)(ctx, name) };
    }
}

impl Drop for CounterKey {
    fn drop(&mut self) {
        if !self.key.is_null() {
            unsafe { api!(RedisModule_CloseKey)(self.key) };
        }
    }
}

/// The commands are not flagged deny-oom, so that existing counters and buckets keep limiting when
/// memory is full (a write in place allocates nothing); only creating one is refused. The flags
/// cost a memory-state computation when maxmemory is set, so they are asked only on that path.
///
/// # Safety
/// `ctx` must be the context of the command being executed.
pub unsafe fn refuse_new_counter_over_maxmemory(
    ctx: *mut RedisModuleCtx,
    counters: &[Counter],
) -> Result<(), KeyError> {
    if !counters.contains(&Counter::Missing) {
        return Ok(());
    }
    let flags = unsafe { api!(RedisModule_GetContextFlags)(ctx) } as u32;
    match flags & REDISMODULE_CTX_FLAGS_OOM {
        0 => Ok(()),
        _ => Err(KeyError::OutOfMemory),
    }
}

/// Whether the string at `name`, in the selected database, is an integer: what AUDIT, REPAIR and
/// the guard count as a counter. An integer-encoded value (what INCR and SET leave) answers from
/// `OBJECT ENCODING`, which neither reads nor touches the value; only other strings are read with
/// `GET`. Reading through a key handle (`StringDMA`) would rewrite an int-encoded value as a raw
/// string, which a check should not do; it is done only where the server refuses the call itself:
/// in a cluster, for a key of a slot being imported by `MIGRATE`, or while the cluster is down.
/// (The value stays the same; the next INCR makes it an integer again.)
///
/// # Safety
/// `ctx` must be a context in which commands may be called.
pub unsafe fn holds_integer(ctx: *mut RedisModuleCtx, name: &[u8]) -> bool {
    let (key, len) = (name.as_ptr(), name.len());
    let encoding = unsafe {
        Reply(api!(RedisModule_Call)(ctx, c"OBJECT".as_ptr(), c"cb".as_ptr(), c"ENCODING".as_ptr(), key, len))
    };
    if encoding.0.is_null() {
        let name_string = unsafe { api!(RedisModule_CreateString)(ctx, name.as_ptr().cast(), name.len()) };
        let counter = unsafe { CounterKey::open_read(ctx, name_string) }.read();
        unsafe { api!(RedisModule_FreeString)(ctx, name_string) };
        return matches!(counter, Ok(Counter::Present { .. }));
    }
    if encoding.text() == Some(b"int") {
        return true;
    }
    let value = unsafe { Reply(api!(RedisModule_Call)(ctx, c"GET".as_ptr(), c"b".as_ptr(), key, len)) };
    value.text().is_some_and(is_counter_value)
}

/// Gives the counter at `name` a TTL of `window_ms` from `now_ms` if it has none (REPAIR's heal and
/// the guard's), with HIT's effects: `PEXPIREAT` for replicas and the AOF, an `expire` event.
/// Anything else (no counter, a TTL already) is left as it is. True when it healed.
///
/// # Safety
/// `ctx` must be a context in which keys may be written.
pub unsafe fn heal_if_leaked(ctx: *mut RedisModuleCtx, name: &[u8], window_ms: i64, now_ms: i64) -> bool {
    let name_string = unsafe { api!(RedisModule_CreateString)(ctx, name.as_ptr().cast(), name.len()) };
    let open = || unsafe { CounterKey::open(ctx, name_string) }.ok().filter(CounterKey::is_string_without_ttl);
    // The cheap look first (most keys a guard checks have their TTL); then the value, asked with
    // the key closed; then the heal.
    let healed = open().is_some()
        && unsafe { holds_integer(ctx, name) }
        && open().is_some_and(|mut key| key.apply(&Effects::heal(now_ms.saturating_add(window_ms))).is_ok());
    unsafe { api!(RedisModule_FreeString)(ctx, name_string) };
    healed
}

/// A command's reply, freed on drop.
struct Reply(*mut RedisModuleCallReply);

impl Reply {
    /// The reply's bytes when it is a string.
    fn text(&self) -> Option<&[u8]> {
        if self.0.is_null() {
            return None;
        }
        let mut len = 0;
        let ptr = unsafe { api!(RedisModule_CallReplyStringPtr)(self.0, &mut len) };
        (!ptr.is_null()).then(|| unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        if !self.0.is_null() {
            unsafe { api!(RedisModule_FreeCallReply)(self.0) };
        }
    }
}
