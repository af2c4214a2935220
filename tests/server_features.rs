//! RATELIMIT.HIT as a citizen of the server: module metadata, MULTI, Lua, ACLs, key extraction,
//! maxmemory, and many concurrent clients.

use ratelimit_testkit as common;

use std::collections::HashMap;
use std::time::Duration;

use common::{error_of, hit, pttl, run_all, Config, Server};
use redis::Value;

/// One version: the crate's (Cargo.toml), which `MODULE LIST` shows as Redis modules encode theirs
/// (1.0.0 is 10000) and `COMMAND DOCS` as the commands' `since`.
#[test]
fn the_module_is_listed_as_ratelimit_with_the_crates_version() {
    let server = Server::start();
    let mut con = server.connect();
    let modules = common::loaded_modules(&mut con);
    let ours: Vec<_> = modules.iter().filter(|(name, _)| name == "ratelimit").collect();
    let version: Vec<i64> = env!("CARGO_PKG_VERSION").split('.').map(|p| p.parse().unwrap()).collect();
    let encoded = version[0] * 10_000 + version[1] * 100 + version[2];
    assert_eq!(ours, [&("ratelimit".to_string(), encoded)], "{modules:?}");
    let docs: Vec<Value> = redis::cmd("COMMAND").arg("DOCS").arg("ratelimit.hit").query(&mut con).unwrap();
    let doc: HashMap<String, Value> = redis::from_redis_value(&docs[1]).unwrap();
    assert_eq!(redis::from_redis_value::<String>(&doc["since"]).unwrap(), env!("CARGO_PKG_VERSION"));
    // Valkey names a module that has only Redis's entry points a "Legacy Redis Module".
    assert!(!server.log().contains("Legacy Redis Module"), "{}", server.log());
    // Nothing at warning level (`#`) from a plain load: an operator reads those as trouble.
    let log = server.log();
    let warned: Vec<&str> = log.lines().filter(|line| line.contains(" # <ratelimit>")).map(str::trim).collect();
    assert!(warned.is_empty(), "{warned:?}");
}

#[test]
fn command_metadata_gives_the_key_and_flags() {
    let server = Server::start();
    let mut con = server.connect();
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg(&["GETKEYS", "RATELIMIT.HIT", "tenant:42", "10", "60", "COST", "2", "MS"])
        .query(&mut con)
        .unwrap();
    assert_eq!(keys, ["tenant:42"]);
    let info: Vec<Vec<Value>> = redis::cmd("COMMAND").arg("INFO").arg("ratelimit.hit").query(&mut con).unwrap();
    let flags: Vec<String> = redis::from_redis_value(&info[0][2]).unwrap();
    for flag in ["write", "fast"] {
        assert!(flags.iter().any(|f| f == flag), "{flag} missing from {flags:?}");
    }
    assert!(!flags.iter().any(|f| f == "denyoom"), "existing counters must keep counting over maxmemory");
}

#[test]
fn works_inside_multi_exec() {
    let server = Server::start();
    let mut con = server.connect();
    let replies: (Vec<i64>, Vec<i64>, Vec<i64>, i64) = redis::pipe()
        .atomic()
        .cmd("RATELIMIT.HIT")
        .arg(&["k", "2", "60"])
        .cmd("RATELIMIT.HIT")
        .arg(&["k", "2", "60"])
        .cmd("RATELIMIT.HIT")
        .arg(&["k", "2", "60"])
        .cmd("INCR")
        .arg("other")
        .query(&mut con)
        .unwrap();
    assert_eq!((replies.0[0], replies.1[0], replies.2[0], replies.3), (1, 1, 0, 1));
    assert_eq!(replies.2[1], 2);
    assert!(pttl(&mut con, "k") > 0);
}

#[test]
fn works_from_lua() {
    let server = Server::start();
    let mut con = server.connect();
    let script = "return redis.call('RATELIMIT.HIT', KEYS[1], ARGV[1], ARGV[2])";
    let mut allowed = Vec::new();
    for _ in 0..3 {
        let reply: Vec<i64> = redis::cmd("EVAL").arg(&[script, "1", "k", "2", "60"]).query(&mut con).unwrap();
        allowed.push(reply[0]);
    }
    assert_eq!(allowed, [1, 1, 0]);
    assert!(pttl(&mut con, "k") > 0);
    // Errors reach the script as errors.
    let error = error_of(redis::cmd("EVAL").arg(&[script, "1", "k", "0", "60"]).query::<Value>(&mut con));
    assert!(error.contains("limit must be an integer >= 1"), "{error}");
}

