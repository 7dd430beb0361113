//! Upgrade path: tasks queued by an earlier version (a record in the topic's delayed set plus a
//! one-shot keyfire job `q.<id>` with the `topic` handler) are still delivered, once, after an
//! upgrade: the topic's promotion and the job's firing may both come, and whichever is first
//! makes the task ready; the other does nothing.

use std::collections::HashMap;
use std::time::Duration;

use keyfire::JobSpec;
use keyfire::queue::{NewTask, TOPIC_HANDLER, TaskState, job_id};
use keyfire_testkit::wait;
use keyfire_testkit::world::World;
use redis::AsyncCommands;
use serde_json::json;

use crate::past_deadlines;
use crate::recovery::write_stranded;

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
    for id in &ids {
        wait::until(
            &format!("the job of {id} to go"),
            Duration::from_secs(10),
            || async { client.get(&job_id(id)).await.is_err() },
        )
        .await;
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

/// Write a record as the previous version of the topic queue wrote it (every field stored:
/// `max`, `deliveries`, `created`), delayed in `topic`.
async fn write_previous(w: &World, topic: &str, id: &str, due_ms: i64, ttr_ms: i64, max: u32) {
    let q = w.queue().await;
    let k = q.store().keys().clone();
    let mut conn = w.conn().await;
    let _: () = redis::pipe()
        .hset_multiple(
            k.qtask(id),
            &[
                ("state", "delayed".to_string()),
                ("topic", topic.to_string()),
                ("payload", json!({ "id": id }).to_string()),
                ("ttr", ttr_ms.to_string()),
                ("max", max.to_string()),
                ("deliveries", "0".to_string()),
                ("created", (due_ms - 1_000).to_string()),
                ("due", due_ms.to_string()),
            ],
        )
        .zadd(k.qdelayed(topic), id, due_ms)
        .sadd(k.qtopics(), topic)
        .query_async(&mut conn)
        .await
        .unwrap();
}

/// Records written by the previous version of the topic queue (which stored every field) are
/// delivered, redelivered, dead-lettered by their own `max` and read back whole; records of
/// this version leave out what can be derived or defaulted, and read back the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn records_of_the_previous_version_are_served_beside_compact_new_ones() {
    let w = World::new().await;
    let q = w.queue().await;
    let due = w.redis_ms().await + 300;
    write_previous(&w, "prev", "p-done", due, 30_000, 3).await;
    write_previous(&w, "prev", "p-dies", due, 100, 2).await;
    // The upgraded node starts after the previous version wrote them.
    let _node = w.queue_node("a").await;
    let mut got = q
        .pop_many("prev", 10, Duration::from_secs(10))
        .await
        .unwrap();
    got.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(got.len(), 2, "{got:?}");
    for r in &got {
        assert!(
            r.ready_at >= r.due_at && r.due_at.timestamp_millis() == due,
            "{r:?}"
        );
        assert_eq!(
            (r.deliveries, r.payload["id"].as_str()),
            (1, Some(r.id.as_str()))
        );
    }
    q.finish(&got[1].id, &got[1].token).await.unwrap();
    let info = q.get("p-done").await.unwrap();
    assert_eq!(info.state, TaskState::Done);
    assert_eq!(info.created_at.timestamp_millis(), due - 1_000);
    assert_eq!(info.max_deliveries, 3);
    // "p-dies" is never finished: redelivered once, then dead by its own max of 2.
    assert_eq!(got[0].id, "p-dies");
    w.until_redis_ms(past_deadlines(&got[..1])).await;
    let again = q
        .pop("prev", Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((again.id.as_str(), again.deliveries), ("p-dies", 2));
    w.until_redis_ms(past_deadlines(std::slice::from_ref(&again)))
        .await;
    // Taken back by this call or, as soon, by the node's sweep: dead either way, never ready.
    let r = q.requeue_expired("prev").await.unwrap();
    assert_eq!(r.requeued, 0, "{r:?}");
    assert!(r.dead <= 1, "{r:?}");
    assert_eq!(q.get("p-dies").await.unwrap().state, TaskState::Dead);

    // This version's records: no `deliveries`, no `created` (`c`: due minus creation), no
    // `ttr` or `max` when it is the default.
    let before = w.redis_ms().await;
    q.add_task(
        NewTask::new("now", json!(1))
            .id("n-default")
            .delay(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    q.add_task(
        NewTask::new("now", json!(1))
            .id("n-max")
            .delay(Duration::from_secs(60))
            .ttr(Duration::from_secs(5))
            .max_deliveries(2),
    )
    .await
    .unwrap();
    let k = q.store().keys().clone();
    let mut conn = w.conn().await;
    let fields = |m: HashMap<String, String>| {
        let mut f: Vec<String> = m.into_keys().collect();
        f.sort();
        f
    };
    let stored: HashMap<String, String> = conn.hgetall(k.qtask("n-default")).await.unwrap();
    assert_eq!(fields(stored), ["c", "due", "payload", "state", "topic"]);
    let stored: HashMap<String, String> = conn.hgetall(k.qtask("n-max")).await.unwrap();
    assert_eq!(
        fields(stored),
        ["c", "due", "max", "payload", "state", "topic", "ttr"]
    );
    let info = q.get("n-default").await.unwrap();
    let created = info.created_at.timestamp_millis();
    assert!(
        created >= before && created <= w.redis_ms().await,
        "{info:?}"
    );
    assert_eq!(info.due_at.timestamp_millis() - created, 60_000);
    assert_eq!((info.max_deliveries, info.deliveries), (5, 0));
    assert_eq!(info.ttr, keyfire::queue::DEFAULT_TTR);
    let info = q.get("n-max").await.unwrap();
    assert_eq!((info.max_deliveries, info.ttr), (2, Duration::from_secs(5)));
    // A pop of a record without a ttr reserves it for the default, and writes both defaults
    // into the reserved record (for touch, and the previous release's recovery).
    q.add_task(NewTask::new("dt", json!(1)).id("t-dflt"))
        .await
        .unwrap();
    let r = q.pop("dt", Duration::from_secs(5)).await.unwrap().unwrap();
    assert_eq!(r.ttr, keyfire::queue::DEFAULT_TTR);
    assert_eq!(r.deadline - r.reserved_at, chrono::Duration::seconds(60));
    let (ttr, max): (Option<String>, Option<String>) = redis::pipe()
        .hget(k.qtask("t-dflt"), "ttr")
        .hget(k.qtask("t-dflt"), "max")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!((ttr.as_deref(), max.as_deref()), (Some("60000"), Some("5")));

    // The default max holds: a task with none stored dies after its fifth delivery.
    q.add_task(
        NewTask::new("dflt", json!(1))
            .id("d")
            .ttr(Duration::from_millis(30)),
    )
    .await
    .unwrap();
    for n in 1..=5 {
        let r = q
            .pop("dflt", Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r.deliveries, n);
        // A reserved record names its max, for the previous release's recovery script.
        let max: Option<String> = conn.hget(k.qtask("d"), "max").await.unwrap();
        assert_eq!(max.as_deref(), Some("5"));
        w.until_redis_ms(past_deadlines(std::slice::from_ref(&r)))
            .await;
    }
    let r = q.requeue_expired("dflt").await.unwrap();
    assert_eq!((r.requeued, r.dead), (0, 1));
    assert_eq!(q.get("d").await.unwrap().state, TaskState::Dead);
}
