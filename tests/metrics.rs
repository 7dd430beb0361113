//! `/metrics` after known activity. Its own test binary, because the
//! Prometheus recorder is global to a process.

#[path = "support/mod.rs"]
mod support;

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use keyfire::JobSpec;
use keyfire::job::RetrySpec;
use keyfire_server::api::{ApiState, router};
use serde_json::json;
use tower::ServiceExt;

use support::{World, wait};

/// The tests share the process's recorder, and some gauges carry no label that tells their
/// Redis apart (`shard`): one test at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Sum of the samples of `metric` (the full sample name, e.g. `x_bucket`) whose labels
/// include every `(label, value)` of `want`.
fn sum(text: &str, metric: &str, want: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            (name == metric
                && want
                    .iter()
                    .all(|(k, v)| labels.contains(&format!("{k}=\"{v}\""))))
            .then(|| value.parse::<f64>().ok())
            .flatten()
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_match_known_activity() {
    let _one = ONE_AT_A_TIME.lock().await;
    // What `keyfire serve` does first: install the server's recorder.
    keyfire_server::metrics::handle().expect("no other recorder in this test binary");
    let w = World::new().await;
    let nodes = [w.node("m1").await, w.node("m2").await];
    let client = w.client().await;
    // 20 tasks that succeed; one that fails twice and lands in the dead letters.
    let ok: Vec<JobSpec> = (0..20)
        .map(|i| JobSpec::after(format!("ok{i}"), "200ms", "rec"))
        .collect();
    client.enqueue_many(ok).await.unwrap();
    client
        .enqueue(
            JobSpec::after("bad", "0s", "flaky")
                .params(json!({"ok_at": 9}))
                .retry(RetrySpec {
                    max_attempts: Some(2),
                    backoff: Some("fixed".into()),
                    interval: Some("100ms".into()),
                    ..Default::default()
                }),
        )
        .await
        .unwrap();
    // The same dedup key three times: one task, two duplicates.
    for _ in 0..3 {
        client
            .enqueue(
                JobSpec::after("", "1h", "rec").dedup(keyfire::job::DedupSpec::key("once", "10m")),
            )
            .await
            .unwrap();
    }
    w.recorder.wait_count(22, Duration::from_secs(10)).await;
    w.wait_idle(Duration::from_secs(5)).await;

    let app = router(ApiState::new(client, &w.settings));
    let resp = app
        .oneshot(Request::get("/metrics").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ctype.starts_with("text/plain"), "{ctype}");
    let text = String::from_utf8(
        resp.into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap();

    let both = |metric: &str, labels: &[(&str, &str)]| {
        ["m1", "m2"]
            .iter()
            .map(|n| {
                let mut l = labels.to_vec();
                l.push(("node", n));
                sum(&text, metric, &l)
            })
            .sum::<f64>()
    };
    assert_eq!(
        both(
            "keyfire_runs_total",
            &[("handler", "rec"), ("outcome", "ok")]
        ),
        20.0,
        "{text}"
    );
    assert_eq!(
        both(
            "keyfire_runs_total",
            &[("handler", "flaky"), ("outcome", "failed")]
        ),
        2.0
    );
    assert_eq!(both("keyfire_retries_total", &[]), 1.0);
    assert_eq!(both("keyfire_dead_letters_total", &[]), 1.0);
    assert_eq!(
        both("keyfire_firings_claimed_total", &[("kind", "scheduled")]),
        21.0
    );
    assert_eq!(
        both("keyfire_firings_claimed_total", &[("kind", "retry")]),
        1.0
    );
    // Histograms count one sample per scheduled claim and per finished run.
    assert_eq!(both("keyfire_firing_lateness_seconds_count", &[]), 21.0);
    assert_eq!(both("keyfire_run_duration_seconds_count", &[]), 22.0);
    let le_1s = both("keyfire_firing_lateness_seconds_bucket", &[("le", "1")]);
    assert_eq!(le_1s, 21.0, "a firing was claimed more than 1 s late");
    assert_eq!(sum(&text, "keyfire_tasks_deduplicated_total", &[]), 2.0);
    assert_eq!(
        both("keyfire_live_nodes", &[]),
        4.0,
        "each node sees two live nodes"
    );
    // Each node's heartbeat sets its gauge of outcomes not recorded yet.
    for n in ["m1", "m2"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("keyfire_outcomes_unrecorded{")
                    && l.contains(&format!("node=\"{n}\""))),
            "no keyfire_outcomes_unrecorded for {n}: {text}"
        );
    }
    for n in nodes {
        n.shutdown().await;
    }
}

