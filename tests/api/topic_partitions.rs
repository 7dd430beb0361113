//! A topic's partitions over REST (`PUT`/`GET /v1/topics/{topic}`), the CLI (`keyfire topics
//! set/get`) and TOML (`[[topics]]`): accepted, shown, and a bad value refused naming
//! `partitions` with nothing written.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::json;

use crate::common::Api;
use crate::support::{World, keyfire_cli, printed, wait};
use keyfire_testkit::free_port;

const BIN: &str = env!("CARGO_BIN_EXE_keyfire");

#[tokio::test]
async fn rest_sets_and_shows_partitions_refusing_bad_counts_before_any_write() {
    let api = Api::new().await;
    let a = api.get("/v1/topics/orders").await;
    assert_eq!(a.status, StatusCode::OK, "{:#}", a.body);
    assert_eq!(
        a.body,
        json!({"topic": "orders", "partitions": 1, "paused": false})
    );
    let before = api.snapshot().await;
    for (body, field) in [
        (json!({"partitions": 0}), "partitions"),
        (json!({"partitions": 65}), "partitions"),
        (json!({"partitions": "4"}), "partitions"),
        (json!({"partitions": -1}), "partitions"),
        (json!({}), "partitions"),
        (json!({"partitions": 4, "shards": 2}), "shards"),
    ] {
        let a = api.put("/v1/topics/orders", body.clone()).await;
        assert_eq!(
            a.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body}: {:#}",
            a.body
        );
        assert!(a.field().contains(field), "{body}: {:#}", a.body);
    }
    let a = api
        .put("/v1/topics/bad:name", json!({"partitions": 2}))
        .await;
    assert_eq!(a.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", a.body);
    assert_eq!(
        api.snapshot().await,
        before,
        "a refused declaration wrote something"
    );

    let a = api.put("/v1/topics/orders", json!({"partitions": 4})).await;
    assert_eq!(a.status, StatusCode::OK, "{:#}", a.body);
    assert_eq!(
        a.body,
        json!({"topic": "orders", "partitions": 4, "paused": false})
    );
    assert_eq!(api.get("/v1/topics/orders").await.body["partitions"], 4);
    // Again with the same count: accepted, nothing changes.
    let a = api.put("/v1/topics/orders", json!({"partitions": 4})).await;
    assert_eq!(a.status, StatusCode::OK, "{:#}", a.body);
    // Another count is a conflict with the one set, and changes nothing.
    let a = api.put("/v1/topics/orders", json!({"partitions": 2})).await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{:#}", a.body);
    assert_eq!(a.body["error"]["code"], "conflict", "{:#}", a.body);
    assert_eq!(api.get("/v1/topics/orders").await.body["partitions"], 4);
    // Tasks in a partitioned topic come back through the topic's task routes.
    let a = api
        .post(
            "/v1/topics/orders/tasks",
            Some(json!({"payload": 1, "id": "o-1"})),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
    let a = api.get("/v1/topics/orders/tasks/o-1").await;
    assert_eq!(a.status, StatusCode::OK, "{:#}", a.body);
    assert_eq!(a.body["state"], "ready");
    let list = api.get("/v1/topics").await;
    let orders = list.body["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["topic"] == "orders")
        .unwrap();
    assert_eq!(
        (orders["partitions"].as_u64(), orders["ready"].as_u64()),
        (Some(4), Some(1))
    );
}

struct Serve(std::process::Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn config(w: &World, dir: &std::path::Path, port: u16, topics: &str) -> std::path::PathBuf {
    let path = dir.join("keyfire.toml");
    std::fs::write(
        &path,
        format!(
            "[redis]\nurl = \"{}\"\nprefix = \"{}\"\n\n[node]\nid = \"tp\"\n\n[api]\nlisten = \"127.0.0.1:{port}\"\n\n{topics}\n",
            w.redis.url(),
            w.settings.redis.prefix
        ),
    )
    .unwrap();
    path
}

fn cli(url: &str, args: &[&str]) -> Output {
    keyfire_cli(url, None, args)
}

/// `[[topics]]` in the TOML file declares partitions when the node starts; a bad count stops
/// the start naming the field, before anything is written; the CLI sets and shows a count and
/// a bad one exits with the API's error naming `partitions`.
#[tokio::test]
async fn toml_and_cli_take_partitions_refusing_bad_counts() {
    let w = World::new().await;
    let dir = tempfile::tempdir().unwrap();
    // A bad count: the node refuses to start and writes nothing.
    let bad = config(
        &w,
        dir.path(),
        free_port(),
        "[[topics]]\nname = \"orders\"\npartitions = 0\n",
    );
    let o = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        printed(&o).contains("topics[0].partitions"),
        "{}",
        printed(&o)
    );
    assert!(
        crate::common::snapshot(&w).await.is_empty(),
        "a refused start wrote something"
    );

    let port = free_port();
    let good = config(
        &w,
        dir.path(),
        port,
        "[[topics]]\nname = \"orders\"\npartitions = 3\n",
    );
    let _serve = Serve(
        Command::new(BIN)
            .args(["serve", "--config"])
            .arg(&good)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let url = format!("http://127.0.0.1:{port}");
    let v: serde_json::Value = wait::until_blocking(
        "serve to show topic orders",
        Duration::from_secs(20),
        || {
            let o = cli(&url, &["topics", "get", "orders", "--json"]);
            if o.status.success() {
                Ok(serde_json::from_slice(&o.stdout).unwrap())
            } else {
                Err(printed(&o))
            }
        },
    );
    assert_eq!(v["partitions"], 3, "{v}");
    let o = cli(&url, &["topics", "set", "mail", "--partitions", "2"]);
    assert!(o.status.success(), "{}", printed(&o));
    assert!(printed(&o).contains("partitions 2"), "{}", printed(&o));
    let o = cli(&url, &["topics", "set", "mail", "--partitions", "65"]);
    assert!(!o.status.success());
    assert!(printed(&o).contains("partitions"), "{}", printed(&o));
    let o = cli(&url, &["topics", "get", "mail", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["partitions"], 2, "the refused count changed it");
}
