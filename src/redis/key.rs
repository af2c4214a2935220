//! A limiter's key in the keyspace: a plain string holding a decimal integer, with an expiry.
//! Reading it as `Stored`, and applying a `Change` to it with the expiry in the same step, the
//! keyspace notifications of the equivalent core commands, and absolute-time effects for replicas
//! and the AOF.
//!
//! The value is edited in place (`StringDMA`/`StringTruncate`), never with `RedisModule_StringSet`:
//! that one deletes the key and its TTL before setting, the very leak this module exists to prevent.

use std::ffi::CStr;
use std::marker::PhantomData;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

use redis_module::raw::{
    RedisModuleCallReply, RedisModuleKey, RedisModuleString, REDISMODULE_KEYTYPE_EMPTY, REDISMODULE_KEYTYPE_STRING,
    REDISMODULE_NOTIFY_GENERIC, REDISMODULE_NOTIFY_STRING, REDISMODULE_NO_EXPIRE, REDISMODULE_OK, REDISMODULE_READ,
    REDISMODULE_WRITE,
};

use crate::core::audit_filter::Limiter;
use crate::core::stored::{Change, Stored, Value, MAX_TEXT};
use crate::redis::api::api;
use crate::redis::call::{Error, KeyName};
use crate::redis::ctx::Ctx;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyError {
    WrongType,
    /// A string that is not the value the command stores: the error reply says which.
    Invalid(&'static str),
    /// Over `maxmemory`: new keys are refused, existing ones keep limiting.
    OutOfMemory,
    /// A write the server refused; never expected, reported rather than ignored.
    WriteFailed,
}

impl KeyError {
    pub fn message(self) -> &'static str {
        match self {
            KeyError::WrongType => "WRONGTYPE Operation against a key holding the wrong kind of value",
            KeyError::Invalid(message) => message,
            KeyError::OutOfMemory => "OOM command not allowed when used memory > 'maxmemory'.",
            KeyError::WriteFailed => "ERR ratelimit: the server refused to write the key",
        }
    }
}

impl From<KeyError> for Error {
    fn from(e: KeyError) -> Error {
        Error::from(e.message())
    }
}

/// The keyspace event of a stored value: that of the core command the write is equivalent to.
#[derive(Debug, Clone, Copy)]
pub enum Written {
    /// A counter counted (`incrby`).
    Incrby,
    /// A value replaced (`set`).
    Set,
}

/// Set while this module announces its own writes. They always leave the key with a TTL, so the
/// guard has nothing to check in their events.
static ANNOUNCING: AtomicBool = AtomicBool::new(false);

pub fn announcing() -> bool {
    ANNOUNCING.load(Ordering::Relaxed)
}

/// A key opened for reading (and writing, with `open`); closed when dropped.
pub struct StoredKey<'a> {
    ctx: Ctx,
    name: *mut RedisModuleString,
    key: *mut RedisModuleKey,
    /// The expiry `read` found, so that `apply` need not ask again.
    read_expiry: Option<Option<i64>>,
    _name: PhantomData<&'a ()>,
}

impl<'a> StoredKey<'a> {
    /// Opens `name` in the context's database to read and write. A logically expired key is
    /// deleted here, as any core write command would, so it reads as missing.
    pub fn open(ctx: &Ctx, name: KeyName<'a>) -> Result<StoredKey<'a>, KeyError> {
        let key = StoredKey::open_with(ctx, name.raw(), REDISMODULE_READ | REDISMODULE_WRITE);
        // Redis never returns NULL for a key opened for writing; every later call would crash on it.
        if key.key.is_null() {
            return Err(KeyError::WriteFailed);
        }
        Ok(key)
    }

    /// Opens `name` only to read it (on a replica too); a missing key reads as missing.
    pub fn open_read(ctx: &Ctx, name: KeyName<'a>) -> StoredKey<'a> {
        StoredKey::open_with(ctx, name.raw(), REDISMODULE_READ)
    }

    fn open_with(ctx: &Ctx, name: *mut RedisModuleString, mode: u32) -> StoredKey<'a> {
        // SAFETY: a live context, and a name that lives as long as `'a` (a call's argument, or a
        // string of ours held across the key's use).
        let key = unsafe { api!(RedisModule_OpenKey)(ctx.raw(), name, mode as c_int) }.cast::<RedisModuleKey>();
        StoredKey { ctx: *ctx, name, key, read_expiry: None, _name: PhantomData }
    }

    fn key_type(&self) -> isize {
        // SAFETY: an open key handle (not null: checked by the callers).
        unsafe { api!(RedisModule_KeyType)(self.key) as isize }
    }

    fn expiry(&self) -> Option<i64> {
        // SAFETY: an open key handle.
        let expire = unsafe { api!(RedisModule_GetAbsExpire)(self.key) };
        (expire != REDISMODULE_NO_EXPIRE as i64).then_some(expire)
    }

    /// A string key with no TTL, looked at without reading its value.
    fn is_string_without_ttl(&self) -> bool {
        !self.key.is_null() && self.key_type() == REDISMODULE_KEYTYPE_STRING && self.expiry().is_none()
    }

    pub fn read<V: Value>(&mut self) -> Result<Stored<V>, KeyError> {
        let Some(text) = self.bytes()? else {
            self.read_expiry = Some(None);
            return Ok(Stored::Missing);
        };
        let value = V::parse(text).ok_or(KeyError::Invalid(V::INVALID))?;
        let expires_at = self.expiry();
        self.read_expiry = Some(expires_at);
        Ok(Stored::Present { value, expires_at })
    }

    /// The string's bytes; `None` for a missing key.
    fn bytes(&self) -> Result<Option<&[u8]>, KeyError> {
        // Opened read-only, a missing key has no handle.
        if self.key.is_null() || self.key_type() == REDISMODULE_KEYTYPE_EMPTY {
            return Ok(None);
        }
        if self.key_type() != REDISMODULE_KEYTYPE_STRING {
            return Err(KeyError::WrongType);
        }
        let mut len = 0;
        // SAFETY: an open string key; the bytes are read before anything writes it.
        let ptr = unsafe { api!(RedisModule_StringDMA)(self.key, &mut len, REDISMODULE_READ as c_int) };
        if ptr.is_null() {
            return Err(KeyError::WrongType);
        }
        // SAFETY: the server gives `len` bytes at `ptr`, valid while the key is open and unchanged
        // (the borrow of `self` keeps it so).
        Ok(Some(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }))
    }

