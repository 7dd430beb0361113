//! Membership: heartbeats in Redis time, the live set and who owns a firing ([`Live`]), and
//! the self-fence ([`Fence`]). [`Membership::beat`] is its step: one heartbeat.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::context::{NodeCore, SweepState, ms};
use super::executor::Executor;
use super::healing::{DataWatch, Healer};
use crate::metrics::name;
use crate::store::{Beat, notify};

/// How long after sending its last heartbeat that succeeded a node fences itself: 3/5 of
/// node_ttl. Its runs are cancelled then and dropped [`CANCEL_GRACE`](super::runner::CANCEL_GRACE)
/// later at most (the fence is checked every 100 ms). The others may take its runs over once
/// its heartbeat is node_ttl old by Redis's clock, and that heartbeat ran in Redis after it
/// was sent; so two attempts of a firing overlap for at most
/// `max(0, 3/5 node_ttl + 1.1 s - node_ttl)`: never with node_ttl ≥ 2.75 s (5 s by default),
/// as long as the node's process runs (a process frozen whole cannot fence itself; its
/// outcome is refused when it wakes).
pub(super) fn fence_after(node_ttl: Duration) -> Duration {
    node_ttl * 3 / 5
}

pub use crate::store::stable_hash;

/// The owner of a job's firings (or of a topic) among `live` nodes: rendezvous (highest
/// random weight) hashing of the name, so a node joining or leaving moves only its own share.
/// Every firing of a job has the same owner while the live set stays: the node that claims a
/// firing arms the timer of the next one itself (see `Claimer::claim_batch`), and keeps the
/// job's spec cached. Jobs, not firings, are spread over the nodes.
pub fn owner<'a>(live: &'a [String], name: &str) -> Option<&'a str> {
    live.iter()
        .max_by_key(|node| stable_hash(&[node, name]))
        .map(String::as_str)
}

/// This node's view of the live set: which nodes are alive, so which firings it owns.
pub(super) struct Live {
    id: String,
    /// Live node ids, sorted, as of the last heartbeat.
    nodes: RwLock<Vec<String>>,
    /// Redis time of this node's first heartbeat: a run its id holds that was claimed
    /// before is a previous process's (crashed and restarted under the same id).
    started_redis_ms: AtomicI64,
}

impl Live {
    /// No view yet: the node owns everything (see [`Live::owns`]).
    pub(super) fn new(id: String) -> Self {
        Self {
            id,
            nodes: RwLock::new(Vec::new()),
            started_redis_ms: AtomicI64::new(0),
        }
    }

    /// Whether this node owns the job's firings, by its current view of the live set. With
    /// no view yet (or when it is missing from it), a node claims what it sees: G1 makes that
    /// safe.
    pub(super) fn owns(&self, job_id: &str) -> bool {
        self.owns_all([job_id])
    }

    /// Whether this node owns every one of these jobs (one read of the live set for all).
    pub(super) fn owns_all<'a>(&self, job_ids: impl IntoIterator<Item = &'a str>) -> bool {
        let live = self.nodes.read().expect("live set lock");
        if !live.iter().any(|n| n == &self.id) {
            return true;
        }
        job_ids
            .into_iter()
            .all(|id| owner(&live, id) == Some(self.id.as_str()))
    }

    /// The live nodes, sorted.
    pub(super) fn nodes(&self) -> Vec<String> {
        // infallible: poisoned only by a panic while held, and its holders only clone or
        // replace the list.
        self.nodes.read().expect("live set lock").clone()
    }

    /// Replace the view (sorted); whether it changed.
    fn set(&self, live: Vec<String>) -> bool {
        let mut current = self.nodes.write().expect("live set lock");
        let changed = *current != live;
        *current = live;
        changed
    }

    /// Redis time of this node's first heartbeat (0 before it).
    pub(super) fn started_redis_ms(&self) -> i64 {
        self.started_redis_ms.load(Ordering::Relaxed)
    }
}

