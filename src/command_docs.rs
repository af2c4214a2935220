//! What `COMMAND DOCS`, `COMMAND INFO` and `COMMAND GETKEYS` say about each command: summary,
//! complexity, arity, arguments and key specs, through Redis 7.0's `RedisModule_SetCommandInfo`.
//! The key specs are also what ACLs and Redis Cluster use to find HITALL's keys.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;

use redis_module::raw::{
    RedisModuleCommandArg, RedisModuleCommandArgType, RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK as BLOCK,
    RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE as DOUBLE,
    RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER as INTEGER,
    RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY as KEY,
    RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN as PURE_TOKEN,
    RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING as STRING, RedisModuleCommandHistoryEntry,
    RedisModuleCommandInfo, RedisModuleCommandInfoVersion, RedisModuleCommandKeySpec,
    RedisModuleCommandKeySpec__bindgen_ty_1, RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_1,
    RedisModuleCommandKeySpec__bindgen_ty_2, RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1,
    RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_2, RedisModuleCtx,
    RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX as BS_INDEX,
    RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM as FK_KEYNUM,
    RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE as FK_RANGE, REDISMODULE_CMD_ARG_MULTIPLE,
    REDISMODULE_CMD_ARG_OPTIONAL, REDISMODULE_CMD_KEY_ACCESS, REDISMODULE_CMD_KEY_RO, REDISMODULE_CMD_KEY_RW,
    REDISMODULE_CMD_KEY_UPDATE, REDISMODULE_OK,
};

use crate::command::api;

/// One argument as the docs show it.
struct Arg {
    name: &'static CStr,
    kind: RedisModuleCommandArgType,
    token: Option<&'static CStr>,
    optional: bool,
    multiple: bool,
    summary: Option<&'static CStr>,
    subargs: &'static [Arg],
}

const fn arg(name: &'static CStr, kind: RedisModuleCommandArgType) -> Arg {
    Arg { name, kind, token: None, optional: false, multiple: false, summary: None, subargs: &[] }
}

const fn option(name: &'static CStr, kind: RedisModuleCommandArgType, token: &'static CStr) -> Arg {
    Arg { token: Some(token), optional: true, ..arg(name, kind) }
}

const COST: Arg =
    Arg { summary: Some(c"how many hits this call counts for (default 1)"), ..option(c"cost", INTEGER, c"COST") };
const MS: Arg = Arg { summary: Some(c"the window is in milliseconds"), ..option(c"ms", PURE_TOKEN, c"MS") };
const NAMES: Arg =
    Arg { summary: Some(c"how many key names to list (default 100)"), ..option(c"count", INTEGER, c"LIMIT") };

/// How a command's keys are found.
enum Keys {
    None,
    /// One key at this position.
    At(c_int, u64),
    /// A key count at position 1 and that many keys after it.
    Counted(u64),
}

struct Doc {
    name: &'static CStr,
    /// Registered only when asked for at load time (CL.THROTTLE).
    optional: bool,
    summary: &'static CStr,
    complexity: &'static CStr,
    arity: c_int,
    keys: Keys,
    args: &'static [Arg],
}

// As INCR: reads the value and updates it (INSERT and UPDATE exclude each other).
const WRITES: u64 = (REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_ACCESS | REDISMODULE_CMD_KEY_UPDATE) as u64;
const READS: u64 = (REDISMODULE_CMD_KEY_RO | REDISMODULE_CMD_KEY_ACCESS) as u64;