    /// Makes the change, value and expiry together, then tells the rest of the server: keyspace
    /// notifications (`written` names the value's), WATCH, and absolute-time effects for replicas
    /// and the AOF.
    pub fn apply<V: Value>(&mut self, change: &Change<V>, written: Written) -> Result<(), KeyError> {
        let mut buf = [0; MAX_TEXT];
        let (text, expires_at) = match *change {
            Change::Add { value, .. } => (Some(value.write(&mut buf)), None),
            Change::Set { value, expires_at } => (Some(value.write(&mut buf)), Some(expires_at)),
            Change::Expire { at } => (None, Some(at)),
        };
        let mut result = text.map_or(Ok(()), |text| self.store(text));
        // Even if storing failed, an expiry on whatever is there beats a key without one. Storing
        // in place keeps the key's expiry: an unchanged one is not set again.
        let current = self.read_expiry.unwrap_or_else(|| self.expiry());
        if let Some(at) = expires_at.filter(|&at| current != Some(at)) {
            // SAFETY: a key opened for writing.
            if unsafe { api!(RedisModule_SetAbsExpire)(self.key, at) } != REDISMODULE_OK as c_int {
                result = Err(KeyError::WriteFailed);
            }
        }
        self.announce(change, text, written);
        result
    }

    fn store(&mut self, digits: &[u8]) -> Result<(), KeyError> {
        let write = REDISMODULE_WRITE as c_int;
        let mut len = 0;
        // SAFETY: a key opened for writing; a missing key reads as an empty string, so it always
        // takes the truncate branch; the pointer is used before anything else touches the key.
        unsafe {
            let mut ptr = api!(RedisModule_StringDMA)(self.key, &mut len, write);
            if len != digits.len() {
                if api!(RedisModule_StringTruncate)(self.key, digits.len()) != REDISMODULE_OK as c_int {
                    return Err(KeyError::WriteFailed);
                }
                ptr = api!(RedisModule_StringDMA)(self.key, &mut len, write);
            }
            if ptr.is_null() || len != digits.len() {
                return Err(KeyError::WriteFailed);
            }
            std::ptr::copy_nonoverlapping(digits.as_ptr(), ptr.cast::<u8>(), len);
        }
        Ok(())
    }

    /// `text` is the value stored, as written for Add and Set.
    fn announce<V: Value>(&self, change: &Change<V>, text: Option<&[u8]>, written: Written) {
        let (ctx, name) = (self.ctx.raw(), self.name);
        // Replicas and the AOF get plain commands with absolute times; the cheapest that does it.
        // SAFETY: a live context and the key's name; the format strings match the arguments.
        unsafe {
            match *change {
                Change::Add { by, .. } => {
                    api!(RedisModule_Replicate)(ctx, c"INCRBY".as_ptr(), c"sl".as_ptr(), name, by);
                }
                Change::Set { expires_at, .. } => {
                    let text = text.unwrap_or_default();
                    let (cmd, fmt, pxat) = (c"SET".as_ptr(), c"sbcl".as_ptr(), c"PXAT".as_ptr());
                    api!(RedisModule_Replicate)(ctx, cmd, fmt, name, text.as_ptr(), text.len(), pxat, expires_at);
                }
                Change::Expire { at } => {
                    api!(RedisModule_Replicate)(ctx, c"PEXPIREAT".as_ptr(), c"sl".as_ptr(), name, at);
                }
            }
        }
        let notify = |class: c_int, event: &CStr| {
            // SAFETY: a live context, a static event name and the key's name.
            unsafe { api!(RedisModule_NotifyKeyspaceEvent)(ctx, class, event.as_ptr(), name) };
        };
        ANNOUNCING.store(true, Ordering::Relaxed);
        if !matches!(change, Change::Expire { .. }) {
            notify(
                REDISMODULE_NOTIFY_STRING,
                match written {
                    Written::Incrby => c"incrby",
                    Written::Set => c"set",
                },
            );
        }
        // As SET with PXAT says: an expire event, even for the expiry it already had.
        if !matches!(change, Change::Add { .. }) {
            notify(REDISMODULE_NOTIFY_GENERIC, c"expire");
        }
        ANNOUNCING.store(false, Ordering::Relaxed);
        // SAFETY: a live context and the key's name.
        unsafe { api!(RedisModule_SignalModifiedKey)(ctx, name) };
    }
}