#[test]
fn acl_key_patterns_apply() {
    let server = Server::start();
    let mut admin = server.connect();
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "tenant1", "on", ">secret", "~tenant1:*", "+ratelimit.hit", "+get"])
        .query(&mut admin)
        .unwrap();
    let mut con = server.connect();
    let _: () = redis::cmd("AUTH").arg(&["tenant1", "secret"]).query(&mut con).unwrap();
    assert_eq!(hit(&mut con, "tenant1:api", &["10", "60"]).unwrap()[..2], [1, 1]);
    let error = error_of(hit(&mut con, "tenant2:api", &["10", "60"]));
    assert!(error.starts_with("NOPERM"), "{error}");
    let exists: i64 = redis::cmd("EXISTS").arg("tenant2:api").query(&mut admin).unwrap();
    assert_eq!(exists, 0);
}

#[test]
fn over_maxmemory_new_counters_are_refused_and_existing_ones_keep_counting() {
    let server = Server::start();
    let mut con = server.connect();
    hit(&mut con, "existing", &["3", "60"]).unwrap();
    let _: () = redis::cmd("SET").arg(&["leaked", "1"]).query(&mut con).unwrap();
    let _: () = redis::cmd("CONFIG").arg(&["SET", "maxmemory", "1"]).query(&mut con).unwrap();
    let error = error_of(hit(&mut con, "new", &["10", "60"]));
    assert!(error.starts_with("OOM command not allowed"), "{error}");
    let exists: i64 = redis::cmd("EXISTS").arg("new").query(&mut con).unwrap();
    assert_eq!(exists, 0);
    assert_eq!(hit(&mut con, "existing", &["3", "60"]).unwrap()[..2], [1, 2]);
    assert_eq!(hit(&mut con, "existing", &["3", "60"]).unwrap()[..2], [1, 3]);
    assert_eq!(hit(&mut con, "existing", &["3", "60"]).unwrap()[..2], [0, 3]);
    assert_eq!(hit(&mut con, "leaked", &["3", "60"]).unwrap()[..2], [1, 2]);
    assert!(pttl(&mut con, "leaked") > 0, "heals under memory pressure too");
    let _: () = redis::cmd("CONFIG").arg(&["SET", "maxmemory", "0"]).query(&mut con).unwrap();
    assert_eq!(hit(&mut con, "new", &["10", "60"]).unwrap()[..2], [1, 1]);
}

#[test]
fn watch_is_invalidated_only_by_a_hit_that_wrote() {
    let server = Server::start();
    let mut watcher = server.connect();
    let mut other = server.connect();
    hit(&mut other, "k", &["1", "60"]).unwrap();

    let exec_after = |watcher: &mut redis::Connection, other: &mut redis::Connection, args: &[&str]| {
        let _: () = redis::cmd("WATCH").arg("k").query(watcher).unwrap();
        hit(other, "k", args).unwrap();
        let result: Option<(i64,)> = redis::pipe().atomic().cmd("INCR").arg("unrelated").query(watcher).unwrap();
        result.is_some()
    };
    assert!(exec_after(&mut watcher, &mut other, &["1", "60"]), "a denied hit changed nothing");
    assert!(!exec_after(&mut watcher, &mut other, &["5", "60"]), "an admitted hit must abort EXEC");
    let _: () = redis::cmd("PERSIST").arg("k").query(&mut other).unwrap();
    assert!(!exec_after(&mut watcher, &mut other, &["1", "60"]), "a heal must abort EXEC");
}