/// Runs the fence cut off, handed over (taken over by this node, which knows they no longer
/// run) at the heartbeat that lifts it: `(job id, instant, holder)`.
pub(super) type Handover = Box<dyn Fn(String, i64, String) + Send + Sync>;

/// Heartbeats, the live set and the fence.
pub(super) struct Membership {
    pub(super) core: Arc<NodeCore>,
    pub(super) live: Arc<Live>,
    pub(super) fence: Arc<Fence>,
    pub(super) executor: Arc<Executor>,
    pub(super) sweep: Arc<SweepState>,
    /// The handlers this node runs, told in its heartbeat.
    pub(super) handlers: Vec<String>,
    /// Whether this node may turn expiry events on.
    pub(super) notifications_allowed: bool,
    /// Set once the node left the live set; held during each heartbeat.
    pub(super) left: tokio::sync::Mutex<bool>,
    /// Hands over the runs the fence cut off (the claimer takes them over).
    pub(super) handover: Handover,
    /// The data markers this node knows, and what it writes back when Redis lost them.
    pub(super) data: DataWatch,
    pub(super) healer: Arc<Healer>,
    /// Wakes the heartbeat loop for a beat now (a node that woke from a pause asks Redis).
    pub(super) beat_now: tokio::sync::Notify,
    /// Whether the node is confirming its place after a pause (logged once per pause).
    pub(super) confirming: AtomicBool,
}

