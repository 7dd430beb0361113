//! Metric names. The engine records through the `metrics` facade and never installs a
//! recorder: the embedding application (or `keyfire serve`, with its Prometheus exporter)
//! chooses one.
//!
//! Every series the engine records carries the node id (`node` label), so several nodes in
//! one process (tests, benches) are told apart. The cluster-wide figures read from Redis
//! (`QUEUE_*`, `OVERDUE`, `REDIS_MEMORY`) carry no `node` label: every node that reports
//! them reports the same values, so aggregate them across nodes with `max`, never `sum`.

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
    /// Outcomes of ended runs not recorded in Redis yet, per node (gauge).
    pub const OUTCOMES_UNRECORDED: &str = "keyfire_outcomes_unrecorded";
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

    /// Gauge: delay-queue tasks by topic and state. Labels `topic` (the first
    /// `metrics.max_topics` by name; the rest summed as `_other`), `state` (delayed | ready |
    /// reserved | dead). Cluster-wide, no `node` label.
    pub const QUEUE_TASKS: &str = "keyfire_queue_tasks";
    /// Gauge: seconds the oldest ready task of a topic has waited for a consumer, by Redis's
    /// clock (0 when none is ready). Label `topic`. Cluster-wide.
    pub const QUEUE_OLDEST_READY: &str = "keyfire_queue_oldest_ready_seconds";
    /// Counter: tasks added to a topic. Label `topic`. Cluster-wide.
    pub const QUEUE_ADDED: &str = "keyfire_queue_added_total";
    /// Counter: deliveries (pops that reserved a task), redeliveries included. Label `topic`.
    /// Cluster-wide.
    pub const QUEUE_DELIVERED: &str = "keyfire_queue_delivered_total";
    /// Counter: reservations that expired and went back to ready. Label `topic`. Cluster-wide.
    pub const QUEUE_REDELIVERED: &str = "keyfire_queue_redelivered_total";
    /// Counter: tasks finished. Label `topic`. Cluster-wide.
    pub const QUEUE_FINISHED: &str = "keyfire_queue_finished_total";
    /// Counter: tasks that used up their deliveries and went to the dead letters. Label
    /// `topic`. Cluster-wide.
    pub const QUEUE_DEAD: &str = "keyfire_queue_dead_total";
    /// Gauge: whether a topic is paused (1) or not (0): its pops reserve nothing. Label
    /// `topic` (the first `metrics.max_topics` by name; for `_other`, how many of the rest are
    /// paused). Cluster-wide.
    pub const QUEUE_PAUSED: &str = "keyfire_queue_paused";
    /// Gauge: topics in all (those past `metrics.max_topics` are summed as `_other`).
    /// Cluster-wide.
    pub const QUEUE_TOPICS: &str = "keyfire_queue_topics";
    /// Gauge: seconds since the instant of the earliest firing no node has claimed yet, by
    /// Redis's clock (0 when none is overdue): the scheduler's own lateness, seen from Redis.
    /// Label `shard`. Cluster-wide.
    pub const OVERDUE: &str = "keyfire_oldest_overdue_firing_seconds";
    /// Gauge: `used_memory / maxmemory` of each Redis master (0 when no `maxmemory` is set).
    /// At 1, Redis refuses writes (`maxmemory-policy noeviction`). Label `server`
    /// (`host:port`). Cluster-wide.
    pub const REDIS_MEMORY: &str = "keyfire_redis_memory_used_ratio";
    /// Times this node found that Redis lost keyfire's data (the data marker changed: Redis
    /// restarted empty, `FLUSHALL`, a failover to an empty replica) and wrote back what it
    /// owns.
    pub const DATA_LOSS: &str = "keyfire_redis_data_loss_total";
}
