//! `make bench`: RATELIMIT.HIT and RATELIMIT.AUDIT against INCR and every alternative, measured
//! in one run against one redis-server with one load generator. `--quick` is a short smoke run
//! (`make test` runs it so this cannot rot); it writes under target/ instead of benches/results/.

mod loadgen;
mod report;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{
    audit_while_pinging, client_side_audit, cpu_time, info_field, redis_cell_module, walk_storm, Config, PingWaits,
    Server,
};
use loadgen::{Contender, Load, Setup, ALL};
use ratelimit_testkit as common;
use redis::Connection;

struct Plan {
    reps: usize,
    /// One run of a contender, pipelined and unpipelined.
    duration: Duration,
    unpipelined: Duration,
    /// The on/off rows: pairs run back to back, each run this long.
    on_off_pairs: usize,
    on_off_duration: Duration,
    keyspace: u64,
    connections: usize,
    counters_for_memory: u64,
    audit_keys: u64,
    walk_keys: u64,
    /// Each row of the concurrent-walks table repeats its batch until this many PINGs were timed,
    /// so that rows compare worst waits over similar sample counts.
    walk_pings: usize,
    /// Denied decisions on distinct keys for RATELIMIT.TOP's memory.
    top_decisions: u64,
    out_dir: PathBuf,
}

/// One contender's medians over the repetitions, at one pipeline depth.
pub struct Row {
    pub contender: Contender,
    pub ops_per_s: f64,
    pub cpu_us_per_op: f64,
    pub p50_us: u32,
    pub p99_us: u32,
}

pub struct MemoryRow {
    pub what: &'static str,
    pub bytes_per_counter: f64,
}

pub struct AuditResult {
    pub keys: u64,
    pub leaked: u64,
    pub audit: Duration,
    pub client_side: Duration,
    pub worst_ping: Duration,
    pub pings: usize,
    /// Server CPU seconds of the AUDIT, of the client-side SCAN + TTL audit, and of a bare
    /// client-side `SCAN COUNT 1000` walk over the same keys.
    pub audit_cpu_s: f64,
    pub client_side_cpu_s: f64,
    pub scan_cpu_s: f64,
}

/// A batch of AUDITs sent at once, repeated until enough PINGs were timed.
pub struct WalksRow {
    pub walks: usize,
    pub batches: usize,
    /// The most threads the server had beyond its own during a batch, and of them the module's.
    pub extra_threads: usize,
    pub walk_threads: usize,
    pub pings: PingWaits,
    /// The median wall time of one batch, from release to the last reply.
    pub batch: Duration,
}

/// The throughput tables of one server.
pub struct ServerRun {
    pub name: String,
    pub pipelined: Vec<Row>,
    pub unpipelined: Vec<Row>,
}

/// One contender on a server with a feature off and on one with it on (the guard, RATELIMIT.TOP,
/// shadow mode), or beside another (`off`'s contender: HIT beside a window laid on the clock).
pub struct OnOffRow {
    pub contender: Contender,
    pub off: Row,
    pub on: Row,
    /// Medians of the on/off ratios of runs made back to back.
    pub ops_ratio: f64,
    pub cpu_ratio: f64,
}

pub struct Results {
    /// Redis first, then Valkey when `VALKEY_SERVER` names its binary.
    pub servers: Vec<ServerRun>,
    pub guard: Vec<OnOffRow>,
    /// RATELIMIT.TOP's tracking off (`ratelimit.top-keys 0`) and on (the default), per server.
    pub top_cost: Vec<(String, Vec<OnOffRow>)>,
    /// HIT (off) against HIT with its window laid on the clock (on), per server.
    pub laid_on_clock: Vec<(String, Vec<OnOffRow>)>,
    /// Shadow mode off (`ratelimit.shadow` empty) and on (naming the rows' prefixes), per server.
    pub shadow: Vec<(String, Vec<OnOffRow>)>,
    /// `ratelimit_top_memory_bytes` every million denied decisions on distinct keys.
    pub top_memory: Vec<(u64, i64)>,
    pub memory: Vec<MemoryRow>,
    pub audit: AuditResult,
    pub walks: Vec<WalksRow>,
    pub walk_keys: u64,
    pub pipeline: usize,
    pub connections: usize,
    pub keyspace: u64,
    pub reps: usize,
    /// A run's length in ms: pipelined, unpipelined, and each run of an on/off pair.
    pub run_ms: [u64; 3],
    pub on_off_pairs: usize,
}

