//! Every route through the real router, with a real Redis behind it.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use serde_json::json;

use crate::common::Api;
use crate::support::wait;

/// Create, replace, read, list, page, filter and delete.
#[tokio::test]
async fn jobs_crud_with_next_firings_and_paging() {
    let api = Api::new().await;
    let a = api
        .put(
            "/v1/jobs/a-berlin",
            json!({"cron": "0 30 2 * * *", "tz": "Europe/Berlin", "handler": "log"}),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
    assert_eq!(a.body["id"], "a-berlin");
    assert_eq!(a.body["status"], "active");
    assert_eq!(a.body["version"], 1);
    assert_eq!(a.body["tz"], "Europe/Berlin");
    assert_eq!(a.headers["etag"], "\"1\"");
    let next = a.body["next_firings"].as_array().unwrap();
    assert_eq!(next.len(), 5, "{:#}", a.body);
    for f in next {
        let utc = chrono::DateTime::parse_from_rfc3339(f["utc"].as_str().unwrap()).unwrap();
        let local = chrono::DateTime::parse_from_rfc3339(f["local"].as_str().unwrap()).unwrap();
        assert_eq!(utc, local, "same instant in both zones");
        assert!(f["utc"].as_str().unwrap().ends_with('Z'));
        let offset = local.offset().local_minus_utc();
        assert!(offset == 3600 || offset == 7200, "Berlin offset {offset}");
    }
    let next_at =
        chrono::DateTime::parse_from_rfc3339(a.body["next_at"].as_str().unwrap()).unwrap();
    let first = chrono::DateTime::parse_from_rfc3339(next[0]["utc"].as_str().unwrap()).unwrap();
    assert_eq!(next_at, first);

    // Idempotent upsert: the same spec again changes nothing (200, still version 1).
    let again = api
        .put(
            "/v1/jobs/a-berlin",
            json!({"id": "a-berlin", "cron": "0 30 2 * * *", "tz": "Europe/Berlin", "handler": "log"}),
        )
        .await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.body["version"], 1);

    let b = api
        .post(
            "/v1/jobs",
            Some(json!({"id": "b-every", "every": "1h", "handler": "noop"})),
        )
        .await;
    assert_eq!(b.status, StatusCode::CREATED, "{:#}", b.body);
    let c = api
        .put("/v1/jobs/c-once", json!({"after": "1h", "handler": "log"}))
        .await;
    assert_eq!(c.status, StatusCode::CREATED);
    assert!(c.body["spec"]["at"].is_string(), "after is resolved to at");
    assert_eq!(c.body["next_firings"].as_array().unwrap().len(), 1);

    let got = api.get("/v1/jobs/b-every").await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.body["spec"]["every"], "1h");
    assert_eq!(got.body["next_firings"].as_array().unwrap().len(), 5);

    let all = api.get("/v1/jobs").await;
    let ids: Vec<&str> = all.body["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a-berlin", "b-every", "c-once"]);
    assert!(all.body["next_cursor"].is_null());

    let p1 = api.get("/v1/jobs?limit=2").await;
    assert_eq!(p1.body["jobs"].as_array().unwrap().len(), 2);
    assert_eq!(p1.body["next_cursor"], "b-every");
    let p2 = api.get("/v1/jobs?limit=2&after=b-every").await;
    assert_eq!(p2.body["jobs"][0]["id"], "c-once");
    assert!(p2.body["next_cursor"].is_null());

    let by_handler = api.get("/v1/jobs?handler=log").await;
    assert_eq!(by_handler.body["jobs"].as_array().unwrap().len(), 2);
    let one = api.get("/v1/jobs?handler=log&limit=1").await;
    assert_eq!(one.body["jobs"][0]["id"], "a-berlin");
    assert_eq!(one.body["next_cursor"], "a-berlin");
    let rest = api.get("/v1/jobs?handler=log&limit=1&after=a-berlin").await;
    assert_eq!(rest.body["jobs"][0]["id"], "c-once");
    assert!(rest.body["next_cursor"].is_null());

    let del = api.delete("/v1/jobs/b-every").await;
    assert_eq!(del.status, StatusCode::NO_CONTENT);
    api.get("/v1/jobs/b-every")
        .await
        .assert_error(404, "not_found");
    api.delete("/v1/jobs/b-every")
        .await
        .assert_error(404, "not_found");
}

