//! A command as the server knows it: one row of the command table (`crate::commands::COMMANDS`)
//! gives its name, flags, keys, arity, entry point and docs, and everything the server is told
//! comes from that row: `RedisModule_CreateCommand`, and `COMMAND DOCS`, `COMMAND INFO` and
//! `COMMAND GETKEYS` (summary, complexity, arity, arguments and key specs, through
//! `RedisModule_SetCommandInfo`). The key specs are also what ACLs and Redis Cluster use to find
//! HITALL's keys.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;

use redis_module::raw::{
    RedisModuleCommandArg, RedisModuleCommandArgType, RedisModuleCommandHistoryEntry, RedisModuleCommandInfo,
    RedisModuleCommandInfoVersion, RedisModuleCommandKeySpec, RedisModuleCommandKeySpec__bindgen_ty_1,
    RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_1, RedisModuleCommandKeySpec__bindgen_ty_2,
    RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1, RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_2,
    RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX as BS_INDEX,
    RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM as FK_KEYNUM,
    RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE as FK_RANGE, REDISMODULE_CMD_ARG_MULTIPLE,
    REDISMODULE_CMD_ARG_OPTIONAL, REDISMODULE_CMD_KEY_ACCESS, REDISMODULE_CMD_KEY_RO, REDISMODULE_CMD_KEY_RW,
    REDISMODULE_CMD_KEY_UPDATE, REDISMODULE_OK,
};

use crate::core::version::VERSION;
use crate::redis::api::api;
use crate::redis::call::Entry;
use crate::redis::ctx::Ctx;

/// One argument as the docs show it.
pub struct Arg {
    pub name: &'static CStr,
    pub kind: RedisModuleCommandArgType,
    pub token: Option<&'static CStr>,
    pub optional: bool,
    pub multiple: bool,
    pub summary: Option<&'static CStr>,
    pub subargs: &'static [Arg],
}

/// An argument named `name`, of one of the `kind`s below.
pub const fn arg(name: &'static CStr, kind: RedisModuleCommandArgType) -> Arg {
    Arg { name, kind, token: None, optional: false, multiple: false, summary: None, subargs: &[] }
}

/// An optional argument introduced by `token`.
pub const fn option(name: &'static CStr, kind: RedisModuleCommandArgType, token: &'static CStr) -> Arg {
    Arg { token: Some(token), optional: true, ..arg(name, kind) }
}

pub use redis_module::raw::{
    RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK as BLOCK,
    RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE as DOUBLE,
    RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER as INTEGER,
    RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY as KEY,
    RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF as ONEOF,
    RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN as PURE_TOKEN,
    RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING as STRING,
};

/// How a command's keys are found.
pub enum Keys {
    None,
    /// One key at this position, accessed as the flags say.
    At(c_int, u64),
    /// A key count at position 1 and that many keys after it (the command answers Redis 7.0's
    /// key-positions requests itself: flag `getkeys-api`).
    Counted(u64),
    /// Every argument from position 1 on but the last two.
    AllButLastTwo(u64),
}

/// A command: one row of the table.
pub struct Command {
    pub name: &'static CStr,
    /// `CreateCommand`'s flags (`write fast`, ...).
    pub flags: &'static CStr,
    /// The server's ACL categories that describe it (`write fast`, ...), where the server lets a
    /// module set them (Redis 7.2+, Valkey 7.2.4+); and `@ratelimit` where a module may add one.
    pub acl_categories: &'static CStr,
    pub keys: Keys,
    pub arity: c_int,
    pub entry: Entry,
    /// Registered only when the module is loaded with this argument (CL.THROTTLE).
    pub opt_in: Option<&'static str>,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    pub args: &'static [Arg],
}