#[test]
fn keyspace_notifications_match_the_core_commands() {
    let server = Server::start();
    let mut con = server.connect();
    let _: () = redis::cmd("CONFIG").arg(&["SET", "notify-keyspace-events", "KEA"]).query(&mut con).unwrap();
    let mut listener = server.connect();
    let mut pubsub = listener.as_pubsub();
    pubsub.psubscribe("__keyevent@0__:*").unwrap();
    pubsub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();

    hit(&mut con, "new", &["1", "60"]).unwrap(); // create: incrby + expire
    hit(&mut con, "new", &["5", "60"]).unwrap(); // increment: incrby
    hit(&mut con, "new", &["1", "60"]).unwrap(); // denied: nothing
    let _: () = redis::cmd("SET").arg(&["leak", "9"]).query(&mut con).unwrap(); // set
    hit(&mut con, "leak", &["1", "60"]).unwrap(); // denied heal: expire
    common::gcra(&mut con, "bucket", &["0", "1", "60"]).unwrap(); // a new TAT: set + expire, as SET PXAT
    common::gcra(&mut con, "bucket", &["0", "1", "60"]).unwrap(); // denied: nothing
    common::slide(&mut con, "window", &["2", "60"]).unwrap(); // set + expire, as SET PXAT
    common::slide(&mut con, "window", &["2", "60"]).unwrap(); // the same, the expiry unchanged
    common::slide(&mut con, "window", &["2", "60"]).unwrap(); // denied: nothing
    let _: () = redis::cmd("SET").arg(&["end", "0"]).query(&mut con).unwrap(); // set: end marker

    let mut events = Vec::new();
    loop {
        let message = pubsub.get_message().unwrap();
        let event = message.get_channel_name().trim_start_matches("__keyevent@0__:").to_string();
        let key: String = message.get_payload().unwrap();
        if key == "end" {
            break;
        }
        events.push(format!("{event} {key}"));
    }
    assert_eq!(
        events,
        [
            "incrby new",
            "expire new",
            "incrby new",
            "set leak",
            "expire leak",
            "set bucket",
            "expire bucket",
            "set window",
            "expire window",
            "set window",
            "expire window"
        ]
    );
}

#[test]
fn info_ratelimit_counts_what_the_module_did() {
    let server = Server::start();
    let mut con = server.connect();
    let _: () = redis::cmd("SET").arg(&["leaked", "5"]).query(&mut con).unwrap();
    for _ in 0..3 {
        hit(&mut con, "k", &["2", "60"]).unwrap(); // admitted, admitted, denied
    }
    hit(&mut con, "leaked", &["1", "60"]).unwrap(); // denied, healed
    let _: Vec<i64> = redis::cmd("RATELIMIT.PEEK").arg(&["k", "2"]).query(&mut con).unwrap();
    let _: Value = redis::cmd("RATELIMIT.AUDIT").arg("").query(&mut con).unwrap();
    let field =
        |con: &mut redis::Connection, name: &str| common::info_field(con, "ratelimit", &format!("ratelimit_{name}"));
    let expected = [
        ("hits", "4"),
        ("admitted", "2"),
        ("denied", "2"),
        ("healed", "1"),
        ("peeks", "1"),
        ("audits", "1"),
        ("keys_scanned", "2"),
    ];
    for (name, value) in expected {
        assert_eq!(field(&mut con, name).as_deref(), Some(value), "{name}");
    }
}

/// INFO ratelimit as a scraper that reads numbers sees it: every field a number but the
/// per-command lines and the two words, and each of those has numeric fields that say the same.
#[test]
fn every_info_field_has_a_numeric_form() {
    if common::module_only("INFO ratelimit") {
        return;
    }
    let server = Server::start();
    let mut con = server.connect();
    run_all(&mut con, &["CONFIG SET ratelimit.shadow shadowed:"]);
    for key in ["k", "k", "k", "shadowed:k", "shadowed:k", "shadowed:k"] {
        hit(&mut con, key, &["2", "60"]).unwrap();
    }
    let _: Value = redis::cmd("RATELIMIT.GCRA").arg(&["g", "0", "1", "60"]).query(&mut con).unwrap();
    let fields = common::info_fields(&mut con, "ratelimit");
    let mut words: Vec<&str> =
        fields.iter().filter(|(_, v)| v.parse::<u64>().is_err()).map(|(k, _)| k.as_str()).collect();
    words.sort();
    let commands = ["acquire", "adapt", "cl_throttle", "gcra", "hit", "hitall", "slide"];
    let mut expected: Vec<String> = commands.iter().map(|c| format!("ratelimit_decisions_{c}")).collect();
    expected.extend(["ratelimit_clock".to_string(), "ratelimit_guard_heal_at".to_string()]);
    expected.sort();
    assert_eq!(words, expected, "{fields:?}");
    for command in commands {
        let line = &fields[format!("ratelimit_decisions_{command}").as_str()];
        for part in line.split(',') {
            let (outcome, count) = part.split_once('=').unwrap();
            let flat = format!("ratelimit_decisions_{command}_{outcome}");
            assert_eq!(fields.get(flat.as_str()).map(String::as_str), Some(count), "{flat} against {line}");
        }
    }
    assert_eq!(fields["ratelimit_decisions_hit"], "admitted=5,denied=1,shadow_denied=1");
    assert_eq!(fields["ratelimit_decisions_gcra_denied"], "0");
    let flag = |word: &str, when: &str| if fields[word] == when { "1" } else { "0" };
    assert_eq!(fields["ratelimit_clock_command_us"], flag("ratelimit_clock", "command_us"));
    assert_eq!(fields["ratelimit_guard_heal_at_command_end"], flag("ratelimit_guard_heal_at", "command_end"));
}