const PIPELINE: usize = 16;

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut plan = if quick {
        // The smallest run that still executes every section's code.
        Plan {
            reps: 1,
            duration: Duration::from_millis(50),
            unpipelined: Duration::from_millis(50),
            on_off_pairs: 1,
            on_off_duration: Duration::from_millis(50),
            keyspace: 10_000,
            connections: 10,
            counters_for_memory: 10_000,
            audit_keys: 20_000,
            walk_keys: 2_000,
            walk_pings: 20,
            top_decisions: 200_000,
            out_dir: root.join("target/bench-quick"),
        }
    } else {
        // Sized so that the whole `make bench` (this and the clients' benches) takes at most 20
        // minutes for the four servers: server CPU per call is counted, not sampled, so a short
        // run measures it; what the shorter runs cost in precision, the report says.
        Plan {
            reps: 3,
            duration: Duration::from_millis(600),
            unpipelined: Duration::from_millis(300),
            on_off_pairs: 6,
            on_off_duration: Duration::from_millis(300),
            keyspace: 100_000,
            connections: 50,
            counters_for_memory: 100_000,
            audit_keys: 1_000_000,
            walk_keys: 200_000,
            walk_pings: 1_000,
            top_decisions: 10_000_000,
            out_dir: root.join("benches/results"),
        }
    };
    // The servers to measure, in order; the first also gets the memory, audit and guard sections.
    let binaries = std::env::var("BENCH_SERVERS").unwrap_or_default();
    let mut binaries: Vec<&str> = binaries.split_whitespace().collect();
    if binaries.is_empty() {
        eprintln!("BENCH_SERVERS is not set: the redis-server on PATH only (make bench sets it)");
        binaries.push("redis-server");
    }
    let cell = redis_cell_module();
    let cell_line = ["--loadmodule", cell.to_str().unwrap()];
    if std::env::var("BENCH_ONLY").is_ok() && !quick {
        // A few rows alone can afford the runs the whole bench cannot: the steadier figures a
        // change of a few % needs.
        plan = Plan {
            reps: 5,
            duration: Duration::from_secs(2),
            on_off_pairs: 20,
            on_off_duration: Duration::from_secs(1),
            ..plan
        };
    }
    match std::env::var("BENCH_ONLY").as_deref() {
        Ok("TopCost") => return on_off_only(&binaries, &plan, tracking_cost),
        Ok("LaidOnClock") => return on_off_only(&binaries, &plan, laid_on_clock_cost),
        Ok("Shadow") => return on_off_only(&binaries, &plan, shadow_cost),
        Ok(only) => return compare_only(only, &binaries, &cell_line, &plan),
        Err(_) => {}
    }
    let mut servers = Vec::new();
    for binary in binaries.iter().copied() {
        let server = Server::with(Config { binary: Some(binary), args: &cell_line, ..Config::default() });
        let mut con = server.connect();
        let setup = prepare(&mut con);
        let name = report::server_name(&mut con);
        let pipelined = throughput(&server, &format!("{name}, pipelined {PIPELINE}"), &setup, &plan, PIPELINE);
        let unpipelined = throughput(&server, &format!("{name}, unpipelined"), &setup, &plan, 1);
        servers.push(ServerRun { name, pipelined, unpipelined });
    }

    let guard = guard_overhead(binaries[0], &plan);
    let top_cost = binaries.iter().map(|binary| tracking_cost(binary, &plan)).collect();
    let (mut laid_on_clock, mut shadow) = (Vec::new(), Vec::new());
    for binary in binaries.iter().copied() {
        laid_on_clock.push(laid_on_clock_cost(binary, &plan));
        shadow.push(shadow_cost(binary, &plan));
    }
    progress(&format!("RATELIMIT.TOP's memory over {} decisions", plan.top_decisions));
    let top_memory = tracking_memory(binaries[0], &plan);

    let server = Server::with(Config { binary: Some(binaries[0]), ..Config::default() });
    let mut con = server.connect();
    let setup = prepare(&mut con);
    progress("memory per counter");
    let memory = memory(&server, &setup, &plan);
    progress(&format!("audit over {} keys", plan.audit_keys));
    let audit = audit_vs_client(&server, &plan);
    progress(&format!("concurrent AUDITs over {} keys", plan.walk_keys));
    let walks = concurrent_walks(&server, &plan);

    let results = Results {
        servers,
        guard,
        top_cost,
        laid_on_clock,
        shadow,
        top_memory,
        memory,
        audit,
        walks,
        walk_keys: plan.walk_keys,
        pipeline: PIPELINE,
        connections: plan.connections,
        keyspace: plan.keyspace,
        reps: plan.reps,
        run_ms: [plan.duration, plan.unpipelined, plan.on_off_duration].map(|d| d.as_millis() as u64),
        on_off_pairs: plan.on_off_pairs,
    };
    let machine = report::machine();
    let markdown = report::markdown(&results, &machine);
    if quick {
        println!("benchmark smoke run passed; report in {}", plan.out_dir.display());
    } else {
        println!("{markdown}");
    }
    std::fs::create_dir_all(&plan.out_dir).unwrap();
    std::fs::write(plan.out_dir.join("latest.md"), &markdown).unwrap();
    std::fs::write(plan.out_dir.join("ratios.svg"), report::svg(&results, &machine)).unwrap();
    progress(&format!("written to {}", plan.out_dir.display()));
}

