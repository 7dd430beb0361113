//! The dashboard's files and the overview route, through the node's app (`api::app`) in
//! process: the files need no token, carry a strict Content-Security-Policy, and never build
//! HTML from strings; `/v1/overview` sums what the job routes show one by one.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use keyfire::job::RetrySpec;
use keyfire::{Firing, HandlerError, JobSpec};
use keyfire_server::api::{ApiState, app};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::support::World;
use crate::support::wait::{self, at_least};

const TOKEN: &str = "dash-token";

async fn get(
    router: &axum::Router,
    uri: &str,
    token: Option<&str>,
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let mut req = Request::get(uri);
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let resp = router
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = resp
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, headers, body)
}

#[tokio::test]
async fn static_files_are_served_without_auth_under_a_strict_csp() {
    let mut w = World::new().await;
    w.settings.api.token = TOKEN.into();
    let router = app(ApiState::new(w.client().await, &w.settings));

    let (status, headers, body) = get(&router, "/", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
    let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe"),
        "{csp}"
    );
    assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    let html = String::from_utf8(body).unwrap();
    assert!(html.contains(r#"<script src="/ui/app.js" defer></script>"#));
    // No inline script or style: the CSP would refuse them.
    assert_eq!(html.matches("<script").count(), 1);
    assert!(!html.contains("<style") && !html.contains("style=") && !html.contains(" on"));

    for (path, kind) in [
        ("/ui/app.js", "text/javascript; charset=utf-8"),
        ("/ui/style.css", "text/css; charset=utf-8"),
        ("/ui/favicon.svg", "image/svg+xml"),
    ] {
        let (status, headers, body) = get(&router, path, None).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert_eq!(headers[header::CONTENT_TYPE], kind, "{path}");
        assert!(!body.is_empty());
        // Revalidation answers 304 without the body.
        let etag = headers[header::ETAG].to_str().unwrap().to_string();
        let resp = router
            .clone()
            .oneshot(
                Request::get(path)
                    .header(header::IF_NONE_MATCH, &etag)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_MODIFIED, "{path}");
    }

    let (status, _, body) = get(&router, "/ui/config.json", None).await;
    assert_eq!(status, StatusCode::OK);
    let config: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(config["auth"], true);

    // The API behind it still wants the token; the API's own fallback still answers.
    assert_eq!(
        get(&router, "/v1/overview", None).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        get(&router, "/v1/overview", Some(TOKEN)).await.0,
        StatusCode::OK
    );
    assert_eq!(
        get(&router, "/ui/nope.js", Some(TOKEN)).await.0,
        StatusCode::NOT_FOUND
    );

    // Without a token configured, the page is told so.
    let open = app(ApiState::new(w.client().await, &{
        let mut s = w.settings.clone();
        s.api.token.clear();
        s
    }));
    let (_, _, body) = get(&open, "/ui/config.json", None).await;
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["auth"],
        false
    );
}

/// The script builds elements and sets text; it never parses strings as HTML.
#[test]
fn the_script_never_parses_html() {
    let js = include_str!("../../src/api/dashboard/app.js");
    for banned in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        "createContextualFragment",
        "DOMParser",
    ] {
        assert!(!js.contains(banned), "app.js uses {banned}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_sums_the_jobs() {
    let mut w = World::new().await;
    w.settings.api.token = TOKEN.into();
    // Jobs spread over shards: the overview sums every shard.
    w.settings.redis.shards = 4;
    let mut registry = w.registry();
    registry.register("explode", |_f: Firing| async move {
        Err::<(), _>(HandlerError::retry("boom"))
    });
    w.settings.node.id = "over".into();
    let node = keyfire::Node::new(w.settings.library(), registry.clone())
        .start()
        .await
        .unwrap();
    let client = w.client().await.allow_handlers(registry.names());
    let mut failing = JobSpec::every("failing", "1s", "explode");
    failing.retry = Some(RetrySpec {
        max_attempts: Some(1),
        ..RetrySpec::default()
    });
    client.upsert(failing).await.unwrap();
    client
        .upsert(JobSpec::every("steady", "1s", "noop"))
        .await
        .unwrap();
    client
        .upsert(JobSpec::cron("later", "0 3 * * *", "noop").tz("Europe/Berlin"))
        .await
        .unwrap();
    client.pause("later").await.unwrap();
    let router = app(ApiState::new(
        w.client().await.allow_handlers(registry.names()),
        &w.settings,
    ));

    // Wait for two dead letters, then stop the node so the counters hold still.
    wait::until("two dead letters", Duration::from_secs(20), async || {
        at_least(client.dead_letters("failing", 10).await.unwrap().len(), 2)
    })
    .await;
    // The live node, with the attempts it started (at its last heartbeat) and its share of
    // them (all of them: it is alone), which the dashboard's nodes table shows.
    let live = wait::until("runs_started", Duration::from_secs(20), async || {
        let (_, _, body) = get(&router, "/v1/overview", Some(TOKEN)).await;
        let o: Value = serde_json::from_slice(&body).unwrap();
        let node = o["nodes"][0].clone();
        if node["runs_started"].as_u64().is_some_and(|n| n > 0) {
            Ok(node)
        } else {
            Err(format!("{o:#}"))
        }
    })
    .await;
    assert_eq!(live["id"], "over");
    assert_eq!(live["share"], 1.0, "{live:#}");
    node.shutdown().await;

    let (status, _, body) = get(&router, "/v1/overview", Some(TOKEN)).await;
    assert_eq!(status, StatusCode::OK);
    let o: Value = serde_json::from_slice(&body).unwrap();
    let (_, _, body) = get(&router, "/v1/jobs", Some(TOKEN)).await;
    let jobs: Value = serde_json::from_slice(&body).unwrap();
    let jobs = jobs["jobs"].as_array().unwrap();
    let sum = |field: &str| jobs.iter().map(|j| j[field].as_u64().unwrap()).sum::<u64>();
    assert_eq!(o["jobs"]["total"], 3);
    assert_eq!(o["jobs"]["scanned"], 3);
    assert_eq!(o["jobs"]["complete"], true);
    assert_eq!(o["jobs"]["active"], 2);
    assert_eq!(o["jobs"]["paused"], 1);
    assert_eq!(o["totals"]["runs"], sum("runs"));
    assert_eq!(o["totals"]["failures"], sum("failures"));
    assert!(o["totals"]["failures"].as_u64().unwrap() >= 2);
    let dead = client.dead_letters("failing", 1000).await.unwrap().len() as u64;
    assert_eq!(o["dead_letters"]["total"], dead);
    assert_eq!(
        o["dead_letters"]["jobs"],
        json!([{"job_id": "failing", "count": dead}])
    );
    assert_eq!(o["totals"]["dead"], dead);
    // The node left the live set when it stopped.
    assert_eq!(o["nodes"], json!([]));
    assert!(o["now"].as_str().is_some());
}
