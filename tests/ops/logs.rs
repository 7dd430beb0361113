//! The node's logs: `log.format = "json"` writes one JSON object per line, each run's lines
//! carry the run's span (job id, firing id, attempt), and `log.level` filters.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use keyfire_testkit::RedisServer;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

/// `keyfire serve` with a config of two jobs: `logged` (the `log` handler, every second) and
/// `failing` (an `http` call to a closed port, every second, one attempt).
fn serve(redis: &RedisServer, dir: &std::path::Path, level: &str) -> Child {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = dir.join(format!("keyfire-{level}.toml"));
    std::fs::write(
        &config,
        format!(
            r#"
[redis]
url = "{url}"
prefix = "logs-{level}"

[node]
id = "logger"

[api]
enabled = false

[log]
format = "json"
level = "{level}"

[[jobs]]
id = "logged"
every = "1s"
handler = "log"

[[jobs]]
id = "failing"
every = "1s"
handler = "http"
params = {{ url = "http://127.0.0.1:{closed}/" }}
retry = {{ max_attempts = 1 }}
"#,
            url = redis.url()
        ),
    )
    .unwrap();
    crate::support::keyfire_serve(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run keyfire serve")
}

/// Read the child's stdout lines (on a thread) until `done` holds over them, for at most
/// `limit`; then stop the node with SIGTERM and return every line.
fn read_until(mut child: Child, limit: Duration, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + limit;
    let mut lines = Vec::new();
    while !done(&lines) && Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
            lines.push(line);
        }
    }
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
    let status = child.wait().unwrap();
    // The node drains and says so after SIGTERM.
    while let Ok(line) = rx.recv_timeout(Duration::from_millis(500)) {
        lines.push(line);
    }
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    assert!(
        status.success(),
        "keyfire serve exited with {status}: {err}"
    );
    lines
}

fn parse(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// A line logged inside the run span of `job`.
fn in_run_of<'a>(lines: &'a [Value], job: &str, message: &str) -> Option<&'a Value> {
    lines.iter().find(|l| {
        l["span"]["name"] == "run" && l["span"]["job"] == job && l["fields"]["message"] == message
    })
}

#[test]
fn json_logs_carry_the_run_span() {
    let redis = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let child = serve(&redis, dir.path(), "info");
    let lines = read_until(child, Duration::from_secs(30), |lines| {
        let parsed: Vec<Value> = lines
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        in_run_of(&parsed, "logged", "fired").is_some()
            && in_run_of(&parsed, "failing", "run did not succeed").is_some()
    });
    // Every line is one JSON object.
    let parsed = parse(&lines);
    assert!(parsed.iter().all(Value::is_object));
    let fired = in_run_of(&parsed, "logged", "fired")
        .unwrap_or_else(|| panic!("no `fired` line in a run span:\n{}", lines.join("\n")));
    assert_eq!(fired["level"], "INFO");
    let span = &fired["span"];
    let firing = span["firing"].as_str().unwrap();
    let (job, at) = keyfire::store::parse_firing_id(firing).expect("a firing id");
    assert_eq!(job, "logged");
    assert!(at > 0);
    assert_eq!(span["attempt"], 1);
    // The engine's own lines in a run carry the same fields, through the span.
    let failed = in_run_of(&parsed, "failing", "run did not succeed")
        .unwrap_or_else(|| panic!("no failed run line:\n{}", lines.join("\n")));
    assert_eq!(failed["level"], "WARN");
    assert_eq!(failed["span"]["attempt"], 1);
    assert!(
        failed["span"]["firing"]
            .as_str()
            .unwrap()
            .starts_with("failing:")
    );
    assert!(failed["fields"]["error"].as_str().is_some(), "{failed}");
    assert!(
        parsed
            .iter()
            .all(|l| l["timestamp"].is_string() && l["level"].is_string()),
        "every line has a timestamp and a level"
    );
}

#[test]
fn log_level_comes_from_the_config() {
    let redis = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let child = serve(&redis, dir.path(), "warn");
    let lines = read_until(child, Duration::from_secs(30), |lines| {
        lines.iter().any(|l| l.contains("run did not succeed"))
    });
    let parsed = parse(&lines);
    assert!(
        parsed
            .iter()
            .any(|l| l["fields"]["message"] == "run did not succeed"),
        "{lines:?}"
    );
    let noisy: Vec<&Value> = parsed
        .iter()
        .filter(|l| l["level"] != "WARN" && l["level"] != "ERROR")
        .collect();
    assert!(noisy.is_empty(), "level = \"warn\" let through: {noisy:?}");
}
