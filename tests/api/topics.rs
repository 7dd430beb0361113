//! The delay queue over REST: add, pop (long poll), finish, touch, get, delete, the
//! topic list, and bad input refused with 422 naming the field.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::common::Api;

#[tokio::test]
async fn add_pop_touch_finish_get() {
    let api = Api::new().await;
    let id = api
        .add_task(
            "orders",
            json!({"payload": {"order": 7}, "ttr": "30s", "max_deliveries": 3}),
        )
        .await;
    let t = api.get(&format!("/v1/tasks/{id}")).await;
    assert_eq!(t.status, StatusCode::OK, "{:#}", t.body);
    assert_eq!(t.body["state"], "ready");
    assert_eq!(t.body["deliveries"], 0);
    assert_eq!(t.body["max_deliveries"], 3);
    assert_eq!(t.body["ttr"], "30s");
    assert_eq!(t.body["payload"], json!({"order": 7}));

    let p = api.post("/v1/topics/orders/pop?wait=1s", None).await;
    assert_eq!(p.status, StatusCode::OK, "{:#}", p.body);
    assert_eq!(p.body["id"], id.as_str());
    assert_eq!(p.body["payload"], json!({"order": 7}));
    assert_eq!(p.body["deliveries"], 1);
    let token = p.body["token"].as_str().unwrap().to_string();
    assert!(!token.is_empty());
    assert_eq!(
        api.get(&format!("/v1/tasks/{id}")).await.body["state"],
        "reserved"
    );

    let touched = api
        .post(
            &format!("/v1/tasks/{id}/touch"),
            Some(json!({"token": token, "ttr": "2m"})),
        )
        .await;
    assert_eq!(touched.status, StatusCode::OK, "{:#}", touched.body);
    assert!(touched.body["deadline"].is_string());

    let wrong = api
        .post(
            &format!("/v1/tasks/{id}/finish"),
            Some(json!({"token": "not-the-token"})),
        )
        .await;
    wrong.assert_error(409, "conflict");

    let done = api
        .post(
            &format!("/v1/tasks/{id}/finish"),
            Some(json!({"token": token})),
        )
        .await;
    assert_eq!(done.status, StatusCode::NO_CONTENT, "{:#}", done.body);
    // A retried finish with the same token succeeds.
    let again = api
        .post(
            &format!("/v1/tasks/{id}/finish"),
            Some(json!({"token": token})),
        )
        .await;
    assert_eq!(again.status, StatusCode::NO_CONTENT, "{:#}", again.body);
    let t = api.get(&format!("/v1/tasks/{id}")).await;
    assert_eq!(t.body["state"], "done");
    assert_eq!(t.body["deliveries"], 1);

    let topics = api.get("/v1/topics").await;
    assert_eq!(topics.status, StatusCode::OK);
    let row = &topics.body["topics"][0];
    assert_eq!(row["topic"], "orders");
    assert_eq!(row["added"], 1);
    assert_eq!(row["done"], 1);
    assert_eq!(row["ready"], 0);
    assert_eq!(row["reserved"], 0);
}

#[tokio::test]
async fn a_late_finish_is_refused_after_redelivery() {
    let api = Api::new().await;
    let id = api
        .add_task("jobs", json!({"payload": 1, "ttr": "200ms"}))
        .await;
    let first = api.post("/v1/topics/jobs/pop", None).await;
    assert_eq!(first.status, StatusCode::OK);
    let late = first.body["token"].as_str().unwrap().to_string();
    // The reservation expires; the next pop takes the task back and hands it on.
    let second = api.post("/v1/topics/jobs/pop?wait=3s", None).await;
    assert_eq!(second.status, StatusCode::OK, "{:#}", second.body);
    assert_eq!(second.body["id"], id.as_str());
    assert_eq!(second.body["deliveries"], 2);
    let refused = api
        .post(
            &format!("/v1/tasks/{id}/finish"),
            Some(json!({"token": late})),
        )
        .await;
    refused.assert_error(409, "conflict");
    let touch = api
        .post(
            &format!("/v1/tasks/{id}/touch"),
            Some(json!({"token": late})),
        )
        .await;
    touch.assert_error(409, "conflict");
}

