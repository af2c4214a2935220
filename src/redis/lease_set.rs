//! A lease set in the keyspace: a sorted set of lease ids scored by their expiry (Unix ms). Reading
//! it as `lease::Leases` for one id (each reading made only when asked, once), and applying `lease::Writes` with their keyspace events and
//! effects for replicas and the AOF (`ZREMRANGEBYSCORE`, `ZADD`, `ZREM`, `PEXPIREAT`).

use std::os::raw::c_int;
use std::ptr;
use std::sync::{Mutex, PoisonError};

use redis_module::raw::{
    RedisModuleKey, REDISMODULE_KEYTYPE_EMPTY, REDISMODULE_KEYTYPE_ZSET, REDISMODULE_NOTIFY_GENERIC,
    REDISMODULE_NOTIFY_ZSET, REDISMODULE_OK,
};

use crate::core::lease::{InFlight, Leases, Writes};
use crate::redis::api::api;
use crate::redis::call::KeyName;
use crate::redis::ctx::{bytes_of, Ctx, OwnedString};
use crate::redis::key::{notify_ours as notify, KeyError, StoredKey};
use crate::redis::stats;

/// The leases this module granted that are held now: INFO's `leases_in_flight`.
static IN_FLIGHT: Mutex<InFlight> = Mutex::new(InFlight::new());

/// The leases held at `now_ms`, of those granted since the module was loaded (a gauge).
pub fn in_flight(now_ms: i64) -> u64 {
    IN_FLIGHT.lock().unwrap_or_else(PoisonError::into_inner).count(now_ms)
}

/// The lowest and the highest score of the sorted set at `key`, if it has members.
pub fn score_bounds(key: &StoredKey) -> Option<(f64, f64)> {
    let raw = key.parts().0;
    let bound = |last: bool| {
        let mut score = None;
        // SAFETY: an open sorted-set key; the element handed out is freed at once; the range is
        // stopped before the key is used again.
        unsafe {
            let started = match last {
                true => api!(RedisModule_ZsetLastInScoreRange)(raw, f64::NEG_INFINITY, f64::INFINITY, 0, 0),
                false => api!(RedisModule_ZsetFirstInScoreRange)(raw, f64::NEG_INFINITY, f64::INFINITY, 0, 0),
            };
            if started == REDISMODULE_OK as c_int {
                let mut value = 0.0;
                let element = api!(RedisModule_ZsetRangeCurrentElement)(raw, &mut value);
                if !element.is_null() {
                    api!(RedisModule_FreeString)(key.parts().1.raw(), element);
                    score = Some(value);
                }
                api!(RedisModule_ZsetRangeStop)(raw);
            }
        }
        score
    };
    Some((bound(false)?, bound(true)?))
}

/// A lease set opened to read and write for one call's lease id; closed when dropped.
pub struct LeaseSet<'a> {
    key: StoredKey<'a>,
    id: OwnedString,
}

/// A score (an expiry in ms, an integer where this module wrote it) as ms: rounded up, so that a
/// score after now always reads as after now.
fn ms_of(score: f64) -> i64 {
    score.ceil() as i64
}

