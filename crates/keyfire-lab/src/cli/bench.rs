//! `keyfire bench <scenario>`: run one benchmark scenario and print its JSON line on stdout
//! (progress goes to stderr). See [`crate::bench`].

use std::path::PathBuf;
use std::time::Duration;

use crate::bench::{BenchOptions, RedisMode, Scenario};

/// Arguments of `keyfire bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The scenario.
    #[arg(value_enum)]
    pub scenario: Scenario,
    /// Use this Redis instead of starting one (keys under a unique prefix, deleted after;
    /// other clients' traffic then shows in the command and CPU figures). With
    /// `--redis-mode cluster`: one seed node of the cluster.
    #[arg(long)]
    pub redis: Option<String>,
    /// One redis-server, or a Redis Cluster (without `--redis`: `--masters` masters of our
    /// own, no replicas; every Redis figure is summed over the masters).
    #[arg(long, value_enum, default_value_t = RedisMode::Standalone)]
    pub redis_mode: RedisMode,
    /// Cluster mode without `--redis`: masters to start (at least 3).
    #[arg(long, default_value_t = crate::bench::DEFAULT_MASTERS)]
    pub masters: usize,
    /// `redis.shards`: hash tags the jobs are spread over (default: 1 standalone, one per
    /// master in cluster mode).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub shards: Option<u32>,
    /// In-process nodes (default: 3 for steady, burst and cron; 2 for idle; 1 otherwise).
    #[arg(long)]
    pub nodes: Option<usize>,
    /// The scenario's main count: pending jobs (sparse), tasks (steady, burst, enqueue,
    /// queue), cron jobs (cron), or topics and cron jobs held beside 10 n one-shot tasks
    /// (idle). Defaults to the scenario's standard scale (see docs/benchmarks.md).
    #[arg(long = "n")]
    pub n: Option<usize>,
    /// sparse: tasks due during the measured phase (default 1000).
    #[arg(long)]
    pub due: Option<usize>,
    /// Length of the measured phase, such as `10s` (default 10s; idle 20s for each of its two).
    #[arg(long, value_parser = keyfire::job::parse_duration)]
    pub duration: Option<Duration>,
    /// Write the lateness distribution (CDF) to this SVG file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Run the bench's own Redis with the shipped AOF persistence (default: none).
    #[arg(long)]
    pub aof: bool,
    /// flow: the target host's limit, deliveries a second (default 1000).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub rate: Option<u32>,
    /// flow: the target host's limit, deliveries at once (default 50).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub in_flight: Option<u32>,
    /// queue-rest: the `keyfire` binary to start as `keyfire serve` (default: this one).
    #[arg(long)]
    pub server_bin: Option<PathBuf>,
    /// queue-rest: `keyfire serve` processes the consumers pop from over HTTP.
    #[arg(long, default_value_t = 2)]
    pub servers: usize,
    /// Print a timeline of the measured phase on stderr: every 100 ms, Redis's CPU (each
    /// master's), this process's, the commands and script calls, the runs recorded and the
    /// nodes' claims under way.
    #[arg(long)]
    pub timeline: bool,
    /// queue, queue-rest: topics the tasks are spread over, round robin (default: 1).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub topics: Option<u32>,
    /// queue, queue-rest: partitions of each topic, declared before its first task (default:
    /// 1; in cluster mode one per shard, so the tasks spread evenly over the masters).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub partitions: Option<u32>,
    /// queue, queue-rest: consumers popping (default 8; at least one per topic).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub consumers: Option<u32>,
    /// queue, queue-rest: most tasks one pop takes (default 100).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub pop_max: Option<u32>,
    /// queue, queue-rest: give the tasks mixed priorities (task k: k mod 10, so levels 0 to 9
    /// in equal shares) instead of the default 0.
    #[arg(long)]
    pub priorities: bool,
    /// Each node's `node.max_concurrent_runs` (default: the node's default, 256).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_runs: Option<u32>,
    /// Each node's `node.claim_ahead`: how long before its instant a firing may be claimed,
    /// its run held until the instant (default: the node's default, 50ms; `0s`: at the
    /// instant).
    #[arg(long, value_parser = keyfire::job::parse_duration)]
    pub claim_ahead: Option<Duration>,
    /// Worker threads of the runtime the in-process nodes run on. Default: when the bench
    /// starts its own Redis on this machine, one less than the machine's cores (at least
    /// one), so Redis keeps a core as it would beside nodes on their own machines; with
    /// `--redis`, every core (or `TOKIO_WORKER_THREADS` when set).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub node_threads: Option<u32>,
}

impl BenchArgs {
    /// The worker threads to build the process's runtime with; None: tokio's default (every
    /// core, or `TOKIO_WORKER_THREADS`). `cores`: the machine's, `env_set`: whether
    /// `TOKIO_WORKER_THREADS` is set.
    pub fn worker_threads(&self, cores: usize, env_set: bool) -> Option<usize> {
        if let Some(n) = self.node_threads {
            return Some(n as usize);
        }
        if env_set || self.redis.is_some() {
            return None;
        }
        Some(cores.saturating_sub(1).max(1))
    }
}

/// Run the scenario and print its report as one JSON line.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let opts = BenchOptions {
        scenario: args.scenario,
        redis_url: args.redis,
        redis_mode: args.redis_mode,
        masters: Some(args.masters),
        shards: args.shards,
        nodes: args.nodes,
        n: args.n,
        due: args.due,
        duration: args.duration,
        plot: args.plot,
        aof: args.aof,
        quiet: false,
        limit_rate: args.rate,
        limit_in_flight: args.in_flight,
        server_bin: args.server_bin,
        servers: Some(args.servers),
        timeline: args.timeline,
        topics: args.topics.map(|n| n as usize),
        partitions: args.partitions.map(|n| n as usize),
        consumers: args.consumers.map(|n| n as usize),
        pop_max: args.pop_max.map(|n| n as usize),
        priorities: args.priorities,
        max_runs: args.max_runs.map(|n| n as usize),
        claim_ahead: args.claim_ahead,
    };
    let run = crate::bench::run(&opts).await?;
    println!("{}", serde_json::to_string(&run.report)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::BenchArgs;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn args(line: &[&str]) -> BenchArgs {
        let mut argv = vec!["keyfire-bench"];
        argv.extend_from_slice(line);
        Cli::try_parse_from(argv).expect("valid arguments").bench
    }

    #[test]
    fn nodes_leave_a_core_to_the_redis_the_bench_starts() {
        // Its own Redis on this machine: one core less, at least one.
        assert_eq!(args(&["burst"]).worker_threads(2, false), Some(1));
        assert_eq!(args(&["burst"]).worker_threads(8, false), Some(7));
        assert_eq!(args(&["burst"]).worker_threads(1, false), Some(1));
        assert_eq!(
            args(&["burst", "--redis-mode", "cluster"]).worker_threads(4, false),
            Some(3)
        );
        // A Redis elsewhere, or TOKIO_WORKER_THREADS: tokio's own default.
        let external = args(&["burst", "--redis", "redis://10.0.0.1:6379"]);
        assert_eq!(external.worker_threads(2, false), None);
        assert_eq!(args(&["burst"]).worker_threads(2, true), None);
        // Asked for: as asked, whatever else.
        let asked = args(&["burst", "--node-threads", "3", "--redis", "redis://x"]);
        assert_eq!(asked.worker_threads(2, true), Some(3));
        assert!(Cli::try_parse_from(["k", "burst", "--node-threads", "0"]).is_err());
    }
}