// As INCR: reads the value and updates it (INSERT and UPDATE exclude each other).
pub const WRITES: u64 = (REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_ACCESS | REDISMODULE_CMD_KEY_UPDATE) as u64;
pub const READS: u64 = (REDISMODULE_CMD_KEY_RO | REDISMODULE_CMD_KEY_ACCESS) as u64;

/// Builds `args` as Redis expects them: an array ended by a zeroed entry. Nested arrays are kept
/// in `arena` until Redis has copied everything.
fn c_args(args: &[Arg], arena: &mut Vec<Vec<RedisModuleCommandArg>>, key_spec: c_int) -> *mut RedisModuleCommandArg {
    let mut out: Vec<RedisModuleCommandArg> = args
        .iter()
        .map(|a| {
            let flags = if a.optional { REDISMODULE_CMD_ARG_OPTIONAL } else { 0 }
                | if a.multiple { REDISMODULE_CMD_ARG_MULTIPLE } else { 0 };
            RedisModuleCommandArg {
                name: a.name.as_ptr(),
                type_: a.kind,
                key_spec_index: if a.kind == KEY { key_spec } else { -1 },
                token: a.token.map_or(ptr::null(), CStr::as_ptr),
                summary: a.summary.map_or(ptr::null(), CStr::as_ptr),
                since: ptr::null(),
                flags: flags as c_int,
                deprecated_since: ptr::null(),
                subargs: if a.subargs.is_empty() { ptr::null_mut() } else { c_args(a.subargs, arena, key_spec) },
                display_text: ptr::null(),
            }
        })
        .collect();
    // SAFETY: plain C data; all zeroes is the terminator the server looks for.
    out.push(unsafe { std::mem::zeroed() });
    let p = out.as_mut_ptr();
    arena.push(out);
    p
}

fn key_specs(keys: &Keys) -> Vec<RedisModuleCommandKeySpec> {
    let spec = |flags: u64, pos: c_int, fk_type, fk| RedisModuleCommandKeySpec {
        notes: ptr::null(),
        flags,
        begin_search_type: BS_INDEX,
        bs: RedisModuleCommandKeySpec__bindgen_ty_1 {
            index: RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_1 { pos },
        },
        find_keys_type: fk_type,
        fk,
    };
    let mut specs = match *keys {
        Keys::None => Vec::new(),
        Keys::At(pos, flags) => vec![spec(
            flags,
            pos,
            FK_RANGE,
            RedisModuleCommandKeySpec__bindgen_ty_2 {
                range: RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 { lastkey: 0, keystep: 1, limit: 0 },
            },
        )],
        Keys::AllButLastTwo(flags) => vec![spec(
            flags,
            1,
            FK_RANGE,
            RedisModuleCommandKeySpec__bindgen_ty_2 {
                range: RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 { lastkey: -3, keystep: 1, limit: 0 },
            },
        )],
        Keys::Counted(flags) => vec![spec(
            flags,
            1,
            FK_KEYNUM,
            RedisModuleCommandKeySpec__bindgen_ty_2 {
                keynum: RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_2 { keynumidx: 0, firstkey: 1, keystep: 1 },
            },
        )],
    };
    // SAFETY: as in `c_args`.
    specs.push(unsafe { std::mem::zeroed() });
    specs
}

/// The ACL category every command of the module is in, where the server lets a module add one
/// (Redis 7.4+, Valkey 8+; only while it loads).
pub const ACL_CATEGORY: &CStr = c"ratelimit";

/// The category of the commands that give back (in `ACL_CATEGORY` too): `+@ratelimit
/// -@ratelimit-refund` limits and cannot give back, a negative COST or TOKENS included (whoever
/// may not run these may not give back: `commands::may_give_back`).
pub const REFUND_CATEGORY: &CStr = c"ratelimit-refund";
const GIVE_BACK: &[&CStr] = &[c"ratelimit.settle"];

