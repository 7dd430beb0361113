//! The bench's world: a Redis (its own redis-server or Redis Cluster, or `--redis URL` under a
//! unique prefix), N nodes in this process running a recording no-op handler, a client to
//! load jobs, one admin connection per master for what the bench reads from Redis, and the
//! progress display.

use std::hash::BuildHasher;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use redis::aio::MultiplexedConnection;

use super::RedisMode;
use super::metrics::{self, Snapshot};
use keyfire::config::Settings;
use keyfire::engine::NodeHandle;
use keyfire::handler::{Firing, Registry};
use keyfire::job::JobSpec;
use keyfire::{Client, Node};
use keyfire_testkit::{RedisCluster, RedisOptions, RedisServer};

/// The handler every bench job names.
pub const HANDLER: &str = "bench";

/// Concurrent requests while loading jobs one by one.
pub(super) const LOAD_CONCURRENCY: usize = 256;

/// One run of the bench handler.
#[derive(Debug, Clone)]
pub struct Rec {
    /// `<job id>:<instant ms>`.
    pub firing_id: String,
    /// The scheduled instant (ms).
    pub scheduled_ms: i64,
    /// Redis time at the claim (ms).
    pub claimed_ms: i64,
    /// This host's wall clock as the handler started (µs since the epoch).
    pub started_local_us: i64,
}

#[derive(Default)]
struct RecorderState {
    recs: Vec<Rec>,
    /// Distinct firing ids seen with an instant inside the window, as 64-bit hashes (no
    /// copy of each id: two ids of a bench share a hash with odds of about one in 10^10).
    in_window: foldhash::HashSet<u64>,
}

/// Records every run of the bench handler; does nothing else (no Redis calls), so what the
/// bench measures is keyfire's cost, not the handler's.
#[derive(Clone, Default)]
pub struct Recorder {
    state: Arc<Mutex<RecorderState>>,
    count: Arc<AtomicUsize>,
    window_lo: Arc<AtomicI64>,
    window_hi: Arc<AtomicI64>,
    hasher: foldhash::fast::RandomState,
}

fn wall_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

impl Recorder {
    /// Takes the firing: its id is moved into the record, not copied.
    fn record(&self, f: Firing) {
        let started_local_us = wall_us();
        let scheduled_ms = f.scheduled_at.timestamp_millis();
        let inside = (self.window_lo.load(Ordering::Relaxed)
            ..=self.window_hi.load(Ordering::Relaxed))
            .contains(&scheduled_ms);
        let id = inside.then(|| self.hasher.hash_one(&f.firing_id));
        let rec = Rec {
            firing_id: f.firing_id,
            scheduled_ms,
            claimed_ms: f.claimed_at.timestamp_millis(),
            started_local_us,
        };
        let mut st = self.state.lock().expect("recorder lock");
        if let Some(id) = id {
            st.in_window.insert(id);
        }
        st.recs.push(rec);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Count distinct firings with instants in `[lo, hi]` (ms) from now on, `expected` of
    /// them. Room for them is made now: this process's CPU is counted as the nodes', and a
    /// record and a set grown run by run while they fire (copied over at every doubling,
    /// hashed with SipHash) cost more per firing than some of what the bench measures.
    pub fn set_window(&self, lo: i64, hi: i64, expected: usize) {
        let mut st = self.state.lock().expect("recorder lock");
        st.recs.reserve(expected);
        st.in_window.reserve(expected);
        drop(st);
        self.window_lo.store(lo, Ordering::Relaxed);
        self.window_hi.store(hi, Ordering::Relaxed);
    }

    /// Runs recorded so far.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Distinct firings seen inside the window.
    pub fn in_window(&self) -> usize {
        self.state.lock().expect("recorder lock").in_window.len()
    }

    /// Every run so far.
    pub fn recs(&self) -> Vec<Rec> {
        self.state.lock().expect("recorder lock").recs.clone()
    }

    /// A registry with the bench handler.
    pub fn registry(&self) -> Registry {
        // The built-ins too: the `flow` scenario delivers through the `http` handler.
        let mut r = Registry::with_builtins();
        let me = self.clone();
        r.register(HANDLER, move |f: Firing| {
            me.record(f);
            async { Ok::<(), keyfire::HandlerError>(()) }
        });
        r
    }
}

/// Progress on stderr: bars on a terminal, one line per phase otherwise, nothing when quiet.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    terminal: bool,
    quiet: bool,
}

