//! `keyfire bench`: the benchmark harness. It starts its own redis-server, or its own Redis
//! Cluster with [`RedisMode::Cluster`] (or uses a given one under a unique key prefix,
//! deleted afterwards), runs N nodes in this process with a handler that only records what
//! it is handed, runs one named scenario and reports it as one JSON line ([`Report`]).
//!
//! Lateness is `claimed_at - scheduled_at` of each firing, both by Redis's clock, as the
//! [`Firing`](keyfire::Firing) hands them over. Around the measured phase of each scenario the
//! harness takes [`metrics::Snapshot`]s: `INFO commandstats` (commands per firing), `INFO cpu`
//! (Redis CPU), `getrusage` (this process: every node plus the harness). Memory per pending
//! job is the change of Redis's `used_memory` (client buffers left out) over loading them.
//! In cluster mode every one of these Redis figures is summed over the masters (`TIME` comes
//! from one of them).
//!
//! - [`harness`]: Redis, nodes, the recording handler, loading, progress;
//! - [`scenarios`]: `sparse`, `steady`, `burst`, `enqueue`, `cron`, `idle`;
//! - [`queue`]: `queue`, the delay queue's add → ready → pop → finish;
//! - [`metrics`]: `INFO` parsing, CPU, percentiles;
//! - [`plot`]: the lateness distribution as an SVG.
//!
//! Like the CLI, this is a tool: its errors are `anyhow`'s. Speed is measured here, never
//! asserted in tests (`tests/bench_smoke.rs` runs each scenario small and checks only that
//! nothing was missed or doubled).

mod flow;
pub mod harness;
pub mod metrics;
pub mod plot;
pub mod queue;
pub mod scenarios;
pub mod timeline;

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use harness::load_tasks;

/// A named scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    /// `n` jobs pending an hour away, then `due` tasks due over `duration` (measured).
    Sparse,
    /// `n` one-shot tasks due evenly over `duration` (10,000 a second by default), 3 nodes.
    Steady,
    /// `n` tasks due at the same instant, 3 nodes.
    Burst,
    /// `n` one-shot tasks enqueued in bulk: tasks per second.
    Enqueue,
    /// `n` cron jobs firing every second, measured over `duration`, 3 nodes.
    Cron,
    /// Nothing held, then `n` topics (two delayed tasks and a reserved one each), `n` cron jobs
    /// and `10 n` one-shot tasks held, none due, each for `duration`, 2 nodes: Redis commands
    /// and CPU, the nodes' CPU, memory per held item.
    Idle,
    /// `queue` with its consumers popping and finishing batches over HTTP, from `keyfire serve`
    /// processes the bench starts on free ports (see [`queue`]).
    #[value(name = "queue-rest")]
    QueueRest,
    /// `n` delay-queue tasks due over `duration`, through add → ready → pop → finish with 8
    /// consumers: throughput, and lateness from due to ready.
    Queue,
    /// `n` `http` tasks due at one instant to one host limited to `--rate` a second and
    /// `--in-flight` at once, 3 nodes, a local receiver: deliveries per whole second, the
    /// most at once, each once.
    Flow,
}

impl Scenario {
    /// Its name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Sparse => "sparse",
            Scenario::Steady => "steady",
            Scenario::Burst => "burst",
            Scenario::Enqueue => "enqueue",
            Scenario::Cron => "cron",
            Scenario::Idle => "idle",
            Scenario::Queue => "queue",
            Scenario::Flow => "flow",
            Scenario::QueueRest => "queue-rest",
        }
    }

    /// Default `n` (the scenario's standard scale).
    pub fn default_n(self) -> usize {
        match self {
            Scenario::Sparse | Scenario::Enqueue => 1_000_000,
            Scenario::Steady | Scenario::Burst | Scenario::Queue | Scenario::QueueRest => 100_000,
            Scenario::Cron | Scenario::Flow | Scenario::Idle => 10_000,
        }
    }

    /// Default number of nodes: 3 where the firing rate is high enough to share.
    pub fn default_nodes(self) -> usize {
        match self {
            Scenario::Steady | Scenario::Burst | Scenario::Cron | Scenario::Flow => 3,
            Scenario::Idle => 2,
            Scenario::Sparse | Scenario::Enqueue | Scenario::Queue | Scenario::QueueRest => 1,
        }
    }

    /// Default length of the measured phase (unused by `burst` and `enqueue`).
    pub fn default_duration(self) -> Duration {
        match self {
            Scenario::Idle => Duration::from_secs(20),
            _ => Duration::from_secs(10),
        }
    }
}