/// Every counter is declared once, in src/redis/stats.rs's registry (`NAME => "field"`; each
/// command's decisions in theirs), and nowhere else: `INFO ratelimit` shows each, and `CONFIG
/// RESETSTAT` sets each back to zero.
#[test]
fn every_counter_of_the_registry_is_shown_and_reset() {
    if common::module_only("INFO ratelimit") {
        return;
    }
    let source = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/redis/stats.rs")).unwrap();
    // (Built here, so that this line does not match.)
    let declarations = [[": Stat", " ="].concat(), [": Decisions", " ="].concat()];
    let outside: Vec<&str> = source
        .lines()
        .filter(|l| declarations.iter().any(|d| l.contains(d.as_str())) && !l.contains("$name"))
        .collect();
    assert!(outside.is_empty(), "counters declared outside the registry: {outside:?}");
    let registry = source.split("counters! {").nth(1).expect("the registry").split("\n}").next().unwrap();
    let fields: Vec<&str> = registry.lines().filter_map(|l| l.split("=> \"").nth(1)?.split('"').next()).collect();
    assert!(fields.len() >= 32, "{fields:?}");
    let commands = source.split("decisions! {").nth(1).expect("the decisions").split("\n}").next().unwrap();
    let commands: Vec<&str> = commands.lines().filter_map(|l| l.split("=> \"").nth(1)?.split('"').next()).collect();
    assert!(commands.len() >= 6, "{commands:?}");

    let server = Server::with(Config { module_args: &["CL.THROTTLE"], ..Config::default() });
    let mut con = server.connect();
    run_all(
        &mut con,
        &[
            "RATELIMIT.HIT a 1 60",
            "RATELIMIT.HIT a 1 60",
            "RATELIMIT.SLIDE s 1 60",
            "RATELIMIT.GCRA g 0 1 60",
            "RATELIMIT.ACQUIRE l 1 60 ID x",
            "RATELIMIT.RELEASE l x",
            "RATELIMIT.HITALL 2 {h}1 {h}2 1 60 1 60",
            "CL.THROTTLE c 0 1 60",
        ],
    );
    let before = common::info_fields(&mut con, "ratelimit");
    for field in &fields {
        assert!(before.contains_key(&format!("ratelimit_{field}")), "INFO does not show {field}: {before:?}");
    }
    for command in &commands {
        for count in ["admitted", "denied", "shadow_denied"] {
            let field = format!("ratelimit_decisions_{command}_{count}");
            assert!(before.contains_key(&field), "INFO does not show {field}: {before:?}");
        }
    }
    assert_eq!(before["ratelimit_hits"], "3");
    let decisions: Vec<&String> =
        before.keys().filter(|k| k.starts_with("ratelimit_decisions_") && k.ends_with("ed")).collect();
    assert!(decisions.iter().any(|k| before[*k] != "0"), "{before:?}");

    run_all(&mut con, &["CONFIG RESETSTAT"]);
    let after = common::info_fields(&mut con, "ratelimit");
    let not_reset: Vec<String> = fields
        .iter()
        .map(|f| format!("ratelimit_{f}"))
        .chain(decisions.iter().map(|k| k.to_string()))
        .filter(|k| after[k] != "0")
        .collect();
    assert!(not_reset.is_empty(), "not reset: {not_reset:?}");
}

fn counters(con: &mut redis::Connection) -> (Option<String>, Option<String>, Option<String>) {
    let field = |con: &mut redis::Connection, name| common::info_field(con, "ratelimit", name);
    (field(con, "ratelimit_hits"), field(con, "ratelimit_decisions_hit_admitted"), field(con, "ratelimit_top_entries"))
}