impl<'a> LeaseSet<'a> {
    pub fn open(ctx: &Ctx, name: KeyName<'a>, id: &[u8]) -> Result<LeaseSet<'a>, KeyError> {
        Ok(LeaseSet { key: StoredKey::open(ctx, name)?, id: ctx.string(id) })
    }

    fn raw(&self) -> *mut RedisModuleKey {
        self.key.parts().0
    }

    /// Whether the key is missing (`Ok(false)`), a sorted set (`Ok(true)`), or something else.
    fn exists(&self) -> Result<bool, KeyError> {
        match self.key.key_type() {
            t if t == REDISMODULE_KEYTYPE_EMPTY => Ok(false),
            t if t == REDISMODULE_KEYTYPE_ZSET => Ok(true),
            _ => Err(KeyError::WrongType),
        }
    }

    /// The elements whose scores lie in `(min, max]` (`[min, max]` with `min_inclusive`), from the
    /// lowest (or the highest, `from_top`), each handed to `visit` until it says stop.
    fn each_in_range(
        &self,
        (min, max): (f64, f64),
        min_inclusive: bool,
        from_top: bool,
        mut visit: impl FnMut(&[u8], f64) -> bool,
    ) {
        let (key, ctx, _) = self.key.parts();
        let minex = c_int::from(!min_inclusive);
        // SAFETY: an open sorted-set key; each element the range hands out is ours to free, and
        // its bytes are read before that; the range is stopped before the key is touched again.
        unsafe {
            let started = if from_top {
                api!(RedisModule_ZsetLastInScoreRange)(key, min, max, minex, 0)
            } else {
                api!(RedisModule_ZsetFirstInScoreRange)(key, min, max, minex, 0)
            };
            if started != REDISMODULE_OK as c_int {
                return;
            }
            while api!(RedisModule_ZsetRangeEndReached)(key) == 0 {
                let mut score = 0.0;
                let element = api!(RedisModule_ZsetRangeCurrentElement)(key, &mut score);
                if element.is_null() {
                    break;
                }
                let mut len = 0;
                let bytes = api!(RedisModule_StringPtrLen)(element, &mut len);
                let go_on = visit(std::slice::from_raw_parts(bytes.cast::<u8>(), len), score);
                api!(RedisModule_FreeString)(ctx.raw(), element);
                let moved =
                    if from_top { api!(RedisModule_ZsetRangePrev)(key) } else { api!(RedisModule_ZsetRangeNext)(key) };
                if !go_on || moved == 0 {
                    break;
                }
            }
            api!(RedisModule_ZsetRangeStop)(key);
        }
    }

    /// Whether the key is missing.
    pub fn is_missing(&self) -> bool {
        self.key.key_type() == REDISMODULE_KEYTYPE_EMPTY
    }

    /// The set as it stands at `now_ms`, for the call's lease id; `WRONGTYPE` if not a set.
    pub fn reading(&self, now_ms: i64) -> Result<Reading<'_, 'a>, KeyError> {
        let exists = self.exists()?;
        Ok(Reading { set: self, exists, now_ms, mine: None, expired: None, key_expiry: None })
    }

    /// How many elements score at or before `max`, counted without reading them.
    fn count_up_to(&self, max: f64) -> i64 {
        let key = self.raw();
        let mut n = 0;
        // SAFETY: an open sorted-set key; no element is handed out; the range is stopped before
        // the key is used again.
        unsafe {
            if api!(RedisModule_ZsetFirstInScoreRange)(key, f64::NEG_INFINITY, max, 0, 0) != REDISMODULE_OK as c_int {
                return 0;
            }
            while api!(RedisModule_ZsetRangeEndReached)(key) == 0 {
                n += 1;
                if api!(RedisModule_ZsetRangeNext)(key) == 0 {
                    break;
                }
            }
            api!(RedisModule_ZsetRangeStop)(key);
        }
        n
    }

    /// Makes the writes, then tells the rest of the server: keyspace events, WATCH, and the
    /// effects of the equivalent core commands for replicas and the AOF.
    pub fn apply(&mut self, w: &Writes, now_ms: i64) -> Result<(), KeyError> {
        if !w.any() {
            return Ok(());
        }
        if w.heals {
            stats::HEALED.add(1);
        }
        if w.ends.is_some() || w.set_mine.is_some() {
            let mut in_flight = IN_FLIGHT.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(at) = w.ends {
                in_flight.ended(at);
            }
            if let Some(at) = w.set_mine {
                in_flight.held(at, now_ms);
            }
        }
        let (key, ctx, name) = self.key.parts();
        let id = self.id.raw();
        let mut result = Ok(());
        if w.prune {
            let mut doomed = Vec::new();
            self.each_in_range((f64::NEG_INFINITY, now_ms as f64), true, false, |element, _| {
                doomed.push(ctx.string(element));
                true
            });
            stats::LEASES_EXPIRED.add(doomed.len() as u64);
            for element in &doomed {
                // SAFETY: an open sorted-set key and a live string.
                unsafe { api!(RedisModule_ZsetRem)(key, element.raw(), ptr::null_mut()) };
            }
            // SAFETY: a live context and the key's name; the format matches the arguments.
            unsafe {
                let (cmd, fmt) = (c"ZREMRANGEBYSCORE".as_ptr(), c"scl".as_ptr());
                api!(RedisModule_Replicate)(ctx.raw(), cmd, fmt, name, c"-inf".as_ptr(), now_ms);
            }
            notify(ctx, name, REDISMODULE_NOTIFY_ZSET, c"zremrangebyscore");
        }
        if let Some(at) = w.set_mine {
            // SAFETY: a key opened for writing (a missing one becomes a sorted set) and a live string.
            if unsafe { api!(RedisModule_ZsetAdd)(key, at as f64, id, ptr::null_mut()) } != REDISMODULE_OK as c_int {
                result = Err(KeyError::WriteFailed);
            }
            // SAFETY: as for the prune's effect.
            unsafe { api!(RedisModule_Replicate)(ctx.raw(), c"ZADD".as_ptr(), c"sls".as_ptr(), name, at, id) };
            notify(ctx, name, REDISMODULE_NOTIFY_ZSET, c"zadd");
        }
        if w.remove_mine {
            // SAFETY: an open sorted-set key and a live string.
            unsafe { api!(RedisModule_ZsetRem)(key, id, ptr::null_mut()) };
            // SAFETY: as for the prune's effect.
            unsafe { api!(RedisModule_Replicate)(ctx.raw(), c"ZREM".as_ptr(), c"ss".as_ptr(), name, id) };
            notify(ctx, name, REDISMODULE_NOTIFY_ZSET, c"zrem");
        }
        if let Some(at) = w.expire_at {
            // SAFETY: a key opened for writing.
            if unsafe { api!(RedisModule_SetAbsExpire)(key, at) } != REDISMODULE_OK as c_int {
                result = Err(KeyError::WriteFailed);
            }
            // SAFETY: as for the prune's effect.
            unsafe { api!(RedisModule_Replicate)(ctx.raw(), c"PEXPIREAT".as_ptr(), c"sl".as_ptr(), name, at) };
            notify(ctx, name, REDISMODULE_NOTIFY_GENERIC, c"expire");
        }
        if self.key.key_type() == REDISMODULE_KEYTYPE_EMPTY {
            notify(ctx, name, REDISMODULE_NOTIFY_GENERIC, c"del");
        }
        // SAFETY: a live context and the key's name.
        unsafe { api!(RedisModule_SignalModifiedKey)(ctx.raw(), name) };
        result
    }
}

/// A lease set read for one call: what `lease::Leases` asks, from the sorted set; what may be
/// asked twice is kept once read.
pub struct Reading<'s, 'a> {
    set: &'s LeaseSet<'a>,
    exists: bool,
    now_ms: i64,
    mine: Option<Option<i64>>,
    expired: Option<i64>,
    key_expiry: Option<Option<i64>>,
}

impl Reading<'_, '_> {
    fn total(&self) -> i64 {
        // SAFETY: an open sorted-set key.
        unsafe { api!(RedisModule_ValueLength)(self.set.raw()) as i64 }
    }
}

impl Leases for Reading<'_, '_> {
    fn mine(&mut self) -> Option<i64> {
        let (set, exists) = (self.set, self.exists);
        *self.mine.get_or_insert_with(|| {
            let mut score = 0.0;
            // SAFETY: an open sorted-set key and a live string.
            let found = exists
                && unsafe { api!(RedisModule_ZsetScore)(set.raw(), set.id.raw(), &mut score) }
                    == REDISMODULE_OK as c_int;
            found.then(|| ms_of(score))
        })
    }

