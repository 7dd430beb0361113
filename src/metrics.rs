//! The Prometheus exporter behind `/metrics`: installed once per process by the server,
//! never by the library; and [`ClusterFigures`], the cluster-wide figures a scrape reads from
//! Redis (the delay queue's topics, the oldest overdue firing, Redis's memory).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::settings::MetricsSettings;
use keyfire::Client;
use keyfire::inspect::ServerMemory;
use keyfire::metrics::name;
use keyfire::queue::{Queue, TopicSampler, TopicStats};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

const LATENESS_BUCKETS: &[f64] = &[
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
const DURATION_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0,
];

/// The process's Prometheus recorder, installed on first use. Returns None when another
/// global `metrics` recorder was installed first (an embedding application's own).
pub fn handle() -> Option<&'static PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full(name::LATENESS.into()), LATENESS_BUCKETS)
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Full(name::DURATION.into()), DURATION_BUCKETS)
                })
                .ok()?
                .build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok()?;
            describe();
            Some(handle)
        })
        .as_ref()
}

/// The metrics in Prometheus text format (empty when no recorder of ours is installed).
pub fn render() -> String {
    handle().map(|h| h.render()).unwrap_or_default()
}

fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(name::CLAIMED, "Firings and next attempts this node claimed");
    describe_counter!(name::RUNS, "Finished attempts by handler and outcome");
    describe_counter!(name::RETRIES, "Attempts followed by a retry");
    describe_counter!(name::DEAD, "Firings moved to the dead letters");
    describe_counter!(
        name::SKIPPED,
        "Firings skipped by the misfire or overlap policy"
    );
    describe_counter!(
        name::CONFLICTS,
        "Claims that found the firing taken, changed or gone"
    );
    describe_counter!(
        name::SWEPT,
        "Firings the sweeper claimed (events and timers missed them)"
    );
    describe_counter!(name::TAKEOVERS, "Runs taken over after their lease expired");
    describe_counter!(name::RECONNECTS, "Subscriber reconnects");
    describe_counter!(
        name::UNREPLICATED,
        "Claims and outcomes not acknowledged by redis.wait_replicas replicas in time"
    );
    describe_histogram!(
        name::LATENESS,
        Unit::Seconds,
        "Firing instant to claim, Redis time"
    );
    describe_histogram!(name::DURATION, Unit::Seconds, "Run duration");
    describe_gauge!(name::PENDING, "Jobs with a pending firing");
    describe_gauge!(
        name::SENTINELS,
        "Pending firings within the sentinel horizon"
    );
    describe_gauge!(name::LIVE_NODES, "Live nodes as this node sees them");
    describe_gauge!(
        name::CLOCK_OFFSET,
        Unit::Seconds,
        "Redis time minus this node's clock"
    );
    describe_gauge!(name::RUNNING, "Runs in progress on this node");
    describe_gauge!(
        name::OUTCOMES_UNRECORDED,
        "Outcomes of runs ended on this node not recorded in Redis yet"
    );
    describe_counter!(
        name::DEDUPED,
        "Tasks enqueued with a dedup key within its window: the existing task was returned"
    );
    describe_counter!(
        name::CALLBACKS,
        "Callback attempts: delivered, failed (retried later), given up"
    );
    describe_gauge!(
        name::QUEUE_TASKS,
        "Delay-queue tasks by topic and state (cluster-wide: take max across nodes)"
    );
    describe_gauge!(
        name::QUEUE_OLDEST_READY,
        Unit::Seconds,
        "Age of the topic's oldest ready task, Redis time (cluster-wide)"
    );
    describe_counter!(name::QUEUE_ADDED, "Tasks added to the topic (cluster-wide)");
    describe_counter!(
        name::QUEUE_DELIVERED,
        "Pops that reserved a task of the topic, redeliveries included (cluster-wide)"
    );
    describe_counter!(
        name::QUEUE_REDELIVERED,
        "Reservations of the topic that expired and went back to ready (cluster-wide)"
    );
    describe_counter!(
        name::QUEUE_FINISHED,
        "Tasks of the topic finished (cluster-wide)"
    );
    describe_counter!(
        name::QUEUE_DEAD,
        "Tasks of the topic that used up their deliveries (cluster-wide)"
    );
    describe_gauge!(
        name::QUEUE_PAUSED,
        "Whether the topic is paused: its pops reserve nothing (for _other: paused topics among the rest; cluster-wide)"
    );
    describe_gauge!(
        name::QUEUE_TOPICS,
        "Delay-queue topics in all (cluster-wide)"
    );
    describe_gauge!(
        name::OVERDUE,
        Unit::Seconds,
        "Age of the earliest firing not yet claimed, per shard, Redis time (cluster-wide)"
    );
    describe_gauge!(
        name::REDIS_MEMORY,
        "used_memory / maxmemory per Redis master, 0 without maxmemory (cluster-wide)"
    );
}

