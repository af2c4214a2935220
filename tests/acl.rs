//! Least privilege (docs/operations.md, "Granting access"): `+@ratelimit ~rl:*` is the whole
//! grant an application needs where the server lets a module add an ACL category (Redis 7.4+,
//! Valkey 8+), the explicit command list where it does not (Redis 7.0), and the library's grant
//! (FCALL, and the commands its functions call). Each command is also in the server's own categories that describe it.

use ratelimit_testkit as common;

use std::collections::BTreeSet;

use common::{error_of, run_all, top, Config, Server};
use redis::{Connection, Value};

/// Every command of the module, as `CL.THROTTLE` opted in registers them.
const COMMANDS: [&str; 15] = [
    "cl.throttle",
    "ratelimit.acquire",
    "ratelimit.adapt",
    "ratelimit.audit",
    "ratelimit.gcra",
    "ratelimit.hit",
    "ratelimit.hitall",
    "ratelimit.peek",
    "ratelimit.release",
    "ratelimit.renew",
    "ratelimit.repair",
    "ratelimit.report",
    "ratelimit.settle",
    "ratelimit.slide",
    "ratelimit.top",
];

/// The grant docs/operations.md gives for servers without module categories.
const EXPLICIT_GRANT: &str = "+ratelimit.hit +ratelimit.slide +ratelimit.hitall +ratelimit.peek +ratelimit.gcra \
     +ratelimit.settle +ratelimit.acquire +ratelimit.release +ratelimit.renew +ratelimit.audit +ratelimit.repair \
     +ratelimit.top +ratelimit.adapt +ratelimit.report +cl.throttle";

fn server() -> Server {
    Server::with(Config { module_args: &["CL.THROTTLE"], ..Config::default() })
}

fn has_module_categories(con: &mut Connection) -> bool {
    let categories: Vec<String> = redis::cmd("ACL").arg("CAT").query(con).unwrap();
    categories.iter().any(|c| c == "ratelimit")
}

fn user(server: &Server, name: &str) -> Connection {
    let mut con = server.connect();
    let _: () = redis::cmd("AUTH").arg(&[name, "pw"]).query(&mut con).unwrap();
    con
}

fn grant(admin: &mut Connection, name: &str, rules: &str) {
    let mut cmd = redis::cmd("ACL");
    cmd.arg(&["SETUSER", name, "on", ">pw"]).arg(rules.split_whitespace().collect::<Vec<_>>());
    let _: () = cmd.query(admin).unwrap();
}

