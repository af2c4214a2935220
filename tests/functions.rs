//! The Redis Functions library (functions/ratelimit.lua) against the module: the same random
//! argument vectors and call sequences sent to a server with the module and to one with only the
//! library, at the same instants; every reply and every resulting key must agree.

mod common;

use common::{error_text, value_and_expiry, Config, Rng, Server};
use redis::Value;

const LIBRARY: &str = include_str!("../functions/ratelimit.lua");
/// The library's error for a valid number it cannot compute exactly (a documented difference).
const BEYOND: &str = "ERR ratelimit library: a number above 2^53 cannot be computed exactly here; use the module";

fn with_library() -> Server {
    let server = Server::with(Config { module: false, ..Config::default() });
    let _: String = redis::cmd("FUNCTION").arg(&["LOAD", "REPLACE", LIBRARY]).query(&mut server.connect()).unwrap();
    server
}

/// This fuzz test's words and keys.
trait Words {
    fn word(&mut self) -> String;
    fn key(&mut self) -> String;
}

impl Words for Rng {
    /// Numbers, option names and junk; no valid number above 2^53 (the library's own error).
    fn word(&mut self) -> String {
        const WORDS: &[&str] = &[
            "COST", "cost", "MS", "ms", "Ms", "LIMIT", "0", "1", "2", "3", "-1", "10", "60", "250", "", "1.5", "+1", "01",
            "-0", "99999999999999999999", "-9223372036854775809", "4611686018427388", "x",
        ];
        match self.below(5) {
            0 => (self.next() % 2_000).to_string(),
            1 => (-((self.next() % 2_000) as i64)).to_string(),
            _ => WORDS[self.below(WORDS.len())].to_string(),
        }
    }

    fn key(&mut self) -> String {
        match self.below(8) {
            0 => "fz:list".into(),
            1 => "fz:text".into(),
            _ => format!("fz:{}", self.below(8)),
        }
    }
}

/// The module's reply and the library's agree: errors word for word, numbers exactly except the
/// times (HIT's and PEEK's `reset_ms`, the 3rd of each HITALL triple, GCRA's `retry_after_ms` and
/// `full_after_ms`), which may differ by the few ms between the two calls.
fn agree(command: &str, module: &redis::RedisResult<Value>, library: &redis::RedisResult<Value>) -> bool {
    fn numbers(value: &Value) -> Option<Vec<i64>> {
        match value {
            Value::Int(n) => Some(vec![*n]),
            Value::Array(items) => items.iter().map(numbers).collect::<Option<Vec<_>>>().map(|v| v.concat()),
            _ => None,
        }
    }
    let timing = |i: usize| match command {
        "RATELIMIT.HITALL" => i > 0 && i % 3 == 0,
        "RATELIMIT.GCRA" => i >= 3,
        _ => i == 3,
    };
    match (module, library) {
        (Err(a), Err(b)) => error_text(a) == error_text(b),
        (Ok(a), Ok(b)) => {
            let shape = |v: &Value| format!("{v:?}").chars().filter(|c| "[]".contains(*c)).collect::<String>();
            let (Some(x), Some(y)) = (numbers(a), numbers(b)) else { return false };
            x.len() == y.len()
                && shape(a) == shape(b)
                && x.iter().zip(&y).enumerate().all(|(i, (p, q))| p == q || timing(i) && (p - q).abs() <= 5)
        }
        _ => false,
    }
}

