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
    RedisModuleKey, RedisModuleString, REDISMODULE_KEYTYPE_EMPTY, REDISMODULE_KEYTYPE_STRING, REDISMODULE_KEYTYPE_ZSET,
    REDISMODULE_NOTIFY_GENERIC, REDISMODULE_NOTIFY_STRING, REDISMODULE_NO_EXPIRE, REDISMODULE_OK, REDISMODULE_READ,
    REDISMODULE_WRITE,
};

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

/// A keyspace event for a write of this module's, which the guard need not check.
pub(in crate::redis) fn notify_ours(ctx: Ctx, name: *mut RedisModuleString, class: c_int, event: &CStr) {
    ANNOUNCING.store(true, Ordering::Relaxed);
    // SAFETY: a live context, a static event name and the key's name.
    unsafe { api!(RedisModule_NotifyKeyspaceEvent)(ctx.raw(), class, event.as_ptr(), name) };
    ANNOUNCING.store(false, Ordering::Relaxed);
}

/// A key opened for reading (and writing, with `open`); closed when dropped.
pub struct StoredKey<'a> {
    ctx: Ctx,
    name: *mut RedisModuleString,
    pub(in crate::redis) key: *mut RedisModuleKey,
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

    pub(in crate::redis) fn open_with(ctx: &Ctx, name: *mut RedisModuleString, mode: u32) -> StoredKey<'a> {
        // SAFETY: a live context, and a name that lives as long as `'a` (a call's argument, or a
        // string of ours held across the key's use).
        let key = unsafe { api!(RedisModule_OpenKey)(ctx.raw(), name, mode as c_int) }.cast::<RedisModuleKey>();
        StoredKey { ctx: *ctx, name, key, read_expiry: None, _name: PhantomData }
    }

    /// The key handle, the context and the key's name, for the other kinds of keys built on this
    /// one (lease_set.rs).
    pub(in crate::redis) fn parts(&self) -> (*mut RedisModuleKey, Ctx, *mut RedisModuleString) {
        (self.key, self.ctx, self.name)
    }

    pub(in crate::redis) fn key_type(&self) -> isize {
        // SAFETY: an open key handle (not null: checked by the callers).
        unsafe { api!(RedisModule_KeyType)(self.key) as isize }
    }

    pub(in crate::redis) fn expiry(&self) -> Option<i64> {
        // SAFETY: an open key handle.
        let expire = unsafe { api!(RedisModule_GetAbsExpire)(self.key) };
        (expire != REDISMODULE_NO_EXPIRE as i64).then_some(expire)
    }

    /// A string or a sorted set with no TTL (what a limiter's key might be), looked at without
    /// reading its value.
    pub(in crate::redis) fn may_be_leaked(&self) -> bool {
        let kind = self.key_type();
        !self.key.is_null()
            && (kind == REDISMODULE_KEYTYPE_STRING || kind == REDISMODULE_KEYTYPE_ZSET)
            && self.expiry().is_none()
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
    pub(in crate::redis) fn bytes(&self) -> Result<Option<&[u8]>, KeyError> {
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
            Change::Add { value, .. } | Change::Replace { value } => (Some(value.write(&mut buf)), None),
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
                Change::Replace { .. } => {
                    let text = text.unwrap_or_default();
                    let (cmd, fmt, keep) = (c"SET".as_ptr(), c"sbc".as_ptr(), c"KEEPTTL".as_ptr());
                    api!(RedisModule_Replicate)(ctx, cmd, fmt, name, text.as_ptr(), text.len(), keep);
                }
            }
        }
        let notify = |class: c_int, event: &CStr| notify_ours(self.ctx, name, class, event);
        if !matches!(change, Change::Expire { .. }) {
            notify(
                REDISMODULE_NOTIFY_STRING,
                match written {
                    Written::Incrby => c"incrby",
                    Written::Set => c"set",
                },
            );
        }
        // As SET with PXAT says: an expire event, even for the expiry it already had (SET with
        // KEEPTTL says none).
        if !matches!(change, Change::Add { .. } | Change::Replace { .. }) {
            notify(REDISMODULE_NOTIFY_GENERIC, c"expire");
        }
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