/// The counters only grow, as a scraper's `rate()` needs, until `CONFIG RESETSTAT` sets them back
/// to zero with the server's own: not when the caller may not run it, nor when its MULTI is
/// discarded, nor on `CONFIG SET`. Gauges (TOP's entries) stay as they are.
#[test]
fn config_resetstat_resets_the_counters_as_the_servers_own() {
    if common::module_only("INFO ratelimit") {
        return;
    }
    let server = Server::start();
    let mut con = server.connect();
    for key in ["a", "b", "c"] {
        hit(&mut con, key, &["2", "60"]).unwrap();
    }
    let before = counters(&mut con);
    assert_eq!(before, (Some("3".into()), Some("3".into()), Some("3".into())));
    let config_sets = [
        "CONFIG SET ratelimit.shadow x:",
        "CONFIG SET ratelimit.max-walks 3",
        "CONFIG SET ratelimit.audit-limit 50",
        "CONFIG SET ratelimit.walk-slice-us 2000",
        "CONFIG SET maxmemory-policy noeviction",
    ];
    run_all(&mut con, &config_sets);
    assert_eq!(counters(&mut con), before, "after CONFIG SET");
    run_all(&mut con, &["ACL SETUSER app on >pw +@all -@admin -@dangerous"]);
    let mut app = server.connect();
    let _: () = redis::cmd("AUTH").arg(&["app", "pw"]).query(&mut app).unwrap();
    assert!(error_of(redis::cmd("CONFIG").arg("RESETSTAT").query::<()>(&mut app)).starts_with("NOPERM"));
    assert_eq!(counters(&mut con), before, "after a CONFIG RESETSTAT refused");
    let _: () = redis::cmd("MULTI").query(&mut con).unwrap();
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut con).unwrap();
    let _: () = redis::cmd("DISCARD").query(&mut con).unwrap();
    assert_eq!(counters(&mut con), before, "after a discarded MULTI");

    let _: () = redis::cmd("config").arg("resetstat").query(&mut con).unwrap();
    assert_eq!(counters(&mut con), (Some("0".into()), Some("0".into()), Some("3".into())));
    let processed = common::info_field(&mut con, "stats", "total_commands_processed").unwrap();
    assert!(processed.parse::<u64>().unwrap() < 10, "the server's own counts were reset too: {processed}");
    hit(&mut con, "a", &["2", "60"]).unwrap();
    assert_eq!(counters(&mut con).0.as_deref(), Some("1"));

    // In a transaction, sent at once or with its EXEC later.
    let _: (Vec<i64>, ()) = redis::pipe()
        .atomic()
        .cmd("RATELIMIT.HIT")
        .arg(&["b", "2", "60"])
        .cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut con)
        .unwrap();
    assert_eq!(counters(&mut con).0.as_deref(), Some("0"), "after MULTI, HIT, CONFIG RESETSTAT, EXEC sent at once");
    hit(&mut con, "a", &["2", "60"]).unwrap();
    run_all(&mut con, &["MULTI", "RATELIMIT.HIT b 2 60", "CONFIG RESETSTAT"]);
    let _: Value = redis::cmd("EXEC").query(&mut con).unwrap();
    assert_eq!(counters(&mut con).0.as_deref(), Some("0"), "after MULTI, HIT, CONFIG RESETSTAT, then EXEC");
    // Seen by the server's cron too (a reading a second), without an INFO: a HIT after it counts
    // from zero. 3 s: two readings' time and more, for a server that is not stopped, on a busy
    // machine too.
    hit(&mut con, "a", &["2", "60"]).unwrap();
    run_all(&mut con, &["CONFIG RESETSTAT"]);
    std::thread::sleep(std::time::Duration::from_secs(3));
    hit(&mut con, "a", &["2", "60"]).unwrap();
    assert_eq!(counters(&mut con).0.as_deref(), Some("1"), "a HIT after CONFIG RESETSTAT and a cron");
}

#[test]
fn command_docs_describe_every_command() {
    let server = Server::start();
    let mut con = server.connect();
    for (command, arity, first_argument) in [
        ("ratelimit.hit", -4, "key"),
        ("ratelimit.hitall", -5, "numkeys"),
        ("ratelimit.peek", -3, "key"),
        ("ratelimit.audit", -2, "prefix"),
        ("ratelimit.repair", -3, "prefix"),
    ] {
        let docs: Vec<Value> = redis::cmd("COMMAND").arg("DOCS").arg(command).query(&mut con).unwrap();
        let doc: HashMap<String, Value> = redis::from_redis_value(&docs[1]).unwrap();
        let summary: String = redis::from_redis_value(&doc["summary"]).unwrap();
        assert!(summary.len() > 20, "{command}: {summary}");
        let arguments: Vec<HashMap<String, Value>> = redis::from_redis_value(&doc["arguments"]).unwrap();
        let name: String = redis::from_redis_value(&arguments[0]["name"]).unwrap();
        assert_eq!(name, first_argument, "{command}");
        let info: Vec<Vec<Value>> = redis::cmd("COMMAND").arg("INFO").arg(command).query(&mut con).unwrap();
        assert_eq!(info[0][1], Value::Int(arity), "{command}");
    }
}