impl Membership {
    /// Beat every heartbeat interval until the node stops claiming; now and then, check
    /// that expiry events are on.
    pub(super) async fn run(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.core.settings.heartbeat_interval);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut beats: u64 = 0;
        loop {
            tokio::select! {
                _ = self.core.claiming.cancelled() => break,
                _ = tick.tick() => {}
                _ = self.beat_now.notified() => {}
            }
            if let Err(e) = self.beat(Beat::Alive).await {
                self.fence.beat_failed();
                tracing::warn!(error = %e, "heartbeat failed");
            }
            beats += 1;
            // Someone may turn expiry events off at run time; the sweeper covers the gap,
            // and this turns them back on (when allowed) so firings are on time again.
            if beats.is_multiple_of(10) {
                let check =
                    notify::ensure_everywhere(&self.core.store, self.notifications_allowed, false);
                match tokio::time::timeout(Duration::from_secs(5), check).await {
                    Ok(Ok(true)) => self.sweep.sweep_now(),
                    Ok(Ok(false)) => {}
                    Ok(Err(e)) => tracing::error!(error = %e, "expired events are off"),
                    Err(_) => tracing::warn!("notification check timed out"),
                }
            }
        }
    }

    /// Another node joined or left: read the live set now and sweep, so the firings that
    /// change owner are taken by their new owner without waiting for the next heartbeat
    /// (rolling restarts hand over without a gap).
    pub(super) fn on_membership_change(self: &Arc<Self>) {
        if self.core.claiming.is_cancelled() {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            match me.beat(Beat::Alive).await {
                Ok(()) => me.sweep.sweep_now(),
                Err(e) => tracing::warn!(error = %e, "live set refresh failed"),
            }
        });
    }

    /// One heartbeat: announce this node (or its leaving), read the live set and Redis time.
    pub(super) async fn beat(&self, beat: Beat) -> crate::Result<()> {
        let core = &self.core;
        let info = serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "running": self.executor.running(),
            "runs_started": core.stats.started.load(std::sync::atomic::Ordering::Relaxed),
            "max_concurrent_runs": core.settings.max_concurrent_runs,
            "handlers": self.handlers,
        })
        .to_string();
        // One heartbeat at a time, and none after leaving: a refresh racing the shutdown
        // would put the node back in the live set for a node_ttl.
        let mut left = self.left.lock().await;
        if *left {
            return Ok(());
        }
        let ttl_ms = core.settings.node_ttl.as_millis() as i64;
        let sent = core.clock.local_ms();
        let sent_at = Instant::now();
        let hb = core.store.heartbeat(&core.id, ttl_ms, &info, beat).await?;
        self.check_data(&hb.data).await;
        let (now, mut live) = (hb.now, hb.live);
        *left = beat != Beat::Alive;
        // A node's first beat finds no entry of its own: no lapse.
        if hb.lapsed && self.live.started_redis_ms() != 0 {
            self.lapsed();
        }
        if self.confirming.swap(false, Ordering::SeqCst) && !hb.lapsed {
            tracing::info!(node = %self.core.id, "still in the live set after the pause: its runs go on");
        }
        self.beat_ok(sent_at);
        self.live
            .started_redis_ms
            .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed)
            .ok();
        let received = core.clock.local_ms();
        core.clock.observe(sent, now, received);
        live.sort();
        let node = core.id.clone();
        metrics::gauge!(name::LIVE_NODES, "node" => node.clone()).set(live.len() as f64);
        metrics::gauge!(name::CLOCK_OFFSET, "node" => node.clone())
            .set(core.clock.offset_ms() as f64 / 1000.0);
        metrics::gauge!(name::RUNNING, "node" => node.clone()).set(self.executor.running() as f64);
        metrics::gauge!(name::OUTCOMES_UNRECORDED, "node" => node)
            .set(self.executor.outcomes_unrecorded() as f64);
        if self.live.set(live) {
            // Ownership moved: the next sweep reads the whole horizon again, and looks for
            // runs held by nodes that left.
            self.sweep.forget_armed();
            self.sweep.check_holders();
        }
        Ok(())
    }

    /// Compare the data markers with those this node knows (the meta tag's from the
    /// heartbeat, each shard's read here with several shards); heal when Redis lost them.
    async fn check_data(&self, meta: &str) {
        let shards = match self.core.store.shard_markers().await {
            Ok(markers) => Some(markers),
            Err(e) => {
                tracing::warn!(error = %e, "could not read the shards' data markers");
                None
            }
        };
        if let Some(what) = self.data.observe(meta, shards.as_deref()) {
            let healer = self.healer.clone();
            tokio::spawn(async move { healer.heal(&what).await });
        }
    }

    /// A heartbeat sent at `sent_at` succeeded: the node is in touch with Redis. If it had
    /// fenced itself, it claims again, and the runs it cut off are handed over at once.
    fn beat_ok(&self, sent_at: Instant) {
        let (was_fenced, released) = self.fence.beat_ok(sent_at);
        if was_fenced {
            tracing::warn!(node = %self.core.id, "heartbeat again: claiming again");
            self.sweep.check_holders();
            self.sweep.sweep_now();
        }
        for (job_id, at_ms) in released {
            (self.handover)(job_id, at_ms, self.core.id.clone());
        }
    }

    /// While the node drains (out of the live set), beat every heartbeat interval so that
    /// its runs are not taken over; a beat that succeeds keeps the fence away too.
    pub(super) async fn draining_loop(self: Arc<Self>) {
        let ttl_ms = ms(self.core.settings.node_ttl);
        let info = String::from("{}");
        loop {
            tokio::time::sleep(self.core.settings.heartbeat_interval).await;
            let sent_at = Instant::now();
            match self
                .core
                .store
                .heartbeat(&self.core.id, ttl_ms, &info, Beat::Draining)
                .await
            {
                Ok(_) => self.beat_ok(sent_at),
                Err(e) => {
                    self.fence.beat_failed();
                    tracing::warn!(error = %e, "heartbeat while draining failed")
                }
            }
        }
    }

    /// Say this node is gone (the end of shutdown).
    pub(super) async fn gone(&self) -> crate::Result<()> {
        let ttl_ms = ms(self.core.settings.node_ttl);
        self.core
            .store
            .heartbeat(&self.core.id, ttl_ms, "", Beat::Gone)
            .await
            .map(|_| ())
    }

    /// Fence this node when its last heartbeat that succeeded was sent longer ago than
    /// [`fence_after`]: stop claiming and stop every run at once, before other nodes may
    /// take them over. Checked every 100 ms until the node's runs end.
    pub(super) async fn fence_loop(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tokio::select! {
                _ = self.core.runs_cancel.cancelled() => break,
                _ = tick.tick() => {}
            }
            self.check_fence();
        }
    }

    /// The fence loop's step: fence the node if its heartbeats are too old; whether it did.
    /// A node that was frozen and woke before node_ttl asks Redis first (a heartbeat now).
    pub(super) fn check_fence(&self) -> bool {
        let ttl = self.core.settings.node_ttl;
        match self.fence.check(fence_after(ttl), ttl) {
            Verdict::Fine => false,
            Verdict::Confirming => {
                if !self.confirming.swap(true, Ordering::SeqCst) {
                    tracing::warn!(
                        node = %self.core.id,
                        runs = self.executor.active(),
                        "this node was frozen: keeping its runs while a heartbeat checks its place in the live set"
                    );
                }
                self.beat_now.notify_one();
                false
            }
            Verdict::Fenced(since) => {
                tracing::error!(
                    node = %self.core.id,
                    silent_ms = since.as_millis() as u64,
                    runs = self.executor.active(),
                    "no heartbeat: fencing this node (its runs stop, it claims nothing) before others take its runs over"
                );
                true
            }
        }
    }

    /// The heartbeat found this node's live-set entry lapsed (older than node_ttl, or gone
    /// with the data): others may have taken its runs over. Fence now (the beat's success
    /// lifts it again at once, so the node claims on; its runs stop).
    fn lapsed(&self) {
        if self.fence.fence_now() {
            tracing::error!(
                node = %self.core.id,
                runs = self.executor.active(),
                "this node's place in the live set had lapsed: fencing it (its runs stop) since others may have taken them over"
            );
        }
    }
}

