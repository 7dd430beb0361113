//! Malformed JSON, huge bodies, bad cron strings and unknown zones thrown at the
//! API: never a 5xx, and a refused request writes nothing.

use axum::http::Method;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::json;

use crate::common::Api;

#[test]
fn random_input_gets_4xx_and_writes_nothing() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = rt.block_on(Api::with(|s| s.api.max_body_bytes = 4096));
    rt.block_on(api.put("/v1/jobs/base", json!({"every": "1h", "handler": "log"})));
    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });

    // Arbitrary bytes (sometimes past the body limit) as a job or a task.
    let bodies = (
        proptest::collection::vec(any::<u8>(), 0..6000),
        any::<bool>(),
    );
    runner
        .run(&bodies, |(bytes, task)| {
            rt.block_on(async {
                let before = api.snapshot().await;
                let (m, uri) = if task {
                    (Method::POST, "/v1/tasks")
                } else {
                    (Method::PUT, "/v1/jobs/fz")
                };
                let a = api.raw(m, uri, bytes).await;
                prop_assert!(a.status.is_client_error(), "{} {:#}", a.status, a.body);
                prop_assert_eq!(api.snapshot().await, before);
                Ok(())
            })
        })
        .unwrap();

    // Well-formed JSON with random cron expressions and zones: 2xx or 422, never 5xx.
    let specs = ("[ -~]{0,40}", "[ -~]{0,30}");
    runner
        .run(&specs, |(cron, tz)| {
            rt.block_on(async {
                let before = api.snapshot().await;
                let a = api
                    .put(
                        "/v1/jobs/fz",
                        json!({"cron": cron, "tz": tz, "handler": "log"}),
                    )
                    .await;
                prop_assert!(!a.status.is_server_error(), "{} {:#}", a.status, a.body);
                if a.status.is_client_error() {
                    prop_assert_eq!(a.status.as_u16(), 422);
                    prop_assert!(["cron", "tz"].contains(&a.field()), "{:#}", a.body);
                    prop_assert_eq!(api.snapshot().await, before);
                } else {
                    api.delete("/v1/jobs/fz").await;
                }
                Ok(())
            })
        })
        .unwrap();
}