impl Drop for StoredKey<'_> {
    fn drop(&mut self) {
        if !self.key.is_null() {
            // SAFETY: opened by `open_with`, closed once.
            unsafe { api!(RedisModule_CloseKey)(self.key) };
        }
    }
}

/// The commands are not flagged deny-oom, so that existing counters and buckets keep limiting when
/// memory is full (a write in place allocates nothing); only creating a key is refused. The flags
/// cost a memory-state computation when maxmemory is set, so they are asked only on that path.
pub fn refuse_new_over_maxmemory<V>(ctx: &Ctx, stored: &[Stored<V>]) -> Result<(), KeyError> {
    match stored.iter().any(|s| matches!(s, Stored::Missing)) && ctx.is_out_of_memory() {
        true => Err(KeyError::OutOfMemory),
        false => Ok(()),
    }
}

/// What the string at `name`, in the selected database, holds, if it is a limiter's value: what
/// AUDIT, REPAIR and the guard count. An integer-encoded value (what INCR and SET leave) answers
/// from `OBJECT ENCODING`, which neither reads nor touches the value; only other strings are read
/// with `GET`. Reading through a key handle (`StringDMA`) would rewrite an int-encoded value as a
/// raw string, which a check should not do; it is done only where the server refuses the call
/// itself: in a cluster, for a key of a slot being imported by `MIGRATE`, or while the cluster is
/// down. (The value stays the same; the next INCR makes it an integer again.)
pub fn limiter_at(ctx: &Ctx, name: &[u8]) -> Option<Limiter> {
    let (key, len) = (name.as_ptr(), name.len());
    // SAFETY: a context in which commands may be called; the format matches the arguments.
    let encoding = CallReply(unsafe {
        api!(RedisModule_Call)(ctx.raw(), c"OBJECT".as_ptr(), c"cb".as_ptr(), c"ENCODING".as_ptr(), key, len)
    });
    if encoding.0.is_null() {
        let name = ctx.string(name);
        let key = StoredKey::open_read(ctx, KeyName::of(&name));
        return key.bytes().ok().flatten().and_then(Limiter::of);
    }
    if encoding.text() == Some(b"int") {
        return Some(Limiter::Counter);
    }
    // SAFETY: as above.
    let value = CallReply(unsafe { api!(RedisModule_Call)(ctx.raw(), c"GET".as_ptr(), c"b".as_ptr(), key, len) });
    value.text().and_then(Limiter::of)
}

/// Gives the limiter's key at `name` an expiry if it has none (REPAIR's heal and the guard's): a
/// counter `window_ms` from `now_ms`, a sliding window the end of its counts; with HIT's effects:
/// `PEXPIREAT` for replicas and the AOF, an `expire` event. Anything else (no limiter, a TTL
/// already) is left as it is. True when it healed.
pub fn heal_if_leaked(ctx: &Ctx, name: &[u8], window_ms: i64, now_ms: i64) -> bool {
    let owned = ctx.string(name);
    let key_name = KeyName::of(&owned);
    let open = || StoredKey::open(ctx, key_name).ok().filter(StoredKey::is_string_without_ttl);
    // The cheap look first (most keys a guard checks have their TTL); then the value, asked with
    // the key closed; then the heal.
    if open().is_none() {
        return false;
    }
    let Some(limiter) = limiter_at(ctx, name) else { return false };
    open().is_some_and(|mut key| {
        let heal = Change::<i64>::Expire { at: limiter.heal_at(window_ms, now_ms) };
        key.apply(&heal, Written::Incrby).is_ok()
    })
}

/// A command's reply, freed on drop.
struct CallReply(*mut RedisModuleCallReply);

impl CallReply {
    /// The reply's bytes when it is a string.
    fn text(&self) -> Option<&[u8]> {
        if self.0.is_null() {
            return None;
        }
        let mut len = 0;
        // SAFETY: a live reply; its bytes live as long as it.
        let ptr = unsafe { api!(RedisModule_CallReplyStringPtr)(self.0, &mut len) };
        // SAFETY: `len` bytes at `ptr`, alive as long as the reply.
        (!ptr.is_null()).then(|| unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
    }
}

impl Drop for CallReply {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: a reply of ours, freed once.
            unsafe { api!(RedisModule_FreeCallReply)(self.0) };
        }
    }
}
