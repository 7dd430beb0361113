//! Priorities and debounce over REST: a topic task's `priority` orders pops; a `dedup` with
//! `on_duplicate` replaces or extends the pending task (topic or one-shot) and the answer says
//! which; bad values are 422 naming the field, nothing written.

use axum::http::StatusCode;
use serde_json::json;

use crate::common::Api;

#[tokio::test]
async fn priorities_order_pops_and_bad_ones_are_refused_by_name() {
    let api = Api::new().await;
    for (i, p) in [0, 9, 3, 9].into_iter().enumerate() {
        let a = api
            .post(
                "/v1/topics/pri/tasks",
                Some(json!({"payload": i, "priority": p})),
            )
            .await;
        assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
    }
    let p = api.post("/v1/topics/pri/pop?max=10", None).await;
    assert_eq!(p.status, StatusCode::OK, "{:#}", p.body);
    let got: Vec<(u64, u64)> = p.body["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["priority"].as_u64().unwrap(),
                t["payload"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, vec![(9, 1), (9, 3), (3, 2), (0, 0)]);

    let before = api.snapshot().await;
    for bad in [json!(10), json!(-1), json!("high")] {
        let a = api
            .post(
                "/v1/topics/pri/tasks",
                Some(json!({"payload": 1, "priority": bad})),
            )
            .await;
        a.assert_error(422, "invalid");
        assert_eq!(a.field(), "priority", "{:#}", a.body);
    }
    assert_eq!(
        api.snapshot().await,
        before,
        "a refused add wrote something"
    );
}

#[tokio::test]
async fn a_topic_duplicate_replaces_the_pending_task_and_says_so() {
    let api = Api::new().await;
    let body = |v: u32, on: &str| json!({"payload": {"v": v}, "dedup": {"key": "digest:7", "window": "1h", "on_duplicate": on}});
    let first = api
        .post("/v1/topics/d/tasks", Some(body(1, "replace")))
        .await;
    assert_eq!(first.status, StatusCode::CREATED, "{:#}", first.body);
    assert!(first.body.get("deduplicated").is_none(), "{:#}", first.body);
    let id = first.body["id"].as_str().unwrap().to_string();
    let dup = api
        .post("/v1/topics/d/tasks", Some(body(2, "replace")))
        .await;
    assert_eq!(dup.status, StatusCode::OK, "{:#}", dup.body);
    assert_eq!(dup.body["id"], id.as_str());
    assert_eq!(dup.body["deduplicated"], "replaced");
    let kept = api.post("/v1/topics/d/tasks", Some(body(3, "keep"))).await;
    assert_eq!(kept.body["deduplicated"], "kept", "{:#}", kept.body);
    let t = api.get(&format!("/v1/topics/d/tasks/{id}")).await;
    assert_eq!(t.body["payload"], json!({"v": 2}), "{:#}", t.body);

    let before = api.snapshot().await;
    for (body, field) in [
        (body(4, "merge"), "dedup.on_duplicate"),
        (
            json!({"payload": 1, "id": "mine", "dedup": {"key": "k", "window": "1m"}}),
            "id",
        ),
        (
            json!({"payload": 1, "dedup": {"key": "k", "window": "0s"}}),
            "dedup.window",
        ),
    ] {
        let a = api.post("/v1/topics/d/tasks", Some(body)).await;
        a.assert_error(422, "invalid");
        assert_eq!(a.field(), field, "{:#}", a.body);
    }
    assert_eq!(
        api.snapshot().await,
        before,
        "a refused add wrote something"
    );
}

#[tokio::test]
async fn a_one_shot_duplicate_extends_the_pending_task_and_says_so() {
    let api = Api::new().await;
    let body = |after: &str, on: &str| {
        json!({"handler": "log", "after": after, "params": {"after": after},
               "dedup": {"key": "digest:7", "window": "1h", "on_duplicate": on}})
    };
    let first = api.post("/v1/tasks", Some(body("10m", "extend"))).await;
    assert_eq!(first.status, StatusCode::CREATED, "{:#}", first.body);
    let id = first.body["id"].as_str().unwrap().to_string();
    let at0 = first.body["spec"]["at"].as_str().unwrap().to_string();
    let dup = api.post("/v1/tasks", Some(body("20m", "extend"))).await;
    assert_eq!(dup.status, StatusCode::OK, "{:#}", dup.body);
    assert_eq!(dup.body["id"], id.as_str());
    assert_eq!(dup.body["duplicate"], true);
    assert_eq!(dup.body["deduplicated"], "extended");
    let at1 = dup.body["spec"]["at"].as_str().unwrap().to_string();
    assert!(at1 > at0, "{at0} then {at1}");
    assert_eq!(
        dup.body["spec"]["params"],
        json!({"after": "10m"}),
        "extend keeps the params"
    );
    let both = api
        .post("/v1/tasks", Some(body("1m", "replace_extend")))
        .await;
    assert_eq!(both.body["deduplicated"], "replaced", "{:#}", both.body);
    assert_eq!(both.body["spec"]["params"], json!({"after": "1m"}));
    assert_eq!(
        both.body["spec"]["at"],
        at1.as_str(),
        "never brought forward"
    );

    let before = api.snapshot().await;
    let a = api.post("/v1/tasks", Some(body("1m", "merge"))).await;
    a.assert_error(422, "invalid");
    assert_eq!(a.field(), "dedup.on_duplicate", "{:#}", a.body);
    assert_eq!(
        api.snapshot().await,
        before,
        "a refused enqueue wrote something"
    );
}