/// A line on stderr for each row as it runs, with the time since the bench began: which row, on
/// which server, how far.
fn progress(what: &str) {
    static STARTED: OnceLock<Instant> = OnceLock::new();
    let elapsed = STARTED.get_or_init(Instant::now).elapsed().as_secs();
    eprintln!("bench [{:02}:{:02}] {what}", elapsed / 60, elapsed % 60);
}

/// The two-key approximate sliding window, in the shape upstash's slidingWindow and limits'
/// sliding window counter use (written here): KEYS = the current and the previous window's
/// counters, ARGV = limit, now (ms), window (ms).
const TWO_KEY_SLIDING_WINDOW: &str = "
local limit, now, window = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local curr = tonumber(redis.call('GET', KEYS[1]) or '0')
local prev = tonumber(redis.call('GET', KEYS[2]) or '0')
local weighted = math.floor(prev * (1 - (now % window) / window))
if weighted + curr >= limit then return -1 end
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], window * 2 + 1000) end
return limit - (n + weighted)";

/// A sliding log (written here): a ZSET of call times per key; ARGV = limit, window (ms).
const SLIDING_LOG: &str = "
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now, t[1] .. t[2] .. math.random())
redis.call('PEXPIRE', KEYS[1], window)
return 1";

/// A sorted-set semaphore (written here, in the shape of other libraries' scripts): ARGV = limit,
/// lease (ms), id; and its release.
const SEMAPHORE_ACQUIRE: &str = "
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + lease, ARGV[3])
redis.call('PEXPIRE', KEYS[1], lease)
return 1";
const SEMAPHORE_RELEASE: &str = "return redis.call('ZREM', KEYS[1], ARGV[1])";

