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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{sleep, JoinHandle};
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

/// redis-cell, built by `make redis-cell` (scripts/redis-cell.sh) from its crates.io release, to
/// compare CL.THROTTLE with; `REDIS_CELL_MODULE` overrides the path.
pub fn redis_cell_module() -> PathBuf {
    let path = std::env::var_os("REDIS_CELL_MODULE")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/redis-cell/libredis_cell.so"));
    assert!(path.exists(), "{} not found: run `make redis-cell` or set REDIS_CELL_MODULE", path.display());
    path
}

/// `RATELIMIT_IMPL=library`: the limiter tests run against the Redis Functions library
/// (functions/ratelimit.lua) instead of the module: servers that would load the module load the
/// library instead, and `limiter` calls it. `make test` runs those tests both ways.
pub fn library() -> bool {
    std::env::var("RATELIMIT_IMPL").is_ok_and(|v| v == "library")
}

const LIBRARY: &str = include_str!("../../functions/ratelimit.lua");

/// A limiter command (`RATELIMIT.HIT`, `.PEEK`, `.HITALL`, `.GCRA`) for the implementation under
/// test; the caller adds the arguments after the command name. For the library it is `FCALL
/// ratelimit_hit 1` (HITALL's own numkeys comes first in its arguments, as FCALL's does).
pub fn limiter(command: &str) -> redis::Cmd {
    if !library() {
        return redis::cmd(command);
    }
    let mut cmd = redis::cmd("FCALL");
    cmd.arg(command.to_ascii_lowercase().replace('.', "_"));
    if !command.eq_ignore_ascii_case("RATELIMIT.HITALL") {
        cmd.arg(1);
    }
    cmd
}

/// Tests of what only the module does (INFO counters, COMMAND DOCS, OOM for new counters only,
/// CL.THROTTLE...) return early under `RATELIMIT_IMPL=library`, saying so.
pub fn module_only(what: &str) -> bool {
    if library() {
        eprintln!("skipped with the library (a documented difference): {what}");
    }
    library()
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
    /// Arguments for the module, after its path on the `--loadmodule` line.
    pub module_args: &'a [&'a str],
    pub dir: Option<&'a Path>,
    pub args: &'a [&'a str],
    /// A Redis Cluster node (`--cluster-enabled yes`, on a port whose bus port is free).
    pub cluster: bool,
    /// The server binary, when not `REDIS_SERVER`'s.
    pub binary: Option<&'a str>,
    /// A config file, given first (what `CONFIG REWRITE` writes to).
    pub conf: Option<&'a Path>,
}

impl Default for Config<'_> {
    fn default() -> Self {
        Config { module: true, module_args: &[], dir: None, args: &[], cluster: false, binary: None, conf: None }
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
        // A port picked free can be taken by another test before the server binds it: retry.
        for _ in 0..5 {
            let port = if config.cluster { free_cluster_port() } else { free_port() };
            let binary = config.binary.map_or_else(server_binary, str::to_string);
            let mut cmd = Command::new(&binary);
            cmd.args(config.conf);
            cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--dir", dir.to_str().unwrap(), "--logfile", "redis.log"])
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .args(["--enable-debug-command", "yes"]);
            if config.module && !library() {
                cmd.args(["--loadmodule", module_path().to_str().unwrap()]).args(config.module_args);
            }
            if config.cluster {
                cmd.args(["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"])
                    .args(["--cluster-node-timeout", "3000"]);
            }
            cmd.args(config.args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
            let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {binary}: {e}"));
            let mut server = Server { child: Some(child), port, dir: dir.clone(), keep_dir };
            if server.wait_ready() {
                // A replica gets the library through replication.
                if config.module && library() && !config.args.contains(&"--replicaof") {
                    let _: String =
                        redis::cmd("FUNCTION").arg(&["LOAD", "REPLACE", LIBRARY]).query(&mut server.connect()).unwrap();
                }
                return server;
            }
            // The next attempt starts in the same directory (the log grows with each).
            server.keep_dir = true;
            server.kill();
        }
        let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
        if !keep_dir {
            let _ = std::fs::remove_dir_all(&dir);
        }
        panic!("redis-server did not start in 5 attempts; its log:\n{log}");
    }

    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(60);
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
    wait_for("replica link", Duration::from_secs(60), || {
        info_field(&mut con, "replication", "master_link_status").as_deref() == Some("up")
    });
    (primary, replica)
}

