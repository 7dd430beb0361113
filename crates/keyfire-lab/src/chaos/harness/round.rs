//! A running round: its shared state ([`Round`]: Redis, the nodes, the proxies, the faults
//! and incidents so far, the lock the workload's calls hold), its setup, and its course
//! ([`drive`]): nodes up, the workload and both fault lanes until the cutoff, everything
//! healed, the drain, and the history collected.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::time::Duration;

use anyhow::Context;
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::cluster::{ClusterRig, start_cluster};
use super::nodes::{NodeProc, start_nodes};
use super::redis::{Backend, backend_settings, redis_ms};
use super::workload::{Driver, DynState, consume, static_jobs};
use super::{
    CLUSTER_LIMIT, CLUSTER_SHARDS, Config, DRAIN_LIMIT, GRACE_MS, NODE_TTL_MS, PREFIX, SWEEP_MS,
    TOPIC,
};
use crate::chaos::model::{Bounds, FaultEvent, FaultKind, History, OpKind, QueueEvent, Workload};
use crate::chaos::plan::Plan;
use crate::chaos::proxy::{Mode, Proxy};
use crate::chaos::record::{RunTail, host_ms};
use keyfire::client::Client;
use keyfire::config::Settings;
use keyfire::error::Error;
use keyfire::queue::Queue;
use keyfire::store::{Conn, Keys, Shards, parse_firing_id};
use keyfire_testkit::{RedisOptions, RedisServer};

/// Shared state of a running round.
pub(in crate::chaos) struct Round {
    pub(in crate::chaos) cfg: Config,
    pub(in crate::chaos) dir: PathBuf,
    pub(in crate::chaos) redis: Backend,
    pub(in crate::chaos) admin: Conn,
    /// The meta keys (membership, queue).
    pub(in crate::chaos) keys: Keys,
    /// Every shard's keys.
    pub(in crate::chaos) shards: Shards,
    pub(in crate::chaos) nodes: Mutex<Vec<NodeProc>>,
    pub(in crate::chaos) proxies: Vec<Proxy>,
    faults: std::sync::Mutex<Vec<FaultEvent>>,
    /// See [`Outcome::incidents`](super::Outcome::incidents).
    pub(super) incidents: std::sync::Mutex<Vec<String>>,
    /// Held by every workload call, and by the Redis lane around outages: no call returns in
    /// the AOF-loss window before a Redis SIGKILL, none fails on a Redis that is down.
    pub(in crate::chaos) op_lock: Mutex<()>,
    /// Asks the workload driver to delete and re-create a job at once: while a node is cut
    /// off, or its subscriber was just killed, so the node misses the change messages.
    pub(super) churn: tokio::sync::Notify,
    /// How many times Redis lost its data (`redis_empty` faults over): the workload driver
    /// forgets what it created before and creates its jobs again.
    pub(super) data_losses: AtomicU64,
    /// Calls of the workload Redis refused as full.
    pub(super) refused: AtomicUsize,
    /// Each node's run log, followed (in the order of `nodes`).
    pub(super) tails: std::sync::Mutex<Vec<RunTail>>,
    start: Instant,
}

impl Round {
    pub(in crate::chaos) fn note(&self, msg: impl AsRef<str>) {
        if self.cfg.verbose {
            eprintln!(
                "[chaos {:>6.1}s] {}",
                self.start.elapsed().as_secs_f64(),
                msg.as_ref()
            );
        }
    }

    /// The faults injected so far.
    pub(in crate::chaos) fn faults(&self) -> Vec<FaultEvent> {
        self.faults.lock().expect("faults lock").clone()
    }

    pub(in crate::chaos) fn record(
        &self,
        kind: FaultKind,
        node: Option<&str>,
        start_ms: i64,
        detail: String,
    ) {
        let end_ms = host_ms();
        self.note(format!(
            "{kind} {} {detail} ({} ms)",
            node.unwrap_or(""),
            end_ms - start_ms
        ));
        self.faults.lock().expect("faults lock").push(FaultEvent {
            kind,
            node: node.map(str::to_string),
            start_ms,
            end_ms,
            detail,
        });
    }

