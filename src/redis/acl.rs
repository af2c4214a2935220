//! ACL users as the module asks them: which keys a caller may see (AUDIT's and REPAIR's walks,
//! RATELIMIT.TOP), and whether it may run a command.

use std::os::raw::c_int;

use redis_module::raw::{
    RedisModuleString, RedisModuleUser, REDISMODULE_CMD_KEY_ACCESS, REDISMODULE_CMD_KEY_UPDATE, REDISMODULE_OK,
};

use crate::redis::api::api;
use crate::redis::ctx::Ctx;
use crate::redis::walk::ScannedKey;

/// An ACL user looked up by name, freed on drop.
pub struct AclUser(*mut RedisModuleUser);

// SAFETY: used by one thread at a time: the walker with the server lock held, within one slice,
// or the main thread within one command.
unsafe impl Send for AclUser {}

impl AclUser {
    /// The user named `name` as it is now; `None` if it was deleted.
    pub fn named(ctx: &Ctx, name: &[u8]) -> Option<AclUser> {
        let name = ctx.string(name);
        // SAFETY: a live string; the user returned is ours to free.
        let user = unsafe { api!(RedisModule_GetModuleUserFromUserName)(name.raw()) };
        (!user.is_null()).then_some(AclUser(user))
    }

    /// Whether the user may read the scanned `key` (and write it, with `write`).
    pub fn may(&self, key: &ScannedKey, write: bool) -> bool {
        let flags = REDISMODULE_CMD_KEY_ACCESS | if write { REDISMODULE_CMD_KEY_UPDATE } else { 0 };
        self.check_key(key.name, flags)
    }

    /// Whether the user may read the key named `name`.
    pub fn may_read(&self, ctx: &Ctx, name: &[u8]) -> bool {
        self.check_key(ctx.string(name).raw(), REDISMODULE_CMD_KEY_ACCESS)
    }

    fn check_key(&self, name: *mut RedisModuleString, flags: u32) -> bool {
        // SAFETY: a live user and a live key name.
        unsafe { api!(RedisModule_ACLCheckKeyPermissions)(self.0, name, flags as c_int) == REDISMODULE_OK as c_int }
    }

    /// Whether the user may run the command `argv` (its name first).
    pub fn may_run(&self, ctx: &Ctx, argv: &[&[u8]]) -> bool {
        let strings: Vec<_> = argv.iter().map(|a| ctx.string(a)).collect();
        let mut raw: Vec<*mut RedisModuleString> = strings.iter().map(|s| s.raw()).collect();
        // SAFETY: a live user and `raw.len()` live strings, which outlive the call.
        unsafe {
            api!(RedisModule_ACLCheckCommandPermissions)(self.0, raw.as_mut_ptr(), raw.len() as c_int)
                == REDISMODULE_OK as c_int
        }
    }
}

impl Drop for AclUser {
    fn drop(&mut self) {
        // SAFETY: looked up by `named`, freed once.
        unsafe { api!(RedisModule_FreeModuleUser)(self.0) };
    }
}
