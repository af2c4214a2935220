//! The monitoring as an operator runs it (monitoring/README.md): redis_exporter, Debian 12's
//! (1.45) and Debian 13's (1.69), with monitoring/exporter/ratelimit-metrics.lua, against a server
//! with the module; Debian 12's Prometheus scraping the exporter, with the alerting and recording
//! rules loaded, running every query of the Grafana dashboard. The programs are Debian's packages,
//! unpacked under target/monitoring/ by `make monitoring-tools`.

use ratelimit_testkit as common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{hit, reserve, run_all, settle, wait_for, Config, Server, TempDir};
use redis::{Connection, Value};

const EXPORTERS: [&str; 2] = ["redis-exporter-1.45", "redis-exporter-1.69"];

fn project(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn tool(folder: &str, program: &str) -> PathBuf {
    let path = project(&format!("target/monitoring/{folder}/{program}"));
    assert!(path.exists(), "{} not found: run `make monitoring-tools`", path.display());
    path
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A program of the test's, killed when the test ends, also when it fails.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(program: &Path, args: &[String], log: &Path) -> Running {
    let log = std::fs::File::create(log).unwrap();
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    Running(child)
}

/// An HTTP GET on loopback: the body of a 200 answer, None for anything else (not up yet).
fn get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    (head.split(' ').nth(1) == Some("200")).then(|| body.to_string())
}

fn percent_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// redis_exporter from `folder` against `server`, with `options`, once it answers: the process,
/// and the port of its /metrics.
fn exporter(folder: &str, server: &Server, options: &[String], log: &Path) -> (Running, u16) {
    let port = free_port();
    let mut args = vec![
        format!("--redis.addr=redis://127.0.0.1:{}", server.port),
        format!("--web.listen-address=127.0.0.1:{port}"),
    ];
    args.extend_from_slice(options);
    let running = start(&tool(folder, "prometheus-redis-exporter"), &args, log);
    wait_for(&format!("{folder} to answer"), Duration::from_secs(30), || get(port, "/metrics").is_some());
    (running, port)
}

fn the_script() -> String {
    format!("--script={}", project("monitoring/exporter/ratelimit-metrics.lua").display())
}

/// INFO ratelimit's numeric fields.
fn info_numbers(con: &mut Connection) -> BTreeMap<String, f64> {
    common::info_fields(con, "ratelimit")
        .into_iter()
        .filter_map(|(name, value)| Some((name, value.parse::<u64>().ok()? as f64)))
        .collect()
}

/// The exporter's `redis_script_values` series, by their `key` label.
fn script_values(metrics: &str) -> BTreeMap<String, f64> {
    metrics
        .lines()
        .filter(|line| line.starts_with("redis_script_values{"))
        .map(|line| {
            let key = line.split("key=\"").nth(1).and_then(|rest| rest.split('"').next()).unwrap();
            let value = line.rsplit(' ').next().unwrap().parse().unwrap();
            (key.to_string(), value)
        })
        .collect()
}

