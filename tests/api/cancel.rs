//! `POST /v1/jobs/{id}/cancel` and `POST /v1/tasks/{id}/cancel`: exact statuses, what was
//! cancelled in the answer and in the runs, refusals that write nothing.

use std::time::Duration;

use axum::http::StatusCode;
use keyfire_testkit::SilentReceiver;
use serde_json::json;

use crate::common::Api;

/// 404 for no job, 400 naming `id` for a bad one, 409 `nothing_to_cancel` for a recurring job
/// with nothing in progress; none writes anything. A pending one-shot task cancelled through
/// either route: 200 naming its firing, the task finished, its run recorded `cancelled`.
#[tokio::test]
async fn cancel_answers_each_case_exactly() {
    let api = Api::new().await;
    api.put("/v1/jobs/hourly", json!({"every": "1h", "handler": "log"}))
        .await;
    let before = api.snapshot().await;
    api.post("/v1/jobs/nope/cancel", None)
        .await
        .assert_error(404, "not_found");
    api.post("/v1/tasks/nope/cancel", None)
        .await
        .assert_error(404, "not_found");
    let bad = api.post("/v1/jobs/bad%20id/cancel", None).await;
    bad.assert_error(400, "bad_path");
    assert_eq!(bad.field(), "id");
    api.post("/v1/jobs/hourly/cancel", None)
        .await
        .assert_error(409, "nothing_to_cancel");
    assert_eq!(
        api.snapshot().await,
        before,
        "a refused cancel wrote something"
    );

    for (id, route) in [("t1", "/v1/tasks/t1/cancel"), ("t2", "/v1/jobs/t2/cancel")] {
        let created = api
            .post(
                "/v1/tasks",
                Some(json!({"id": id, "handler": "log", "after": "1h"})),
            )
            .await;
        assert_eq!(created.status, StatusCode::CREATED, "{:#}", created.body);
        let at = created.body["next_firings"][0]["utc"].clone();
        let done = api.post(route, None).await;
        assert_eq!(done.status, StatusCode::OK, "{:#}", done.body);
        assert_eq!(done.body["job_id"], id);
        assert_eq!(done.body["stopping"], json!([]));
        let cancelled = done.body["cancelled"].as_array().unwrap();
        assert_eq!(cancelled.len(), 1, "{:#}", done.body);
        assert!(
            cancelled[0]
                .as_str()
                .unwrap()
                .starts_with(&format!("{id}:")),
            "{:#}",
            done.body
        );
        let job = api.get(&format!("/v1/jobs/{id}")).await;
        assert_eq!(
            job.body["status"], "finished",
            "{:#} (was due {at})",
            job.body
        );
        let runs = api.get(&format!("/v1/jobs/{id}/runs")).await;
        assert_eq!(
            runs.body["runs"][0]["outcome"], "cancelled",
            "{:#}",
            runs.body
        );
        assert_eq!(runs.body["runs"][0]["firing_id"], cancelled[0]);
        // Never claimed, never started.
        assert_eq!(
            runs.body["runs"][0]["claimed_at"],
            json!(null),
            "{:#}",
            runs.body
        );
        assert_eq!(
            runs.body["runs"][0]["started_at"],
            json!(null),
            "{:#}",
            runs.body
        );
        // Cancelled: nothing left to cancel.
        api.post(route, None)
            .await
            .assert_error(409, "nothing_to_cancel");
    }
}

/// A running `http` firing, run by a node and cancelled through the API: 202 naming it; the
/// receiver sees its connection closed; the runs say `cancelled`, with no retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_http_firing_is_stopped_through_the_api() {
    let api = Api::new().await;
    let mut receiver = SilentReceiver::start().await;
    let addr = receiver.addr;
    let node = api.world.node("runner").await;
    let created = api
        .post(
            "/v1/tasks",
            Some(json!({
                "id": "hook",
                "handler": "http",
                "params": {"url": format!("http://{addr}/hook"), "timeout": "60s"},
                "retry": {"max_attempts": 5, "backoff": "fixed", "interval": "100ms"},
            })),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:#}", created.body);
    assert_eq!(receiver.next().await, Some("request"));
    let done = api.post("/v1/jobs/hook/cancel", None).await;
    assert_eq!(done.status, StatusCode::ACCEPTED, "{:#}", done.body);
    assert_eq!(done.body["stopping"].as_array().unwrap().len(), 1);
    assert_eq!(done.body["cancelled"], json!([]));
    assert_eq!(receiver.next().await, Some("closed"));
    let runs = keyfire_testkit::wait::until(
        "the run recorded cancelled",
        Duration::from_secs(15),
        async || {
            let runs = api.get("/v1/jobs/hook/runs").await.body["runs"].clone();
            (runs[0]["outcome"] == "cancelled").then_some(runs)
        },
    )
    .await;
    assert_eq!(runs[0]["node"], "runner");
    assert_eq!(runs[0]["firing_id"], done.body["stopping"][0]);
    assert_eq!(runs.as_array().unwrap().len(), 1, "retried: {runs:#}");
    node.shutdown().await;
}