/// The Redis deployment the bench runs against.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum RedisMode {
    /// One redis-server.
    #[default]
    Standalone,
    /// A Redis Cluster: keyfire's keys spread over `shards` hash tags, so over the masters.
    Cluster,
}

impl RedisMode {
    /// Its name on the command line and in the report.
    pub fn name(self) -> &'static str {
        self.settings().as_str()
    }

    /// The matching `redis.mode` of the settings.
    pub fn settings(self) -> keyfire::config::RedisMode {
        match self {
            RedisMode::Standalone => keyfire::config::RedisMode::Standalone,
            RedisMode::Cluster => keyfire::config::RedisMode::Cluster,
        }
    }
}

/// Masters of the bench's own cluster unless `--masters` says otherwise.
pub const DEFAULT_MASTERS: usize = 3;

/// Shards per master in cluster mode unless `--shards` says otherwise: one, the biggest
/// batches. Every node runs a claim batcher, a completer and a sweep per shard, so a burst
/// spread over 4 shards a master costs about 8 % more Redis commands per firing (3.37 against
/// 3.12 on 3 masters); a deployment takes more for room to add masters (docs/operations.md).
pub const DEFAULT_SHARDS_PER_MASTER: usize = 1;

/// What to run. `None` fields take the scenario's defaults.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The scenario.
    pub scenario: Scenario,
    /// Use this Redis instead of starting one (keys under a unique prefix, deleted after).
    /// In cluster mode: one seed node of the cluster.
    pub redis_url: Option<String>,
    /// Standalone (one server) or cluster.
    pub redis_mode: RedisMode,
    /// Cluster mode, own cluster only: masters to start (default [`DEFAULT_MASTERS`];
    /// at least 3). With `redis_url` the masters are the cluster's.
    pub masters: Option<usize>,
    /// `redis.shards` (default: 1 standalone, [`DEFAULT_SHARDS_PER_MASTER`] × masters in
    /// cluster mode).
    pub shards: Option<u32>,
    /// In-process nodes.
    pub nodes: Option<usize>,
    /// The scenario's main count (see [`Scenario`]).
    pub n: Option<usize>,
    /// `sparse` only: tasks due during the measured phase (default 1,000).
    pub due: Option<usize>,
    /// Length of the measured phase.
    pub duration: Option<Duration>,
    /// Write the lateness distribution here as an SVG.
    pub plot: Option<PathBuf>,
    /// Run our own Redis with the shipped AOF persistence (default: no persistence).
    pub aof: bool,
    /// No progress output at all (tests).
    pub quiet: bool,
    /// `flow` only: the host's limit, deliveries a second (default 1,000).
    pub limit_rate: Option<u32>,
    /// `flow` only: the host's limit, deliveries at once (default 50).
    pub limit_in_flight: Option<u32>,
    /// `queue-rest`: the `keyfire` binary to run as `keyfire serve` (default: this process's
    /// own executable, which is `keyfire` under `keyfire bench`).
    pub server_bin: Option<PathBuf>,
    /// `queue-rest`: `keyfire serve` processes the consumers pop from (default 2).
    pub servers: Option<usize>,
    /// Print the measured phase's timeline on stderr (see [`timeline`]).
    pub timeline: bool,
    /// `queue`, `queue-rest`: topics the tasks are spread over (default: 1).
    pub topics: Option<usize>,
    /// `queue`, `queue-rest`: partitions of each topic (default: 1 standalone; in cluster mode
    /// one per shard, at most 64).
    pub partitions: Option<usize>,
    /// `queue`, `queue-rest`: consumers (default [`queue::CONSUMERS`], at least one per
    /// topic).
    pub consumers: Option<usize>,
    /// `queue`, `queue-rest`: most tasks one pop takes (default [`queue::POP_MAX`]).
    pub pop_max: Option<usize>,
    /// `queue`, `queue-rest`: mixed priorities (task k: k mod 10).
    pub priorities: bool,
    /// Each node's `node.max_concurrent_runs` (default: the node's default).
    pub max_runs: Option<usize>,
    /// Each node's `node.claim_ahead` (default: the node's default).
    pub claim_ahead: Option<std::time::Duration>,
}

