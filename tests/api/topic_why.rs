//! `GET /v1/topics/{topic}/tasks/{id}/why` through the real router: one task per state
//! (delayed, ready, ready while its topic is paused, reserved, dead, done, deleted), each
//! answer's `state` and a summary naming the task's topic; 404 for a task that is not there
//! (or is in another topic); bad topic and id refused with 422 naming the field.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::common::{Answer, Api};
use crate::support::wait;

async fn why(api: &Api, topic: &str, id: &str) -> Answer {
    let a = api.get(&format!("/v1/topics/{topic}/tasks/{id}/why")).await;
    assert_eq!(a.status, StatusCode::OK, "{:#}", a.body);
    a
}

/// The answer's main state, its task state, and that its summary names the topic and task.
fn check(a: &Answer, topic: &str, id: &str, state: &str, task_state: &str) {
    assert_eq!(a.body["state"], state, "{:#}", a.body);
    assert_eq!(a.body["task_state"], task_state, "{:#}", a.body);
    assert_eq!(a.body["causes"][0]["code"], state, "{:#}", a.body);
    let summary = a.body["summary"].as_str().unwrap();
    assert!(
        summary.contains(&format!("topic {topic}")) && summary.contains(id),
        "{summary}"
    );
    assert_eq!(a.body["topic"], topic);
    assert_eq!(a.body["id"], id);
}

async fn pop(api: &Api, topic: &str) -> Value {
    let p = api
        .post(&format!("/v1/topics/{topic}/pop?wait=1s"), None)
        .await;
    assert_eq!(p.status, StatusCode::OK, "{:#}", p.body);
    p.body
}

#[tokio::test]
async fn a_delayed_task_says_when_it_is_due() {
    let api = Api::new().await;
    let _node = api.world.queue_node("a").await;
    let id = api
        .add_task("later", json!({"payload": 1, "delay": "1h"}))
        .await;
    let a = why(&api, "later", &id).await;
    check(&a, "later", &id, "delayed", "delayed");
    let due_in = a.body["due_in_ms"].as_i64().unwrap();
    assert!((3_000_000..=3_600_000).contains(&due_in), "{due_in}");
    assert!(
        a.body["summary"]
            .as_str()
            .unwrap()
            .contains("delayed until"),
        "{:#}",
        a.body
    );
    assert_eq!(a.body["paused"], false);
}

#[tokio::test]
async fn a_ready_task_says_how_many_wait_ahead_of_it() {
    let api = Api::new().await;
    let first = api.add_task("work", json!({"payload": 1})).await;
    let second = api.add_task("work", json!({"payload": 2})).await;
    let a = why(&api, "work", &second).await;
    check(&a, "work", &second, "ready", "ready");
    assert_eq!(a.body["ready_ahead"], 1, "{:#}", a.body);
    assert!(a.body["ready_at"].is_string(), "{:#}", a.body);
    assert_eq!(why(&api, "work", &first).await.body["ready_ahead"], 0);
}

