//! Lost events and wrong clocks: firings still run exactly once, on time within bounds.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use chrono::DateTime;
use futures::future::try_join_all;
use keyfire::JobSpec;
use keyfire::clock::SkewedClock;
use keyfire_testkit::world::{World, doubles, lateness_summary};

async fn enqueue_spread(w: &World, n: usize, lead_ms: i64, over_ms: i64) -> i64 {
    let client = w.client().await;
    let base = w.redis_ms().await + lead_ms;
    let specs: Vec<JobSpec> = (0..n)
        .map(|i| {
            let at = base + (i as i64 * over_ms / n as i64);
            JobSpec::at(
                format!("t{i}"),
                DateTime::from_timestamp_millis(at).unwrap(),
                "rec",
            )
        })
        .collect();
    for chunk in specs.chunks(100) {
        try_join_all(chunk.iter().map(|s| client.enqueue(s.clone())))
            .await
            .unwrap();
    }
    base
}

fn assert_once_and_bounded(w: &World, n: usize, bound_ms: i64, label: &str) {
    let seen = w.recorder.seen();
    assert_eq!(seen.len(), n, "{label}: runs");
    assert!(
        doubles(&seen).is_empty(),
        "{label}: doubles {:?}",
        doubles(&seen)
    );
    for s in &seen {
        assert!(s.not_early(s.scheduled_ms), "{label}: early run {s:?}");
    }
    let (_, _, max, line) = lateness_summary(&seen);
    eprintln!("{label}: {line}");
    assert!(
        max <= bound_ms,
        "{label}: later than the sweep bound: {line}"
    );
}

/// The subscriber connections are killed over and over while firings are due.
/// Precision timers are off (horizon 0), so only events and the sweeper can claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_subscribers_lose_no_firing() {
    let mut w = World::new().await;
    w.settings.node.timer_horizon = Duration::ZERO;
    let nodes = [w.node("a").await, w.node("b").await, w.node("c").await];
    let n = 600;
    enqueue_spread(&w, n, 1_000, 4_000).await;

    // The fault's pace: a kill every 250 ms while the firings come due.
    let killer = w.kill_subscribers(20, Duration::from_millis(250)).await;
    w.recorder.wait_count(n, Duration::from_secs(30)).await;
    let killed = killer.await.unwrap();
    w.wait_idle(Duration::from_secs(10)).await;

    let s = &w.settings.node;
    let bound = (s.sweep_interval + s.claim_grace).as_millis() as i64 + 500;
    assert_once_and_bounded(&w, n, bound, "acceptance-3a (pubsub killed)");
    let swept: u64 = nodes.iter().map(|n| n.stats().swept.load(Relaxed)).sum();
    let subscribed: u64 = nodes
        .iter()
        .map(|n| n.stats().subscribed.load(Relaxed))
        .sum();
    eprintln!(
        "acceptance-3a: {killed} subscriber connections killed, {subscribed} subscriptions, {swept} firings recovered by the sweeper"
    );
    assert!(killed >= 3, "the test killed no subscriber");
    assert!(subscribed > 3, "nodes did not resubscribe");
    for n in nodes {
        n.shutdown().await;
    }
}

/// Expiry notifications turned off mid-run (and not turned back on).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn notifications_off_mid_run_lose_no_firing() {
    let mut w = World::new().await;
    w.settings.node.timer_horizon = Duration::ZERO;
    w.settings.redis.enable_notifications = false;
    let nodes = [w.node("a").await, w.node("b").await];
    let n = 400;
    let base = enqueue_spread(&w, n, 500, 3_000).await;

    // Turn events off one second into the run.
    w.recorder
        .wait_until(Duration::from_secs(10), "first runs", |s| {
            s.iter().any(|r| r.scheduled_ms >= base + 1_000)
        })
        .await;
    w.redis.config_set("notify-keyspace-events", "").await;
    w.recorder.wait_count(n, Duration::from_secs(30)).await;
    w.wait_idle(Duration::from_secs(10)).await;

    let s = &w.settings.node;
    let bound = (s.sweep_interval + s.claim_grace).as_millis() as i64 + 500;
    assert_once_and_bounded(&w, n, bound, "acceptance-3b (notifications off)");
    let swept: u64 = nodes.iter().map(|n| n.stats().swept.load(Relaxed)).sum();
    assert!(
        swept > 0,
        "the sweeper recovered nothing: were events really off?"
    );
    for n in nodes {
        n.shutdown().await;
    }
}

