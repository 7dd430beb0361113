//! The Prometheus exporter behind `/metrics`: installed once per process by the server,
//! never by the library.

use std::sync::OnceLock;

use keyfire::metrics::name;
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
    describe_counter!(
        name::DEDUPED,
        "Tasks enqueued with a dedup key within its window: the existing task was returned"
    );
    describe_counter!(
        name::CALLBACKS,
        "Callback attempts: delivered, failed (retried later), given up"
    );
}
