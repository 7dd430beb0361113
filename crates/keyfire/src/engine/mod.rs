//! The node: listens for expiry events, arms precision timers, claims firings, sweeps for
//! what events missed, keeps its membership, and runs handlers in a bounded executor.
//!
//! Tasks of a running node (each a loop that stops on the node's cancellation token):
//! - `membership`: heartbeat in Redis time, the live set, the clock offset, notification check;
//! - `listener`: PSUBSCRIBE to expired events and SUBSCRIBE to the change channel; after every
//!   (re)subscribe it asks for a sweep, since messages are lost while disconnected;
//! - `timers`: local timers for firings this node owns that are due within the horizon;
//! - `sweeper`: claims overdue firings from the due ZSET (the owner's at once, anyone's after
//!   the grace period) and arms timers for the owner's upcoming ones;
//! - `callbacks`: sends the callbacks queued with outcomes (each shard's outbox), bounded;
//! - the registry's hooks (`hooks`: the delay queue's topic promotion), each given a view of the
//!   node and the expired keys and change messages that are theirs.

mod batcher;
mod callbacks;
mod claim;
mod completer;
mod hooks;
mod limiter;
mod listener;
pub mod membership;
mod misfire;
mod runner;
mod specs;
mod sweeper;
mod timers;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::{Clock, RedisClock, SystemClock};
use crate::config::{NodeSettings, Settings};
use crate::error::Result;
use crate::handler::Registry;
use crate::store::{Beat, HistoryLimits, Store, notify};

/// Counters a node keeps about itself (for tests, logs and, later, metrics).
#[derive(Debug, Default)]
pub struct Stats {
    /// Firings this node claimed.
    pub claimed: AtomicU64,
    /// Claims that found the firing already taken or changed.
    pub stale: AtomicU64,
    /// Firings the sweeper claimed (events or timers missed them).
    pub swept: AtomicU64,
    /// Sweeps done.
    pub sweeps: AtomicU64,
    /// Due entries the sweeps read (each sweep reads the overdue ones and those newly
    /// within the timer horizon; the rest of the horizon was read, and armed, before).
    pub due_read: AtomicU64,
    /// Expired events received.
    pub events: AtomicU64,
    /// Times the subscriber connected (1 + reconnects).
    pub subscribed: AtomicU64,
    /// Runs finished.
    pub completed: AtomicU64,
    /// Attempts this node started (its share of the work, reported in its heartbeat).
    pub started: AtomicU64,
    /// Runs taken over after their lease expired.
    pub recovered: AtomicU64,
    /// Claimed firings held back by their limit key (queued again for their turn).
    pub held: AtomicU64,
    /// Outcomes that waited behind this node's claims before they were sent to Redis.
    pub deferred: AtomicU64,
    /// Scheduled claims under way now (a gauge): from the moment a firing is marked as
    /// being claimed (waiting for a run permit included) until its reply is handled. While
    /// there are any, outcomes wait behind them; while there are a page (1,000) or more,
    /// sweeps leave what is overdue within the grace period alone.
    pub claims_pending: AtomicU64,
    /// Job specs read from Redis (the node caches them by version).
    pub specs_read: AtomicU64,
    /// Of those, read when a firing was armed, ahead of its claim.
    pub specs_read_ahead: AtomicU64,
    /// Scheduled claims sent ahead of a free run permit (runs were short).
    pub claimed_ahead: AtomicU64,
    /// Firings claimed ahead that found no run permit in time (a quarter of the lease, 1 s
    /// at most, while the node ran fewer firings than wait claimed ahead): queued again as
    /// the same attempt, for this node or another to run.
    pub ahead_held: AtomicU64,
    /// Firings claimed ahead waiting for a run permit now (a gauge).
    pub ahead_waiting: AtomicU64,
}

/// A node, ready to start.
pub struct Node {
    settings: Settings,
    registry: Registry,
    clock: Arc<dyn Clock>,
}

impl Node {
    /// A node with these settings and handlers.
    pub fn new(settings: Settings, registry: Registry) -> Self {
        Self {
            settings,
            registry,
            clock: Arc::new(SystemClock),
        }
    }

