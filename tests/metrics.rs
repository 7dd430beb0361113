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

use support::World;

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
    for n in nodes {
        n.shutdown().await;
    }
}