impl Progress {
    /// Bars only when stderr is a terminal.
    pub fn new(quiet: bool) -> Self {
        Self {
            terminal: !quiet && std::io::stderr().is_terminal(),
            quiet,
        }
    }

    /// A bar of `len` steps (hidden unless stderr is a terminal).
    pub fn bar(&self, len: u64, what: &str) -> ProgressBar {
        if !self.terminal {
            return ProgressBar::hidden();
        }
        let pb = ProgressBar::new(len);
        pb.set_style(
            ProgressStyle::with_template(
                "{prefix:>9} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} ({per_sec}, eta {eta})",
            )
            .expect("valid template"),
        );
        pb.set_prefix(what.to_string());
        pb
    }

    /// A line about the current phase.
    pub fn note(&self, msg: impl AsRef<str>) {
        if !self.quiet {
            eprintln!("bench: {}", msg.as_ref());
        }
    }
}

/// Warnings and errors of the nodes, on stderr: stdout carries only the report line.
/// `RUST_LOG` overrides the level.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// Under an instruction-counting profiler (callgrind) the bench runs tens of times slower:
/// `KEYFIRE_BENCH_SLOWDOWN=k` stretches the nodes' liveness timings (heartbeat, node TTL,
/// claim grace, sweep interval) k times, so that slowed nodes do not fence themselves or
/// take each other's runs over, and the timer horizon with the sweep interval, so that a
/// sweep reads the burst's firings ahead of their instant as natively (they are loaded
/// further ahead than the horizon, slowed): otherwise whether it did came down to how long
/// loading took, and with it every node's `expired` events. It changes no step a firing
/// takes.
fn stretch_for_profiler(settings: &mut Settings) {
    let Some(k) = std::env::var("KEYFIRE_BENCH_SLOWDOWN")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .filter(|&k| k > 1)
    else {
        return;
    };
    let n = &mut settings.node;
    n.heartbeat_interval *= k;
    n.node_ttl *= k;
    n.claim_grace *= k;
    n.sweep_interval *= k;
    n.timer_horizon *= k;
}

/// Which Redis the bench uses and how keyfire lays its keys out there.
#[derive(Debug, Clone)]
pub struct RedisSetup {
    /// `--redis URL`: that server (standalone) or one seed node of that cluster; None: start
    /// our own.
    pub url: Option<String>,
    /// One server or a cluster.
    pub mode: RedisMode,
    /// Masters of our own cluster (cluster mode without `url`).
    pub masters: usize,
    /// `redis.shards`.
    pub shards: u32,
    /// Keep the AOF of our own Redis on (default: no persistence).
    pub aof: bool,
}

/// The Redis processes the bench started itself; killed when dropped.
pub enum OwnRedis {
    /// One redis-server.
    Server(RedisServer),
    /// A Redis Cluster without replicas.
    Cluster(RedisCluster),
}

/// A Redis, the nodes, a client and a connection per master for `INFO`.
pub struct Harness {
    /// Our own Redis (None with `--redis URL`).
    pub redis: Option<OwnRedis>,
    /// The nodes' settings (mode, URL or seed nodes, shards, prefix).
    pub settings: Settings,
    /// One server or a cluster.
    pub mode: RedisMode,
    /// Loads jobs.
    pub client: Client,
    /// One connection per master (standalone: the server) for `INFO`, `CLIENT LIST` and
    /// cleanup, whose figures are summed over them; `TIME` comes from the first.
    pub admin: Vec<MultiplexedConnection>,
    /// Running nodes.
    pub nodes: Vec<NodeHandle>,
    /// What the handler saw.
    pub recorder: Recorder,
    /// Progress display.
    pub progress: Progress,
    /// Redis time minus local wall time, µs (from the quickest of several `TIME` round trips).
    pub offset_us: i64,
    /// Tasks per second of the last load (used to choose how far ahead to schedule).
    pub load_rate: Option<f64>,
    /// `true` with an external Redis: the prefix's keys are deleted at the end.
    pub external: bool,
}

