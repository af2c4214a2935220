//! Thousands of random argument vectors to every command: the server never dies, every error is
//! a well-formed Redis error, every success has the documented shape, and no key is ever left
//! without a TTL. The seed is printed so that a failure can be replayed (RATELIMIT_FUZZ_SEED).

use ratelimit_testkit as common;

use common::{pttl, Rng, Server};
use redis::Value;

/// This fuzz test's words and keys.
trait Words {
    fn word(&mut self) -> Vec<u8>;
    fn key(&mut self) -> Vec<u8>;
}

impl Words for Rng {
    fn word(&mut self) -> Vec<u8> {
        const WORDS: &[&str] = &[
            "COST",
            "cost",
            "CoSt",
            "MS",
            "ms",
            "LIMIT",
            "limit",
            "0",
            "1",
            "2",
            "-1",
            "10",
            "60",
            "250",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "99999999999999999999",
            "4611686018427387903",
            "",
            "1.5",
            " 1",
            "+1",
            "01",
            "1e3",
            "NaN",
            "fz:",
            "*",
            "?",
            "TOKENS",
            "tokens",
            "PEEK",
            "SLIDE",
            "ID",
            "slide",
            "0.5",
            "1e-3",
            "inf",
            "86400",
            "200000000",
            "RESERVE",
            "reserve",
            "-4000",
            "ALIGN",
            "align",
            "TZ",
            "tz",
            "day",
            "Week",
            "month",
            "YEAR",
            "UTC",
            "+05:30",
            "+99:99",
            "America/New_York",
            "../../../etc/passwd",
        ];
        match self.below(4) {
            0 => (0..self.below(12)).map(|_| self.next_u64() as u8).collect(),
            1 => (self.next_u64() as i64 >> self.below(64)).to_string().into_bytes(),
            _ => WORDS[self.below(WORDS.len())].as_bytes().to_vec(),
        }
    }

    fn key(&mut self) -> Vec<u8> {
        match self.below(6) {
            0 => b"fz:list".to_vec(),
            1 => b"fz:text".to_vec(),
            2 => [&b"fz:"[..], &self.word()].concat(),
            _ => format!("fz:{}", self.below(20)).into_bytes(),
        }
    }
}

/// Whether a limiter call (HIT, SLIDE, GCRA) asks for a reservation, read as the module reads
/// it: options come after the positional arguments (a key or a limit may spell RESERVE), and
/// an option's value (COST's, TOKENS', TZ's) is no option.
fn asks_to_reserve(command: &str, args: &[String]) -> bool {
    let positional = if command == "RATELIMIT.GCRA" { 4 } else { 3 };
    let mut options = args.iter().skip(positional);
    while let Some(option) = options.next() {
        match option.to_ascii_uppercase().as_str() {
            "RESERVE" => return true,
            "COST" | "TOKENS" | "TZ" => {
                options.next();
            }
            _ => {}
        }
    }
    false
}

fn is_redis_error(text: &str) -> bool {
    text.starts_with("ERR ") || text.starts_with("WRONGTYPE ")
}

