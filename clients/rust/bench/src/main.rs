//! `make bench`'s Rust rows: the crate's tower layer against tower-rate-limit-redis (GCRA in Lua)
//! and tower-rate-limiter's Redis store (a fixed window in MULTI), and its hot limit.
//!
//!     ratelimit-rust-bench --module MODULE --out FILE [--quick] SERVER...
//!
//! Server CPU per decision: each decision is a request through an axum router with the layer (as
//! each library's own API makes it), 50 identities at 100 a minute (most decisions past the first
//! are denials, as under a flood), 50 in flight on one multiplexed connection (its commands
//! pipelined, as many application processes would load a server); the figure is the server
//! process's CPU clock over the decisions. Repetitions interleave the contenders; medians.
//! Requests a second: the same routers served over HTTP on loopback, every request admitted.
//! The hot limit: 8 processes taking from one key's HotLimit for a few seconds, under a limit no
//! demand reaches; decisions a second and the server's commands per 1,000 decisions.
//! --quick is the smoke run `make test` makes so that this cannot rot.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use redis_ratelimit_client::layer::{ClientIp, RateLimitLayer, Rule};
use redis_ratelimit_client::{Fixed, HotOptions, Limiter, Rate, RedisConnection};
use tower::ServiceExt;

const IDENTITIES: usize = 50;
const MINUTE: Duration = Duration::from_secs(60);
/// The bound on the layer's server CPU per decision, as a multiple of each peer's.
const CPU_TARGET: f64 = 0.5;
/// The hot limit's: decisions a second from 8 processes, and server commands per 1,000.
const HOT_TARGET: f64 = 10_000_000.0;
const HOT_PROCESSES: usize = 8;

struct Server {
    child: Child,
    port: u16,
    version: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(binary: &str, module: &str) -> Server {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(binary)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .args(["--loadmodule", module])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{binary}: {e}"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{binary} did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut server = Server { child, port, version: String::new() };
    let info = redis_info(&server, "server");
    let name = if info.contains("valkey_version") { "Valkey" } else { "Redis" };
    let field = if name == "Valkey" { "valkey_version" } else { "redis_version" };
    server.version = format!("{name} {}", info_field(&info, field));
    server
}

fn redis_info(server: &Server, section: &str) -> String {
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).unwrap();
    let mut con = client.get_connection().unwrap();
    redis::cmd("INFO").arg(section).query(&mut con).unwrap()
}

fn info_field(info: &str, name: &str) -> String {
    info.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).unwrap_or_default().trim().to_string()
}

/// The server process's CPU time in ns (its CPUCLOCK_SCHED clock: every thread's).
fn cpu_ns(pid: u32) -> u64 {
    let clock = ((!(pid as libc::clockid_t)) << 3) | 2;
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec, which `ts` is.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "no CPU clock for process {pid}");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The routers each contender makes (a route `/`, the limit on it): one per identity's key.
async fn router(server: &Server, contender: &str, limit: u64) -> Router {
    let url = format!("redis://127.0.0.1:{}/", server.port);
    let app = Router::new().route("/", get(|| async { "ok" }));
    match contender {
        "ours, fixed window" | "ours, GCRA" => {
            let client = redis::Client::open(url).unwrap();
            let limiter = Limiter::new(RedisConnection::new(client.get_multiplexed_async_connection().await.unwrap()));
            let rule = if contender.ends_with("GCRA") {
                Rule::gcra(Rate::new(limit - 1, limit, MINUTE))
            } else {
                Rule::fixed(limit, MINUTE)
            };
            app.layer(RateLimitLayer::new(limiter).key(ClientIp::new()).rule(rule))
        }
        "tower-rate-limiter (MULTI)" => {
            let client = redis::Client::open(url).unwrap();
            let store = tower_rate_limiter::RedisStore::new(client.get_multiplexed_async_connection().await.unwrap());
            let layer = tower_rate_limiter::RateLimitLayer::builder(PeerIp)
                .limit(limit)
                .window(MINUTE)
                .with_store(store)
                .build()
                .unwrap();
            app.layer(layer)
        }
        "tower-rate-limit-redis (Lua)" => {
            let client = redis032::Client::open(url).unwrap();
            let conn = client.get_multiplexed_async_connection().await.unwrap();
            let layer = tower_rate_limit_redis::RateLimitLayer::builder()
                .conn(conn)
                .key_resolver(PeerIp)
                .capacity(limit.min(u16::MAX as u64) as u16)
                .emission_interval((MINUTE / limit as u32).max(Duration::from_millis(1)))
                .build();
            app.layer(layer)
        }
        other => panic!("no contender {other}"),
    }
}

