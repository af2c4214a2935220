//! `RATELIMIT.AUDIT prefix [LIMIT n]` and `RATELIMIT.REPAIR prefix window [MS] [LIMIT n]`:
//! find leaked counters (integer strings without TTL) under a prefix, and give them a window.

use std::os::raw::c_int;
use std::ptr;

use redis_module::raw::{
    RedisModuleCtx, RedisModuleKey, RedisModuleString, RedisModuleUser, REDISMODULE_CMD_KEY_ACCESS,
    REDISMODULE_CMD_KEY_UPDATE, REDISMODULE_CTX_FLAGS_SLAVE, REDISMODULE_KEYTYPE_STRING, REDISMODULE_NO_EXPIRE,
    REDISMODULE_OK,
};

use crate::args::{parse_audit, parse_repair, WalkArgs};
use crate::audit_filter::{classify, Probe, Seen, Tally};
use crate::clock;
use crate::command::{api, arguments, bytes, reply_error, OK};
use crate::config;
use crate::counter_key::{heal_if_leaked, holds_integer};
use crate::stats;
use crate::walk::{self, Walk};

/// # Safety
/// Called through `command::run` with the arguments Redis passed.
pub unsafe fn audit(ctx: *mut RedisModuleCtx, argv: &[*mut RedisModuleString]) -> c_int {
    match parse_audit(unsafe { arguments(argv) }, default_names()) {
        Ok(args) => unsafe { start(ctx, "RATELIMIT.AUDIT", &args) },
        Err(e) => reply_error(ctx, &e.message()),
    }
}

/// # Safety
/// Called through `command::run` with the arguments Redis passed.
pub unsafe fn repair(ctx: *mut RedisModuleCtx, argv: &[*mut RedisModuleString]) -> c_int {
    match parse_repair(unsafe { arguments(argv) }, default_names()) {
        Ok(args) => unsafe { start(ctx, "RATELIMIT.REPAIR", &args) },
        Err(e) => reply_error(ctx, &e.message()),
    }
}

/// The `ratelimit.audit-limit` config: names listed when the call gives no LIMIT.
fn default_names() -> usize {
    usize::try_from(config::AUDIT_LIMIT.get()).unwrap_or(0)
}

unsafe fn start(ctx: *mut RedisModuleCtx, command: &str, args: &WalkArgs) -> c_int {
    let user = unsafe { api!(RedisModule_GetCurrentUserName)(ctx) };
    if user.is_null() {
        return reply_error(ctx, "ERR ratelimit: cannot tell the caller's ACL user");
    }
    let user_name = unsafe { bytes(user) }.to_vec();
    unsafe { api!(RedisModule_FreeString)(ctx, user) };
    let sweep = Sweep {
        prefix: args.prefix.to_vec(),
        repair_window_ms: args.repair_window_ms,
        user_name,
        user: ptr::null_mut(),
        suspects: Vec::new(),
        tally: Tally::new(args.names),
    };
    match unsafe { walk::start(ctx, command, Box::new(sweep)) } {
        Ok(()) => {
            if args.repair_window_ms.is_some() { &stats::REPAIRS } else { &stats::AUDITS }.add(1);
            OK
        }
        Err(e) => reply_error(ctx, &e),
    }
}

/// One AUDIT or REPAIR walk.
struct Sweep {
    prefix: Vec<u8>,
    /// `Some` for REPAIR: the window given to each leaked counter.
    repair_window_ms: Option<i64>,
    user_name: Vec<u8>,
    /// The caller's ACL user, looked up again each slice (it may be changed or deleted between
    /// slices) and freed at the slice's end.
    user: *mut RedisModuleUser,
    /// Names of short strings without TTL seen in the current scan step; their values are read
    /// after the step, where commands may run.
    suspects: Vec<Vec<u8>>,
    tally: Tally,
}

// SAFETY: the raw pointers are only used on the walk thread, with the server lock held.
unsafe impl Send for Sweep {}

impl Sweep {
    /// The permissions a key must grant the caller to be seen at all: read, and write to repair.
    fn acl_flags(&self) -> c_int {
        let write = if self.repair_window_ms.is_some() { REDISMODULE_CMD_KEY_UPDATE } else { 0 };
        (REDISMODULE_CMD_KEY_ACCESS | write) as c_int
    }
}