    /// Settings that reach the round's Redis (the harness's client and queue).
    pub(in crate::chaos) fn settings(&self) -> Settings {
        backend_settings(&self.redis)
    }

    pub(super) fn rig(&self) -> anyhow::Result<&ClusterRig> {
        match &self.redis {
            Backend::Cluster(rig) => Ok(rig),
            Backend::Single(_) => anyhow::bail!("a cluster fault on a single Redis"),
        }
    }

    pub(super) fn single(&self) -> anyhow::Result<Arc<std::sync::Mutex<RedisServer>>> {
        match &self.redis {
            Backend::Single(r) => Ok(r.clone()),
            Backend::Cluster(_) => anyhow::bail!("a single-Redis fault on a cluster"),
        }
    }

    /// Whether node `id` heartbeat after `since` (Redis time).
    pub(super) async fn beat_since(&self, id: &str, since: i64) -> bool {
        let score: redis::RedisResult<Option<i64>> = redis::cmd("ZSCORE")
            .arg(self.keys.nodes())
            .arg(id)
            .query_async(&mut self.admin.clone())
            .await;
        matches!(score, Ok(Some(s)) if s >= since)
    }

    /// Wait until node `id` heartbeats after `since` (Redis time), at most `limit`.
    pub(in crate::chaos) async fn wait_heartbeat(
        &self,
        id: &str,
        since: i64,
        limit: Duration,
    ) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.beat_since(id, since).await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }
}

/// Start Redis (one server, or a cluster with `cfg.cluster`) and `n` nodes behind proxies.
pub(in crate::chaos) async fn setup(
    cfg: &Config,
    dir: &Path,
    plan: &Plan,
) -> anyhow::Result<Round> {
    let redis = if cfg.cluster {
        Backend::Cluster(start_cluster().await?)
    } else {
        let redis = RedisServer::start_with(RedisOptions {
            persistent: true,
            extra: Vec::new(),
        })
        .context("start redis-server")?;
        Backend::Single(Arc::new(std::sync::Mutex::new(redis)))
    };
    let admin = Conn::connect(&backend_settings(&redis).redis).await?;
    let mut proxies = Vec::new();
    let mut nodes = Vec::new();
    for (i, skew) in plan.initial_skews.iter().enumerate() {
        let redis_env = match &redis {
            // Each node has a proxy of its own, to cut it off alone.
            Backend::Single(r) => {
                let upstream = format!("127.0.0.1:{}", r.lock().expect("redis lock").port());
                let proxy = Proxy::start(upstream).await?;
                let env = vec![("KEYFIRE__REDIS__URL".to_string(), proxy.url())];
                proxies.push(proxy);
                env
            }
            // Every node reaches the cluster through the proxies its nodes announce.
            Backend::Cluster(rig) => [
                ("MODE", "cluster".to_string()),
                ("NODES", rig.nodes().join(",")),
                ("SHARDS", CLUSTER_SHARDS.to_string()),
                ("WAIT_REPLICAS", "1".to_string()),
            ]
            .into_iter()
            .map(|(k, v)| (format!("KEYFIRE__REDIS__{k}"), v))
            .collect(),
        };
        nodes.push(NodeProc {
            id: format!("n{}", i + 1),
            child: None,
            skew_ms: *skew,
            redis_env,
            dir: dir.to_path_buf(),
            bin: cfg.node_bin.clone(),
            consumer_of: None,
            frozen: false,
            started_ms: 0,
        });
    }
    let shards = match &redis {
        Backend::Single(_) => Shards::new(PREFIX, 1),
        Backend::Cluster(_) => Shards::new(PREFIX, CLUSTER_SHARDS as usize),
    };
    let tails = nodes
        .iter()
        .map(|n| RunTail::new(dir.join(format!("{}.jsonl", n.id))))
        .collect();
    Ok(Round {
        cfg: cfg.clone(),
        dir: dir.to_path_buf(),
        redis,
        admin,
        keys: Keys::new(PREFIX),
        shards,
        nodes: Mutex::new(nodes),
        proxies,
        faults: std::sync::Mutex::new(Vec::new()),
        incidents: std::sync::Mutex::new(Vec::new()),
        op_lock: Mutex::new(()),
        churn: tokio::sync::Notify::new(),
        data_losses: AtomicU64::new(0),
        refused: AtomicUsize::new(0),
        tails: std::sync::Mutex::new(tails),
        start: Instant::now(),
    })
}

