//! A key's settle marks in the keyspace (`core::settle_marks`): a hash of settled reservations'
//! ids, each with what its settle applied. Read before anything is written, and marked with its
//! expiry in the same step, with the keyspace events and effects of `HSET` and `PEXPIREAT`.

use std::os::raw::c_int;
use std::ptr;

use redis_module::raw::{
    RedisModuleString, REDISMODULE_HASH_NONE, REDISMODULE_KEYTYPE_EMPTY, REDISMODULE_KEYTYPE_HASH,
    REDISMODULE_NOTIFY_GENERIC, REDISMODULE_NOTIFY_HASH, REDISMODULE_OK, REDISMODULE_READ, REDISMODULE_WRITE,
};

use crate::core::decimal::{format_i64, parse_i64, MAX_LEN};
use crate::core::reservation::Id;
use crate::core::settle_marks::mark_name;
use crate::redis::api::api;
use crate::redis::ctx::{bytes_of, Ctx, OwnedString};
use crate::redis::key::{notify_ours as notify, KeyError, StoredKey};

const NOT_MARKS: &str = "WRONGTYPE the key's settle marks (its name, then ':settled:') hold another kind of value";

/// A key's settle marks, opened to read and write for one reservation's id; closed when dropped.
pub struct SettleMarks {
    // Declared first, so dropped (closed) before the name it was opened with.
    key: StoredKey<'static>,
    _name: OwnedString,
    id: OwnedString,
    missing: bool,
    /// Their expiry when opened, read once.
    expiry: Option<i64>,
}

impl SettleMarks {
    /// The marks of the key named `key`, for reservation `id`: missing, or a hash; anything else
    /// is refused.
    pub fn open(ctx: &Ctx, key: &[u8], id: &Id) -> Result<SettleMarks, KeyError> {
        let name = ctx.string(&mark_name(key));
        // `name` lives in the struct, beside the key opened with it.
        let key = StoredKey::open_with(ctx, name.raw(), REDISMODULE_READ | REDISMODULE_WRITE);
        let missing = match key.key_type() {
            _ if key.parts().0.is_null() => return Err(KeyError::WriteFailed),
            t if t == REDISMODULE_KEYTYPE_EMPTY => true,
            t if t == REDISMODULE_KEYTYPE_HASH => false,
            _ => return Err(KeyError::Invalid(NOT_MARKS)),
        };
        let expiry = if missing { None } else { key.expiry() };
        Ok(SettleMarks { key, _name: name, id: ctx.string(id), missing, expiry })
    }

    pub fn is_missing(&self) -> bool {
        self.missing
    }

    /// What the settle of the reservation applied, if it was settled.
    pub fn settled(&self) -> Result<Option<i64>, KeyError> {
        if self.missing {
            return Ok(None);
        }
        let (key, ctx, _) = self.key.parts();
        let mut value: *mut RedisModuleString = ptr::null_mut();
        // SAFETY: an open hash key; the field, a place for its value, and the NULL that ends the
        // list; the value the server hands out is ours to free, after reading it.
        unsafe {
            let (flags, end) = (REDISMODULE_HASH_NONE as c_int, ptr::null_mut::<RedisModuleString>());
            if api!(RedisModule_HashGet)(key, flags, self.id.raw(), &mut value, end) != REDISMODULE_OK as c_int {
                return Err(KeyError::Invalid(NOT_MARKS));
            }
            if value.is_null() {
                return Ok(None);
            }
            let applied = parse_i64(bytes_of(value));
            api!(RedisModule_FreeString)(ctx.raw(), value);
            applied.map(Some).ok_or(KeyError::Invalid("ERR a settle mark is not an integer"))
        }
    }

    /// The marks' expiry (Unix ms), if they exist and have one.
    pub fn expiry(&self) -> Option<i64> {
        self.expiry
    }

    /// Marks the reservation settled, having applied `applied`, with the marks expiring at
    /// `expires_at` (never earlier than they did: see `mark_expiry`). Tells the rest of the server
    /// as `HSET` and `PEXPIREAT` would.
    pub fn mark(&mut self, applied: i64, expires_at: i64) -> Result<(), KeyError> {
        let (key, ctx, name) = self.key.parts();
        let mut digits = [0; MAX_LEN];
        let value = ctx.string(format_i64(applied, &mut digits));
        let mut result = Ok(());
        // SAFETY: a key opened for writing (a missing one becomes a hash); the field, a live value
        // and the NULL that ends the list.
        unsafe {
            let (flags, end) = (REDISMODULE_HASH_NONE as c_int, ptr::null_mut::<RedisModuleString>());
            api!(RedisModule_HashSet)(key, flags, self.id.raw(), value.raw(), end);
            let fmt = c"sss".as_ptr();
            api!(RedisModule_Replicate)(ctx.raw(), c"HSET".as_ptr(), fmt, name, self.id.raw(), value.raw());
        }
        notify(ctx, name, REDISMODULE_NOTIFY_HASH, c"hset");
        if self.expiry != Some(expires_at) {
            // SAFETY: a key opened for writing, and a live context and name for the effect.
            unsafe {
                if api!(RedisModule_SetAbsExpire)(key, expires_at) != REDISMODULE_OK as c_int {
                    result = Err(KeyError::WriteFailed);
                }
                api!(RedisModule_Replicate)(ctx.raw(), c"PEXPIREAT".as_ptr(), c"sl".as_ptr(), name, expires_at);
            }
            notify(ctx, name, REDISMODULE_NOTIFY_GENERIC, c"expire");
        }
        // SAFETY: a live context and the key's name.
        unsafe { api!(RedisModule_SignalModifiedKey)(ctx.raw(), name) };
        result
    }
}
