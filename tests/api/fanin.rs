//! Fan-in over REST and the CLI: `POST /v1/tasks/batch` with `on_complete` answers the batch's
//! id and `GET /v1/batches/{id}` its counts; `after_task` on `POST /v1/tasks` makes a waiting
//! task; bad input is refused with 422 naming the field, and writes nothing.

use axum::http::StatusCode;
use serde_json::json;

use crate::cli::{cli, cli_exits, code, serve_ready};
use crate::common::Api;
use std::time::Duration;

use crate::support::{World, printed, printed_json, wait};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_with_on_complete_answers_its_id_and_counts() {
    let api = Api::with(|s| s.redis.shards = 3).await;
    let tasks: Vec<_> = (0..5)
        .map(|i| json!({"handler": "log", "after": "1h", "params": {"n": i}}))
        .collect();
    let body = json!({"tasks": tasks, "on_complete": {"url": "http://127.0.0.1:9/done"}});
    let a = api.post("/v1/tasks/batch", Some(body)).await;
    assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
    let batch = a.body["batch_id"].as_str().unwrap().to_string();
    let ids: Vec<String> = a.body["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert_eq!(t["spec"]["batch"], batch.as_str(), "{t:#}");
            t["id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(ids.len(), 5);
    let b = api.get(&format!("/v1/batches/{batch}")).await;
    assert_eq!(b.status, StatusCode::OK, "{:#}", b.body);
    assert_eq!(
        (&b.body["total"], &b.body["pending"], &b.body["succeeded"]),
        (&json!(5), &json!(5), &json!(0))
    );
    assert!(b.body["completed_ms"].is_null());
    // Cancelling and deleting tasks ends them for the batch.
    for id in &ids[..4] {
        let c = api.post(&format!("/v1/tasks/{id}/cancel"), None).await;
        assert_eq!(c.status, StatusCode::OK, "{:#}", c.body);
    }
    let d = api.delete(&format!("/v1/jobs/{}", ids[4])).await;
    assert_eq!(d.status, StatusCode::NO_CONTENT, "{:#}", d.body);
    let b = api.get(&format!("/v1/batches/{batch}")).await;
    assert_eq!(
        (&b.body["cancelled"], &b.body["pending"]),
        (&json!(5), &json!(0)),
        "{:#}",
        b.body
    );
    assert!(b.body["completed_ms"].is_i64(), "{:#}", b.body);

    api.get("/v1/batches/no-such")
        .await
        .assert_error(404, "not_found");

    let before = api.snapshot().await;
    let log = json!({"handler": "log"});
    for (body, field) in [
        (
            json!({"tasks": [log, {"handler": "log", "id": "mine"}], "on_complete": {"url": "http://127.0.0.1:9/"}}),
            "tasks[1].id",
        ),
        (
            json!({"tasks": [log], "on_complete": {"url": "ftp://127.0.0.1/"}}),
            "on_complete.url",
        ),
        (
            json!({"tasks": [], "on_complete": {"url": "http://127.0.0.1:9/"}}),
            "tasks",
        ),
        (
            json!({"tasks": [{"handler": "log", "after": "soon"}], "on_complete": {"url": "http://127.0.0.1:9/"}}),
            "tasks[0].after",
        ),
        (
            json!({"tasks": [{"handler": "log", "batch": "b1"}]}),
            "tasks[0].batch",
        ),
    ] {
        let a = api.post("/v1/tasks/batch", Some(body.clone())).await;
        a.assert_error(422, "invalid");
        assert_eq!(a.field(), field, "{body}: {:#}", a.body);
    }
    assert_eq!(
        api.snapshot().await,
        before,
        "a refused batch wrote something"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_task_makes_a_waiting_task_and_names_bad_input() {
    let api = Api::new().await;
    let a = api
        .post(
            "/v1/tasks",
            Some(json!({"id": "first", "handler": "log", "after": "1h"})),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
    let b = api
        .post(
            "/v1/tasks",
            Some(json!({"handler": "log", "after": "5s", "after_task": "first"})),
        )
        .await;
    assert_eq!(b.status, StatusCode::CREATED, "{:#}", b.body);
    assert_eq!(b.body["status"], "waiting");
    assert_eq!(b.body["spec"]["after_task"], "first");
    assert!(b.body["next_at"].is_null(), "{:#}", b.body);

    let before = api.snapshot().await;
    for (body, field) in [
        (
            json!({"handler": "log", "after_task": "nobody"}),
            "after_task",
        ),
        (
            json!({"handler": "log", "after_task": "first", "at": "2099-01-01T00:00:00Z"}),
            "at",
        ),
        (
            json!({"handler": "log", "after_task": "first", "dedup": {"key": "k", "window": "1m"}}),
            "dedup",
        ),
        (
            json!({"handler": "log", "after_task": "bad id!"}),
            "after_task",
        ),
    ] {
        let a = api.post("/v1/tasks", Some(body.clone())).await;
        a.assert_error(422, "invalid");
        assert_eq!(a.field(), field, "{body}: {:#}", a.body);
    }
    let put = api
        .put(
            "/v1/jobs/by-id",
            json!({"handler": "log", "after": "1s", "after_task": "first"}),
        )
        .await;
    put.assert_error(422, "invalid");
    assert_eq!(put.field(), "after_task", "{:#}", put.body);
    assert_eq!(
        api.snapshot().await,
        before,
        "refused input wrote something"
    );
}

/// `keyfire task batch FILE --on-complete URL`, `task batch-status`, `task add --after-task`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_enqueues_batches_and_chains() {
    let w = World::new().await;
    let served = serve_ready(&w, "");
    let url = served.url.as_str();
    let file = served.dir.path().join("tasks.json");
    std::fs::write(
        &file,
        json!([{"handler": "noop"}, {"handler": "noop", "after": "1h"}]).to_string(),
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let o = cli(
        url,
        &[
            "task",
            "batch",
            file,
            "--on-complete",
            "http://127.0.0.1:9/cb",
        ],
    );
    assert_eq!(code(&o), 0, "{}", printed(&o));
    let out = printed(&o);
    let mut lines = out.lines();
    let batch = lines
        .next()
        .unwrap()
        .strip_prefix("batch ")
        .unwrap()
        .to_string();
    let first = lines.next().unwrap().to_string();
    let second = lines.next().unwrap().to_string();
    let status = printed_json(&cli(url, &["task", "batch-status", &batch, "--json"]));
    assert_eq!(status["total"], 2, "{status:#}");
    cli_exits(url, &["task", "batch-status", "nope"], 3, "no batch");
    cli_exits(
        url,
        &["task", "batch", file, "--on-complete", "gopher://x/"],
        2,
        "on_complete.url",
    );

    let o = cli(
        url,
        &[
            "task",
            "add",
            "--handler",
            "noop",
            "--after-task",
            &second,
            "--json",
        ],
    );
    assert_eq!(code(&o), 0, "{}", printed(&o));
    assert_eq!(printed_json(&o)["status"], "waiting");
    cli_exits(
        url,
        &[
            "task",
            "add",
            "--handler",
            "noop",
            "--after-task",
            "missing",
        ],
        2,
        "after_task",
    );
    // The first task runs (noop): one of two ended.
    tokio::task::block_in_place(|| {
        wait::until_blocking("the first task to end", Duration::from_secs(20), || {
            let s = printed_json(&cli(url, &["task", "batch-status", &batch, "--json"]));
            if s["succeeded"] == 1 && s["pending"] == 1 {
                Ok(())
            } else {
                Err(format!("{s}"))
            }
        })
    });
    let o = cli(url, &["job", "get", &first, "--json"]);
    assert_eq!(printed_json(&o)["status"], "finished", "{}", printed(&o));
}