/// Firings due at or before `cutoff` still running, queued for an attempt, or unclaimed.
async fn pending(round: &Round, cutoff: i64) -> anyhow::Result<Vec<String>> {
    let mut conn = round.admin.clone();
    let mut out = Vec::new();
    // One pipeline per shard: its keys share a slot.
    for k in round.shards.iter() {
        let (running, retry, due): (Vec<String>, Vec<String>, Vec<(String, i64)>) = redis::pipe()
            .cmd("ZRANGE")
            .arg(k.running())
            .arg(0)
            .arg(-1)
            .cmd("ZRANGE")
            .arg(k.retry())
            .arg(0)
            .arg(-1)
            .cmd("ZRANGE")
            .arg(k.due())
            .arg("-inf")
            .arg(cutoff)
            .arg("BYSCORE")
            .arg("WITHSCORES")
            .query_async(&mut conn)
            .await?;
        out.extend(
            running
                .into_iter()
                .chain(retry)
                // A lease names the run after its firing id: `<firing id>|<attempt>|…`.
                .map(|m| keyfire::store::parse_lease_member(&m).0.to_string())
                .filter(|f| parse_firing_id(f).is_some_and(|(_, at)| at <= cutoff)),
        );
        out.extend(
            due.into_iter()
                .map(|(job, at)| keyfire::store::firing_id(&job, at)),
        );
    }
    Ok(out)
}