/// Waits until the one replica of the primary at `con` has acknowledged every write so far.
pub fn wait_for_replica(con: &mut Connection) {
    // WAIT answers as soon as the replica acknowledges, or after its timeout with how many did.
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(60_000).query(con).unwrap();
    assert_eq!(acked, 1, "the replica did not acknowledge the writes");
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
    limiter("RATELIMIT.HIT").arg(key).arg(args).query(con)
}

/// `RATELIMIT.GCRA key <args...>`, reply as `[limited, capacity, remaining, retry_after_ms, full_after_ms]`.
pub fn gcra(con: &mut Connection, key: &str, args: &[&str]) -> RedisResult<Vec<i64>> {
    limiter("RATELIMIT.GCRA").arg(key).arg(args).query(con)
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

/// `MODULE LIST`, by name: `(name, version)`. Servers list their own built-in modules too (Redis 8's
/// `vectorset`, Valkey 9's `lua`).
pub fn loaded_modules(con: &mut Connection) -> Vec<(String, i64)> {
    let modules: Vec<std::collections::HashMap<String, Value>> = redis::cmd("MODULE").arg("LIST").query(con).unwrap();
    modules
        .iter()
        .map(|m| (redis::from_redis_value(&m["name"]).unwrap(), redis::from_redis_value(&m["ver"]).unwrap()))
        .collect()
}

/// One field of `INFO <section>`.
pub fn info_field(con: &mut Connection, section: &str, field: &str) -> Option<String> {
    let info: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    info.lines().find_map(|line| line.strip_prefix(field)?.strip_prefix(':')).map(|v| v.trim().to_string())
}

/// `used_memory` less the connected clients' buffers, which grow and shrink with traffic.
pub fn memory_not_in_clients(con: &mut Connection) -> i64 {
    let field = |con: &mut Connection, name| -> i64 { info_field(con, "memory", name).unwrap().parse().unwrap() };
    field(con, "used_memory") - field(con, "mem_clients_normal")
}

/// `memory_not_in_clients` once it has stopped moving for half a second. Redis keeps a pool of
/// internal clients for modules (each blocked caller takes two while it waits, each
/// `RedisModule_Call` one) and trims what goes unused within about a second, so a reading taken
/// just after a walk lands on a random pool size.
pub fn settled_memory(con: &mut Connection) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut last, mut steady_since) = (memory_not_in_clients(con), Instant::now());
    while Instant::now() < deadline && steady_since.elapsed() < Duration::from_millis(500) {
        sleep(Duration::from_millis(50));
        let now = memory_not_in_clients(con);
        if now != last {
            (last, steady_since) = (now, Instant::now());
        }
    }
    last
}

/// Runs `f` and returns its result with the milliseconds that passed, rounded up: the most that
/// the server's millisecond clock can have moved between any two of its reads inside `f`. Timing
/// assertions allow exactly this, never a guess.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, i64) {
    let started = Instant::now();
    let value = f();
    (value, ms_since(started))
}

/// The milliseconds since `started`, rounded up (see `timed`).
pub fn ms_since(started: Instant) -> i64 {
    started.elapsed().as_micros().div_ceil(1_000) as i64
}

/// `value` is in `low..=high`.
#[track_caller]
pub fn assert_within(value: i64, low: i64, high: i64, what: &str) {
    assert!((low..=high).contains(&value), "{what}: {value} is not within {low}..={high}");
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

/// How long another client's PINGs waited, sorted.
#[derive(Default)]
pub struct PingWaits(Vec<Duration>);

impl PingWaits {
    fn at(&self, p: f64) -> Duration {
        let last = self.0.len().max(1) - 1;
        self.0.get((last as f64 * p).round() as usize).copied().unwrap_or_default()
    }
    pub fn worst(&self) -> Duration {
        self.at(1.0)
    }
    pub fn p99(&self) -> Duration {
        self.at(0.99)
    }
    pub fn count(&self) -> usize {
        self.0.len()
    }
    pub fn merge(&mut self, other: PingWaits) {
        self.0.extend(other.0);
        self.0.sort_unstable();
    }
}

/// Another client PINGing `server` every `every` (back to back when zero) until stopped.
pub struct Pinger {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<Duration>>,
}

impl Pinger {
    pub fn start(server: &Server, every: Duration) -> Pinger {
        let mut con = server.connect();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut waits = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                let sent = Instant::now();
                let _: String = redis::cmd("PING").query(&mut con).unwrap();
                waits.push(sent.elapsed());
                sleep(every);
            }
            waits
        });
        Pinger { stop, thread }
    }

    pub fn stop(self) -> PingWaits {
        self.stop.store(true, Ordering::Relaxed);
        let mut waits = self.thread.join().unwrap();
        waits.sort_unstable();
        PingWaits(waits)
    }
}

