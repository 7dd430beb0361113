//! The API keeps what it documents: JSON bodies only and no cross-site writes, errors in the
//! one shape even for paths that are not UTF-8, a 413 that clients can read, no-op writes that
//! keep the version, cron errors that name the field, and the counters a job keeps.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::Api;
use crate::support::printed;

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
async fn bodies_that_are_not_json_typed_are_refused_with_415_before_any_write() {
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
        "/v1/jobs/victim/cancel",
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
async fn crons_that_are_bad_or_never_fire_are_refused_naming_the_field() {
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

const BIN: &str = env!("CARGO_BIN_EXE_keyfire");

fn run(args: &[&str]) -> std::process::Output {
    std::process::Command::new(BIN)
        .args(args)
        .output()
        .expect("run keyfire")
}

#[test]
fn cron_next_previews_from_a_given_instant() {
    let o = run(&[
        "cron",
        "next",
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--from",
        "2026-03-07T12:00:00Z",
        "-n",
        "2",
    ]);
    assert!(o.status.success(), "{}", printed(&o));
    let lines: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    // The spring-forward day has no 02:30: it fires at 03:00 EDT.
    assert!(lines[0].starts_with("2026-03-08T07:00:00Z"), "{lines:?}");
    assert!(lines[1].starts_with("2026-03-09T06:30:00Z"), "{lines:?}");
    assert_eq!(lines.len(), 2);
    // A date, as a person types it: midnight in --tz, which is included.
    let o = run(&[
        "cron",
        "next",
        "0 0 * * *",
        "--tz",
        "America/New_York",
        "--from",
        "2027-03-13",
        "-n",
        "1",
    ]);
    assert!(o.status.success(), "{}", printed(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).starts_with("2027-03-13T05:00:00Z"),
        "{}",
        printed(&o)
    );
    let bad = run(&["cron", "next", "* * * * *", "--from", "next tuesday"]);
    assert_eq!(bad.status.code(), Some(2), "{}", printed(&bad));
    assert!(printed(&bad).contains("RFC 3339"), "{}", printed(&bad));
    assert!(
        printed(&bad).contains("a date (2027-03-13"),
        "{}",
        printed(&bad)
    );
}

#[test]
fn cron_next_names_the_field_at_fault() {
    let o = run(&["cron", "next", "0 0 32 * *"]);
    assert_eq!(o.status.code(), Some(2), "{}", printed(&o));
    assert!(
        printed(&o).contains("day-of-month: 32 is outside 1\u{2013}31"),
        "{}",
        printed(&o)
    );
    let o = run(&["cron", "next", "0 0 31 2 *"]);
    assert!(printed(&o).contains("never fires"), "{}", printed(&o));
}

#[test]
fn serve_refuses_a_host_name_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.toml");
    std::fs::write(&path, "[api]\nlisten = \"myhost:8080\"\n").unwrap();
    let o = run(&["serve", "--config", path.to_str().unwrap()]);
    assert!(!o.status.success(), "{}", printed(&o));
    let text = printed(&o);
    assert!(
        text.contains("api.listen") && text.contains("host name") && text.contains("api.token"),
        "{text}"
    );
}

/// One truth for resume: the API's document and the CLI's help say what the server does.
#[tokio::test]
async fn resume_runs_what_a_short_pause_skipped_as_documented() {
    let api = Api::new().await;
    api.put("/v1/jobs/r", json!({"every": "1s", "handler": "noop"}))
        .await;
    let paused = api.post("/v1/jobs/r/pause", None).await;
    assert_eq!(paused.body["status"], "paused");
    // Time passing is the point, not a wait for a signal: the pause must skip a firing, so a
    // firing of the every-1s job has to fall due while it is paused (2.5 s: over two periods).
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let now = chrono::Utc::now();
    let resumed = api.post("/v1/jobs/r/resume", None).await;
    assert_eq!(resumed.body["status"], "active", "{:#}", resumed.body);
    let next: chrono::DateTime<chrono::Utc> =
        resumed.body["next_at"].as_str().unwrap().parse().unwrap();
    assert!(
        next < now,
        "the firing the pause skipped is scheduled, not one computed from now: {next} vs {now}"
    );

    let words = "scheduled from the first firing after the pause began";
    let doc = serde_json::to_value(keyfire_server::api::openapi()).unwrap();
    let op = &doc["paths"]["/v1/jobs/{id}/resume"]["post"];
    let text = format!("{} {}", op["summary"], op["description"]);
    assert!(text.contains(words), "{text}");
    assert!(!text.contains("computed from now"), "{text}");
    let help = printed(&run(&["job", "resume", "--help"]));
    assert!(help.contains("after the pause began"), "{help}");
    assert!(!help.contains("computed from now"), "{help}");
}

/// Send a raw HTTP/1.1 request (head, then the whole body) and read the status line back.
async fn raw_exchange(
    addr: std::net::SocketAddr,
    head: &str,
    body: &[u8],
) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(head.as_bytes()).await?;
    s.write_all(body).await?;
    let mut buf = vec![0u8; 4096];
    let mut got = Vec::new();
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    Ok(String::from_utf8_lossy(&got).to_string())
}

