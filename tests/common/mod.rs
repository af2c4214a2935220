//! Test harness: real `redis-server` processes on free loopback ports, with the built module
//! loaded (or not), and real clients. Every server is killed and its directory removed on drop,
//! also when a test fails.
//!
//! `REDIS_SERVER` picks the server binary (default `redis-server` on PATH); `RATELIMIT_MODULE`
//! overrides the module path (default: the cdylib cargo built next to this test binary).
#![allow(dead_code)] // each test binary uses a different part of the harness

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant};

use redis::{Connection, RedisResult, Value};

pub fn module_path() -> PathBuf {
    if let Some(path) = std::env::var_os("RATELIMIT_MODULE") {
        return PathBuf::from(path);
    }
    // cargo builds the cdylib into the same deps/ folder as the test binaries it links for.
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("test binary folder");
    for candidate in [deps.join("libredis_ratelimit.so"), deps.join("../libredis_ratelimit.so")] {
        if candidate.exists() {
            return candidate;
        }
    }
    panic!("libredis_ratelimit.so not found beside {}; run `make build` or set RATELIMIT_MODULE", exe.display());
}

/// `make soak` sets RATELIMIT_SOAK for the long forms of the stress, soak and crash tests.
pub fn soak() -> bool {
    std::env::var_os("RATELIMIT_SOAK").is_some()
}

pub fn server_binary() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_string())
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().unwrap().port()
}

/// A free port whose cluster bus port (port + 10000) is free too.
fn free_cluster_port() -> u16 {
    loop {
        let port = free_port();
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

fn new_dir() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ratelimit-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create test dir");
    dir
}

pub struct Server {
    child: Option<Child>,
    pub port: u16,
    pub dir: PathBuf,
    keep_dir: bool,
}

/// What to start: with or without the module, in a fresh or a given directory, plus any
/// `--option value` pairs (they override the defaults, which come first).
pub struct Config<'a> {
    pub module: bool,
    pub dir: Option<&'a Path>,
    pub args: &'a [&'a str],
    /// A Redis Cluster node (`--cluster-enabled yes`, on a port whose bus port is free).
    pub cluster: bool,
}

impl Default for Config<'_> {
    fn default() -> Self {
        Config { module: true, dir: None, args: &[], cluster: false }
    }
}

impl Server {
    /// A server with the module loaded and default settings.
    pub fn start() -> Server {
        Server::with(Config::default())
    }

    pub fn with(config: Config) -> Server {
        let (dir, keep_dir) = match config.dir {
            Some(d) => (d.to_path_buf(), true),
            None => (new_dir(), false),
        };
        let mut last_log = String::new();
        // A port picked free can be taken by another test before the server binds it: retry.
        for _ in 0..5 {
            let port = if config.cluster { free_cluster_port() } else { free_port() };
            let mut cmd = Command::new(server_binary());
            cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--dir", dir.to_str().unwrap(), "--logfile", "redis.log"])
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .args(["--enable-debug-command", "yes"]);
            if config.module {
                cmd.args(["--loadmodule", module_path().to_str().unwrap()]);
            }
            if config.cluster {
                cmd.args(["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"])
                    .args(["--cluster-node-timeout", "3000"]);
            }
            cmd.args(config.args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
            let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {}: {e}", server_binary()));
            let mut server = Server { child: Some(child), port, dir: dir.clone(), keep_dir };
            if server.wait_ready() {
                return server;
            }
            last_log = server.log();
            server.kill();
        }
        panic!("redis-server did not start; its log:\n{last_log}");
    }

    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(|c| c.try_wait()) {
                return false; // exited: port taken, bad config, module refused...
            }
            if let Ok(mut con) = self.try_connect() {
                // While an AOF or RDB loads, the server answers LOADING; wait for PONG.
                if redis::cmd("PING").query::<String>(&mut con).is_ok() {
                    return true;
                }
            }
            sleep(Duration::from_millis(20));
        }
        false
    }

    fn try_connect(&self) -> RedisResult<Connection> {
        let client = redis::Client::open(self.url())?;
        let con = client.get_connection_with_timeout(Duration::from_secs(5))?;
        con.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(con)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn connect(&self) -> Connection {
        self.try_connect().expect("connect to test server")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running server").id()
    }

    /// SIGKILL, as a crash would: no shutdown save, no AOF rewrite.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        if !self.keep_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A primary with the module and a replica of it (with or without the module), in sync.
pub fn primary_and_replica(replica_has_module: bool) -> (Server, Server) {
    let primary = Server::with(Config { args: &["--repl-diskless-sync-delay", "0"], ..Config::default() });
    let port = primary.port.to_string();
    let replica = Server::with(Config {
        module: replica_has_module,
        args: &["--replicaof", "127.0.0.1", &port],
        ..Config::default()
    });
    let mut con = replica.connect();
    wait_for("replica link", Duration::from_secs(20), || {
        info_field(&mut con, "replication", "master_link_status").as_deref() == Some("up")
    });
    (primary, replica)
}

/// A directory that outlives the servers started in it (for restarts), removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        TempDir(new_dir())
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `RATELIMIT.HIT key <args...>`, reply as `[allowed, count, remaining, reset_ms]`.
pub fn hit(con: &mut Connection, key: &str, args: &[&str]) -> RedisResult<Vec<i64>> {
    redis::cmd("RATELIMIT.HIT").arg(key).arg(args).query(con)
}

/// The error text of a command that must fail.
pub fn error_of(result: RedisResult<impl std::fmt::Debug>) -> String {
    match result {
        Ok(v) => panic!("expected an error, got {v:?}"),
        // The redis crate splits "CODE detail": put it back together as the server sent it.
        Err(e) => match (e.code(), e.detail()) {
            (Some(code), Some(detail)) => format!("{code} {detail}"),
            (Some(code), None) => code.to_string(),
            _ => e.to_string(),
        },
    }
}

/// Everything observable about a key: type, serialized value, absolute expiry (ms).
pub fn snapshot(con: &mut Connection, key: &str) -> (String, Value, i64) {
    let key_type: String = redis::cmd("TYPE").arg(key).query(con).unwrap();
    let dump: Value = redis::cmd("DUMP").arg(key).query(con).unwrap();
    let expiry: i64 = redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap();
    (key_type, dump, expiry)
}

pub fn pttl(con: &mut Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(con).unwrap()
}

pub fn get(con: &mut Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(con).unwrap()
}

/// (value, absolute expiry in ms) for comparing a key across servers.
pub fn value_and_expiry(con: &mut Connection, key: &str) -> (Option<String>, i64) {
    let expiry: i64 = redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap();
    (get(con, key), expiry)
}

/// One field of `INFO <section>`.
pub fn info_field(con: &mut Connection, section: &str, field: &str) -> Option<String> {
    let info: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}

/// Waits (bounded) until `condition` holds; panics with `what` otherwise.
pub fn wait_for(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        sleep(Duration::from_millis(20));
    }
}

