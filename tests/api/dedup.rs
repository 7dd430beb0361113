//! Deduplication on enqueue over REST, and the refusals of bad delivery input (dedup, signing
//! secrets, callback URLs) on the task routes: 422 naming the field, nothing written.

use serde_json::{Value, json};

use crate::common::Api;

fn keyed(key: &str, window: &str) -> Value {
    json!({"after": "1h", "handler": "log", "dedup": {"key": key, "window": window}})
}

/// `POST /v1/tasks` with a dedup key: 201 the first time, then 200 with the same task and
/// `duplicate: true`, nothing created; a task deleted within its window does not hold the
/// key. `GET` shows the dedup declaration and no duplicate flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_task_with_a_dedup_key_answers_the_existing_task() {
    let api = Api::with(|s| s.redis.shards = 3).await;
    let first = api.post("/v1/tasks", Some(keyed("invoice-9", "10m"))).await;
    assert_eq!(first.status.as_u16(), 201, "{:#}", first.body);
    assert!(first.body.get("duplicate").is_none(), "{:#}", first.body);
    let id = first.body["id"].as_str().unwrap().to_string();
    assert_eq!(
        first.body["spec"]["dedup"],
        json!({"key": "invoice-9", "window": "10m"})
    );

    let before = api.snapshot().await;
    for _ in 0..3 {
        let again = api.post("/v1/tasks", Some(keyed("invoice-9", "10m"))).await;
        assert_eq!(again.status.as_u16(), 200, "{:#}", again.body);
        assert_eq!(again.body["id"], id.as_str());
        assert_eq!(again.body["duplicate"], true);
    }
    assert_eq!(api.snapshot().await, before, "a duplicate wrote something");
    let shown = api.get(&format!("/v1/jobs/{id}")).await;
    assert_eq!(shown.body["spec"]["dedup"]["key"], "invoice-9");
    assert!(shown.body.get("duplicate").is_none(), "{:#}", shown.body);

    // By content: the same handler and params answer the same task.
    let content = |n: u32| json!({"handler": "log", "params": {"n": n, "to": "a"}, "dedup": {"content": true, "window": "1h"}});
    let a = api.post("/v1/tasks", Some(content(1))).await;
    assert_eq!(a.status.as_u16(), 201);
    let b = api.post("/v1/tasks", Some(content(1))).await;
    assert_eq!((b.status.as_u16(), &b.body["id"]), (200, &a.body["id"]));
    assert_eq!(
        api.post("/v1/tasks", Some(content(2)))
            .await
            .status
            .as_u16(),
        201
    );

    // The task read back, changed and written by id keeps its dedup declaration and its key.
    let mut spec = api.get(&format!("/v1/jobs/{id}")).await.body["spec"].clone();
    spec["at"] = json!("2099-01-01T00:00:00Z");
    let put = api.put(&format!("/v1/jobs/{id}"), spec.clone()).await;
    assert_eq!(put.status.as_u16(), 200, "{:#}", put.body);
    let again = api.post("/v1/tasks", Some(keyed("invoice-9", "10m"))).await;
    assert_eq!(
        (again.status.as_u16(), &again.body["id"]),
        (200, &json!(id))
    );
    // Another declaration on the write by id is refused, naming the field.
    spec["dedup"]["window"] = json!("20m");
    let put = api.put(&format!("/v1/jobs/{id}"), spec).await;
    put.assert_error(422, "invalid");
    assert_eq!(put.field(), "dedup");

    // Deleted within the window: the key no longer holds.
    assert!(
        api.delete(&format!("/v1/jobs/{id}"))
            .await
            .status
            .is_success()
    );
    let fresh = api.post("/v1/tasks", Some(keyed("invoice-9", "10m"))).await;
    assert_eq!(fresh.status.as_u16(), 201, "{:#}", fresh.body);
    assert_ne!(fresh.body["id"], id.as_str());
}

/// `POST /v1/tasks/batch`: a duplicate (of an earlier task, or of one in the same batch) is
/// listed as the task its key names, flagged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_flags_duplicates() {
    let api = Api::new().await;
    let first = api.post("/v1/tasks", Some(keyed("a", "1h"))).await;
    assert_eq!(first.status.as_u16(), 201);
    let batch = api
        .post(
            "/v1/tasks/batch",
            Some(
                json!({"tasks": [keyed("a", "1h"), keyed("b", "1h"), keyed("b", "1h"),
                                  {"handler": "log", "after": "1h"}]}),
            ),
        )
        .await;
    assert_eq!(batch.status.as_u16(), 201, "{:#}", batch.body);
    let tasks = batch.body["tasks"].as_array().unwrap();
    assert_eq!(tasks[0]["id"], first.body["id"]);
    assert_eq!(tasks[0]["duplicate"], true);
    assert!(tasks[1].get("duplicate").is_none());
    assert_eq!(tasks[2]["id"], tasks[1]["id"]);
    assert_eq!(tasks[2]["duplicate"], true);
    assert!(tasks[3].get("duplicate").is_none());
    let listed = api.get("/v1/jobs").await.body["jobs"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(listed, 3, "a, b and the plain task");
}

