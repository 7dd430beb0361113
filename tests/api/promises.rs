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
