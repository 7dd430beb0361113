//! Upgrade path: tasks queued by an earlier version (a record in the topic's delayed set plus a
//! one-shot keyfire job `q.<id>` with the `topic` handler) are still delivered, once, after an
//! upgrade: the topic's promotion and the job's firing may both come, and whichever is first
//! makes the task ready; the other does nothing.

use std::time::Duration;

use keyfire::JobSpec;
use keyfire::queue::{TOPIC_HANDLER, TaskState, job_id};
use serde_json::json;

use crate::recovery::write_stranded;
use crate::support::World;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tasks_queued_as_one_shot_jobs_are_delivered_once() {
    let w = World::new().await;
    let _nodes = [w.queue_node("a").await, w.queue_node("b").await];
    let q = w.queue().await;
    let client = w.client().await;
    let base = w.redis_ms().await + 800;
    let n = 40;
    let mut ids = Vec::new();
    for i in 0..n {
        let id = format!("old-{i}");
        let due = base + i * 10;
        write_stranded(&w, "legacy", &id, due, true).await;
        let at = chrono::DateTime::from_timestamp_millis(due).unwrap();
        client
            .enqueue(
                JobSpec::at(job_id(&id), at, TOPIC_HANDLER)
                    .params(json!({"topic": "legacy", "task": id})),
            )
            .await
            .unwrap();
        ids.push(id);
    }
    let mut got = Vec::new();
    while got.len() < n as usize {
        let batch = q
            .pop_many("legacy", 16, Duration::from_secs(10))
            .await
            .unwrap();
        assert!(!batch.is_empty(), "delivered so far: {got:?}");
        for r in batch {
            assert!(r.ready_at >= r.due_at, "never early: {r:?}");
            assert_eq!(r.deliveries, 1);
            q.finish(&r.id, &r.token).await.unwrap();
            got.push(r.id);
        }
    }
    got.sort();
    ids.sort();
    assert_eq!(got, ids, "each once");
    // The jobs fire (or fired) and find nothing left to do: no second delivery.
    assert!(
        q.pop("legacy", Duration::from_millis(1_500))
            .await
            .unwrap()
            .is_none()
    );
    for id in &ids {
        assert_eq!(q.get(id).await.unwrap().state, TaskState::Done);
    }
    // Each job did its work and is gone.
    let end = tokio::time::Instant::now() + Duration::from_secs(10);
    for id in &ids {
        while client.get(&job_id(id)).await.is_ok() {
            assert!(tokio::time::Instant::now() < end, "job of {id} left");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Deleting a task of an earlier version deletes its job too, and it is never delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleting_an_old_task_deletes_its_job() {
    let w = World::new().await;
    let _node = w.queue_node("a").await;
    let q = w.queue().await;
    let client = w.client().await;
    let due = w.redis_ms().await + 500;
    write_stranded(&w, "legacy", "old", due, true).await;
    let at = chrono::DateTime::from_timestamp_millis(due).unwrap();
    client
        .enqueue(
            JobSpec::at(job_id("old"), at, TOPIC_HANDLER)
                .params(json!({"topic": "legacy", "task": "old"})),
        )
        .await
        .unwrap();
    q.delete("old").await.unwrap();
    assert!(matches!(
        client.get(&job_id("old")).await,
        Err(keyfire::Error::NotFound(_))
    ));
    assert!(
        q.pop("legacy", Duration::from_millis(1_500))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(q.get("old").await.unwrap().state, TaskState::Deleted);
}
