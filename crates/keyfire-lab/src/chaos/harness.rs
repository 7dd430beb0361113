//! Running a round: Redis (shipped `redis.conf`, AOF on), node processes behind proxies, the
//! workload, the two fault lanes, the drain, and the collection of the history.
//!
//! On a Redis Cluster ([`Config::cluster`]): 3 masters with a replica each, every Redis node
//! behind a proxy of its own that it announces as its address (`cluster-announce-port`), so
//! every client, the nodes' and the harness's, reaches it through the proxy; the nodes spread
//! their jobs over [`CLUSTER_SHARDS`] shards and wait for a replica to acknowledge each claim
//! and outcome (`redis.wait_replicas = 1`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::json;
use tokio::process::{Child, Command};
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::check::{Report, check};
use super::model::{
    Bounds, FaultEvent, FaultKind, History, Op, OpKind, QueueEv, QueueEvent, Workload,
};
use super::nodelog;
use super::plan::{Plan, PlannedFault};
use super::proxy::{Mode, Proxy};
use super::record::{RunTail, host_ms, read_events};
use keyfire::client::Client;
use keyfire::config::{RedisMode, Settings};
use keyfire::error::Error;
use keyfire::job::{JobSpec, RetrySpec};
use keyfire::queue::{NewTask, Queue, When};
use keyfire::store::{Conn, JobStatus, Keys, Shards, parse_firing_id, slot_of};
use keyfire_testkit::{RedisCluster, RedisOptions, RedisServer};

/// Key prefix of the round's data.
pub(super) const PREFIX: &str = "chaos";
/// Node settings of a round: short, so a minute sees every fault play out.
pub(super) const LEASE_MS: i64 = 2_000;
pub(super) const HEARTBEAT_MS: i64 = 200;
pub(super) const NODE_TTL_MS: i64 = 1_000;
pub(super) const SWEEP_MS: i64 = 500;
pub(super) const GRACE_MS: i64 = 1_000;
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

/// A node process (or a delay-queue consumer process) and how to start it again.
pub(super) struct NodeProc {
    pub(super) id: String,
    pub(super) child: Option<Child>,
    pub(super) skew_ms: i64,
    /// `KEYFIRE__REDIS__…` settings: how it reaches Redis.
    pub(super) redis_env: Vec<(String, String)>,
    pub(super) dir: PathBuf,
    pub(super) bin: PathBuf,
    /// A consumer of these topics (comma-separated) instead of a node.
    pub(super) consumer_of: Option<String>,
    /// SIGSTOPped by a fault, not yet continued.
    pub(super) frozen: bool,
    /// When its process was last started (host ms).
    pub(super) started_ms: i64,
}