/// A command line (split on spaces) that must be answered, and its answer.
fn answered(con: &mut Connection, line: &str) -> Value {
    let words: Vec<&str> = line.split(' ').collect();
    redis::cmd(words[0]).arg(&words[1..]).query(con).unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// Command lines that the user at `con` may not run: each refused with NOPERM.
fn refused(con: &mut Connection, lines: &[&str]) {
    for line in lines {
        let words: Vec<&str> = line.split(' ').collect();
        let error = error_of(redis::cmd(words[0]).arg(&words[1..]).query::<Value>(con));
        assert!(error.starts_with("NOPERM"), "{line}: {error}");
    }
}

/// Every limiter on `rl:` keys, as an application calls them.
fn calls_every_limiter(app: &mut Connection) {
    calls_every_limiter_but_settle(app);
    answered(app, "RATELIMIT.PEEK rl:h 10");
    let reserved: Vec<Value> =
        redis::cmd("RATELIMIT.HIT").arg(&["rl:r", "100", "60", "COST", "10", "RESERVE"]).query(app).unwrap();
    let reservation: String = redis::from_redis_value(&reserved[4]).unwrap();
    answered(app, &format!("RATELIMIT.SETTLE rl:r {reservation} 5"));
    let acquired: Vec<Value> = redis::cmd("RATELIMIT.ACQUIRE").arg(&["rl:l", "2", "60"]).query(app).unwrap();
    let id: String = redis::from_redis_value(&acquired[4]).unwrap();
    answered(app, &format!("RATELIMIT.RENEW rl:l {id} 60"));
    answered(app, &format!("RATELIMIT.RELEASE rl:l {id}"));
    answered(app, "RATELIMIT.AUDIT rl:");
    answered(app, "RATELIMIT.REPAIR rl: 60");
    answered(app, "RATELIMIT.TOP");
}

/// What the grant must not give: other commands, other keys, and other keys' TOP entries.
fn is_refused_everything_else(admin: &mut Connection, app: &mut Connection) {
    run_all(admin, &["RATELIMIT.HIT secret:k 10 60"]);
    refused(
        app,
        &["GET rl:h", "SET rl:h 1", "CONFIG GET maxmemory", "FLUSHALL", "KEYS *", "RATELIMIT.HIT secret:k 10 60"],
    );
    let seen: BTreeSet<String> = top(app, &["ADMITTED"]).unwrap().into_iter().map(|e| e.key).collect();
    assert!(seen.contains("rl:h") && !seen.contains("secret:k"), "{seen:?}");
}

#[test]
fn every_command_is_in_ratelimit_and_in_the_servers_categories_that_describe_it() {
    if common::module_only("the module's ACL categories") {
        return;
    }
    let server = server();
    let mut con = server.connect();
    if !has_module_categories(&mut con) {
        eprintln!("skipped: this server lets no module add an ACL category (Redis 7.0-7.3)");
        return;
    }
    let mut listed: Vec<String> = redis::cmd("ACL").arg(&["CAT", "ratelimit"]).query(&mut con).unwrap();
    listed.sort();
    assert_eq!(listed, COMMANDS);
    let refunds: Vec<String> = redis::cmd("ACL").arg(&["CAT", "ratelimit-refund"]).query(&mut con).unwrap();
    assert_eq!(refunds, ["ratelimit.settle"]);
    for (command, expected) in [
        ("ratelimit.hit", ["@write", "@fast"]),
        ("ratelimit.hitall", ["@write", "@slow"]),
        ("ratelimit.peek", ["@read", "@fast"]),
        ("ratelimit.audit", ["@read", "@slow"]),
        ("ratelimit.repair", ["@write", "@slow"]),
    ] {
        let info: Vec<Vec<Value>> = redis::cmd("COMMAND").arg(&["INFO", command]).query(&mut con).unwrap();
        let categories: Vec<String> = redis::from_redis_value(&info[0][6]).unwrap();
        for category in expected.iter().chain(&["@ratelimit"]) {
            assert!(categories.iter().any(|c| c == category), "{command}: {category} not in {categories:?}");
        }
    }
    // A user without @write may PEEK and not HIT.
    grant(&mut con, "viewer", "+@ratelimit -@write ~rl:*");
    let mut viewer = user(&server, "viewer");
    let _: Vec<i64> = redis::cmd("RATELIMIT.PEEK").arg(&["rl:x", "10"]).query(&mut viewer).unwrap();
    let error = error_of(redis::cmd("RATELIMIT.HIT").arg(&["rl:x", "10", "60"]).query::<Value>(&mut viewer));
    assert!(error.starts_with("NOPERM"), "{error}");
}

/// The server keeps a module's category after `MODULE UNLOAD`, and refuses to add it again: a
/// module loaded anew puts its commands in it all the same.
#[test]
fn the_category_holds_the_commands_again_after_module_unload_and_load() {
    if common::module_only("the module's ACL categories") {
        return;
    }
    let server = Server::with(Config { args: &["--enable-module-command", "yes"], ..Config::default() });
    let mut con = server.connect();
    if !has_module_categories(&mut con) {
        eprintln!("skipped: this server lets no module add an ACL category (Redis 7.0-7.3)");
        return;
    }
    let path = common::module_path().display().to_string();
    run_all(&mut con, &["MODULE UNLOAD ratelimit", &format!("MODULE LOAD {path}")]);
    let listed: Vec<String> = redis::cmd("ACL").arg(&["CAT", "ratelimit"]).query(&mut con).unwrap();
    assert_eq!(listed.len(), COMMANDS.len() - 1, "every command but the opt-in CL.THROTTLE: {listed:?}");
}

#[test]
fn plus_at_ratelimit_on_a_key_pattern_is_the_whole_grant() {
    if common::module_only("the module's ACL categories") {
        return;
    }
    let server = server();
    let mut admin = server.connect();
    if has_module_categories(&mut admin) {
        grant(&mut admin, "app", "+@ratelimit ~rl:*");
    } else {
        let error = error_of(redis::cmd("ACL").arg(&["SETUSER", "app", "+@ratelimit"]).query::<()>(&mut admin));
        assert!(error.contains("ratelimit"), "{error}");
        grant(&mut admin, "app", &format!("{EXPLICIT_GRANT} ~rl:*"));
    }
    let mut app = user(&server, "app");
    calls_every_limiter(&mut app);
    is_refused_everything_else(&mut admin, &mut app);
}

/// `+@ratelimit -@ratelimit-refund` (the explicit list without RATELIMIT.SETTLE where the server
/// has no module categories) limits and cannot give back: no SETTLE, no negative COST, TOKENS or
/// quantity, refused before anything is written. A selector gives back on some keys only.
#[test]
fn a_grant_without_refunds_limits_and_cannot_give_back() {
    if common::module_only("the module's permission checks") {
        return;
    }
    let server = server();
    let mut admin = server.connect();
    let limits_only = match has_module_categories(&mut admin) {
        true => "+@ratelimit -@ratelimit-refund".to_string(),
        false => EXPLICIT_GRANT.replace("+ratelimit.settle ", ""),
    };
    grant(&mut admin, "tenant", &format!("{limits_only} ~rl:* (+ratelimit.settle ~rl:own:*)"));
    let mut tenant = user(&server, "tenant");
    calls_every_limiter_but_settle(&mut tenant);
    let before = common::snapshot(&mut admin, "rl:h");
    refused(
        &mut tenant,
        &[
            "RATELIMIT.HIT rl:h 10 60 COST -1",
            "RATELIMIT.SLIDE rl:s 10 60 COST -1",
            "RATELIMIT.GCRA rl:g 5 1 60 TOKENS -1",
            "CL.THROTTLE rl:c 5 1 60 -1",
            "RATELIMIT.SETTLE rl:r h:100:60000:1:10:00000000 5",
        ],
    );
    assert_eq!(common::snapshot(&mut admin, "rl:h"), before, "a refused give-back writes nothing");
    // Where the selector grants SETTLE, it gives back.
    answered(&mut tenant, "RATELIMIT.HIT rl:own:h 10 60 COST 3");
    let back = answered(&mut tenant, "RATELIMIT.HIT rl:own:h 10 60 COST -2");
    assert_eq!(redis::from_redis_value::<Vec<i64>>(&back).unwrap()[1], 1, "3 counted, 2 given back");
}

/// Every limiter on `rl:` keys but SETTLE (a reservation made and left to its window).
fn calls_every_limiter_but_settle(app: &mut Connection) {
    for line in [
        "RATELIMIT.HIT rl:h 10 60",
        "RATELIMIT.SLIDE rl:s 10 60",
        "RATELIMIT.HITALL 2 rl:a rl:b 10 60 10 60",
        "RATELIMIT.GCRA rl:g 5 1 60",
        "CL.THROTTLE rl:c 5 1 60",
        "RATELIMIT.HIT rl:reserved 100 60 COST 10 RESERVE",
        "RATELIMIT.ACQUIRE rl:held 2 60",
    ] {
        answered(app, line);
    }
}

/// The explicit list docs/operations.md gives for Redis 7.0 works on every server.
#[test]
fn the_explicit_command_list_grants_the_same() {
    if common::module_only("ACL rules name the module's commands") {
        return;
    }
    let server = server();
    let mut admin = server.connect();
    grant(&mut admin, "app", &format!("{EXPLICIT_GRANT} ~rl:*"));
    let mut app = user(&server, "app");
    calls_every_limiter(&mut app);
    is_refused_everything_else(&mut admin, &mut app);
}

/// The grant docs/operations.md gives for the library: a function runs its commands with the
/// caller's permissions, so the user needs those it calls too (on its keys).
const LIBRARY_GRANT: &str = "~rl:* +fcall +fcall_ro +function|list +time +get +set +incrby +pttl +pexpire \
     +pexpireat +pexpiretime +hget +hset +zadd +zcard +zcount +zrangebyscore +zrem +zremrangebyscore +zrevrangebyscore +zscore";

/// The library: FCALL (and FUNCTION LIST, which the packages send to find it) on `rl:*` keys, the
/// library loaded by an operator; without the commands a function calls, a clear refusal.
#[test]
fn the_librarys_grant_calls_its_functions_on_its_keys_only() {
    let server = Server::with(Config { module: false, ..Config::default() });
    let mut admin = server.connect();
    common::load_library(&mut admin);
    grant(&mut admin, "bare", "~rl:* +fcall");
    let mut bare = user(&server, "bare");
    let error =
        error_of(redis::cmd("FCALL").arg(&["ratelimit_hit", "1", "rl:h", "10", "60"]).query::<Value>(&mut bare));
    // Redis 7.0's words, and Redis 8's and Valkey's.
    assert!(error.contains("can't run this command") || error.contains("no permissions to run"), "{error}");

    grant(&mut admin, "app", LIBRARY_GRANT);
    let mut app = user(&server, "app");
    for line in [
        "FCALL ratelimit_hit 1 rl:h 10 60",
        "FCALL_RO ratelimit_peek 1 rl:h 10",
        "FCALL ratelimit_slide 1 rl:s 10 60",
        "FCALL ratelimit_hitall 2 rl:a rl:b 10 60 10 60",
        "FCALL ratelimit_gcra 1 rl:g 5 1 60",
        "FCALL ratelimit_acquire 1 rl:l 2 60 ID one",
        "FCALL ratelimit_renew 1 rl:l one 60",
        "FCALL ratelimit_release 1 rl:l one",
        "FUNCTION LIST LIBRARYNAME ratelimit",
    ] {
        answered(&mut app, line);
    }
    let reserved = answered(&mut app, "FCALL ratelimit_hit 1 rl:r 100 60 COST 10 RESERVE");
    let reservation: String =
        redis::from_redis_value(&redis::from_redis_value::<Vec<Value>>(&reserved).unwrap()[4]).unwrap();
    answered(&mut app, &format!("FCALL ratelimit_settle 1 rl:r {reservation} 5"));
    let others = ["FCALL ratelimit_hit 1 secret:k 10 60", "GET secret:k", "DEL rl:h", "FUNCTION FLUSH"];
    refused(&mut app, &others);
    refused(&mut app, &["CONFIG GET maxmemory", "FLUSHALL"]);
}
