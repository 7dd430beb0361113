//! `GET /v1/jobs/{id}/why` names the cause in each situation, one test per cause, against a
//! real node; `GET /v1/jobs/{id}/runs?include=skipped` lists the ledger with the runs; bad
//! input is refused naming the field.

use std::time::Duration;

use keyfire::store::Shards;
use keyfire::{FlowLimitSpec, JobSpec};
use serde_json::{Value, json};

use crate::common::Api;

async fn why(api: &Api, id: &str) -> Value {
    let a = api.get(&format!("/v1/jobs/{id}/why")).await;
    assert_eq!(a.status.as_u16(), 200, "{:#}", a.body);
    a.body
}

/// The codes of a why answer's causes, the main one first.
fn codes(w: &Value) -> Vec<String> {
    w["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["code"].as_str().unwrap().to_string())
        .collect()
}

/// Wait until `id`'s why answer has `code` as its state.
async fn why_until(api: &Api, id: &str, code: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let w = why(api, id).await;
        if w["state"] == code {
            return w;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{id} never became {code}: {w:#}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A job `yearly` whose next firing is months away, on handler `rec`.
async fn put_yearly(api: &Api) {
    let a = api
        .call(
            axum::http::Method::PUT,
            "/v1/jobs/yearly",
            Some(json!({"cron": "0 0 1 1 *", "handler": "rec"})),
        )
        .await;
    assert_eq!(a.status.as_u16(), 201, "{:#}", a.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_a_job_waits_for_its_next_instant() {
    let api = Api::new().await;
    let node = api.world.node("a").await;
    put_yearly(&api).await;
    let w = why(&api, "yearly").await;
    node.shutdown().await;
    assert_eq!(w["state"], "waiting", "{w:#}");
    assert_eq!(codes(&w), ["waiting"]);
    assert!(w["next_in_ms"].as_i64().unwrap() > 0);
    assert_eq!(w["handler_nodes"], json!(["a"]));
    let summary = w["summary"].as_str().unwrap();
    assert!(summary.contains("next firing is at"), "{summary}");
}

/// Redis at `maxmemory`: the answer names it first (and only it: nothing else stands in the
/// job's way), with the server and its figures in the sentence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_names_a_full_redis() {
    let api = Api::new().await;
    let node = api.world.node("a").await;
    put_yearly(&api).await;
    assert_eq!(why(&api, "yearly").await["state"], "waiting");
    let used = crate::full_redis::used_memory(&api).await;
    crate::full_redis::set_maxmemory(&api, used / 2).await;
    let w = why(&api, "yearly").await;
    crate::full_redis::set_maxmemory(&api, 0).await;
    node.shutdown().await;
    assert_eq!(w["state"], "redis_full", "{w:#}");
    assert_eq!(codes(&w), ["redis_full"]);
    let summary = w["summary"].as_str().unwrap();
    assert!(summary.contains("is full"), "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_a_paused_job_says_since_when() {
    let api = Api::new().await;
    let node = api.world.node("a").await;
    api.world
        .client()
        .await
        .upsert(JobSpec::every("p", "1h", "rec"))
        .await
        .unwrap();
    let paused = api
        .call(axum::http::Method::POST, "/v1/jobs/p/pause", None)
        .await;
    assert_eq!(paused.status.as_u16(), 200);
    let w = why(&api, "p").await;
    node.shutdown().await;
    assert_eq!(w["state"], "paused", "{w:#}");
    assert!(w["paused_since"].is_string());
    assert!(w["summary"].as_str().unwrap().contains("paused (since"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_a_job_outside_its_window_names_when_it_opens() {
    let api = Api::new().await;
    let node = api.world.node("a").await;
    let mut spec = JobSpec::every("w", "1s", "rec");
    spec.start_at = Some(chrono::Utc::now() + chrono::Duration::hours(2));
    api.world.client().await.upsert(spec).await.unwrap();
    let w = why(&api, "w").await;
    node.shutdown().await;
    assert_eq!(w["state"], "outside_window", "{w:#}");
    assert!(
        w["summary"]
            .as_str()
            .unwrap()
            .contains("validity window opens")
    );
}

/// Two tasks share a limit key of one run in flight: the slow one holds it, the other waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_a_held_firing_names_its_flow_limit() {
    let api = Api::new().await;
    let client = api.world.client().await;
    client
        .put_limit(FlowLimitSpec {
            key: "k".into(),
            rate: None,
            burst: None,
            in_flight: Some(1),
        })
        .await
        .unwrap();
    let node = api.world.node("a").await;
    let mut hog = JobSpec::after("hog", "0s", "slow");
    hog.params = json!({"sleep_ms": 4_000});
    hog.limit_key = Some("k".into());
    client.enqueue(hog).await.unwrap();
    api.world
        .recorder
        .wait_until(Duration::from_secs(10), "the hog runs", |s| {
            s.iter().any(|r| r.job_id == "hog")
        })
        .await;
    let mut held = JobSpec::after("held", "0s", "rec");
    held.limit_key = Some("k".into());
    client.enqueue(held).await.unwrap();
    let w = why_until(&api, "held", "flow_limited").await;
    assert_eq!(w["flow_limit"]["key"], "k");
    assert_eq!(w["flow_limit"]["in_flight"], 1);
    assert!(w["flow_limit"]["waiting"].as_u64().unwrap() >= 1);
    assert!(w["summary"].as_str().unwrap().contains("flow limit k"));
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_names_a_handler_no_live_node_registers() {
    let api = Api::new().await;
    let node = api.world.node("a").await;
    api.world
        .client()
        .await
        .allow_handlers(["ghost"])
        .upsert(JobSpec::cron("g", "0 0 1 1 *", "ghost"))
        .await
        .unwrap();
    let w = why(&api, "g").await;
    node.shutdown().await;
    assert_eq!(w["state"], "no_handler", "{w:#}");
    assert_eq!(w["handler_nodes"], json!([]));
    assert!(w["summary"].as_str().unwrap().contains("'ghost'"));
}

/// A one-shot task failing: its error and when the next attempt is due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_a_failing_task_names_its_error_and_next_attempt() {
    let api = Api::new().await;
    let node = api.world.node("a").await;
    let mut task = JobSpec::after("f", "0s", "flaky");
    task.params = json!({"ok_at": 3});
    task.retry = Some(keyfire::job::RetrySpec {
        max_attempts: Some(3),
        backoff: Some("fixed".into()),
        interval: Some("1h".into()),
        ..Default::default()
    });
    api.world.client().await.enqueue(task).await.unwrap();
    let w = why_until(&api, "f", "retrying").await;
    node.shutdown().await;
    assert_eq!(w["retry"]["attempt"], 1, "{w:#}");
    assert_eq!(w["retry"]["error"], "attempt 1 fails");
    assert!(w["retry"]["next_attempt_at"].is_string());
    assert_eq!(w["recent"][0]["kind"], "run");
    assert!(w["summary"].as_str().unwrap().contains("attempt 2 is due"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_a_running_job_names_its_node_and_since_when() {
    let api = Api::new().await;
    let node = api.world.node("a").await;
    let mut task = JobSpec::after("r", "0s", "slow");
    task.params = json!({"sleep_ms": 3_000});
    api.world.client().await.enqueue(task).await.unwrap();
    let w = why_until(&api, "r", "running").await;
    assert_eq!(w["running"]["node"], "a", "{w:#}");
    assert_eq!(w["running"]["attempt"], 1);
    assert!(w["running"]["since"].is_string());
    assert!(w["summary"].as_str().unwrap().contains("node a's hands"));
    node.shutdown().await;
}

/// The ledger over REST: a skip in the timeline with its reason, the default answer as it
/// was (no timeline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_include_skipped_lists_the_ledger_with_the_runs() {
    let api = Api::new().await;
    let client = api.world.client().await;
    client
        .upsert(JobSpec::cron("u", "* * * * * *", "rec"))
        .await
        .unwrap();
    // Its pending firing moved 5 s back (no node claimed it), then the job changed.
    let due = (api.world.redis_ms().await / 1_000 - 5) * 1_000;
    let r = &api.world.settings.redis;
    let k = Shards::new(&r.prefix, r.shards as usize)
        .for_job("u")
        .clone();
    let _: () = redis::pipe()
        .hset(k.job("u"), "next", due)
        .zadd(k.due(), "u", due)
        .query_async(&mut api.world.conn().await)
        .await
        .unwrap();
    let mut changed = JobSpec::cron("u", "* * * * * *", "rec");
    changed.params = json!({"v": 2});
    client.upsert(changed).await.unwrap();

    let plain = api.get("/v1/jobs/u/runs").await;
    assert_eq!(plain.status.as_u16(), 200);
    assert!(plain.body.get("timeline").is_none(), "{:#}", plain.body);
    let a = api.get("/v1/jobs/u/runs?include=skipped").await;
    assert_eq!(a.status.as_u16(), 200, "{:#}", a.body);
    let entry = &a.body["timeline"][0];
    assert_eq!(entry["kind"], "skipped", "{:#}", a.body);
    assert_eq!(entry["skipped"]["reason"], "updated");
    assert_eq!(entry["skipped"]["count"], 1);
    let first = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(due).unwrap();
    assert_eq!(
        entry["skipped"]["first_at"].as_str().unwrap(),
        first.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
    );
    let w = why(&api, "u").await;
    assert_eq!(w["recent"][0]["skipped"]["reason"], "updated");
}

#[tokio::test]
async fn why_and_the_ledger_refuse_bad_input_naming_it() {
    let api = Api::new().await;
    api.get("/v1/jobs/nope/why")
        .await
        .assert_error(404, "not_found");
    api.get("/v1/jobs/nope/runs?include=skipped")
        .await
        .assert_error(404, "not_found");
    api.world
        .client()
        .await
        .upsert(JobSpec::every("j", "1h", "rec"))
        .await
        .unwrap();
    let a = api.get("/v1/jobs/j/runs?include=everything").await;
    a.assert_error(400, "bad_query");
    assert_eq!(a.field(), "include");
}