#[tokio::test]
async fn delete_and_not_found() {
    let api = Api::new().await;
    let id = api.add_task("t", json!({"payload": "x"})).await;
    let d = api.delete(&format!("/v1/tasks/{id}")).await;
    assert_eq!(d.status, StatusCode::NO_CONTENT, "{:#}", d.body);
    assert_eq!(
        api.get(&format!("/v1/tasks/{id}")).await.body["state"],
        "deleted"
    );
    // Never delivered.
    assert_eq!(
        api.post("/v1/topics/t/pop", None).await.status,
        StatusCode::NO_CONTENT
    );
    api.delete(&format!("/v1/tasks/{id}"))
        .await
        .assert_error(404, "not_found");
    api.get("/v1/tasks/nope")
        .await
        .assert_error(404, "not_found");
    api.post("/v1/tasks/nope/finish", Some(json!({"token": "x"})))
        .await
        .assert_error(404, "not_found");
}

#[tokio::test]
async fn a_delayed_task_is_ready_after_its_delay() {
    let api = Api::new().await;
    let _node = api.world.queue_node("a").await;
    let id = api
        .add_task("later", json!({"payload": 1, "delay": "700ms"}))
        .await;
    assert_eq!(
        api.get(&format!("/v1/tasks/{id}")).await.body["state"],
        "delayed"
    );
    let topics = api.get("/v1/topics").await;
    assert_eq!(topics.body["topics"][0]["delayed"], 1);
    let p = api.post("/v1/topics/later/pop?wait=5s", None).await;
    assert_eq!(p.status, StatusCode::OK, "{:#}", p.body);
    assert_eq!(p.body["id"], id.as_str());
    let due = chrono::DateTime::parse_from_rfc3339(p.body["due_at"].as_str().unwrap()).unwrap();
    let reserved =
        chrono::DateTime::parse_from_rfc3339(p.body["reserved_at"].as_str().unwrap()).unwrap();
    assert!(reserved >= due, "popped before its instant: {:#}", p.body);
}

/// An empty topic answers 204 promptly after `wait`; a task that becomes ready
/// during the wait is returned at once.
#[tokio::test]
async fn pop_waits_then_answers_promptly() {
    let api = Api::new().await;
    let start = Instant::now();
    let a = api.post("/v1/topics/empty/pop?wait=500ms", None).await;
    let took = start.elapsed();
    assert_eq!(a.status, StatusCode::NO_CONTENT, "{:#}", a.body);
    assert!(a.body.is_null());
    assert!(
        took >= Duration::from_millis(500),
        "returned early: {took:?}"
    );
    assert!(
        took < Duration::from_millis(1500),
        "returned late: {took:?}"
    );

    // Without wait: at once.
    let start = Instant::now();
    let a = api.post("/v1/topics/empty/pop", None).await;
    assert_eq!(a.status, StatusCode::NO_CONTENT);
    assert!(start.elapsed() < Duration::from_millis(300));

    // A task added 300 ms into a 10 s wait is returned at once.
    let router = api.router.clone();
    let popper = tokio::spawn(async move {
        use tower::ServiceExt;
        let req = axum::http::Request::post("/v1/topics/empty/pop?wait=10s")
            .body(axum::body::Body::empty())
            .unwrap();
        let start = Instant::now();
        let resp = router.oneshot(req).await.unwrap();
        (resp.status(), start.elapsed())
    });
    // A sleep, not a wait on `World::blocked_clients`: the API's queue (`Client::queue`)
    // waits between attempts by short polls, not a `BLPOP`, so Redis never shows the pop
    // blocked and nothing tells that it is waiting; 300 ms lets it get there.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let id = api.add_task("empty", json!({"payload": "now"})).await;
    let added_at = Instant::now();
    let (status, took) = popper.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert!(
        took < Duration::from_secs(2),
        "not returned at once: {took:?}"
    );
    assert!(added_at.elapsed() < Duration::from_millis(500));
    assert_eq!(
        api.get(&format!("/v1/tasks/{id}")).await.body["state"],
        "reserved"
    );

    // A delayed task that becomes ready during the wait, too.
    let _node = api.world.queue_node("a").await;
    let id = api
        .add_task("empty", json!({"payload": 2, "delay": "600ms"}))
        .await;
    let start = Instant::now();
    let p = api.post("/v1/topics/empty/pop?wait=10s", None).await;
    let took = start.elapsed();
    assert_eq!(p.status, StatusCode::OK, "{:#}", p.body);
    assert_eq!(p.body["id"], id.as_str());
    assert!(
        took < Duration::from_secs(3),
        "not returned at once: {took:?}"
    );
}

