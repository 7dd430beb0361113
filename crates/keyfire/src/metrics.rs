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

/// The keys of the series a node records for every firing (claimed, lateness, and per
/// handler the run's duration and outcome), built once: a firing asks the recorder for its
/// handles without building and hashing labels each time. The recorder is still asked at
/// every call, so one installed after the node started gets them all the same.
pub(crate) struct FiringMetrics {
    node: String,
    claimed_scheduled: metrics::Key,
    claimed_retry: metrics::Key,
    lateness: metrics::Key,
    by_handler: std::sync::Mutex<foldhash::HashMap<String, std::sync::Arc<HandlerKeys>>>,
}

/// A handler's series: its runs' duration, and its runs by outcome.
struct HandlerKeys {
    duration: metrics::Key,
    /// ok, failed, timeout, cancelled.
    runs: [metrics::Key; 4],
}

/// One handler's series (see [`FiringMetrics::handler`]).
pub(crate) struct HandlerMetrics(std::sync::Arc<HandlerKeys>);

impl HandlerMetrics {
    /// Seconds a run took.
    pub(crate) fn duration(&self, seconds: f64) {
        metrics::with_recorder(|r| r.register_histogram(&self.0.duration, &METADATA))
            .record(seconds);
    }

    /// A run ended with `outcome` (ok, failed, timeout or cancelled).
    pub(crate) fn run(&self, outcome: &str) {
        let i = match outcome {
            "ok" => 0,
            "failed" => 1,
            "timeout" => 2,
            _ => 3,
        };
        metrics::with_recorder(|r| r.register_counter(&self.0.runs[i], &METADATA)).increment(1);
    }
}

/// Handlers whose keys a node keeps.
const HANDLERS_KEPT: usize = 256;

/// What the `metrics` macros would pass for the engine's series.
static METADATA: metrics::Metadata<'static> =
    metrics::Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));

fn key(name: &'static str, labels: &[(&'static str, &str)]) -> metrics::Key {
    metrics::Key::from_parts(
        name,
        labels
            .iter()
            .map(|&(k, v)| metrics::Label::new(k, v.to_string()))
            .collect::<Vec<_>>(),
    )
}

impl FiringMetrics {
    /// The keys of node `node`'s series.
    pub(crate) fn new(node: &str) -> Self {
        Self {
            node: node.to_string(),
            claimed_scheduled: key(name::CLAIMED, &[("node", node), ("kind", "scheduled")]),
            claimed_retry: key(name::CLAIMED, &[("node", node), ("kind", "retry")]),
            lateness: key(name::LATENESS, &[("node", node)]),
            by_handler: Default::default(),
        }
    }

    /// A firing (scheduled, or a next attempt) claimed.
    pub(crate) fn claimed(&self, scheduled: bool) {
        let key = if scheduled {
            &self.claimed_scheduled
        } else {
            &self.claimed_retry
        };
        metrics::with_recorder(|r| r.register_counter(key, &METADATA)).increment(1);
    }

    /// Seconds from a firing's instant to its claim.
    pub(crate) fn lateness(&self, seconds: f64) {
        metrics::with_recorder(|r| r.register_histogram(&self.lateness, &METADATA)).record(seconds);
    }

    /// The series of `handler`'s runs: a run asks for them once, for its duration and its
    /// outcome.
    pub(crate) fn handler(&self, handler: &str) -> HandlerMetrics {
        HandlerMetrics(self.handler_keys(handler))
    }

    fn handler_keys(&self, handler: &str) -> std::sync::Arc<HandlerKeys> {
        let mut map = self.by_handler.lock().expect("metric keys lock");
        if let Some(k) = map.get(handler) {
            return k.clone();
        }
        let labels = |outcome| {
            [
                ("node", self.node.as_str()),
                ("handler", handler),
                ("outcome", outcome),
            ]
        };
        let keys = std::sync::Arc::new(HandlerKeys {
            duration: key(
                name::DURATION,
                &[("node", &self.node), ("handler", handler)],
            ),
            runs: ["ok", "failed", "timeout", "cancelled"].map(|o| key(name::RUNS, &labels(o))),
        });
        // A job may name a handler no node has: such names are not kept past a bound.
        if map.len() < HANDLERS_KEPT {
            map.insert(handler.to_string(), keys.clone());
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use metrics::{
        Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
    };

    use super::*;

    /// Remembers the keys it is asked for.
    #[derive(Default)]
    struct Keys(Mutex<Vec<(&'static str, Key)>>);

    impl Recorder for Keys {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            self.0.lock().unwrap().push(("counter", key.clone()));
            Counter::noop()
        }
        fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
            self.0.lock().unwrap().push(("gauge", key.clone()));
            Gauge::noop()
        }
        fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
            self.0.lock().unwrap().push(("histogram", key.clone()));
            Histogram::noop()
        }
    }

    /// The keys built once are those the macros build at each call, label for label.
    #[test]
    fn firing_metrics_record_the_series_the_macros_would() {
        let m = FiringMetrics::new("node-1");
        let cached = Keys::default();
        metrics::with_local_recorder(&cached, || {
            m.claimed(true);
            m.claimed(false);
            m.lateness(0.5);
            for _ in 0..2 {
                let h = m.handler("h");
                h.duration(0.1);
                for outcome in ["ok", "failed", "timeout", "cancelled"] {
                    h.run(outcome);
                }
            }
        });
        let built = Keys::default();
        metrics::with_local_recorder(&built, || {
            let node = "node-1".to_string();
            metrics::counter!(name::CLAIMED, "node" => node.clone(), "kind" => "scheduled")
                .increment(1);
            metrics::counter!(name::CLAIMED, "node" => node.clone(), "kind" => "retry")
                .increment(1);
            metrics::histogram!(name::LATENESS, "node" => node.clone()).record(0.5);
            for _ in 0..2 {
                metrics::histogram!(name::DURATION, "node" => node.clone(), "handler" => "h")
                    .record(0.1);
                for outcome in ["ok", "failed", "timeout", "cancelled"] {
                    metrics::counter!(name::RUNS, "node" => node.clone(), "handler" => "h", "outcome" => outcome)
                        .increment(1);
                }
            }
        });
        assert_eq!(*cached.0.lock().unwrap(), *built.0.lock().unwrap());
    }
}