    /// Use `clock` as this node's wall clock (tests skew it; Redis time still rules).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Run until `shutdown` resolves, then leave the live set, stop claiming and wait for
    /// running jobs up to the drain timeout.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<()> {
        let handle = self.start().await?;
        shutdown.await;
        handle.shutdown().await;
        Ok(())
    }

    /// Start the node's tasks and return a handle to it.
    pub async fn start(self) -> Result<NodeHandle> {
        let Node {
            settings,
            registry,
            clock,
        } = self;
        settings.check()?;
        check_run_permits(settings.node.max_concurrent_runs)?;
        let store = Store::open(&settings.redis).await?;
        store.check_layout().await?;
        notify::ensure_everywhere(&store, settings.redis.enable_notifications, true).await?;
        store.register_handlers(&registry.names()).await?;

        let id = if settings.node.id.is_empty() {
            default_node_id()
        } else {
            settings.node.id.clone()
        };
        let cancel = CancellationToken::new();
        let (timer_tx, timer_rx) = mpsc::unbounded_channel();
        // One claim batcher and one completer per shard: a shard whose server is failing
        // over (its calls wait for seconds) does not hold up the others' batches.
        let shards = store.shards().len();
        let (claim_tx, claim_rx): (Vec<_>, Vec<_>) =
            (0..shards).map(|_| mpsc::unbounded_channel()).unzip();
        let (done_tx, done_rx): (Vec<_>, Vec<_>) =
            (0..shards).map(|_| mpsc::unbounded_channel()).unzip();
        let inner = Arc::new(Inner {
            id: id.clone(),
            settings: settings.node.clone(),
            notifications_allowed: settings.redis.enable_notifications,
            store,
            hooks: registry.hooks().to_vec(),
            registry: Arc::new(registry),
            clock: RedisClock::new(clock),
            live: RwLock::new(Vec::new()),
            specs: specs::SpecCache::default(),
            limited: limiter::LimitedKeys::default(),
            claim_book: claim::ClaimBook::default(),
            active_runs: Mutex::new(HashMap::new()),
            permits: Arc::new(Semaphore::new(settings.node.max_concurrent_runs)),
            claims_ahead: Arc::new(Semaphore::new(
                settings.node.max_concurrent_runs * batcher::CLAIMS_AHEAD_PER_RUN,
            )),
            run_time: batcher::RunTime::default(),
            record_permits: Arc::new(Semaphore::new(
                settings.node.max_concurrent_runs * RECORD_PERMITS_PER_RUN,
            )),
            runs: TaskTracker::new(),
            claiming: cancel.child_token(),
            runs_cancel: cancel.clone(),
            timers: timer_tx,
            claims: claim_tx,
            completions: done_tx,
            sweep: sweeper::SweepState::default(),
            left: tokio::sync::Mutex::new(false),
            fence: membership::Fence::new(),
            started_redis_ms: AtomicI64::new(0),
            callbacks_wake: (0..shards).map(|_| tokio::sync::Notify::new()).collect(),
            stats: Stats::default(),
        });
        // Join the live set and learn Redis's clock before claiming anything.
        inner.heartbeat(Beat::Alive).await?;
        inner.refresh_limits().await;

        let mut tasks = JoinSet::new();
        tasks.spawn(inner.clone().membership_loop());
        tasks.spawn(inner.clone().listener_loop());
        tasks.spawn(inner.clone().timer_loop(timer_rx));
        tasks.spawn(inner.clone().sweeper_loop());
        inner.start_hooks(&mut tasks);
        // Not with the loops above either: a draining node still fences itself.
        let fence = tokio::spawn(inner.clone().fence_loop());
        for rx in claim_rx {
            tasks.spawn(inner.clone().claim_batcher(rx));
        }
        for shard in 0..shards {
            tasks.spawn(inner.clone().callback_loop(shard));
        }
        // Not with the loops above: it must outlive them, to record the runs that finish
        // while the node drains.
        let completers = done_rx
            .into_iter()
            .map(|rx| tokio::spawn(inner.clone().completer(rx)))
            .collect();
        tracing::info!(node = %id, "node started");
        Ok(NodeHandle {
            inner,
            tasks,
            completers,
            fence,
        })
    }
}

/// `<host>-<8 hex digits>`: the host's name from `/etc/hostname`, else the kernel's
/// (`/proc/sys/kernel/hostname`), else `HOSTNAME`; `node` when none names one (an image
/// without `/etc/hostname`, a read-only or empty one).
fn default_node_id() -> String {
    node_id_from([
        std::fs::read_to_string("/etc/hostname").ok(),
        std::fs::read_to_string("/proc/sys/kernel/hostname").ok(),
        std::env::var("HOSTNAME").ok(),
    ])
}

/// A node id from the first of `names` with a name on its first line, or `node`.
fn node_id_from(names: impl IntoIterator<Item = Option<String>>) -> String {
    let host = names
        .into_iter()
        .flatten()
        .find_map(|text| {
            let line = text.lines().next()?.trim();
            (!line.is_empty()).then(|| line.to_string())
        })
        .unwrap_or_else(|| "node".into());
    // The top 32 bits of a v4 UUID are random: 8 hex digits, formatted without slicing.
    let suffix = (uuid::Uuid::new_v4().as_u128() >> 96) as u32;
    format!("{host}-{suffix:08x}")
}

