//! The commands as the tests send them, and what the tests read back from a server.

use redis::{Connection, ConnectionLike, RedisResult, Value};

use crate::library::{library, limiter};

/// `RATELIMIT.HIT key <args...>`, reply as `[allowed, count, remaining, reset_ms]`.
pub fn hit(con: &mut impl ConnectionLike, key: &str, args: &[&str]) -> RedisResult<Vec<i64>> {
    limiter("RATELIMIT.HIT").arg(key).arg(args).query(con)
}

/// `RATELIMIT.SLIDE key <args...>`, reply as `[allowed, count, remaining, retry_after_ms, reset_ms]`.
pub fn slide(con: &mut impl ConnectionLike, key: &str, args: &[&str]) -> RedisResult<Vec<i64>> {
    limiter("RATELIMIT.SLIDE").arg(key).arg(args).query(con)
}

/// `RATELIMIT.GCRA key <args...>`, reply as `[limited, capacity, remaining, retry_after_ms, full_after_ms]`.
pub fn gcra(con: &mut impl ConnectionLike, key: &str, args: &[&str]) -> RedisResult<Vec<i64>> {
    limiter("RATELIMIT.GCRA").arg(key).arg(args).query(con)
}

/// A limiter command (`RATELIMIT.HIT`, `.SLIDE`, `.GCRA`) with RESERVE after `args`: its numbers,
/// and the reservation (None when denied).
pub fn reserve(
    con: &mut impl ConnectionLike,
    command: &str,
    key: &str,
    args: &[&str],
) -> RedisResult<(Vec<i64>, Option<String>)> {
    let mut reply: Vec<Value> = limiter(command).arg(key).arg(args).arg("RESERVE").query(con)?;
    let reservation = redis::from_redis_value(&reply.pop().unwrap_or(Value::Nil))?;
    Ok((redis::from_redis_value(&Value::Array(reply))?, reservation))
}

/// What a SETTLE reply ends with: the reservation's limiter (`fixed`, `sliding`, `bucket`), its
/// limit (a bucket's capacity) and its window in ms (-1: a calendar window, or a bucket).
pub type Shape = (String, i64, i64);

/// One key's SETTLE reply: the reserving command's numbers with `applied` last, then the shape.
pub fn shaped(reply: Value) -> RedisResult<(Vec<i64>, Shape)> {
    let mut items: Vec<Value> = redis::from_redis_value(&reply)?;
    let shape = items.split_off(items.len().saturating_sub(3));
    Ok((redis::from_redis_value(&Value::Array(items))?, redis::from_redis_value(&Value::Array(shape))?))
}

/// `RATELIMIT.SETTLE key reservation used`, its reply as the reserving command's with `applied`
/// last (the shape that ends it checked for its types and dropped).
pub fn settle(con: &mut impl ConnectionLike, key: &str, reservation: &str, used: i64) -> RedisResult<Vec<i64>> {
    Ok(settle_shaped(con, key, reservation, used)?.0)
}

/// `RATELIMIT.SETTLE key reservation used`, its numbers and its shape.
pub fn settle_shaped(
    con: &mut impl ConnectionLike,
    key: &str,
    reservation: &str,
    used: i64,
) -> RedisResult<(Vec<i64>, Shape)> {
    shaped(limiter("RATELIMIT.SETTLE").arg(key).arg(reservation).arg(used).query(con)?)
}

/// A reservation on the same terms as `reservation` (each entry of a HITALL's) but another id,
/// `n`: another call's, which settles on its own.
pub fn same_terms(reservation: &str, n: u64) -> String {
    let entry = |entry: &str| -> String {
        let fields: Vec<String> = entry
            .split(':')
            .map(|f| match f.len() == 24 && f.bytes().all(|b| b.is_ascii_hexdigit()) {
                true => format!("{}{n:016x}", &f[..8]),
                false => f.to_string(),
            })
            .collect();
        fields.join(":")
    };
    reservation.split(',').map(entry).collect::<Vec<_>>().join(",")
}

/// `RATELIMIT.SETTLE key [key ...] reservation used` for several keys (a HITALL's token keys):
/// one reply per key.
pub fn settle_all(
    con: &mut impl ConnectionLike,
    keys: &[&str],
    reservation: &str,
    used: i64,
) -> RedisResult<Vec<Vec<i64>>> {
    let mut cmd = if library() { redis::cmd("FCALL") } else { redis::cmd("RATELIMIT.SETTLE") };
    if library() {
        cmd.arg("ratelimit_settle").arg(keys.len());
    }
    let replies: Vec<Value> = cmd.arg(keys).arg(reservation).arg(used).query(con)?;
    replies.into_iter().map(|reply| Ok(shaped(reply)?.0)).collect()
}

/// The error text of a command that must fail.
pub fn error_of(result: RedisResult<impl std::fmt::Debug>) -> String {
    match result {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => error_text(&e),
    }
}

/// An error reply as the server sent it (the redis crate splits "CODE detail").
pub fn error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

/// Everything observable about a key: type, serialized value, absolute expiry (ms).
pub fn snapshot(con: &mut Connection, key: &str) -> (String, Value, i64) {
    let key_type: String = redis::cmd("TYPE").arg(key).query(con).unwrap();
    let dump: Value = redis::cmd("DUMP").arg(key).query(con).unwrap();
    let expiry: i64 = redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap();
    (key_type, dump, expiry)
}

/// The server's clock (`TIME`) in ms.
pub fn server_ms(con: &mut Connection) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query(con).unwrap();
    s * 1_000 + us / 1_000
}

pub fn pttl(con: &mut Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(con).unwrap()
}

pub fn get(con: &mut Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(con).unwrap()
}

