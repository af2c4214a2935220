//! The one load generator every contender is measured with: raw RESP over non-blocking loopback
//! sockets, many connections driven from one thread with poll(2), each sending pipelines of
//! logical rate-limit hits and timing them.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use ratelimit_testkit::Rng;

/// How one logical rate-limit hit is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contender {
    /// `INCR`: the floor, one increment and no expiry.
    Incr,
    /// `INCR`, then `EXPIRE` when it returned 1: the old two-step.
    TwoStep,
    /// `INCR` + `EXPIRE NX` in one pipeline, no MULTI.
    IncrExpireNx,
    /// `MULTI; INCR; EXPIRE NX; EXEC`.
    Multi,
    /// The INCR + EXPIRE NX logic as a Lua script, by `EVALSHA`.
    EvalSha,
    /// The same logic as a Redis function, by `FCALL`.
    Fcall,
    /// `RATELIMIT.HIT`.
    Hit,
    /// `RATELIMIT.HITALL` with two limits (per minute and per hour) on one identity.
    HitAll,
    /// `RATELIMIT.SLIDE`: the sliding window, never denied (every call writes).
    Slide,
    /// The two-key approximate sliding window as a Lua script, in the shape upstash's
    /// slidingWindow and limits' sliding window counter use: the client names the current and the
    /// previous window's counters; GET both, weigh, INCR, PEXPIRE a new one.
    SlideTwoKey,
    /// A sliding log as a Lua script: a ZSET of call times per key (ZREMRANGEBYSCORE, ZCARD,
    /// ZADD, PEXPIRE). Like SLIDE's row, every call admitted; on 1,000 keys with a 2 s window, so
    /// that at this bench's 40,000 to 60,000 calls a second each log holds about 100 entries:
    /// the size of a log at limit 100.
    SlideLog,
    /// `RATELIMIT.ACQUIRE` then `RATELIMIT.RELEASE` of the same lease: one logical op, a pair.
    LeasePair,
    /// The same pair as Lua scripts on a sorted set, in the shape of the semaphore scripts of
    /// other libraries: prune, count, add, expire; then remove.
    LuaSemaphorePair,
    /// `RATELIMIT.PEEK`: the read-only look.
    Peek,
    /// `FCALL ratelimit_hit` and `FCALL ratelimit_gcra`: the same calls through the Functions
    /// library (functions/ratelimit.lua).
    Library,
    LibraryGcra,
    /// The library's other functions, each beside the script a user would write instead:
    /// `ratelimit_peek` and a GET + PTTL look; `ratelimit_hitall` (two limits) and a script that
    /// checks every counter, then INCRs and EXPIRE NXes them; `ratelimit_slide` (against the
    /// two-key window above); `ratelimit_acquire` + `ratelimit_release` (against the semaphore).
    LibraryPeek,
    PeekShape,
    LibraryHitAll,
    HitAllShape,
    LibrarySlide,
    LibraryLeasePair,
    /// The three scripts above that answer one integer, answering instead what the library's
    /// function answers (HITALL's per-limit count, remaining and reset; SLIDE's five integers;
    /// ACQUIRE's five): a Lua table in a reply costs the server more than the Lua that fills it.
    HitAllShapeAnswering,
    SlideTwoKeyAnswering,
    LuaSemaphoreAnsweringPair,
    /// A minimal fixed window as a Lua script, in the shape express's rate-limit-redis store uses
    /// (INCRBY, PTTL, PEXPIRE when the key has no expiry): what a user of the library compares it with.
    ExpressShape,
    /// GCRA as a Lua script in the shape of go-redis/redis_rate's allowN (TIME, GET, float
    /// arithmetic on a TAT in seconds, SET EX), on the same bucket as the GCRA rows.
    RedisRateShape,
    /// `RATELIMIT.GCRA`, with a bucket too large to deny.
    Gcra,
    /// HIT, SLIDE and GCRA with `RESERVE`, as their rows above (a reservation in every reply).
    HitReserve,
    SlideReserve,
    GcraReserve,
    /// `RATELIMIT.SETTLE` of a reservation made before the run (a cost of 1,000 in an hour's
    /// window), alternately used 999 (a refund of 1) and 1,001 (an overage of 1): every call writes.
    /// Each call's reservation has an id of its own (another call's on the same terms), so that
    /// each is settled once: the count and the key's settle marks written.
    Settle,
    /// The same settles of reservations without id, as made before ids: no settle marks, SETTLE's
    /// cost before it settled at most once.
    SettleWithoutId,
    /// redis-cell's `CL.THROTTLE` (its crates.io release), the same bucket.
    Cell,
    /// Floods: every call on 10 hot keys already over their limit, so nearly every call is
    /// denied (an abuser being turned away). `INCR` on the same keys is the floor.
    IncrFlood,
    HitFlood,
    SlideFlood,
    GcraFlood,
    CellFlood,
    /// HIT with its window laid on the clock, each beside HIT in pairs (not in `ALL`): `ALIGN`,
    /// and a calendar day in UTC and in a named zone.
    HitAligned,
    HitCalendar,
    HitCalendarZoned,
    /// Plain writes for the guard's overhead (not in `ALL`): `SET key 1`, and `INCR` under the
    /// prefix the guard's bench rules guard (`rl:`).
    Set,
    IncrGuarded,
}

