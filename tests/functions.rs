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

/// The module's reply and the library's agree: errors word for word, numbers exactly except
/// `reset_ms` (HIT's and PEEK's 4th number, the 3rd of each HITALL triple), which may differ by
/// the few ms between the two calls.
fn agree(hitall: bool, module: &redis::RedisResult<Value>, library: &redis::RedisResult<Value>) -> bool {
    fn numbers(value: &Value) -> Option<Vec<i64>> {
        match value {
            Value::Int(n) => Some(vec![*n]),
            Value::Array(items) => items.iter().map(numbers).collect::<Option<Vec<_>>>().map(|v| v.concat()),
            _ => None,
        }
    }
    let timing = |i: usize| if hitall { i > 0 && i % 3 == 0 } else { i == 3 };
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
        common::run_all(con, &["RPUSH fz:list x", "SET fz:text abc", "SET fz:5 3", "SET fz:6 -7"]);
    }
    let (mut compared, mut mismatches) = (0, Vec::new());
    for i in 0..4_000 {
        let (command, function) = [("RATELIMIT.HIT", "ratelimit_hit"), ("RATELIMIT.PEEK", "ratelimit_peek"), ("RATELIMIT.HITALL", "ratelimit_hitall")]
            [rng.below(3)];
        let hitall = command == "RATELIMIT.HITALL";
        let keys: Vec<String> = (0..if hitall { 1 + rng.below(3) } else { 1 }).map(|_| rng.key()).collect();
        let mut args: Vec<String> = Vec::new();
        // Half the vectors start well formed, so that the writes get exercised.
        if rng.below(2) == 0 {
            let number = |rng: &mut Rng| ["1", "3", "10", "250", "60"][rng.below(5)].to_string();
            let pairs = if command == "RATELIMIT.PEEK" { 0 } else { keys.len() };
            if command == "RATELIMIT.PEEK" {
                args.push(number(&mut rng));
            }
            for _ in 0..pairs {
                args.push(number(&mut rng));
                args.push(number(&mut rng));
            }
        }
        for _ in 0..rng.below(5) {
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
        if !agree(hitall, &a, &b) {
            mismatches.push(format!("vector {i}: {command} {keys:?} {args:?}: module {a:?}, library {b:?}"));
        }
    }
    // The same keys, values and expiry instants (within the clock's tick and the calls' skew).
    let keys: Vec<String> = redis::cmd("KEYS").arg("fz:*").query(&mut m).unwrap();
    for key in keys.iter().filter(|k| !k.ends_with("list")) {
        let (value_m, expiry_m) = value_and_expiry(&mut m, key);
        let (value_l, expiry_l) = value_and_expiry(&mut l, key);
        if value_m != value_l || (expiry_m - expiry_l).abs() > 5 {
            mismatches.push(format!("key {key}: module {value_m:?} expires {expiry_m}, library {value_l:?} expires {expiry_l}"));
        }
    }
    let library_keys: Vec<String> = redis::cmd("KEYS").arg("fz:*").query(&mut l).unwrap();
    assert_eq!(library_keys.len(), keys.len(), "the same keys exist");
    eprintln!("{compared} calls and {} keys compared, {} mismatches (seed {seed})", keys.len(), mismatches.len());
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