const DOCS: [Doc; 7] = [
    Doc {
        optional: false,
        name: c"ratelimit.hit",
        summary: c"Counts a hit against a fixed-window limit and sets the window's expiry in one step; gives a counter without TTL one. Replies [allowed, count, remaining, reset_ms].",
        complexity: c"O(1)",
        arity: -4,
        keys: Keys::At(1, WRITES),
        args: &[
            Arg { summary: Some(c"the counter"), ..arg(c"key", KEY) },
            Arg { summary: Some(c"hits admitted per window"), ..arg(c"limit", INTEGER) },
            Arg { summary: Some(c"the window's length in seconds (milliseconds with MS)"), ..arg(c"window", INTEGER) },
            COST,
            MS,
        ],
    },
    Doc {
        optional: false,
        name: c"ratelimit.hitall",
        summary: c"Counts one hit against several limits, all or nothing. Replies [allowed, [count, remaining, reset_ms] per key].",
        complexity: c"O(N) where N is the number of keys",
        arity: -5,
        keys: Keys::Counted(WRITES),
        args: &[
            arg(c"numkeys", INTEGER),
            Arg { multiple: true, ..arg(c"key", KEY) },
            Arg { multiple: true, subargs: &[arg(c"limit", INTEGER), arg(c"window", INTEGER)], ..arg(c"limit-window", BLOCK) },
            COST,
            MS,
        ],
    },
    Doc {
        optional: false,
        name: c"ratelimit.peek",
        summary: c"Tells what a hit would get without making it. Replies [allowed, count, remaining, reset_ms]; reset_ms is -1 for a counter without TTL.",
        complexity: c"O(1)",
        arity: -3,
        keys: Keys::At(1, READS),
        args: &[arg(c"key", KEY), arg(c"limit", INTEGER), COST],
    },
    Doc {
        optional: false,
        name: c"ratelimit.gcra",
        summary: c"Takes tokens from a GCRA bucket (smooth rate limiting, as redis-cell): value and expiry in one step. Replies [limited, capacity, remaining, retry_after_ms, full_after_ms].",
        complexity: c"O(1)",
        arity: -5,
        keys: Keys::At(1, WRITES),
        args: &[
            Arg { summary: Some(c"the bucket: its theoretical arrival time in Unix ns"), ..arg(c"key", KEY) },
            Arg { summary: Some(c"the bucket holds max_burst + 1 tokens"), ..arg(c"max_burst", INTEGER) },
            Arg { summary: Some(c"tokens that come back per period"), ..arg(c"tokens_per_period", INTEGER) },
            Arg { summary: Some(c"seconds, a decimal number"), ..arg(c"period", DOUBLE) },
            Arg { summary: Some(c"tokens this call takes (default 1)"), ..option(c"count", INTEGER, c"TOKENS") },
        ],
    },
    Doc {
        optional: true,
        name: c"cl.throttle",
        summary: c"redis-cell's command on the same GCRA bucket, for its users (enabled by the module argument CL.THROTTLE). Replies [limited, limit, remaining, retry_after, reset_after] in whole seconds.",
        complexity: c"O(1)",
        arity: -5,
        keys: Keys::At(1, WRITES),
        args: &[
            arg(c"key", KEY),
            arg(c"max_burst", INTEGER),
            arg(c"count_per_period", INTEGER),
            Arg { summary: Some(c"whole seconds"), ..arg(c"period", INTEGER) },
            Arg { optional: true, summary: Some(c"tokens to take (default 1; 0 only looks)"), ..arg(c"quantity", INTEGER) },
        ],
    },
    Doc {
        optional: false,
        name: c"ratelimit.audit",
        summary: c"Counts the counters under a prefix that have no TTL, walking the keyspace without stalling the server.",
        complexity: c"O(N) where N is the number of keys in the database",
        arity: -2,
        keys: Keys::None,
        args: &[Arg { summary: Some(c"compared byte for byte, glob characters are literal"), ..arg(c"prefix", STRING) }, NAMES],
    },
    Doc {
        optional: false,
        name: c"ratelimit.repair",
        summary: c"Gives every counter under a prefix that has no TTL a window's expiry, walking the keyspace without stalling the server.",
        complexity: c"O(N) where N is the number of keys in the database",
        arity: -3,
        keys: Keys::None,
        args: &[arg(c"prefix", STRING), arg(c"window", INTEGER), MS, NAMES],
    },
];

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
        Keys::Counted(flags) => vec![spec(
            flags,
            1,
            FK_KEYNUM,
            RedisModuleCommandKeySpec__bindgen_ty_2 {
                keynum: RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_2 { keynumidx: 0, firstkey: 1, keystep: 1 },
            },
        )],
    };
    specs.push(unsafe { std::mem::zeroed() });
    specs
}

/// Sets the docs and key specs of every command; `false` (with a log line) if Redis refused any.
pub fn set_all(ctx: *mut RedisModuleCtx) -> Result<(), String> {
    let version = RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: size_of::<RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: size_of::<RedisModuleCommandKeySpec>(),
        sizeof_arg: size_of::<RedisModuleCommandArg>(),
    };
    for doc in &DOCS {
        let mut arena = Vec::new();
        let mut specs = key_specs(&doc.keys);
        let has_keys = !matches!(doc.keys, Keys::None);
        let info = RedisModuleCommandInfo {
            version: &version,
            summary: doc.summary.as_ptr(),
            complexity: doc.complexity.as_ptr(),
            since: c"1.0.0".as_ptr(),
            history: ptr::null_mut(),
            tips: ptr::null(),
            arity: doc.arity,
            key_specs: if has_keys { specs.as_mut_ptr() } else { ptr::null_mut() },
            args: c_args(doc.args, &mut arena, 0),
        };
        let status = unsafe {
            let command = api!(RedisModule_GetCommand)(ctx, doc.name.as_ptr());
            match (command.is_null(), doc.optional) {
                (true, true) => continue,
                (true, false) => return Err(format!("no command {:?}", doc.name)),
                _ => {}
            }
            api!(RedisModule_SetCommandInfo)(command, &info)
        };
        if status != REDISMODULE_OK as c_int {
            return Err(format!("Redis refused the command info of {:?}", doc.name));
        }
    }
    Ok(())
}