/// Longest a refresh of [`ClusterFigures`] may take: a scrape answers with the figures it
/// has rather than wait on a slow Redis.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The cluster-wide figures `/metrics` reports and `/readyz` looks at, read from Redis on
/// demand and at most once per `metrics.min_interval` (every scrape in between gets the last
/// figures): so the cost follows the scrape interval, not the number of scrapers, and a node
/// nobody scrapes reads nothing. Every node reads the same keys, so every node reports the
/// same values.
pub struct ClusterFigures {
    client: Client,
    queue: Queue,
    min_interval: Duration,
    state: tokio::sync::Mutex<Sampling>,
    memory: tokio::sync::Mutex<Option<(Instant, Vec<ServerMemory>)>>,
}

struct Sampling {
    last: Option<Instant>,
    topics: TopicSampler,
}

impl std::fmt::Debug for ClusterFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterFigures")
            .field("min_interval", &self.min_interval)
            .finish()
    }
}

impl ClusterFigures {
    /// Figures of the keyfire data behind `store` (and its `queue`), as `settings` bound them.
    pub fn new(client: Client, queue: Queue, settings: &MetricsSettings) -> Self {
        Self {
            client,
            queue,
            min_interval: settings.min_interval,
            state: tokio::sync::Mutex::new(Sampling {
                last: None,
                topics: TopicSampler::new(settings.max_topics),
            }),
            memory: tokio::sync::Mutex::new(None),
        }
    }

    /// Read the figures into the metrics' gauges and counters, unless they were read within
    /// `min_interval`. A failed read is logged and leaves the last figures in place (it is
    /// tried again at the next scrape past the interval).
    pub async fn refresh(&self) {
        let mut state = self.state.lock().await;
        if state.last.is_some_and(|t| t.elapsed() < self.min_interval) {
            return;
        }
        state.last = Some(Instant::now());
        let read = async {
            let sample = state.topics.read(&self.queue).await?;
            let (now, heads) = self.client.due_heads().await?;
            Ok::<_, keyfire::Error>((sample, now, heads))
        };
        match tokio::time::timeout(READ_TIMEOUT, read).await {
            Ok(Ok((sample, now, heads))) => {
                for t in sample.named.iter().chain(&sample.other) {
                    record_topic(t);
                }
                for t in sample.dropped {
                    record_topic(&TopicStats {
                        topic: t,
                        ..TopicStats::default()
                    });
                }
                metrics::gauge!(name::QUEUE_TOPICS).set(sample.topics as f64);
                for (shard, head) in heads.into_iter().enumerate() {
                    let overdue = head.map_or(0, |at| (now - at).max(0));
                    metrics::gauge!(name::OVERDUE, "shard" => shard.to_string())
                        .set(overdue as f64 / 1000.0);
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "metrics: reading the queue and due sets failed")
            }
            Err(_) => tracing::warn!(
                "metrics: reading the queue and due sets took over {} s",
                READ_TIMEOUT.as_secs()
            ),
        }
        drop(state);
        // Recorded here, not where it is read: `/readyz` may have read it before a recorder
        // was installed.
        match self.memory().await {
            Ok(servers) => {
                for s in servers {
                    metrics::gauge!(name::REDIS_MEMORY, "server" => s.server.clone())
                        .set(s.ratio());
                }
            }
            Err(e) => tracing::warn!(error = %e, "metrics: reading INFO memory failed"),
        }
    }

    /// Each Redis master's memory, read at most once per `min_interval` (`INFO memory`).
    pub async fn memory(&self) -> keyfire::Result<Vec<ServerMemory>> {
        let mut cached = self.memory.lock().await;
        if let Some((at, m)) = cached.as_ref()
            && at.elapsed() < self.min_interval
        {
            return Ok(m.clone());
        }
        let m = match tokio::time::timeout(READ_TIMEOUT, self.client.memory()).await {
            Ok(r) => r?,
            Err(_) => {
                let late = std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer within {} s", READ_TIMEOUT.as_secs()),
                );
                return Err(keyfire::Error::redis_op("INFO memory", late));
            }
        };
        *cached = Some((Instant::now(), m.clone()));
        Ok(m)
    }
}

/// One topic's figures into its series.
fn record_topic(t: &TopicStats) {
    let topic = t.topic.clone();
    for (state, n) in [
        ("delayed", t.delayed),
        ("ready", t.ready),
        ("reserved", t.reserved),
        ("dead", t.dead),
    ] {
        metrics::gauge!(name::QUEUE_TASKS, "topic" => topic.clone(), "state" => state)
            .set(n as f64);
    }
    metrics::gauge!(name::QUEUE_OLDEST_READY, "topic" => topic.clone())
        .set(t.oldest_ready_ms.unwrap_or(0) as f64 / 1000.0);
    metrics::gauge!(name::QUEUE_PAUSED, "topic" => topic.clone()).set(t.paused as f64);
    for (metric, n) in [
        (name::QUEUE_ADDED, t.added),
        (name::QUEUE_DELIVERED, t.delivered),
        (name::QUEUE_REDELIVERED, t.redelivered),
        (name::QUEUE_FINISHED, t.finished),
        (name::QUEUE_DEAD, t.dead_total),
    ] {
        metrics::counter!(metric, "topic" => topic.clone()).absolute(n);
    }
}
