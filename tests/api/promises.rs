//! The API keeps what it documents: JSON bodies only and no cross-site writes, errors in the
//! one shape even for paths that are not UTF-8, a 413 that clients can read, no-op writes that
//! keep the version, cron errors that name the field, and the counters a job keeps.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::Api;

fn job(id: &str) -> Value {
    json!({"id": id, "every": "1h", "handler": "noop"})
}

/// A state-changing request with a body of this type, or none.
async fn typed(
    api: &Api,
    method: Method,
    uri: &str,
    ctype: Option<&str>,
    body: &str,
) -> crate::common::Answer {
    let mut b = api.request(method, uri);
    if let Some(t) = ctype {
        b = b.header("content-type", t);
    }
    api.send(b.body(Body::from(body.to_string())).unwrap())
        .await
}

#[tokio::test]
async fn bodies_that_are_not_json_typed_are_refused_with_415_and_write_nothing() {
    let api = Api::new().await;
    let before = api.snapshot().await;
    let spec = job("csrf").to_string();
    let task = json!({"handler": "noop"}).to_string();
    let routes: &[(Method, &str, &str)] = &[
        (Method::POST, "/v1/jobs", &spec),
        (Method::PUT, "/v1/jobs/csrf", &spec),
        (Method::POST, "/v1/tasks", &task),
        (
            Method::POST,
            "/v1/tasks/batch",
            r#"{"tasks": [{"handler": "noop"}]}"#,
        ),
        (Method::POST, "/v1/topics/mail/tasks", r#"{"payload": {}}"#),
    ];
    for (method, uri, body) in routes {
        for ctype in [
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            None,
        ] {
            let a = typed(&api, method.clone(), uri, ctype, body).await;
            a.assert_error(415, "unsupported_media_type");
            assert_eq!(a.field(), "Content-Type", "{method} {uri} {ctype:?}");
        }
    }
    assert_eq!(
        api.snapshot().await,
        before,
        "a refused body wrote something"
    );
    // JSON with parameters is JSON.
    let ok = typed(
        &api,
        Method::POST,
        "/v1/jobs",
        Some("application/json; charset=utf-8"),
        &spec,
    )
    .await;
    assert_eq!(ok.status, StatusCode::CREATED, "{:#}", ok.body);
}

#[tokio::test]
async fn browser_requests_from_other_sites_cannot_change_anything() {
    let api = Api::new().await;
    assert_eq!(
        api.put("/v1/jobs/victim", job("victim")).await.status,
        StatusCode::CREATED
    );
    let before = api.snapshot().await;
    // Body-less POSTs are "simple requests" a page can send cross-site without a preflight.
    for uri in [
        "/v1/jobs/victim/pause",
        "/v1/jobs/victim/trigger",
        "/v1/jobs/victim/resume",
        "/v1/jobs/victim/dead/replay",
    ] {
        for (name, value) in [
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-site", "same-site"),
            ("origin", "https://evil.example"),
            ("origin", "null"),
        ] {
            let req = api
                .request(Method::POST, uri)
                .header("host", "127.0.0.1:8080")
                .header(name, value)
                .body(Body::empty())
                .unwrap();
            let a = api.send(req).await;
            a.assert_error(403, "forbidden");
        }
    }
    let req = api
        .request(Method::DELETE, "/v1/jobs/victim")
        .header("origin", "https://evil.example")
        .body(Body::empty())
        .unwrap();
    api.send(req).await.assert_error(403, "forbidden");
    assert_eq!(
        api.snapshot().await,
        before,
        "a cross-site request wrote something"
    );

    // The dashboard's own calls (same origin) and non-browser clients still work.
    let req = api
        .request(Method::POST, "/v1/jobs/victim/pause")
        .header("host", "127.0.0.1:8080")
        .header("origin", "http://127.0.0.1:8080")
        .header("sec-fetch-site", "same-origin")
        .body(Body::empty())
        .unwrap();
    assert_eq!(api.send(req).await.status, StatusCode::OK);
    assert_eq!(
        api.post("/v1/jobs/victim/resume", None).await.status,
        StatusCode::OK
    );
    // Reading is not a write: a cross-site GET is answered (the page cannot read it: no CORS).
    let req = api
        .request(Method::GET, "/v1/jobs/victim")
        .header("sec-fetch-site", "cross-site")
        .body(Body::empty())
        .unwrap();
    assert_eq!(api.send(req).await.status, StatusCode::OK);
}

#[tokio::test]
async fn without_a_token_only_local_host_names_are_answered() {
    let api = Api::new().await;
    for host in ["127.0.0.1:8080", "localhost:8080", "[::1]:8080"] {
        let req = api
            .request(Method::GET, "/v1/jobs")
            .header("host", host)
            .body(Body::empty())
            .unwrap();
        assert_eq!(api.send(req).await.status, StatusCode::OK, "{host}");
    }
    // A DNS-rebinding page reaches 127.0.0.1 under its own name.
    let req = api
        .request(Method::GET, "/v1/jobs")
        .header("host", "rebind.evil.example:8080")
        .body(Body::empty())
        .unwrap();
    let a = api.send(req).await;
    a.assert_error(403, "forbidden");
    assert_eq!(a.field(), "Host");
    // Probes are answered whatever the name.
    let req = api
        .request(Method::GET, "/healthz")
        .header("host", "probe.internal:8080")
        .body(Body::empty())
        .unwrap();
    assert_eq!(api.send(req).await.status, StatusCode::OK);

    // With a token the node may serve under any name.
    let api = Api::with(|s| s.api.token = "t0ken".into()).await;
    let req = api
        .request(Method::GET, "/v1/jobs")
        .header("host", "keyfire.internal:8080")
        .body(Body::empty())
        .unwrap();
    assert_eq!(api.send(req).await.status, StatusCode::OK);
}

#[tokio::test]
async fn path_ids_that_are_not_utf8_get_the_documented_error() {
    let api = Api::new().await;
    for (method, uri, field) in [
        (Method::GET, "/v1/jobs/%ff", "id"),
        (Method::DELETE, "/v1/jobs/%ff", "id"),
        (Method::POST, "/v1/jobs/%ff/pause", "id"),
        (Method::GET, "/v1/jobs/%ff/runs", "id"),
        (Method::GET, "/v1/tasks/%ff", "id"),
        (Method::POST, "/v1/topics/%c3%28/tasks", "topic"),
        (Method::POST, "/v1/topics/%ff/pop", "topic"),
    ] {
        let a = api.call(method.clone(), uri, None).await;
        a.assert_error(400, "bad_path");
        assert_eq!(a.field(), field, "{method} {uri}");
        assert!(
            a.headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json"),
            "{method} {uri}"
        );
    }
    // Percent-encoded UTF-8 is fine (and then judged as an id).
    api.get("/v1/jobs/%C3%A9t%C3%A9")
        .await
        .assert_error(404, "not_found");
}

#[tokio::test]
async fn the_same_spec_again_keeps_the_version() {
    let api = Api::new().await;
    let spec = json!({"id": "same", "cron": "0 9 * * MON-FRI", "tz": "Europe/Berlin", "handler": "noop", "params": {"a": 1}});
    let first = api.post("/v1/jobs", Some(spec.clone())).await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(first.body["version"], 1);
    let before = api.snapshot().await;
    // POST, POST, PUT with the same body: nothing changes, the version stays 1, and 200.
    for a in [
        api.post("/v1/jobs", Some(spec.clone())).await,
        api.post("/v1/jobs", Some(spec.clone())).await,
        api.put("/v1/jobs/same", spec.clone()).await,
    ] {
        assert_eq!(a.status, StatusCode::OK, "{:#}", a.body);
        assert_eq!(a.body["version"], 1, "{:#}", a.body);
        assert_eq!(a.headers["etag"], "\"1\"");
    }
    assert_eq!(
        api.snapshot().await,
        before,
        "a no-op write wrote something"
    );
    // A client holding the version still gets its conditional write through.
    let req = api
        .request(Method::PUT, "/v1/jobs/same")
        .header("if-match", "\"1\"")
        .header("content-type", "application/json")
        .body(Body::from(spec.to_string()))
        .unwrap();
    let a = api.send(req).await;
    assert_eq!(a.status, StatusCode::OK, "{:#}", a.body);
    assert_eq!(a.body["version"], 1);
    // A real change bumps it.
    let mut changed = spec.clone();
    changed["params"] = json!({"a": 2});
    let a = api.put("/v1/jobs/same", changed).await;
    assert_eq!(a.body["version"], 2, "{:#}", a.body);
}

#[tokio::test]
async fn cron_errors_name_the_field_and_the_value_and_never_firing_crons_are_refused() {
    let api = Api::new().await;
    let before = api.snapshot().await;
    for (cron, words) in [
        ("0 0 32 * *", "day-of-month: 32 is outside 1\u{2013}31"),
        ("0 25 * * *", "hour: 25 is outside 0\u{2013}23"),
        ("0 0 * * 9", "day-of-week: 9 is outside 0\u{2013}7"),
        ("0 0 1 13 *", "month: 13 is outside 1\u{2013}12"),
        ("0 0 31 2 *", "never fires"),
        ("0 0 30 FEB *", "never fires"),
    ] {
        let a = api
            .put("/v1/jobs/c", json!({"cron": cron, "handler": "noop"}))
            .await;
        a.assert_error(422, "invalid");
        assert_eq!(a.field(), "cron", "{cron}");
        let message = a.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(words), "{cron}: {message}");
        assert!(!message.contains("Component error"), "{cron}: {message}");
    }
    assert_eq!(api.snapshot().await, before);
    // Rare is not never.
    let a = api
        .put(
            "/v1/jobs/leap",
            json!({"cron": "0 0 29 2 *", "handler": "noop"}),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
    assert_eq!(a.body["status"], "active");
}

#[tokio::test]
async fn the_job_view_shows_every_counter_a_job_keeps() {
    let api = Api::new().await;
    api.put("/v1/jobs/count", job("count")).await;
    let a = api.get("/v1/jobs/count").await;
    for counter in ["runs", "failures", "missed", "skipped", "dead", "triggered"] {
        assert_eq!(a.body[counter], 0, "{counter}: {:#}", a.body);
    }
    assert_eq!(
        api.post("/v1/jobs/count/trigger", None).await.status,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        api.post("/v1/jobs/count/trigger", None).await.status,
        StatusCode::ACCEPTED
    );
    let a = api.get("/v1/jobs/count").await;
    assert_eq!(a.body["triggered"], 2, "{:#}", a.body);
    // The OpenAPI document lists them too.
    let doc = serde_json::to_value(keyfire_server::api::openapi()).unwrap();
    let props = &doc["components"]["schemas"]["JobView"]["properties"];
    for counter in ["skipped", "dead", "triggered"] {
        assert!(
            props.get(counter).is_some(),
            "{counter} missing from JobView's schema"
        );
    }
}