/// What one AUDIT cost while another client PINGed throughout.
pub struct TimedAudit {
    pub reply: WalkReply,
    pub took: Duration,
    pub pings: PingWaits,
}

/// Runs `RATELIMIT.AUDIT args` on `con` while another connection to `server` PINGs in a loop.
pub fn audit_while_pinging(server: &Server, con: &mut Connection, args: &[&str]) -> TimedAudit {
    let pinger = Pinger::start(server, Duration::ZERO);
    let started = Instant::now();
    let reply = audit(con, args).unwrap();
    let took = started.elapsed();
    TimedAudit { reply, took, pings: pinger.stop() }
}

/// A process's threads: how many in all, and how many are the module's walkers.
pub fn threads(pid: u32) -> (usize, usize) {
    let names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .collect();
    (names.len(), names.iter().filter(|n| n.trim() == "ratelimit-walk").count())
}

/// Many AUDIT/REPAIR calls at once, timed while another client PINGed every 10 ms.
pub struct WalkStorm {
    /// In the order of the commands: the reply, or the error text.
    pub replies: Vec<Result<WalkReply, String>>,
    /// From the moment all commands were released until the last reply.
    pub took: Duration,
    pub pings: PingWaits,
    /// The most threads the server had beyond those it had before the storm (jemalloc starts
    /// background threads of its own when a thread of ours first allocates).
    pub extra_threads: usize,
    /// The most walker threads of the module's at once.
    pub walk_threads: usize,
}

/// Sends every command (`RATELIMIT.AUDIT ...` or `RATELIMIT.REPAIR ...`, split on spaces) at the
/// same moment, each on its own connection (prepared by the caller: database, user).
pub fn walk_storm(server: &Server, callers: Vec<(Connection, &str)>) -> WalkStorm {
    let pid = server.pid();
    let base_threads = threads(pid).0;
    let release = Arc::new(std::sync::Barrier::new(callers.len() + 1));
    let callers: Vec<_> = callers
        .into_iter()
        .map(|(mut con, line)| {
            // A caller waits as long as its walk takes: hundreds of walks share one thread.
            con.set_read_timeout(None).unwrap();
            let words: Vec<String> = line.split(' ').map(String::from).collect();
            let release = Arc::clone(&release);
            std::thread::spawn(move || {
                release.wait();
                let found = if words[0].eq_ignore_ascii_case("RATELIMIT.REPAIR") { "repaired" } else { "leaked" };
                let reply: RedisResult<Value> = redis::cmd(&words[0]).arg(&words[1..]).query(&mut con);
                reply.map(|v| walk_reply(v, found)).map_err(|e| error_text(&e))
            })
        })
        .collect();
    let done = Arc::new(AtomicBool::new(false));
    let sampling = Arc::clone(&done);
    let sampler = std::thread::spawn(move || {
        let (mut all, mut walkers) = (base_threads, 0);
        while !sampling.load(Ordering::Relaxed) {
            let now = threads(pid);
            (all, walkers) = (all.max(now.0), walkers.max(now.1));
            sleep(Duration::from_millis(1));
        }
        (all, walkers)
    });
    let pinger = Pinger::start(server, Duration::from_millis(10));
    release.wait();
    let started = Instant::now();
    let replies = callers.into_iter().map(|c| c.join().unwrap()).collect();
    let took = started.elapsed();
    let pings = pinger.stop();
    done.store(true, Ordering::Relaxed);
    let (all, walk_threads) = sampler.join().unwrap();
    WalkStorm { replies, took, pings, extra_threads: all - base_threads, walk_threads }
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

/// A small, seeded PRNG (xorshift64) for the fuzz tests, so that a failure can be replayed.
pub struct Rng(u64);

impl Rng {
    /// Seeded from `RATELIMIT_FUZZ_SEED` when set, else from the clock; the seed is printed.
    pub fn from_env() -> (Rng, u64) {
        let seed = std::env::var("RATELIMIT_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
        });
        eprintln!("RATELIMIT_FUZZ_SEED={seed}");
        (Rng(seed), seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