impl Harness {
    /// Start (or connect to) Redis and `nodes` nodes.
    pub async fn start(
        setup: &RedisSetup,
        nodes: usize,
        max_runs: Option<usize>,
        claim_ahead: Option<Duration>,
        progress: Progress,
    ) -> anyhow::Result<Self> {
        init_logging();
        let mut settings = Settings::default();
        if let Some(m) = max_runs {
            settings.node.max_concurrent_runs = m;
        }
        if let Some(d) = claim_ahead {
            settings.node.claim_ahead = d;
        }
        stretch_for_profiler(&mut settings);
        settings.redis.mode = setup.mode.settings();
        settings.redis.shards = setup.shards;
        let (redis, external) = match (&setup.url, setup.mode) {
            (Some(url), mode) => {
                match mode {
                    RedisMode::Standalone => settings.redis.url = url.clone(),
                    RedisMode::Cluster => settings.redis.nodes = vec![url.clone()],
                }
                let suffix = uuid::Uuid::new_v4().simple().to_string();
                settings.redis.prefix = format!("keyfire-bench-{}", &suffix[..8]);
                (None, true)
            }
            (None, RedisMode::Standalone) => {
                let server = RedisServer::start_with(RedisOptions {
                    persistent: setup.aof,
                    ..Default::default()
                })
                .context("starting redis-server")?;
                settings.redis.url = server.url();
                (Some(OwnRedis::Server(server)), false)
            }
            (None, RedisMode::Cluster) => {
                let masters = setup.masters;
                let cluster = tokio::task::spawn_blocking(move || RedisCluster::start(masters, 0))
                    .await?
                    .with_context(|| format!("starting a Redis Cluster of {masters} masters"))?;
                settings.redis.nodes = cluster.nodes();
                (Some(OwnRedis::Cluster(cluster)), false)
            }
        };
        let admin = admin_connections(&settings).await?;
        if matches!(redis, Some(OwnRedis::Cluster(_))) && !setup.aof {
            // `RedisCluster` runs its nodes with the AOF on (and RDB snapshots at Redis's
            // default points); the bench's own standalone server runs with neither.
            for conn in &admin {
                let _: () = redis::cmd("CONFIG")
                    .arg("SET")
                    .arg("appendonly")
                    .arg("no")
                    .arg("save")
                    .arg("")
                    .query_async(&mut conn.clone())
                    .await
                    .context("turning persistence off on a cluster master")?;
            }
        }
        let recorder = Recorder::default();
        let mut handles = Vec::with_capacity(nodes);
        for i in 0..nodes {
            let mut s = settings.clone();
            s.node.id = format!("bench-{i}");
            // The `topic` handler too, so delayed tasks of the `queue` scenario become ready.
            let mut registry = recorder.registry();
            keyfire::queue::serve_topics(&mut registry, &s.redis);
            handles.push(Node::new(s, registry).start().await?);
        }
        let client = Client::connect(&settings)
            .await?
            .allow_handlers([HANDLER, "http"]);
        let mut h = Self {
            redis,
            settings,
            mode: setup.mode,
            client,
            admin,
            nodes: handles,
            recorder,
            progress,
            offset_us: 0,
            load_rate: None,
            external,
        };
        h.offset_us = h.measure_offset().await?;
        Ok(h)
    }

    /// Masters the Redis figures are summed over.
    pub fn masters(&self) -> usize {
        self.admin.len()
    }

    async fn redis_time_us(&self) -> anyhow::Result<i64> {
        let (s, us): (i64, i64) = redis::cmd("TIME")
            .query_async(&mut self.admin[0].clone())
            .await?;
        Ok(s * 1_000_000 + us)
    }

    /// Redis's clock now, ms.
    pub async fn redis_ms(&self) -> anyhow::Result<i64> {
        Ok(self.redis_time_us().await? / 1000)
    }

    async fn measure_offset(&mut self) -> anyhow::Result<i64> {
        let mut best = (i64::MAX, 0);
        for _ in 0..10 {
            let sent = wall_us();
            let redis = self.redis_time_us().await?;
            let received = wall_us();
            let rtt = received - sent;
            if rtt < best.0 {
                best = (rtt, redis - (sent + received) / 2);
            }
        }
        Ok(best.1)
    }

    /// A local wall-clock µs reading as Redis time in ms.
    pub fn local_us_to_redis_ms(&self, us: i64) -> i64 {
        (us + self.offset_us) / 1000
    }

    /// Sleep until Redis's clock reads `at_ms` (by the offset estimate).
    pub async fn sleep_until_redis(&self, at_ms: i64) {
        let now_redis_ms = (wall_us() + self.offset_us) / 1000;
        if at_ms > now_redis_ms {
            tokio::time::sleep(Duration::from_millis((at_ms - now_redis_ms) as u64)).await;
        }
    }

    /// A snapshot of Redis's counters (summed over the masters) and this process's CPU.
    pub async fn snapshot(&mut self) -> Snapshot {
        Snapshot::take(&self.admin, self.recorder.count()).await
    }

    /// Redis memory for data (client buffers left out), bytes, each master's.
    pub async fn data_memory(&self) -> Option<Vec<f64>> {
        metrics::data_memory(&self.admin).await
    }