pub const ALL: [Contender; 39] = [
    Contender::Incr,
    Contender::TwoStep,
    Contender::IncrExpireNx,
    Contender::Multi,
    Contender::EvalSha,
    Contender::Fcall,
    Contender::Hit,
    Contender::HitAll,
    Contender::Slide,
    Contender::SlideTwoKey,
    Contender::SlideLog,
    Contender::LeasePair,
    Contender::LuaSemaphorePair,
    Contender::Peek,
    Contender::Library,
    Contender::ExpressShape,
    Contender::LibraryPeek,
    Contender::PeekShape,
    Contender::LibraryHitAll,
    Contender::HitAllShape,
    Contender::LibrarySlide,
    Contender::LibraryLeasePair,
    Contender::HitAllShapeAnswering,
    Contender::SlideTwoKeyAnswering,
    Contender::LuaSemaphoreAnsweringPair,
    Contender::Gcra,
    Contender::HitReserve,
    Contender::SlideReserve,
    Contender::GcraReserve,
    Contender::Settle,
    Contender::SettleWithoutId,
    Contender::LibraryGcra,
    Contender::RedisRateShape,
    Contender::Cell,
    Contender::IncrFlood,
    Contender::HitFlood,
    Contender::SlideFlood,
    Contender::GcraFlood,
    Contender::CellFlood,
];