#[tokio::test]
async fn bad_input_is_refused_naming_the_field() {
    let api = Api::with(|s| s.limits.max_params_bytes = 100).await;
    let bad = |topic: &'static str, body: Value, field: &'static str| {
        let api = &api;
        async move {
            let a = api
                .post(&format!("/v1/topics/{topic}/tasks"), Some(body))
                .await;
            a.assert_error(422, "invalid");
            assert_eq!(a.field(), field, "{:#}", a.body);
        }
    };
    bad("a%20b", json!({"payload": 1}), "topic").await;
    bad("a:b", json!({"payload": 1}), "topic").await;
    bad("t", json!({"payload": 1, "ttr": "0s"}), "ttr").await;
    bad("t", json!({"payload": 1, "ttr": "soon"}), "ttr").await;
    bad(
        "t",
        json!({"payload": 1, "max_deliveries": 0}),
        "max_deliveries",
    )
    .await;
    bad("t", json!({"payload": "x".repeat(200)}), "payload").await;
    bad("t", json!({"payload": 1, "delay": "1x"}), "delay").await;
    bad(
        "t",
        json!({"payload": 1, "delay": "1s", "at": "2030-01-01T00:00:00Z"}),
        "at",
    )
    .await;
    bad("t", json!({"payload": 1, "colour": "red"}), "colour").await;
    bad("t", json!({"payload": 1, "id": "a:b"}), "id").await;

    let a = api.post("/v1/topics/a:b/pop", None).await;
    a.assert_error(422, "invalid");
    assert_eq!(a.field(), "topic");
    let a = api.post("/v1/topics/t/pop?wait=forever", None).await;
    a.assert_error(400, "bad_query");
    assert_eq!(a.field(), "wait");
    let a = api.get("/v1/tasks/a:b").await;
    a.assert_error(422, "invalid");
    assert_eq!(a.field(), "id");
    let a = api.delete("/v1/tasks/a:b").await;
    a.assert_error(422, "invalid");
    let a = api
        .post("/v1/tasks/a:b/finish", Some(json!({"token": "x"})))
        .await;
    a.assert_error(422, "invalid");
    let a = api.post("/v1/tasks/x/finish", Some(json!({}))).await;
    a.assert_error(422, "invalid");
    assert_eq!(a.field(), "token");
    let a = api
        .post(
            "/v1/tasks/x/touch",
            Some(json!({"token": "x", "ttr": "0s"})),
        )
        .await;
    a.assert_error(422, "invalid");
    assert_eq!(a.field(), "ttr");
    // Nothing was written.
    assert_eq!(api.get("/v1/topics").await.body["topics"], json!([]));
}

#[tokio::test]
async fn a_delayed_add_without_a_topic_node_is_refused() {
    let api = Api::new().await;
    let a = api
        .post(
            "/v1/topics/t/tasks",
            Some(json!({"payload": 1, "delay": "1m"})),
        )
        .await;
    a.assert_error(409, "conflict");
    assert!(
        a.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("topic")
    );
}