impl NodeProc {
    pub(super) fn spawn(&mut self) -> anyhow::Result<()> {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{}.log", self.id)))?;
        let ms = |v: i64| format!("{v}ms");
        let mut cmd = Command::new(&self.bin);
        if let Some(topics) = &self.consumer_of {
            cmd.env("KEYFIRE_CHAOS_CONSUMER", &self.id)
                .env("KEYFIRE_CHAOS_TOPICS", topics)
                .env("KEYFIRE_CHAOS_SEED", stable_seed(&self.id).to_string());
        }
        for (k, v) in &self.redis_env {
            cmd.env(k, v);
        }
        let child = cmd
            .env("KEYFIRE__REDIS__PREFIX", PREFIX)
            .env("KEYFIRE__NODE__ID", &self.id)
            .env("KEYFIRE__NODE__LEASE", ms(LEASE_MS))
            .env("KEYFIRE__NODE__HEARTBEAT_INTERVAL", ms(HEARTBEAT_MS))
            .env("KEYFIRE__NODE__NODE_TTL", ms(NODE_TTL_MS))
            .env("KEYFIRE__NODE__SWEEP_INTERVAL", ms(SWEEP_MS))
            .env("KEYFIRE__NODE__CLAIM_GRACE", ms(GRACE_MS))
            .env("KEYFIRE__NODE__TIMER_HORIZON", "1500ms")
            .env("KEYFIRE__NODE__DRAIN_TIMEOUT", "3s")
            .env("KEYFIRE__NODE__HISTORY_LIMIT", "100000")
            .env("KEYFIRE__NODE__DEAD_LETTER_LIMIT", "100000")
            .env(
                "KEYFIRE_CHAOS_LOG",
                self.dir.join(format!("{}.jsonl", self.id)),
            )
            .env("KEYFIRE_CHAOS_SKEW_MS", self.skew_ms.to_string())
            .env(
                "RUST_LOG",
                std::env::var("KEYFIRE_CHAOS_NODE_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(std::process::Stdio::null())
            // Logs go to stdout; both into the node's log file.
            .stdout(stderr.try_clone()?)
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("run {}", self.bin.display()))?;
        self.child = Some(child);
        self.frozen = false;
        self.started_ms = host_ms();
        Ok(())
    }

    /// How its process ended, if it was started and has exited on its own since.
    pub(super) fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// Its own log (what the process prints).
    pub(super) fn log_path(&self) -> PathBuf {
        self.dir.join(format!("{}.log", self.id))
    }

    /// SIGSTOP (`true`) or SIGCONT (`false`).
    pub(super) fn freeze(&mut self, frozen: bool) {
        self.signal(if frozen {
            Signal::SIGSTOP
        } else {
            Signal::SIGCONT
        });
        self.frozen = frozen;
    }

    /// The log of a consumer process.
    pub(super) fn queue_log(&self) -> PathBuf {
        self.dir
            .join(format!("{}.{}", self.id, super::consumer::LOG_EXT))
    }

    pub(super) fn signal(&self, sig: Signal) {
        if let Some(pid) = self.child.as_ref().and_then(Child::id) {
            let _ = kill(Pid::from_raw(pid as i32), sig);
        }
    }

    pub(super) async fn kill(&mut self) {
        self.signal(Signal::SIGKILL);
        self.frozen = false;
        if let Some(mut c) = self.child.take() {
            let _ = c.wait().await;
        }
    }

    /// SIGTERM (the node drains), SIGKILL if it takes too long.
    pub(super) async fn stop(&mut self) {
        self.freeze(false);
        self.signal(Signal::SIGTERM);
        if let Some(mut c) = self.child.take()
            && tokio::time::timeout(Duration::from_secs(10), c.wait())
                .await
                .is_err()
        {
            let _ = c.kill().await;
        }
    }
}

/// Redis time in ms over `conn`, or the host's clock when Redis does not answer (the same
/// clock: Redis runs on this host).
pub(super) async fn redis_ms(conn: &mut Conn) -> i64 {
    keyfire::store::redis_time_ms(conn)
        .await
        .unwrap_or_else(|_| host_ms())
}

/// A seed from a name, the same in every run.
fn stable_seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// How a call of the workload ended.
pub(super) enum Answer<T> {
    /// It succeeded.
    Done(T),
    /// Redis refused it because it is full (`Error::is_redis_full`): nothing was written, and
    /// it is not tried again (the refusal is the answer under test).
    Full(String),
    /// It kept failing; or a delete found nothing (it succeeded on an earlier try).
    Gone,
}

impl<T> Answer<T> {
    /// What it returned, if it succeeded.
    pub(super) fn done(self) -> Option<T> {
        match self {
            Answer::Done(v) => Some(v),
            _ => None,
        }
    }
}

/// Retry a call until it succeeds (Redis may be restarting): the change happened between the
/// first try and the success. A delete that finds nothing succeeded on an earlier try; a call
/// refused because Redis is full is not tried again.
pub(super) async fn retrying<T, F, Fut>(
    conn: &mut Conn,
    round: &Round,
    what: &str,
    mut f: F,
) -> (i64, i64, Answer<T>)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = keyfire::Result<T>>,
{
    let call = redis_ms(conn).await;
    for _ in 0..100 {
        match f().await {
            Ok(v) => return (call, redis_ms(conn).await, Answer::Done(v)),
            Err(Error::NotFound(_)) if what == "delete" => {
                return (call, redis_ms(conn).await, Answer::Gone);
            }
            Err(e) if e.is_redis_full() => {
                round.note(format!("{what} refused, Redis is full: {e}"));
                return (call, redis_ms(conn).await, Answer::Full(e.to_string()));
            }
            Err(e) => {
                round.note(format!("{what} failed, retrying: {e}"));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    (call, redis_ms(conn).await, Answer::Gone)
}

/// The Redis of a round.
pub(super) enum Backend {
    /// One server; each node reaches it through a proxy of its own (in `Round::proxies`).
    Single(Arc<std::sync::Mutex<RedisServer>>),
    /// A Redis Cluster, each of its nodes behind one proxy that every client goes through.
    Cluster(ClusterRig),
}

/// A Redis Cluster and the proxies in front of its nodes (`proxies[i]` before node `i` of
/// [`RedisCluster::servers`]).
pub(super) struct ClusterRig {
    pub(super) cluster: Arc<std::sync::Mutex<RedisCluster>>,
    pub(super) proxies: Vec<Proxy>,
}

impl ClusterRig {
    /// Seed URLs: the proxies.
    fn nodes(&self) -> Vec<String> {
        self.proxies
            .iter()
            .map(|p| format!("redis://127.0.0.1:{}", p.port()))
            .collect()
    }

    /// Run blocking work on the cluster fixture off the async workers.
    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut RedisCluster) -> std::io::Result<T> + Send + 'static,
    ) -> anyhow::Result<T> {
        let cluster = self.cluster.clone();
        Ok(tokio::task::spawn_blocking(move || {
            let mut c = cluster.lock().expect("cluster lock");
            f(&mut c)
        })
        .await??)
    }

    /// Send `cmd` to every live node (masters only with `masters_only`), each on its own
    /// port (not through its proxy); the replies that came.
    async fn on_each(&self, masters_only: bool, cmd: redis::Cmd) -> anyhow::Result<Vec<i64>> {
        self.with(move |c| {
            let roles = c.roles()?;
            let mut out = Vec::new();
            for r in roles.iter().filter(|r| r.master || !masters_only) {
                let addr = c.servers()[r.index].addr();
                let reply = redis::Client::open(format!("redis://{addr}"))
                    .and_then(|cl| cl.get_connection_with_timeout(Duration::from_secs(1)))
                    .and_then(|mut conn| cmd.query::<redis::Value>(&mut conn));
                match reply {
                    Ok(redis::Value::Int(n)) => out.push(n),
                    Ok(_) => out.push(0),
                    Err(_) => {}
                }
            }
            Ok(out)
        })
        .await
    }
}

/// Shared state of a running round.
pub(super) struct Round {
    pub(super) cfg: Config,
    pub(super) dir: PathBuf,
    pub(super) redis: Backend,
    pub(super) admin: Conn,
    /// The meta keys (membership, queue).
    pub(super) keys: Keys,
    /// Every shard's keys.
    pub(super) shards: Shards,
    pub(super) nodes: Mutex<Vec<NodeProc>>,
    pub(super) proxies: Vec<Proxy>,
    faults: std::sync::Mutex<Vec<FaultEvent>>,
    /// See [`Outcome::incidents`].
    incidents: std::sync::Mutex<Vec<String>>,
    /// Held by every workload call, and by the Redis lane around outages: no call returns in
    /// the AOF-loss window before a Redis SIGKILL, none fails on a Redis that is down.
    pub(super) op_lock: Mutex<()>,
    /// Asks the workload driver to delete and re-create a job at once: while a node is cut
    /// off, or its subscriber was just killed, so the node misses the change messages.
    churn: tokio::sync::Notify,
    /// How many times Redis lost its data (`redis_empty` faults over): the workload driver
    /// forgets what it created before and creates its jobs again.
    data_losses: AtomicU64,
    /// Calls of the workload Redis refused as full.
    refused: AtomicUsize,
    /// Each node's run log, followed (in the order of `nodes`).
    tails: std::sync::Mutex<Vec<RunTail>>,
    start: Instant,
}

impl Round {
    pub(super) fn note(&self, msg: impl AsRef<str>) {
        if self.cfg.verbose {
            eprintln!(
                "[chaos {:>6.1}s] {}",
                self.start.elapsed().as_secs_f64(),
                msg.as_ref()
            );
        }
    }

    /// The faults injected so far.
    pub(super) fn faults(&self) -> Vec<FaultEvent> {
        self.faults.lock().expect("faults lock").clone()
    }

    pub(super) fn record(
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
    pub(super) fn settings(&self) -> Settings {
        backend_settings(&self.redis)
    }

    fn rig(&self) -> anyhow::Result<&ClusterRig> {
        match &self.redis {
            Backend::Cluster(rig) => Ok(rig),
            Backend::Single(_) => anyhow::bail!("a cluster fault on a single Redis"),
        }
    }

    fn single(&self) -> anyhow::Result<Arc<std::sync::Mutex<RedisServer>>> {
        match &self.redis {
            Backend::Single(r) => Ok(r.clone()),
            Backend::Cluster(_) => anyhow::bail!("a single-Redis fault on a cluster"),
        }
    }

    /// Whether node `id` heartbeat after `since` (Redis time).
    async fn beat_since(&self, id: &str, since: i64) -> bool {
        let score: redis::RedisResult<Option<i64>> = redis::cmd("ZSCORE")
            .arg(self.keys.nodes())
            .arg(id)
            .query_async(&mut self.admin.clone())
            .await;
        matches!(score, Ok(Some(s)) if s >= since)
    }

    /// Wait until node `id` heartbeats after `since` (Redis time), at most `limit`.
    pub(super) async fn wait_heartbeat(&self, id: &str, since: i64, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.beat_since(id, since).await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// Start node `i` (not running) and wait up to 15 s for its first heartbeat. A process
    /// that exits before it beats (a node whose start-up writes Redis refused, as when it is
    /// full) is a harness incident, and it is started again as a supervisor would, up to three
    /// times. Whether it beat.
    async fn start_node(&self, i: usize) -> anyhow::Result<bool> {
        for _ in 0..4 {
            let (id, since) = {
                let mut nodes = self.nodes.lock().await;
                let since = host_ms();
                nodes[i].spawn()?;
                (nodes[i].id.clone(), since)
            };
            let deadline = Instant::now() + Duration::from_secs(15);
            let exited = loop {
                if self.beat_since(&id, since).await {
                    return Ok(true);
                }
                if let Some(status) = self.nodes.lock().await[i].exit_status() {
                    break status;
                }
                if Instant::now() >= deadline {
                    return Ok(false);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            self.incident(format!(
                "node {id} exited while starting ({exited}; see {id}.log): started again"
            ));
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        Ok(false)
    }

    async fn restart_redis(&self, crash: bool) -> anyhow::Result<()> {
        let redis = self.single()?;
        tokio::task::spawn_blocking(move || {
            let mut r = redis.lock().expect("redis lock");
            r.stop(crash)
        })
        .await??;
        Ok(())
    }

    async fn start_redis(&self) -> anyhow::Result<()> {
        let redis = self.single()?;
        tokio::task::spawn_blocking(move || redis.lock().expect("redis lock").restart()).await??;
        Ok(())
    }

    /// Remove what Redis would load its data from (the AOF directory, RDB snapshots) while it
    /// is stopped: it starts again empty.
    async fn wipe_redis_data(&self) -> anyhow::Result<()> {
        let redis = self.single()?;
        let dir = redis.lock().expect("redis lock").dir().to_path_buf();
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() && name == "appendonlydir" {
                std::fs::remove_dir_all(&path)?;
            } else if name.ends_with(".rdb") || name.ends_with(".aof") {
                std::fs::remove_file(&path)?;
            }
        }
        Ok(())
    }

    /// Redis loses everything: SIGKILLed, its data wiped, started again after the hold (two
    /// plans in three), or `FLUSHALL` (one in three: no connection drops, so the nodes can
    /// tell only from the data). With the workload's calls held until every node that ran
    /// before the loss logged it (and healed), at most [`HEAL_LIMIT`] after Redis answers;
    /// then the workload driver creates its jobs again.
    async fn empty_redis(&self, f: &PlannedFault) -> anyhow::Result<()> {
        let _quiet = self.op_lock.lock().await;
        let marks: Vec<(String, PathBuf, u64)> = self
            .nodes
            .lock()
            .await
            .iter()
            .map(|n| {
                let path = n.log_path();
                let len = nodelog::len_of(&path);
                (n.id.clone(), path, len)
            })
            .collect();
        let t0 = host_ms();
        let how = if f.pick.is_multiple_of(3) {
            let _: () = redis::cmd("FLUSHALL")
                .arg("SYNC")
                .query_async(&mut self.admin.clone())
                .await
                .context("FLUSHALL")?;
            "FLUSHALL".to_string()
        } else {
            self.restart_redis(true).await?;
            self.wipe_redis_data().await?;
            tokio::time::sleep(f.hold).await;
            self.start_redis().await?;
            format!("SIGKILL, data wiped, down {:?}", f.hold)
        };
        let back = host_ms();
        // Every node whose process ran before the loss must notice it (frozen ones when they
        // wake; the checker counts their lines).
        let deadline = Instant::now() + HEAL_LIMIT;
        let (noticed, waited) = loop {
            let mut nodes = self.nodes.lock().await;
            let waited: Vec<&str> = nodes
                .iter_mut()
                .filter_map(|n| {
                    let waits = n.child.is_some()
                        && n.exit_status().is_none()
                        && !n.frozen
                        && n.started_ms < t0;
                    waits.then_some(n.id.as_str())
                })
                .collect();
            let noticed: Vec<String> = marks
                .iter()
                .filter(|(_, path, from)| {
                    nodelog::count_from(path, *from, nodelog::DATA_LOSS).0 > 0
                })
                .map(|(id, _, _)| id.clone())
                .collect();
            let all = waited.iter().all(|id| noticed.iter().any(|n| n == id));
            if all || Instant::now() >= deadline {
                break (noticed, waited.len());
            }
            drop(nodes);
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let noticed_ms = host_ms() - back;
        // A node logs the loss, then writes back what it owns: a moment to finish.
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.data_losses.fetch_add(1, Ordering::SeqCst);
        self.record(
            f.kind,
            None,
            t0,
            format!(
                "{how}; Redis back after {} ms; {} of {waited} nodes logged the loss ({}) \
                 within {noticed_ms} ms",
                back - t0,
                noticed.len(),
                noticed.join(", "),
            ),
        );
        Ok(())
    }

    /// `maxmemory` just above `used_memory`, `noeviction`, for the hold; then as it was. The
    /// workload goes on meanwhile: what adds data is refused, the rest must work.
    async fn fill_redis(&self, f: &PlannedFault) -> anyhow::Result<()> {
        let mut conn = self.admin.clone();
        let get = |name: &'static str| {
            let mut conn = conn.clone();
            async move {
                let v: Vec<String> = redis::cmd("CONFIG")
                    .arg("GET")
                    .arg(name)
                    .query_async(&mut conn)
                    .await?;
                anyhow::Ok(v.get(1).cloned().unwrap_or_default())
            }
        };
        let (old_max, old_policy) = (get("maxmemory").await?, get("maxmemory-policy").await?);
        let info: String = redis::cmd("INFO")
            .arg("memory")
            .query_async(&mut conn)
            .await?;
        let used: u64 = info
            .lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .context("used_memory in INFO memory")?;
        let limit = used + FULL_MARGIN;
        let refused = self.refused.load(Ordering::SeqCst);
        let t0 = host_ms();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory-policy")
            .arg("noeviction")
            .arg("maxmemory")
            .arg(limit)
            .query_async(&mut conn)
            .await?;
        tokio::time::sleep(f.hold).await;
        let mut restored = false;
        for _ in 0..50 {
            let set: redis::RedisResult<()> = redis::cmd("CONFIG")
                .arg("SET")
                .arg("maxmemory")
                .arg(&old_max)
                .arg("maxmemory-policy")
                .arg(&old_policy)
                .query_async(&mut conn)
                .await;
            if set.is_ok() {
                restored = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::ensure!(restored, "could not set maxmemory back to {old_max}");
        self.record(
            f.kind,
            None,
            t0,
            format!(
                "maxmemory {limit} (used_memory {used} + {FULL_MARGIN}) for {:?}; {} calls refused",
                f.hold,
                self.refused.load(Ordering::SeqCst) - refused
            ),
        );
        Ok(())
    }

    /// A node running firings, to pause: the planned one if it runs one that started at
    /// least 100 ms ago (a handler that takes its time), else the next such one, else (after
    /// 2 s) one running any firing, else the planned one. Its index, and how many runs it has
    /// in flight.
    async fn busy_node(&self, planned: usize) -> (usize, usize) {
        let n = self.nodes.lock().await.len();
        let give_up = Instant::now() + Duration::from_secs(2);
        loop {
            let now = host_ms();
            let busy: Vec<(usize, usize, usize)> = {
                let mut tails = self.tails.lock().expect("tails lock");
                (0..n)
                    .map(|k| {
                        let i = (planned + k) % n;
                        // Runs of a process that was killed never end: recent starts only.
                        let open: Vec<i64> = tails[i]
                            .poll()
                            .into_iter()
                            .filter(|t| now - t < 10_000)
                            .collect();
                        let long = open.iter().filter(|t| now - **t >= 100).count();
                        (i, open.len(), long)
                    })
                    .collect()
            };
            if let Some(&(i, open, _)) = busy.iter().find(|b| b.2 > 0) {
                return (i, open);
            }
            if Instant::now() >= give_up {
                return busy
                    .iter()
                    .find(|b| b.1 > 0)
                    .map_or((planned % n.max(1), 0), |b| (b.0, b.1));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub(super) async fn inject(&self, f: &PlannedFault) -> anyhow::Result<()> {
        let t0 = host_ms();
        match f.kind {
            FaultKind::NodeKill => {
                let i = f.node.unwrap_or(0);
                let id = {
                    let mut nodes = self.nodes.lock().await;
                    nodes[i].kill().await;
                    nodes[i].id.clone()
                };
                tokio::time::sleep(f.hold).await;
                self.start_node(i).await?;
                self.record(f.kind, Some(&id), t0, format!("down {:?}", f.hold));
            }
            FaultKind::NodeStop => {
                let i = f.node.unwrap_or(0);
                let id = {
                    let mut nodes = self.nodes.lock().await;
                    nodes[i].freeze(true);
                    nodes[i].id.clone()
                };
                tokio::time::sleep(f.hold).await;
                self.nodes.lock().await[i].freeze(false);
                self.record(f.kind, Some(&id), t0, format!("stopped {:?}", f.hold));
            }
            FaultKind::NodePause => {
                let (i, running) = self.busy_node(f.node.unwrap_or(0)).await;
                let (id, t0) = {
                    let mut nodes = self.nodes.lock().await;
                    let t0 = host_ms();
                    nodes[i].freeze(true);
                    (nodes[i].id.clone(), t0)
                };
                tokio::time::sleep(f.hold).await;
                self.nodes.lock().await[i].freeze(false);
                self.record(
                    f.kind,
                    Some(&id),
                    t0,
                    format!("paused {:?} running {running} firings", f.hold),
                );
            }
            FaultKind::ClockSkew => {
                let i = f.node.unwrap_or(0);
                let id = {
                    let mut nodes = self.nodes.lock().await;
                    nodes[i].stop().await;
                    nodes[i].skew_ms = f.skew_ms;
                    nodes[i].id.clone()
                };
                self.start_node(i).await?;
                self.record(
                    f.kind,
                    Some(&id),
                    t0,
                    format!("restarted with skew {} s", f.skew_ms / 1000),
                );
            }
            FaultKind::CutDrop | FaultKind::CutStall => {
                let i = f.node.unwrap_or(0);
                let mode = if f.kind == FaultKind::CutDrop {
                    Mode::Drop
                } else {
                    Mode::Stall
                };
                self.proxies[i].set(mode);
                // Change jobs while the node cannot hear about it.
                let early = Duration::from_millis(300).min(f.hold);
                tokio::time::sleep(early).await;
                self.churn.notify_one();
                tokio::time::sleep(f.hold - early).await;
                self.proxies[i].set(Mode::Pass);
                let id = self.nodes.lock().await[i].id.clone();
                self.record(f.kind, Some(&id), t0, format!("cut off {:?}", f.hold));
            }
            FaultKind::PubsubKill => {
                let mut kill = redis::cmd("CLIENT");
                kill.arg(&["KILL", "TYPE", "pubsub"]);
                let n: Option<i64> = match &self.redis {
                    Backend::Single(_) => kill.query_async(&mut self.admin.clone()).await.ok(),
                    // Every node: a node subscribes to expired events on every master.
                    Backend::Cluster(rig) => match rig.on_each(false, kill).await {
                        Ok(n) => Some(n.iter().sum()),
                        Err(e) => {
                            self.incident(format!("pubsub_kill: {e:#}"));
                            None
                        }
                    },
                };
                // Subscribers reconnect within ~50 ms; changes made meanwhile go unheard.
                self.churn.notify_one();
                self.record(f.kind, None, t0, format!("killed {n:?}"));
            }
            FaultKind::ClientPause => {
                let _quiet = self.op_lock.lock().await;
                let t0 = host_ms();
                let ms = f.hold.as_millis() as i64;
                let mut pause = redis::cmd("CLIENT");
                pause.arg("PAUSE").arg(ms).arg("ALL");
                match &self.redis {
                    Backend::Single(_) => {
                        let _: redis::RedisResult<()> =
                            pause.query_async(&mut self.admin.clone()).await;
                    }
                    Backend::Cluster(rig) => {
                        if let Err(e) = rig.on_each(true, pause).await {
                            self.incident(format!("client_pause: {e:#}"));
                        }
                    }
                }
                tokio::time::sleep(f.hold).await;
                self.record(f.kind, None, t0, format!("{ms} ms"));
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            FaultKind::RedisTerm | FaultKind::RedisKill => {
                let _quiet = self.op_lock.lock().await;
                let crash = f.kind == FaultKind::RedisKill;
                if crash {
                    // No workload call may return in the window whose writes a crash can
                    // lose: wait it out with the calls held.
                    tokio::time::sleep(Duration::from_millis(3_000)).await;
                }
                let t0 = host_ms();
                self.restart_redis(crash).await?;
                tokio::time::sleep(f.hold).await;
                self.start_redis().await?;
                self.record(f.kind, None, t0, format!("down {:?} + restart", f.hold));
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            FaultKind::RedisEmpty => self.empty_redis(f).await?,
            FaultKind::RedisFull => self.fill_redis(f).await?,
            FaultKind::MasterKill
            | FaultKind::ReplicaKill
            | FaultKind::SlotMigration
            | FaultKind::MasterPartition => self.cluster_fault(f).await?,
            // Queue-round faults: `queue_round` injects them.
            FaultKind::HandlerFail
            | FaultKind::HandlerHang
            | FaultKind::ConsumerKill
            | FaultKind::PromoteKill
            | FaultKind::EventsLost => {}
        }
        Ok(())
    }

    /// A fault of the Redis Cluster, applied to a whole cluster only: first the harness waits
    /// until every node runs and says `cluster_state:ok`, all agree on the slot map and every
    /// replica is in sync (a master killed while its replica still syncs would fail over to a
    /// replica without the data), starting again whatever is down. A fault that fails midway
    /// is recorded as far as it went (from the moment it began to disturb the cluster, so the
    /// checker treats that time as the fault's), noted as an incident, and the cluster is made
    /// whole again. Only a cluster that cannot be made whole ends the round: an error, never
    /// a verdict.
    async fn cluster_fault(&self, f: &PlannedFault) -> anyhow::Result<()> {
        let rig = self.rig()?;
        if let Err(e) = rig.with(|c| c.wait_healthy(CLUSTER_LIMIT)).await {
            self.incident(format!("before {}: {e:#}", f.kind));
            self.heal(rig).await?;
        }
        let begun = std::sync::Mutex::new(None);
        let applied = match f.kind {
            FaultKind::MasterKill => self.kill_master(rig, f, &begun).await,
            FaultKind::ReplicaKill => self.kill_replica(rig, f, &begun).await,
            FaultKind::SlotMigration => self.migrate_slot(rig, f, &begun).await,
            FaultKind::MasterPartition => self.partition_master(rig, f, &begun).await,
            _ => anyhow::bail!("{} is no cluster fault", f.kind),
        };
        let Err(e) = applied else {
            return Ok(());
        };
        let begun = *begun.lock().expect("begun lock");
        if let Some(t0) = begun {
            self.record(f.kind, None, t0, format!("incomplete: {e:#}"));
        }
        self.incident(format!(
            "{} failed{}: {e:#}",
            f.kind,
            if begun.is_some() {
                " midway (recorded as a fault up to now)"
            } else {
                ""
            }
        ));
        self.heal(rig).await
    }

    /// Make the cluster whole again after a fault that failed: every proxy passing, every
    /// node killed or found exited started again, replicas in sync. An error when it cannot
    /// be, with the state of every node.
    async fn heal(&self, rig: &ClusterRig) -> anyhow::Result<()> {
        for p in &rig.proxies {
            p.set(Mode::Pass);
        }
        match rig.with(|c| c.revive(CLUSTER_LIMIT)).await {
            Ok(started) => {
                self.note(format!(
                    "cluster whole again (redis nodes started: {started:?})"
                ));
                Ok(())
            }
            Err(e) => {
                let state = rig.with(|c| Ok(c.describe())).await.unwrap_or_default();
                anyhow::bail!("the Redis Cluster could not be made whole again: {e:#}\n{state}")
            }
        }
    }

    /// Something the harness could not do as planned, kept with the round's results.
    fn incident(&self, what: String) {
        self.note(format!("harness incident: {what}"));
        self.incidents.lock().expect("incidents lock").push(what);
    }

    /// SIGKILL a replica, start it again after the hold and wait until it is in sync.
    async fn kill_replica(
        &self,
        rig: &ClusterRig,
        f: &PlannedFault,
        begun: &std::sync::Mutex<Option<i64>>,
    ) -> anyhow::Result<()> {
        let pick = f.pick;
        let t0 = host_ms();
        let victim = rig
            .with(move |c| {
                let replicas: Vec<usize> = c.shape()?.into_iter().flat_map(|(_, r)| r).collect();
                let Some(&victim) = replicas.get(pick % replicas.len().max(1)) else {
                    return Ok(None);
                };
                c.kill(victim)?;
                Ok(Some(victim))
            })
            .await?;
        let Some(victim) = victim else {
            anyhow::bail!("no live replica");
        };
        *begun.lock().expect("begun lock") = Some(t0);
        tokio::time::sleep(f.hold).await;
        rig.with(move |c| c.restart_node(victim, CLUSTER_LIMIT))
            .await?;
        self.record(
            f.kind,
            None,
            t0,
            format!("redis node {victim} down {:?}, back in sync", f.hold),
        );
        Ok(())
    }

    /// Move a shard's slot with its keys to another master.
    async fn migrate_slot(
        &self,
        rig: &ClusterRig,
        f: &PlannedFault,
        begun: &std::sync::Mutex<Option<i64>>,
    ) -> anyhow::Result<()> {
        let shard = f.pick % self.shards.len();
        let slot = slot_of(self.shards.keys(shard).tag());
        let pick = f.pick / self.shards.len();
        let t0 = host_ms();
        // The slot may be half moved when a step fails.
        *begun.lock().expect("begun lock") = Some(t0);
        let (from, to, keys) = rig
            .with(move |c| {
                let masters = c.shape()?;
                let others: Vec<usize> = masters
                    .iter()
                    .filter(|(m, _)| !m.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot)))
                    .map(|(m, _)| m.index)
                    .collect();
                let Some(&to) = others.get(pick % others.len().max(1)) else {
                    return Err(std::io::Error::other("no other master"));
                };
                let (from, keys) = c.migrate_slot(slot, to)?;
                Ok((from, to, keys))
            })
            .await?;
        self.record(
            f.kind,
            None,
            t0,
            format!("shard {shard} (slot {slot}) from redis node {from} to {to}, {keys} keys"),
        );
        Ok(())
    }

    /// Cut a master off from every client and its replica (its proxy drops everything) for
    /// the hold, with the workload's calls held.
    async fn partition_master(
        &self,
        rig: &ClusterRig,
        f: &PlannedFault,
        begun: &std::sync::Mutex<Option<i64>>,
    ) -> anyhow::Result<()> {
        // Calls cut off midway have unknown effects: the workload waits it out.
        let _quiet = self.op_lock.lock().await;
        let pick = f.pick;
        let victim = rig
            .with(move |c| {
                let masters = c.shape()?;
                Ok(masters
                    .get(pick % masters.len().max(1))
                    .map(|(m, _)| m.index))
            })
            .await?;
        let Some(victim) = victim else {
            anyhow::bail!("no master");
        };
        let t0 = host_ms();
        *begun.lock().expect("begun lock") = Some(t0);
        rig.proxies[victim].set(Mode::Drop);
        tokio::time::sleep(f.hold).await;
        rig.proxies[victim].set(Mode::Pass);
        self.record(
            f.kind,
            None,
            t0,
            format!("redis node {victim} cut off {:?}", f.hold),
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(())
    }

    /// SIGKILL a master that has a live replica, wait for the failover, then start the old
    /// master again: it comes back as a replica of the node that took over. The fault (an
    /// outage of the master's shards) ends when every node agrees on the new slot map.
    async fn kill_master(
        &self,
        rig: &ClusterRig,
        f: &PlannedFault,
        begun: &std::sync::Mutex<Option<i64>>,
    ) -> anyhow::Result<()> {
        let pick = f.pick;
        let (victim, heir, t0) = {
            // No workload call may return in the window a failover can lose (writes the
            // replica had not received yet): wait it out with the calls held.
            let _quiet = self.op_lock.lock().await;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let victim = rig
                .with(move |c| {
                    let masters: Vec<usize> = c
                        .shape()?
                        .into_iter()
                        .filter(|(_, r)| !r.is_empty())
                        .map(|(m, _)| m.index)
                        .collect();
                    Ok(masters.get(pick % masters.len().max(1)).copied())
                })
                .await?;
            let Some(victim) = victim else {
                anyhow::bail!("no master with a live replica");
            };
            let t0 = host_ms();
            *begun.lock().expect("begun lock") = Some(t0);
            let heir = rig
                .with(move |c| c.kill_master_and_fail_over(victim, CLUSTER_LIMIT))
                .await?;
            self.record(
                f.kind,
                None,
                t0,
                format!("redis node {victim} SIGKILLed, node {heir} took over"),
            );
            // Recorded: what follows (the old master back as a replica) is no outage.
            *begun.lock().expect("begun lock") = None;
            (victim, heir, t0)
        };
        tokio::time::sleep(f.hold).await;
        rig.with(move |c| c.restart_node(victim, CLUSTER_LIMIT))
            .await?;
        self.note(format!(
            "master_kill: redis node {victim} back as a replica of {heir} ({} ms after the kill)",
            host_ms() - t0
        ));
        Ok(())
    }

    async fn run_lane(&self, lane: &[PlannedFault], start: Instant) -> anyhow::Result<()> {
        for f in lane {
            tokio::time::sleep_until(start + f.at).await;
            self.inject(f)
                .await
                .with_context(|| format!("inject {}", f.kind))?;
        }
        Ok(())
    }
}

/// The static jobs: every schedule kind and policy, created before the faults begin.
fn static_jobs(now_ms: i64) -> Vec<JobSpec> {
    let at = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).expect("instant");
    let fixed = |attempts: u32, interval: &str| RetrySpec {
        max_attempts: Some(attempts),
        backoff: Some("fixed".into()),
        interval: Some(interval.into()),
        ..RetrySpec::default()
    };
    let mut jobs = vec![
        JobSpec::cron("cron-1s", "* * * * * *", "chaos").params(json!({"v": 1})),
        JobSpec::cron("cron-2s-slow", "*/2 * * * * *", "chaos")
            .params(json!({"v": 1, "sleep_ms": 2_500})),
        JobSpec::cron("cron-5s-fail", "*/5 * * * * *", "chaos")
            .params(json!({"v": 1, "fail": 2}))
            .retry(fixed(6, "300ms")),
        JobSpec::every("every-1500ms", "1500ms", "chaos").params(json!({"v": 1})),
        JobSpec::every("every-3s-hang", "3s", "chaos")
            .params(json!({"v": 1, "hang": 1}))
            .retry(fixed(6, "300ms")),
        JobSpec::every("every-2s-skip", "2s", "chaos").params(json!({"v": 1})),
        JobSpec::every("every-2s-catchup", "2s", "chaos").params(json!({"v": 1})),
        JobSpec::cron("cron-3s-window", "*/3 * * * * *", "chaos")
            .params(json!({"v": 1}))
            .window(Some(at(now_ms + 5_000)), Some(at(now_ms + 40_000))),
    ];
    jobs[4].timeout = Some("1s".into());
    jobs[5].misfire = Some("skip".into());
    jobs[5].misfire_tolerance = Some("5s".into());
    jobs[6].misfire = Some("catch_up".into());
    jobs[6].misfire_tolerance = Some("1s".into());
    jobs
}

/// The workload driver: tasks in batches, and dynamic jobs created, updated, paused,
/// resumed, triggered and deleted while everything runs.
struct Driver<'a> {
    round: &'a Round,
    client: Client,
    conn: Conn,
    rng: StdRng,
    ops: Vec<Op>,
    next_task: u64,
    /// Producer of delay-queue tasks.
    queue: Queue,
    next_qtask: u64,
    /// Dynamic jobs: their version counter (never reset, so a re-created job's params are
    /// newer than any of its previous life) and state.
    dyn_jobs: Vec<(String, u64, DynState)>,
    /// The static jobs: the spec, its version (bumped each time it is created again) and
    /// whether it exists (it does not after Redis lost its data, until created again).
    statics: Vec<(JobSpec, u64, bool)>,
    /// The data losses the driver has seen ([`Round::data_losses`]).
    losses_seen: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DynState {
    Absent,
    Active,
    Paused,
}

impl Driver<'_> {
    async fn now(&mut self) -> i64 {
        redis_ms(&mut self.conn).await
    }

    /// Record a call Redis refused as full, once per job or task it named.
    fn refused(&mut self, jobs: &[String], call: &str, v: u64, call_ms: i64, ret_ms: i64, e: &str) {
        self.round.refused.fetch_add(1, Ordering::SeqCst);
        for job in jobs {
            self.ops.push(Op {
                job: job.clone(),
                call_ms,
                ret_ms,
                kind: OpKind::Refused {
                    call: call.into(),
                    v,
                    error: e.to_string(),
                },
            });
        }
    }

    /// Create or update a job; whether it was written (`false`: refused, Redis is full).
    async fn upsert(&mut self, spec: JobSpec, v: u64) -> anyhow::Result<bool> {
        let id = spec.id.clone();
        let client = &self.client;
        let call = redis_ms(&mut self.conn).await;
        let mut tries = 0;
        let record = loop {
            match client.upsert(spec.clone()).await {
                Ok(r) => break r,
                Err(e) if e.is_redis_full() => {
                    self.round
                        .note(format!("upsert {id} refused, Redis is full: {e}"));
                    let ret = self.now().await;
                    self.refused(&[id], "upsert", v, call, ret, &e.to_string());
                    return Ok(false);
                }
                Err(e) if tries < 100 => {
                    tries += 1;
                    self.round
                        .note(format!("upsert {id} failed, retrying: {e}"));
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(e).context("upsert"),
            }
        };
        let ret = self.now().await;
        self.ops.push(Op {
            job: id,
            call_ms: call,
            ret_ms: ret,
            kind: OpKind::Upsert {
                spec: record.spec,
                v,
                status: record.status,
                next_ms: record.next_ms,
                created_ms: record.created_ms,
            },
        });
        Ok(true)
    }

    /// Create the static jobs that do not exist (all at first; after Redis lost its data,
    /// those it lost, each under a new version).
    async fn ensure_statics(&mut self) -> anyhow::Result<()> {
        for i in 0..self.statics.len() {
            let (spec, v, exists) = self.statics[i].clone();
            if exists {
                continue;
            }
            if self.upsert(spec, v).await? {
                self.statics[i].2 = true;
            }
        }
        Ok(())
    }

    /// Redis lost its data: nothing the workload created before exists. Forget the dynamic
    /// jobs (their versions go on) and create the static ones again, under new versions.
    async fn after_data_loss(&mut self) -> anyhow::Result<()> {
        self.round
            .note("Redis lost its data: the workload creates its jobs again");
        for job in &mut self.dyn_jobs {
            job.2 = DynState::Absent;
        }
        for (spec, v, exists) in &mut self.statics {
            *v += 1;
            spec.params["v"] = json!(*v);
            *exists = false;
        }
        self.ensure_statics().await
    }

    async fn enqueue_batch(&mut self) -> anyhow::Result<()> {
        let n = self.rng.random_range(1..=4);
        let now = self.now().await;
        let mut specs = Vec::new();
        for _ in 0..n {
            self.next_task += 1;
            let at_ms = now + self.rng.random_range(300..=5_000);
            let at = chrono::DateTime::from_timestamp_millis(at_ms).expect("instant");
            let id = format!("task-{}", self.next_task);
            let roll: f64 = self.rng.random();
            let fixed = |attempts: u32, interval: &str| RetrySpec {
                max_attempts: Some(attempts),
                backoff: Some("fixed".into()),
                interval: Some(interval.into()),
                ..RetrySpec::default()
            };
            let mut spec = JobSpec::at(id, at, "chaos").retry(fixed(6, "300ms"));
            spec.params = if roll < 0.6 {
                json!({"v": 1})
            } else if roll < 0.75 {
                json!({"v": 1, "fail": 2})
            } else if roll < 0.85 {
                spec.timeout = Some("800ms".into());
                json!({"v": 1, "hang": 1})
            } else if roll < 0.95 {
                json!({"v": 1, "sleep_ms": self.rng.random_range(1_000..=3_000)})
            } else {
                // Doomed: fails every attempt, must end in the dead letters.
                spec.retry = Some(fixed(2, "200ms"));
                json!({"v": 1, "fail": 99})
            };
            specs.push(spec);
        }
        let client = &self.client;
        let (call, ret, ids) = retrying(&mut self.conn, self.round, "enqueue", || {
            client.enqueue_many(specs.clone())
        })
        .await;
        match ids {
            Answer::Done(_) => {}
            Answer::Full(e) => {
                let ids: Vec<String> = specs.iter().map(|s| s.id.clone()).collect();
                self.refused(&ids, "enqueue", 1, call, ret, &e);
                return Ok(());
            }
            Answer::Gone => anyhow::bail!("enqueue_many kept failing"),
        }
        for spec in specs {
            self.ops.push(Op {
                job: spec.id.clone(),
                call_ms: call,
                ret_ms: ret,
                kind: OpKind::Enqueue { spec, v: 1 },
            });
        }
        Ok(())
    }

    fn dyn_spec(&mut self, id: &str, v: u64) -> JobSpec {
        let mut spec = match self.rng.random_range(0..5) {
            0 => JobSpec::every(id, "1s", "chaos"),
            1 => JobSpec::every(id, "1500ms", "chaos"),
            2 => JobSpec::every(id, "2s", "chaos"),
            3 => JobSpec::cron(id, "*/2 * * * * *", "chaos"),
            _ => JobSpec::cron(id, "*/3 * * * * *", "chaos"),
        };
        spec.params = if self.rng.random_bool(0.2) {
            json!({"v": v, "fail": 1})
        } else {
            json!({"v": v})
        };
        spec.retry(RetrySpec {
            max_attempts: Some(6),
            backoff: Some("fixed".into()),
            interval: Some("300ms".into()),
            ..RetrySpec::default()
        })
    }

    async fn lifecycle(&mut self) -> anyhow::Result<()> {
        let i = self.rng.random_range(0..self.dyn_jobs.len());
        let (id, v, state) = self.dyn_jobs[i].clone();
        let roll: f64 = self.rng.random();
        // A version is never used twice, even when Redis refused it.
        match state {
            DynState::Absent => {
                let spec = self.dyn_spec(&id, v + 1);
                self.dyn_jobs[i].1 = v + 1;
                if self.upsert(spec, v + 1).await? {
                    self.dyn_jobs[i].2 = DynState::Active;
                }
            }
            DynState::Active | DynState::Paused if roll < 0.3 => {
                // Update (a paused job stays paused).
                let spec = self.dyn_spec(&id, v + 1);
                self.dyn_jobs[i].1 = v + 1;
                self.upsert(spec, v + 1).await?;
            }
            DynState::Active if roll < 0.55 => {
                let (call, ret, answer) = retrying(&mut self.conn, self.round, "pause", || {
                    self.client.pause(&id)
                })
                .await;
                if let Answer::Full(e) = answer {
                    self.refused(&[id], "pause", 0, call, ret, &e);
                    return Ok(());
                }
                self.ops.push(Op {
                    job: id,
                    call_ms: call,
                    ret_ms: ret,
                    kind: OpKind::Pause,
                });
                self.dyn_jobs[i].2 = DynState::Paused;
            }
            DynState::Active if roll < 0.8 => {
                let call = self.now().await;
                let answer = self.client.trigger(&id).await;
                let ret = self.now().await;
                match answer {
                    Err(e) if e.is_redis_full() => {
                        self.refused(&[id], "trigger", 0, call, ret, &e.to_string());
                    }
                    answer => self.ops.push(Op {
                        job: id,
                        call_ms: call,
                        ret_ms: ret,
                        kind: OpKind::Trigger {
                            firing: answer.ok(),
                        },
                    }),
                }
            }
            DynState::Paused if roll < 0.75 => {
                let (call, ret, record) = retrying(&mut self.conn, self.round, "resume", || {
                    self.client.resume(&id)
                })
                .await;
                let record = match record {
                    Answer::Full(e) => {
                        self.refused(&[id], "resume", 0, call, ret, &e);
                        return Ok(());
                    }
                    record => record.done(),
                };
                let (status, next_ms) = record
                    .map(|r| (r.status, r.next_ms))
                    .unwrap_or((JobStatus::Paused, None));
                self.ops.push(Op {
                    job: id,
                    call_ms: call,
                    ret_ms: ret,
                    kind: OpKind::Resume { status, next_ms },
                });
                self.dyn_jobs[i].2 = DynState::Active;
            }
            _ => {
                if self.delete(&id).await {
                    self.dyn_jobs[i].2 = DynState::Absent;
                }
            }
        }
        Ok(())
    }

    /// Add 1 to 3 delay-queue tasks, due 0.3 to 5 s from now.
    async fn add_queue_tasks(&mut self) -> anyhow::Result<()> {
        let n = self.rng.random_range(1..=3);
        let now = self.now().await;
        let mut tasks = Vec::new();
        for _ in 0..n {
            self.next_qtask += 1;
            let due_ms = now + self.rng.random_range(300..=5_000);
            tasks.push(NewTask {
                id: Some(format!("qt-{}", self.next_qtask)),
                topic: TOPIC.into(),
                payload: json!({"n": self.next_qtask}),
                when: When::At(chrono::DateTime::from_timestamp_millis(due_ms).expect("instant")),
                ttr: QUEUE_TTR,
                max_deliveries: 20,
            });
        }
        let queue = &self.queue;
        let (call, ret, ids) = retrying(&mut self.conn, self.round, "queue add", || {
            queue.add_many(tasks.clone())
        })
        .await;
        match ids {
            Answer::Done(_) => {}
            Answer::Full(e) => {
                let ids: Vec<String> = tasks.iter().filter_map(|t| t.id.clone()).collect();
                self.refused(&ids, "queue_add", 0, call, ret, &e);
                return Ok(());
            }
            Answer::Gone => anyhow::bail!("queue add kept failing"),
        }
        for t in tasks {
            let When::At(at) = t.when else { continue };
            self.ops.push(Op {
                job: t.id.unwrap_or_default(),
                call_ms: call,
                ret_ms: ret,
                kind: OpKind::QueueAdd {
                    topic: t.topic,
                    due_ms: at.timestamp_millis(),
                    ttr_ms: QUEUE_TTR.as_millis() as i64,
                },
            });
        }
        Ok(())
    }

    /// Delete a dynamic job and create it again at once, with a new schedule and params.
    async fn churn(&mut self) -> anyhow::Result<()> {
        let live: Vec<usize> = (0..self.dyn_jobs.len())
            .filter(|i| self.dyn_jobs[*i].2 != DynState::Absent)
            .collect();
        let i = if live.is_empty() {
            self.rng.random_range(0..self.dyn_jobs.len())
        } else {
            live[self.rng.random_range(0..live.len())]
        };
        let (id, v, state) = self.dyn_jobs[i].clone();
        self.round.note(format!("churn: delete and re-create {id}"));
        let gone = state == DynState::Absent || self.delete(&id).await;
        let spec = self.dyn_spec(&id, v + 1);
        self.dyn_jobs[i].1 = v + 1;
        if self.upsert(spec, v + 1).await? {
            self.dyn_jobs[i].2 = DynState::Active;
        } else if gone {
            self.dyn_jobs[i].2 = DynState::Absent;
        }
        Ok(())
    }

    /// Delete a job, keeping the history the delete drops; whether it is gone (`false`:
    /// refused, Redis is full).
    async fn delete(&mut self, id: &str) -> bool {
        let runs = self.client.runs(id, 100_000).await.unwrap_or_default();
        let dead = self
            .client
            .dead_letters(id, 100_000)
            .await
            .unwrap_or_default();
        let (call, ret, answer) = retrying(&mut self.conn, self.round, "delete", || {
            self.client.delete(id)
        })
        .await;
        if let Answer::Full(e) = answer {
            self.refused(&[id.to_string()], "delete", 0, call, ret, &e);
            return false;
        }
        self.ops.push(Op {
            job: id.to_string(),
            call_ms: call,
            ret_ms: ret,
            kind: OpKind::Delete { runs, dead },
        });
        true
    }

    /// Tasks and lifecycle changes until `until`.
    async fn run(&mut self, until: Instant) -> anyhow::Result<()> {
        let mut next_tasks = Instant::now();
        let mut next_queue = Instant::now();
        let mut next_change = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            let wake = next_tasks.min(next_change).min(next_queue).min(until);
            let churn = tokio::select! {
                _ = tokio::time::sleep_until(wake) => false,
                _ = self.round.churn.notified() => true,
            };
            if Instant::now() >= until {
                break;
            }
            let _held = self.round.op_lock.lock().await;
            let losses = self.round.data_losses.load(Ordering::SeqCst);
            if losses != self.losses_seen {
                self.losses_seen = losses;
                self.after_data_loss().await?;
            } else {
                // Created again once Redis has room (a loss while it was full).
                self.ensure_statics().await?;
            }
            if churn {
                self.churn().await?;
                continue;
            }
            if Instant::now() >= next_tasks {
                self.enqueue_batch().await?;
                next_tasks =
                    Instant::now() + Duration::from_millis(self.rng.random_range(400..=1_000));
            }
            if Instant::now() >= next_queue {
                self.add_queue_tasks().await?;
                next_queue =
                    Instant::now() + Duration::from_millis(self.rng.random_range(500..=1_200));
            }
            if Instant::now() >= next_change {
                self.lifecycle().await?;
                next_change =
                    Instant::now() + Duration::from_millis(self.rng.random_range(800..=2_500));
            }
        }
        Ok(())
    }
}

/// A delay-queue consumer: pops, and finishes after a short while; now and then it drops a
/// task without finishing it (a consumer crash), so the task comes back after its ttr.
async fn consume(
    name: String,
    queue: Queue,
    seed: u64,
    events: Arc<std::sync::Mutex<Vec<QueueEvent>>>,
    stop: tokio_util::sync::CancellationToken,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let push = |ev: QueueEv, r: &keyfire::queue::Reserved| {
        events.lock().expect("queue events lock").push(QueueEvent {
            ev,
            task: r.id.clone(),
            consumer: name.clone(),
            deliveries: r.deliveries,
            due_ms: r.due_at.timestamp_millis(),
            ready_ms: r.ready_at.timestamp_millis(),
            reserved_ms: r.reserved_at.timestamp_millis(),
            at_ms: host_ms(),
        });
    };
    while !stop.is_cancelled() {
        let popped = tokio::select! {
            _ = stop.cancelled() => return,
            p = queue.pop(TOPIC, Duration::from_secs(1)) => p,
        };
        let r = match popped {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(_) => {
                // Redis is restarting or paused.
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        push(QueueEv::Pop, &r);
        if rng.random_bool(0.1) {
            push(QueueEv::Abandon, &r);
            continue;
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..=200))).await;
        let mut outcome = QueueEv::FinishErr;
        for _ in 0..20 {
            match queue.finish(&r.id, &r.token).await {
                Ok(()) => {
                    outcome = QueueEv::FinishOk;
                    break;
                }
                Err(Error::ReservationLost(_)) => {
                    outcome = QueueEv::FinishLost;
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        push(outcome, &r);
    }
}

/// Start a Redis Cluster of 3 masters with a replica each, every node behind a proxy it
/// announces as its address.
async fn start_cluster() -> anyhow::Result<ClusterRig> {
    let mut cluster = tokio::task::spawn_blocking(|| RedisCluster::start(3, 1))
        .await?
        .context("start a Redis Cluster")?;
    let mut proxies = Vec::new();
    for server in cluster.servers() {
        proxies.push(Proxy::start(server.addr()).await?);
    }
    let ports: Vec<u16> = proxies.iter().map(Proxy::port).collect();
    let cluster =
        tokio::task::spawn_blocking(move || cluster.announce_ports(&ports).map(|()| cluster))
            .await?
            .context("announce the proxies' ports")?;
    Ok(ClusterRig {
        cluster: Arc::new(std::sync::Mutex::new(cluster)),
        proxies,
    })
}

/// Settings that reach `redis` (the harness's client and queue; standalone: directly).
fn backend_settings(redis: &Backend) -> Settings {
    let mut s = Settings::default();
    s.redis.prefix = PREFIX.into();
    match redis {
        Backend::Single(r) => s.redis.url = r.lock().expect("redis lock").url(),
        Backend::Cluster(rig) => {
            s.redis.mode = RedisMode::Cluster;
            s.redis.nodes = rig.nodes();
            s.redis.shards = CLUSTER_SHARDS;
        }
    }
    s
}

/// Start Redis (one server, or a cluster with `cfg.cluster`) and `n` nodes behind proxies.
pub(super) async fn setup(cfg: &Config, dir: &Path, plan: &Plan) -> anyhow::Result<Round> {
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

/// The directory of a round's files: `cfg.dir`, or a temporary one (kept when it fails).
pub(super) fn round_dir(cfg: &Config) -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
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
pub(super) fn finish_round(
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
    anyhow::ensure!(
        (3..=5).contains(&cfg.nodes),
        "a round runs 3 to 5 nodes, not {}",
        cfg.nodes
    );
    anyhow::ensure!(
        cfg.node_bin.is_file(),
        "the chaos node binary {} is missing: build it with `cargo build --release --examples`",
        cfg.node_bin.display()
    );
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
    let ids: Vec<String> = round
        .nodes
        .lock()
        .await
        .iter()
        .map(|n| n.id.clone())
        .collect();
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

/// On a cluster: a copy of every Redis node's log and `nodes.conf` in the round's directory
/// (`redis-<i>/`), kept with the round's other files.
async fn copy_redis_logs(round: &Round, dir: &Path) {
    let Backend::Cluster(rig) = &round.redis else {
        return;
    };
    let dirs: Vec<PathBuf> = match rig
        .with(|c| Ok(c.servers().iter().map(|n| n.dir().to_path_buf()).collect()))
        .await
    {
        Ok(d) => d,
        Err(_) => return,
    };
    for (i, from) in dirs.iter().enumerate() {
        let to = dir.join(format!("redis-{i}"));
        if std::fs::create_dir_all(&to).is_err() {
            continue;
        }
        for name in ["redis.log", "redis.out", "nodes.conf"] {
            let _ = std::fs::copy(from.join(name), to.join(name));
        }
    }
}

/// On a cluster: keep every Redis node's directory (AOF, `nodes.conf`, log) after the round,
/// and say where each is, with its state, in `redis-nodes.txt` of the round's directory.
async fn keep_redis_dirs(round: &Round, dir: &Path) {
    let Backend::Cluster(rig) = &round.redis else {
        return;
    };
    if let Ok(state) = rig
        .with(|c| {
            c.keep_dirs();
            Ok(c.describe())
        })
        .await
    {
        let _ = std::fs::write(dir.join("redis-nodes.txt"), state);
    }
}

/// Start every node and wait for each one's first heartbeat.
pub(super) async fn start_nodes(round: &Round) -> anyhow::Result<()> {
    let mut conn = round.admin.clone();
    let since = redis_ms(&mut conn).await;
    for n in round.nodes.lock().await.iter_mut() {
        n.spawn()?;
    }
    let ids: Vec<String> = round
        .nodes
        .lock()
        .await
        .iter()
        .map(|n| n.id.clone())
        .collect();
    for id in &ids {
        anyhow::ensure!(
            round
                .wait_heartbeat(id, since, Duration::from_secs(30))
                .await,
            "node {id} did not start; see {}",
            round.dir.join(format!("{id}.log")).display()
        );
    }
    round.note(format!("{} nodes up", ids.len()));
    Ok(())
}

async fn drive(round: &Round, plan: &Plan) -> anyhow::Result<(Workload, Vec<FaultEvent>, History)> {
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