/// Calls that move every counter a test can move in a few seconds (all but walks_refused, which
/// needs walks held open): admitted and denied calls of every limiter, shadow mode, reservations
/// settled under, over and after their window, leases released, renewed, lost and expired, the
/// guard and the walks.
fn known_sequence(con: &mut Connection) {
    run_all(con, &["SET rl:leaked 5", "CONFIG SET ratelimit.shadow rl:shadow:"]);
    let _: () = redis::cmd("CONFIG").arg(&["SET", "ratelimit.guard", "rl:guarded: 60"]).query(con).unwrap();
    for _ in 0..3 {
        hit(con, "rl:hit", &["2", "60"]).unwrap();
        hit(con, "rl:shadow:hit", &["1", "60"]).unwrap();
        let _: Value =
            redis::cmd("RATELIMIT.HITALL").arg(&["2", "rl:a", "rl:b", "2", "60", "2", "60"]).query(con).unwrap();
        let _: Value = redis::cmd("RATELIMIT.SLIDE").arg(&["rl:slide", "2", "60"]).query(con).unwrap();
        let _: Value = redis::cmd("RATELIMIT.GCRA").arg(&["rl:gcra", "1", "1", "60"]).query(con).unwrap();
        let _: Value = redis::cmd("CL.THROTTLE").arg(&["rl:cell", "1", "1", "60"]).query(con).unwrap();
        let _: Value = redis::cmd("RATELIMIT.ACQUIRE").arg(&["rl:busy", "2", "60"]).query(con).unwrap();
    }
    hit(con, "rl:leaked", &["10", "60"]).unwrap();
    run_all(con, &["RATELIMIT.PEEK rl:hit 2", "SET rl:guarded:counter 1"]);
    let (_, under) = reserve(con, "RATELIMIT.HIT", "rl:under", &["100", "60", "COST", "10"]).unwrap();
    settle(con, "rl:under", &under.unwrap(), 4).unwrap();
    let (_, over) = reserve(con, "RATELIMIT.HIT", "rl:over", &["100", "60", "COST", "10"]).unwrap();
    settle(con, "rl:over", &over.unwrap(), 20).unwrap();
    let (_, late) = reserve(con, "RATELIMIT.HIT", "rl:late", &["100", "100", "MS", "COST", "10"]).unwrap();
    let lease = acquire(con, "rl:lease", &["2", "60"]);
    // Beside a lease that stays, so that the key stays and the short one is pruned as expired.
    acquire(con, "rl:short", &["3", "60"]);
    let short = acquire(con, "rl:short", &["3", "100", "MS"]);
    run_all(con, &[&format!("RATELIMIT.RENEW rl:lease {lease} 60"), &format!("RATELIMIT.RELEASE rl:lease {lease}")]);
    run_all(con, &[&format!("RATELIMIT.RELEASE rl:lease {lease}")]);
    std::thread::sleep(Duration::from_millis(250));
    settle(con, "rl:late", &late.unwrap(), 0).unwrap();
    run_all(con, &[&format!("RATELIMIT.RENEW rl:short {short} 60")]);
    acquire(con, "rl:short", &["3", "60"]);
    run_all(con, &["RATELIMIT.AUDIT rl:", "RATELIMIT.REPAIR rl: 60"]);
}

/// ACQUIRE's lease id ("" when denied).
fn acquire(con: &mut Connection, key: &str, args: &[&str]) -> String {
    let reply: Vec<Value> = redis::cmd("RATELIMIT.ACQUIRE").arg(key).arg(args).query(con).unwrap();
    redis::from_redis_value::<Option<String>>(&reply[4]).unwrap().unwrap_or_default()
}

/// After `known_sequence`, the counters it must have moved.
const MOVED: [&str; 23] = [
    "ratelimit_hits",
    "ratelimit_denied",
    "ratelimit_healed",
    "ratelimit_slide_denied",
    "ratelimit_gcra_denied",
    "ratelimit_peeks",
    "ratelimit_reserved",
    "ratelimit_settled",
    "ratelimit_refunded",
    "ratelimit_refunds_dropped",
    "ratelimit_overage",
    "ratelimit_acquire_denied",
    "ratelimit_released",
    "ratelimit_release_late",
    "ratelimit_renewed",
    "ratelimit_renew_lost",
    "ratelimit_leases_expired",
    "ratelimit_leases_in_flight",
    "ratelimit_audits",
    "ratelimit_repairs",
    "ratelimit_guard_heals",
    "ratelimit_decisions_cl_throttle_denied",
    "ratelimit_decisions_hit_shadow_denied",
];

fn module_with_everything() -> Server {
    Server::with(Config { module_args: &["CL.THROTTLE"], ..Config::default() })
}

