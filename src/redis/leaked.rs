//! What AUDIT, REPAIR and the guard ask of a key that may have leaked: whether it holds a
//! limiter's value (a counter, a sliding window, a lease set), and the heal that gives it back its
//! expiry.

use redis_module::raw::{
    RedisModuleCallReply, REDISMODULE_KEYTYPE_ZSET, REDISMODULE_OPEN_KEY_NOTOUCH, REDISMODULE_READ,
};

use crate::core::audit_filter::Limiter;
use crate::core::stored::Change;
use crate::redis::api::api;
use crate::redis::call::KeyName;
use crate::redis::ctx::Ctx;
use crate::redis::key::{StoredKey, Written};
use crate::redis::lease_set::score_bounds;

/// What the string at `name`, in the selected database, holds, if it is a limiter's value: what
/// AUDIT, REPAIR and the guard count. An integer-encoded value (what INCR and SET leave) answers
/// from `OBJECT ENCODING`, which neither reads nor touches the value; only other strings are read
/// with `GET`. Reading through a key handle (`StringDMA`) would rewrite an int-encoded value as a
/// raw string, which a check should not do; it is done only where the server refuses the call
/// itself: in a cluster, for a key of a slot being imported by `MIGRATE`, or while the cluster is
/// down. (The value stays the same; the next INCR makes it an integer again.)
pub fn limiter_at(ctx: &Ctx, name: &[u8]) -> Option<Limiter> {
    {
        let owned = ctx.string(name);
        let key = StoredKey::open_with(ctx, owned.raw(), REDISMODULE_READ | REDISMODULE_OPEN_KEY_NOTOUCH);
        if !key.key.is_null() && key.key_type() == REDISMODULE_KEYTYPE_ZSET {
            let (lowest, highest) = score_bounds(&key)?;
            return Limiter::lease_set(lowest, highest);
        }
    }
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
    let open = || StoredKey::open(ctx, key_name).ok().filter(StoredKey::may_be_leaked);
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