    /// A one-shot task of the bench handler at `at_ms`.
    pub fn task(id: String, at_ms: i64) -> JobSpec {
        let at = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(at_ms).expect("in range");
        JobSpec::at(id, at, HANDLER)
    }

    /// Load one-shot tasks with a bar; remembers the rate for [`Harness::lead_ms`].
    pub async fn load(&mut self, specs: Vec<JobSpec>, what: &str) -> anyhow::Result<f64> {
        let n = specs.len();
        let pb = self.progress.bar(n as u64, what);
        let started = Instant::now();
        load_tasks(&self.client, specs, &pb).await?;
        pb.finish_and_clear();
        let secs = started.elapsed().as_secs_f64();
        let rate = n as f64 / secs.max(1e-6);
        if n >= 100 {
            self.load_rate = Some(rate);
        }
        self.progress
            .note(format!("{what}: {n} tasks in {secs:.1} s ({rate:.0}/s)"));
        Ok(secs)
    }

    /// How far ahead (ms) to schedule `n` tasks so that loading them ends well before the
    /// first is due: measured by loading a probe batch (far in the future, deleted after)
    /// when no load rate is known yet.
    pub async fn lead_ms(&mut self, n: usize) -> anyhow::Result<i64> {
        if self.load_rate.is_none() {
            let probe = n.clamp(100, 2_000);
            let far = self.redis_ms().await? + 86_400_000;
            let specs: Vec<JobSpec> = (0..probe)
                .map(|i| Self::task(format!("probe-{i}"), far + i as i64))
                .collect();
            self.load(specs, "probe").await?;
            let client = &self.client;
            futures::stream::iter(
                (0..probe).map(|i| async move { client.delete(&format!("probe-{i}")).await }),
            )
            .buffer_unordered(LOAD_CONCURRENCY)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<keyfire::Result<Vec<()>>>()?;
            self.settle().await?;
        }
        let rate = self.load_rate.unwrap_or(1_000.0).max(100.0);
        Ok(2_000 + (1.5 * n as f64 / rate * 1000.0) as i64)
    }

    /// Wait until Redis has handed every subscriber its backlog (change messages of a load),
    /// then a little longer for the nodes to handle it: so a measured phase does not pay for
    /// the loading before it.
    pub async fn settle(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let mut backlog: u64 = 0;
            for conn in &mut self.admin {
                let list: String = redis::cmd("CLIENT")
                    .arg("LIST")
                    .arg("TYPE")
                    .arg("pubsub")
                    .query_async(conn)
                    .await?;
                backlog += list
                    .split_whitespace()
                    .filter_map(|kv| kv.strip_prefix("omem="))
                    .filter_map(|v| v.parse::<u64>().ok())
                    .sum::<u64>();
            }
            if backlog == 0 || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        Ok(())
    }