impl Contender {
    pub fn name(self) -> &'static str {
        match self {
            Contender::Incr => "INCR (floor)",
            Contender::TwoStep => "INCR, then EXPIRE if 1",
            Contender::IncrExpireNx => "INCR + EXPIRE NX (pipeline)",
            Contender::Multi => "MULTI INCR EXPIRE NX EXEC",
            Contender::EvalSha => "EVALSHA (Lua)",
            Contender::Fcall => "FCALL (function)",
            Contender::Hit => "RATELIMIT.HIT",
            Contender::HitAll => "RATELIMIT.HITALL, 2 limits",
            Contender::Slide => "RATELIMIT.SLIDE",
            Contender::SlideTwoKey => "two-key sliding window (Lua, upstash/limits shape)",
            Contender::SlideLog => "ZSET sliding log (Lua), ~100 entries a key",
            Contender::LeasePair => "RATELIMIT.ACQUIRE + RELEASE (a pair)",
            Contender::LuaSemaphorePair => "ZSET semaphore (Lua) acquire + release (a pair)",
            Contender::Peek => "RATELIMIT.PEEK",
            Contender::Library => "FCALL ratelimit_hit (the library)",
            Contender::LibraryGcra => "FCALL ratelimit_gcra (the library)",
            Contender::ExpressShape => "fixed window (Lua, rate-limit-redis shape)",
            Contender::LibraryPeek => "FCALL_RO ratelimit_peek (the library)",
            Contender::PeekShape => "GET + PTTL look (Lua)",
            Contender::LibraryHitAll => "FCALL ratelimit_hitall, 2 limits (the library)",
            Contender::HitAllShape => "2 fixed windows, all or nothing (Lua)",
            Contender::LibrarySlide => "FCALL ratelimit_slide (the library)",
            Contender::LibraryLeasePair => "FCALL ratelimit_acquire + release (the library, a pair)",
            Contender::HitAllShapeAnswering => "2 fixed windows, all or nothing, answering HITALL's fields (Lua)",
            Contender::SlideTwoKeyAnswering => "two-key sliding window answering SLIDE's fields (Lua)",
            Contender::LuaSemaphoreAnsweringPair => "ZSET semaphore answering ACQUIRE's fields (Lua, a pair)",
            Contender::RedisRateShape => "GCRA (Lua, redis_rate allowN shape)",
            Contender::Gcra => "RATELIMIT.GCRA",
            Contender::HitReserve => "RATELIMIT.HIT ... RESERVE",
            Contender::SlideReserve => "RATELIMIT.SLIDE ... RESERVE",
            Contender::GcraReserve => "RATELIMIT.GCRA ... RESERVE",
            Contender::Settle => "RATELIMIT.SETTLE (a refund or an overage)",
            Contender::SettleWithoutId => "RATELIMIT.SETTLE of a reservation without id (before ids)",
            Contender::Cell => "CL.THROTTLE (redis-cell 0.2.2)",
            Contender::IncrFlood => "flood: INCR on 10 hot keys",
            Contender::HitFlood => "flood: RATELIMIT.HIT, denied",
            Contender::SlideFlood => "flood: RATELIMIT.SLIDE, denied",
            Contender::GcraFlood => "flood: RATELIMIT.GCRA, denied",
            Contender::CellFlood => "flood: CL.THROTTLE (redis-cell), denied",
            Contender::HitAligned => "RATELIMIT.HIT ... ALIGN",
            Contender::HitCalendar => "RATELIMIT.HIT ... day (UTC)",
            Contender::HitCalendarZoned => "RATELIMIT.HIT ... day TZ America/New_York",
            Contender::Set => "SET",
            Contender::IncrGuarded => "INCR under a guarded prefix",
        }
    }

    /// The floods' few hot keys; the others spread over the run's keyspace.
    pub fn hot_keys(self) -> Option<u64> {
        match self {
            Contender::IncrFlood | Contender::HitFlood | Contender::SlideFlood => Some(10),
            Contender::GcraFlood | Contender::CellFlood => Some(10),
            Contender::SlideLog => Some(1_000),
            _ => None,
        }
    }

    pub fn prefix(self) -> &'static str {
        match self {
            Contender::Incr => "b:incr:",
            Contender::TwoStep => "b:two:",
            Contender::IncrExpireNx => "b:nx:",
            Contender::Multi => "b:multi:",
            Contender::EvalSha => "b:eval:",
            Contender::Fcall => "b:fcall:",
            Contender::Hit => "b:hit:",
            Contender::HitAll => "b:all:",
            Contender::Slide => "b:slide:",
            Contender::SlideTwoKey => "b:two-key:",
            Contender::SlideLog => "b:log:",
            Contender::LeasePair => "b:lease:",
            Contender::LuaSemaphorePair => "b:sem:",
            Contender::SlideFlood => "b:fslide:",
            Contender::Peek => "b:hit:",
            Contender::Library => "b:lib:",
            Contender::LibraryGcra => "b:libg:",
            Contender::ExpressShape => "b:express:",
            Contender::LibraryPeek | Contender::PeekShape => "b:lib:",
            Contender::LibraryHitAll => "b:liball:",
            Contender::HitAllShape => "b:allshape:",
            Contender::HitAllShapeAnswering => "b:allanswer:",
            Contender::SlideTwoKeyAnswering => "b:two-key-answer:",
            Contender::LuaSemaphoreAnsweringPair => "b:sem-answer:",
            Contender::LibrarySlide => "b:libslide:",
            Contender::LibraryLeasePair => "b:liblease:",
            Contender::RedisRateShape => "b:rrate:",
            Contender::Gcra => "b:gcra:",
            Contender::HitReserve => "b:hitr:",
            Contender::SlideReserve => "b:slider:",
            Contender::GcraReserve => "b:gcrar:",
            Contender::Settle | Contender::SettleWithoutId => SETTLE_PREFIX,
            Contender::Cell => "b:cell:",
            Contender::IncrFlood => "b:fincr:",
            Contender::HitFlood => "b:fhit:",
            Contender::GcraFlood => "b:fgcra:",
            Contender::CellFlood => "b:fcell:",
            Contender::HitAligned => "b:hita:",
            Contender::HitCalendar => "b:hitc:",
            Contender::HitCalendarZoned => "b:hitz:",
            Contender::Set => "b:set:",
            Contender::IncrGuarded => "rl:b:",
        }
    }
}