#[test]
fn the_library_answers_as_the_module_does() {
    let (mut rng, seed) = Rng::from_env();
    let (module, library) = (Server::start(), with_library());
    let (mut m, mut l) = (module.connect(), library.connect());
    for con in [&mut m, &mut l] {
        // A list, a text, and two counters leaked without TTL (the heal paths).
        // And GCRA's: a list, a text, a bucket without TTL.
        common::run_all(con, &["RPUSH fz:list x", "SET fz:text abc", "SET fz:5 3", "SET fz:6 -7"]);
        common::run_all(con, &["RPUSH fg:list x", "SET fg:text abc", "SET fg:5 3"]);
    }
    let (mut compared, mut gcra_replies, mut mismatches) = (0, 0, Vec::new());
    for i in 0..4_000 {
        let (command, function) = [
            ("RATELIMIT.HIT", "ratelimit_hit"),
            ("RATELIMIT.PEEK", "ratelimit_peek"),
            ("RATELIMIT.HITALL", "ratelimit_hitall"),
            ("RATELIMIT.GCRA", "ratelimit_gcra"),
        ][rng.below(4)];
        let hitall = command == "RATELIMIT.HITALL";
        let gcra = command == "RATELIMIT.GCRA";
        let keys: Vec<String> = (0..if hitall { 1 + rng.below(3) } else { 1 })
            .map(|_| if gcra { rng.key().replace("fz:", "fg:") } else { rng.key() })
            .collect();
        let mut args: Vec<String> = Vec::new();
        // Half the vectors start well formed, so that the writes get exercised; most of those get
        // no junk after them.
        let well_formed = rng.below(2) == 0;
        if well_formed {
            let number = |rng: &mut Rng| ["1", "3", "10", "250", "60"][rng.below(5)].to_string();
            let pairs = if command == "RATELIMIT.PEEK" || gcra { 0 } else { keys.len() };
            if command == "RATELIMIT.PEEK" {
                args.push(number(&mut rng));
            }
            // Slow rates (a token back every 6 minutes or more): the two servers' clocks differ by up
            // to a millisecond, and a token coming back between the two calls would part them.
            if gcra {
                args.push(["0", "1", "4", "9"][rng.below(4)].to_string());
                args.push(["1", "2", "10"][rng.below(3)].to_string());
                args.push(["3600", "86400", "3600.5", "7200"][rng.below(4)].to_string());
                if rng.below(3) == 0 {
                    args.extend(["TOKENS".to_string(), ["1", "2", "7"][rng.below(3)].to_string()]);
                }
            }
            for _ in 0..pairs {
                args.push(number(&mut rng));
                args.push(number(&mut rng));
            }
        }
        let junk = if well_formed && rng.below(3) != 0 { 0 } else { rng.below(5) };
        for _ in 0..junk {
            args.push(rng.word());
        }
        let mut module_call = redis::cmd(command);
        if hitall {
            module_call.arg(keys.len());
        }
        module_call.arg(&keys).arg(&args);
        let mut library_call = redis::cmd("FCALL");
        library_call.arg(function).arg(keys.len()).arg(&keys).arg(&args);
        let (a, b) = (module_call.query::<Value>(&mut m), library_call.query::<Value>(&mut l));
        compared += 1;
        gcra_replies += usize::from(gcra && a.is_ok());
        if !agree(command, &a, &b) {
            mismatches.push(format!("vector {i}: {command} {keys:?} {args:?}: module {a:?}, library {b:?}"));
        }
    }
    // The same keys, values and expiry instants (within the clock's tick and the calls' skew).
    let keys: Vec<String> = redis::cmd("KEYS").arg("f[zg]:*").query(&mut m).unwrap();
    for key in keys.iter().filter(|k| !k.ends_with("list")) {
        let (value_m, expiry_m) = value_and_expiry(&mut m, key);
        let (value_l, expiry_l) = value_and_expiry(&mut l, key);
        // A GCRA bucket's TAT is in ns of each server's clock: equal within the calls' 5 ms.
        let tat = |v: &Option<String>| v.as_deref().and_then(|v| v.parse::<i64>().ok());
        let same = match (key.starts_with("fg:"), tat(&value_m), tat(&value_l)) {
            (true, Some(a), Some(b)) => (a - b).abs() <= 5_000_000,
            _ => value_m == value_l,
        };
        if !same || (expiry_m - expiry_l).abs() > 5 {
            mismatches.push(format!("key {key}: module {value_m:?} expires {expiry_m}, library {value_l:?} expires {expiry_l}"));
        }
    }
    let library_keys: Vec<String> = redis::cmd("KEYS").arg("f[zg]:*").query(&mut l).unwrap();
    assert_eq!(library_keys.len(), keys.len(), "the same keys exist");
    eprintln!(
        "{compared} calls ({gcra_replies} GCRA replies) and {} keys compared, {} mismatches (seed {seed})",
        keys.len(),
        mismatches.len()
    );
    assert!(gcra_replies > 100, "too few GCRA calls got through to compare: {gcra_replies}");
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn numbers_beyond_2_53_get_the_library_error_and_write_nothing() {
    let library = with_library();
    let mut con = library.connect();
    for args in [&["ratelimit_hit", "1", "k", "9007199254740993", "60"][..], &["ratelimit_hit", "1", "k", "10", "60", "COST", "9223372036854775807"]] {
        let error = common::error_of(redis::cmd("FCALL").arg(args).query::<Value>(&mut con));
        assert_eq!(error, BEYOND, "{args:?}");
    }
    let exists: i64 = redis::cmd("EXISTS").arg("k").query(&mut con).unwrap();
    assert_eq!(exists, 0);
    // Invalid numbers get the module's errors, not the library's.
    let error = common::error_of(redis::cmd("FCALL").arg(&["ratelimit_hit", "1", "k", "0", "60"]).query::<Value>(&mut con));
    assert_eq!(error, "ERR limit must be an integer >= 1");
    // FCALL_RO serves PEEK (flag no-writes).
    let reply: Vec<i64> = redis::cmd("FCALL_RO").arg(&["ratelimit_peek", "1", "k", "5"]).query(&mut con).unwrap();
    assert_eq!(reply, [1, 0, 5, 0]);
}
