//! The API over a real socket, served by the same code as `keyfire serve`.

use keyfire::Registry;
use serde_json::{Value, json};

use crate::support::{World, json_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_over_tcp_with_auth() {
    let mut w = World::new().await;
    w.settings.api.listen = "127.0.0.1:0".into();
    w.settings.api.token = "tcp-token".into();
    w.settings.node.id = "sock".into();
    w.settings.jobs = vec![keyfire::JobSpec::every("declared", "1h", "log")];
    let served = keyfire_server::cli::serve::start(w.settings.clone(), Registry::with_builtins())
        .await
        .unwrap();
    let base = format!("http://{}", served.api_addr().unwrap());
    crate::support::install_tls_provider();
    let http = reqwest::Client::new();

    let health: Value = json_of(http.get(format!("{base}/healthz"))).await;
    assert_eq!(health["status"], "ok");
    let refused = http.get(format!("{base}/v1/jobs")).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthorized");

    let created = http
        .put(format!("{base}/v1/jobs/over-tcp"))
        .bearer_auth("tcp-token")
        .json(&json!({"cron": "*/5 * * * * *", "handler": "noop"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let list: Value = json_of(http.get(format!("{base}/v1/jobs")).bearer_auth("tcp-token")).await;
    let ids: Vec<&str> = list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["declared", "over-tcp"]);
    let nodes: Value = json_of(
        http.get(format!("{base}/v1/nodes"))
            .bearer_auth("tcp-token"),
    )
    .await;
    assert_eq!(nodes["nodes"][0]["id"], "sock");
    served.shutdown().await;
    assert!(
        http.get(format!("{base}/healthz")).send().await.is_err(),
        "still listening after shutdown"
    );
}

#[tokio::test]
async fn non_loopback_without_token_is_refused() {
    let mut w = World::new().await;
    w.settings.api.listen = "0.0.0.0:0".into();
    let err = keyfire_server::cli::serve::start(w.settings.clone(), Registry::with_builtins())
        .await
        .err()
        .expect("must refuse");
    assert!(format!("{err:#}").contains("api.token"), "{err:#}");
    // `bind` refuses too, for names that resolve elsewhere than loopback.
    let mut api = w.settings.api.clone();
    api.listen = "0.0.0.0:0".into();
    let err = keyfire_server::api::bind(&api)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("api.token"), "{err}");
    api.token = "t".into();
    keyfire_server::api::bind(&api)
        .await
        .expect("with a token it binds");
    api.token.clear();
    api.listen = "localhost:0".into();
    keyfire_server::api::bind(&api)
        .await
        .expect("loopback without a token binds");
}