/// Pause, resume, runs, and status filters; a node runs a task enqueued through the API.
#[tokio::test]
async fn pause_resume_runs_and_tasks() {
    let api = Api::new().await;
    let node = api.world.node("n1").await;
    api.put("/v1/jobs/p", json!({"every": "1h", "handler": "log"}))
        .await;
    let paused = api.post("/v1/jobs/p/pause", None).await;
    assert_eq!(paused.status, StatusCode::OK);
    assert_eq!(paused.body["status"], "paused");
    assert_eq!(paused.body["next_firings"], json!([]));
    let list = api.get("/v1/jobs?status=paused").await;
    assert_eq!(list.body["jobs"][0]["id"], "p");
    assert_eq!(
        api.get("/v1/jobs?status=active").await.body["jobs"],
        json!([])
    );
    let resumed = api.post("/v1/jobs/p/resume", None).await;
    assert_eq!(resumed.body["status"], "active");
    assert_eq!(resumed.body["next_firings"].as_array().unwrap().len(), 5);
    api.post("/v1/jobs/nope/pause", None)
        .await
        .assert_error(404, "not_found");
    api.post("/v1/jobs/nope/resume", None)
        .await
        .assert_error(404, "not_found");
    api.get("/v1/jobs/nope/runs")
        .await
        .assert_error(404, "not_found");
    assert_eq!(api.get("/v1/jobs/p/runs").await.body["runs"], json!([]));

    // A task with a chosen id, run at once by the node.
    let t = api
        .post(
            "/v1/tasks",
            Some(json!({"id": "t1", "handler": "rec", "params": {"k": 1}})),
        )
        .await;
    assert_eq!(t.status, StatusCode::CREATED, "{:#}", t.body);
    let runs = wait::until("the task's run", Duration::from_secs(10), || async {
        let r = api.get("/v1/jobs/t1/runs").await;
        r.body["runs"].as_array().filter(|a| !a.is_empty()).cloned()
    })
    .await;
    assert_eq!(runs[0]["outcome"], "ok");
    assert_eq!(runs[0]["node"], "n1");
    assert!(runs[0]["firing_id"].as_str().unwrap().starts_with("t1:"));
    assert!(runs[0]["scheduled_at"].is_string());
    let limited = api.get("/v1/jobs/t1/runs?limit=1").await;
    assert_eq!(limited.body["runs"].as_array().unwrap().len(), 1);

    // Without an id a UUID is chosen; `after` delays it.
    let t2 = api
        .post("/v1/tasks", Some(json!({"handler": "log", "after": "1h"})))
        .await;
    assert_eq!(t2.status, StatusCode::CREATED);
    assert_eq!(t2.body["id"].as_str().unwrap().len(), 36);

    let batch = api
        .post(
            "/v1/tasks/batch",
            Some(json!({"tasks": [
                {"handler": "log", "after": "1h"},
                {"id": "b2", "handler": "log", "at": "2099-01-01T00:00:00Z"},
            ]})),
        )
        .await;
    assert_eq!(batch.status, StatusCode::CREATED, "{:#}", batch.body);
    assert_eq!(batch.body["tasks"].as_array().unwrap().len(), 2);
    assert_eq!(batch.body["tasks"][1]["id"], "b2");
    node.shutdown().await;
}

/// Nodes, health and readiness.
#[tokio::test]
async fn nodes_health_and_readiness() {
    let api = Api::new().await;
    let h = api.get("/healthz").await;
    assert_eq!(h.status, StatusCode::OK);
    assert_eq!(h.body["status"], "ok");
    let r = api.get("/readyz").await;
    assert_eq!(r.status, StatusCode::OK, "{:#}", r.body);
    assert_eq!(r.body["checks"]["redis"], "ok");
    assert_eq!(r.body["checks"]["notifications"], "ok");
    assert_eq!(api.get("/v1/nodes").await.body["nodes"], json!([]));

    let node = api.world.node("node-a").await;
    let nodes = api.get("/v1/nodes").await;
    assert_eq!(nodes.status, StatusCode::OK);
    let n = &nodes.body["nodes"][0];
    assert_eq!(n["id"], "node-a");
    assert_eq!(n["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(n["running"], 0);
    assert_eq!(n["load"], 0.0);
    assert!(n["max_concurrent_runs"].as_u64().unwrap() > 0);
    assert!(n["handlers"].as_array().unwrap().contains(&json!("http")));
    assert!(n["last_seen_at"].is_string());
    node.shutdown().await;
    assert_eq!(api.get("/v1/nodes").await.body["nodes"], json!([]));

    // Expired events off: not ready, and it says why.
    api.world
        .redis
        .config_set("notify-keyspace-events", "")
        .await;
    let r = api.get("/readyz").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.body["status"], "not_ready");
    assert!(
        r.body["checks"]["notifications"]
            .as_str()
            .unwrap()
            .contains("off")
    );
}

/// Redis gone: readiness fails and job routes answer 503 in the error shape.
#[tokio::test]
async fn redis_down_is_503() {
    let mut api = Api::new().await;
    api.world.redis.stop(true).unwrap();
    let r = api.get("/readyz").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        r.body["checks"]["redis"]
            .as_str()
            .unwrap()
            .contains("unreachable")
    );
    assert_eq!(api.get("/healthz").await.status, StatusCode::OK);
    api.get("/v1/jobs/x").await.assert_error(503, "unavailable");
}