/// A minimal fixed window in the shape of express's rate-limit-redis store (written here): ARGV =
/// cost, window (ms); replies the count and the ms until the window ends.
const EXPRESS_SHAPE: &str = "
local count = redis.call('INCRBY', KEYS[1], ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  ttl = tonumber(ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return { count, ttl }";

/// A read-only look at a fixed window (written here): ARGV = limit; would a hit fit, the count, the
/// ms until the window ends.
const PEEK_SHAPE: &str = "
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
local ttl = redis.call('PTTL', KEYS[1])
return { count + 1 <= tonumber(ARGV[1]) and 1 or 0, count, ttl }";

/// Several fixed windows on one identity, all or nothing (written here): KEYS = counters, ARGV =
/// a limit and a window (s) per key; every counter checked, then each INCR + EXPIRE NX.
const HITALL_SHAPE: &str = "
for i, key in ipairs(KEYS) do
  if tonumber(redis.call('GET', key) or '0') + 1 > tonumber(ARGV[2 * i - 1]) then return 0 end
end
for i, key in ipairs(KEYS) do
  redis.call('INCR', key)
  redis.call('EXPIRE', key, ARGV[2 * i], 'NX')
end
return 1";

/// HITALL_SHAPE answering what `ratelimit_hitall` answers (admitted, then each counter's count,
/// remaining and ms to its reset; written here): every counter read first, then each INCR and
/// PTTL, and PEXPIRE for a new one: six calls for two limits, as many as the library's.
const HITALL_SHAPE_ANSWERING: &str = "
local admitted, counts, reply = 1, {}, {}
for i, key in ipairs(KEYS) do
  counts[i] = tonumber(redis.call('GET', key) or '0')
  if counts[i] + 1 > tonumber(ARGV[2 * i - 1]) then admitted = 0 end
end
reply[1] = admitted
for i, key in ipairs(KEYS) do
  local n = admitted == 1 and redis.call('INCR', key) or counts[i]
  local ttl = redis.call('PTTL', key)
  if ttl == -1 then
    ttl = ARGV[2 * i] * 1000
    redis.call('PEXPIRE', key, ttl)
  end
  reply[i + 1] = { n, math.max(ARGV[2 * i - 1] - n, 0), math.max(ttl, 0) }
end
return reply";

/// `script` with its `return`s replaced (each `from` found exactly once): the same calls,
/// answering the fields the library's function answers.
fn answering(script: &str, returns: &[(&str, &str)]) -> String {
    returns.iter().fold(script.to_string(), |s, (from, to)| {
        assert_eq!(s.matches(from).count(), 1, "{from:?} is not in the script exactly once");
        s.replace(from, to)
    })
}

/// GCRA in the shape of go-redis/redis_rate's allowN (written here): ARGV = burst, rate, period
/// (s), cost; the TAT kept as float seconds since 2017; replies allowed, remaining, retry after
/// and reset after (s, as text).
const REDIS_RATE_SHAPE: &str = "
local burst, rate, period, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local interval = period / rate
local t = redis.call('TIME')
local now = (t[1] - 1483228800) + t[2] / 1000000
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new_tat = tat + interval * cost
local diff = now - (new_tat - interval * burst)
if diff < 0 then
  return { 0, 0, tostring(-diff), tostring(tat - now) }
end
local reset = new_tat - now
redis.call('SET', KEYS[1], new_tat, 'EX', math.ceil(reset))
return { cost, math.floor(diff / interval), '-1', tostring(reset) }";

/// Loads the Lua scripts and the function that the EVALSHA and FCALL contenders call.
/// The Settle row's reservations, one per key of a run's keyspace: a cost of 1,000 reserved in
/// an hour's window, against a limit of 50,000 (a tokens-per-window budget; a settle never denies,
/// so the limit only shapes the reservation's text and the reply).
fn reservations(con: &mut Connection, keyspace: u64) -> Vec<Vec<u8>> {
    let mut all = Vec::with_capacity(keyspace as usize);
    for start in (0..keyspace).step_by(10_000) {
        let mut pipe = redis::pipe();
        for i in start..(start + 10_000).min(keyspace) {
            let key = format!("{}{i}", loadgen::SETTLE_PREFIX);
            pipe.cmd("RATELIMIT.HIT").arg(key).arg(50_000).arg(3600).arg("COST").arg(1000).arg("RESERVE");
        }
        let replies: Vec<(i64, i64, i64, i64, Vec<u8>)> = pipe.query(con).unwrap();
        all.extend(replies.into_iter().map(|r| r.4));
    }
    all
}

fn prepare(con: &mut Connection) -> Setup {
    let body = "local c = redis.call('INCR', KEYS[1]) redis.call('EXPIRE', KEYS[1], ARGV[1], 'NX') return c";
    let script_sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(body).query(con).unwrap();
    let library = format!(
        "#!lua name=ratelimit_bench\nredis.register_function('ratelimit_bench_hit', function(KEYS, ARGV) {body} end)"
    );
    let _: String = redis::cmd("FUNCTION").arg("LOAD").arg("REPLACE").arg(library).query(con).unwrap();
    common::load_library(con);
    let load =
        |con: &mut Connection, body: &str| -> String { redis::cmd("SCRIPT").arg("LOAD").arg(body).query(con).unwrap() };
    Setup {
        script_sha,
        two_key_sha: load(con, TWO_KEY_SLIDING_WINDOW),
        log_sha: load(con, SLIDING_LOG),
        semaphore_acquire_sha: load(con, SEMAPHORE_ACQUIRE),
        semaphore_release_sha: load(con, SEMAPHORE_RELEASE),
        express_sha: load(con, EXPRESS_SHAPE),
        peek_sha: load(con, PEEK_SHAPE),
        hitall_sha: load(con, HITALL_SHAPE),
        hitall_answering_sha: load(con, HITALL_SHAPE_ANSWERING),
        // SLIDE's five integers: allowed, count, remaining, retry after (-1 when admitted), reset.
        two_key_answering_sha: load(
            con,
            &answering(
                TWO_KEY_SLIDING_WINDOW,
                &[
                    ("return -1", "return { 0, weighted + curr, 0, window - now % window, window - now % window }"),
                    (
                        "return limit - (n + weighted)",
                        "return { 1, n + weighted, limit - (n + weighted), -1, window - now % window }",
                    ),
                ],
            ),
        ),
        // ACQUIRE's five: acquired, in use, remaining, ms, the id (nil when denied).
        semaphore_acquire_answering_sha: load(
            con,
            &answering(
                SEMAPHORE_ACQUIRE,
                &[
                    (
                        "if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end",
                        "local n = redis.call('ZCARD', KEYS[1])\nif n >= tonumber(ARGV[1]) then return { 0, n, 0, 0, false } end",
                    ),
                    ("return 1", "return { 1, n + 1, ARGV[1] - n - 1, lease, ARGV[3] }"),
                ],
            ),
        ),
        redis_rate_sha: load(con, REDIS_RATE_SHAPE),
        function: "ratelimit_bench_hit".into(),
        window_s: "60",
        hit_limit: "1000000000",
        reservations: reservations(con, 100_000),
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

fn percentile(sorted: &[u32], p: f64) -> u32 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Every contender once per repetition, interleaved (A, B, C, then again), medians reported.
/// `BENCH_ONLY=Hit,Slide`: those contenders alone (names as in `Contender`'s Debug), pipelined,
/// on each server, as a table on stdout and nothing written: the loop while working on one command.
fn compare_only(only: &str, binaries: &[&str], cell_line: &[&str], plan: &Plan) {
    let picked: Vec<Contender> =
        ALL.into_iter().filter(|c| only.split(',').any(|n| n.trim() == format!("{c:?}"))).collect();
    assert!(!picked.is_empty(), "BENCH_ONLY names none of {:?}", ALL);
    for binary in binaries.iter().copied() {
        let server = Server::with(Config { binary: Some(binary), args: cell_line, ..Config::default() });
        let mut con = server.connect();
        let setup = prepare(&mut con);
        let name = report::server_name(&mut con);
        println!("{name}");
        for row in interleaved(&server, &name, &picked, &setup, plan, PIPELINE, plan.duration) {
            println!(
                "  {:<24} {:>9.0} ops/s {:>7.2} µs CPU/op",
                format!("{:?}", row.contender),
                row.ops_per_s,
                row.cpu_us_per_op
            );
        }
    }
}

/// `BENCH_ONLY=TopCost` (RATELIMIT.TOP's tracking), `LaidOnClock` (HIT beside ALIGN and calendar
/// windows) or `Shadow` (shadow mode): those on/off rows alone, on each server, on stdout.
fn on_off_only(binaries: &[&str], plan: &Plan, rows_of: fn(&str, &Plan) -> (String, Vec<OnOffRow>)) {
    for binary in binaries.iter().copied() {
        let (name, rows) = rows_of(binary, plan);
        for r in rows {
            println!(
                "{name}: {:<44} off {:>7.2} µs CPU/op, on {:>7.2}: on/off CPU {:.3}, throughput {:.3}",
                r.contender.name(),
                r.off.cpu_us_per_op,
                r.on.cpu_us_per_op,
                r.cpu_ratio,
                r.ops_ratio
            );
        }
    }
}

fn throughput(server: &Server, label: &str, setup: &Setup, plan: &Plan, pipeline: usize) -> Vec<Row> {
    let duration = if pipeline > 1 { plan.duration } else { plan.unpipelined };
    interleaved(server, label, &ALL, setup, plan, pipeline, duration)
}

/// Each contender once per repetition, interleaved, medians reported; `label` names the server
/// and the pipelining in the progress lines.
fn interleaved(
    server: &Server,
    label: &str,
    contenders: &[Contender],
    setup: &Setup,
    plan: &Plan,
    pipeline: usize,
    duration: Duration,
) -> Vec<Row> {
    let mut samples: Vec<Vec<Sample>> = contenders.iter().map(|_| Vec::new()).collect();
    for rep in 1..=plan.reps {
        for (i, &contender) in contenders.iter().enumerate() {
            progress(&format!(
                "{label}: row {}/{} {}, rep {rep}/{}",
                i + 1,
                contenders.len(),
                contender.name(),
                plan.reps
            ));
            samples[i].push(run_once(server, contender, setup, plan, pipeline, duration));
        }
    }
    contenders.iter().zip(samples).map(|(&contender, samples)| row_of_samples(contender, samples)).collect()
}

/// One run's ops/s, server CPU µs per op, and latencies.
type Sample = (f64, f64, Vec<u32>);

/// One run of `contender` on `server`: ops/s, server CPU µs per op, latencies.
fn run_once(
    server: &Server,
    contender: Contender,
    setup: &Setup,
    plan: &Plan,
    pipeline: usize,
    duration: Duration,
) -> Sample {
    let load = Load {
        port: server.port,
        contender,
        setup,
        connections: plan.connections,
        pipeline,
        keyspace: plan.keyspace,
        duration,
    };
    let cpu_before = cpu_time(server.pid());
    let stats = load.run();
    let cpu = cpu_time(server.pid()) - cpu_before;
    let (ops_per_s, cpu_us) = samples_of(&stats, cpu);
    (ops_per_s, cpu_us, stats.latencies_us)
}

/// The guard's cost: writes outside the guarded prefix on a server without rules and on one with
/// them (it has subscribed to keyspace events), interleaved; and writes under the prefix.
fn guard_overhead(binary: &str, plan: &Plan) -> Vec<OnOffRow> {
    // INCR's and SET's keys are outside these prefixes; `rl:` is IncrGuarded's, `b:hit:` HIT's.
    let rules = ["--ratelimit.guard", "rl: 60 b:hit: 60"];
    let contenders = [Contender::Incr, Contender::Set, Contender::IncrGuarded, Contender::Hit];
    let label = format!("the guard's cost, {}", server_name(binary));
    on_off(binary, &label, Switch::Servers(&[], &rules), &contenders.map(|c| (c, c)), plan)
}

/// RATELIMIT.TOP's cost: HIT admitted on the bench's random keys (nearly every call takes the
/// place of a summary's lightest entry) and denied on 10 hot keys, with the tracking off and on.
fn tracking_cost(binary: &str, plan: &Plan) -> (String, Vec<OnOffRow>) {
    let switch = Switch::Config("ratelimit.top-keys", ["0", "128"]);
    let name = server_name(binary);
    let label = format!("RATELIMIT.TOP's cost, {name}");
    (name, on_off(binary, &label, switch, &[Contender::Hit, Contender::HitFlood].map(|c| (c, c)), plan))
}

fn server_name(binary: &str) -> String {
    report::server_name(&mut Server::with(Config { binary: Some(binary), ..Config::default() }).connect())
}

/// Windows laid on the clock: HIT beside HIT with ALIGN, with a calendar day in UTC and in a
/// named zone, in pairs run back to back on one server.
fn laid_on_clock_cost(binary: &str, plan: &Plan) -> (String, Vec<OnOffRow>) {
    let pairs =
        [Contender::HitAligned, Contender::HitCalendar, Contender::HitCalendarZoned].map(|c| (Contender::Hit, c));
    let name = server_name(binary);
    let label = format!("windows laid on the clock, {name}");
    (name, on_off(binary, &label, Switch::Neither, &pairs, plan))
}

/// Shadow mode's cost: HIT admitted on its random keys, and the denied flood, with
/// `ratelimit.shadow` empty or naming both rows' prefixes (the flood is then admitted: informative).
fn shadow_cost(binary: &str, plan: &Plan) -> (String, Vec<OnOffRow>) {
    let prefixes = [Contender::Hit.prefix(), Contender::HitFlood.prefix()].join(" ");
    let switch = Switch::Config("ratelimit.shadow", ["", &prefixes]);
    let name = server_name(binary);
    let label = format!("shadow mode's cost, {name}");
    (name, on_off(binary, &label, switch, &[Contender::Hit, Contender::HitFlood].map(|c| (c, c)), plan))
}

/// How a feature is turned off and on for `on_off`.
#[derive(Clone, Copy)]
enum Switch<'a> {
    /// Two servers, started with these arguments: for a feature that cannot be turned off once on
    /// (the guard's subscription).
    Servers(&'a [&'a str], &'a [&'a str]),
    /// One server, this config set to the off or the on value before each run: nothing else
    /// differs (two processes of one binary differ by a few % in CPU per call on their own, by
    /// where their memory lies).
    Config(&'a str, [&'a str; 2]),
    /// One server, nothing set: the pairs' two contenders are what differs.
    Neither,
}

