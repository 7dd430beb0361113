//! Running a round: Redis (shipped `redis.conf`, AOF on), node processes behind proxies, the
//! workload, the two fault lanes, the drain, and the collection of the history.
//!
//! On a Redis Cluster ([`Config::cluster`]): 3 masters with a replica each, every Redis node
//! behind a proxy of its own that it announces as its address (`cluster-announce-port`), so
//! every client, the nodes' and the harness's, reaches it through the proxy; the nodes spread
//! their jobs over [`CLUSTER_SHARDS`] shards and wait for a replica to acknowledge each claim
//! and outcome (`redis.wait_replicas = 1`).
//!
//! # Where it is
//!
//! Here: the node settings of a round, [`Config`], [`Outcome`], [`run`] (set up, drive,
//! check, keep the files) and [`recheck`]. Then:
//!
//! - `round`: the shared state of a running round, its setup and its course (nodes up, the
//!   workload and the fault lanes, the drain, the history collected);
//! - `nodes`: the node processes (and the delay-queue consumers'): spawn, signal, freeze,
//!   kill, stop; wait for a node's heartbeat;
//! - `redis`: the round's Redis, one server or a cluster; Redis time; the faults of one
//!   Redis (restarted, emptied, full);
//! - `cluster`: a Redis Cluster behind its proxies and its faults (replica killed, slot
//!   migrated, master partitioned or killed and failed over), healing it, keeping its files;
//! - `faults`: the fault lanes: each planned fault injected and recorded, incidents noted;
//! - `workload`: the static jobs, the workload driver and its calls (retried through
//!   outages), the delay-queue consumers.

mod cluster;
mod faults;
mod nodes;
mod redis;
mod round;
mod workload;

pub(in crate::chaos) use self::redis::redis_ms;
pub(in crate::chaos) use nodes::{NodeProc, start_nodes};
pub(in crate::chaos) use round::{Round, setup};
pub(in crate::chaos) use workload::retrying;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use crate::chaos::check::{Report, check};
use crate::chaos::model::{FaultEvent, History, Workload};
use crate::chaos::nodelog;
use crate::chaos::plan::Plan;
use crate::chaos::record::read_events;
use cluster::{copy_redis_logs, keep_redis_dirs};
use round::drive;

/// Key prefix of the round's data.
pub(in crate::chaos) const PREFIX: &str = "chaos";
/// Node settings of a round: short, so a minute sees every fault play out.
pub(in crate::chaos) const LEASE_MS: i64 = 2_000;
pub(in crate::chaos) const HEARTBEAT_MS: i64 = 200;
pub(in crate::chaos) const NODE_TTL_MS: i64 = 1_000;
pub(in crate::chaos) const SWEEP_MS: i64 = 500;
pub(in crate::chaos) const GRACE_MS: i64 = 1_000;
/// The delay-queue topic of a round, and its tasks' time-to-run.
const TOPIC: &str = "chaos";
const QUEUE_TTR: Duration = Duration::from_secs(2);
/// How long the drain may take before what is left counts as stuck.
const DRAIN_LIMIT: Duration = Duration::from_secs(60);
/// Shards of a round on a Redis Cluster: two on each of the 3 masters.
pub const CLUSTER_SHARDS: u32 = 6;
/// Longest a cluster fault may wait for the cluster to settle (a failover, a restart).
const CLUSTER_LIMIT: Duration = Duration::from_secs(60);
/// How long the nodes have to notice that Redis lost keyfire's data and heal, from the moment
/// Redis answers again (they check on every heartbeat).
const HEAL_LIMIT: Duration = Duration::from_secs(5);
/// How far above `used_memory` a `redis_full` fault sets `maxmemory`: the nodes' run records
/// and the workload's next writes reach it within a second (with 32 KiB, some faults of 3 s
/// refused nothing).
const FULL_MARGIN: u64 = 4 * 1024;

/// How to run a round.
#[derive(Debug, Clone)]
pub struct Config {
    /// Seed of the fault plan and the workload's decisions.
    pub seed: u64,
    /// Length of the fault phase (the drain comes after).
    pub duration: Duration,
    /// Node processes (3 to 5).
    pub nodes: usize,
    /// The `chaos_node` example binary.
    pub node_bin: PathBuf,
    /// Where to keep the logs, run logs and the round's record; a temporary directory
    /// (kept when the round fails) when `None`.
    pub dir: Option<PathBuf>,
    /// Print each fault as it is injected.
    pub verbose: bool,
    /// Run on a Redis Cluster (3 masters, a replica each) with the cluster's faults.
    pub cluster: bool,
}

impl Config {
    /// What every round needs of its configuration: 3 to 5 nodes and the node binary built.
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            (3..=5).contains(&self.nodes),
            "a round runs 3 to 5 nodes, not {}",
            self.nodes
        );
        anyhow::ensure!(
            self.node_bin.is_file(),
            "the chaos node binary {} is missing: build it with `cargo build --release --examples`",
            self.node_bin.display()
        );
        Ok(())
    }
}

