//! `POST /v1/jobs:pause` and `/v1/jobs:resume`: many jobs at once, by handler or id prefix,
//! through the real router.

use axum::http::StatusCode;
use serde_json::json;

use crate::common::Api;

async fn status(api: &Api, id: &str) -> String {
    let a = api.get(&format!("/v1/jobs/{id}")).await;
    assert_eq!(a.status, StatusCode::OK, "{id}: {:#}", a.body);
    a.body["status"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn jobs_pause_and_resume_by_prefix_and_handler() {
    let api = Api::new().await;
    for (id, handler) in [
        ("billing-a", "noop"),
        ("billing-b", "log"),
        ("billing", "noop"),
        ("mail-1", "noop"),
    ] {
        let a = api
            .put(
                &format!("/v1/jobs/{id}"),
                json!({"every": "1h", "handler": handler}),
            )
            .await;
        assert!(a.status.is_success(), "{id}: {:#}", a.body);
    }
    // A job named like the route's verb stays reachable: the bulk routes are beside /v1/jobs.
    let a = api
        .put("/v1/jobs/pause", json!({"every": "1h", "handler": "log"}))
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
    assert_eq!(status(&api, "pause").await, "active");

    let a = api
        .post("/v1/jobs:pause", Some(json!({"id_prefix": "billing-"})))
        .await;
    assert_eq!(a.status, StatusCode::OK, "{:#}", a.body);
    assert_eq!(a.body, json!({"matched": 2, "changed": 2}));
    for (id, want) in [
        ("billing-a", "paused"),
        ("billing-b", "paused"),
        ("billing", "active"),
        ("mail-1", "active"),
    ] {
        assert_eq!(status(&api, id).await, want, "{id}");
    }

    // By handler: noop is billing-a (paused), billing and mail-1 (active).
    let a = api
        .post("/v1/jobs:pause", Some(json!({"handler": "noop"})))
        .await;
    assert_eq!(a.body, json!({"matched": 3, "changed": 2}), "{:#}", a.body);
    let a = api
        .post("/v1/jobs:resume", Some(json!({"handler": "noop"})))
        .await;
    assert_eq!(a.status, StatusCode::OK, "{:#}", a.body);
    assert_eq!(a.body, json!({"matched": 3, "changed": 3}));
    assert_eq!(
        status(&api, "billing-b").await,
        "paused",
        "its handler is log"
    );
    for id in ["billing-a", "billing", "mail-1"] {
        assert_eq!(status(&api, id).await, "active", "{id}");
    }
}

/// Neither or both selectors, an empty one, one no id can start with, an unknown field:
/// 422 naming the field, and nothing written.
#[tokio::test]
async fn a_bad_selection_is_refused_by_field_and_changes_nothing() {
    let api = Api::new().await;
    let a = api
        .put(
            "/v1/jobs/billing-a",
            json!({"every": "1h", "handler": "noop"}),
        )
        .await;
    assert!(a.status.is_success());
    let before = api.snapshot().await;
    for route in ["/v1/jobs:pause", "/v1/jobs:resume"] {
        for (body, field) in [
            (json!({}), "handler"),
            (json!({"handler": "noop", "id_prefix": "b"}), "id_prefix"),
            (json!({"id_prefix": ""}), "id_prefix"),
            (json!({"id_prefix": "a:b"}), "id_prefix"),
            (json!({"handler": ""}), "handler"),
            (json!({"handler": "x".repeat(201)}), "handler"),
            (json!({"prefix": "billing-"}), "prefix"),
            (json!({"handler": null, "id_prefix": "b"}), "handler"),
            (json!({"handler": "noop", "id_prefix": null}), "id_prefix"),
        ] {
            let a = api.post(route, Some(body.clone())).await;
            a.assert_error(422, "invalid");
            assert_eq!(a.field(), field, "{route} {body}: {:#}", a.body);
        }
    }
    assert_eq!(api.snapshot().await, before);
    assert_eq!(status(&api, "billing-a").await, "active");
}