/// A running node.
pub struct NodeHandle {
    inner: Arc<Inner>,
    tasks: JoinSet<()>,
    completers: Vec<tokio::task::JoinHandle<()>>,
    fence: tokio::task::JoinHandle<()>,
}

impl NodeHandle {
    /// This node's id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// This node's counters.
    pub fn stats(&self) -> &Stats {
        &self.inner.stats
    }

    /// The live nodes as this node saw them at its last heartbeat, sorted.
    pub fn live_nodes(&self) -> Vec<String> {
        // infallible: poisoned only by a panic while held, and its holders only clone or
        // replace the list.
        self.inner.live.read().expect("live set lock").clone()
    }

    /// Runs in progress on this node.
    pub fn running(&self) -> usize {
        self.inner.running()
    }

    /// The estimated offset of Redis's clock to this node's clock, in ms.
    pub fn clock_offset_ms(&self) -> i64 {
        self.inner.clock.offset_ms()
    }

    /// Run one sweep now, as the sweeper does every `node.sweep_interval`: claim this node's
    /// overdue firings (and anyone's past the grace period) and arm timers for what is due
    /// within the horizon. Returns once the sweep has read every shard; the claims it starts
    /// run on. A seam for tests, which step the engine instead of waiting on the interval.
    pub async fn sweep_once(&self) -> Result<()> {
        self.inner.sweep().await
    }

    /// Graceful shutdown: leave the live set, stop claiming, wait for running jobs up to the
    /// drain timeout, then cancel what still runs (its lease lets another node take it over).
    pub async fn shutdown(mut self) {
        let inner = self.inner.clone();
        // Stop claiming and heartbeating first, so no heartbeat in flight re-adds this node
        // after it left; then leave the live set before draining, so the other nodes take
        // the firings that follow at once.
        inner.claiming.cancel();
        while self.tasks.join_next().await.is_some() {}
        if let Err(e) = inner.heartbeat(Beat::Draining).await {
            tracing::warn!(error = %e, "could not leave the live set; it expires after node_ttl");
        }
        // Out of the live set, but alive: keep saying so while the runs drain, or the other
        // nodes would take them over after node_ttl.
        let keepalive = tokio::spawn(inner.clone().draining_loop());
        inner.runs.close();
        let drain = inner.settings.drain_timeout;
        if tokio::time::timeout(drain, inner.runs.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                running = inner.running(),
                "drain timeout passed; cancelling running jobs"
            );
            inner.runs_cancel.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(5), inner.runs.wait()).await;
        }
        // The completer records what the drained runs queued, then stops.
        inner.runs_cancel.cancel();
        for c in self.completers {
            let _ = c.await;
        }
        keepalive.abort();
        let _ = self.fence.await;
        let info = String::new();
        let ttl_ms = Inner::ms(inner.settings.node_ttl);
        if let Err(e) = inner
            .store
            .heartbeat(&inner.id, ttl_ms, &info, Beat::Gone)
            .await
        {
            tracing::warn!(error = %e, "could not say this node is gone; its entry expires");
        }
        tracing::info!(node = %inner.id, "node stopped");
    }

    /// Stop at once, as a crash would (for tests): nothing is drained or released, the node
    /// stays in the live set until its heartbeat goes stale.
    pub fn abort(mut self) {
        self.inner.runs_cancel.cancel();
        self.fence.abort();
        self.tasks.abort_all();
        for c in &self.completers {
            c.abort();
        }
    }
}

/// Outcomes that may wait to be recorded, per run permit (`node.max_concurrent_runs`).
const RECORD_PERMITS_PER_RUN: usize = 16;

/// Refuse a `node.max_concurrent_runs` whose semaphores could not be made (tokio panics past
/// `Semaphore::MAX_PERMITS`, and the multiplications would overflow first).
fn check_run_permits(runs: usize) -> Result<()> {
    let per_run = batcher::CLAIMS_AHEAD_PER_RUN.max(RECORD_PERMITS_PER_RUN);
    let most = Semaphore::MAX_PERMITS / per_run;
    if runs > most {
        return Err(crate::error::Error::Config(format!(
            "node.max_concurrent_runs: {runs} is too many; at most {most}"
        )));
    }
    Ok(())
}

