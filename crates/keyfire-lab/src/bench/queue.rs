//! The `queue` scenario: `n` delay-queue tasks through add → ready → pop → finish, with
//! [`CONSUMERS`] consumers popping concurrently (`--consumers`).
//!
//! The tasks are added in bulk ([`Queue::add_many`]) to one topic (or round robin to
//! `--topics N`), each declared with `--partitions P` first (in cluster mode one per shard by
//! default, so the tasks spread evenly over the masters), due evenly over
//! `duration` (`0s`: all at one instant) starting after a lead long enough for the add to end
//! first. The harness's nodes serve topics, so the delayed tasks become ready through the
//! topic's promotion; consumers (consumer `i` on topic `i % N`) pop batches of up to
//! [`POP_MAX`] (`--pop-max`) with blocking waits and finish what they pop in one batch
//! finish.
//!
//! `queue-rest` is the same with the consumers outside the library: [`RestServers`] `keyfire
//! serve` processes start on free ports against the bench's Redis (nodes like the others, so
//! they promote topics too), and each consumer pops batches with `POST
//! /v1/topics/{topic}/pop?max=100&wait=500ms` and finishes them with one `POST
//! /v1/topics/{topic}/finish`, round-robin over the servers, through one HTTP client (kept-alive
//! connections). What it adds over `queue` is the HTTP round trips and JSON, and the servers'
//! processes.
//!
//! In the report, the lateness is *ready minus due* (Redis time, as the pop hands both back):
//! what the firing machinery adds. `firings_per_s` is tasks finished per second from the first
//! due instant to the last finish; `tasks_per_s` is the add rate; `doubled` counts tasks
//! delivered more than once (their ttr, 60 s, is far longer than the run, so none should be).
//! `redis_commands_per_task` counts every command Redis ran from the first add to the last
//! finish (the scripts' own calls included) per task; `redis_memory_bytes_per_pending_job` is
//! the change of Redis's data memory over adding the delayed tasks, per task.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::harness::Harness;
use tokio_util::sync::CancellationToken;

use super::metrics::{Delta, Percentiles, round2};
use super::scenarios::{Memory, apply_timeline};
use super::{BenchRun, Report};
use keyfire::queue::{Finished, NewTask, Queue};

/// Concurrent consumers unless `--consumers` says otherwise.
pub const CONSUMERS: usize = 8;
/// The topic the scenario uses; with `--topics N`, topics `bench-0` to `bench-{N-1}`.
const TOPIC: &str = "bench";
/// A reservation outlives the run: a redelivery would be a fault, counted as `doubled`.
const TTR: Duration = Duration::from_secs(60);
/// How long one pop waits before the consumer checks whether it should stop.
const POP_WAIT: Duration = Duration::from_millis(500);
/// Tasks added per `add_many` call (one progress step).
const CHUNK: usize = 5_000;
/// Most tasks one pop takes unless `--pop-max` says otherwise.
pub const POP_MAX: usize = 100;

/// How the tasks and the consumers are laid out.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Topics the tasks are spread over, round robin (1: the topic `bench`).
    pub topics: usize,
    /// Partitions of each topic, declared before its first task.
    pub partitions: usize,
    /// Consumers; consumer `i` pops from topic `i % topics`.
    pub consumers: usize,
    /// Most tasks one pop takes.
    pub pop_max: usize,
    /// Mixed priorities: task k has priority k mod 10 (else all 0).
    pub priorities: bool,
}

impl Shape {
    /// The name of topic `i`.
    fn topic(&self, i: usize) -> String {
        if self.topics <= 1 {
            TOPIC.to_string()
        } else {
            format!("{TOPIC}-{}", i % self.topics)
        }
    }
}

/// `queue-rest`: the `keyfire serve` processes to start.
#[derive(Debug, Clone)]
pub struct RestServers {
    /// The `keyfire` binary.
    pub bin: PathBuf,
    /// How many.
    pub count: usize,
}

/// `keyfire serve` child processes, killed when dropped.
struct Servers {
    children: Vec<std::process::Child>,
    urls: Vec<String>,
}