    /// Wait until `expected` distinct firings inside the recorder's window have run, or until
    /// Redis time `deadline_ms`. Returns whether all arrived.
    pub async fn wait_firings(&self, expected: usize, deadline_ms: i64) -> bool {
        let pb = self.progress.bar(expected as u64, "firing");
        let done = loop {
            let seen = self.recorder.in_window();
            pb.set_position(seen as u64);
            if seen >= expected {
                break true;
            }
            if self.local_us_to_redis_ms(wall_us()) > deadline_ms {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        pb.finish_and_clear();
        done
    }

    /// Wait until no run holds a lease, so every outcome is in Redis, or until `limit`;
    /// Redis's clock then, in ms.
    pub async fn wait_recorded(&self, limit: Duration) -> anyhow::Result<i64> {
        let deadline = Instant::now() + limit;
        loop {
            let store = self.client.store();
            let mut running = 0;
            for shard in 0..store.shards().len() {
                running += store.leases(shard, 1).await?.len();
            }
            if running == 0 || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.redis_ms().await
    }

    /// After the last expected firing: how long to keep listening for a second run of any
    /// firing (a sweeper claims others' firings after the grace period).
    pub fn doubles_window(&self) -> Duration {
        self.settings.node.claim_grace
            + self.settings.node.sweep_interval
            + Duration::from_millis(500)
    }

    /// Stop the nodes; with an external Redis, delete every key under the bench's prefix
    /// (its meta tag `{prefix}` and its shards' tags `{prefix:…}`) on every master, one
    /// `UNLINK` per slot (a cluster refuses keys of several slots in one command).
    pub async fn finish(mut self) -> anyhow::Result<()> {
        futures::future::join_all(self.nodes.drain(..).map(NodeHandle::shutdown)).await;
        if self.external {
            let prefix = &self.settings.redis.prefix;
            let pattern = format!("{{{prefix}[}}:]*");
            let mut deleted = 0usize;
            for conn in &mut self.admin {
                let mut cursor: u64 = 0;
                loop {
                    let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(&pattern)
                        .arg("COUNT")
                        .arg(5_000)
                        .query_async(conn)
                        .await?;
                    deleted += keys.len();
                    for slot_keys in by_slot(keys) {
                        let _: i64 = redis::cmd("UNLINK")
                            .arg(&slot_keys)
                            .query_async(conn)
                            .await?;
                    }
                    cursor = next;
                    if cursor == 0 {
                        break;
                    }
                }
            }
            self.progress.note(format!(
                "deleted {deleted} keys under {{{prefix}}} and {{{prefix}:…}}"
            ));
        }
        Ok(())
    }
}

/// Keys grouped by cluster slot, each group in the order given.
fn by_slot(keys: Vec<String>) -> Vec<Vec<String>> {
    let mut groups: std::collections::BTreeMap<u16, Vec<String>> = Default::default();
    for key in keys {
        groups
            .entry(keyfire::store::slot_of(&key))
            .or_default()
            .push(key);
    }
    groups.into_values().collect()
}

/// One plain connection per master: to `redis.url` in standalone mode (as before clusters),
/// to every master serving slots (as `CLUSTER SLOTS` names them) in cluster mode.
async fn admin_connections(settings: &Settings) -> anyhow::Result<Vec<MultiplexedConnection>> {
    let clients = match settings.redis.mode {
        keyfire::config::RedisMode::Standalone => {
            vec![redis::Client::open(settings.redis.url.as_str())?]
        }
        _ => keyfire::store::Conn::connect(&settings.redis)
            .await
            .context("connecting to the Redis Cluster")?
            .masters()
            .await
            .context("listing the cluster's masters")?,
    };
    let mut admin = Vec::with_capacity(clients.len());
    for client in clients {
        admin.push(
            client
                .get_multiplexed_async_connection()
                .await
                .context("connecting to Redis")?,
        );
    }
    anyhow::ensure!(!admin.is_empty(), "no Redis master to measure");
    Ok(admin)
}

/// Tasks per `Client::enqueue_many` call.
const BATCH: usize = 5_000;

/// `enqueue_many` calls in flight: this process validates one batch while Redis writes
/// another. More only queue pipelines behind each other on the one connection, where they
/// run into the client's response timeout.
const BATCHES_IN_FLIGHT: usize = 2;

/// Tries per batch. A batch may fail part way (a response timeout on a busy machine);
/// `enqueue_many` leaves tasks that exist as they are, so sending it again is safe.
const BATCH_TRIES: u32 = 5;

/// Enqueue one-shot tasks. This is the one place that loads tasks, so that the bench
/// follows the client's fastest way to do it: the batch API, a few batches in flight.
pub async fn load_tasks(
    client: &Client,
    specs: Vec<JobSpec>,
    pb: &ProgressBar,
) -> anyhow::Result<()> {
    let mut rest = specs.into_iter();
    let batches = std::iter::from_fn(move || {
        let batch: Vec<JobSpec> = rest.by_ref().take(BATCH).collect();
        (!batch.is_empty()).then_some(batch)
    });
    let mut results = futures::stream::iter(batches.map(|batch| async move {
        let n = batch.len();
        let mut tries = 1;
        loop {
            match client.enqueue_many(batch.clone()).await {
                Ok(_) => return Ok(n),
                Err(e) if tries < BATCH_TRIES => {
                    tracing::warn!(error = %e, tries, "enqueue_many failed; sending the batch again");
                    tokio::time::sleep(Duration::from_millis(200 * u64::from(tries))).await;
                    tries += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }))
    .buffer_unordered(BATCHES_IN_FLIGHT);
    while let Some(r) = results.next().await {
        pb.inc(r? as u64);
    }
    Ok(())
}

/// Create (or replace) recurring jobs, many in flight at once.
pub async fn load_jobs(
    client: &Client,
    specs: Vec<JobSpec>,
    pb: &ProgressBar,
) -> anyhow::Result<()> {
    let mut results = futures::stream::iter(specs.into_iter().map(|s| client.upsert(s)))
        .buffer_unordered(LOAD_CONCURRENCY);
    while let Some(r) = results.next().await {
        r?;
        pb.inc(1);
    }
    Ok(())
}