impl Walk for Sweep {
    fn begin_slice(&mut self, ctx: *mut RedisModuleCtx) -> Result<(), String> {
        if self.repair_window_ms.is_some() {
            let flags = unsafe { api!(RedisModule_GetContextFlags)(ctx) } as u32;
            if flags & REDISMODULE_CTX_FLAGS_SLAVE != 0 {
                return Err("ERR RATELIMIT.REPAIR stopped: this server became a replica".into());
            }
        }
        let name = unsafe { api!(RedisModule_CreateString)(ctx, self.user_name.as_ptr().cast(), self.user_name.len()) };
        self.user = unsafe { api!(RedisModule_GetModuleUserFromUserName)(name) };
        unsafe { api!(RedisModule_FreeString)(ctx, name) };
        if self.user.is_null() {
            return Err("ERR ratelimit: the caller's ACL user was deleted during the walk".into());
        }
        Ok(())
    }

    fn visit(&mut self, _ctx: *mut RedisModuleCtx, name: *mut RedisModuleString, key: *mut RedisModuleKey) {
        // Keys the caller may not see are not counted at all, not even as scanned.
        if unsafe { api!(RedisModule_ACLCheckKeyPermissions)(self.user, name, self.acl_flags()) }
            != REDISMODULE_OK as c_int
        {
            return;
        }
        let name = unsafe { bytes(name) };
        let seen = classify(name, &self.prefix, &mut ScannedKey(key));
        self.tally.count(seen);
        stats::KEYS_SCANNED.add(1);
        if seen == Seen::Suspect {
            self.suspects.push(name.to_vec());
        }
    }

    fn settle(&mut self, ctx: *mut RedisModuleCtx) {
        for name in std::mem::take(&mut self.suspects) {
            match self.repair_window_ms {
                None => {
                    if unsafe { holds_integer(ctx, &name) } {
                        self.tally.found(&name);
                    }
                }
                Some(window_ms) => {
                    if unsafe { heal_if_leaked(ctx, &name, window_ms, clock::wall_ms()) } && self.tally.found(&name) {
                        stats::REPAIRED.add(1);
                    }
                }
            }
        }
    }

    fn end_slice(&mut self, _ctx: *mut RedisModuleCtx) {
        if !self.user.is_null() {
            unsafe { api!(RedisModule_FreeModuleUser)(self.user) };
            self.user = ptr::null_mut();
        }
    }

    fn reply(&self, ctx: *mut RedisModuleCtx) -> c_int {
        let found = if self.repair_window_ms.is_some() { c"repaired" } else { c"leaked" };
        let t = &self.tally;
        unsafe {
            api!(RedisModule_ReplyWithMap)(ctx, 4);
            for (field, value) in [(c"scanned", t.scanned), (c"matched", t.matched), (found, t.found)] {
                api!(RedisModule_ReplyWithCString)(ctx, field.as_ptr());
                api!(RedisModule_ReplyWithLongLong)(ctx, value as i64);
            }
            api!(RedisModule_ReplyWithCString)(ctx, c"keys".as_ptr());
            api!(RedisModule_ReplyWithArray)(ctx, t.names.len() as _);
            for name in &t.names {
                api!(RedisModule_ReplyWithStringBuffer)(ctx, name.as_ptr().cast(), name.len());
            }
        }
        OK
    }
}

/// The key handle `RedisModule_Scan` gives its callback, asked without reopening the key
/// (reopening could expire it and emit a DEL in the middle of a read-only walk).
struct ScannedKey(*mut RedisModuleKey);

impl Probe for ScannedKey {
    fn is_string(&mut self) -> bool {
        unsafe { api!(RedisModule_KeyType)(self.0) as isize == REDISMODULE_KEYTYPE_STRING }
    }
    fn has_ttl(&mut self) -> bool {
        unsafe { api!(RedisModule_GetAbsExpire)(self.0) != REDISMODULE_NO_EXPIRE as i64 }
    }
    fn len(&mut self) -> usize {
        unsafe { api!(RedisModule_ValueLength)(self.0) }
    }
}