impl Drop for Servers {
    /// SIGTERM (a server leaves the live set as it stops), SIGKILL after 5 s.
    fn drop(&mut self) {
        for c in &self.children {
            let pid = nix::unistd::Pid::from_raw(c.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        }
        let give_up = Instant::now() + Duration::from_secs(5);
        for c in &mut self.children {
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < give_up {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A free TCP port on the loopback interface (the OS picks one; it is free until it is taken).
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Start the servers against the harness's Redis and prefix; wait until each is ready.
async fn start_servers(h: &Harness, rest: &RestServers) -> anyhow::Result<Servers> {
    anyhow::ensure!(
        rest.bin.is_file(),
        "the keyfire binary {} is missing (give --server-bin)",
        rest.bin.display()
    );
    let mut servers = Servers {
        children: Vec::new(),
        urls: Vec::new(),
    };
    for i in 0..rest.count {
        let port = free_port()?;
        let child = std::process::Command::new(&rest.bin)
            .arg("serve")
            .env("KEYFIRE__REDIS__URL", &h.settings.redis.url)
            .env("KEYFIRE__REDIS__PREFIX", &h.settings.redis.prefix)
            .env(
                "KEYFIRE__NODE__ID",
                format!("bench-rest-{}-{i}", std::process::id()),
            )
            .env("KEYFIRE__API__LISTEN", format!("127.0.0.1:{port}"))
            .env("RUST_LOG", "warn")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .with_context(|| format!("start {} serve", rest.bin.display()))?;
        servers.children.push(child);
        servers.urls.push(format!("http://127.0.0.1:{port}"));
    }
    // Plain http to its own nodes; the handler's roots keep a machine without a CA store
    // from failing to build the client.
    let http = reqwest::Client::builder()
        .tls_backend_preconfigured(keyfire::handler::http::default_client_tls()?)
        .build()?;
    let give_up = Instant::now() + Duration::from_secs(30);
    for url in &servers.urls {
        loop {
            let ready = http.get(format!("{url}/readyz")).send().await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                break;
            }
            anyhow::ensure!(
                Instant::now() < give_up,
                "keyfire serve at {url} did not get ready in 30 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(servers)
}

/// A popped task as the REST pop answers it (the fields the bench reads).
#[derive(Deserialize)]
struct RestTask {
    id: String,
    token: String,
    deliveries: u32,
    due_at: DateTime<Utc>,
    ready_at: DateTime<Utc>,
}

#[derive(Deserialize)]
struct RestPopped {
    tasks: Vec<RestTask>,
}

#[derive(Deserialize)]
struct RestOutcome {
    outcome: Finished,
}

#[derive(Deserialize)]
struct RestFinished {
    results: Vec<RestOutcome>,
}

/// How a consumer pops and finishes: through the library, or over HTTP.
enum Consumer {
    Library {
        queue: Queue,
        topic: String,
        max: usize,
    },
    Rest {
        http: reqwest::Client,
        url: String,
        topic: String,
        max: usize,
    },
}

/// What a consumer needs of each task it popped and finished.
struct Popped {
    id: String,
    deliveries: u32,
    due_ms: i64,
    ready_ms: i64,
}

impl Consumer {
    /// Pop a batch and finish it; every finish must be accepted.
    async fn pop_and_finish(&self) -> anyhow::Result<Vec<Popped>> {
        match self {
            Consumer::Library {
                queue: q,
                topic,
                max,
            } => {
                let popped = q.pop_many(topic, *max, POP_WAIT).await?;
                if popped.is_empty() {
                    return Ok(Vec::new());
                }
                let pairs: Vec<(String, String)> = popped
                    .iter()
                    .map(|r| (r.id.clone(), r.token.clone()))
                    .collect();
                let outcomes = q.finish_many(&pairs).await?;
                anyhow::ensure!(
                    outcomes.iter().all(|o| *o == Finished::Done),
                    "a finish was refused: {outcomes:?}"
                );
                Ok(popped
                    .into_iter()
                    .map(|r| Popped {
                        id: r.id,
                        deliveries: r.deliveries,
                        due_ms: r.due_at.timestamp_millis(),
                        ready_ms: r.ready_at.timestamp_millis(),
                    })
                    .collect())
            }
            Consumer::Rest {
                http,
                url,
                topic,
                max,
            } => {
                let wait = humantime::format_duration(POP_WAIT);
                let popped: RestPopped = http
                    .post(format!("{url}/v1/topics/{topic}/pop?max={max}&wait={wait}"))
                    .send()
                    .await?
                    .error_for_status()?
                    .json()
                    .await?;
                if popped.tasks.is_empty() {
                    return Ok(Vec::new());
                }
                let body = serde_json::json!({
                    "tasks": popped
                        .tasks
                        .iter()
                        .map(|t| serde_json::json!({"id": t.id, "token": t.token}))
                        .collect::<Vec<_>>()
                });
                let finished: RestFinished = http
                    .post(format!("{url}/v1/topics/{topic}/finish"))
                    .json(&body)
                    .send()
                    .await?
                    .error_for_status()?
                    .json()
                    .await?;
                anyhow::ensure!(
                    finished.results.len() == popped.tasks.len()
                        && finished.results.iter().all(|o| o.outcome == Finished::Done),
                    "a finish was refused"
                );
                Ok(popped
                    .tasks
                    .into_iter()
                    .map(|t| Popped {
                        id: t.id,
                        deliveries: t.deliveries,
                        due_ms: t.due_at.timestamp_millis(),
                        ready_ms: t.ready_at.timestamp_millis(),
                    })
                    .collect())
            }
        }
    }
}

/// One delivery as a consumer saw it (Redis ms, local instant of the finish).
struct Delivery {
    id: String,
    deliveries: u32,
    due_ms: i64,
    ready_ms: i64,
    finished_redis_ms: i64,
}

/// Run the scenario; `report` comes with its scenario, `n` and nodes filled in.
pub(super) async fn run(
    h: &mut Harness,
    mut report: Report,
    duration_ms: i64,
    rest: Option<RestServers>,
    shape: Shape,
    show_timeline: bool,
    apply_delta: impl Fn(&mut Report, &Delta),
) -> anyhow::Result<BenchRun> {
    let n = report.n;
    let servers = match &rest {
        Some(r) => {
            let s = start_servers(h, r).await?;
            h.progress.note(format!(
                "queue-rest: {} keyfire serve process(es) at {}",
                s.urls.len(),
                s.urls.join(", ")
            ));
            Some(s)
        }
        None => None,
    };
    let queue = Queue::connect(&h.settings)
        .await
        .context("connecting the queue")?;

    // Estimate the add rate on a probe topic (due in a day), so the measured tasks are all
    // added before the first one is due.
    let probe = n.clamp(100, 2_000);
    let started = Instant::now();
    queue
        .add_many(
            (0..probe)
                .map(|i| {
                    NewTask::new("bench-probe", serde_json::json!(i))
                        .delay(Duration::from_secs(86_400))
                })
                .collect(),
        )
        .await?;
    let rate = probe as f64 / started.elapsed().as_secs_f64().max(1e-6);
    h.settle().await?;
    let lead_ms = 2_000 + (1.5 * n as f64 / rate.max(100.0) * 1000.0) as i64;

    let first_due = h.redis_ms().await? + lead_ms;
    let at = |i: usize| {
        let ms = first_due + (i as i128 * duration_ms as i128 / n.max(1) as i128) as i64;
        chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms).expect("in range")
    };
    let last_due = first_due + duration_ms;

    if shape.partitions > 1 {
        for t in 0..shape.topics {
            queue
                .set_partitions(&shape.topic(t), shape.partitions)
                .await
                .context("declaring the topics' partitions")?;
        }
    }
    let snap0 = h.snapshot().await;
    let mem_before = h.data_memory().await;
    let pb = h.progress.bar(n as u64, "adding");
    let started = Instant::now();
    let mut i = 0;
    while i < n {
        let end = (i + CHUNK).min(n);
        let tasks = (i..end)
            .map(|k| {
                NewTask::new(shape.topic(k), serde_json::json!({ "k": k }))
                    .id(format!("t{k}"))
                    .at(at(k))
                    .ttr(TTR)
                    .priority(if shape.priorities { (k % 10) as u8 } else { 0 })
            })
            .collect();
        queue.add_many(tasks).await?;
        pb.set_position(end as u64);
        i = end;
    }
    pb.finish_and_clear();
    let add_s = started.elapsed().as_secs_f64();
    let mem = Memory {
        before: mem_before,
        after: h.data_memory().await,
    };
    h.progress.note(format!(
        "queue: {n} tasks added in {add_s:.1} s ({:.0}/s)",
        n as f64 / add_s.max(1e-6)
    ));
    if h.redis_ms().await? > first_due {
        h.progress
            .note("queue: the add ended after the first task was due; lateness includes it");
    }

    // Consumers: pop and finish until every task is finished or the deadline passes.
    let deadline_ms = last_due + 30_000 + n as i64;
    let offset_us = h.offset_us;
    let redis_now = move || (chrono::Utc::now().timestamp_micros() + offset_us) / 1000;
    let finished = Arc::new(AtomicUsize::new(0));
    let log = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let mut consumers = Vec::with_capacity(shape.consumers);
    // One client, its connections kept alive (only for the REST consumers).
    let http = match &servers {
        Some(_) => Some(
            reqwest::Client::builder()
                .tls_backend_preconfigured(keyfire::handler::http::default_client_tls()?)
                .pool_max_idle_per_host(shape.consumers)
                .build()?,
        ),
        None => None,
    };
    for i in 0..shape.consumers {
        let consumer = match (&servers, &http) {
            (Some(s), Some(http)) => Consumer::Rest {
                http: http.clone(),
                url: s.urls[i % s.urls.len()].clone(),
                topic: shape.topic(i),
                max: shape.pop_max,
            },
            _ => Consumer::Library {
                queue: Queue::connect(&h.settings).await?,
                topic: shape.topic(i),
                max: shape.pop_max,
            },
        };
        let finished = finished.clone();
        let log = log.clone();
        consumers.push(tokio::spawn(async move {
            while finished.load(Ordering::Relaxed) < n && redis_now() < deadline_ms {
                let popped = consumer.pop_and_finish().await?;
                if popped.is_empty() {
                    continue;
                }
                finished.fetch_add(popped.len(), Ordering::Relaxed);
                let at = redis_now();
                let mut log = log.lock().expect("log lock");
                for r in popped {
                    log.push(Delivery {
                        id: r.id,
                        deliveries: r.deliveries,
                        due_ms: r.due_ms,
                        ready_ms: r.ready_ms,
                        finished_redis_ms: at,
                    });
                }
            }
            anyhow::Ok(())
        }));
    }
    let pb = h.progress.bar(n as u64, "popped and finished");
    let stop = CancellationToken::new();
    let hh = &*h;
    // The timeline ends with the last finish, not with the consumers, whose last pops wait
    // up to POP_WAIT for tasks that will not come.
    let finished_now = || finished.load(Ordering::Relaxed);
    let ((), points) = tokio::join!(
        async {
            while consumers.iter().any(|c| !c.is_finished()) {
                let done = finished.load(Ordering::Relaxed);
                pb.set_position(done as u64);
                if done >= n {
                    stop.cancel();
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            stop.cancel();
        },
        hh.timeline(first_due, &stop, &finished_now)
    );
    pb.finish_and_clear();
    for c in consumers {
        c.await.context("consumer panicked")??;
    }
    let snap1 = h.snapshot().await;
    drop(servers);

    let log = std::mem::take(&mut *log.lock().expect("log lock"));
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for d in &log {
        *seen.entry(d.id.as_str()).or_default() += 1;
    }
    let mut lateness: Vec<i64> = log.iter().map(|d| d.ready_ms - d.due_ms).collect();
    lateness.sort_unstable();
    let d = Delta::between(&snap0, &snap1);
    apply_delta(&mut report, &d);
    apply_timeline(&mut report, &points, show_timeline, h);
    report.firings = n;
    report.missed = n.saturating_sub(seen.len());
    report.doubled =
        seen.values().filter(|&&c| c > 1).count() + log.iter().filter(|d| d.deliveries > 1).count();
    if let Some(p) = Percentiles::of(&lateness) {
        report.lateness_p50_ms = Some(p.p50);
        report.lateness_p90_ms = Some(p.p90);
        report.lateness_p99_ms = Some(p.p99);
        report.lateness_max_ms = Some(p.max);
    }
    let first = log.iter().map(|d| d.due_ms).min();
    let last = log.iter().map(|d| d.finished_redis_ms).max();
    if let Some((first, last)) = first.zip(last) {
        let span_s = ((last - first).max(1) as f64 / 1000.0).max(duration_ms as f64 / 1000.0);
        report.firings_per_s = Some(round2(log.len() as f64 / span_s));
    }
    report.tasks_per_s = Some(round2(n as f64 / add_s.max(1e-6)));
    report.redis_commands_per_firing = d.per(d.total_calls(), log.len());
    report.redis_scripts_per_firing = d.per(d.script_calls(), log.len());
    report.redis_commands_per_task = report.redis_commands_per_firing;
    mem.apply(&mut report, n);
    report.redis_usec_per_firing = d.per(d.total_usec(), log.len());
    report.redis_script_usec_per_firing = d.per(d.script_usec(), log.len());
    if !log.is_empty() {
        report.node_cpu_usec_per_firing = Some(round2(d.cpu_node_s * 1e6 / log.len() as f64));
    }
    h.progress
        .note(format!("redis commands per task: {}", d.mix(log.len())));
    Ok(BenchRun {
        report,
        lateness_ms: lateness,
    })
}
