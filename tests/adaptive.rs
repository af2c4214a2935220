//! RATELIMIT.ADAPT and RATELIMIT.REPORT on a real server whose wall clock the test stands: the
//! controller's rules across a fleet of connections, bad calls that change nothing, and the
//! Functions library answering as the module does (the same random calls at the same instants).

use ratelimit_testkit as common;

use common::{error_text, info_field, load_library, Config, Rng, Server, TempDir, TestClock};
use redis::{Connection, ConnectionLike, RedisResult, Value};

/// 2027-01-15T08:00:00Z.
const START: i64 = 1_800_000_000_000;

fn adapt(con: &mut Connection, key: &str, args: &[&str]) -> RedisResult<Vec<i64>> {
    redis::cmd("RATELIMIT.ADAPT").arg(key).arg(args).query(con)
}

fn report(con: &mut Connection, key: &str, args: &[&str]) -> RedisResult<Option<Vec<i64>>> {
    redis::cmd("RATELIMIT.REPORT").arg(key).arg(args).query(con)
}

fn stat(con: &mut Connection, field: &str) -> i64 {
    info_field(con, "ratelimit", &format!("ratelimit_{field}")).unwrap().parse().unwrap()
}

/// A server with the module and the library, its clock standing at `START`.
fn at_start(dir: &TempDir) -> (TestClock, Server) {
    let clock = TestClock::at(&dir.0, START);
    let server = Server::with(Config { clock: Some(&clock), ..Config::default() });
    load_library(&mut server.connect());
    (clock, server)
}

/// Calls from every connection in turn, each as long as it is admitted: how many were.
fn take_all(cons: &mut [Connection], key: &str, bounds: &[&str]) -> i64 {
    let mut admitted = 0;
    for con in cons.iter_mut() {
        while adapt(con, key, bounds).unwrap()[0] == 1 {
            admitted += 1;
        }
    }
    admitted
}

const MINUTE: [&str; 4] = ["6", "60", "600", "60"];

#[test]
fn a_fleet_shares_one_cut_per_epoch_and_one_hold() {
    let dir = TempDir::new();
    let (clock, server) = at_start(&dir);
    let mut fleet: Vec<Connection> = (0..8).map(|_| server.connect()).collect();
    // A new limit of 60 a minute lets a sixth of it through at once, whoever asks.
    assert_eq!(take_all(&mut fleet, "llm", &MINUTE), 10);
    // Eight callers see the same burst's 429s: the fleet's limit is cut once.
    let cuts: i64 = fleet.iter_mut().map(|con| report(con, "llm", &["THROTTLED"]).unwrap().unwrap()[1]).sum();
    assert_eq!(cuts, 1);
    assert_eq!(report(&mut fleet[0], "llm", &["throttled"]).unwrap(), Some(vec![42, 0, 0]));
    assert_eq!(stat(&mut fleet[0], "adapt_decreases"), 1);
    // The next epoch: one caller's 429 with a Retry-After of 30 s holds every caller.
    let epoch = START + 60_000;
    clock.move_to(&mut fleet[0], epoch);
    assert_eq!(report(&mut fleet[3], "llm", &["THROTTLED", "RETRY", "30000"]).unwrap(), Some(vec![29, 1, 30_000]));
    clock.move_to(&mut fleet[0], epoch + 29_999);
    for con in &mut fleet {
        let denied = adapt(con, "llm", &MINUTE).unwrap();
        assert_eq!((denied[0], denied[1]), (0, 29));
        assert!(denied[3] > 1, "{denied:?}");
    }
    // From the hold's end the bucket fills from empty, however many callers try every second:
    // the first epoch (10 s) takes its share of 29 a minute, and the minute after the hold no
    // more than the 42 the fleet had before the outage (the limit recovers towards it).
    let mut admitted = vec![];
    for s in 0..60 {
        clock.move_to(&mut fleet[0], epoch + 30_000 + s * 1_000);
        admitted.push(take_all(&mut fleet, "llm", &MINUTE));
    }
    assert_eq!(admitted[..10].iter().sum::<i64>(), 4);
    let minute: i64 = admitted.iter().sum();
    assert!((30..=42).contains(&minute), "{minute}");
    assert_eq!((stat(&mut fleet[0], "adapt_holds"), stat(&mut fleet[0], "adapt_decreases")), (1, 2));
}

