//! The `http` and `command` built-in handlers, run by a real node: `http` against a tiny local
//! axum server, `command` with /bin/echo, /bin/false and /bin/sh.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use keyfire::config::HandlerSettings;
use keyfire::store::RunRecord;
use keyfire::{Client, Error, JobSpec, Node, Registry};
use serde_json::json;

use crate::support::World;
use crate::support::wait;

type Seen = Arc<Mutex<Vec<(HeaderMap, String)>>>;

/// A local server: /ok records what it got, /fail answers 500, /slow answers after 5 s.
async fn test_server() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let app = Router::new()
        .route(
            "/ok",
            post(move |headers: HeaderMap, body: String| {
                let s = s.clone();
                async move {
                    s.lock().unwrap().push((headers, body));
                    "fine"
                }
            }),
        )
        .route(
            "/fail",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "database on fire") }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "late"
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), seen)
}

async fn start(w: &World, handlers: &HandlerSettings) -> (keyfire::engine::NodeHandle, Client) {
    let mut settings = w.settings.clone();
    settings.node.id = "h".into();
    settings.handlers = handlers.clone();
    let registry = Registry::with_builtins_from(handlers).unwrap();
    let names = registry.names();
    let node = Node::new(settings.library(), registry)
        .start()
        .await
        .unwrap();
    let client = Client::connect(&w.settings.library())
        .await
        .unwrap()
        .allow_handlers(names);
    (node, client)
}

/// Run a one-shot job now (one attempt) and wait for its first run record.
async fn run_once(
    client: &Client,
    id: &str,
    handler: &str,
    params: serde_json::Value,
) -> RunRecord {
    let mut spec = JobSpec::after(id, "0s", handler).params(params);
    spec.retry = Some(keyfire::job::RetrySpec {
        max_attempts: Some(1),
        ..Default::default()
    });
    client.upsert(spec).await.unwrap();
    wait::until(
        &format!("a run of {id}"),
        Duration::from_secs(15),
        || async { client.runs(id, 10).await.unwrap().pop() },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_handler_success_500_timeout_and_hosts() {
    let w = World::new().await;
    let (base, seen) = test_server().await;
    let mut hs = HandlerSettings::default();
    hs.http.allowed_hosts = vec!["127.0.0.1".into()];
    let (node, client) = start(&w, &hs).await;

    let ok = run_once(
        &client,
        "call-ok",
        "http",
        json!({
            "url": format!("{base}/ok"),
            "method": "POST",
            "headers": {"x-firing": "{{firing_id}}"},
            "body": {"job": "{{job_id}}", "attempt": "{{attempt}}", "at": "{{scheduled_at}}"},
        }),
    )
    .await;
    assert_eq!(ok.outcome, "ok", "{ok:?}");
    let (headers, body) = seen.lock().unwrap()[0].clone();
    assert_eq!(headers["x-firing"], ok.firing_id.as_str());
    assert_eq!(headers["content-type"], "application/json");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["job"], "call-ok");
    assert_eq!(body["attempt"], "1");
    assert!(body["at"].as_str().unwrap().ends_with('Z'));

    let fail = run_once(
        &client,
        "call-500",
        "http",
        json!({"url": format!("{base}/fail")}),
    )
    .await;
    assert_eq!(fail.outcome, "failed");
    let err = fail.error.unwrap();
    assert!(
        err.contains("500") && err.contains("database on fire"),
        "{err}"
    );

    let slow = run_once(
        &client,
        "call-slow",
        "http",
        json!({"url": format!("{base}/slow"), "timeout": "300ms"}),
    )
    .await;
    assert_eq!(slow.outcome, "failed");
    assert!(
        slow.error.as_deref().unwrap().contains("timed out"),
        "{slow:?}"
    );

    let refused = run_once(
        &client,
        "call-elsewhere",
        "http",
        json!({"url": "http://localhost:1/x"}),
    )
    .await;
    assert_eq!(refused.outcome, "failed");
    assert!(
        refused.error.as_deref().unwrap().contains("allowed_hosts"),
        "{refused:?}"
    );
    // Params the handler cannot work with are refused when the job is written.
    let bad = client
        .upsert(JobSpec::after("call-bad", "0s", "http").params(json!({"uri": "x"})))
        .await
        .unwrap_err();
    assert!(
        matches!(bad, Error::Invalid(ref e) if e.field == "params" && e.message.contains("uri")),
        "{bad}"
    );
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_handler_is_off_unless_allowed() {
    // Off (the default): the handler is not registered, so a job naming it is refused.
    let w = World::new().await;
    let (node, client) = start(&w, &HandlerSettings::default()).await;
    let err = client
        .upsert(JobSpec::after("cmd", "0s", "command").params(json!({"program": "/bin/echo"})))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Invalid(ref e) if e.field == "handler"),
        "{err}"
    );
    node.shutdown().await;

    let w = World::new().await;
    let mut hs = HandlerSettings::default();
    hs.command.enabled = true;
    hs.command.allowed_programs = vec!["/bin/echo".into(), "/bin/false".into(), "/bin/sh".into()];
    hs.command.max_output_bytes = 64;
    let (node, client) = start(&w, &hs).await;

    let echo = run_once(
        &client,
        "echo",
        "command",
        json!({"program": "/bin/echo", "args": ["{{job_id}}", "{{attempt}}"]}),
    )
    .await;
    assert_eq!(echo.outcome, "ok", "{echo:?}");

    let f = run_once(
        &client,
        "false",
        "command",
        json!({"program": "/bin/false"}),
    )
    .await;
    assert_eq!(f.outcome, "failed");
    assert!(f.error.as_deref().unwrap().contains("status 1"), "{f:?}");

    let out = run_once(
        &client,
        "noisy",
        "command",
        json!({"program": "/bin/sh", "args": ["-c", "echo to-stdout; echo to-stderr >&2; head -c 500 /dev/zero | tr '\\0' x; exit 3"]}),
    )
    .await;
    let err = out.error.unwrap();
    assert!(
        err.contains("status 3") && err.contains("to-stdout") && err.contains("to-stderr"),
        "{err}"
    );
    assert!(
        err.contains("[output truncated]") && err.len() < 300,
        "{err}"
    );

    let env = run_once(
        &client,
        "env",
        "command",
        json!({"program": "/bin/sh", "args": ["-c", "echo $KEYFIRE_FIRING_ID; exit 9"]}),
    )
    .await;
    assert!(
        env.error.as_deref().unwrap().contains(&env.firing_id),
        "{env:?}"
    );

    let slow = run_once(
        &client,
        "sleepy",
        "command",
        json!({"program": "/bin/sh", "args": ["-c", "sleep 5"], "timeout": "200ms"}),
    )
    .await;
    assert!(
        slow.error.as_deref().unwrap().contains("timed out"),
        "{slow:?}"
    );

    let refused = run_once(&client, "ls", "command", json!({"program": "/bin/ls"})).await;
    assert_eq!(refused.outcome, "failed");
    assert!(
        refused
            .error
            .as_deref()
            .unwrap()
            .contains("allowed_programs"),
        "{refused:?}"
    );
    node.shutdown().await;
}