/// The peers' keys: the peer's address, from axum's ConnectInfo (tower-rate-limiter's own reads
/// it only with its axum feature, which would turn on axum's default features for every build of
/// the workspace).
#[derive(Clone)]
struct PeerIp;

fn peer(extensions: &http::Extensions) -> String {
    extensions.get::<ConnectInfo<SocketAddr>>().map_or_else(|| "unknown".to_string(), |c| c.0.ip().to_string())
}

impl tower_rate_limiter::KeyExtractor for PeerIp {
    type Key = String;

    fn extract<T>(&self, request: &http::Request<T>) -> Result<String, tower_rate_limiter::RateLimitError> {
        Ok(peer(request.extensions()))
    }
}

impl tower_rate_limit_redis::KeyResolver for PeerIp {
    type Key = String;
    type ErrorBody = Body;

    fn key<T>(&self, req: &http::Request<T>) -> Result<String, http::Response<Body>> {
        Ok(format!("rl:{}", peer(req.extensions())))
    }
}

fn identity(i: usize) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, (i / 250) as u8, (i % 250) as u8 + 1)), 40_000)
}

/// A request from identity `i` (its peer address as axum's ConnectInfo).
fn request_from(i: usize) -> http::Request<Body> {
    http::Request::get("/").extension(ConnectInfo(identity(i))).body(Body::empty()).unwrap()
}

/// The server's CPU per decision (µs) for `decisions` through the contender's layer.
async fn server_cpu(server: &Server, contender: &str, decisions: usize) -> f64 {
    let _: () = {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).unwrap();
        let mut con = client.get_multiplexed_async_connection().await.unwrap();
        redis::cmd("FLUSHALL").query_async(&mut con).await.unwrap()
    };
    let app = router(server, contender, 100).await;
    // One decision first: connections made, scripts loaded.
    app.clone().oneshot(request_from(IDENTITIES)).await.unwrap();
    let pid = server.child.id();
    let before = cpu_ns(pid);
    let mut tasks = Vec::new();
    for i in 0..IDENTITIES {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..decisions / IDENTITIES {
                let response = app.clone().oneshot(request_from(i)).await.unwrap();
                assert!(response.status() == 200 || response.status() == 429, "{}", response.status());
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    (cpu_ns(pid) - before) as f64 / 1000.0 / (decisions / IDENTITIES * IDENTITIES) as f64
}

/// Requests a second through the contender's router served over HTTP, every one admitted.
async fn requests_per_second(server: &Server, contender: &str, requests: usize) -> f64 {
    // tower-rate-limit-redis's capacity is a u16.
    let limit = if contender.contains("Lua") { u64::from(u16::MAX) } else { 1 << 40 };
    let app = router(server, contender, limit).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serving = tokio::spawn(async move {
        axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await.unwrap();
    });
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let uri: hyper::Uri = format!("http://{addr}/").parse().unwrap();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let (client, uri) = (client.clone(), uri.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..requests / 32 {
                let response = client.get(uri.clone()).await.unwrap();
                assert_eq!(response.status(), 200);
                response.into_body().collect().await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let rate = (requests / 32 * 32) as f64 / started.elapsed().as_secs_f64();
    serving.abort();
    rate
}

/// One process of the hot run: takes for `seconds`, prints how many were admitted.
fn hot_worker(url: &str, key: &str, seconds: f64) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let client = redis::Client::open(url).unwrap();
        let limiter = Limiter::new(RedisConnection::new(client.get_multiplexed_async_connection().await.unwrap()));
        let hot = limiter.hot(key, &Fixed::new(1 << 50, Duration::from_secs(1)).aligned(), HotOptions::default());
        let deadline = Instant::now() + Duration::from_secs_f64(seconds);
        let mut admitted = 0u64;
        'run: loop {
            for _ in 0..4096 {
                if hot.take(1).await.unwrap() {
                    admitted += 1;
                }
            }
            if Instant::now() >= deadline {
                break 'run;
            }
        }
        hot.close().await.unwrap();
        println!("{admitted}");
    });
}