/// State shared by a node's tasks.
pub(crate) struct Inner {
    id: String,
    settings: NodeSettings,
    notifications_allowed: bool,
    store: Store,
    registry: Arc<Registry>,
    /// The registry's hooks (see [`crate::handler::NodeHook`]).
    hooks: Vec<Arc<dyn crate::handler::NodeHook>>,
    clock: RedisClock,
    /// Live node ids, sorted, as of the last heartbeat.
    live: RwLock<Vec<String>>,
    /// Validated job specs by id, replaced when the version changes.
    specs: specs::SpecCache,
    /// The flow-control keys that have a limit.
    limited: limiter::LimitedKeys,
    /// Firings this node is claiming right now, and those to arm again when their claim ends.
    claim_book: claim::ClaimBook,
    /// Cancellation of the runs in progress here, by firing id (overlap `replace`).
    active_runs: Mutex<HashMap<String, CancellationToken>>,
    /// One permit per concurrent run: the bounded executor.
    permits: Arc<Semaphore>,
    /// Outcomes waiting to be recorded: a run gives its permit back for one of these.
    record_permits: Arc<Semaphore>,
    /// Scheduled claims sent ahead of a free run permit, while runs are short (see
    /// [`batcher::RunPermit`]).
    claims_ahead: Arc<Semaphore>,
    /// How long this node's handlers have been taking, lately.
    run_time: batcher::RunTime,
    /// Running handlers.
    runs: TaskTracker,
    /// Cancelled when the node stops claiming (shutdown begins).
    claiming: CancellationToken,
    /// Cancelled when running handlers must stop.
    runs_cancel: CancellationToken,
    /// Queues an ended attempt for its shard's completer.
    completions: Vec<mpsc::UnboundedSender<completer::Done>>,
    /// Queues a scheduled claim for its shard's batcher.
    claims: Vec<mpsc::UnboundedSender<batcher::ClaimRequest>>,
    /// Arms a local timer for a firing.
    timers: mpsc::UnboundedSender<timers::Arm>,
    /// The sweeper's state: what it is sweeping, how far it read, what to look for next.
    sweep: sweeper::SweepState,
    /// Set once the node left the live set; held during each heartbeat.
    left: tokio::sync::Mutex<bool>,
    /// The self-fence (see [`membership::fence_after`]).
    fence: membership::Fence,
    /// Redis time of this node's first heartbeat: a run its id holds that was claimed
    /// before is a previous process's (crashed and restarted under the same id).
    started_redis_ms: AtomicI64,
    /// Per shard: a completion of this node queued a callback there.
    callbacks_wake: Vec<tokio::sync::Notify>,
    stats: Stats,
}

impl Inner {
    fn running(&self) -> usize {
        self.settings.max_concurrent_runs - self.permits.available_permits()
    }

    fn history_limits(&self) -> HistoryLimits {
        HistoryLimits {
            history: self.settings.history_limit,
            history_max_age_ms: Inner::ms(self.settings.history_max_age),
            dead: self.settings.dead_letter_limit,
        }
    }

    fn ms(d: Duration) -> i64 {
        d.as_millis() as i64
    }

    /// While the node drains (out of the live set), beat every heartbeat interval so that
    /// its runs are not taken over; a beat that succeeds keeps the fence away too.
    async fn draining_loop(self: Arc<Self>) {
        let ttl_ms = Inner::ms(self.settings.node_ttl);
        let info = String::from("{}");
        loop {
            tokio::time::sleep(self.settings.heartbeat_interval).await;
            let sent_at = std::time::Instant::now();
            match self
                .store
                .heartbeat(&self.id, ttl_ms, &info, Beat::Draining)
                .await
            {
                Ok(_) => self.beat_ok(sent_at),
                Err(e) => tracing::warn!(error = %e, "heartbeat while draining failed"),
            }
        }
    }

    fn bump(counter: &AtomicU64) {
        Inner::bump_by(counter, 1);
    }

    fn bump_by(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_id_falls_back_when_no_host_name_is_found() {
        // No /etc/hostname, an empty kernel name, no HOSTNAME: `node-<8 hex digits>`.
        let id = node_id_from([None, Some(" \n".into()), None]);
        let suffix = id.strip_prefix("node-").expect(&id);
        assert_eq!(suffix.len(), 8, "{id}");
        assert!(suffix.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        assert_ne!(id, node_id_from([None::<String>]), "ids are random");
        assert!(node_id_from([]).starts_with("node-"));
        // The first name found wins, its first line trimmed.
        let id = node_id_from([Some("\n".into()), Some(" web-1 \nignored".into())]);
        assert!(
            id.starts_with("web-1-") && id.len() == "web-1-".len() + 8,
            "{id}"
        );
        assert!(node_id_from([Some("db\n".into()), Some("web".into())]).starts_with("db-"));
    }

    #[test]
    fn too_many_concurrent_runs_are_refused_by_name() {
        check_run_permits(1_000_000).unwrap();
        let err = check_run_permits(usize::MAX).unwrap_err().to_string();
        assert!(err.contains("node.max_concurrent_runs"), "{err}");
    }
}