/// A RATELIMIT.AUDIT or RATELIMIT.REPAIR reply; `found` is `leaked` or `repaired`.
#[derive(Debug, PartialEq, Eq)]
pub struct WalkReply {
    pub scanned: i64,
    pub matched: i64,
    pub found: i64,
    pub keys: Vec<String>,
}

/// Reads the reply from a RESP3 map or its RESP2 form, a flat field/value array, checking the
/// field names and their order.
pub fn walk_reply(value: Value, found_field: &str) -> WalkReply {
    let pairs: Vec<(Value, Value)> = match value {
        Value::Map(pairs) => pairs,
        Value::Array(flat) => {
            assert_eq!(flat.len() % 2, 0, "odd field/value array");
            let mut items = flat.into_iter();
            std::iter::from_fn(|| Some((items.next()?, items.next()?))).collect()
        }
        other => panic!("not a walk reply: {other:?}"),
    };
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

/// What one AUDIT cost while another client PINGed throughout.
pub struct TimedAudit {
    pub reply: WalkReply,
    pub took: Duration,
    pub worst_ping: Duration,
    pub pings: u64,
}

/// Runs `RATELIMIT.AUDIT args` on `con` while another connection to `server` PINGs in a loop.
pub fn audit_while_pinging(server: &Server, con: &mut Connection, args: &[&str]) -> TimedAudit {
    let mut pinger = server.connect();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = std::sync::Arc::clone(&done);
    let pings = std::thread::spawn(move || {
        let (mut worst, mut count) = (Duration::ZERO, 0);
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let sent = Instant::now();
            let _: String = redis::cmd("PING").query(&mut pinger).unwrap();
            worst = worst.max(sent.elapsed());
            count += 1;
        }
        (worst, count)
    });
    let started = Instant::now();
    let reply = audit(con, args).unwrap();
    let took = started.elapsed();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let (worst_ping, pings) = pings.join().unwrap();
    TimedAudit { reply, took, worst_ping, pings }
}

/// The audit as operators run it from a client today: `SCAN MATCH prefix*` and a pipelined
/// `TTL` per key; returns the keys without TTL and how long it took.
pub fn client_side_audit(con: &mut Connection, prefix: &str) -> (u64, Duration) {
    let started = Instant::now();
    let (mut cursor, mut leaked) = (0u64, 0u64);
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}*"))
            .arg("COUNT")
            .arg(1000)
            .query(con)
            .unwrap();
        let mut pipe = redis::pipe();
        for key in &keys {
            pipe.cmd("TTL").arg(key);
        }
        let ttls: Vec<i64> = pipe.query(con).unwrap();
        leaked += ttls.iter().filter(|&&t| t == -1).count() as u64;
        cursor = next;
        if cursor == 0 {
            return (leaked, started.elapsed());
        }
    }
}

/// Runs each command line (split on spaces) and ignores the replies.
pub fn run_all(con: &mut Connection, lines: &[&str]) {
    for line in lines {
        let words: Vec<&str> = line.split(' ').collect();
        let _: Value = redis::cmd(words[0]).arg(&words[1..]).query(con).unwrap_or_else(|e| panic!("{line}: {e}"));
    }
}

/// user + system CPU time of a process, in clock ticks.
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces), counted from its closing paren.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}