/// Bad delivery input on the task and job routes: a dedup window of 0 or over a day, an empty
/// or oversized key, an id with dedup, dedup on a job written by id, a signing secret that is
/// not `whsec_` base64, a callback URL the http handler's host rules forbid. Each is a 422
/// naming the field, in a batch too (`tasks[i].…`), and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_delivery_input_is_refused_naming_the_field() {
    let api = Api::with(|s| {
        s.handlers.http.allowed_hosts = vec!["*.example.com".into(), "127.0.0.1".into()]
    })
    .await;
    let before = api.snapshot().await;
    let http = |params: Value| json!({"after": "1h", "handler": "http", "params": params});
    let cases = [
        (keyed("k", "0s"), "dedup.window"),
        (keyed("k", "0ms"), "dedup.window"),
        (keyed("k", "24h 1s"), "dedup.window"),
        (keyed("k", "2d"), "dedup.window"),
        (keyed("k", "whenever"), "dedup.window"),
        (
            json!({"handler": "log", "dedup": {"key": "k"}}),
            "dedup.window",
        ),
        (keyed("", "1m"), "dedup.key"),
        (keyed(&"k".repeat(300), "1m"), "dedup.key"),
        (
            json!({"handler": "log", "dedup": {"key": "k", "content": true, "window": "1m"}}),
            "dedup.content",
        ),
        (
            json!({"handler": "log", "dedup": {"window": "1m"}}),
            "dedup",
        ),
        (
            json!({"id": "mine", "handler": "log", "dedup": {"key": "k", "window": "1m"}}),
            "id",
        ),
        (
            http(json!({"url": "http://127.0.0.1:9/", "signing_secrets": ["not-a-whsec-secret"]})),
            "params.signing_secrets[0]",
        ),
        (
            http(
                json!({"url": "http://127.0.0.1:9/", "signing_secrets": ["whsec_!!not base64!!"]}),
            ),
            "params.signing_secrets[0]",
        ),
        (
            http(
                json!({"url": "http://127.0.0.1:9/", "callbacks": {"success": "http://evil.test/cb"}}),
            ),
            "params.callbacks.success",
        ),
        (
            http(
                json!({"url": "http://127.0.0.1:9/", "callbacks": {"failure": "http://169.254.169.254/"}}),
            ),
            "params.callbacks.failure",
        ),
    ];
    for (body, field) in &cases {
        let a = api.post("/v1/tasks", Some(body.clone())).await;
        a.assert_error(422, "invalid");
        assert_eq!(a.field(), *field, "{body}: {:#}", a.body);
        let a = api
            .post(
                "/v1/tasks/batch",
                Some(json!({"tasks": [{"handler": "log"}, body]})),
            )
            .await;
        a.assert_error(422, "invalid");
        assert_eq!(
            a.field(),
            format!("tasks[1].{field}"),
            "{body}: {:#}",
            a.body
        );
    }
    // Jobs written by id: dedup is refused there (the id already makes the write idempotent).
    let a = api.put("/v1/jobs/j", keyed("k", "1m")).await;
    a.assert_error(422, "invalid");
    assert_eq!(a.field(), "dedup");
    let mut job = keyed("k", "1m");
    job["id"] = json!("j");
    let a = api.post("/v1/jobs", Some(job)).await;
    a.assert_error(422, "invalid");
    assert_eq!(a.field(), "dedup");
    assert_eq!(
        api.snapshot().await,
        before,
        "a refused request wrote something"
    );
}

/// The OpenAPI document describes `dedup` on a task and the `duplicate` flag of the answer.
#[tokio::test]
async fn openapi_describes_dedup() {
    let api = Api::new().await;
    let doc = api.get("/v1/openapi.json").await.body;
    let schemas = &doc["components"]["schemas"];
    assert!(
        schemas["TaskSpec"]["properties"]["dedup"].is_object(),
        "{:#}",
        schemas["TaskSpec"]
    );
    let dedup = &schemas["DedupSpec"]["properties"];
    for f in ["key", "content", "window"] {
        assert!(dedup[f].is_object(), "DedupSpec.{f}: {dedup:#}");
    }
    assert!(schemas["JobView"]["properties"]["duplicate"].is_object());
}