/// `pop?max=N` reserves up to N tasks in one call, each with its own token; a batch finish
/// answers each task, in order.
#[tokio::test]
async fn batch_pop_and_batch_finish() {
    let api = Api::new().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            api.add_task("bulk", json!({"payload": i, "ttr": "30s"}))
                .await,
        );
    }
    let p = api.post("/v1/topics/bulk/pop?max=3&wait=1s", None).await;
    assert_eq!(p.status, StatusCode::OK, "{:#}", p.body);
    let first = p.body["tasks"].as_array().unwrap().clone();
    assert_eq!(first.len(), 3);
    let p = api.post("/v1/topics/bulk/pop?max=10", None).await;
    let second = p.body["tasks"].as_array().unwrap().clone();
    assert_eq!(second.len(), 2);
    let mut tokens: Vec<&str> = first
        .iter()
        .chain(&second)
        .map(|t| t["token"].as_str().unwrap())
        .collect();
    tokens.sort();
    tokens.dedup();
    assert_eq!(tokens.len(), 5, "a token per task");
    // None left: an empty list, not 204.
    let p = api.post("/v1/topics/bulk/pop?max=10", None).await;
    assert_eq!(p.status, StatusCode::OK);
    assert_eq!(p.body["tasks"], json!([]));

    let mut items: Vec<Value> = first
        .iter()
        .chain(&second)
        .map(|t| json!({"id": t["id"], "token": t["token"]}))
        .collect();
    // A well-formed token that is not the task's is refused for that task alone.
    items.push(json!({"id": "unknown", "token": first[0]["token"]}));
    let f = api
        .post("/v1/topics/bulk/finish", Some(json!({ "tasks": items })))
        .await;
    assert_eq!(f.status, StatusCode::OK, "{:#}", f.body);
    let outcomes: Vec<&str> = f.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        ["done", "done", "done", "done", "done", "not_found"]
    );
    for id in &ids {
        assert_eq!(
            api.get(&format!("/v1/tasks/{id}")).await.body["state"],
            "done"
        );
    }
}

/// Bad input of batch pops and finishes: 400 or 422 naming the field, nothing changed.
#[tokio::test]
async fn batch_bad_input_names_the_field() {
    let api = Api::new().await;
    let id = api.add_task("t", json!({"payload": 1})).await;
    for (query, field) in [
        ("max=0", "max"),
        ("max=1001", "max"),
        ("max=lots", "max"),
        ("wait=61s", "wait"),
        ("max=2&wait=2m", "wait"),
    ] {
        let a = api.post(&format!("/v1/topics/t/pop?{query}"), None).await;
        a.assert_error(400, "bad_query");
        assert_eq!(a.field(), field, "{query}");
    }
    assert_eq!(
        api.get(&format!("/v1/tasks/{id}")).await.body["state"],
        "ready",
        "no pop took it"
    );
    let p = api.post("/v1/topics/t/pop", None).await;
    let token = p.body["token"].as_str().unwrap().to_string();
    let api = &api;
    let bad = move |tasks: Value| async move {
        let a = api
            .post("/v1/topics/t/finish", Some(json!({ "tasks": tasks })))
            .await;
        a.assert_error(422, "invalid");
        a.field().to_string()
    };
    assert_eq!(bad(json!([])).await, "tasks");
    assert_eq!(
        bad(json!([{"id": id, "token": token}, {"id": id, "token": "forged"}])).await,
        "tasks[1].token"
    );
    let other = format!("{}.u", "a".repeat(32));
    assert_eq!(
        bad(json!([{"id": id, "token": other}])).await,
        "tasks[0].token"
    );
    assert_eq!(
        bad(json!([{"id": "a:b", "token": token}])).await,
        "tasks[0].id"
    );
    // All or nothing: the good pair of a refused batch was not finished.
    assert_eq!(
        api.get(&format!("/v1/tasks/{id}")).await.body["state"],
        "reserved"
    );
}
