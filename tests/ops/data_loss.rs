//! A Redis that comes back without keyfire's data: two `keyfire serve` processes with a
//! declared job, topic and flow limit, and Redis restarted empty (no persistence), then
//! flushed with `FLUSHALL`. Within 5 s of Redis answering again each node takes delayed topic
//! adds again, the declared job, topic and limit are back, the job fires at its next instants,
//! each node counted the loss once and logged one ERROR, and `/readyz` shows it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use keyfire_testkit::RedisServer;
use serde_json::{Value, json};

use crate::support::wait;
use keyfire_testkit::free_port;

const BIN: &str = env!("CARGO_BIN_EXE_keyfire");
const LOST: &str = "Redis lost keyfire's data";

/// A `keyfire serve` process, killed when dropped; its JSON log lines go to `log`.
struct Served {
    child: Child,
    base: String,
    log: PathBuf,
    id: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    fn start(redis: &RedisServer, dir: &Path, id: &str) -> Self {
        let port = free_port();
        let config = dir.join(format!("{id}.toml"));
        std::fs::write(
            &config,
            format!(
                r#"
[redis]
url = "{url}"
prefix = "lost"

[node]
id = "{id}"
heartbeat_interval = "200ms"
node_ttl = "1s"
sweep_interval = "500ms"

[api]
listen = "127.0.0.1:{port}"

[log]
format = "json"

[[jobs]]
id = "tick"
every = "1s"
handler = "noop"

[[topics]]
name = "mail"
partitions = 2

[[flow_limits]]
key = "billing"
rate = 100
in_flight = 10
"#,
                url = redis.url()
            ),
        )
        .unwrap();
        let log = dir.join(format!("{id}.log"));
        let child = crate::support::keyfire_serve(&config)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run keyfire serve");
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
            id: id.to_string(),
        }
    }

    /// The log's lines that name a lost data (the node's ERROR line).
    fn loss_lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(LOST))
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The node's `keyfire_redis_data_loss_total` as `/metrics` shows it.
    async fn losses(&self, http: &reqwest::Client) -> Option<f64> {
        let text = http
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.lines()
            .find(|l| l.starts_with("keyfire_redis_data_loss_total{") && l.contains(&self.id))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }
}

async fn status(r: reqwest::Result<reqwest::Response>) -> Result<(u16, Value), String> {
    let r = r.map_err(|e| e.to_string())?;
    let code = r.status().as_u16();
    let body = r.json::<Value>().await.unwrap_or(Value::Null);
    Ok((code, body))
}

/// Everything a node serves again after a loss: a delayed topic add, the declared job, topic
/// partitions and limit.
async fn healed(http: &reqwest::Client, node: &Served) -> Result<(), String> {
    let b = &node.base;
    let add = status(
        http.post(format!("{b}/v1/topics/mail/tasks"))
            .json(&json!({"payload": {"n": 1}, "delay": "1h"}))
            .send()
            .await,
    )
    .await?;
    if add.0 != 201 {
        return Err(format!("{}: delayed add answered {add:?}", node.id));
    }
    let job = status(http.get(format!("{b}/v1/jobs/tick")).send().await).await?;
    if job.0 != 200 {
        return Err(format!("{}: declared job answered {job:?}", node.id));
    }
    let topic = status(http.get(format!("{b}/v1/topics/mail")).send().await).await?;
    if topic.1["partitions"] != 2 {
        return Err(format!("{}: declared topic is {topic:?}", node.id));
    }
    let limit = status(http.get(format!("{b}/v1/limits/billing")).send().await).await?;
    if limit.0 != 200 {
        return Err(format!("{}: declared limit answered {limit:?}", node.id));
    }
    Ok(())
}

