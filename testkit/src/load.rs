//! Load and latency: other clients PINGing while walks run, many walks at once, the client-side
//! audit to compare with, a server's threads, CPU and memory.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{sleep, JoinHandle};
use std::time::{Duration, Instant};

use redis::{Connection, RedisResult, Value};

use crate::commands::{audit, error_text, info_field, walk_reply, WalkReply};
use crate::servers::Server;

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
    // A walk of a million keys takes past the connection's 30 s on a busy machine: the reply is
    // waited for as long as it takes (what is bounded is the PINGs' wait).
    con.set_read_timeout(None).unwrap();
    let reply = audit(con, args).unwrap();
    con.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
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

/// The CPU time a process has run so far, in nanoseconds: the kernel's CPU clock for the whole
/// process, which keeps the time of threads that have ended (the module's walker ends with its
/// last walk: summing the live threads' schedstat lost its time, and went backwards when it
/// ended between two reads). `/proc/PID/stat`'s user and system times count 10 ms ticks, too
/// coarse for the few % the on/off rows compare.
pub fn cpu_time(pid: u32) -> Duration {
    let mut clock: libc::clockid_t = 0;
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: both calls write only through the pointers given, to locals of the types they take.
    let read = unsafe {
        libc::clock_getcpuclockid(pid as libc::pid_t, &mut clock) == 0 && libc::clock_gettime(clock, &mut now) == 0
    };
    assert!(read, "no CPU clock for process {pid}");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}