/// The self-fence: a node whose last heartbeat that succeeded is too old stops every run
/// and claims nothing, before other nodes may take its runs over.
pub(super) struct Fence {
    /// When the last heartbeat that succeeded was sent.
    last_beat: Mutex<Instant>,
    /// Whether the node fenced itself: it claims nothing until a heartbeat succeeds.
    fenced: AtomicBool,
    /// Cancelled when the node fences itself: every run stops at once (no grace). Replaced
    /// by a fresh token when a heartbeat succeeds again.
    token: Mutex<CancellationToken>,
    /// Runs the fence cut off and that have ended: handed over (taken over by this node,
    /// which knows they no longer run) at the next heartbeat that succeeds.
    released: Mutex<Vec<(String, i64)>>,
    /// How many times the node fenced itself: a claim sent before a fence and answered
    /// after it (even once the fence lifted) renews its lease before its run starts.
    epoch: std::sync::atomic::AtomicU64,
    /// When the fence last lifted.
    lifted: Mutex<Option<Instant>>,
    /// When the fence loop last ran, and when it found that the process had not run for
    /// [`FROZEN_GAP`] or more (a pause: SIGSTOP, a VM migration, a stall) since the last
    /// heartbeat that succeeded.
    ticked: Mutex<Instant>,
    frozen: Mutex<Option<Instant>>,
    /// A heartbeat failed since the last that succeeded: the node is cut off from Redis (or
    /// Redis is away), so a pause on top of it earns no confirmation: it fences as usual.
    failing: AtomicBool,
}

/// A gap this long between two runs of the fence loop (which runs every 100 ms) means the
/// process was frozen: it did nothing, its runs included.
pub(super) const FROZEN_GAP: Duration = Duration::from_millis(500);

/// What the fence loop decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Heartbeats are recent enough (or the node is fenced already).
    Fine,
    /// The node was frozen (with no heartbeat failed since the last good one) and woke with
    /// its last good heartbeat older than the fence's bound but younger than node_ttl: nobody
    /// may have taken its runs yet. It keeps them and
    /// asks Redis at once; it fences if the answer says its entry lapsed, or if no answer
    /// comes before its last good heartbeat is node_ttl old.
    Confirming,
    /// The node fenced itself now, silent this long.
    Fenced(Duration),
}

