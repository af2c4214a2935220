//! Shadow mode (`ratelimit.shadow`): under its prefixes a call its limit would deny is admitted,
//! counted as admitted and reported (INFO's shadow_denied, RATELIMIT.TOP SHADOWED); elsewhere every
//! limit is enforced. The module's alone: the Functions library cannot read a module config.

use ratelimit_testkit as common;

use common::{
    error_of, gcra, hit, info_field, primary_and_replica, slide, top, value_and_expiry, wait_for_replica, Config,
    Server,
};
use redis::{Connection, Value};

fn shadowing(prefixes: &str) -> Server {
    Server::with(Config { args: &["--ratelimit.shadow", prefixes], ..Config::default() })
}

fn decisions(con: &mut Connection, command: &str) -> String {
    info_field(con, "ratelimit", &format!("ratelimit_decisions_{command}")).unwrap()
}

fn top_of(con: &mut Connection, view: &str) -> Vec<(String, i64, i64)> {
    top(con, &[view]).unwrap().into_iter().map(|e| (e.key, e.count, e.error)).collect()
}

fn set_shadow(con: &mut Connection, prefixes: &str) -> redis::RedisResult<()> {
    redis::cmd("CONFIG").arg("SET").arg("ratelimit.shadow").arg(prefixes).query(con)
}

#[test]
fn a_shadowed_flood_admits_everything_and_top_names_the_flooders() {
    if common::module_only("shadow mode") {
        return;
    }
    let server = shadowing("new: beta:");
    let mut con = server.connect();
    let mut pipe = redis::pipe();
    for (key, calls) in [("new:a", 50), ("new:b", 20), ("new:c", 10), ("old:x", 20)] {
        for _ in 0..calls {
            pipe.cmd("RATELIMIT.HIT").arg(key).arg(5).arg(60);
        }
    }
    let replies: Vec<[i64; 4]> = pipe.query(&mut con).unwrap();
    let (shadowed, enforced) = replies.split_at(80);
    assert!(shadowed.iter().all(|r| r[0] == 1), "every call on a shadowed key is admitted");
    assert_eq!(shadowed[49][..3], [1, 50, 0], "counted as admitted, past the limit");
    assert_eq!(enforced.iter().filter(|r| r[0] == 0).count(), 15, "the other keys' limits hold");
    for (key, count) in [("new:a", "50"), ("new:b", "20"), ("new:c", "10"), ("old:x", "5")] {
        let (value, expiry) = value_and_expiry(&mut con, key);
        assert_eq!(value.as_deref(), Some(count), "{key}");
        assert!(expiry > 0, "{key} expires");
    }
    let would_deny = [("new:a".to_string(), 45, 0), ("new:b".to_string(), 15, 0), ("new:c".to_string(), 5, 0)];
    assert_eq!(top_of(&mut con, "SHADOWED"), would_deny);
    assert_eq!(top_of(&mut con, "DENIED"), [("old:x".to_string(), 15, 0)]);
    assert_eq!(decisions(&mut con, "hit"), "admitted=85,denied=15,shadow_denied=65");
}

#[test]
fn every_limiter_admits_what_it_would_deny_and_says_so() {
    if common::module_only("shadow mode") {
        return;
    }
    let server = Server::with(Config {
        module_args: &["CL.THROTTLE"],
        args: &["--ratelimit.shadow", "new:"],
        ..Config::default()
    });
    let mut con = server.connect();
    // SLIDE: the second call of a limit of 1 counts, and says it admits now.
    slide(&mut con, "new:s", &["1", "60"]).unwrap();
    let slid = slide(&mut con, "new:s", &["1", "60"]).unwrap();
    assert_eq!(slid[..4], [1, 2, 0, -1]);
    // GCRA and CL.THROTTLE: a bucket of 1, taken twice: the TAT moves on by the second token too.
    gcra(&mut con, "new:g", &["0", "1", "60"]).unwrap();
    let bucket = gcra(&mut con, "new:g", &["0", "1", "60"]).unwrap();
    assert_eq!(bucket[..4], [0, 1, 0, -1]);
    assert!(bucket[4] > 60_000 && bucket[4] <= 120_000, "full after both tokens: {}", bucket[4]);
    let cell = |con: &mut Connection| -> Vec<i64> {
        redis::cmd("CL.THROTTLE").arg("new:c").arg(0).arg(1).arg(60).query(con).unwrap()
    };
    cell(&mut con);
    assert_eq!(cell(&mut con)[0], 0, "CL.THROTTLE: not limited");
    // ACQUIRE: a second permit of 1, a lease past the limit that still ends by itself.
    let acquire = |con: &mut Connection, id: &str| -> Value {
        redis::cmd("RATELIMIT.ACQUIRE").arg("new:l").arg(1).arg(60).arg("ID").arg(id).query(con).unwrap()
    };
    acquire(&mut con, "a");
    let (acquired, in_use, _, ms, id): (i64, i64, i64, i64, String) =
        redis::from_redis_value(&acquire(&mut con, "b")).unwrap();
    assert_eq!((acquired, in_use, ms, id.as_str()), (1, 2, 60_000, "b"));
    // HIT with RESERVE: a reservation, as for any admitted call.
    hit(&mut con, "new:h", &["1", "60"]).unwrap();
    let reserved: Vec<Value> = redis::cmd("RATELIMIT.HIT")
        .arg("new:h")
        .arg(1)
        .arg(60)
        .arg("COST")
        .arg(3)
        .arg("RESERVE")
        .query(&mut con)
        .unwrap();
    assert!(matches!(&reserved[4], Value::BulkString(r) if r.starts_with(b"h:1:60000:")), "{reserved:?}");
    for key in ["new:s", "new:g", "new:c", "new:l", "new:h"] {
        assert!(value_and_expiry(&mut con, key).1 > 0, "{key} expires");
    }
    for command in ["slide", "gcra", "cl_throttle", "acquire", "hit"] {
        assert!(decisions(&mut con, command).ends_with(",denied=0,shadow_denied=1"), "{command}");
    }
    let keys: Vec<String> = top_of(&mut con, "SHADOWED").into_iter().map(|(k, ..)| k).collect();
    assert_eq!(keys, ["new:c", "new:g", "new:h", "new:l", "new:s"]);
}