/// The hot run: decisions a second from 8 processes, and the server's commands per 1,000.
fn hot(server: &Server, seconds: f64) -> (f64, f64) {
    let url = format!("redis://127.0.0.1:{}/", server.port);
    let commands = |s: &Server| info_field(&redis_info(s, "stats"), "total_commands_processed").parse::<f64>().unwrap();
    let before = commands(server);
    let me = std::env::current_exe().unwrap();
    let started = Instant::now();
    let workers: Vec<Child> = (0..HOT_PROCESSES)
        .map(|_| {
            Command::new(&me)
                .args(["hot-worker", &url, "rl:bench:hot", &seconds.to_string()])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut decisions = 0f64;
    for worker in workers {
        let out = worker.wait_with_output().unwrap();
        decisions += String::from_utf8_lossy(&out.stdout).trim().parse::<f64>().unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    // The INFO calls themselves aside.
    let sent = commands(server) - before - 1.0;
    (decisions / elapsed, sent / decisions * 1000.0)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("hot-worker") {
        return tokio::task::spawn_blocking(move || hot_worker(&args[1], &args[2], args[3].parse().unwrap()))
            .await
            .unwrap();
    }
    let (mut module, mut out, mut quick, mut servers) = (None, None, false, Vec::new());
    let mut words = args.into_iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "--module" => module = words.next(),
            "--out" => out = words.next(),
            "--quick" => quick = true,
            _ => servers.push(word),
        }
    }
    let (module, out) = (module.expect("--module"), out.expect("--out"));
    let (decisions, repetitions, requests, seconds) = if quick { (500, 1, 320, 0.5) } else { (20_000, 3, 20_000, 4.0) };
    let groups = [
        ("fixed window", "tower-rate-limiter (MULTI)", "ours, fixed window"),
        ("GCRA", "tower-rate-limit-redis (Lua)", "ours, GCRA"),
    ];
    let mut report =
        String::from("# The Rust crate's tower layer against tower-rate-limit-redis and tower-rate-limiter\n\n");
    report += &format!(
        "Measured by `make bench` (clients/rust/bench): tower-rate-limit-redis 1.0.2 (redis-rs 0.32), tower-rate-limiter 0.1.6 (its Redis store, redis-rs 1), this crate over redis-rs 1; {decisions} decisions a run through each layer on an axum router, {IDENTITIES} identities at 100 a minute, {IDENTITIES} in flight on one multiplexed connection, {repetitions} repetitions interleaved, medians. Server CPU is the server process's CPU clock.\n\n"
    );
    report +=
        "| server | limiter | layer | server CPU µs/decision | × the peer's |\n| --- | --- | --- | ---: | ---: |\n";
    let mut met = true;
    let mut first = None;
    for binary in &servers {
        let server = start(binary, &module);
        eprintln!("== {} ==", server.version);
        for (limiter, peer, ours) in groups {
            let (mut theirs, mut mine) = (Vec::new(), Vec::new());
            for _ in 0..repetitions {
                theirs.push(server_cpu(&server, peer, decisions).await);
                mine.push(server_cpu(&server, ours, decisions).await);
            }
            let (theirs, mine) = (median(theirs), median(mine));
            met &= mine <= CPU_TARGET * theirs;
            for (label, cpu) in [(peer, theirs), (ours, mine)] {
                let row = format!("| {} | {limiter} | {label} | {cpu:.2} | {:.2} |\n", server.version, cpu / theirs);
                eprint!("{row}");
                report += &row;
            }
        }
        first.get_or_insert(server);
    }
    let server = first.expect("a server");
    report += &format!(
        "\nTarget: at most {CPU_TARGET}x each peer's server CPU per decision: {}.\n\n## Requests a second through an axum app\n\n{} on {}: the routers above served on loopback, {requests} requests from 32 connections, every one admitted. tower-rate-limit-redis calls the handler while its check is in flight (a request it denies has run the handler all the same); the others call it once admitted.\n\n| layer | requests/s |\n| --- | ---: |\n",
        if met { "met" } else { "NOT met" },
        "The same machine",
        server.version
    );
    for contender in ["tower-rate-limiter (MULTI)", "ours, fixed window", "tower-rate-limit-redis (Lua)", "ours, GCRA"]
    {
        let rate = requests_per_second(&server, contender, requests).await;
        let row = format!("| {contender} | {rate:.0} |\n");
        eprint!("{row}");
        report += &row;
    }
    let (rate, commands) = tokio::task::spawn_blocking(move || {
        let result = hot(&server, seconds);
        drop(server);
        result
    })
    .await
    .unwrap();
    let hot_met = rate >= HOT_TARGET && commands <= 1.0;
    report += &format!(
        "\n## The hot limit\n\n{HOT_PROCESSES} processes, each one task taking from its HotLimit on one key (1 s windows laid on the clock, a limit no demand reaches), {seconds} s.\n\n| decisions/s | server commands per 1,000 decisions |\n| ---: | ---: |\n| {rate:.0} | {commands:.3} |\n\nTarget: {HOT_TARGET:.0} decisions/s or more at 1 server command per 1,000 decisions or fewer: {}.\n",
        if hot_met { "met" } else { "NOT met" }
    );
    eprintln!("hot: {rate:.0} decisions/s, {commands:.3} commands per 1,000");
    std::fs::write(&out, report).unwrap();
}