/// Each pair's first contender with a feature off and its second with it on (the same contender
/// for a switch; two for `Switch::Neither`): each pair runs both back to back (in turn first), so
/// that the machine's drift, larger on a shared machine than the costs measured, weighs on both
/// alike; the ratios are the medians of the pairs'. The plan's count of pairs, each run shorter
/// than the main tables'.
fn on_off(binary: &str, label: &str, switch: Switch, pairs: &[(Contender, Contender)], plan: &Plan) -> Vec<OnOffRow> {
    let started = |args| Server::with(Config { binary: Some(binary), args, ..Config::default() });
    let (first, second) = match switch {
        Switch::Servers(off, on) => (started(off), Some(started(on))),
        Switch::Config(..) | Switch::Neither => (started(&[]), None),
    };
    let setup = prepare(&mut first.connect());
    if let Some(second) = &second {
        prepare(&mut second.connect());
    }
    let servers = [&first, second.as_ref().unwrap_or(&first)];
    pairs
        .iter()
        .enumerate()
        .map(|(row, &(off_contender, contender))| {
            progress(&format!(
                "{label}: row {}/{} {}, {} pairs",
                row + 1,
                pairs.len(),
                contender.name(),
                plan.on_off_pairs
            ));
            let mut runs: [Vec<Sample>; 2] = Default::default();
            for rep in 0..plan.on_off_pairs {
                for s in if rep % 2 == 0 { [0, 1] } else { [1, 0] } {
                    if let Switch::Config(name, values) = switch {
                        let _: () = redis::cmd("CONFIG")
                            .arg("SET")
                            .arg(name)
                            .arg(values[s])
                            .query(&mut servers[s].connect())
                            .unwrap();
                    }
                    let run = [off_contender, contender][s];
                    runs[s].push(run_once(servers[s], run, &setup, plan, PIPELINE, plan.on_off_duration));
                }
            }
            let ratio =
                |f: fn(&Sample) -> f64| median(runs[1].iter().zip(&runs[0]).map(|(on, off)| f(on) / f(off)).collect());
            let (ops_ratio, cpu_ratio) = (ratio(|r| r.0), ratio(|r| r.1));
            let [off, on] = runs.map(|samples| row_of_samples(contender, samples));
            OnOffRow { contender, off: Row { contender: off_contender, ..off }, on, ops_ratio, cpu_ratio }
        })
        .collect()
}