#[test]
fn hitall_is_denied_only_by_its_enforced_keys() {
    if common::module_only("shadow mode") {
        return;
    }
    let server = shadowing("new:");
    let mut con = server.connect();
    let hitall = |con: &mut Connection| -> (i64, Vec<i64>, Vec<i64>) {
        redis::cmd("RATELIMIT.HITALL").arg(2).arg("old:{u}").arg("new:{u}").arg(&[2, 60, 1, 60]).query(con).unwrap()
    };
    assert_eq!(hitall(&mut con), (1, vec![1, 1, 60_000], vec![1, 0, 60_000]));
    // The shadowed limit of 1 would deny: the call counts on both.
    let (allowed, old, new) = hitall(&mut con);
    assert_eq!((allowed, old[..2].to_vec(), new[..2].to_vec()), (1, vec![2, 0], vec![2, 0]));
    // The enforced limit of 2 denies: nothing counts, shadowed key or not.
    let (allowed, old, new) = hitall(&mut con);
    assert_eq!((allowed, old[..2].to_vec(), new[..2].to_vec()), (0, vec![2, 0], vec![2, 0]));
    assert_eq!(top_of(&mut con, "SHADOWED"), [("new:{u}".to_string(), 1, 0)]);
    // A denied call counts, as any, against each key whose own limit refused it.
    assert_eq!(top_of(&mut con, "DENIED"), [("new:{u}".to_string(), 1, 0), ("old:{u}".to_string(), 1, 0)]);
    assert_eq!(decisions(&mut con, "hitall"), "admitted=2,denied=1,shadow_denied=1");
}

#[test]
fn the_config_takes_effect_at_once_and_a_bad_value_changes_nothing() {
    if common::module_only("shadow mode") {
        return;
    }
    let server = Server::start();
    let mut con = server.connect();
    hit(&mut con, "rl:v2:k", &["1", "60"]).unwrap();
    assert_eq!(hit(&mut con, "rl:v2:k", &["1", "60"]).unwrap()[0], 0, "enforced by default");
    set_shadow(&mut con, "rl:v2: rl:v3:").unwrap();
    assert_eq!(hit(&mut con, "rl:v2:k", &["1", "60"]).unwrap()[..2], [1, 2]);
    let refused = error_of(set_shadow(&mut con, "a b a"));
    assert!(refused.contains("prefix 'a' is given twice"), "{refused}");
    let kept: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("ratelimit.shadow").query(&mut con).unwrap();
    assert_eq!(kept, ["ratelimit.shadow", "rl:v2: rl:v3:"]);
    set_shadow(&mut con, "").unwrap();
    assert_eq!(hit(&mut con, "rl:v2:k", &["1", "60"]).unwrap()[..2], [0, 2], "enforced again");
}

#[test]
fn a_replica_without_the_module_gets_what_shadow_mode_admitted() {
    if common::module_only("shadow mode") {
        return;
    }
    let (primary, replica) = primary_and_replica(false);
    let mut con = primary.connect();
    set_shadow(&mut con, "new:").unwrap();
    for _ in 0..3 {
        hit(&mut con, "new:r", &["1", "60"]).unwrap();
        slide(&mut con, "new:w", &["1", "60"]).unwrap();
        gcra(&mut con, "new:b", &["0", "1", "60"]).unwrap();
    }
    wait_for_replica(&mut con);
    let mut copy = replica.connect();
    for key in ["new:r", "new:w", "new:b"] {
        assert_eq!(value_and_expiry(&mut copy, key), value_and_expiry(&mut con, key), "{key}");
    }
    assert_eq!(value_and_expiry(&mut con, "new:r").0.as_deref(), Some("3"));
}
