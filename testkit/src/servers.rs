//! Real servers on free loopback ports, with the built module loaded (or not, or the Functions
//! library instead), each killed and its directory removed on drop, also when a test fails.
//!
//! `REDIS_SERVER` picks the server binary (default `redis-server` on PATH); `RATELIMIT_MODULE`
//! overrides the module path (default: the cdylib cargo built next to the test binary).

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant};

use redis::{Connection, RedisResult};

use crate::checks::wait_for;
use crate::clock::{clock_library, TestClock};
use crate::commands::info_field;
use crate::library::{library, load_library};

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
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/redis-cell/libredis_cell.so"));
    assert!(path.exists(), "{} not found: run `make redis-cell` or set REDIS_CELL_MODULE", path.display());
    path
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
    /// The wall clock the server reads, when not the real one.
    pub clock: Option<&'a TestClock>,
}

impl Default for Config<'_> {
    fn default() -> Self {
        Config {
            module: true,
            module_args: &[],
            dir: None,
            args: &[],
            cluster: false,
            binary: None,
            conf: None,
            clock: None,
        }
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
                // No test relies on a node being detected as failed (the failover test asks for
                // one): long enough that a node starved of CPU on a busy machine is never failed
                // over in the middle of a test, losing what its replica had not yet received.
                cmd.args(["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"])
                    .args(["--cluster-node-timeout", "20000"]);
            }
            if let Some(clock) = config.clock {
                cmd.env("LD_PRELOAD", clock_library()).env("RATELIMIT_TEST_CLOCK", &clock.file);
            }
            cmd.args(config.args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
            let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {binary}: {e}"));
            let mut server = Server { child: Some(child), port, dir: dir.clone(), keep_dir };
            if server.wait_ready() {
                // A replica gets the library through replication.
                if config.module && library() && !config.args.contains(&"--replicaof") {
                    load_library(&mut server.connect());
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
                // While an AOF or RDB loads, the server answers LOADING; wait for PONG. And from
                // our own server: one another test started on the same port (picked free by both)
                // answers too, while ours is failing to bind it.
                if redis::cmd("PING").query::<String>(&mut con).is_ok()
                    && info_field(&mut con, "server", "process_id") == Some(self.pid().to_string())
                {
                    return true;
                }
            }
            sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn try_connect(&self) -> RedisResult<Connection> {
        let client = redis::Client::open(self.url())?;
        let con = client.get_connection_with_timeout(Duration::from_secs(5))?;
        con.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(con)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A connection; one the OS refuses for a moment (a busy machine's `EAGAIN` on connect, no
    /// local port free) is tried again for up to 10 s.
    pub fn connect(&self) -> Connection {
        retried(|| self.try_connect()).expect("connect to test server")
    }

    /// A plain TCP connection to the server, tried again as `connect` is.
    pub fn connect_raw(&self) -> TcpStream {
        retried(|| TcpStream::connect(("127.0.0.1", self.port))).expect("connect to test server")
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

impl Default for TempDir {
    fn default() -> TempDir {
        TempDir(new_dir())
    }
}

impl TempDir {
    pub fn new() -> TempDir {
        TempDir::default()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `connect`'s result, tried again every 100 ms for up to 10 s while it fails: a refusal that lasts
/// is the server's, and is returned.
fn retried<T, E>(mut connect: impl FnMut() -> Result<T, E>) -> Result<T, E> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match connect() {
            Err(_) if Instant::now() < deadline => sleep(Duration::from_millis(100)),
            result => return result,
        }
    }
}