/// A topic of 4 partitions: the tasks ahead of a ready task are those of every partition that
/// a pop takes first (ready earlier, or of a higher priority), not only its own partition's.
#[tokio::test]
async fn ready_ahead_counts_every_partition_of_the_topic() {
    let api = Api::with(|s| s.redis.shards = 4).await;
    let put = api.put("/v1/topics/wide", json!({"partitions": 4})).await;
    assert_eq!(put.status, StatusCode::OK, "{:#}", put.body);
    let mut ids = Vec::new();
    for i in 0..8 {
        ids.push(api.add_task("wide", json!({"payload": i})).await);
        // Ready instants one apart at least: each task is ready after the one before.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let last = api.add_task("wide", json!({"payload": "last"})).await;
    let urgent = api
        .add_task("wide", json!({"payload": "urgent", "priority": 9}))
        .await;
    let a = why(&api, "wide", &last).await;
    assert_eq!(a.body["ready_ahead"], 9, "{:#}", a.body);
    assert!(
        a.body["summary"]
            .as_str()
            .unwrap()
            .contains("9 ready tasks of its topic"),
        "{:#}",
        a.body
    );
    assert_eq!(why(&api, "wide", &urgent).await.body["ready_ahead"], 0);
    assert_eq!(why(&api, "wide", &ids[0]).await.body["ready_ahead"], 1);
}

#[tokio::test]
async fn a_ready_task_of_a_paused_topic_names_the_pause_first() {
    let api = Api::new().await;
    let id = api.add_task("held", json!({"payload": 1})).await;
    let p = api.post("/v1/topics/held/pause", None).await;
    assert_eq!(p.status, StatusCode::OK, "{:#}", p.body);
    let a = why(&api, "held", &id).await;
    check(&a, "held", &id, "paused", "ready");
    assert_eq!(a.body["causes"][1]["code"], "ready", "{:#}", a.body);
    assert_eq!(a.body["paused"], true);
    // Resumed: ready again.
    api.post("/v1/topics/held/resume", None).await;
    check(&why(&api, "held", &id).await, "held", &id, "ready", "ready");
}

#[tokio::test]
async fn a_reserved_task_names_its_deadline_and_delivery() {
    let api = Api::new().await;
    let id = api
        .add_task(
            "busy",
            json!({"payload": 1, "ttr": "5m", "max_deliveries": 4}),
        )
        .await;
    assert_eq!(pop(&api, "busy").await["id"], id.as_str());
    let a = why(&api, "busy", &id).await;
    check(&a, "busy", &id, "reserved", "reserved");
    assert!(a.body["deadline"].is_string(), "{:#}", a.body);
    assert_eq!(
        (
            a.body["deliveries"].as_u64(),
            a.body["max_deliveries"].as_u64()
        ),
        (Some(1), Some(4))
    );
    let summary = a.body["summary"].as_str().unwrap();
    assert!(summary.contains("delivery 1 of 4"), "{summary}");
}

#[tokio::test]
async fn a_dead_task_gives_its_error_and_says_it_can_be_replayed() {
    let api = Api::new().await;
    let id = api
        .add_task(
            "fragile",
            json!({"payload": 1, "ttr": "200ms", "max_deliveries": 1}),
        )
        .await;
    assert_eq!(pop(&api, "fragile").await["id"], id.as_str());
    let q = api.world.queue().await;
    wait::until(
        "the reservation to lapse into a dead letter",
        Duration::from_secs(10),
        || async {
            q.requeue_expired("fragile").await.unwrap();
            api.get(&format!("/v1/topics/fragile/tasks/{id}"))
                .await
                .body["state"]
                == "dead"
        },
    )
    .await;
    let a = why(&api, "fragile", &id).await;
    check(&a, "fragile", &id, "dead", "dead");
    assert!(
        a.body["error"]
            .as_str()
            .unwrap()
            .contains("delivery 1 of 1"),
        "{:#}",
        a.body
    );
    assert!(a.body["finished_at"].is_string(), "{:#}", a.body);
    let summary = a.body["summary"].as_str().unwrap();
    assert!(summary.contains("replayed"), "{summary}");
}

#[tokio::test]
async fn a_done_task_says_when_it_was_finished() {
    let api = Api::new().await;
    let id = api.add_task("quick", json!({"payload": 1})).await;
    let token = pop(&api, "quick").await["token"]
        .as_str()
        .unwrap()
        .to_string();
    let f = api
        .post(
            &format!("/v1/topics/quick/tasks/{id}/finish"),
            Some(json!({ "token": token })),
        )
        .await;
    assert_eq!(f.status, StatusCode::NO_CONTENT, "{:#}", f.body);
    let a = why(&api, "quick", &id).await;
    check(&a, "quick", &id, "done", "done");
    assert!(a.body["finished_at"].is_string(), "{:#}", a.body);
}

#[tokio::test]
async fn a_deleted_task_says_so() {
    let api = Api::new().await;
    let _node = api.world.queue_node("a").await;
    let id = api
        .add_task("gone", json!({"payload": 1, "delay": "1h"}))
        .await;
    let d = api.delete(&format!("/v1/topics/gone/tasks/{id}")).await;
    assert_eq!(d.status, StatusCode::NO_CONTENT, "{:#}", d.body);
    let a = why(&api, "gone", &id).await;
    check(&a, "gone", &id, "deleted", "deleted");
}

#[tokio::test]
async fn no_such_task_is_404_and_bad_input_names_the_field() {
    let api = Api::new().await;
    let id = api.add_task("here", json!({"payload": 1})).await;
    let a = api.get("/v1/topics/here/tasks/nope/why").await;
    a.assert_error(404, "not_found");
    // In another topic: not found either.
    let a = api
        .get(&format!("/v1/topics/elsewhere/tasks/{id}/why"))
        .await;
    a.assert_error(404, "not_found");
    let a = api.get(&format!("/v1/topics/a:b/tasks/{id}/why")).await;
    a.assert_error(422, "invalid");
    assert_eq!(a.field(), "topic");
    let a = api.get("/v1/topics/here/tasks/a:b/why").await;
    a.assert_error(422, "invalid");
    assert_eq!(a.field(), "id");
    // Nothing changed: the task is still ready.
    check(&why(&api, "here", &id).await, "here", &id, "ready", "ready");
}