#[test]
fn configs_are_set_at_load_and_with_config_set() {
    let server = Server::with(common::Config {
        args: &["--ratelimit.audit-limit", "2", "--ratelimit.walk-slice-us", "500", "--ratelimit.max-walks", "3"],
        ..common::Config::default()
    });
    let mut con = server.connect();
    let get = |con: &mut redis::Connection, name: &str| -> String {
        let pair: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query(con).unwrap();
        pair[1].clone()
    };
    assert_eq!(get(&mut con, "ratelimit.audit-limit"), "2");
    assert_eq!(get(&mut con, "ratelimit.walk-slice-us"), "500");
    assert_eq!(get(&mut con, "ratelimit.max-walks"), "3");
    for i in 0..5 {
        let _: () = redis::cmd("SET").arg(format!("leak:{i}")).arg(i).query(&mut con).unwrap();
    }
    let names = |con: &mut redis::Connection| common::audit(con, &["leak:"]).unwrap().keys.len();
    assert_eq!(names(&mut con), 2, "the default LIMIT comes from ratelimit.audit-limit");

    let _: () = redis::cmd("CONFIG").arg(&["SET", "ratelimit.audit-limit", "4"]).query(&mut con).unwrap();
    assert_eq!(names(&mut con), 4);
    let error = error_of(redis::cmd("CONFIG").arg(&["SET", "ratelimit.walk-slice-us", "5"]).query::<()>(&mut con));
    assert!(error.contains("argument must be between 100 and 100000"), "{error}");
    assert_eq!(get(&mut con, "ratelimit.walk-slice-us"), "500");
    let error = error_of(redis::cmd("CONFIG").arg(&["SET", "ratelimit.max-walks", "0"]).query::<()>(&mut con));
    assert!(error.contains("argument must be between 1 and 100000"), "{error}");
    assert_eq!(get(&mut con, "ratelimit.max-walks"), "3");
}

/// One clock per command: where the server runs a transaction at one instant (its `TIME` does not
/// move inside MULTI), the module decides with that instant too, so keys created in it expire at
/// exactly the same moment, a window after it. Elsewhere (Redis 7.0) the module reads the wall
/// clock at each call.
#[test]
fn a_command_decides_with_the_servers_own_time() {
    if common::module_only("INFO ratelimit_clock") {
        return;
    }
    let server = Server::start();
    let mut con = server.connect();
    type Time = (i64, i64);
    let (t1, _, _, e1, e2, g, t2): (Time, Vec<i64>, Vec<i64>, i64, i64, Vec<i64>, Time) = redis::pipe()
        .atomic()
        .cmd("TIME")
        .cmd("RATELIMIT.HIT")
        .arg(&["a", "10", "60"])
        .cmd("RATELIMIT.HIT")
        .arg(&["b", "10", "60000", "MS"])
        .cmd("PEXPIRETIME")
        .arg("a")
        .cmd("PEXPIRETIME")
        .arg("b")
        .cmd("RATELIMIT.GCRA")
        .arg(&["g", "0", "1", "60"])
        // A wall clock moves by at least this much before the second TIME.
        .cmd("DEBUG")
        .arg(&["SLEEP", "0.002"])
        .ignore()
        .cmd("TIME")
        .query(&mut con)
        .unwrap();
    let clock = common::info_field(&mut con, "ratelimit", "ratelimit_clock");
    let command_clock = common::info_field(&mut con, "ratelimit", "ratelimit_clock_command_us");
    assert_eq!(command_clock.as_deref(), Some(if t1 == t2 { "1" } else { "0" }));
    if t1 == t2 {
        assert_eq!(clock.as_deref(), Some("command_us"), "the server has one instant per transaction");
        let now_ms = t1.0 * 1_000 + t1.1 / 1_000;
        assert_eq!((e1, e2), (now_ms + 60_000, now_ms + 60_000), "both windows from the transaction's instant");
        let tat: i64 = redis::cmd("GET").arg("g").query(&mut con).unwrap();
        assert_eq!(tat, (t1.0 * 1_000_000 + t1.1) * 1_000 + 60_000_000_000, "GCRA's TAT from the same µs");
        assert_eq!(g[4], 60_000);
    } else {
        assert_eq!(clock.as_deref(), Some("wall_ms"), "the server's TIME moves inside a transaction");
        assert!(e1 <= e2, "the wall clock at each call: {e1} then {e2}");
    }
}