    fn expired(&mut self) -> i64 {
        if let Some(n) = self.expired {
            return n;
        }
        let n = match (self.exists, self.mine) {
            (false, _) => 0,
            // The id's own lease alone (the common set of one): its score says it all.
            (true, Some(Some(at))) if self.total() == 1 => i64::from(at <= self.now_ms),
            (true, _) => self.set.count_up_to(self.now_ms as f64),
        };
        *self.expired.insert(n)
    }

    fn live(&mut self) -> i64 {
        if !self.exists {
            return 0;
        }
        self.total() - self.expired()
    }

    fn earliest(&mut self) -> Option<i64> {
        let mut earliest = None;
        if self.exists {
            self.set.each_in_range((self.now_ms as f64, f64::INFINITY), false, false, |_, score| {
                earliest = Some(ms_of(score));
                false
            });
        }
        earliest
    }

    fn latest_other(&mut self) -> Option<i64> {
        let mut latest = None;
        if self.exists {
            // SAFETY: a string of ours, alive as long as the set.
            let id = unsafe { bytes_of(self.set.id.raw()) };
            self.set.each_in_range((self.now_ms as f64, f64::INFINITY), false, true, |element, score| {
                if element == id {
                    return true;
                }
                latest = Some(ms_of(score));
                false
            });
        }
        latest
    }

    fn key_expiry(&mut self) -> Option<i64> {
        let (set, exists) = (self.set, self.exists);
        *self.key_expiry.get_or_insert_with(|| exists.then(|| set.key.expiry()).flatten())
    }
}
