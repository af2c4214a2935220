//! A command call as a safe value: its arguments, its keys, and (through `Ctx`) its replies. And
//! the one boundary every command enters through, where a panic becomes an error reply instead of
//! a crashed server.

use std::borrow::Cow;
use std::marker::PhantomData;
use std::ops::Deref;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::raw::{RedisModuleCtx, RedisModuleString, REDISMODULE_OK};

use crate::redis::api::api;
use crate::redis::ctx::{bytes_of, Ctx, OwnedString};

/// One call of a command: `arg(0)` is the command's name.
pub struct Call<'a> {
    ctx: Ctx,
    argv: &'a [*mut RedisModuleString],
}

/// A key named by a call's argument, to open with `StoredKey`.
#[derive(Clone, Copy)]
pub struct KeyName<'a> {
    raw: *mut RedisModuleString,
    _call: PhantomData<&'a ()>,
}

impl<'a> KeyName<'a> {
    /// A key named by a string of ours.
    pub(in crate::redis) fn of(name: &'a OwnedString) -> KeyName<'a> {
        KeyName { raw: name.raw(), _call: PhantomData }
    }

    pub(in crate::redis) fn raw(&self) -> *mut RedisModuleString {
        self.raw
    }
}

/// An error reply, as Redis words them (`ERR ...`, `WRONGTYPE ...`).
#[derive(Debug)]
pub struct Error(pub Cow<'static, str>);

impl From<String> for Error {
    fn from(text: String) -> Error {
        Error(Cow::Owned(text))
    }
}

impl From<&'static str> for Error {
    fn from(text: &'static str) -> Error {
        Error(Cow::Borrowed(text))
    }
}

/// A command: replies through the call, or returns the error to reply with.
pub type Handler = fn(&Call) -> Result<(), Error>;

impl<'a> Call<'a> {
    /// How many arguments, the command's name included.
    pub fn len(&self) -> usize {
        self.argv.len()
    }

    pub fn arg(&self, i: usize) -> Option<&'a [u8]> {
        // SAFETY: the call's arguments live until the command returns, and `Call` does not
        // outlive it (see `run`).
        self.argv.get(i).map(|&s| unsafe { bytes_of(s) })
    }

    /// The arguments after the command's name.
    pub fn args(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        // SAFETY: as in `arg`.
        self.argv.iter().skip(1).map(|&s| unsafe { bytes_of(s) })
    }

    pub fn key(&self, i: usize) -> Option<KeyName<'a>> {
        self.argv.get(i).map(|&raw| KeyName { raw, _call: PhantomData })
    }

    /// Redis 7.0's cluster routing asks a `getkeys-api` command for its keys this way (it ignores
    /// the key specs that `COMMAND GETKEYS` and ACLs use).
    pub fn wants_key_positions(&self) -> bool {
        // SAFETY: a live command context.
        unsafe { api!(RedisModule_IsKeysPositionRequest)(self.ctx.raw()) != 0 }
    }

    /// Answers a key-positions request: argument `pos` is a key.
    pub fn key_at(&self, pos: usize) {
        // SAFETY: a live command context, during a key-positions request.
        unsafe { api!(RedisModule_KeyAtPos)(self.ctx.raw(), pos as c_int) };
    }

    /// The name of the caller's ACL user.
    pub fn user_name(&self) -> Option<Vec<u8>> {
        // SAFETY: a live command context; the string it returns is ours to free, after copying.
        unsafe {
            let user = api!(RedisModule_GetCurrentUserName)(self.ctx.raw());
            if user.is_null() {
                return None;
            }
            let name = bytes_of(user).to_vec();
            api!(RedisModule_FreeString)(self.ctx.raw(), user);
            Some(name)
        }
    }
}

impl Deref for Call<'_> {
    type Target = Ctx;

    fn deref(&self) -> &Ctx {
        &self.ctx
    }
}

/// Runs `handler` on the call Redis made; a panic becomes an error reply instead of a crashed
/// server.
///
/// # Safety
/// `ctx`, `argv` and `argc` must be the ones Redis passed to the command callback.
pub unsafe fn run(ctx: *mut RedisModuleCtx, argv: *mut *mut RedisModuleString, argc: c_int, handler: Handler) -> c_int {
    let argv: &[*mut RedisModuleString] = match usize::try_from(argc) {
        // SAFETY: Redis passes `argc` live arguments at `argv`, for the length of the call.
        Ok(n) if !argv.is_null() => unsafe { std::slice::from_raw_parts(argv, n) },
        _ => &[],
    };
    // SAFETY: the command's own context, live until this returns.
    let call = Call { ctx: unsafe { Ctx::from_raw(ctx) }, argv };
    match catch_unwind(AssertUnwindSafe(|| handler(&call))) {
        Ok(Ok(())) => {}
        Ok(Err(Error(message))) => call.reply_error(&message),
        Err(_) => call.reply_error("ERR ratelimit: internal error, see the server log"),
    }
    REDISMODULE_OK as c_int
}

/// The C entry point Redis calls for a command whose handler is `$handler`.
macro_rules! entry_point {
    ($handler:path) => {{
        extern "C" fn entry(
            ctx: *mut ::redis_module::raw::RedisModuleCtx,
            argv: *mut *mut ::redis_module::raw::RedisModuleString,
            argc: ::std::os::raw::c_int,
        ) -> ::std::os::raw::c_int {
            // SAFETY: Redis's own arguments to the command callback, passed on unchanged.
            unsafe { $crate::redis::call::run(ctx, argv, argc, $handler) }
        }
        entry as $crate::redis::call::Entry
    }};
}
pub(crate) use entry_point;

/// A command's C entry point.
pub type Entry = extern "C" fn(*mut RedisModuleCtx, *mut *mut RedisModuleString, c_int) -> c_int;