impl Fence {
    pub(super) fn new() -> Self {
        Self {
            last_beat: Mutex::new(Instant::now()),
            fenced: AtomicBool::new(false),
            token: Mutex::new(CancellationToken::new()),
            released: Mutex::new(Vec::new()),
            epoch: std::sync::atomic::AtomicU64::new(0),
            lifted: Mutex::new(None),
            ticked: Mutex::new(Instant::now()),
            frozen: Mutex::new(None),
            failing: AtomicBool::new(false),
        }
    }

    /// Whether the node is fenced, or its fence lifted less than `window` ago. Such a node
    /// was cut off from Redis itself: other nodes' silence in that time may be the same
    /// outage (Redis down, a failover), not their death, and they may be about to record
    /// the outcomes of runs that ended before it.
    pub(super) fn cut_off_within(&self, window: Duration) -> bool {
        self.is_fenced()
            || self
                .lifted
                .lock()
                .expect("fence lifted lock")
                .is_some_and(|t| t.elapsed() < window)
    }

    /// How many times the node fenced itself so far.
    pub(super) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// The epoch to send a claim under: none that a run can match while the node is
    /// fenced, so a claim sent while fenced renews its lease before its run starts, however
    /// soon the fence lifts.
    pub(super) fn send_epoch(&self) -> u64 {
        if self.is_fenced() {
            u64::MAX
        } else {
            self.epoch()
        }
    }