/// What the contenders need besides the key: the Lua scripts' SHAs and the window.
pub struct Setup {
    pub script_sha: String,
    pub two_key_sha: String,
    pub log_sha: String,
    pub semaphore_acquire_sha: String,
    pub semaphore_release_sha: String,
    pub express_sha: String,
    pub peek_sha: String,
    pub hitall_sha: String,
    pub hitall_answering_sha: String,
    pub two_key_answering_sha: String,
    pub semaphore_acquire_answering_sha: String,
    pub redis_rate_sha: String,
    pub function: String,
    pub window_s: &'static str,
    pub hit_limit: &'static str,
    /// The Settle row's reservations, by key number.
    pub reservations: Vec<Vec<u8>>,
}

/// The Settle row's keys, each reserved before the run.
pub const SETTLE_PREFIX: &str = "b:settle:";

pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// Writes one logical hit on `key`; returns how many replies it brings.
fn write_hit(contender: Contender, setup: &Setup, key: &[u8], out: &mut Vec<u8>) -> usize {
    let w = setup.window_s.as_bytes();
    match contender {
        Contender::Incr | Contender::TwoStep | Contender::IncrFlood | Contender::IncrGuarded => {
            command(out, &[b"INCR", key]);
            1
        }
        Contender::Set => {
            command(out, &[b"SET", key, b"1"]);
            1
        }
        // A billion tokens, one back per second: never denied, and the key lives on.
        Contender::Gcra => {
            command(out, &[b"RATELIMIT.GCRA", key, b"999999999", b"1", b"1"]);
            1
        }
        Contender::GcraReserve => {
            command(out, &[b"RATELIMIT.GCRA", key, b"999999999", b"1", b"1", b"RESERVE"]);
            1
        }
        Contender::HitReserve => {
            command(out, &[b"RATELIMIT.HIT", key, setup.hit_limit.as_bytes(), w, b"RESERVE"]);
            1
        }
        Contender::SlideReserve => {
            command(out, &[b"RATELIMIT.SLIDE", key, setup.hit_limit.as_bytes(), w, b"RESERVE"]);
            1
        }
        Contender::Settle | Contender::SettleWithoutId => {
            let number: usize = std::str::from_utf8(&key[SETTLE_PREFIX.len()..]).unwrap().parse().unwrap();
            let n = next_lease_id();
            let used: &[u8] = if n.last().is_some_and(|d| d % 2 == 0) { b"999" } else { b"1001" };
            // A reservation ends with its id, 16 hex digits.
            let reserved = &setup.reservations[number];
            let terms = &reserved[..reserved.len() - 16];
            let reservation = match contender {
                // A new id for each call: the process's counter, its decimal digits padded to 16.
                Contender::Settle => [terms, format!("{:0>16}", String::from_utf8_lossy(&n)).as_bytes()].concat(),
                _ => terms.to_vec(),
            };
            command(out, &[b"RATELIMIT.SETTLE", key, &reservation, used]);
            1
        }
        Contender::LibraryGcra => {
            command(out, &[b"FCALL", b"ratelimit_gcra", b"1", key, b"999999999", b"1", b"1"]);
            1
        }
        Contender::Cell => {
            command(out, &[b"CL.THROTTLE", key, b"999999999", b"1", b"1"]);
            1
        }
        Contender::RedisRateShape => {
            let sha = setup.redis_rate_sha.as_bytes();
            command(out, &[b"EVALSHA", sha, b"1", key, b"999999999", b"1", b"1", b"1"]);
            1
        }
        Contender::LibraryPeek => {
            command(out, &[b"FCALL_RO", b"ratelimit_peek", b"1", key, setup.hit_limit.as_bytes()]);
            1
        }
        Contender::PeekShape => {
            command(out, &[b"EVALSHA_RO", setup.peek_sha.as_bytes(), b"1", key, setup.hit_limit.as_bytes()]);
            1
        }
        Contender::LibraryHitAll | Contender::HitAllShape | Contender::HitAllShapeAnswering => {
            let tagged = |suffix: &str| [b"{", key, b"}", suffix.as_bytes()].concat();
            let (minute, hour) = (tagged(":m"), tagged(":h"));
            let limit = setup.hit_limit.as_bytes();
            let rest: [&[u8]; 6] = [&minute, &hour, limit, w, limit, b"3600"];
            let head: [&[u8]; 3] = match contender {
                Contender::LibraryHitAll => [b"FCALL", b"ratelimit_hitall", b"2"],
                Contender::HitAllShapeAnswering => [b"EVALSHA", setup.hitall_answering_sha.as_bytes(), b"2"],
                _ => [b"EVALSHA", setup.hitall_sha.as_bytes(), b"2"],
            };
            command(out, &[&head[..], &rest].concat());
            1
        }
        Contender::LibrarySlide => {
            command(out, &[b"FCALL", b"ratelimit_slide", b"1", key, setup.hit_limit.as_bytes(), w]);
            1
        }
        Contender::LibraryLeasePair => {
            let id = next_lease_id();
            command(out, &[b"FCALL", b"ratelimit_acquire", b"1", key, b"1000000", b"30", b"ID", &id]);
            command(out, &[b"FCALL", b"ratelimit_release", b"1", key, &id]);
            2
        }
        Contender::ExpressShape => {
            command(out, &[b"EVALSHA", setup.express_sha.as_bytes(), b"1", key, b"1", b"60000"]);
            1
        }
        // 10 an hour: spent by the first calls of a run.
        Contender::HitFlood => {
            command(out, &[b"RATELIMIT.HIT", key, b"10", b"3600"]);
            1
        }
        Contender::SlideFlood => {
            command(out, &[b"RATELIMIT.SLIDE", key, b"10", b"3600"]);
            1
        }
        Contender::Slide => {
            command(out, &[b"RATELIMIT.SLIDE", key, setup.hit_limit.as_bytes(), w]);
            1
        }
        // The client computes the windows' keys from its clock, as those libraries do.
        Contender::SlideTwoKey | Contender::SlideTwoKeyAnswering => {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
            let window = 60_000;
            let tagged = |index: u64| [b"{", key, b"}:", index.to_string().as_bytes()].concat();
            let (curr, prev) = (tagged(now / window), tagged(now / window - 1));
            let (now, window) = (now.to_string(), window.to_string());
            let sha = match contender {
                Contender::SlideTwoKey => setup.two_key_sha.as_bytes(),
                _ => setup.two_key_answering_sha.as_bytes(),
            };
            let limit = setup.hit_limit.as_bytes();
            command(out, &[b"EVALSHA", sha, b"2", &curr, &prev, limit, now.as_bytes(), window.as_bytes()]);
            1
        }
        Contender::SlideLog => {
            command(out, &[b"EVALSHA", setup.log_sha.as_bytes(), b"1", key, b"1000000", b"2000"]);
            1
        }
        // A lease of 30 s under an id of its own, given back at once; never denied.
        Contender::LeasePair => {
            let id = next_lease_id();
            command(out, &[b"RATELIMIT.ACQUIRE", key, b"1000000", b"30", b"ID", &id]);
            command(out, &[b"RATELIMIT.RELEASE", key, &id]);
            2
        }
        Contender::LuaSemaphorePair | Contender::LuaSemaphoreAnsweringPair => {
            let id = next_lease_id();
            let acquire = match contender {
                Contender::LuaSemaphorePair => setup.semaphore_acquire_sha.as_bytes(),
                _ => setup.semaphore_acquire_answering_sha.as_bytes(),
            };
            let release = setup.semaphore_release_sha.as_bytes();
            command(out, &[b"EVALSHA", acquire, b"1", key, b"1000000", b"30000", &id]);
            command(out, &[b"EVALSHA", release, b"1", key, &id]);
            2
        }
        Contender::GcraFlood => {
            command(out, &[b"RATELIMIT.GCRA", key, b"9", b"1", b"3600"]);
            1
        }
        Contender::CellFlood => {
            command(out, &[b"CL.THROTTLE", key, b"9", b"1", b"3600"]);
            1
        }
        Contender::IncrExpireNx => {
            command(out, &[b"INCR", key]);
            command(out, &[b"EXPIRE", key, w, b"NX"]);
            2
        }
        Contender::Multi => {
            command(out, &[b"MULTI"]);
            command(out, &[b"INCR", key]);
            command(out, &[b"EXPIRE", key, w, b"NX"]);
            command(out, &[b"EXEC"]);
            4
        }
        Contender::EvalSha => {
            command(out, &[b"EVALSHA", setup.script_sha.as_bytes(), b"1", key, w]);
            1
        }
        Contender::Fcall => {
            command(out, &[b"FCALL", setup.function.as_bytes(), b"1", key, w]);
            1
        }
        Contender::Hit => {
            command(out, &[b"RATELIMIT.HIT", key, setup.hit_limit.as_bytes(), w]);
            1
        }
        Contender::HitAligned => {
            command(out, &[b"RATELIMIT.HIT", key, setup.hit_limit.as_bytes(), w, b"ALIGN"]);
            1
        }
        Contender::HitCalendar => {
            command(out, &[b"RATELIMIT.HIT", key, setup.hit_limit.as_bytes(), b"day"]);
            1
        }
        Contender::HitCalendarZoned => {
            command(out, &[b"RATELIMIT.HIT", key, setup.hit_limit.as_bytes(), b"day", b"TZ", b"America/New_York"]);
            1
        }
        Contender::HitAll => {
            let tagged = |suffix: &str| [b"{", key, b"}", suffix.as_bytes()].concat();
            let limit = setup.hit_limit.as_bytes();
            command(out, &[b"RATELIMIT.HITALL", b"2", &tagged(":m"), &tagged(":h"), limit, w, limit, b"3600"]);
            1
        }
        Contender::Peek => {
            command(out, &[b"RATELIMIT.PEEK", key, setup.hit_limit.as_bytes()]);
            1
        }
        Contender::Library => {
            command(out, &[b"FCALL", b"ratelimit_hit", b"1", key, setup.hit_limit.as_bytes(), w]);
            1
        }
    }
}

