//! The tests' servers: a real redis-server or valkey-server (`REDIS_SERVER`, default
//! `redis-server`) started on a Unix socket of its own, with the module (`RATELIMIT_MODULE`) or
//! without it (the library's backend), killed and removed when dropped.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis_ratelimit_client::{Limiter, RedisConnection};

/// Which backend a server gives the limiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Module,
    Library,
}

pub const KINDS: [Kind; 2] = [Kind::Module, Kind::Library];

pub struct Server {
    child: Child,
    dir: PathBuf,
    pub kind: Kind,
    /// The TCP port, for a cluster node or a test that needs one (0: the socket only).
    pub port: u16,
}

static STARTED: AtomicUsize = AtomicUsize::new(0);

pub fn module_path() -> String {
    std::env::var("RATELIMIT_MODULE")
        .unwrap_or_else(|_| format!("{}/../../target/release/libredis_ratelimit.so", env!("CARGO_MANIFEST_DIR")))
}

/// A free loopback port whose cluster bus port (+10000) is free too (the listeners are dropped
/// just before the server binds them).
pub fn free_port() -> u16 {
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if port < 55_000 && std::net::TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// Three primaries, no replicas, every slot assigned, each with the module or not.
pub struct Cluster {
    pub nodes: Vec<Server>,
}

impl Cluster {
    pub fn start(kind: Kind) -> Cluster {
        let nodes: Vec<Server> = (0..3)
            .map(|_| {
                Server::start_with(
                    kind,
                    free_port(),
                    &["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"],
                )
            })
            .collect();
        let mut create = Command::new("redis-cli");
        create.args(["--cluster", "create"]);
        create.args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)));
        let out = create.args(["--cluster-replicas", "0", "--cluster-yes"]).output().expect("redis-cli");
        assert!(out.status.success(), "cluster create: {}", String::from_utf8_lossy(&out.stdout));
        for node in &nodes {
            let client = redis::Client::open(node.url()).unwrap();
            let mut con = client.get_connection().unwrap();
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut con).unwrap();
                if info.contains("cluster_state:ok") {
                    break;
                }
                assert!(Instant::now() < deadline, "cluster_state never ok");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Cluster { nodes }
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| format!("redis://127.0.0.1:{}/", n.port)).collect()
    }
}

impl Server {
    pub fn start(kind: Kind) -> Server {
        Server::start_with(kind, 0, &[])
    }

    pub fn start_with(kind: Kind, port: u16, extra: &[&str]) -> Server {
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("rl-rust-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_string());
        let mut args: Vec<String> = vec![
            "--port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--unixsocket".into(),
            dir.join("s").display().to_string(),
            "--dir".into(),
            dir.display().to_string(),
            "--save".into(),
            "".into(),
            "--appendonly".into(),
            "no".into(),
        ];
        if kind == Kind::Module {
            args.extend(["--loadmodule".to_string(), module_path()]);
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Command::new(&binary)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{binary}: {e}"));
        let server = Server { child, dir, kind, port };
        // The socket's file comes with its bind, a moment before it listens: it answers when a
        // connection does.
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::os::unix::net::UnixStream::connect(server.socket()).is_err() {
            assert!(Instant::now() < deadline, "{binary} did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        server
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.join("s")
    }

    pub fn url(&self) -> String {
        format!("redis+unix://{}", self.socket().display())
    }

    pub async fn connection(&self) -> MultiplexedConnection {
        let client = redis::Client::open(self.url()).unwrap();
        client.get_multiplexed_async_connection().await.unwrap()
    }

    pub async fn limiter(&self) -> Limiter<RedisConnection<MultiplexedConnection>> {
        Limiter::new(RedisConnection::new(self.connection().await))
    }

    /// Stops the server at once (the outage tests).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A key of its own for each test.
pub fn key(name: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("rl:rust:{name}:{}", N.fetch_add(1, Ordering::Relaxed))
}