/// A client that sends its whole body before reading (no `Expect: 100-continue`) reads the
/// 413, instead of a connection reset mid-upload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_body_gets_a_413_the_client_can_read() {
    let mut w = crate::support::World::new().await;
    w.settings.api.listen = "127.0.0.1:0".into();
    w.settings.api.max_body_bytes = 64 * 1024;
    let served =
        keyfire_server::cli::serve::start(w.settings.clone(), keyfire::Registry::with_builtins())
            .await
            .unwrap();
    let addr = served.api_addr().unwrap();
    let body = vec![b' '; 4 << 20];

    // Declared length.
    let head = format!(
        "PUT /v1/jobs/big HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let answer = raw_exchange(addr, &head, &body)
        .await
        .expect("read the answer");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");

    // Chunked: the limit is found while reading.
    let mut chunked = Vec::new();
    for piece in body.chunks(256 * 1024) {
        chunked.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        chunked.extend_from_slice(piece);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let head = format!(
        "POST /v1/tasks HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    let answer = raw_exchange(addr, &head, &chunked)
        .await
        .expect("read the answer");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");

    // A client that waits for a go-ahead is answered before it sends anything.
    let head = format!(
        "PUT /v1/jobs/big HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nexpect: 100-continue\r\n\r\n",
        body.len()
    );
    let answer = raw_exchange(addr, &head, b"")
        .await
        .expect("read the answer");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    served.shutdown().await;
}

/// One rule for an id that exists, per resource: enqueueing a task (one, a batch, the library)
/// leaves it as it is; declaring a job replaces it.
#[tokio::test]
async fn an_enqueued_id_that_exists_is_left_as_it_is_everywhere() {
    let api = Api::new().await;
    let first = api
        .post(
            "/v1/tasks",
            Some(json!({"id": "t1", "after": "1h", "handler": "noop"})),
        )
        .await;
    assert_eq!(first.status, StatusCode::CREATED, "{:#}", first.body);
    let at = first.body["spec"]["at"].clone();
    let before = api.snapshot().await;

    // REST, one task: 200 with the task as it was.
    let again = api
        .post(
            "/v1/tasks",
            Some(json!({"id": "t1", "after": "2h", "handler": "noop", "params": {"x": 1}})),
        )
        .await;
    assert_eq!(again.status, StatusCode::OK, "{:#}", again.body);
    assert_eq!(again.body["spec"]["at"], at);
    assert_eq!(again.body["version"], 1);
    // REST, a batch.
    let batch = api
        .post(
            "/v1/tasks/batch",
            Some(json!({"tasks": [{"id": "t1", "after": "3h", "handler": "noop"}]})),
        )
        .await;
    assert_eq!(batch.body["tasks"][0]["spec"]["at"], at, "{:#}", batch.body);
    // The library, one and many.
    let client = api.world.client().await;
    let kept = client
        .enqueue(keyfire::JobSpec::after("t1", "4h", "noop"))
        .await
        .unwrap();
    assert_eq!(serde_json::to_value(kept.spec.at).unwrap(), at);
    client
        .enqueue_many(vec![keyfire::JobSpec::after("t1", "5h", "noop")])
        .await
        .unwrap();
    assert_eq!(
        api.snapshot().await,
        before,
        "an enqueue of an existing id wrote something"
    );

    // A job is declared, not enqueued: the same id is replaced.
    let replaced = api
        .put("/v1/jobs/t1", json!({"after": "2h", "handler": "noop"}))
        .await;
    assert_eq!(replaced.status, StatusCode::OK);
    assert_eq!(replaced.body["version"], 2);
    assert_ne!(replaced.body["spec"]["at"], at);
}

/// The document is derived from the types the server decodes: `params` is an optional object,
/// and the server refuses what the document refuses.
#[tokio::test]
async fn params_are_an_object_or_absent_as_documented() {
    let doc = serde_json::to_value(keyfire_server::api::openapi()).unwrap();
    let spec = &doc["components"]["schemas"]["JobSpec"];
    let required: Vec<&str> = spec["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(!required.contains(&"params"), "{required:?}");
    assert!(required.contains(&"handler"), "{required:?}");
    let params = spec["properties"]["params"].to_string();
    assert!(params.contains("object"), "{params}");
    assert!(doc["components"]["schemas"]["RetrySpec"]["properties"]["max_attempts"].is_object());

    let api = Api::new().await;
    let before = api.snapshot().await;
    for bad in [json!(5), json!("x"), json!([1]), json!(true)] {
        let a = api
            .put(
                "/v1/jobs/p",
                json!({"every": "1h", "handler": "noop", "params": bad}),
            )
            .await;
        a.assert_error(422, "invalid");
        assert_eq!(a.field(), "params", "{bad}");
        let a = api
            .post("/v1/tasks", Some(json!({"handler": "noop", "params": bad})))
            .await;
        a.assert_error(422, "invalid");
        assert_eq!(a.field(), "params", "{bad}");
    }
    assert_eq!(api.snapshot().await, before);
    for ok in [
        json!({"every": "1h", "handler": "noop"}),
        json!({"every": "1h", "handler": "noop", "params": null}),
        json!({"every": "1h", "handler": "noop", "params": {"a": [1]}}),
    ] {
        let a = api.put("/v1/jobs/p", ok.clone()).await;
        assert!(a.status.is_success(), "{ok}: {:#}", a.body);
    }
}

/// A delay-queue task lives under its topic; the older `/v1/tasks/{id}` paths still work and
/// are marked deprecated in the document.
#[tokio::test]
async fn queue_tasks_are_addressed_under_their_topic() {
    let api = Api::new().await;
    let added = api
        .post(
            "/v1/topics/mail/tasks",
            Some(json!({"payload": {"to": "a"}})),
        )
        .await;
    assert_eq!(added.status, StatusCode::CREATED, "{:#}", added.body);
    let id = added.body["id"].as_str().unwrap().to_string();
    let t = api.get(&format!("/v1/topics/mail/tasks/{id}")).await;
    assert_eq!(t.status, StatusCode::OK, "{:#}", t.body);
    assert_eq!(t.body["state"], "ready");
    api.get(&format!("/v1/topics/other/tasks/{id}"))
        .await
        .assert_error(404, "not_found");
    // The old path, for existing clients.
    assert_eq!(
        api.get(&format!("/v1/tasks/{id}")).await.status,
        StatusCode::OK
    );

    let p = api.post("/v1/topics/mail/pop?wait=1s", None).await;
    let token = p.body["token"].as_str().unwrap().to_string();
    let touched = api
        .post(
            &format!("/v1/topics/mail/tasks/{id}/touch"),
            Some(json!({"token": token})),
        )
        .await;
    assert_eq!(touched.status, StatusCode::OK, "{:#}", touched.body);
    api.post(
        &format!("/v1/topics/other/tasks/{id}/finish"),
        Some(json!({"token": token})),
    )
    .await
    .assert_error(404, "not_found");
    let done = api
        .post(
            &format!("/v1/topics/mail/tasks/{id}/finish"),
            Some(json!({"token": token})),
        )
        .await;
    assert_eq!(done.status, StatusCode::NO_CONTENT, "{:#}", done.body);
    assert_eq!(
        api.get(&format!("/v1/topics/mail/tasks/{id}")).await.body["state"],
        "done"
    );
    assert_eq!(
        api.delete(&format!("/v1/topics/mail/tasks/{id}"))
            .await
            .status,
        StatusCode::NO_CONTENT
    );

    let doc = serde_json::to_value(keyfire_server::api::openapi()).unwrap();
    for (old, method) in [
        ("/v1/tasks/{id}", "get"),
        ("/v1/tasks/{id}", "delete"),
        ("/v1/tasks/{id}/finish", "post"),
        ("/v1/tasks/{id}/touch", "post"),
    ] {
        let op = &doc["paths"][old][method];
        assert_eq!(op["deprecated"], true, "{method} {old}");
        assert!(
            op["description"]
                .as_str()
                .unwrap()
                .contains("/v1/topics/{topic}/tasks/{id}"),
            "{method} {old}"
        );
    }
    for new in [
        "/v1/topics/{topic}/tasks/{id}",
        "/v1/topics/{topic}/tasks/{id}/finish",
        "/v1/topics/{topic}/tasks/{id}/touch",
    ] {
        let item = doc["paths"][new].as_object().unwrap();
        assert!(
            item.values()
                .all(|op| op.get("deprecated") != Some(&json!(true))),
            "{new}"
        );
    }
}

/// A node, the client and the REST API work with a Redis user that has only the shipped
/// least-privilege ACL (`redis/keyfire.acl`): cron, fixed-rate and one-shot firings, and the
/// delay queue's add, pop and finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_runs_with_only_the_shipped_redis_acl() {
    use std::time::Duration;

    let mut w = crate::support::World::new().await;
    w.settings.redis.url = crate::support::confined_user(&w.redis, &w.settings.redis.prefix).await;
    // The user really is confined: it cannot read outside its prefix.
    let mut confined = redis::Client::open(w.settings.redis.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let refused: redis::RedisResult<Option<String>> = redis::cmd("GET")
        .arg("other:key")
        .query_async(&mut confined)
        .await;
    let refused = refused.unwrap_err();
    assert!(
        refused.code() == Some("NOPERM")
            || refused.to_string().to_lowercase().contains("permission"),
        "{refused:?}"
    );

    let node = w.node("acl").await;
    let client = w.client().await;
    client
        .upsert(keyfire::JobSpec::every("e", "300ms", "rec"))
        .await
        .unwrap();
    client
        .upsert(keyfire::JobSpec::cron("c", "* * * * * *", "rec"))
        .await
        .unwrap();
    client
        .enqueue(keyfire::JobSpec::after("t", "200ms", "rec"))
        .await
        .unwrap();
    w.recorder
        .wait_until(
            Duration::from_secs(15),
            "cron, every and one-shot firings",
            |seen| {
                ["e", "c", "t"]
                    .iter()
                    .all(|id| seen.iter().any(|s| s.job_id == *id))
            },
        )
        .await;

    let api = keyfire_server::api::router(keyfire_server::api::ApiState::new(
        w.client().await,
        &w.settings,
    ));
    let call = |method: Method, uri: String, body: Option<Value>| {
        let api = api.clone();
        async move {
            use tower::ServiceExt;
            let mut b = axum::http::Request::builder().method(method).uri(uri);
            let body = match body {
                Some(v) => {
                    b = b.header("content-type", "application/json");
                    Body::from(v.to_string())
                }
                None => Body::empty(),
            };
            let resp = api.oneshot(b.body(body).unwrap()).await.unwrap();
            let status = resp.status();
            let bytes = http_body_util::BodyExt::collect(resp.into_body())
                .await
                .unwrap()
                .to_bytes();
            (
                status,
                serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
            )
        }
    };
    let (status, added) = call(
        Method::POST,
        "/v1/topics/acl/tasks".into(),
        Some(json!({"payload": {"n": 1}})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{added:#}");
    let (status, popped) = call(Method::POST, "/v1/topics/acl/pop?wait=2s".into(), None).await;
    assert_eq!(status, StatusCode::OK, "{popped:#}");
    let (status, _) = call(
        Method::POST,
        format!(
            "/v1/topics/acl/tasks/{}/finish",
            added["id"].as_str().unwrap()
        ),
        Some(json!({"token": popped["token"]})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    node.shutdown().await;
}

/// A delay-queue payload is any JSON value, and the document says so (it said object).
#[tokio::test]
async fn a_queue_payload_is_any_json_as_documented() {
    let doc = serde_json::to_value(keyfire_server::api::openapi()).unwrap();
    let payload = &doc["components"]["schemas"]["AddTask"]["properties"]["payload"];
    assert_ne!(payload["type"], "object", "{payload:#}");
    let api = Api::new().await;
    for p in [json!(5), json!("text"), json!([1, 2]), json!({"a": 1})] {
        let a = api
            .post("/v1/topics/any/tasks", Some(json!({"payload": p})))
            .await;
        assert_eq!(a.status, StatusCode::CREATED, "{p}: {:#}", a.body);
    }
}
