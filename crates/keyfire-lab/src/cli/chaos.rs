//! `keyfire chaos --minutes 10 --seed N`: one chaos round (see [`crate::chaos`]). Prints the
//! summary table and exits non-zero on any violation, naming the seed to replay it.
//! `--redis-mode cluster` runs it on a Redis Cluster of its own.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use crate::chaos::{Config, node_bin_near};

/// Arguments of `keyfire chaos`.
#[derive(Debug, clap::Args)]
pub struct ChaosArgs {
    /// Length of the fault phase in minutes (the drain comes after).
    #[arg(long, default_value_t = 10.0, conflicts_with = "duration")]
    pub minutes: f64,
    /// Length of the fault phase as a duration (`90s`, `30m`), instead of `--minutes`.
    #[arg(long, value_parser = keyfire::job::parse_duration)]
    pub duration: Option<Duration>,
    /// The Redis the round runs on: `standalone` (one server, restarted by the faults) or
    /// `cluster` (3 masters with a replica each; masters killed and failed over, replicas
    /// killed, a slot migrated, a master partitioned away).
    #[arg(long, value_enum, default_value_t = RedisModeArg::Standalone)]
    pub redis_mode: RedisModeArg,
    /// Seed of the fault plan and the workload (default: from the clock, printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Node processes, 3 to 5.
    #[arg(long, default_value_t = 4)]
    pub nodes: usize,
    /// The `chaos_node` example binary (default: next to this binary, where
    /// `cargo build --release --examples` puts it).
    #[arg(long)]
    pub node_bin: Option<PathBuf>,
    /// Keep the round's files (node logs, run logs, workload, faults, report) here
    /// (default: a temporary directory, kept when the round fails).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Print each fault as it is injected.
    #[arg(long, short)]
    pub verbose: bool,
    /// A delay-queue round: consumer processes killed while they hold reservations, the node
    /// promoting a burst killed, expired events lost, Redis restarted from its AOF.
    #[arg(long)]
    pub queue: bool,
    /// Run no round: check again the round whose files are in this directory.
    #[arg(long, value_name = "DIR")]
    pub recheck: Option<PathBuf>,
}

/// The Redis of a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RedisModeArg {
    /// One `redis-server`.
    Standalone,
    /// A Redis Cluster.
    Cluster,
}

/// Find the node binary, or say how to build it.
fn node_bin(args: &ChaosArgs) -> anyhow::Result<PathBuf> {
    if let Some(p) = &args.node_bin {
        anyhow::ensure!(p.is_file(), "--node-bin {} does not exist", p.display());
        return Ok(p.clone());
    }
    let exe = std::env::current_exe().context("locate the keyfire binary")?;
    let Some(bin) = node_bin_near(&exe) else {
        let profile = exe
            .parent()
            .and_then(|d| d.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let flag = if profile == "release" {
            " --release"
        } else {
            ""
        };
        anyhow::bail!(
            "the chaos node binary is missing (looked for examples/chaos_node next to {}): \
             build it with `cargo build{flag} --examples`, or pass --node-bin",
            exe.display()
        );
    };
    // An example older than this binary may lag behind the code under test.
    let modified = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(b), Some(e)) = (modified(&bin), modified(&exe))
        && b + Duration::from_secs(15 * 60) < e
    {
        eprintln!(
            "warning: {} is older than {}; rebuild it with `cargo build --release --examples`",
            bin.display(),
            exe.display()
        );
    }
    Ok(bin)
}

/// Run one round, print its report; an error when a violation was found.
pub async fn run(args: ChaosArgs) -> anyhow::Result<()> {
    if let Some(dir) = &args.recheck {
        let report = crate::chaos::recheck(dir)?;
        println!("{report}");
        anyhow::ensure!(
            report.ok(),
            "{} violations (seed {})",
            report.violations.len(),
            report.seed
        );
        return Ok(());
    }
    let cluster = args.redis_mode == RedisModeArg::Cluster;
    anyhow::ensure!(
        !(cluster && args.queue),
        "--queue runs on one Redis: a --redis-mode cluster round checks the delay queue with \
         its jobs"
    );
    let minutes = match args.duration {
        Some(d) => d.as_secs_f64() / 60.0,
        None => args.minutes,
    };
    anyhow::ensure!(
        minutes > 0.0 && minutes <= 24.0 * 60.0,
        "--minutes (or --duration) must be more than 0 and at most 1440 minutes"
    );
    let node_bin = node_bin(&args)?;
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(1)
    });
    let duration = Duration::from_secs_f64(minutes * 60.0);
    let mode = if cluster {
        "Redis Cluster"
    } else {
        "one Redis"
    };
    eprintln!(
        "keyfire chaos: seed {seed}, {minutes:.1} min, {} nodes, {mode} ({})",
        args.nodes,
        node_bin.display()
    );
    let cfg = Config {
        seed,
        duration,
        nodes: args.nodes,
        node_bin,
        dir: args.dir,
        verbose: args.verbose,
        cluster,
    };
    let out = if args.queue {
        crate::chaos::run_queue(cfg).await?
    } else {
        crate::chaos::run(cfg).await?
    };
    println!(
        "keyfire chaos round: seed {seed}, {minutes:.1} min of faults, {} nodes, {mode}, files in {}",
        args.nodes,
        out.dir.display()
    );
    println!("{}", out.report);
    if !out.incidents.is_empty() {
        println!(
            "harness incidents: {} (each healed; the faults as they happened are in faults.json)",
            out.incidents.len()
        );
        for i in &out.incidents {
            println!("  - {i}");
        }
    }
    if cluster {
        let missing: Vec<&str> = crate::chaos::FaultKind::CLUSTER_SCHEDULED
            .iter()
            .filter(|k| out.report.faults.get(k).copied().unwrap_or(0) == 0)
            .map(|k| k.name())
            .collect();
        if !missing.is_empty() {
            println!("warning: no {} fault happened", missing.join(", "));
        }
    }
    if out.report.ok() {
        println!("violations: 0");
        Ok(())
    } else {
        anyhow::bail!(
            "{} violations; replay with `keyfire chaos --minutes {} --seed {seed}{}`",
            out.report.violations.len(),
            minutes,
            if args.queue {
                " --queue"
            } else if cluster {
                " --redis-mode cluster"
            } else {
                ""
            }
        )
    }
}