#[test]
fn growth_is_earned_by_use_and_capped_by_the_provider() {
    let dir = TempDir::new();
    let (clock, server) = at_start(&dir);
    let mut con = [server.connect()];
    let bounds = ["10", "100", "1000", "60"];
    // An epoch (10 s) that used less than half the limit's share of it (100 / 6 / 2) earns nothing.
    for _ in 0..8 {
        assert_eq!(adapt(&mut con[0], "llm", &bounds).unwrap()[0], 1);
    }
    clock.move_to(&mut con[0], START + 10_000);
    assert_eq!(adapt(&mut con[0], "llm", &bounds).unwrap()[1], 100);
    // Epochs used to the full follow CUBIC's curve from the start: level first, then ever
    // faster, at most doubling the rate admitted.
    let mut limits = vec![];
    for epoch in 1..10 {
        for s in 0..10 {
            clock.move_to(&mut con[0], START + epoch * 10_000 + s * 1_000);
            take_all(&mut con, "llm", &bounds);
        }
        clock.move_to(&mut con[0], START + (epoch + 1) * 10_000);
        limits.push(adapt(&mut con[0], "llm", &bounds).unwrap()[1]);
    }
    assert_eq!(limits, [100, 103, 112, 130, 158, 201, 260, 340, 441]);
    assert_eq!(stat(&mut con[0], "adapt_increases"), 8);
    // The provider's stated limit caps it; its remaining bounds the fleet until the reset.
    let capped = report(&mut con[0], "llm", &["OK", "LIMIT", "150", "REMAINING", "2", "RESET", "5000"]).unwrap();
    assert_eq!(capped, Some(vec![150, 0, 0]));
    assert_eq!(take_all(&mut con, "llm", &bounds), 2);
    // The call denied there waits for the provider's next token (its 148 missing back in 5 s: one
    // in 34 ms); the next one after it, by a token's time at 150 a minute (400 ms).
    assert_eq!(adapt(&mut con[0], "llm", &bounds).unwrap()[3], 434);
}