/// Adds the module's categories where the server lets a module add them, and says whether it
/// does. The server refuses a category it has already, as after `MODULE UNLOAD` and `MODULE LOAD`
/// (it keeps the category): the commands are put in it all the same.
pub fn add_acl_category(ctx: &Ctx) -> bool {
    // SAFETY: reading a pointer written once at load time.
    let Some(add) = (unsafe { redis_module::raw::RedisModule_AddACLCategory }) else {
        return false;
    };
    for category in [ACL_CATEGORY, REFUND_CATEGORY] {
        // SAFETY: the module's load-time context and a static name.
        unsafe { add(ctx.raw(), category.as_ptr()) };
    }
    true
}

/// Creates `command` and sets its docs, key specs and ACL categories (with `ACL_CATEGORY` when
/// `own_category`); the error says what the server refused.
pub fn register(ctx: &Ctx, command: &Command, own_category: bool) -> Result<(), String> {
    let (first, last, step) = match command.keys {
        Keys::At(pos, _) => (pos, pos, 1),
        Keys::AllButLastTwo(_) => (1, -3, 1),
        Keys::None | Keys::Counted(_) => (0, 0, 0),
    };
    let name = command.name.as_ptr();
    // SAFETY: the module's load-time context; name and flags are static, the entry point a plain
    // function for the module's life.
    let created = unsafe {
        api!(RedisModule_CreateCommand)(ctx.raw(), name, Some(command.entry), command.flags.as_ptr(), first, last, step)
    };
    if created != REDISMODULE_OK as c_int {
        return Err(format!("could not create command {:?}", command.name));
    }
    let version = RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: size_of::<RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: size_of::<RedisModuleCommandKeySpec>(),
        sizeof_arg: size_of::<RedisModuleCommandArg>(),
    };
    let mut arena = Vec::new();
    let mut specs = key_specs(&command.keys);
    let info = RedisModuleCommandInfo {
        version: &version,
        summary: command.summary.as_ptr(),
        complexity: command.complexity.as_ptr(),
        since: VERSION.as_ptr(),
        history: ptr::null_mut(),
        tips: ptr::null(),
        arity: command.arity,
        key_specs: if matches!(command.keys, Keys::None) { ptr::null_mut() } else { specs.as_mut_ptr() },
        args: c_args(command.args, &mut arena, 0),
    };
    // SAFETY: the command was just created; `info` and everything it points to (the arena, the
    // specs) live until the server has copied them, during this call.
    unsafe {
        let created = api!(RedisModule_GetCommand)(ctx.raw(), name);
        if created.is_null() {
            return Err(format!("no command {:?}", command.name));
        }
        if api!(RedisModule_SetCommandInfo)(created, &info) != REDISMODULE_OK as c_int {
            return Err(format!("the server refused the command info of {:?}", command.name));
        }
        set_acl_categories(created, command, own_category)
    }
}

/// # Safety
/// `created` is the server's handle of `command`, created during this load.
unsafe fn set_acl_categories(
    created: *mut redis_module::raw::RedisModuleCommand,
    command: &Command,
    own_category: bool,
) -> Result<(), String> {
    // SAFETY: reading a pointer written once at load time.
    let Some(set) = (unsafe { redis_module::raw::RedisModule_SetCommandACLCategories }) else {
        return Ok(());
    };
    let mut categories = command.acl_categories.to_string_lossy().into_owned();
    if own_category {
        categories = format!("{categories} {}", ACL_CATEGORY.to_string_lossy());
        if GIVE_BACK.contains(&command.name) {
            categories = format!("{categories} {}", REFUND_CATEGORY.to_string_lossy());
        }
    }
    let categories = std::ffi::CString::new(categories).map_err(|e| e.to_string())?;
    // SAFETY: per the function's contract; the server copies the categories during the call.
    match unsafe { set(created, categories.as_ptr()) } {
        s if s == REDISMODULE_OK as c_int => Ok(()),
        _ => Err(format!("the server refused the ACL categories {categories:?} of {:?}", command.name)),
    }
}