#[test]
fn the_exporter_script_gives_every_numeric_info_field_as_info_says_it() {
    if common::module_only("INFO ratelimit") {
        return;
    }
    let server = module_with_everything();
    let mut con = server.connect();
    known_sequence(&mut con);
    let dir = TempDir::new();
    for folder in EXPORTERS {
        let log = dir.0.join(format!("{folder}.log"));
        let (_exporter, port) = exporter(folder, &server, &[the_script()], &log);
        let metrics = get(port, "/metrics").unwrap();
        // The scrape's own INFO and EVAL move no counter of the module, so INFO read now is what
        // the scrape read.
        let info = info_numbers(&mut con);
        let scraped = script_values(&metrics);
        assert_eq!(scraped, info, "{folder}: the series against INFO ratelimit's numeric fields");
        for field in MOVED {
            assert!(info[field] > 0.0, "{folder}: {field} is 0 after the known sequence: {info:?}");
        }
        let fields = ["ratelimit_decisions_hit_admitted", "ratelimit_decisions_hit_denied"];
        assert!(fields.iter().all(|f| scraped.contains_key(*f)), "{folder}: {scraped:?}");
        let log = std::fs::read_to_string(&log).unwrap();
        assert!(!log.to_lowercase().contains("error"), "{folder} logged an error:\n{log}");
    }
}

/// What `--include-modules-metrics` (1.64+) gives: that the module is loaded, and its version;
/// none of its fields.
#[test]
fn the_exporters_modules_option_gives_the_module_and_none_of_its_fields() {
    if common::module_only("INFO MODULES") {
        return;
    }
    let server = module_with_everything();
    let mut con = server.connect();
    known_sequence(&mut con);
    let dir = TempDir::new();
    let options = ["--include-modules-metrics".to_string()];
    let (_exporter, port) = exporter("redis-exporter-1.69", &server, &options, &dir.0.join("exporter.log"));
    let metrics = get(port, "/metrics").unwrap();
    let version = common::loaded_modules(&mut con).into_iter().find(|(name, _)| name == "ratelimit").unwrap().1;
    let module_info: Vec<&str> = metrics.lines().filter(|l| l.starts_with("redis_module_info{")).collect();
    assert!(
        module_info.iter().any(|l| l.contains("name=\"ratelimit\"") && l.contains(&format!("ver=\"{version}\""))),
        "{module_info:?}"
    );
    let ours: Vec<&str> = metrics.lines().filter(|l| l.contains("ratelimit_")).collect();
    assert!(ours.is_empty(), "the exporter now takes the module's fields itself: {ours:?}");
}

/// Prometheus's HTTP API: a query's result, None when it failed.
fn query(port: u16, promql: &str) -> Result<Vec<serde_json::Value>, String> {
    let body = get(port, &format!("/api/v1/query?query={}", percent_encoded(promql)))
        .ok_or_else(|| format!("the query failed: {promql}"))?;
    let answer: serde_json::Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
    if answer["status"] != "success" {
        return Err(format!("{promql}: {answer}"));
    }
    Ok(answer["data"]["result"].as_array().cloned().unwrap_or_default())
}

/// The dashboard's queries as Grafana sends them: its interval and the variable's "All".
fn as_grafana_sends(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m").replace("$instance", ".+")
}

