//! `POST /v1/topics/{topic}/tasks/batch`: many tasks of a topic in one call, and with
//! `on_complete` a batch whose counts `GET /v1/batches/{id}` reads as its tasks are finished
//! and deleted; bad input is refused with 422 naming the field, and writes nothing. The CLI's
//! `task batch --topic`.

use axum::http::StatusCode;
use serde_json::json;

use crate::cli::{cli, cli_exits, code, serve_ready};
use crate::common::Api;
use crate::support::{World, printed, printed_json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_batch_answers_its_id_and_counts_its_tasks_ends() {
    let api = Api::new().await;
    let tasks: Vec<_> = (0..3)
        .map(|i| json!({"payload": {"n": i}, "ttr": "1m"}))
        .collect();
    let body = json!({"tasks": tasks, "on_complete": {"url": "http://127.0.0.1:9/done"}});
    let a = api.post("/v1/topics/tb/tasks/batch", Some(body)).await;
    assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
    let batch = a.body["batch_id"].as_str().unwrap().to_string();
    let ids: Vec<String> = a.body["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert_eq!(t["topic"], "tb", "{t:#}");
            t["id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(ids.len(), 3);
    let t = api.get(&format!("/v1/topics/tb/tasks/{}", ids[0])).await;
    assert_eq!(t.body["batch_id"], batch.as_str(), "{:#}", t.body);
    let b = api.get(&format!("/v1/batches/{batch}")).await;
    assert_eq!(b.status, StatusCode::OK, "{:#}", b.body);
    assert_eq!(
        (&b.body["total"], &b.body["pending"]),
        (&json!(3), &json!(3))
    );

    // Two finished, one deleted: the batch has completed.
    let p = api.post("/v1/topics/tb/pop?max=3", None).await;
    assert_eq!(p.status, StatusCode::OK, "{:#}", p.body);
    let popped = p.body["tasks"].as_array().unwrap();
    assert_eq!(popped.len(), 3);
    let finish: Vec<_> = popped[..2]
        .iter()
        .map(|r| json!({"id": r["id"], "token": r["token"]}))
        .collect();
    let f = api
        .post("/v1/topics/tb/finish", Some(json!({"tasks": finish})))
        .await;
    assert_eq!(f.status, StatusCode::OK, "{:#}", f.body);
    let b = api.get(&format!("/v1/batches/{batch}")).await;
    assert_eq!(
        (&b.body["succeeded"], &b.body["pending"]),
        (&json!(2), &json!(1))
    );
    assert!(b.body["completed_ms"].is_null(), "{:#}", b.body);
    let last = popped[2]["id"].as_str().unwrap();
    let d = api.delete(&format!("/v1/topics/tb/tasks/{last}")).await;
    assert_eq!(d.status, StatusCode::NO_CONTENT, "{:#}", d.body);
    let b = api.get(&format!("/v1/batches/{batch}")).await;
    assert_eq!(
        (
            &b.body["succeeded"],
            &b.body["died"],
            &b.body["cancelled"],
            &b.body["pending"]
        ),
        (&json!(2), &json!(0), &json!(1), &json!(0)),
        "{:#}",
        b.body
    );
    assert!(b.body["completed_ms"].is_i64(), "{:#}", b.body);

    // Without on_complete: added as single adds would, no batch.
    let plain = api
        .post(
            "/v1/topics/tb/tasks/batch",
            Some(json!({"tasks": [{"id": "p1", "payload": 1}, {"payload": 2}]})),
        )
        .await;
    assert_eq!(plain.status, StatusCode::CREATED, "{:#}", plain.body);
    assert!(plain.body.get("batch_id").is_none(), "{:#}", plain.body);
    assert_eq!(plain.body["tasks"][0]["id"], "p1");

    let before = api.snapshot().await;
    let url = json!({"url": "http://127.0.0.1:9/"});
    let ok = json!({"payload": 1});
    for (body, field) in [
        (
            json!({"tasks": [ok, {"id": "mine"}], "on_complete": url}),
            "tasks[1].id",
        ),
        (
            json!({"tasks": [{"dedup": {"key": "k", "window": "1m"}}], "on_complete": url}),
            "tasks[0].dedup",
        ),
        (
            json!({"tasks": [ok, ok, {"ttr": "soon"}], "on_complete": url}),
            "tasks[2].ttr",
        ),
        (
            json!({"tasks": [{"max_deliveries": 0}], "on_complete": url}),
            "tasks[0].max_deliveries",
        ),
        (
            json!({"tasks": [ok], "on_complete": {"url": "ftp://127.0.0.1/"}}),
            "on_complete.url",
        ),
        (json!({"tasks": [], "on_complete": url}), "tasks"),
        (json!({"tasks": []}), "tasks"),
    ] {
        let a = api
            .post("/v1/topics/tb/tasks/batch", Some(body.clone()))
            .await;
        a.assert_error(422, "invalid");
        assert_eq!(a.field(), field, "{body}: {:#}", a.body);
    }
    let a = api
        .post(
            "/v1/topics/a:b/tasks/batch",
            Some(json!({"tasks": [ok], "on_complete": url})),
        )
        .await;
    a.assert_error(422, "invalid");
    assert_eq!(a.field(), "topic");
    assert_eq!(
        api.snapshot().await,
        before,
        "a refused batch wrote something"
    );
}

/// `keyfire task batch --topic TOPIC FILE --on-complete URL`, then `task batch-status`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_adds_a_topic_batch() {
    let w = World::new().await;
    let served = serve_ready(&w, "");
    let url = served.url.as_str();
    let file = served.dir.path().join("tasks.json");
    std::fs::write(
        &file,
        json!({"tasks": [{"payload": 1}, {"payload": 2, "delay": "1h"}]}).to_string(),
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let o = cli(
        url,
        &[
            "task",
            "batch",
            "--topic",
            "cb",
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
    assert_eq!(lines.count(), 2, "{out}");
    let status = printed_json(&cli(url, &["task", "batch-status", &batch, "--json"]));
    assert_eq!(
        (&status["total"], &status["pending"]),
        (&json!(2), &json!(2)),
        "{status:#}"
    );
    cli_exits(
        url,
        &[
            "task",
            "batch",
            "--topic",
            "cb",
            file,
            "--on-complete",
            "gopher://x/",
        ],
        2,
        "on_complete.url",
    );
}