/// One contender's row from its runs: medians, and percentiles over every latency.
fn row_of_samples(contender: Contender, samples: Vec<Sample>) -> Row {
    let ops = samples.iter().map(|s| s.0).collect();
    let cpu = samples.iter().map(|s| s.1).collect();
    let mut latencies: Vec<u32> = samples.into_iter().flat_map(|s| s.2).collect();
    latencies.sort_unstable();
    Row {
        contender,
        ops_per_s: median(ops),
        cpu_us_per_op: median(cpu),
        p50_us: percentile(&latencies, 0.50),
        p99_us: percentile(&latencies, 0.99),
    }
}

/// `ratelimit_top_memory_bytes` as denied decisions on distinct keys pass (COST above the limit:
/// nothing is written, so the keyspace stays empty), sampled every tenth of the run.
fn tracking_memory(binary: &str, plan: &Plan) -> Vec<(u64, i64)> {
    let server = Server::with(Config { binary: Some(binary), ..Config::default() });
    let step = plan.top_decisions / 10;
    let mut con = server.connect();
    (1..=10)
        .map(|tenth| {
            let first = (tenth - 1) * step;
            std::thread::scope(|s| {
                for part in 0..4 {
                    let mut con = server.connect();
                    s.spawn(move || {
                        fill(&mut con, step / 4, |i| {
                            let mut cmd = redis::cmd("RATELIMIT.HIT");
                            cmd.arg(format!("top:{:012}", first + part * (step / 4) + i))
                                .arg(1)
                                .arg(60)
                                .arg("COST")
                                .arg(2);
                            cmd
                        })
                    });
                }
            });
            let memory = info_field(&mut con, "ratelimit", "ratelimit_top_memory_bytes").unwrap().parse().unwrap();
            (tenth * step, memory)
        })
        .collect()
}

