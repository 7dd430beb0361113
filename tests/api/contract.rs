//! What the contract tests (Schemathesis against a node, .ci/schemathesis.sh) found the server
//! doing against its own document, each fixed in the server: the answers pinned here.

use axum::http::StatusCode;
use serde_json::json;

use crate::common::Api;

/// `at` and `after` left null are not given, as every other optional field: the task runs at
/// once (the schema says null; the server took null for both as "no schedule" and refused).
#[tokio::test]
async fn a_task_with_null_instants_runs_at_once() {
    let api = Api::new().await;
    for body in [
        json!({"handler": "log", "at": null, "after": null}),
        json!({"handler": "log", "at": null}),
        json!({"handler": "log", "after": null}),
    ] {
        let a = api.post("/v1/tasks", Some(body.clone())).await;
        assert_eq!(a.status, StatusCode::CREATED, "{body}: {:#}", a.body);
        assert!(a.body["spec"]["at"].is_string(), "{:#}", a.body);
    }
    let a = api
        .post(
            "/v1/tasks/batch",
            Some(json!({"tasks": [{"handler": "log", "at": null, "after": null}]})),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
    // Both given is still refused, naming the second.
    let a = api
        .post(
            "/v1/tasks",
            Some(json!({"handler": "log", "at": "2030-01-01T00:00:00Z", "after": "1m"})),
        )
        .await;
    a.assert_error(422, "invalid");
    assert_eq!(a.field(), "after");
}

/// An add with an id that another topic holds added nothing: it says so (409) instead of
/// answering the path's topic, where no such task is. The same id in its own topic is still
/// an idempotent add.
#[tokio::test]
async fn an_id_held_by_another_topic_is_a_conflict() {
    let api = Api::new().await;
    let body = || Some(json!({"id": "shared-id", "payload": [1, 2]}));
    let add = |path: &'static str| api.post(path, body());
    let a = add("/v1/topics/first/tasks").await;
    assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
    assert_eq!(a.body["topic"], "first");
    let again = add("/v1/topics/first/tasks").await;
    assert_eq!(again.status, StatusCode::CREATED, "{:#}", again.body);
    let other = add("/v1/topics/second/tasks").await;
    other.assert_error(409, "conflict");
    assert_eq!(other.field(), "id");
    assert!(
        other.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("'first'"),
        "{:#}",
        other.body
    );
    // Nothing was added to the second topic.
    let t = api.get("/v1/topics/second/tasks/shared-id").await;
    t.assert_error(404, "not_found");
    let t = api.get("/v1/topics/first/tasks/shared-id").await;
    assert_eq!(t.status, StatusCode::OK, "{:#}", t.body);
    // Any JSON value is a payload, shown back as it was given.
    assert_eq!(t.body["payload"], json!([1, 2]));
}

/// A pop answers one task, or with `max` a list: the two shapes the document gives.
#[tokio::test]
async fn a_pop_answers_a_task_or_a_list() {
    let api = Api::new().await;
    for payload in [json!(null), json!("text"), json!(3)] {
        let a = api
            .post("/v1/topics/shapes/tasks", Some(json!({"payload": payload})))
            .await;
        assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
    }
    let one = api.post("/v1/topics/shapes/pop", None).await;
    assert_eq!(one.status, StatusCode::OK, "{:#}", one.body);
    assert!(one.body["id"].is_string() && one.body.get("tasks").is_none());
    let many = api.post("/v1/topics/shapes/pop?max=10", None).await;
    assert_eq!(many.status, StatusCode::OK, "{:#}", many.body);
    assert_eq!(many.body["tasks"].as_array().unwrap().len(), 2);
    let none = api.post("/v1/topics/shapes/pop?max=10", None).await;
    assert_eq!(none.body, json!({"tasks": []}));
    let empty = api.post("/v1/topics/shapes/pop", None).await;
    assert_eq!(empty.status, StatusCode::NO_CONTENT);
}