/// (value, absolute expiry in ms) for comparing a key across servers: a string's value, or a
/// sorted set's members and scores (a lease set).
pub fn value_and_expiry(con: &mut Connection, key: &str) -> (Option<String>, i64) {
    let expiry: i64 = redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap();
    let kind: String = redis::cmd("TYPE").arg(key).query(con).unwrap();
    if kind == "zset" {
        let members: Vec<(String, String)> =
            redis::cmd("ZRANGE").arg(key).arg(0).arg(-1).arg("WITHSCORES").query(con).unwrap();
        return (Some(format!("{members:?}")), expiry);
    }
    if kind == "hash" {
        let mut fields: Vec<(String, String)> = redis::cmd("HGETALL").arg(key).query(con).unwrap();
        fields.sort();
        return (Some(format!("{fields:?}")), expiry);
    }
    (get(con, key), expiry)
}

/// `MODULE LIST`, by name: `(name, version)`. Servers list their own built-in modules too (Redis 8's
/// `vectorset`, Valkey 9's `lua`).
pub fn loaded_modules(con: &mut Connection) -> Vec<(String, i64)> {
    let modules: Vec<std::collections::HashMap<String, Value>> = redis::cmd("MODULE").arg("LIST").query(con).unwrap();
    modules
        .iter()
        .map(|m| (redis::from_redis_value(&m["name"]).unwrap(), redis::from_redis_value(&m["ver"]).unwrap()))
        .collect()
}

/// Every field of `INFO <section>`, by name.
pub fn info_fields(con: &mut Connection, section: &str) -> std::collections::HashMap<String, String> {
    let info: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    info.lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

/// One field of `INFO <section>`.
pub fn info_field(con: &mut Connection, section: &str, field: &str) -> Option<String> {
    let info: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    info.lines().find_map(|line| line.strip_prefix(field)?.strip_prefix(':')).map(|v| v.trim().to_string())
}

/// A RATELIMIT.AUDIT or RATELIMIT.REPAIR reply; `found` is `leaked` or `repaired`.
#[derive(Debug, PartialEq, Eq)]
pub struct WalkReply {
    pub scanned: i64,
    pub matched: i64,
    pub found: i64,
    pub keys: Vec<String>,
}

/// A map reply's field/value pairs, from a RESP3 map or its RESP2 form, a flat array.
pub fn map_pairs(value: Value) -> Vec<(Value, Value)> {
    match value {
        Value::Map(pairs) => pairs,
        Value::Array(flat) => {
            assert_eq!(flat.len() % 2, 0, "odd field/value array");
            let mut items = flat.into_iter();
            std::iter::from_fn(|| Some((items.next()?, items.next()?))).collect()
        }
        other => panic!("not a map reply: {other:?}"),
    }
}

/// Reads the reply from a RESP3 map or its RESP2 form, a flat field/value array, checking the
/// field names and their order.
pub fn walk_reply(value: Value, found_field: &str) -> WalkReply {
    let pairs = map_pairs(value);
    let fields: Vec<String> = pairs.iter().map(|(k, _)| redis::from_redis_value(k).unwrap()).collect();
    assert_eq!(fields, ["scanned", "matched", found_field, "keys"]);
    let int = |i: usize| -> i64 { redis::from_redis_value(&pairs[i].1).unwrap() };
    let mut keys: Vec<String> = redis::from_redis_value(&pairs[3].1).unwrap();
    keys.sort();
    WalkReply { scanned: int(0), matched: int(1), found: int(2), keys }
}

pub fn audit(con: &mut Connection, args: &[&str]) -> RedisResult<WalkReply> {
    let reply: Value = redis::cmd("RATELIMIT.AUDIT").arg(args).query(con)?;
    Ok(walk_reply(reply, "leaked"))
}

pub fn repair(con: &mut Connection, args: &[&str]) -> RedisResult<WalkReply> {
    let reply: Value = redis::cmd("RATELIMIT.REPAIR").arg(args).query(con)?;
    Ok(walk_reply(reply, "repaired"))
}

/// One entry of a RATELIMIT.TOP reply (the key's name lossily as text): the truth is in
/// `[count - error, count]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopEntry {
    pub key: String,
    pub count: i64,
    pub error: i64,
}

/// Reads a RATELIMIT.TOP reply (a map per entry, or its RESP2 form), checking the field names.
pub fn top_entries(value: Value) -> Vec<TopEntry> {
    let Value::Array(entries) = value else { panic!("not a TOP reply: {value:?}") };
    entries
        .into_iter()
        .map(|entry| {
            let pairs = map_pairs(entry);
            let fields: Vec<String> = pairs.iter().map(|(k, _)| redis::from_redis_value(k).unwrap()).collect();
            assert_eq!(fields, ["key", "count", "error"]);
            let int = |i: usize| -> i64 { redis::from_redis_value(&pairs[i].1).unwrap() };
            let key: Vec<u8> = redis::from_redis_value(&pairs[0].1).unwrap();
            TopEntry { key: String::from_utf8_lossy(&key).into_owned(), count: int(1), error: int(2) }
        })
        .collect()
}

pub fn top(con: &mut Connection, args: &[&str]) -> RedisResult<Vec<TopEntry>> {
    let reply: Value = redis::cmd("RATELIMIT.TOP").arg(args).query(con)?;
    Ok(top_entries(reply))
}

/// Runs each command line (split on spaces) and ignores the replies.
pub fn run_all(con: &mut Connection, lines: &[&str]) {
    for line in lines {
        let words: Vec<&str> = line.split(' ').collect();
        let _: Value = redis::cmd(words[0]).arg(&words[1..]).query(con).unwrap_or_else(|e| panic!("{line}: {e}"));
    }
}