#[test]
fn random_arguments_never_hurt_the_server() {
    let (mut rng, seed) = Rng::from_env();
    // Some keys in shadow mode, so that its paths meet the same vectors (fz:1 and fz:10 to fz:19...).
    let server = Server::with(common::Config {
        module_args: &["CL.THROTTLE"],
        args: &["--ratelimit.shadow", "fz:1 fs:1 fl:1 fg:1"],
        ..Default::default()
    });
    let mut con = server.connect();
    let _: () = redis::cmd("RPUSH").arg("fz:list").arg("x").query(&mut con).unwrap();
    let _: () = redis::cmd("SET").arg("fz:text").arg("abc").query(&mut con).unwrap();

    let (mut ok, mut errors, mut settled) = (0, 0, 0);
    // Reservations handed out so far, and their keys, for SETTLE.
    let mut reservations: Vec<(Vec<Vec<u8>>, Vec<u8>)> = Vec::new();
    for i in 0..6_000 {
        let command = [
            "RATELIMIT.HIT",
            "RATELIMIT.HIT",
            "RATELIMIT.HITALL",
            "RATELIMIT.PEEK",
            "RATELIMIT.AUDIT",
            "RATELIMIT.REPAIR",
            "RATELIMIT.GCRA",
            "CL.THROTTLE",
            "RATELIMIT.SLIDE",
            "RATELIMIT.ACQUIRE",
            "RATELIMIT.RELEASE",
            "RATELIMIT.RENEW",
            "RATELIMIT.TOP",
            "RATELIMIT.SETTLE",
            "RATELIMIT.SETTLE",
        ][rng.below(15)];
        let buckets = command == "RATELIMIT.GCRA" || command == "CL.THROTTLE";
        let slide = command == "RATELIMIT.SLIDE";
        let lease = ["RATELIMIT.ACQUIRE", "RATELIMIT.RELEASE", "RATELIMIT.RENEW"].contains(&command);
        let settle = command == "RATELIMIT.SETTLE";
        let mut cmd = redis::cmd(command);
        let keyed = ["RATELIMIT.HIT", "RATELIMIT.PEEK", "RATELIMIT.SLIDE"].contains(&command) || buckets || lease;
        // A settle of a reservation made before, on its key or another, now and then with a
        // byte changed; or of junk.
        if settle && !reservations.is_empty() && rng.below(6) != 0 {
            let (keys, mut reservation) = reservations[rng.below(reservations.len())].clone();
            if rng.below(4) == 0 {
                let at = rng.below(reservation.len());
                reservation[at] = rng.next_u64() as u8;
            }
            cmd.arg(if rng.below(8) == 0 { vec![rng.key()] } else { keys }).arg(reservation);
        } else if keyed && rng.below(8) != 0 {
            // Sliding windows and leases mostly on keys of their own, so that their writes get
            // exercised.
            let key = rng.key();
            let own = if slide { &b"fs:"[..] } else { b"fl:" };
            cmd.arg(if (slide || lease) && rng.below(4) != 0 { [own, &key[3..]].concat() } else { key });
        }
        // Half the vectors start well-formed, so that the options and the writes get exercised.
        let well_formed = rng.below(2) == 0;
        if well_formed {
            let number = |rng: &mut Rng| ["1", "3", "10", "250", "60"][rng.below(5)];
            match command {
                // HIT's windows laid on the clock too, in named zones (the IANA database's).
                "RATELIMIT.HIT" if rng.below(3) == 0 => cmd
                    .arg(number(&mut rng))
                    .arg(["day", "week", "month", "year"][rng.below(4)])
                    .arg("TZ")
                    .arg(["America/New_York", "Asia/Kolkata", "+05:30", "UTC", "Pacific/Chatham"][rng.below(5)]),
                "RATELIMIT.HIT" | "RATELIMIT.SLIDE" | "RATELIMIT.ACQUIRE" => {
                    cmd.arg(number(&mut rng)).arg(number(&mut rng))
                }
                "RATELIMIT.RELEASE" => cmd.arg(["a", "b", "c"][rng.below(3)]),
                "RATELIMIT.RENEW" => cmd.arg(["a", "b", "c"][rng.below(3)]).arg(number(&mut rng)),
                "RATELIMIT.PEEK" => cmd.arg(number(&mut rng)),
                "RATELIMIT.HITALL" => {
                    let (a, b) = (rng.key(), rng.key());
                    cmd.arg(2).arg(&a).arg(&b);
                    for _ in 0..4 {
                        cmd.arg(number(&mut rng));
                    }
                    // A request's tokens on the last keys, reserved now and then.
                    if rng.below(2) == 0 {
                        cmd.arg("TOKENS").arg(number(&mut rng)).arg(["1", "2", "0", "3"][rng.below(4)]);
                        if rng.below(2) == 0 {
                            cmd.arg("RESERVE");
                        }
                    }
                    &mut cmd
                }
                "RATELIMIT.GCRA" => {
                    cmd.arg(number(&mut rng)).arg(number(&mut rng)).arg(["1", "0.5", "60"][rng.below(3)])
                }
                "CL.THROTTLE" => cmd.arg(number(&mut rng)).arg(number(&mut rng)).arg(number(&mut rng)),
                "RATELIMIT.AUDIT" => cmd.arg("fz:"),
                "RATELIMIT.TOP" => cmd.arg(["DENIED", "ADMITTED"][rng.below(2)]).arg("COUNT").arg(number(&mut rng)),
                "RATELIMIT.SETTLE" => cmd.arg(["0", "1", "7", "300", "9223372036854775807"][rng.below(5)]),
                _ => cmd.arg("fz:").arg(number(&mut rng)),
            };
            // Reservations and give-backs on the limiters.
            if ["RATELIMIT.HIT", "RATELIMIT.SLIDE", "RATELIMIT.GCRA"].contains(&command) && rng.below(2) == 0 {
                let token = if command == "RATELIMIT.GCRA" { "TOKENS" } else { "COST" };
                cmd.arg(token).arg(["-3", "2", "7", "-9223372036854775808"][rng.below(4)]);
            }
            if ["RATELIMIT.HIT", "RATELIMIT.SLIDE", "RATELIMIT.GCRA"].contains(&command) && rng.below(2) == 0 {
                cmd.arg("RESERVE");
            }
            if command == "RATELIMIT.GCRA" && rng.below(3) == 0 {
                cmd.arg("PARTIAL");
            }
        }
        for _ in 0..rng.below(if well_formed { 3 } else { 7 }) {
            cmd.arg(rng.word());
        }
        let shown: Vec<String> = cmd
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                redis::Arg::Cursor => "<cursor>".into(),
            })
            .collect();
        let context = || format!("seed {seed}, vector {i}: {shown:?}");
        let mut reply = cmd.query::<Value>(&mut con);
        // RESERVE's reply ends with the reservation, or nil when denied: kept for SETTLE, and the
        // numbers before it checked as any reply's.
        let limiter = ["RATELIMIT.HIT", "RATELIMIT.SLIDE", "RATELIMIT.GCRA"].contains(&command);
        let reserved = limiter && asks_to_reserve(command, &shown[1..]);
        // A HITALL's: on its last keys, one per entry (its two keys are shown[2] and shown[3]).
        if let (Ok(Value::Array(items)), "RATELIMIT.HITALL") = (&reply, command) {
            if let Some(Value::BulkString(r)) = items.last() {
                let entries = r.split(|&b| b == b',').count();
                let keys = shown[2..4].iter().skip(2 - entries.min(2)).map(|k| k.clone().into_bytes()).collect();
                reservations.push((keys, r.clone()));
            }
        }
        if let (Ok(Value::Array(items)), true, false) = (&mut reply, reserved, settle) {
            match items.pop() {
                Some(Value::BulkString(r)) => {
                    let n: i64 = redis::from_redis_value(&items[0]).unwrap();
                    assert!(n == i64::from(!buckets), "{}: a reservation for a denied call", context());
                    reservations.push((vec![shown[1].clone().into_bytes()], r));
                }
                Some(Value::Nil) => {}
                other => panic!("{}: no reservation in the reply, {other:?}", context()),
            }
        }
        match reply {
            Ok(Value::Array(items)) if settle => {
                // The reserving command's numbers, what was applied, and the shape; one such per key
                // for several.
                let replies: Vec<Value> = match items.first() {
                    Some(Value::Array(_)) => items,
                    _ => vec![Value::Array(items)],
                };
                for reply in replies {
                    let (n, (kind, _, _)) = common::shaped(reply).unwrap();
                    assert!((n.len() == 5 || n.len() == 6) && n[2] >= 0, "{}: {n:?}", context());
                    assert!(["fixed", "sliding", "bucket"].contains(&kind.as_str()), "{}: {kind}", context());
                }
                settled += 1;
                ok += 1;
            }
            Ok(Value::Array(mut items)) if command == "RATELIMIT.HITALL" => {
                assert!(matches!(items[0], Value::Int(0 | 1)) && items.len() >= 2, "{}: {items:?}", context());
                // With TOKENS and RESERVE, a reservation last: text when admitted, else nil.
                match items.last() {
                    Some(Value::BulkString(_)) => assert_eq!(items[0], Value::Int(1), "{}", context()),
                    Some(Value::Nil) => assert_eq!(items[0], Value::Int(0), "{}", context()),
                    _ => {}
                }
                if matches!(items.last(), Some(Value::BulkString(_) | Value::Nil)) {
                    items.pop();
                }
                // [count, remaining, reset_ms], or with SLIDE [count, remaining, retry_after_ms, reset_ms].
                for per_key in &items[1..] {
                    let n: Vec<i64> = redis::from_redis_value(per_key).unwrap();
                    let shaped = match n.len() {
                        3 => n[1] >= 0 && n[2] >= 0,
                        4 => n[1] >= 0 && n[2] >= -1 && n[3] >= 0,
                        _ => false,
                    };
                    assert!(shaped, "{}: {n:?}", context());
                }
                ok += 1;
            }
            Ok(Value::Array(items)) if buckets => {
                let n: Vec<i64> = redis::from_redis_value(&Value::Array(items)).unwrap();
                // CL.THROTTLE gives back as redis-cell computes: a TAT left less than 2 ms before
                // now reads as more than the capacity remaining (redis-cell answers the same).
                let cell_give_back =
                    command == "CL.THROTTLE" && shown.get(5).and_then(|q| q.parse::<i64>().ok()).is_some_and(|q| q < 0);
                let remaining = |r: i64| (0..=n[1]).contains(&r) || cell_give_back && r >= 0;
                let shaped = n.len() == 5 && (n[0] == 0 || n[0] == 1) && n[1] >= 1 && remaining(n[2]);
                // PARTIAL's: the tokens granted last, none when limited.
                let partial = n.len() == 6 && n[5] >= i64::from(n[0] == 0) && (n[0] == 0 || n[5] == 0);
                let shaped = shaped || partial && remaining(n[2]);
                assert!(shaped && n[3] >= -1 && n[4] >= 0, "{}: {n:?}", context());
                ok += 1;
            }
            Ok(Value::Array(items)) if command == "RATELIMIT.ACQUIRE" => {
                // [acquired, in_use, remaining, ms, id or nil].
                let n: Vec<i64> = items[..4].iter().map(|v| redis::from_redis_value(v).unwrap()).collect();
                let id_shaped = matches!((&items[4], n[0]), (Value::BulkString(_), 1) | (Value::Nil, 0));
                assert!(
                    items.len() == 5 && n[1] >= 0 && n[2] >= 0 && n[3] >= 0 && id_shaped,
                    "{}: {items:?}",
                    context()
                );
                ok += 1;
            }
            Ok(Value::Int(n)) if lease => {
                // RELEASE: 1 or 0; RENEW: the lease's ms, or -1.
                assert!(n >= -1 && (command == "RATELIMIT.RENEW" || n <= 1), "{}: {n}", context());
                ok += 1;
            }
            Ok(Value::Array(items)) if slide => {
                let n: Vec<i64> = redis::from_redis_value(&Value::Array(items)).unwrap();
                // [allowed, count, remaining, retry_after_ms, reset_ms]; reset_ms -1 only with PEEK.
                let shaped = n.len() == 5 && (n[0] == 0 || n[0] == 1) && n[1] >= 0 && n[2] >= 0;
                // retry_after_ms: -1 when admitted; when denied, -1 (never) or the ms to wait.
                let retry = if n[0] == 1 { n[3] == -1 } else { n[3] == -1 || n[3] > 0 };
                assert!(shaped && retry, "{}: {n:?}", context());
                assert!(n[4] >= -1, "{}: {n:?}", context());
                ok += 1;
            }
            Ok(Value::Array(items)) if command == "RATELIMIT.HIT" || command == "RATELIMIT.PEEK" => {
                let numbers: Vec<i64> = redis::from_redis_value(&Value::Array(items)).unwrap();
                assert!(numbers.len() == 4 && (numbers[0] == 0 || numbers[0] == 1), "{}: {numbers:?}", context());
                // reset_ms is -1 only where PEEK shows a counter without TTL.
                assert!(numbers[2] >= 0 && numbers[3] >= -1, "{}: {numbers:?}", context());
                ok += 1;
            }
            Ok(reply @ Value::Array(_)) if command == "RATELIMIT.TOP" => {
                for e in common::top_entries(reply) {
                    assert!(e.count >= e.error && e.error >= 0, "{}: {e:?}", context());
                }
                ok += 1;
            }
            Ok(reply @ Value::Array(_)) => {
                let field = if command == "RATELIMIT.AUDIT" { "leaked" } else { "repaired" };
                common::walk_reply(reply, field);
                ok += 1;
            }
            Ok(other) => panic!("{}: unexpected reply {other:?}", context()),
            Err(e) => {
                let text = common::error_of(Err::<(), _>(e));
                assert!(is_redis_error(&text), "{}: {text}", context());
                assert!(!text.contains("internal error"), "{}: {text}", context());
                errors += 1;
            }
        }
        if i % 500 == 0 {
            let pong: String = redis::cmd("PING").query(&mut con).unwrap();
            assert_eq!(pong, "PONG");
        }
    }
    eprintln!("{ok} replies ({settled} settles), {errors} errors");
    assert!(settled > 20, "too few settles got through: {settled}");
    assert!(ok > 100 && errors > 100, "the vectors should exercise both paths: {ok} ok, {errors} errors");

    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    for key in keys {
        if key == b"fz:list" || key == b"fz:text" {
            continue;
        }
        let key = String::from_utf8_lossy(&key).into_owned();
        let ttl: i64 = redis::cmd("PTTL").arg(key.as_bytes()).query(&mut con).unwrap();
        assert_ne!(ttl, -1, "{key} was left without a TTL (seed {seed})");
    }
    assert_eq!(pttl(&mut con, "fz:list"), -1, "a list is never given a TTL");
}