    /// Whether the node is fenced now.
    pub(super) fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::SeqCst)
    }

    /// The token a run started now stops on when the node fences itself.
    pub(super) fn token(&self) -> CancellationToken {
        self.token.lock().expect("fence lock").clone()
    }

    /// A run the fence cut off has ended: hand it over at the next good heartbeat.
    pub(super) fn release(&self, job_id: String, at_ms: i64) {
        self.released
            .lock()
            .expect("released lock")
            .push((job_id, at_ms));
    }

    /// A heartbeat sent at `sent_at` succeeded: lift the fence. Returns whether the node was
    /// fenced, and the runs to hand over.
    fn beat_ok(&self, sent_at: Instant) -> (bool, Vec<(String, i64)>) {
        {
            let mut last = self.last_beat.lock().expect("last beat lock");
            *last = (*last).max(sent_at);
        }
        {
            // A beat sent after the process woke answers for the pause.
            let mut frozen = self.frozen.lock().expect("frozen lock");
            if frozen.is_some_and(|woke| sent_at >= woke) {
                *frozen = None;
            }
        }
        self.failing.store(false, Ordering::SeqCst);
        let was_fenced = self.fenced.swap(false, Ordering::SeqCst);
        if was_fenced {
            *self.token.lock().expect("fence lock") = CancellationToken::new();
            *self.lifted.lock().expect("fence lifted lock") = Some(Instant::now());
        }
        let released = std::mem::take(&mut *self.released.lock().expect("released lock"));
        (was_fenced, released)
    }

    /// The fence loop's step. Fence the node if its last good heartbeat was sent longer ago
    /// than `after` and it is not fenced yet (cancel every run), unless the process was just
    /// frozen and that heartbeat is younger than `ttl`: then it keeps its runs while it asks
    /// Redis (see [`Verdict::Confirming`]).
    fn check(&self, after: Duration, ttl: Duration) -> Verdict {
        let now = Instant::now();
        let gap = {
            let mut ticked = self.ticked.lock().expect("ticked lock");
            let gap = now.saturating_duration_since(*ticked);
            *ticked = now;
            gap
        };
        let since = self.last_beat.lock().expect("last beat lock").elapsed();
        let frozen = {
            let mut frozen = self.frozen.lock().expect("frozen lock");
            if gap >= FROZEN_GAP {
                *frozen = Some(now);
            }
            frozen.is_some()
        };
        if since <= after || self.is_fenced() {
            return Verdict::Fine;
        }
        if frozen && since < ttl && !self.failing.load(Ordering::SeqCst) {
            return Verdict::Confirming;
        }
        if self.fence_now() {
            Verdict::Fenced(since)
        } else {
            Verdict::Fine
        }
    }

    /// A heartbeat failed: until one succeeds, the node is cut off, not merely paused.
    fn beat_failed(&self) {
        self.failing.store(true, Ordering::SeqCst);
    }

    /// Fence the node now, if it is not fenced: cancel every run. Whether it fenced.
    fn fence_now(&self) -> bool {
        if self.fenced.swap(true, Ordering::SeqCst) {
            return false;
        }
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.token.lock().expect("fence lock").cancel();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_leavers_share_of_an_even_spread_moves() {
        let nodes: Vec<String> = (0..3).map(|i| format!("node-{i}")).collect();
        let mut counts = [0usize; 3];
        let mut moved = 0;
        let two = &nodes[..2];
        for j in 0..3000 {
            let job = format!("job-{j}");
            let o = owner(&nodes, &job).unwrap();
            let i = nodes.iter().position(|n| n == o).unwrap();
            counts[i] += 1;
            let o2 = owner(two, &job).unwrap();
            if o != "node-2" && o2 != o {
                moved += 1;
            }
        }
        assert!(counts.iter().all(|&c| c > 800), "uneven spread {counts:?}");
        assert_eq!(moved, 0, "jobs of staying nodes moved");
    }

    /// The fence loop's verdicts, with real time: a node that was frozen and wakes before
    /// node_ttl confirms instead of fencing; one that kept running, or woke after node_ttl,
    /// fences.
    #[test]
    fn a_frozen_node_fences_only_if_it_wakes_after_node_ttl() {
        use std::thread::sleep;
        let (after, ttl) = (Duration::from_millis(300), Duration::from_millis(1_500));
        // Running all along (the loop ticks every 100 ms) and silent past `after`: fenced.
        let fence = Fence::new();
        let mut verdicts = Vec::new();
        for _ in 0..5 {
            sleep(Duration::from_millis(100));
            verdicts.push(fence.check(after, ttl));
        }
        assert!(
            matches!(verdicts.last(), Some(Verdict::Fine))
                && verdicts.iter().any(|v| matches!(v, Verdict::Fenced(_))),
            "{verdicts:?}"
        );
        assert!(fence.is_fenced());

        // Frozen for 700 ms (no tick), woke before ttl: confirming, not fenced; a heartbeat
        // sent after waking ends it.
        let fence = Fence::new();
        fence.check(after, ttl);
        sleep(Duration::from_millis(700));
        assert_eq!(fence.check(after, ttl), Verdict::Confirming);
        assert!(!fence.is_fenced());
        sleep(Duration::from_millis(100));
        assert_eq!(
            fence.check(after, ttl),
            Verdict::Confirming,
            "still waiting"
        );
        fence.beat_ok(Instant::now());
        assert_eq!(fence.check(after, ttl), Verdict::Fine);
        assert!(!fence.is_fenced());

        // Frozen while heartbeats were failing (cut off, not merely paused): fenced as usual.
        let fence = Fence::new();
        fence.check(after, ttl);
        fence.beat_failed();
        sleep(Duration::from_millis(700));
        assert!(matches!(fence.check(after, ttl), Verdict::Fenced(_)));

        // Frozen past ttl: fenced at once on waking.
        let fence = Fence::new();
        fence.check(after, ttl);
        sleep(Duration::from_millis(1_600));
        assert!(matches!(fence.check(after, ttl), Verdict::Fenced(_)));
    }

    #[test]
    fn hash_is_stable() {
        // Pinned: a change here would make mixed-version clusters disagree about owners.
        assert_eq!(stable_hash(&["a", "b"]), stable_hash(&["a", "b"]));
        assert_ne!(stable_hash(&["ab", ""]), stable_hash(&["a", "b"]));
        assert_eq!(
            stable_hash(&["node-1", "job", "1000"]),
            0xa9dd_c5e1_14ee_8ff8
        );
    }
}