/// GET /metrics through `app`, as text.
async fn scrape(app: &axum::Router) -> String {
    let resp = app
        .clone()
        .oneshot(Request::get("/metrics").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// The one sample of `metric` with these labels (panics when there is none).
fn one(text: &str, metric: &str, want: &[(&str, &str)]) -> f64 {
    let n = text
        .lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")) || l.starts_with(&format!("{metric} ")))
        .filter(|l| {
            want.iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .count();
    assert_eq!(n, 1, "{n} samples of {metric} {want:?} in:\n{text}");
    sum(text, metric, want)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn queue_overdue_and_memory_figures_are_read_from_redis() {
    use keyfire::queue::NewTask;
    let _one = ONE_AT_A_TIME.lock().await;
    keyfire_server::metrics::handle().expect("no other recorder in this test binary");
    let mut w = World::new().await;
    // Two topics with series of their own; the others summed as `_other`.
    w.settings.metrics.max_topics = 2;
    w.settings.metrics.min_interval = Duration::from_millis(100);
    let client = w.client().await;
    let queue = w.queue().await;
    let app = router(ApiState::new(w.client().await, &w.settings));

    // No node runs: a firing due now stays unclaimed, so it grows overdue.
    client
        .enqueue(JobSpec::after("late", "0s", "rec"))
        .await
        .unwrap();
    let task = |topic: &str, ttr_ms: u64, max: u32| NewTask {
        ttr: Duration::from_millis(ttr_ms),
        max_deliveries: max,
        priority: 0,
        dedup: None,
        ..NewTask::new(topic, json!({"n": 1}))
    };
    // mq-a: 4 ready, 2 popped (reserved), 1 of them finished.
    for _ in 0..4 {
        queue.add_task(task("mq-a", 60_000, 5)).await.unwrap();
    }
    let popped = queue.pop_many("mq-a", 2, Duration::ZERO).await.unwrap();
    assert_eq!(popped.len(), 2);
    queue.finish(&popped[0].id, &popped[0].token).await.unwrap();
    // mq-b: one task redelivered once, one dead (one delivery allowed), by short reservations.
    queue.add_task(task("mq-b", 50, 2)).await.unwrap();
    queue.add_task(task("mq-b", 50, 1)).await.unwrap();
    assert_eq!(
        queue
            .pop_many("mq-b", 2, Duration::ZERO)
            .await
            .unwrap()
            .len(),
        2
    );
    // mq-c and mq-d: past the cap, summed.
    queue.add_task(task("mq-c", 60_000, 5)).await.unwrap();
    queue.add_task(task("mq-d", 60_000, 5)).await.unwrap();
    queue.add_task(task("mq-d", 60_000, 5)).await.unwrap();
    // mq-a is paused, and mq-c past the cap.
    queue.pause("mq-a").await.unwrap();
    queue.pause("mq-c").await.unwrap();
    // 1.2 s on Redis's clock (the one the figures' ages are read by) past every add: mq-b's
    // reservations run out, and the ages below are at least that.
    let added = w.redis_ms().await;
    w.until_redis_ms(added + 1_200).await;
    let requeued = queue.requeue_expired("mq-b").await.unwrap();
    assert_eq!((requeued.requeued, requeued.dead), (1, 1));

    let text = scrape(&app).await;
    let tasks = |topic: &str, state: &str| {
        one(
            &text,
            "keyfire_queue_tasks",
            &[("topic", topic), ("state", state)],
        )
    };
    assert_eq!(tasks("mq-a", "ready"), 2.0);
    assert_eq!(tasks("mq-a", "reserved"), 1.0);
    assert_eq!(tasks("mq-a", "delayed"), 0.0);
    assert_eq!(tasks("mq-b", "ready"), 1.0);
    assert_eq!(tasks("mq-b", "dead"), 1.0);
    assert_eq!(tasks("_other", "ready"), 3.0, "mq-c and mq-d summed");
    assert!(!text.contains("topic=\"mq-c\""), "past the cap: {text}");
    let counter = |metric: &str, topic: &str| one(&text, metric, &[("topic", topic)]);
    assert_eq!(counter("keyfire_queue_added_total", "mq-a"), 4.0);
    assert_eq!(counter("keyfire_queue_delivered_total", "mq-a"), 2.0);
    assert_eq!(counter("keyfire_queue_finished_total", "mq-a"), 1.0);
    assert_eq!(counter("keyfire_queue_redelivered_total", "mq-b"), 1.0);
    assert_eq!(counter("keyfire_queue_dead_total", "mq-b"), 1.0);
    assert_eq!(counter("keyfire_queue_added_total", "_other"), 3.0);
    assert_eq!(one(&text, "keyfire_queue_topics", &[]), 4.0);
    assert_eq!(counter("keyfire_queue_paused", "mq-a"), 1.0);
    assert_eq!(counter("keyfire_queue_paused", "mq-b"), 0.0);
    assert_eq!(
        counter("keyfire_queue_paused", "_other"),
        1.0,
        "mq-c of the rest"
    );
    queue.resume("mq-a").await.unwrap();
    // The oldest ready task of mq-a was added before the 1.2 s wait; mq-b's went back to
    // ready just now.
    let oldest = counter("keyfire_queue_oldest_ready_seconds", "mq-a");
    assert!((1.2..30.0).contains(&oldest), "{oldest}");
    assert!(counter("keyfire_queue_oldest_ready_seconds", "mq-b") < 1.0);
    let overdue = one(
        &text,
        "keyfire_oldest_overdue_firing_seconds",
        &[("shard", "0")],
    );
    assert!((1.2..30.0).contains(&overdue), "{overdue}");
    let server = format!("127.0.0.1:{}", w.redis.port());
    assert_eq!(
        one(
            &text,
            "keyfire_redis_memory_used_ratio",
            &[("server", &server)]
        ),
        0.0,
        "no maxmemory: 0"
    );

    // Within `min_interval`, a scrape reads nothing: the figures stay as last read.
    let now_ready = |text: &str| {
        one(
            text,
            "keyfire_queue_tasks",
            &[("topic", "mq-a"), ("state", "ready")],
        )
    };
    let mut slow = w.settings.clone();
    slow.metrics.min_interval = Duration::from_secs(3600);
    let slow = router(ApiState::new(w.client().await, &slow));
    assert_eq!(now_ready(&scrape(&slow).await), 2.0);
    assert_eq!(
        queue
            .pop_many("mq-a", 2, Duration::ZERO)
            .await
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        now_ready(&scrape(&slow).await),
        2.0,
        "read again within the interval"
    );
    // Past `min_interval` (100 ms): time passing is what this part is about.
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(
        now_ready(&scrape(&app).await),
        0.0,
        "read again past the interval"
    );

    // A node claims the late firing: nothing is overdue any more.
    // A node id of its own: the other test counts the runs of m1 and m2.
    let node = w.node("figures").await;
    w.recorder.wait_count(1, Duration::from_secs(10)).await;
    wait::until(
        "the figures to show nothing overdue",
        Duration::from_secs(10),
        async || {
            let text = scrape(&app).await;
            let overdue = one(
                &text,
                "keyfire_oldest_overdue_firing_seconds",
                &[("shard", "0")],
            );
            match overdue == 0.0 {
                true => Ok(()),
                false => Err(format!("{overdue} s overdue")),
            }
        },
    )
    .await;
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn topics_past_the_cap_are_summed_over_reads_in_turn() {
    use keyfire::queue::NewTask;
    let _one = ONE_AT_A_TIME.lock().await;
    keyfire_server::metrics::handle().expect("no other recorder in this test binary");
    let mut w = World::new().await;
    // One topic of its own, and 1,100 past the cap: more than one read's share (1,000).
    w.settings.metrics.max_topics = 1;
    w.settings.metrics.min_interval = Duration::from_millis(100);
    let queue = w.queue().await;
    let tasks: Vec<NewTask> = (0..1_101)
        .map(|i| NewTask::new(format!("rot-{i:05}"), json!({"i": i})))
        .collect();
    queue.add_many(tasks).await.unwrap();
    let app = router(ApiState::new(w.client().await, &w.settings));
    let other_ready = |text: &str| {
        one(
            text,
            "keyfire_queue_tasks",
            &[("topic", "_other"), ("state", "ready")],
        )
    };
    let first = scrape(&app).await;
    assert_eq!(
        one(
            &first,
            "keyfire_queue_tasks",
            &[("topic", "rot-00000"), ("state", "ready")]
        ),
        1.0
    );
    assert!(!first.contains("topic=\"rot-00001\""), "past the cap");
    assert_eq!(other_ready(&first), 1_000.0, "the first 1,000 past the cap");
    assert_eq!(one(&first, "keyfire_queue_topics", &[]), 1_101.0);
    // Past `min_interval` (100 ms) before each scrape, so it reads: on purpose, the interval
    // is what is waited for.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let second = scrape(&app).await;
    assert_eq!(other_ready(&second), 1_100.0, "the other 100 read next");
    // A new pass keeps the sums whole.
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(other_ready(&scrape(&app).await), 1_100.0);
}
