//! A module context, as safe methods: replies, context flags, the selected database, the log, and
//! strings the server owns. Only this layer makes one, from a pointer the server handed it.

use std::ffi::{CStr, CString};
use std::os::raw::c_long;

use redis_module::raw::{
    RedisModuleCtx, RedisModuleString, REDISMODULE_CTX_FLAGS_LOADING, REDISMODULE_CTX_FLAGS_OOM,
    REDISMODULE_CTX_FLAGS_REPLICATED, REDISMODULE_CTX_FLAGS_SLAVE, REDISMODULE_OK,
};

use crate::redis::api::api;

/// A live module context: a command's, a blocked client's reply callback's, a job's or an event's.
#[derive(Clone, Copy)]
pub struct Ctx {
    raw: *mut RedisModuleCtx,
}

impl Ctx {
    /// # Safety
    /// `raw` must be a context the server handed this module, live for as long as the `Ctx` is
    /// used (one callback, one command, or a thread-safe context until it is freed).
    pub(in crate::redis) unsafe fn from_raw(raw: *mut RedisModuleCtx) -> Ctx {
        Ctx { raw }
    }

    pub(in crate::redis) fn raw(&self) -> *mut RedisModuleCtx {
        self.raw
    }

    fn flags(&self) -> u32 {
        // SAFETY: a live context (see `from_raw`).
        unsafe { api!(RedisModule_GetContextFlags)(self.raw) as u32 }
    }

    /// This server is a replica.
    pub fn is_replica(&self) -> bool {
        self.flags() & REDISMODULE_CTX_FLAGS_SLAVE != 0
    }

    /// What runs here reproduces rather than decides: the server loads its data, or the write came
    /// over a link (from a primary, or from a Valkey 9 slot migration's source).
    pub fn is_reproducing(&self) -> bool {
        self.flags() & (REDISMODULE_CTX_FLAGS_SLAVE | REDISMODULE_CTX_FLAGS_LOADING | REDISMODULE_CTX_FLAGS_REPLICATED)
            != 0
    }

    /// Used memory is over `maxmemory`.
    pub fn is_out_of_memory(&self) -> bool {
        self.flags() & REDISMODULE_CTX_FLAGS_OOM != 0
    }

    pub fn selected_db(&self) -> i32 {
        // SAFETY: a live context.
        unsafe { api!(RedisModule_GetSelectedDb)(self.raw) }
    }

    /// False if the server refused (a database that does not exist).
    pub fn select_db(&self, db: i32) -> bool {
        // SAFETY: a live context.
        unsafe { api!(RedisModule_SelectDb)(self.raw, db) == REDISMODULE_OK as i32 }
    }

    pub fn log_notice(&self, line: &str) {
        self.log(c"notice", line);
    }

    pub fn log_warning(&self, line: &str) {
        self.log(c"warning", line);
    }

    fn log(&self, level: &CStr, line: &str) {
        let end = line.find('\0').unwrap_or(line.len());
        if let Ok(line) = CString::new(&line[..end]) {
            // SAFETY: a format and one NUL-terminated argument, as `%s` expects.
            unsafe { api!(RedisModule_Log)(self.raw, level.as_ptr(), c"%s".as_ptr(), line.as_ptr()) };
        }
    }

    /// A string the server owns, freed when dropped.
    pub fn string(&self, bytes: &[u8]) -> OwnedString {
        // SAFETY: the server copies `bytes`.
        let raw = unsafe { api!(RedisModule_CreateString)(self.raw, bytes.as_ptr().cast(), bytes.len()) };
        OwnedString { ctx: *self, raw }
    }

    pub fn reply_error(&self, message: &str) {
        // Our messages hold no NUL; should one ever, the reply is cut there rather than lost.
        let end = message.find('\0').unwrap_or(message.len());
        let message = CString::new(&message[..end]).unwrap_or_default();
        // SAFETY: a live context and a NUL-terminated message, which the server copies.
        unsafe { api!(RedisModule_ReplyWithError)(self.raw, message.as_ptr()) };
    }

    pub fn reply_integer(&self, value: i64) {
        // SAFETY: a live context.
        unsafe { api!(RedisModule_ReplyWithLongLong)(self.raw, value) };
    }

    /// An array of `len` replies to follow.
    pub fn reply_array(&self, len: usize) {
        // SAFETY: a live context.
        unsafe { api!(RedisModule_ReplyWithArray)(self.raw, len as c_long) };
    }

    pub fn reply_integers(&self, values: &[i64]) {
        self.reply_array(values.len());
        for &v in values {
            self.reply_integer(v);
        }
    }

    /// A map of `len` field/value pairs to follow (a flat array under RESP2).
    pub fn reply_map(&self, len: usize) {
        // SAFETY: a live context.
        unsafe { api!(RedisModule_ReplyWithMap)(self.raw, len as c_long) };
    }

    pub fn reply_simple(&self, text: &CStr) {
        // SAFETY: a live context and a NUL-terminated text, which the server copies.
        unsafe { api!(RedisModule_ReplyWithCString)(self.raw, text.as_ptr()) };
    }

    pub fn reply_bulk(&self, bytes: &[u8]) {
        // SAFETY: the server copies `bytes`.
        unsafe { api!(RedisModule_ReplyWithStringBuffer)(self.raw, bytes.as_ptr().cast(), bytes.len()) };
    }

    pub fn reply_null(&self) {
        // SAFETY: a live context.
        unsafe { api!(RedisModule_ReplyWithNull)(self.raw) };
    }
}

/// The bytes of a server string, borrowed for as long as the server keeps the string alive.
///
/// # Safety
/// `s` must be a live `RedisModuleString`, unchanged while the bytes are used.
pub(in crate::redis) unsafe fn bytes_of<'a>(s: *const RedisModuleString) -> &'a [u8] {
    let mut len = 0;
    // SAFETY: per the function's contract.
    let ptr = unsafe { api!(RedisModule_StringPtrLen)(s, &mut len) };
    if ptr.is_null() {
        return &[];
    }
    // SAFETY: the server gives `len` bytes at `ptr`, alive as long as the string.
    unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
}

/// A server string made by this module, freed on drop.
pub struct OwnedString {
    ctx: Ctx,
    raw: *mut RedisModuleString,
}

impl OwnedString {
    pub(in crate::redis) fn raw(&self) -> *mut RedisModuleString {
        self.raw
    }
}

impl Drop for OwnedString {
    fn drop(&mut self) {
        // SAFETY: made by `Ctx::string` with this context, freed once.
        unsafe { api!(RedisModule_FreeString)(self.ctx.raw, self.raw) };
    }
}