/// The ids of the job's runs scheduled after `after_ms`.
async fn runs_after(http: &reqwest::Client, node: &Served, after_ms: i64) -> usize {
    let Ok((200, body)) = status(
        http.get(format!("{}/v1/jobs/tick/runs", node.base))
            .send()
            .await,
    )
    .await
    else {
        return 0;
    };
    body["runs"]
        .as_array()
        .or_else(|| body.as_array())
        .map(|runs| {
            runs.iter()
                .filter(|r| {
                    r["scheduled_ms"].as_i64().unwrap_or(0) > after_ms
                        || r["scheduled_at"]
                            .as_str()
                            .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
                            .is_some_and(|t| t.timestamp_millis() > after_ms)
                })
                .count()
        })
        .unwrap_or(0)
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// One loss (done by `lose`), and the checks after it: the `n`-th loss each node saw.
async fn lose_and_heal(http: &reqwest::Client, nodes: &[Served], n: usize, lose: impl FnOnce()) {
    lose();
    let back_ms = now_ms();
    for node in nodes {
        let started = Instant::now();
        wait::until(
            &format!("{} healed", node.id),
            Duration::from_secs(5),
            || healed(http, node),
        )
        .await;
        let took = started.elapsed();
        eprintln!("{}: healed {took:?} after Redis was back", node.id);
    }
    wait::until(
        "the declared job fires again",
        Duration::from_secs(10),
        || async {
            match runs_after(http, &nodes[0], back_ms).await {
                0 => Err("no run of the declared job since the loss"),
                _ => Ok(()),
            }
        },
    )
    .await;
    for node in nodes {
        wait::until(
            &format!("{}: the loss counted and logged", node.id),
            Duration::from_secs(5),
            || async {
                let count = node.losses(http).await;
                let lines = node.loss_lines();
                if count == Some(n as f64) && lines.len() == n {
                    Ok(())
                } else {
                    Err(format!("counter {count:?}, {} ERROR lines", lines.len()))
                }
            },
        )
        .await;
        let line = node.loss_lines().pop().unwrap();
        assert_eq!(line["level"], "ERROR", "{line}");
    }
    let ready = status(http.get(format!("{}/readyz", nodes[1].base)).send().await)
        .await
        .unwrap();
    assert_eq!(ready.0, 200, "a healed node is ready: {ready:?}");
    let shown = ready.1["checks"]["data_loss"].as_str().unwrap_or_default();
    assert!(shown.contains(LOST), "/readyz shows the loss: {ready:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_heal_after_redis_restarts_empty_and_after_flushall() {
    let mut redis = RedisServer::start().expect("redis-server");
    let dir = tempfile::tempdir().unwrap();
    let nodes = [
        Served::start(&redis, dir.path(), "a"),
        Served::start(&redis, dir.path(), "b"),
    ];
    crate::support::install_tls_provider();
    let http = reqwest::Client::new();
    for node in &nodes {
        wait::until(
            &format!("{} serves", node.id),
            Duration::from_secs(30),
            || healed(&http, node),
        )
        .await;
        assert!(node.loss_lines().is_empty(), "a fresh start is no loss");
    }

    // Redis without persistence restarted: it comes back empty.
    lose_and_heal(&http, &nodes, 1, || redis.restart().expect("restart redis")).await;

    // FLUSHALL: everything gone at once, Redis never away.
    let url = redis.url();
    lose_and_heal(&http, &nodes, 2, {
        let url = url.clone();
        move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
        }
    })
    .await;

    // Doctor warns of it until an operator acknowledges it; then /readyz stops showing it.
    let doctor = |ack: bool| {
        let mut cmd = Command::new(BIN);
        cmd.args(["doctor", "--redis", &url, "--prefix", "lost", "--json"]);
        if ack {
            cmd.arg("--ack-data-loss");
        }
        let out = cmd.output().expect("run keyfire doctor");
        let report: Value = serde_json::from_slice(&out.stdout).expect("doctor's JSON");
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["check"] == "data-loss")
            .map(|f| f["status"].as_str().unwrap_or_default().to_string())
            .unwrap_or_default()
    };
    assert_eq!(doctor(false), "warn");
    assert_eq!(doctor(true), "ok");
    let ready = status(http.get(format!("{}/readyz", nodes[0].base)).send().await)
        .await
        .unwrap();
    assert!(ready.1["checks"].get("data_loss").is_none(), "{ready:?}");
}