impl BenchOptions {
    /// A scenario with every default.
    pub fn new(scenario: Scenario) -> Self {
        Self {
            scenario,
            redis_url: None,
            redis_mode: RedisMode::Standalone,
            masters: None,
            shards: None,
            nodes: None,
            n: None,
            due: None,
            duration: None,
            plot: None,
            aof: false,
            quiet: false,
            limit_rate: None,
            limit_in_flight: None,
            server_bin: None,
            servers: None,
            timeline: false,
            topics: None,
            partitions: None,
            consumers: None,
            pop_max: None,
            priorities: false,
            max_runs: None,
            claim_ahead: None,
        }
    }
}

/// One scenario's result: the JSON line `keyfire bench` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Scenario name.
    pub scenario: String,
    /// The scenario's main count.
    pub n: usize,
    /// In-process nodes.
    pub nodes: usize,
    /// `standalone` or `cluster`.
    pub redis_mode: String,
    /// Redis masters the Redis figures are summed over (1 standalone).
    pub masters: usize,
    /// `redis.shards`: hash tags keyfire's jobs are spread over.
    pub shards: u32,
    /// Worker threads of the runtime the in-process nodes ran on (see `--node-threads`).
    #[serde(default)]
    pub node_threads: usize,
    /// Firings expected in the measured phase.
    pub firings: usize,
    /// Lateness (claim minus instant, Redis time), ms: median.
    pub lateness_p50_ms: Option<i64>,
    /// 90th percentile, ms.
    pub lateness_p90_ms: Option<i64>,
    /// 99th percentile, ms.
    pub lateness_p99_ms: Option<i64>,
    /// Largest, ms.
    pub lateness_max_ms: Option<i64>,
    /// Firings over the span from the first instant to the last claim.
    pub firings_per_s: Option<f64>,
    /// Expected firings that did not run before the deadline.
    pub missed: usize,
    /// Firing ids that ran more than once.
    pub doubled: usize,
    /// Commands Redis executed per firing in the measured phase, from `INFO commandstats`.
    /// An `EVALSHA` counts once, and so does each `redis.call` inside it (Redis counts both).
    pub redis_commands_per_firing: Option<f64>,
    /// Of which script invocations (`EVALSHA`): round trips that ran Lua.
    pub redis_scripts_per_firing: Option<f64>,
    /// Microseconds Redis spent executing commands per firing (`INFO commandstats` `usec`),
    /// counted as commands are: a script's time includes its calls, which count again on
    /// their own. It follows the work done, not the machine's noise: compare builds by it.
    pub redis_usec_per_firing: Option<f64>,
    /// Of which in scripts (`EVALSHA`), what they called included.
    pub redis_script_usec_per_firing: Option<f64>,
    /// This process's CPU (every node and the harness) per firing recorded, µs: the
    /// nodes' side of the bill, beside `redis_usec_per_firing`. Compare builds by it in
    /// alternated runs (it moves with the machine's load more than Redis's figures do).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_cpu_usec_per_firing: Option<f64>,
    /// Commands per second over the measured phase.
    pub redis_commands_per_s: Option<f64>,
    /// Change of `used_memory` (client buffers left out) over loading the pending jobs, per job.
    pub redis_memory_bytes_per_pending_job: Option<f64>,
    /// `idle`: the same per cron job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_memory_bytes_per_cron_job: Option<f64>,
    /// `idle`: the same per topic holding one delayed task, the task left out (the topic's
    /// first task less a second one's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_memory_bytes_per_topic: Option<f64>,
    /// `idle`: the same per delayed task of a topic (its second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_memory_bytes_per_topic_task: Option<f64>,
    /// `idle`: the same per reserved task of a topic (added ready, then popped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_memory_bytes_per_reserved_task: Option<f64>,
    /// `idle`: commands per second with nothing held (the first phase).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_commands_per_s_empty: Option<f64>,
    /// `idle`: Redis's CPU with nothing held, % of one core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pct_redis_empty: Option<f64>,
    /// `idle`: the nodes' CPU with nothing held, per node, % of one core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pct_node_empty: Option<f64>,
    /// CPU seconds of this process (all nodes and the harness) in the measured phase.
    pub cpu_s_node: f64,
    /// CPU seconds of Redis in the measured phase (every master's, summed).
    pub cpu_s_redis: Option<f64>,
    /// `cpu_s_node` per node, as % of one core over the measured phase.
    pub cpu_pct_node: f64,
    /// `cpu_s_redis` as % of one core (over 100 % when several masters share the cores).
    pub cpu_pct_redis: Option<f64>,
    /// Redis's CPU (every master's) as % of one core from the first due instant to the end
    /// of the measured phase (the last outcome recorded; `queue`: the last finish): through
    /// the firings, leaving out the wait before the instant that `cpu_pct_redis` includes.
    /// Near 100 % (per master) Redis bounds the rate; well below, the nodes or the waiting do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pct_redis_firing: Option<f64>,
    /// This process's CPU (every node and the harness) as % of one core over the same span.
    /// On a machine of `c` cores, this and `cpu_pct_redis_firing` together reach at most
    /// `c × 100`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pct_process_firing: Option<f64>,
    /// Several masters: each one's share of the commands Redis ran in the measured phase
    /// (masters in `CLUSTER SLOTS` order; the shares sum to 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_command_shares: Option<Vec<f64>>,
    /// Several masters: each one's share of Redis's CPU in the measured phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_cpu_shares: Option<Vec<f64>>,
    /// Several masters: each one's share of the data memory the scenario's jobs added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_memory_shares: Option<Vec<f64>>,
    /// Several masters: whether every command and memory share is within
    /// `1 / masters × (1 ± 15 %)` (three masters: 0.283 to 0.383).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_shares_even: Option<bool>,
    /// Length of the measured phase, s.
    pub measured_s: f64,
    /// `burst`: ms from the instant until the last firing's handler started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_started_ms: Option<i64>,
    /// `enqueue`: tasks enqueued per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks_per_s: Option<f64>,
    /// `enqueue`: commands Redis executed per task enqueued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_commands_per_task: Option<f64>,
    /// `queue`: topics the tasks were spread over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topics: Option<usize>,
    /// `queue`: partitions of each topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<usize>,
    /// `queue`: consumers popping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumers: Option<usize>,
    /// `queue`: most tasks one pop took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pop_max: Option<usize>,
    /// `queue`: the tasks had mixed priorities (0 to 9).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub priorities: bool,
    /// `flow`: the limit's deliveries a second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_rate: Option<u32>,
    /// `flow`: the limit's deliveries at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_in_flight: Option<u32>,
    /// `flow`: deliveries the receiver saw in each whole second from the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_second: Option<Vec<usize>>,
    /// `flow`: the most deliveries the receiver saw within any 1,000 ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_any_second: Option<usize>,
    /// `flow`: the most requests open at the receiver at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<usize>,
}

