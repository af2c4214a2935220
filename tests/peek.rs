//! RATELIMIT.PEEK: what a hit would get, without writing anything, on primaries and replicas.

use ratelimit_testkit as common;

use common::{assert_within, error_of, hit, pttl, run_all, snapshot, Server};
use redis::Connection;

fn peek(con: &mut Connection, key: &str, args: &[&str]) -> redis::RedisResult<Vec<i64>> {
    common::limiter("RATELIMIT.PEEK").arg(key).arg(args).query(con)
}

#[test]
fn peek_answers_like_hit_and_writes_nothing() {
    let server = Server::start();
    let mut con = server.connect();
    assert_eq!(peek(&mut con, "missing", &["5"]).unwrap(), [1, 0, 5, 0]);
    let exists: i64 = redis::cmd("EXISTS").arg("missing").query(&mut con).unwrap();
    assert_eq!(exists, 0, "PEEK never creates a key");

    let first_sent = std::time::Instant::now();
    for _ in 0..3 {
        hit(&mut con, "k", &["5", "60"]).unwrap();
    }
    let before = snapshot(&mut con, "k");
    let reply = peek(&mut con, "k", &["5"]).unwrap();
    let since_first = common::ms_since(first_sent);
    assert_eq!(reply[..3], [1, 3, 2]);
    assert_within(60_000 - reply[3], 0, since_first, "the window's time gone by");
    assert_eq!(peek(&mut con, "k", &["5", "COST", "2"]).unwrap()[..3], [1, 3, 2]);
    assert_eq!(peek(&mut con, "k", &["5", "cost", "3"]).unwrap()[..3], [0, 3, 2], "3 more would exceed 5");
    assert_eq!(snapshot(&mut con, "k"), before);
    assert_eq!(hit(&mut con, "k", &["5", "60"]).unwrap()[..2], [1, 4], "HIT agrees with what PEEK said");
}

#[test]
fn a_leaked_counter_peeks_as_leaked_and_stays_so() {
    let server = Server::start();
    let mut con = server.connect();
    run_all(&mut con, &["SET leaked 7"]);
    assert_eq!(peek(&mut con, "leaked", &["10"]).unwrap(), [1, 7, 3, -1]);
    assert_eq!(pttl(&mut con, "leaked"), -1, "PEEK never heals");
}

#[test]
fn peek_errors_change_nothing() {
    let server = Server::start();
    let mut con = server.connect();
    run_all(&mut con, &["RPUSH list x", "SET text abc"]);
    assert!(error_of(peek(&mut con, "list", &["5"])).starts_with("WRONGTYPE"));
    assert_eq!(error_of(peek(&mut con, "text", &["5"])), "ERR value is not an integer or out of range");
    for (args, needle) in [
        (&[][..], "wrong number of arguments for 'ratelimit.peek'"),
        (&["0"][..], "limit must be an integer >= 1"),
        (&["5", "COST"][..], "COST needs a value"),
        (&["5", "COST", "0"][..], "COST must be an integer >= 1"),
        (&["5", "60"][..], "unknown option (expected COST)"),
    ] {
        let error = error_of(peek(&mut con, "k", args));
        assert!(error.contains(needle), "{args:?}: {error}");
    }
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(dbsize, 2);
}

#[test]
fn peek_runs_on_a_replica_and_under_a_read_only_acl() {
    if common::module_only("ACL rules name the module's commands") {
        return;
    }
    let (primary, replica) = common::primary_and_replica(true);
    let mut p = primary.connect();
    let mut r = replica.connect();
    hit(&mut p, "k", &["5", "60"]).unwrap();
    common::wait_for_replica(&mut p);
    assert_eq!(peek(&mut r, "k", &["5"]).unwrap()[..3], [1, 1, 4]);
    assert!(error_of(hit(&mut r, "k", &["5", "60"])).starts_with("READONLY"));

    run_all(&mut p, &["ACL SETUSER viewer on >pw %R~* +ratelimit.peek +ratelimit.hit"]);
    let mut viewer = primary.connect();
    run_all(&mut viewer, &["AUTH viewer pw"]);
    assert_eq!(peek(&mut viewer, "k", &["5"]).unwrap()[..2], [1, 1]);
    assert!(error_of(hit(&mut viewer, "k", &["5", "60"])).starts_with("NOPERM"), "reading is not writing");
}