#[test]
fn prometheus_scrapes_the_exporter_runs_the_rules_and_every_dashboard_query_answers() {
    if common::module_only("INFO ratelimit") {
        return;
    }
    let server = module_with_everything();
    let mut con = server.connect();
    let dir = TempDir::new();
    let (_exporter, exporter_port) =
        exporter("redis-exporter-1.69", &server, &[the_script()], &dir.0.join("exporter.log"));
    let config = dir.0.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
             rule_files: ['{}', '{}']\n\
             scrape_configs:\n  - job_name: redis\n    static_configs: [{{targets: ['127.0.0.1:{exporter_port}']}}]\n",
            project("monitoring/alerts/ratelimit-alerts.yml").display(),
            project("monitoring/rules/ratelimit-rules.yml").display(),
        ),
    )
    .unwrap();
    let port = free_port();
    let _prometheus = start(
        &tool("prometheus-2.42", "prometheus"),
        &[
            format!("--config.file={}", config.display()),
            format!("--storage.tsdb.path={}", dir.0.join("data").display()),
            format!("--web.listen-address=127.0.0.1:{port}"),
        ],
        &dir.0.join("prometheus.log"),
    );
    let scrapes = |port| {
        query(port, "count_over_time(redis_script_values{key=\"ratelimit_hits\"}[1m])")
            .ok()
            .and_then(|r| r.first().and_then(|s| s["value"][1].as_str().and_then(|v| v.parse::<u32>().ok())))
            .unwrap_or(0)
    };
    wait_for("a first scrape", Duration::from_secs(60), || scrapes(port) >= 1);
    known_sequence(&mut con);
    // Two scrapes after the calls, so that every rate sees them.
    let seen = scrapes(port);
    wait_for("two more scrapes", Duration::from_secs(60), || scrapes(port) >= seen + 2);

    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(project("monitoring/dashboards/ratelimit-dashboard.json")).unwrap(),
    )
    .unwrap();
    let mut queries: Vec<(String, String)> = vec![];
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            queries.push((panel["title"].as_str().unwrap().to_string(), target["expr"].as_str().unwrap().to_string()));
        }
    }
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        if let Some(definition) = variable["definition"].as_str() {
            let selector = definition.strip_prefix("label_values(").unwrap().rsplit_once(',').unwrap().0;
            queries.push((format!("the variable {}", variable["name"]), selector.to_string()));
        }
    }
    assert!(queries.len() >= 10, "{queries:?}");
    let mut failed = vec![];
    for (title, expr) in &queries {
        match query(port, &as_grafana_sends(expr)) {
            Ok(result) if !result.is_empty() => {}
            Ok(_) => failed.push(format!("{title}: no result for {expr}")),
            Err(e) => failed.push(format!("{title}: {e}")),
        }
    }
    assert!(failed.is_empty(), "dashboard queries that failed:\n{}", failed.join("\n"));
    // The calls are in the rates: HIT admitted and denied, per the first panel's labels.
    let decisions = query(port, &as_grafana_sends(&queries[0].1)).unwrap();
    let rate_of = |outcome: &str| {
        decisions
            .iter()
            .find(|s| s["metric"]["command"] == "hit" && s["metric"]["outcome"] == outcome)
            .and_then(|s| s["value"][1].as_str().and_then(|v| v.parse::<f64>().ok()))
    };
    assert!(
        rate_of("admitted").is_some_and(|r| r > 0.0) && rate_of("denied").is_some_and(|r| r > 0.0),
        "{decisions:?}"
    );

    let loaded = || -> Vec<serde_json::Value> {
        let rules: serde_json::Value = serde_json::from_str(&get(port, "/api/v1/rules").unwrap()).unwrap();
        rules["data"]["groups"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_array().unwrap().clone())
            .collect()
    };
    let of_type = |kind: &str| loaded().into_iter().filter(|r| r["type"] == kind).collect::<Vec<_>>();
    let (alerts, records) = (of_type("alerting"), of_type("recording"));
    assert_eq!((alerts.len(), records.len()), (7, 4), "{:?}", loaded());
    wait_for("every rule evaluated", Duration::from_secs(30), || {
        let all = loaded();
        assert!(all.iter().all(|r| r["health"] != "err"), "a rule fails to evaluate: {all:?}");
        all.iter().all(|r| r["health"] == "ok")
    });
    // Every recorded series has a value for the server, the ratios included.
    for rule in &records {
        let name = rule["name"].as_str().unwrap();
        wait_for(&format!("{name} to be recorded"), Duration::from_secs(30), || {
            query(port, name).is_ok_and(|r| !r.is_empty())
        });
    }
    // Every alert's runbook is a section of docs/operations.md.
    let operations = std::fs::read_to_string(project("docs/operations.md")).unwrap();
    let sections: Vec<String> = operations.lines().filter_map(|l| Some(anchor(l.strip_prefix("##")?))).collect();
    let page = "https://github.com/redis-ratelimit/redis-ratelimit/blob/main/docs/operations.md#";
    for alert in &alerts {
        let runbook = alert["annotations"]["runbook_url"].as_str().unwrap_or_default();
        let section = runbook.strip_prefix(page);
        assert!(section.is_some_and(|s| sections.iter().any(|a| a == s)), "{}: runbook {runbook:?}", alert["name"]);
    }
}

/// A heading's anchor as GitHub makes it: lower case, spaces as `-`, other punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim_start_matches('#')
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}