/// With several masters: whether every command and memory share is within
/// [`metrics::SHARE_TOLERANCE`] of an even one, and a line on stderr with the shares,
/// naming those outside.
fn judge_shares(r: &mut Report, progress: harness::Progress) {
    if r.masters < 2 {
        return;
    }
    let fmt = |v: &Option<Vec<f64>>| match v {
        Some(v) => v
            .iter()
            .map(|s| format!("{s:.3}"))
            .collect::<Vec<_>>()
            .join(" / "),
        None => "-".into(),
    };
    let mut outside = Vec::new();
    for (what, shares) in [
        ("commands", &r.master_command_shares),
        ("memory", &r.master_memory_shares),
    ] {
        for (i, s) in shares.as_deref().map(metrics::uneven).unwrap_or_default() {
            outside.push(format!("{what} of master {i}: {s:.3}"));
        }
    }
    let judged = r.master_command_shares.is_some() || r.master_memory_shares.is_some();
    r.master_shares_even = judged.then_some(outside.is_empty());
    let even = 1.0 / r.masters as f64;
    progress.note(format!(
        "per master: commands {}; cpu {}; memory {}{}",
        fmt(&r.master_command_shares),
        fmt(&r.master_cpu_shares),
        fmt(&r.master_memory_shares),
        if outside.is_empty() {
            String::new()
        } else {
            format!(
                "; OUTSIDE {:.3} ± 15 % ({:.3} to {:.3}): {}",
                even,
                even * (1.0 - metrics::SHARE_TOLERANCE),
                even * (1.0 + metrics::SHARE_TOLERANCE),
                outside.join(", ")
            )
        }
    ));
}