/// One node's clock an hour ahead, one an hour behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn skewed_clocks_fire_nothing_early_twice_or_never() {
    let w = World::new().await;
    let hour = 3_600_000;
    let ahead = w
        .node_with(
            "ahead",
            w.settings.clone(),
            Some(Arc::new(SkewedClock { skew_ms: hour })),
        )
        .await;
    let behind = w
        .node_with(
            "behind",
            w.settings.clone(),
            Some(Arc::new(SkewedClock { skew_ms: -hour })),
        )
        .await;
    let right = w.node("right").await;
    assert!(
        (ahead.clock_offset_ms() + hour).abs() < 500,
        "offset of the fast node"
    );
    assert!(
        (behind.clock_offset_ms() - hour).abs() < 500,
        "offset of the slow node"
    );

    let client = w.client().await;
    client
        .upsert(JobSpec::cron("tick", "* * * * * *", "rec"))
        .await
        .unwrap();
    let n = 600;
    enqueue_spread(&w, n, 1_000, 3_000).await;
    w.recorder
        .wait_until(Duration::from_secs(30), "all tasks and 5 ticks", |s| {
            s.iter().filter(|r| r.job_id != "tick").count() >= n
                && s.iter().filter(|r| r.job_id == "tick").count() >= 5
        })
        .await;
    client.pause("tick").await.unwrap();
    w.wait_idle(Duration::from_secs(10)).await;

    let seen = w.recorder.seen();
    assert!(doubles(&seen).is_empty(), "doubles {:?}", doubles(&seen));
    for s in &seen {
        assert!(s.not_early(s.scheduled_ms), "early: {s:?}");
    }
    let tasks = seen.iter().filter(|s| s.job_id != "tick").count();
    assert_eq!(tasks, n, "missed tasks");
    let mut ticks: Vec<i64> = seen
        .iter()
        .filter(|s| s.job_id == "tick")
        .map(|s| s.scheduled_ms)
        .collect();
    ticks.sort();
    for pair in ticks.windows(2) {
        assert_eq!(pair[1] - pair[0], 1_000, "tick gap or double: {ticks:?}");
    }
    let (_, _, max, line) = lateness_summary(&seen);
    let per_node: Vec<(String, usize)> = ["ahead", "behind", "right"]
        .iter()
        .map(|n| (n.to_string(), seen.iter().filter(|s| s.node == *n).count()))
        .collect();
    eprintln!("acceptance-4: {line}; runs per node {per_node:?}");
    assert!(max < 2_000, "{line}");
    for n in [ahead, behind, right] {
        n.shutdown().await;
    }
}

/// The sweeper as a step: with expiry events off, no timers and no periodic sweep, a due
/// firing waits until the test runs one sweep, and that sweep claims it exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_sweep_claims_what_events_and_timers_missed() {
    let mut w = World::new().await;
    w.settings.node.timer_horizon = Duration::ZERO;
    w.settings.node.sweep_interval = Duration::from_secs(3_600);
    w.settings.redis.enable_notifications = false;
    let node = w.node("stepped").await;
    w.redis.config_set("notify-keyspace-events", "").await;
    let client = w.client().await;
    client
        .enqueue(JobSpec::after("stepped-task", "100ms", "rec"))
        .await
        .unwrap();
    // Well past its instant: nothing claimed it (no event, no timer, no periodic sweep). That
    // nothing happens while time passes is the point: wall time, on purpose.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(
        w.recorder.seen_of("stepped-task").is_empty(),
        "ran without a sweep: {:?}",
        w.recorder.seen_of("stepped-task")
    );
    node.sweep_once().await.unwrap();
    w.recorder.wait_count(1, Duration::from_secs(10)).await;
    node.sweep_once().await.unwrap();
    w.wait_idle(Duration::from_secs(10)).await;
    assert_eq!(w.recorder.seen_of("stepped-task").len(), 1, "claimed once");
    assert_eq!(node.stats().swept.load(Relaxed), 1, "the sweep took it");
    node.shutdown().await;
}
