//! What every component of a node shares: its id and settings, the store, the clock, its
//! counters and its lifecycle (when it stops claiming, when its runs must stop); and the
//! sweep's state, which membership and the listener reset when ownership or messages may
//! have been lost.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::RedisClock;
use crate::config::NodeSettings;
use crate::metrics::name;
use crate::store::{HistoryLimits, Store};

/// Counters a node keeps about itself, for tests and logs ([`crate::metrics`] names the
/// series the same events are recorded to).
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

/// Events counted both here and in metrics: one call bumps the counter and records the
/// series (labelled with the node's id, `node`).
impl Stats {
    /// A claim found the firing already taken or changed: [`Stats::stale`] and
    /// [`name::CONFLICTS`].
    pub(super) fn claim_conflict(&self, node: &str) {
        bump(&self.stale);
        metrics::counter!(name::CONFLICTS, "node" => node.to_string()).increment(1);
    }

    /// A run taken over after its lease expired: [`Stats::recovered`] and
    /// [`name::TAKEOVERS`].
    pub(super) fn takeover(&self, node: &str) {
        bump(&self.recovered);
        metrics::counter!(name::TAKEOVERS, "node" => node.to_string()).increment(1);
    }

    /// A firing the sweeper claimed: [`Stats::swept`] and [`name::SWEPT`].
    pub(super) fn sweeper_claim(&self, node: &str) {
        bump(&self.swept);
        metrics::counter!(name::SWEPT, "node" => node.to_string()).increment(1);
    }

    /// A claimed firing held back by limit key `key` for `reason`: [`Stats::held`] and
    /// [`name::LIMIT_HELD`].
    pub(super) fn limit_held(&self, node: &str, key: &str, reason: &str) {
        metrics::counter!(name::LIMIT_HELD, "node" => node.to_string(), "key" => key.to_string(), "reason" => reason.to_string())
            .increment(1);
        bump(&self.held);
    }

    /// The subscriber connected: [`Stats::subscribed`], and [`name::RECONNECTS`] when it
    /// connected before.
    pub(super) fn subscribed(&self, node: &str) {
        if self.subscribed.fetch_add(1, Ordering::Relaxed) > 0 {
            metrics::counter!(name::RECONNECTS, "node" => node.to_string()).increment(1);
        }
    }
}

/// The node's identity, its shared handles and its lifecycle, held by every component.
pub(super) struct NodeCore {
    pub(super) id: String,
    pub(super) settings: NodeSettings,
    pub(super) store: Store,
    pub(super) clock: RedisClock,
    pub(super) stats: Stats,
    /// The keys of the series recorded for every firing.
    pub(super) metrics: crate::metrics::FiringMetrics,
    /// Cancelled when the node stops claiming (shutdown begins).
    pub(super) claiming: CancellationToken,
    /// Cancelled when running handlers must stop (past the drain timeout, or at the end of
    /// shutdown); the completers stop with it.
    pub(super) runs_cancel: CancellationToken,
    /// Running handlers, and the claims and batches that may start one: shutdown waits
    /// for them.
    pub(super) runs: TaskTracker,
}

impl NodeCore {
    pub(super) fn new(id: String, settings: NodeSettings, store: Store, clock: RedisClock) -> Self {
        let runs_cancel = CancellationToken::new();
        Self {
            metrics: crate::metrics::FiringMetrics::new(&id),
            id,
            settings,
            store,
            clock,
            stats: Stats::default(),
            claiming: runs_cancel.child_token(),
            runs_cancel,
            runs: TaskTracker::new(),
        }
    }

    pub(super) fn history_limits(&self) -> HistoryLimits {
        HistoryLimits {
            history: self.settings.history_limit,
            history_max_age_ms: ms(self.settings.history_max_age),
            dead: self.settings.dead_letter_limit,
        }
    }
}

/// What the sweeper is asked to do next, and how far its last sweeps read: set by the
/// sweeper, reset by membership (ownership moved) and the listener (messages were lost).
pub(super) struct SweepState {
    /// Asks the sweeper to sweep now (after a resubscribe, a fence lifted, a takeover).
    pub(super) now: Notify,
    /// Per shard, the Redis instant up to which a sweep read the due ZSET and armed this
    /// node's firings, for the current live set. Later sweeps read only what is overdue and
    /// what came within the horizon since; firings created or moved inside the part already
    /// read arrive as change messages. Cleared whenever that could be wrong: the live set
    /// changed (ownership moved) or the subscriber reconnected (messages were lost).
    pub(super) armed_upto: Mutex<HashMap<usize, i64>>,
    /// Whether the next sweep should look for runs held by nodes that left the live set
    /// (set at start, when the live set changes, and while such runs are found).
    pub(super) check_holders: AtomicBool,
}

impl Default for SweepState {
    fn default() -> Self {
        Self {
            now: Notify::new(),
            armed_upto: Mutex::default(),
            check_holders: AtomicBool::new(true),
        }
    }
}

impl SweepState {
    /// Sweep now.
    pub(super) fn sweep_now(&self) {
        self.now.notify_one();
    }

    /// Look for runs held by nodes that left, at the next sweep.
    pub(super) fn check_holders(&self) {
        self.check_holders.store(true, Ordering::Relaxed);
    }

    /// What the last sweeps armed may be wrong: read the whole horizon again.
    pub(super) fn forget_armed(&self) {
        self.armed_upto.lock().expect("armed_upto lock").clear();
    }
}

pub(super) fn ms(d: Duration) -> i64 {
    d.as_millis() as i64
}

pub(super) fn bump(counter: &AtomicU64) {
    bump_by(counter, 1);
}

pub(super) fn bump_by(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}