/// Lease ids, unique within the run.
fn next_lease_id() -> Vec<u8> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed).to_string().into_bytes()
}

/// Parses one complete RESP2 reply at the start of `buf`: its length and, for an integer, its
/// value. `None` while incomplete. Error replies fail the run: a benchmark of errors is no
/// benchmark.
pub fn parse_reply(buf: &[u8]) -> Option<(usize, Option<i64>)> {
    let line_end = buf.windows(2).position(|w| w == b"\r\n")?;
    let line = &buf[1..line_end];
    let after = line_end + 2;
    let number = || std::str::from_utf8(line).ok()?.parse::<i64>().ok();
    match buf[0] {
        b'+' => Some((after, None)),
        b'-' => panic!("the server answered an error: {}", String::from_utf8_lossy(line)),
        b':' => Some((after, number())),
        b'$' => {
            let len = number()?;
            if len < 0 {
                return Some((after, None));
            }
            let end = after + len as usize + 2;
            (buf.len() >= end).then_some((end, None))
        }
        b'*' => {
            let mut pos = after;
            for _ in 0..number()?.max(0) {
                pos += parse_reply(&buf[pos..])?.0;
            }
            Some((pos, None))
        }
        other => panic!("unexpected RESP type byte {other:?}"),
    }
}

