//! Metric names. The engine records through the `metrics` facade and never installs a
//! recorder: the embedding application (or `keyfire serve`, with its Prometheus exporter)
//! chooses one.
//!
//! Every series carries the node id (`node` label), so several nodes in one process (tests,
//! benches) are told apart.

/// Metric names, in one place.
pub mod name {
    /// Firings (and next attempts) this node claimed. Label `kind`: scheduled | retry.
    pub const CLAIMED: &str = "keyfire_firings_claimed_total";
    /// Finished attempts. Labels `handler`, `outcome` (ok | failed | timeout | cancelled).
    pub const RUNS: &str = "keyfire_runs_total";
    /// Attempts that were followed by a retry.
    pub const RETRIES: &str = "keyfire_retries_total";
    /// Firings moved to the dead letters.
    pub const DEAD: &str = "keyfire_dead_letters_total";
    /// Firings skipped under the misfire policy (label `reason` = misfire) or the overlap
    /// policy (`reason` = overlap).
    pub const SKIPPED: &str = "keyfire_firings_skipped_total";
    /// Claims that found the firing already claimed, changed or deleted.
    pub const CONFLICTS: &str = "keyfire_claim_conflicts_total";
    /// Firings claimed by the sweeper: events and timers missed them.
    pub const SWEPT: &str = "keyfire_sweeper_recoveries_total";
    /// Runs taken over after their lease expired.
    pub const TAKEOVERS: &str = "keyfire_lease_takeovers_total";
    /// Times the subscriber connected after a disconnect.
    pub const RECONNECTS: &str = "keyfire_subscriber_reconnects_total";
    /// Seconds from a firing's instant to its claim, by Redis's clock.
    pub const LATENESS: &str = "keyfire_firing_lateness_seconds";
    /// Seconds a run took. Label `handler`.
    pub const DURATION: &str = "keyfire_run_duration_seconds";
    /// Jobs with a pending firing (the due ZSET's size).
    pub const PENDING: &str = "keyfire_pending_jobs";
    /// Pending firings within the sentinel horizon (the sentinel keys alive).
    pub const SENTINELS: &str = "keyfire_sentinel_keys";
    /// Live nodes, as this node sees them.
    pub const LIVE_NODES: &str = "keyfire_live_nodes";
    /// Redis time minus this node's clock, in seconds.
    pub const CLOCK_OFFSET: &str = "keyfire_clock_offset_seconds";
    /// Runs in progress on this node.
    pub const RUNNING: &str = "keyfire_running";
    /// Counter: claims and outcomes that `redis.wait_replicas` replicas had not acknowledged
    /// within `redis.wait_timeout` (a failover could lose them).
    pub const UNREPLICATED: &str = "keyfire_unreplicated_writes_total";
    /// Counter: claimed firings held back by their flow-control limit (delayed, same
    /// attempt). Labels `key`, `reason` (rate | in_flight).
    pub const LIMIT_HELD: &str = "keyfire_limit_held_total";
    /// Firings running under a limit key, as this node last heard from the limiter.
    /// Label `key`.
    pub const LIMIT_IN_FLIGHT: &str = "keyfire_limit_in_flight";
    /// Firings held back under a limit key, waiting in line, as this node last heard from
    /// the limiter. Label `key`.
    pub const LIMIT_WAITING: &str = "keyfire_limit_waiting";
    /// Callback attempts. Labels `node`, `result` (`delivered`, `failed`: retried later,
    /// `given_up`: its last attempt failed, or it cannot be sent).
    pub const CALLBACKS: &str = "keyfire_callbacks_total";
    /// Tasks enqueued with a dedup key that named a task within its window: the existing
    /// task was returned, nothing was written. Recorded by the client that enqueued (the
    /// REST API's, for `keyfire serve`); no `node` label.
    pub const DEDUPED: &str = "keyfire_tasks_deduplicated_total";
}