#[test]
fn bad_calls_change_nothing() {
    let dir = TempDir::new();
    let (_clock, server) = at_start(&dir);
    let mut con = server.connect();
    adapt(&mut con, "llm", &MINUTE).unwrap();
    let _: () = redis::cmd("RPUSH").arg("list").arg("x").query(&mut con).unwrap();
    let _: () = redis::cmd("SET").arg("text").arg("adapt:1:2").query(&mut con).unwrap();
    let snapshot = |con: &mut Connection| -> (Option<String>, i64) {
        let value = redis::cmd("GET").arg("llm").query(con).unwrap();
        (value, redis::cmd("PEXPIRETIME").arg("llm").query(con).unwrap())
    };
    let before = snapshot(&mut con);
    for (command, key, args, error) in [
        ("ADAPT", "llm", &["6", "60", "600"][..], "ERR wrong number of arguments for 'ratelimit.adapt' command"),
        ("ADAPT", "llm", &["6", "60", "600", "60", "COST", "0"], "ERR COST must be an integer >= 1"),
        ("ADAPT", "llm", &["60", "6", "600", "60"], "ERR floor <= start <= ceiling must hold"),
        (
            "ADAPT",
            "llm",
            &["6", "60", "600", "60", "TOKENS", "1"],
            "ERR syntax error: unknown option (expected COST, MS, PARTIAL, RESERVE or TURN)",
        ),
        ("ADAPT", "list", &MINUTE, "WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("ADAPT", "text", &MINUTE, "ERR value is not a ratelimit adaptive limit"),
        ("REPORT", "llm", &["429"], "ERR outcome must be OK or THROTTLED"),
        ("REPORT", "llm", &["OK", "RETRY", "5"], "ERR syntax error: RETRY needs THROTTLED"),
        ("REPORT", "llm", &["THROTTLED", "REMAINING", "5"], "ERR syntax error: REMAINING needs RESET"),
        ("REPORT", "text", &["THROTTLED"], "ERR value is not a ratelimit adaptive limit"),
    ] {
        let reply: RedisResult<Value> = redis::cmd(&format!("RATELIMIT.{command}")).arg(key).arg(args).query(&mut con);
        assert_eq!(error_text(&reply.unwrap_err()), error, "{command} {key} {args:?}");
    }
    assert_eq!(snapshot(&mut con), before);
    // A report on a limit nobody has learned steers nothing, and writes nothing.
    assert_eq!(report(&mut con, "nobody", &["THROTTLED", "RETRY", "1000"]).unwrap(), None);
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(dbsize, 3);
}

/// A reply, or its error's text.
fn answer(con: &mut Connection, cmd: &redis::Cmd) -> Result<Value, String> {
    con.req_packed_command(&cmd.get_packed_command()).map_err(|e| error_text(&e))
}

/// A reply ending with a reservation: the reply with the reservation's last field (its key's tag
/// and its id, which differ between the sides) cut off, and the whole reservation.
fn reserved(reply: Result<Value, String>) -> (Result<Value, String>, Option<String>) {
    let Ok(Value::Array(mut v)) = reply else { return (reply, None) };
    let Some(Value::BulkString(text)) = v.last().cloned() else { return (Ok(Value::Array(v)), None) };
    let text = String::from_utf8(text).unwrap();
    let fields = text.rsplit_once(':').unwrap().0.to_string();
    *v.last_mut().unwrap() = Value::BulkString(fields.into_bytes());
    (Ok(Value::Array(v)), Some(text))
}

/// An adaptive reservation's amount: its last number.
fn amount(reservation: &str) -> i64 {
    reservation.rsplit(':').nth(1).unwrap().parse().unwrap()
}

/// One random call's arguments after the key: mostly well formed, now and then junk.
fn random_args(rng: &mut Rng, adapt: bool, key: &str) -> Vec<String> {
    const JUNK: &[&str] = &[
        "COST",
        "MS",
        "PARTIAL",
        "RETRY",
        "LIMIT",
        "REMAINING",
        "RESET",
        "AGE",
        "OK",
        "-1",
        "0",
        "x",
        "",
        "1125899906842625",
    ];
    let pick = |rng: &mut Rng, from: &[&str]| from[rng.below(from.len())].to_string();
    let mut args: Vec<String> = if adapt {
        let mut a =
            vec![pick(rng, &["1", "5", "10"]), pick(rng, &["10", "20", "50"]), pick(rng, &["50", "100", "400"])];
        // Each key its own window mostly (another starts the limit afresh).
        let (window, ms) = match (key, rng.below(8)) {
            (_, 0) => (pick(rng, &["1", "2", "60", "1000"]), rng.below(2) == 0),
            ("a", _) => ("60".into(), false),
            ("b", _) => ("1".into(), false),
            _ => ("600".into(), true),
        };
        a.push(window);
        if rng.below(3) == 0 {
            a.extend(["COST".into(), pick(rng, &["1", "3", "12", "200"])]);
        }
        if ms {
            a.push("MS".into());
        }
        if rng.below(3) == 0 {
            a.push("PARTIAL".into());
        }
        if rng.below(3) == 0 {
            a.push("RESERVE".into());
        }
        if rng.below(3) == 0 {
            a.push("TURN".into());
        }
        a
    } else {
        // Mostly OK: growth needs epochs without a cut.
        let mut a = vec![pick(rng, &["OK", "OK", "ok", "OK", "OK", "OK", "THROTTLED", "throttled"])];
        if a[0] != "OK" && rng.below(3) == 0 {
            a.extend(["RETRY".into(), pick(rng, &["0", "500", "1500", "30000"])]);
        }
        if rng.below(3) == 0 {
            a.extend(["LIMIT".into(), pick(rng, &["1", "8", "30", "2000"])]);
        }
        if rng.below(3) == 0 {
            a.extend([
                "REMAINING".into(),
                pick(rng, &["0", "2", "40"]),
                "RESET".into(),
                pick(rng, &["0", "700", "9000"]),
            ]);
        }
        // How long ago the call was decided: before or after the epoch's cut.
        if rng.below(2) == 0 {
            a.extend(["AGE".into(), pick(rng, &["0", "0", "5", "400", "20000", "1099511627776"])]);
        }
        a
    };
    if rng.below(6) == 0 {
        let at = rng.below(args.len() + 1);
        args.insert(at, pick(rng, JUNK));
    }
    args
}

#[test]
fn a_throttle_on_a_call_decided_after_the_cut_cuts_again_in_both() {
    let dir = TempDir::new();
    let (clock, server) = at_start(&dir);
    let mut con = server.connect();
    // A state written before the cut's time was kept (15 fields), cut in its epoch: no report in
    // that epoch cuts again, whatever its AGE; the next epoch's first does, and keeps its time.
    let old = format!("adapt:60000:6:600:42:60:0:{START}:10:1:0:{START}:-1:0:0:0");
    for side in ["m", "l"] {
        let _: () = redis::cmd("SET").arg(format!("{side}:old")).arg(&old).query(&mut con).unwrap();
    }
    let mut replies: [Vec<Vec<i64>>; 2] = Default::default();
    for (at, age) in [(START + 5_000, "0"), (START + 10_000, "9000"), (START + 10_010, "10"), (START + 10_020, "15")] {
        clock.move_to(&mut con, at);
        for (seen, (side, cmd)) in
            replies.iter_mut().zip([("m", redis::cmd("RATELIMIT.REPORT")), ("l", fcall("ratelimit_report"))])
        {
            let key = format!("{side}:old");
            seen.push(cmd.clone().arg(&key).arg(&["THROTTLED", "AGE", age]).query(&mut con).unwrap());
        }
    }
    let stored: Vec<String> =
        ["m:old", "l:old"].iter().map(|key| redis::cmd("GET").arg(key).query(&mut con).unwrap()).collect();
    // 42, not cut in its epoch; cut to 29 at 10 s; not by a call decided at that instant; to 20
    // by one decided at 10.005 s, after the cut.
    assert_eq!(replies[0], vec![vec![42, 0, 0], vec![29, 1, 0], vec![29, 0, 0], vec![20, 1, 0]]);
    assert!(stored[0].ends_with(&format!(":{}", START + 10_020)), "{}", stored[0]);
    assert_eq!((&replies[0], &stored[0]), (&replies[1], &stored[1]));
}

#[test]
fn the_longest_state_is_stored_by_both() {
    // A 1 ms window lets the counts reach 2^50, and a denial sets the line's end: a state of over
    // 200 bytes, which the module once failed to write ("internal error").
    let dir = TempDir::new();
    let (_clock, server) = at_start(&dir);
    let mut con = server.connect();
    let big = "1125899906842624";
    let adapt_args = [big, big, big, "1", "MS", "COST", big];
    let report_args = ["OK", "LIMIT", big, "REMAINING", big, "RESET", "1000"];
    let mut stored = Vec::new();
    for (side, adapt_cmd, report_cmd) in [
        ("m", redis::cmd("RATELIMIT.ADAPT"), redis::cmd("RATELIMIT.REPORT")),
        ("l", fcall("ratelimit_adapt"), fcall("ratelimit_report")),
    ] {
        let key = format!("{side}:longest");
        let first: Vec<i64> = adapt_cmd.clone().arg(&key).arg(&adapt_args).query(&mut con).unwrap();
        let _: Vec<i64> = report_cmd.clone().arg(&key).arg(&report_args).query(&mut con).unwrap();
        // At the same instant the debt of the first call denies the second.
        let second: Vec<i64> = adapt_cmd.clone().arg(&key).arg(&adapt_args).query(&mut con).unwrap();
        assert_eq!((first[0], second[0]), (1, 0), "{side}");
        let text: String = redis::cmd("GET").arg(&key).query(&mut con).unwrap();
        stored.push((first, second, text));
    }
    assert!(stored[0].2.len() > 200, "{}", stored[0].2);
    assert_eq!(stored[0], stored[1]);
}

fn fcall(function: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("FCALL");
    cmd.arg(function).arg(1);
    cmd
}

#[test]
fn the_library_answers_as_the_module_does() {
    let (mut rng, _) = Rng::from_env();
    let dir = TempDir::new();
    let (clock, server) = at_start(&dir);
    let mut con = server.connect();
    for side in ["m", "l"] {
        let _: () = redis::cmd("RPUSH").arg(format!("{side}:list")).arg("x").query(&mut con).unwrap();
        let _: () = redis::cmd("SET").arg(format!("{side}:text")).arg("adapt:1").query(&mut con).unwrap();
    }
    let (mut now, mut compared, mut admitted, mut cuts, mut settled) = (START, 0, 0, 0, 0);
    // Reservations not yet settled: the key, the module's and the library's.
    let mut pending: Vec<(&str, String, String)> = Vec::new();
    let state = |side: &str, key: &str, con: &mut Connection| -> (Option<String>, i64) {
        let value = redis::cmd("GET").arg(format!("{side}:{key}")).query(con).unwrap_or(None);
        (value, redis::cmd("PEXPIRETIME").arg(format!("{side}:{key}")).query(con).unwrap())
    };
    for _ in 0..3_000 {
        if rng.below(3) == 0 {
            now += [1, 7, 400, 999, 1_000, 20_000, 61_000][rng.below(7)];
            clock.move_to(&mut con, now);
        }
        if !pending.is_empty() && rng.below(5) == 0 {
            // A reservation settled (now and then again, or on another key), as used says.
            let i = rng.below(pending.len());
            let (reserved_on, m, l) = pending[i].clone();
            if rng.below(4) != 0 {
                pending.swap_remove(i);
            }
            let key = if rng.below(10) == 0 { "b" } else { reserved_on };
            let a = amount(&m);
            let used = [0, a / 2, a, a + 3, a * 4][rng.below(5)];
            let module = answer(&mut con, redis::cmd("RATELIMIT.SETTLE").arg(format!("m:{key}")).arg(&m).arg(used));
            let library = answer(
                &mut con,
                redis::cmd("FCALL").arg("ratelimit_settle").arg(1).arg(format!("l:{key}")).arg(&l).arg(used),
            );
            assert_eq!(module, library, "SETTLE {key} {m} {used} at {now}");
            assert_eq!(state("m", key, &mut con), state("l", key, &mut con), "SETTLE {key} {m} {used} at {now}");
            settled += i64::from(module.is_ok());
            compared += 1;
            continue;
        }
        let adapting = rng.below(3) != 0;
        let key = ["a", "a", "b", "c", "list", "text"][rng.below(6)];
        let args = random_args(&mut rng, adapting, key);
        let (command, function) =
            if adapting { ("RATELIMIT.ADAPT", "ratelimit_adapt") } else { ("RATELIMIT.REPORT", "ratelimit_report") };
        let (module, m) = reserved(answer(&mut con, redis::cmd(command).arg(format!("m:{key}")).arg(&args)));
        let (library, l) =
            reserved(answer(&mut con, redis::cmd("FCALL").arg(function).arg(1).arg(format!("l:{key}")).arg(&args)));
        assert_eq!(module, library, "{command} {key} {args:?} at {now}");
        assert_eq!(state("m", key, &mut con), state("l", key, &mut con), "{command} {key} {args:?} at {now}");
        if let (Some(m), Some(l)) = (m, l) {
            pending.push((key, m, l));
        }
        compared += 1;
        match module {
            Ok(Value::Array(v)) if adapting && v[0] == Value::Int(1) => admitted += 1,
            Ok(Value::Array(v)) if !adapting && v[1] == Value::Int(1) => cuts += 1,
            _ => {}
        }
    }
    // The run reached the paths that matter.
    let (grown, held) = (stat(&mut con, "adapt_increases"), stat(&mut con, "adapt_holds"));
    let (back, charged) = (stat(&mut con, "refunded"), stat(&mut con, "overage"));
    let seen = format!(
        "{admitted} admitted, {cuts} cuts, {grown} increases, {held} holds, {settled} settled: {back} refunds, {charged} overages"
    );
    eprintln!("{seen}");
    let reached = admitted > 300 && cuts > 20 && grown > 5 && held > 3 && back > 10 && charged > 20;
    assert!(compared == 3_000 && reached, "{seen}");
}