pub(super) async fn drive(
    round: &Round,
    plan: &Plan,
) -> anyhow::Result<(Workload, Vec<FaultEvent>, History)> {
    let settings = round.settings();
    let client = Client::connect(&settings).await?.allow_handlers(["chaos"]);
    let mut conn = round.admin.clone();

    // Nodes first, all heartbeating, before any job exists.
    start_nodes(round).await?;
    round.note(format!("plan: {plan:?}"));

    let start_ms = redis_ms(&mut conn).await;
    let mut driver = Driver {
        round,
        client,
        conn: conn.clone(),
        rng: StdRng::seed_from_u64(plan.seed ^ 0x5eed_c4a0_5000_0001),
        ops: Vec::new(),
        next_task: 0,
        queue: Queue::connect(&settings).await?,
        next_qtask: 0,
        dyn_jobs: (0..4)
            .map(|i| (format!("dyn-{i}"), 0, DynState::Absent))
            .collect(),
        statics: static_jobs(start_ms)
            .into_iter()
            .map(|spec| (spec, 1, false))
            .collect(),
        losses_seen: 0,
    };
    driver.ensure_statics().await?;

    // The round proper: the workload and both fault lanes, until the cutoff.
    let queue_events: Arc<std::sync::Mutex<Vec<QueueEvent>>> = Arc::default();
    let stop_consumers = tokio_util::sync::CancellationToken::new();
    let mut consumers = Vec::new();
    for i in 0..2u64 {
        // Done records are kept through the round, so the end state of every task is known.
        let queue = Queue::connect(&settings)
            .await?
            .with_retention(Duration::from_secs(24 * 3600));
        consumers.push(tokio::spawn(consume(
            format!("c{}", i + 1),
            queue,
            plan.seed ^ (0xc0_0000 + i),
            queue_events.clone(),
            stop_consumers.clone(),
        )));
    }
    let round_start = Instant::now();
    let until = round_start + plan.duration;
    let (w, a, b) = tokio::join!(
        driver.run(until),
        round.run_lane(&plan.node_lane, round_start),
        round.run_lane(&plan.redis_lane, round_start),
    );
    w?;
    a?;
    b?;
    let cutoff_ms = redis_ms(&mut conn).await;
    round.note("cutoff: faults over; draining");

    // Heal everything (lanes end healed; this is a belt).
    for p in &round.proxies {
        p.set(Mode::Pass);
    }
    if let Backend::Cluster(rig) = &round.redis {
        for p in &rig.proxies {
            p.set(Mode::Pass);
        }
    }
    if let Backend::Cluster(rig) = &round.redis
        && let Err(e) = rig.with(|c| c.wait_healthy(CLUSTER_LIMIT)).await
    {
        round.incident(format!("at the cutoff: {e:#}"));
        round.heal(rig).await?;
    }
    for n in round.nodes.lock().await.iter_mut() {
        n.freeze(false);
        if let Some(status) = n.exit_status() {
            round.incident(format!(
                "node {} had exited ({status}; see {}.log): started again for the drain",
                n.id, n.id
            ));
            n.child = None;
        }
        if n.child.is_none() {
            n.spawn()?;
        }
    }

    // Drain: everything due by the cutoff settles (claimed, retried, finished).
    let deadline = Instant::now() + DRAIN_LIMIT;
    let mut leftovers;
    loop {
        leftovers = pending(round, cutoff_ms).await.unwrap_or_default();
        let queued = match driver.queue.topics().await {
            Ok(t) => t
                .iter()
                .filter(|c| c.topic == TOPIC)
                .map(|c| c.delayed + c.ready + c.reserved)
                .sum(),
            Err(_) => 1,
        };
        if (leftovers.is_empty() && queued == 0) || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    stop_consumers.cancel();
    for c in consumers {
        let _ = c.await;
    }
    // Stop the nodes (they drain their runs), so every run recorded was claimed before the
    // end of the observation.
    for n in round.nodes.lock().await.iter_mut() {
        n.stop().await;
    }
    let end_ms = redis_ms(&mut conn).await;

    // The history: keyfire's records of every job still there, and the run logs.
    let mut history = History {
        leftovers,
        queue: std::mem::take(&mut *queue_events.lock().expect("queue events lock")),
        ..History::default()
    };
    for op in &driver.ops {
        if let OpKind::QueueAdd { .. } = op.kind {
            let state = match driver.queue.get(&op.job).await {
                Ok(info) => format!("{:?}", info.state).to_lowercase(),
                Err(Error::TaskNotFound(_)) => "gone".into(),
                Err(e) => return Err(e.into()),
            };
            history.queue_states.insert(op.job.clone(), state);
        }
    }
    let mut jobs: Vec<String> = driver
        .ops
        .iter()
        .filter(|o| !matches!(o.kind, OpKind::QueueAdd { .. }))
        .map(|o| o.job.clone())
        .collect();
    jobs.sort();
    jobs.dedup();
    for job in jobs {
        if driver.client.get(&job).await.is_ok() {
            history
                .keyfire_runs
                .insert(job.clone(), driver.client.runs(&job, 100_000).await?);
            history.dead.insert(
                job.clone(),
                driver.client.dead_letters(&job, 100_000).await?,
            );
        }
    }
    let bounds = Bounds::for_settings(GRACE_MS, NODE_TTL_MS, SWEEP_MS);
    let workload = Workload {
        seed: plan.seed,
        start_ms,
        cutoff_ms,
        end_ms,
        bounds,
        ops: std::mem::take(&mut driver.ops),
    };
    let faults = round.faults();
    Ok((workload, faults, history))
}