/// What a round produced.
#[derive(Debug)]
pub struct Outcome {
    /// The checker's verdict.
    pub report: Report,
    /// The workload as run.
    pub workload: Workload,
    /// The faults as injected.
    pub faults: Vec<FaultEvent>,
    /// Where its files are.
    pub dir: PathBuf,
    /// What the harness could not do as planned, in order: a cluster fault that failed (the
    /// part that happened is among the faults) or found the cluster not whole, after which
    /// the cluster was made whole again. The verdict covers the faults as recorded.
    pub incidents: Vec<String>,
}

/// Where `cargo build --examples` puts the `chaos_node` example for the binary (or test
/// binary) at `exe`: `target/<profile>/examples/chaos_node`, next to `target/<profile>/keyfire`
/// or one level above `target/<profile>/deps/<test>`.
pub fn node_bin_near(exe: &Path) -> Option<PathBuf> {
    let dir = exe.parent()?;
    [dir.to_path_buf(), dir.parent()?.to_path_buf()]
        .into_iter()
        .map(|d| d.join("examples").join("chaos_node"))
        .find(|p| p.is_file())
}

/// Check a round again from the files it left in `dir` (after a change to the checker).
pub fn recheck(dir: &Path) -> anyhow::Result<Report> {
    let read = |name: &str| {
        std::fs::read(dir.join(name)).with_context(|| format!("read {}", dir.join(name).display()))
    };
    let workload: Workload = serde_json::from_slice(&read("workload.json")?)?;
    let faults: Vec<FaultEvent> = serde_json::from_slice(&read("faults.json")?)?;
    let history: History = serde_json::from_slice(&read("history.json")?)?;
    Ok(check(&workload, &history, &faults))
}

/// The directory of a round's files: `cfg.dir`, or a temporary one (kept when it fails).
pub(in crate::chaos) fn round_dir(
    cfg: &Config,
) -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
    Ok(match &cfg.dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            (d.clone(), None)
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("keyfire-chaos-")
                .tempdir()?;
            (t.path().to_path_buf(), Some(t))
        }
    })
}

/// Check a round and write its files; keep a temporary directory when it failed.
pub(in crate::chaos) fn finish_round(
    dir: &Path,
    temp: Option<tempfile::TempDir>,
    workload: Workload,
    faults: Vec<FaultEvent>,
    history: History,
) -> anyhow::Result<Outcome> {
    let report = check(&workload, &history, &faults);
    std::fs::write(
        dir.join("workload.json"),
        serde_json::to_vec_pretty(&workload)?,
    )?;
    std::fs::write(dir.join("faults.json"), serde_json::to_vec_pretty(&faults)?)?;
    std::fs::write(dir.join("history.json"), serde_json::to_vec(&history)?)?;
    std::fs::write(dir.join("report.json"), serde_json::to_vec_pretty(&report)?)?;
    std::fs::write(dir.join("report.txt"), report.to_string())?;
    if let Some(t) = temp
        && !report.ok()
    {
        let _ = t.keep();
    }
    Ok(Outcome {
        report,
        workload,
        faults,
        dir: dir.to_path_buf(),
        incidents: Vec::new(),
    })
}

/// Run one round and check it.
pub async fn run(cfg: Config) -> anyhow::Result<Outcome> {
    cfg.check()?;
    let (dir, temp) = round_dir(&cfg)?;
    let plan = if cfg.cluster {
        Plan::cluster(cfg.seed, cfg.duration, cfg.nodes)
    } else {
        Plan::new(cfg.seed, cfg.duration, cfg.nodes)
    };
    let round = setup(&cfg, &dir, &plan).await?;
    let result = drive(&round, &plan).await;
    // Stop every node (after a failed round too); Redis goes with the round.
    for n in round.nodes.lock().await.iter_mut() {
        n.stop().await;
    }
    copy_redis_logs(&round, &dir).await;
    let incidents = round.incidents.lock().expect("incidents lock").clone();
    if !incidents.is_empty() {
        std::fs::write(dir.join("incidents.txt"), incidents.join("\n") + "\n")?;
    }
    let (workload, faults, mut history) = match result {
        Ok(r) => r,
        Err(e) => {
            // No verdict: keep everything there is to read.
            keep_redis_dirs(&round, &dir).await;
            let dir = temp.map(tempfile::TempDir::keep).unwrap_or(dir);
            return Err(e.context(format!(
                "the round did not run to its end, so there is no verdict; its files are in {}",
                dir.display()
            )));
        }
    };
    let (runs, torn) = read_events(&dir)?;
    history.runs = runs;
    history.torn = torn;
    let ids = round.node_ids().await;
    history.node_log = nodelog::read(&dir, &ids);
    let mut out = finish_round(&dir, None, workload, faults, history)?;
    out.incidents = incidents;
    if !out.report.ok() || !out.incidents.is_empty() {
        keep_redis_dirs(&round, &dir).await;
        if let Some(t) = temp {
            let _ = t.keep();
        }
    }
    Ok(out)
}