struct Conn {
    stream: TcpStream,
    out: Vec<u8>,
    written: usize,
    input: Vec<u8>,
    pending: usize,
    batch_ops: usize,
    batch_started: Instant,
    /// Two-step: keys whose INCR returned 1, to EXPIRE in the batch's second round trip.
    follow_ups: Vec<Vec<u8>>,
    /// Two-step: how many INCR replies of this batch remain (their keys, in order).
    incr_keys: Vec<Vec<u8>>,
    rng: Rng,
}

/// What one run measured.
pub struct RunStats {
    pub ops: u64,
    pub elapsed: Duration,
    /// Round-trip time of each pipeline (one entry per logical op in it), in microseconds.
    pub latencies_us: Vec<u32>,
}

pub struct Load<'a> {
    pub port: u16,
    pub contender: Contender,
    pub setup: &'a Setup,
    pub connections: usize,
    pub pipeline: usize,
    pub keyspace: u64,
    pub duration: Duration,
}

impl Load<'_> {
    pub fn run(&self) -> RunStats {
        let mut conns: Vec<Conn> = (0..self.connections)
            .map(|i| {
                let stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
                stream.set_nodelay(true).unwrap();
                stream.set_nonblocking(true).unwrap();
                Conn {
                    stream,
                    out: Vec::new(),
                    written: 0,
                    input: Vec::new(),
                    pending: 0,
                    batch_ops: 0,
                    batch_started: Instant::now(),
                    follow_ups: Vec::new(),
                    incr_keys: Vec::new(),
                    rng: Rng::new(0x9E37_79B9_7F4A_7C15 ^ ((i as u64 + 1) * 0x1000_0000_01B3)),
                }
            })
            .collect();
        let started = Instant::now();
        let deadline = started + self.duration;
        let mut ops = 0u64;
        let mut latencies_us = Vec::new();
        for conn in &mut conns {
            self.start_batch(conn);
        }
        let mut fds: Vec<libc::pollfd> =
            conns.iter().map(|c| libc::pollfd { fd: c.stream.as_raw_fd(), events: 0, revents: 0 }).collect();
        let mut active = conns.len();
        let mut buf = vec![0u8; 64 * 1024];
        while active > 0 {
            for (fd, conn) in fds.iter_mut().zip(&conns) {
                fd.events = if conn.pending == 0 {
                    0
                } else if conn.written < conn.out.len() {
                    libc::POLLOUT
                } else {
                    libc::POLLIN
                };
            }
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 1000) };
            assert!(ready >= 0, "poll failed: {}", std::io::Error::last_os_error());
            for (i, conn) in conns.iter_mut().enumerate() {
                if fds[i].revents == 0 || conn.pending == 0 {
                    continue;
                }
                if conn.written < conn.out.len() {
                    match conn.stream.write(&conn.out[conn.written..]) {
                        Ok(n) => conn.written += n,
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                        Err(e) => panic!("write: {e}"),
                    }
                    continue;
                }
                match conn.stream.read(&mut buf) {
                    Ok(0) => panic!("the server closed a connection"),
                    Ok(n) => conn.input.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                    Err(e) => panic!("read: {e}"),
                }
                let mut consumed = 0;
                while conn.pending > 0 {
                    let Some((len, value)) = parse_reply(&conn.input[consumed..]) else { break };
                    consumed += len;
                    conn.pending -= 1;
                    if !conn.incr_keys.is_empty() {
                        let key = conn.incr_keys.remove(0);
                        if value == Some(1) {
                            conn.follow_ups.push(key);
                        }
                    }
                }
                conn.input.drain(..consumed);
                if conn.pending > 0 {
                    continue;
                }
                if !conn.follow_ups.is_empty() {
                    // Two-step: the EXPIREs for counters that INCR just created.
                    conn.out.clear();
                    conn.written = 0;
                    for key in std::mem::take(&mut conn.follow_ups) {
                        command(&mut conn.out, &[b"EXPIRE", &key, self.setup.window_s.as_bytes()]);
                        conn.pending += 1;
                    }
                    continue;
                }
                let rtt = conn.batch_started.elapsed().as_micros().min(u32::MAX as u128) as u32;
                latencies_us.extend(std::iter::repeat_n(rtt, conn.batch_ops));
                ops += conn.batch_ops as u64;
                if Instant::now() < deadline {
                    self.start_batch(conn);
                } else {
                    active -= 1;
                }
            }
        }
        RunStats { ops, elapsed: started.elapsed(), latencies_us }
    }

    fn start_batch(&self, conn: &mut Conn) {
        conn.out.clear();
        conn.written = 0;
        conn.batch_ops = self.pipeline;
        for _ in 0..self.pipeline {
            let keys = self.contender.hot_keys().unwrap_or(self.keyspace);
            let key = format!("{}{}", self.contender.prefix(), conn.rng.below(keys as usize)).into_bytes();
            conn.pending += write_hit(self.contender, self.setup, &key, &mut conn.out);
            if self.contender == Contender::TwoStep {
                conn.incr_keys.push(key);
            }
        }
        conn.batch_started = Instant::now();
    }
}