/// Every error code, in the one shape, and nothing written on any of them.
#[tokio::test]
async fn every_error_code_comes_in_one_shape_before_any_write() {
    let api = Api::with(|s| s.api.max_body_bytes = 2048).await;
    api.put("/v1/jobs/keep", json!({"every": "1h", "handler": "log"}))
        .await;
    let before = api.snapshot().await;

    // 400: not JSON, truncated JSON, empty body.
    let e = api.raw(Method::PUT, "/v1/jobs/x", "{not json").await;
    e.assert_error(400, "malformed_json");
    api.raw(Method::PUT, "/v1/jobs/x", r#"{"every": "1s""#)
        .await
        .assert_error(400, "malformed_json");
    api.raw(Method::POST, "/v1/tasks", "")
        .await
        .assert_error(400, "malformed_json");
    // 400: bad query parameters, named.
    let q = api.get("/v1/jobs?limit=abc").await;
    q.assert_error(400, "bad_query");
    assert_eq!(q.field(), "limit");
    assert_eq!(api.get("/v1/jobs?limit=0").await.field(), "limit");
    assert_eq!(api.get("/v1/jobs?limit=5000").await.field(), "limit");
    assert_eq!(api.get("/v1/jobs?status=sleeping").await.field(), "status");
    let unknown = api.get("/v1/jobs?colour=red").await;
    unknown.assert_error(400, "bad_query");
    assert_eq!(unknown.field(), "colour");
    assert_eq!(api.get("/v1/jobs/keep/runs?limit=x").await.field(), "limit");

    // 404: unknown route, in the same shape.
    api.get("/v2/jobs").await.assert_error(404, "not_found");
    api.get("/v1/jobs/keep/nothing")
        .await
        .assert_error(404, "not_found");
    // 405.
    api.call(Method::PATCH, "/v1/jobs/keep", None)
        .await
        .assert_error(405, "method_not_allowed");
    api.call(Method::DELETE, "/v1/jobs", None)
        .await
        .assert_error(405, "method_not_allowed");

    // 413: past api.max_body_bytes.
    let huge =
        json!({"id": "big", "every": "1s", "handler": "log", "params": {"x": "y".repeat(4096)}});
    api.put("/v1/jobs/big", huge.clone())
        .await
        .assert_error(413, "payload_too_large");
    api.post("/v1/tasks/batch", Some(json!({"tasks": [huge]})))
        .await
        .assert_error(413, "payload_too_large");

    // 422: each bad field named.
    let cases = [
        (json!({"cron": "61 * * * *", "handler": "log"}), "cron"),
        (json!({"cron": "* * *", "handler": "log"}), "cron"),
        (
            json!({"cron": "0 9 * * *", "tz": "Mars/Olympus", "handler": "log"}),
            "tz",
        ),
        (json!({"every": "0s", "handler": "log"}), "every"),
        (json!({"every": "soon", "handler": "log"}), "every"),
        (json!({"every": "1s", "handler": "no-such"}), "handler"),
        (json!({"handler": "log"}), "schedule"),
        (
            json!({"every": "1s", "cron": "* * * * *", "handler": "log"}),
            "every",
        ),
        (json!({"every": "1s", "handler": "log", "crn": "x"}), "crn"),
        (json!({"every": "1s"}), "handler"),
        (json!({"every": 5, "handler": "log"}), "every"),
        (json!({"at": "tomorrow", "handler": "log"}), "at"),
        (
            json!({"id": "other", "every": "1s", "handler": "log"}),
            "id",
        ),
        (
            json!({"every": "1s", "handler": "log", "start_at": "2030-01-02T00:00:00Z", "end_at": "2030-01-01T00:00:00Z"}),
            "end_at",
        ),
    ];
    for (body, field) in cases {
        let e = api.put("/v1/jobs/x", body.clone()).await;
        e.assert_error(422, "invalid");
        assert_eq!(e.field(), field, "{body} → {:#}", e.body);
    }
    let bad_id = api
        .put(
            "/v1/jobs/bad%20id",
            json!({"every": "1s", "handler": "log"}),
        )
        .await;
    bad_id.assert_error(422, "invalid");
    assert_eq!(bad_id.field(), "id");
    api.put("/v1/jobs/x", json!([1, 2]))
        .await
        .assert_error(422, "invalid");
    // Updating an existing job with a bad spec leaves it as it was.
    let e = api
        .put("/v1/jobs/keep", json!({"cron": "bad", "handler": "log"}))
        .await;
    assert_eq!(e.field(), "cron");

    // Tasks: one-shot only; a batch is refused whole, naming the task and field.
    let t = api
        .post(
            "/v1/tasks",
            Some(json!({"cron": "* * * * *", "handler": "log"})),
        )
        .await;
    t.assert_error(422, "invalid");
    assert_eq!(t.field(), "cron");
    let t = api
        .post("/v1/tasks", Some(json!({"after": "-5s", "handler": "log"})))
        .await;
    assert_eq!(t.field(), "after");
    let b = api
        .post(
            "/v1/tasks/batch",
            Some(json!({"tasks": [
                {"id": "ok1", "handler": "log", "after": "1h"},
                {"id": "bad", "handler": "log", "at": "nope"},
            ]})),
        )
        .await;
    b.assert_error(422, "invalid");
    assert_eq!(b.field(), "tasks[1].at");
    let b = api
        .post(
            "/v1/tasks/batch",
            Some(json!({"tasks": [
                {"id": "ok1", "handler": "log", "after": "1h"},
                {"id": "ok2", "handler": "nope", "after": "1h"},
            ]})),
        )
        .await;
    assert_eq!(b.field(), "tasks[1].handler");
    let b = api
        .post(
            "/v1/tasks/batch",
            Some(json!({"tasks": [
                {"id": "dup", "handler": "log"},
                {"id": "dup", "handler": "log"},
            ]})),
        )
        .await;
    assert_eq!(b.field(), "tasks[1].id");
    let b = api
        .post("/v1/tasks/batch", Some(json!({"tasks": [], "extra": 1})))
        .await;
    assert_eq!(b.field(), "extra");

    // 409: If-Match on another version; "0" on an existing job.
    let req = api
        .request(Method::PUT, "/v1/jobs/keep")
        .header("if-match", "\"7\"")
        .header("content-type", "application/json")
        .body(json!({"every": "2h", "handler": "log"}).to_string().into())
        .unwrap();
    api.send(req).await.assert_error(409, "conflict");
    let req = api
        .request(Method::POST, "/v1/jobs")
        .header("if-match", "0")
        .header("content-type", "application/json")
        .body(
            json!({"id": "keep", "every": "2h", "handler": "log"})
                .to_string()
                .into(),
        )
        .unwrap();
    api.send(req).await.assert_error(409, "conflict");
    // 400: an If-Match that is no version.
    let req = api
        .request(Method::PUT, "/v1/jobs/keep")
        .header("if-match", "yesterday")
        .header("content-type", "application/json")
        .body(json!({"every": "2h", "handler": "log"}).to_string().into())
        .unwrap();
    let e = api.send(req).await;
    e.assert_error(400, "bad_request");
    assert_eq!(e.field(), "If-Match");

    assert_eq!(api.snapshot().await, before, "an error wrote something");

    // The right version passes; "0" creates.
    let req = api
        .request(Method::PUT, "/v1/jobs/keep")
        .header("if-match", "\"1\"")
        .header("content-type", "application/json")
        .body(json!({"every": "2h", "handler": "log"}).to_string().into())
        .unwrap();
    let ok = api.send(req).await;
    assert_eq!(ok.status, StatusCode::OK, "{:#}", ok.body);
    assert_eq!(ok.body["version"], 2);
    let req = api
        .request(Method::PUT, "/v1/jobs/fresh")
        .header("if-match", "\"0\"")
        .header("content-type", "application/json")
        .body(json!({"every": "2h", "handler": "log"}).to_string().into())
        .unwrap();
    assert_eq!(api.send(req).await.status, StatusCode::CREATED);
}

/// Auth on: /v1 needs the bearer token; probes and the document stay open.
#[tokio::test]
async fn auth_on_and_off() {
    let api = Api::with(|s| s.api.token = "s3cret-token".into()).await;
    for uri in ["/v1/jobs", "/v1/nodes", "/v1/jobs/x", "/v2/unknown"] {
        let req = axum::http::Request::get(uri)
            .body(axum::body::Body::empty())
            .unwrap();
        let e = api.send(req).await;
        e.assert_error(401, "unauthorized");
        assert_eq!(e.headers["www-authenticate"], "Bearer");
        for header in [
            "Bearer wrong",
            "Bearer s3cret-toke",
            "Basic s3cret-token",
            "s3cret-token",
        ] {
            let req = axum::http::Request::get(uri)
                .header("authorization", header)
                .body(axum::body::Body::empty())
                .unwrap();
            api.send(req).await.assert_error(401, "unauthorized");
        }
    }
    // A body is not even read without the token.
    let req = axum::http::Request::put("/v1/jobs/x")
        .body(axum::body::Body::from("x".repeat(10_000_000)))
        .unwrap();
    api.send(req).await.assert_error(401, "unauthorized");
    for uri in ["/healthz", "/readyz", "/v1/openapi.json"] {
        let req = axum::http::Request::get(uri)
            .body(axum::body::Body::empty())
            .unwrap();
        let a = api.send(req).await;
        assert_eq!(a.status, StatusCode::OK, "{uri}: {:#}", a.body);
    }
    // With the token (`api.call` sends it).
    let a = api.get("/v1/jobs").await;
    assert_eq!(a.status, StatusCode::OK, "{:#}", a.body);
    let req = axum::http::Request::get("/v1/jobs")
        .header("authorization", "bearer s3cret-token")
        .body(axum::body::Body::empty())
        .unwrap();
    assert_eq!(api.send(req).await.status, StatusCode::OK);

    // Auth off: no header needed.
    let open = Api::new().await;
    let req = axum::http::Request::get("/v1/jobs")
        .body(axum::body::Body::empty())
        .unwrap();
    assert_eq!(open.send(req).await.status, StatusCode::OK);
}

/// A job with jitter shows each next firing's instant and when it fires (its instant plus
/// the fixed offset of job and instant); jitter not below `every` is refused, naming the
/// field and the bound, and nothing is created.
#[tokio::test]
async fn jitter_shows_in_next_firings_and_is_bounded_by_every() {
    let api = Api::new().await;
    let a = api
        .put(
            "/v1/jobs/spread",
            json!({"every": "1h", "jitter": "30m", "handler": "log"}),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
    assert_eq!(a.body["spec"]["jitter"], "30m");
    let next = a.body["next_firings"].as_array().unwrap();
    assert_eq!(next.len(), 5);
    let ms = |v: &serde_json::Value| {
        chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap())
            .unwrap()
            .timestamp_millis()
    };
    let mut offsets = Vec::new();
    for f in next {
        let (at, fires) = (ms(&f["utc"]), ms(&f["fires_at"]));
        assert_eq!(
            fires - at,
            keyfire::job::jitter_offset("spread", at, 1_800_000)
        );
        assert!((0..1_800_000).contains(&(fires - at)), "{f:#}");
        offsets.push(fires - at);
    }
    assert!(offsets.windows(2).any(|w| w[0] != w[1]), "{offsets:?}");
    // The next instant itself (its firing id) is the schedule's, not the jittered one.
    assert_eq!(ms(&a.body["next_at"]), ms(&next[0]["utc"]));

    // Without jitter the field is absent.
    let plain = api
        .put("/v1/jobs/plain", json!({"every": "1h", "handler": "log"}))
        .await;
    assert!(plain.body["next_firings"][0].get("fires_at").is_none());

    let bad = api
        .put(
            "/v1/jobs/too-much",
            json!({"every": "1m", "jitter": "1m", "handler": "log"}),
        )
        .await;
    bad.assert_error(422, "invalid");
    assert_eq!(bad.field(), "jitter");
    assert!(
        bad.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("less than every"),
        "{:#}",
        bad.body
    );
    assert_eq!(
        api.get("/v1/jobs/too-much").await.status,
        StatusCode::NOT_FOUND
    );
    let once = api
        .put(
            "/v1/jobs/once",
            json!({"after": "1h", "jitter": "1s", "handler": "log"}),
        )
        .await;
    assert_eq!(once.field(), "jitter", "{:#}", once.body);
}
