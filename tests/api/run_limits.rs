//! Backfill and run limits over REST, through the real router: `POST /v1/jobs/{id}/backfill`
//! answers what it queued and refuses bad input naming the field; `max_runs` and
//! `pause_after_failures` are validated with the field named and shown by `GET /v1/jobs/{id}`.

use axum::http::StatusCode;
use serde_json::json;

use crate::common::Api;

#[tokio::test]
async fn backfill_queues_a_past_range_once_and_names_bad_fields() {
    let api = Api::new().await;
    let a = api
        .put(
            "/v1/jobs/yearly",
            json!({"cron": "0 0 1 1 *", "handler": "noop"}),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
    let range = json!({"from": "2020-06-01T00:00:00Z", "to": "2023-06-01T00:00:00Z", "rate": 50});
    let a = api
        .post("/v1/jobs/yearly/backfill", Some(range.clone()))
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{:#}", a.body);
    assert_eq!(
        (
            &a.body["job_id"],
            &a.body["instants"],
            &a.body["scheduled"],
            &a.body["skipped"]
        ),
        (&json!("yearly"), &json!(3), &json!(3), &json!(0))
    );
    assert!(a.body["first_at"].is_string() && a.body["last_at"].is_string());
    let a = api.post("/v1/jobs/yearly/backfill", Some(range)).await;
    assert_eq!(
        (&a.body["scheduled"], &a.body["skipped"]),
        (&json!(0), &json!(3)),
        "{:#}",
        a.body
    );

    for (body, field) in [
        (
            json!({"from": "2023-01-01T00:00:00Z", "to": "2020-01-01T00:00:00Z"}),
            "to",
        ),
        (
            json!({"from": "2023-01-01T00:00:00Z", "to": "2999-01-01T00:00:00Z"}),
            "to",
        ),
        (
            json!({"from": "2020-01-01T00:00:00Z", "to": "2023-01-01T00:00:00Z", "rate": 0}),
            "rate",
        ),
        (
            json!({"from": "2020-01-01T00:00:00Z", "to": "2023-01-01T00:00:00Z", "rate": 500}),
            "rate",
        ),
        (
            json!({"from": "yesterday", "to": "2023-01-01T00:00:00Z"}),
            "from",
        ),
        (
            json!({"from": "2020-01-01T00:00:00Z", "to": "2023-01-01T00:00:00Z", "speed": 1}),
            "speed",
        ),
    ] {
        let a = api
            .post("/v1/jobs/yearly/backfill", Some(body.clone()))
            .await;
        assert_eq!(
            a.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body}: {:#}",
            a.body
        );
        assert_eq!(a.body["error"]["field"], field, "{body}: {:#}", a.body);
    }
    // Every second for an hour and more: past 10,000 instants.
    api.put(
        "/v1/jobs/secondly",
        json!({"cron": "* * * * * *", "handler": "noop"}),
    )
    .await;
    let a = api
        .post(
            "/v1/jobs/secondly/backfill",
            Some(json!({"from": "2020-01-01T00:00:00Z", "to": "2020-01-01T03:00:00Z"})),
        )
        .await;
    assert_eq!(a.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", a.body);
    assert_eq!(a.body["error"]["field"], "to");
    let a = api
        .post(
            "/v1/jobs/nope/backfill",
            Some(json!({"from": "2020-01-01T00:00:00Z", "to": "2020-01-02T00:00:00Z"})),
        )
        .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND, "{:#}", a.body);
}

#[tokio::test]
async fn run_limits_are_validated_and_shown() {
    let api = Api::new().await;
    for (body, field) in [
        (
            json!({"every": "1m", "handler": "noop", "max_runs": 0}),
            "max_runs",
        ),
        (
            json!({"every": "1m", "handler": "noop", "pause_after_failures": 0}),
            "pause_after_failures",
        ),
        (
            json!({"after": "1m", "handler": "noop", "max_runs": 2}),
            "max_runs",
        ),
    ] {
        let a = api.put("/v1/jobs/limited", body.clone()).await;
        assert_eq!(
            a.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body}: {:#}",
            a.body
        );
        assert_eq!(a.body["error"]["field"], field, "{body}: {:#}", a.body);
    }
    let a = api
        .put(
            "/v1/jobs/limited",
            json!({"every": "1h", "handler": "noop", "max_runs": 3, "pause_after_failures": 2}),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
    assert_eq!(
        a.body["run_limits"],
        json!({"succeeded": 0, "failure_streak": 0})
    );
    assert_eq!(a.body["spec"]["max_runs"], 3);
    // A job without run limits shows none.
    let a = api
        .put("/v1/jobs/plain", json!({"every": "1h", "handler": "noop"}))
        .await;
    assert!(a.body.get("run_limits").is_none(), "{:#}", a.body);
}