fn samples_of(stats: &loadgen::RunStats, server_cpu: Duration) -> (f64, f64) {
    let ops = stats.ops.max(1) as f64;
    let ops_per_s = ops / stats.elapsed.as_secs_f64();
    let cpu_us_per_op = server_cpu.as_secs_f64() * 1e6 / ops;
    (ops_per_s, cpu_us_per_op)
}

fn used_memory(con: &mut Connection) -> i64 {
    info_field(con, "memory", "used_memory").unwrap().parse().unwrap()
}

/// Sends `count` commands made by `command(i)`, pipelined in chunks, ignoring the replies.
fn fill(con: &mut Connection, count: u64, command: impl Fn(u64) -> redis::Cmd) {
    for chunk in (0..count).collect::<Vec<_>>().chunks(10_000) {
        let mut pipe = redis::pipe();
        for &i in chunk {
            pipe.add_command(command(i)).ignore();
        }
        pipe.query::<()>(con).unwrap();
    }
}

/// used_memory per counter: HIT-created counters against INCR + EXPIRE NX ones, each after one
/// hit and after five.
fn memory(server: &Server, setup: &Setup, plan: &Plan) -> Vec<MemoryRow> {
    let mut con = server.connect();
    let n = plan.counters_for_memory;
    let mut per_counter = |hits: u64, make: &dyn Fn(&mut Connection, u64)| -> f64 {
        let _: () = redis::cmd("FLUSHALL").arg("SYNC").query(&mut con).unwrap();
        let before = used_memory(&mut con);
        for _ in 0..hits {
            make(&mut con, n);
        }
        (used_memory(&mut con) - before) as f64 / n as f64
    };
    let hit = |con: &mut Connection, n: u64| {
        fill(con, n, |i| {
            let mut c = redis::cmd("RATELIMIT.HIT");
            c.arg(format!("m:{i}")).arg(setup.hit_limit).arg(setup.window_s);
            c
        })
    };
    let incr_expire = |con: &mut Connection, n: u64| {
        for i in (0..n).step_by(5_000) {
            let mut pipe = redis::pipe();
            for j in i..(i + 5_000).min(n) {
                let key = format!("m:{j}");
                pipe.cmd("INCR").arg(&key).ignore();
                pipe.cmd("EXPIRE").arg(&key).arg(setup.window_s).arg("NX").ignore();
            }
            pipe.query::<()>(con).unwrap();
        }
    };
    let rows = vec![
        MemoryRow { what: "INCR + EXPIRE NX, 1 hit", bytes_per_counter: per_counter(1, &incr_expire) },
        MemoryRow { what: "RATELIMIT.HIT, 1 hit", bytes_per_counter: per_counter(1, &hit) },
        MemoryRow { what: "INCR + EXPIRE NX, 5 hits", bytes_per_counter: per_counter(5, &incr_expire) },
        MemoryRow { what: "RATELIMIT.HIT, 5 hits", bytes_per_counter: per_counter(5, &hit) },
    ];
    let _: () = redis::cmd("FLUSHALL").arg("SYNC").query(&mut con).unwrap();
    rows
}