/// A report and the lateness values behind it (for the plot).
#[derive(Debug, Clone)]
pub struct BenchRun {
    /// The JSON line.
    pub report: Report,
    /// Lateness of each measured firing, ms, sorted.
    pub lateness_ms: Vec<i64>,
}

/// Run one scenario: start Redis and the nodes, measure, stop them, write the plot if asked.
pub async fn run(opts: &BenchOptions) -> anyhow::Result<BenchRun> {
    let s = opts.scenario;
    let nodes = opts.nodes.unwrap_or_else(|| s.default_nodes()).max(1);
    let progress = harness::Progress::new(opts.quiet);
    let masters = opts.masters.unwrap_or(DEFAULT_MASTERS);
    let shards = opts.shards.unwrap_or(match opts.redis_mode {
        RedisMode::Standalone => 1,
        RedisMode::Cluster => (DEFAULT_SHARDS_PER_MASTER * masters).clamp(1, 1024) as u32,
    });
    let mode = opts.redis_mode.name();
    match (&opts.redis_url, opts.redis_mode) {
        (Some(url), _) => progress.note(format!(
            "using Redis ({mode}) at {url}; {shards} shard(s); starting {nodes} node(s)"
        )),
        (None, RedisMode::Standalone) => progress.note(format!(
            "starting redis-server and {nodes} node(s); {shards} shard(s)"
        )),
        (None, RedisMode::Cluster) => progress.note(format!(
            "starting a Redis Cluster of {masters} masters (no replicas) and {nodes} node(s); \
             {shards} shards"
        )),
    }
    let redis = harness::RedisSetup {
        url: opts.redis_url.clone(),
        mode: opts.redis_mode,
        masters,
        shards,
        aof: opts.aof,
    };
    let mut h =
        harness::Harness::start(&redis, nodes, opts.max_runs, opts.claim_ahead, progress).await?;
    let result = scenarios::run(&mut h, opts, nodes).await;
    let finished = h.finish().await;
    let mut run = result?;
    finished?;
    judge_shares(&mut run.report, progress);
    if let Some(path) = &opts.plot {
        if run.lateness_ms.is_empty() {
            progress.note(format!(
                "{}: no firings to plot; {} not written",
                s.name(),
                path.display()
            ));
        } else {
            let r = &run.report;
            let redis = match opts.redis_mode {
                RedisMode::Standalone => String::new(),
                RedisMode::Cluster => {
                    format!(" redis=cluster masters={} shards={}", r.masters, r.shards)
                }
            };
            let title = format!(
                "keyfire bench {}: n={} nodes={}{redis} firings={}",
                r.scenario,
                r.n,
                r.nodes,
                run.lateness_ms.len()
            );
            std::fs::write(path, plot::cdf_svg(&title, &run.lateness_ms))?;
            progress.note(format!("lateness plot written to {}", path.display()));
        }
    }
    Ok(run)
}