/// One AUDIT over `audit_keys` counters (1% leaked) against the client-side SCAN MATCH +
/// pipelined TTL audit of the same keys, with another client PINGing throughout the AUDIT.
fn audit_vs_client(server: &Server, plan: &Plan) -> AuditResult {
    let mut con = server.connect();
    let keys = plan.audit_keys;
    let leaked = keys / 100;
    fill(&mut con, keys, |i| {
        let mut c = redis::cmd("SET");
        c.arg(format!("a:{i}")).arg(i % 50 + 1);
        if i >= leaked {
            c.arg("EX").arg(3600);
        }
        c
    });

    let cpu_s = |work: &mut dyn FnMut()| {
        let before = cpu_time(server.pid());
        work();
        (cpu_time(server.pid()) - before).as_secs_f64()
    };
    let timed = audit_while_pinging(server, &mut con, &["a:", "LIMIT", "0"]);
    assert_eq!(timed.reply.found as u64, leaked);
    // Again without the PINGs, whose own cost would count as the audit's.
    let audit_cpu_s =
        cpu_s(&mut || assert_eq!(common::audit(&mut con, &["a:", "LIMIT", "0"]).unwrap().found as u64, leaked));
    let mut client = None;
    let client_side_cpu_s = cpu_s(&mut || client = Some(client_side_audit(&mut con, "a:")));
    let (found, client_side) = client.unwrap();
    assert_eq!(found, leaked);
    let scan_cpu_s = cpu_s(&mut || {
        let mut cursor = 0u64;
        loop {
            let (next, _): (u64, Vec<Vec<u8>>) =
                redis::cmd("SCAN").arg(cursor).arg("COUNT").arg(1000).query(&mut con).unwrap();
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
    });
    let _: () = redis::cmd("FLUSHALL").arg("SYNC").query(&mut con).unwrap();
    AuditResult {
        keys,
        leaked,
        audit: timed.took,
        client_side,
        worst_ping: timed.pings.worst(),
        pings: timed.pings.count(),
        audit_cpu_s,
        client_side_cpu_s,
        scan_cpu_s,
    }
}

/// How many AUDITs run at once in each row of the concurrent-walks table.
pub const CONCURRENT_WALKS: [usize; 3] = [1, 16, 300];

/// Batches of AUDITs sent at the same moment over `walk_keys` keys (DEBUG POPULATE), while
/// another client PINGs every 10 ms: what many walks at once cost everyone else.
fn concurrent_walks(server: &Server, plan: &Plan) -> Vec<WalksRow> {
    let mut con = server.connect();
    let _: () = redis::cmd("DEBUG").arg("POPULATE").arg(plan.walk_keys).query(&mut con).unwrap();
    let most = CONCURRENT_WALKS.iter().max().unwrap().to_string();
    let _: () = redis::cmd("CONFIG").arg(&["SET", "ratelimit.max-walks", &most]).query(&mut con).unwrap();
    // The largest batch first: the others then time at least as many PINGs, so that the worst
    // waits compare over like sample counts (a larger sample has a larger maximum).
    let mut wanted = plan.walk_pings;
    let mut rows: Vec<WalksRow> = CONCURRENT_WALKS
        .iter()
        .rev()
        .map(|&walks| {
            let (mut pings, mut batches, mut extra_threads, mut walk_threads) =
                (PingWaits::default(), Vec::new(), 0, 0);
            while pings.count() < wanted {
                let callers = (0..walks).map(|_| (server.connect(), "RATELIMIT.AUDIT rl: LIMIT 0")).collect();
                let storm = walk_storm(server, callers);
                for reply in &storm.replies {
                    let scanned = reply.as_ref().unwrap_or_else(|e| panic!("a concurrent AUDIT failed: {e}")).scanned;
                    assert_eq!(scanned as u64, plan.walk_keys);
                }
                pings.merge(storm.pings);
                batches.push(storm.took);
                extra_threads = extra_threads.max(storm.extra_threads);
                walk_threads = walk_threads.max(storm.walk_threads);
            }
            wanted = wanted.max(pings.count());
            batches.sort_unstable();
            WalksRow {
                walks,
                batches: batches.len(),
                extra_threads,
                walk_threads,
                pings,
                batch: batches[batches.len() / 2],
            }
        })
        .collect();
    rows.reverse();
    let _: () = redis::cmd("FLUSHALL").arg("SYNC").query(&mut con).unwrap();
    rows
}
