//! Batch pops (`max` > 1) and batch finishes: each popped task has its own fenced token, a
//! batch finish answers each task on its own, and many consumers popping batches from two nodes'
//! promotions still get every task once, never early.

use std::collections::HashSet;
use std::time::Duration;

use keyfire::queue::{Finished, NewTask, TaskState};
use keyfire_testkit::wait;
use keyfire_testkit::world::World;
use serde_json::json;

use crate::{Consumers, past_deadlines, summary};

fn pairs(rs: &[keyfire::queue::Reserved]) -> Vec<(String, String)> {
    rs.iter().map(|r| (r.id.clone(), r.token.clone())).collect()
}

#[tokio::test]
async fn a_pop_takes_up_to_max_each_with_its_own_token() {
    let w = World::new().await;
    let q = w.queue().await;
    let ids = q
        .add_many(
            (0..25)
                .map(|i| NewTask::new("b", json!(i)).ttr(Duration::from_secs(30)))
                .collect(),
        )
        .await
        .unwrap();
    let first = q.pop_many("b", 10, Duration::ZERO).await.unwrap();
    let second = q.pop_many("b", 100, Duration::ZERO).await.unwrap();
    assert_eq!((first.len(), second.len()), (10, 15));
    let all: Vec<_> = first.iter().chain(&second).collect();
    let got: HashSet<&str> = all.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(got, ids.iter().map(String::as_str).collect(), "each once");
    let tokens: HashSet<&str> = all.iter().map(|r| r.token.as_str()).collect();
    assert_eq!(tokens.len(), 25, "a token per task");
    for r in &all {
        assert_eq!(r.deliveries, 1);
        assert!(r.deadline > r.reserved_at);
        assert_eq!(q.get(&r.id).await.unwrap().state, TaskState::Reserved);
    }
    // Nothing left: an empty list after the wait.
    let t0 = std::time::Instant::now();
    assert!(
        q.pop_many("b", 5, Duration::from_millis(300))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(t0.elapsed() >= Duration::from_millis(250), "it waited");
    let c = &q.topics().await.unwrap()[0];
    assert_eq!((c.ready, c.reserved, c.delivered), (0, 25, 25), "{c:?}");

    // One batch finish for all; again (a retried request) is fine too.
    let mut every = pairs(&first);
    every.extend(pairs(&second));
    let done = q.finish_many(&every).await.unwrap();
    assert!(done.iter().all(|o| *o == Finished::Done), "{done:?}");
    let again = q.finish_many(&every).await.unwrap();
    assert!(again.iter().all(|o| *o == Finished::Done), "{again:?}");
    let c = &q.topics().await.unwrap()[0];
    assert_eq!((c.reserved, c.done), (0, 25), "{c:?}");
    assert_eq!(q.get(&ids[3]).await.unwrap().state, TaskState::Done);
}

/// A batch finish answers each task: a stale token is refused (`lost`) while the rest finish;
/// an unknown or deleted task is `not_found`.
#[tokio::test]
async fn a_batch_finish_answers_each_task() {
    let w = World::new().await;
    let q = w.queue().await;
    let ttr = Duration::from_millis(200);
    let ids = q
        .add_many(
            (0..3)
                .map(|i| NewTask::new("f", json!(i)).ttr(ttr))
                .collect(),
        )
        .await
        .unwrap();
    let old = q.pop_many("f", 3, Duration::ZERO).await.unwrap();
    assert_eq!(old.len(), 3);
    w.until_redis_ms(past_deadlines(&old)).await;
    // Expired: the next pop takes all three back and reserves them under new tokens.
    let new = q.pop_many("f", 3, Duration::ZERO).await.unwrap();
    assert_eq!(new.len(), 3);
    assert!(new.iter().all(|r| r.deliveries == 2));
    q.delete(&ids[2]).await.unwrap();
    let by_id = |rs: &[keyfire::queue::Reserved], id: &str| {
        let r = rs.iter().find(|r| r.id == id).unwrap();
        (r.id.clone(), r.token.clone())
    };
    let batch = vec![
        by_id(&old, &ids[0]),
        by_id(&new, &ids[1]),
        by_id(&new, &ids[2]),
        ("nope".to_string(), by_id(&new, &ids[0]).1),
    ];
    let out = q.finish_many(&batch).await.unwrap();
    assert_eq!(
        out,
        [
            Finished::Lost,
            Finished::Done,
            Finished::NotFound,
            Finished::NotFound
        ]
    );
    assert_eq!(q.get(&ids[0]).await.unwrap().state, TaskState::Reserved);
    assert_eq!(q.get(&ids[1]).await.unwrap().state, TaskState::Done);
    // The single finish of the stale token is refused the same way.
    assert!(matches!(
        q.finish(&ids[0], &by_id(&old, &ids[0]).1).await,
        Err(keyfire::Error::ReservationLost(_))
    ));
    q.finish(&ids[0], &by_id(&new, &ids[0]).1).await.unwrap();
}

/// A waiting batch pop wakes when tasks become ready, and takes what is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiting_batch_pop_wakes_for_tasks() {
    let w = World::new().await;
    let _node = w.queue_node("a").await;
    let q = w.queue().await;
    let waiter = {
        let q = q.clone();
        tokio::spawn(async move {
            let t0 = std::time::Instant::now();
            let got = q.pop_many("w", 10, Duration::from_secs(10)).await.unwrap();
            (got, t0.elapsed())
        })
    };
    // The pop is waiting: Redis counts it among its blocked clients.
    wait::until("the pop to block", Duration::from_secs(5), || async {
        wait::at_least(w.blocked_clients().await, 1)
    })
    .await;
    q.add_many(
        (0..4)
            .map(|i| NewTask::new("w", json!(i)).delay(Duration::from_millis(300)))
            .collect(),
    )
    .await
    .unwrap();
    let (got, took) = waiter.await.unwrap();
    assert!(!got.is_empty() && got.len() <= 4, "{got:?}");
    assert!(took < Duration::from_secs(5), "woke in {took:?}");
    for r in &got {
        assert!(r.ready_at >= r.due_at, "never early: {r:?}");
    }
}

/// Acceptance 1 with `max` > 1: 4,000 tasks over 3 s, 4 consumers popping batches of up to 50
/// from two nodes' promotions: each delivered once, never early, all finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batch_consumers_get_each_task_once_never_early() {
    let w = World::new().await;
    let _nodes = [w.queue_node("a").await, w.queue_node("b").await];
    let q = w.queue().await;
    let n = 4_000;
    let lead = 1_500u64;
    let tasks: Vec<NewTask> = (0..n)
        .map(|i| {
            NewTask::new("bulk", json!({ "i": i }))
                .delay(Duration::from_millis(lead + (i as u64 * 3_000 / n as u64)))
                .ttr(Duration::from_secs(30))
        })
        .collect();
    let ids = q.add_many(tasks).await.unwrap();
    let queues = vec![
        w.queue().await,
        w.queue().await,
        w.client().await.queue(),
        w.client().await.queue(),
    ];
    let deliveries = Consumers::start_batched(queues, "bulk", n, Duration::from_secs(60), 50)
        .join()
        .await;
    let seen: HashSet<&str> = deliveries.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(deliveries.len(), n, "delivered once each");
    assert_eq!(seen.len(), n);
    assert!(ids.iter().all(|id| seen.contains(id.as_str())));
    for d in &deliveries {
        assert!(d.ready_ms >= d.due_ms, "early: {d:?}");
        assert_eq!(d.deliveries, 1, "{d:?}");
    }
    let (_, p99, max, line) = summary(
        "batch lateness due→ready",
        deliveries.iter().map(|d| d.ready_ms - d.due_ms).collect(),
    );
    eprintln!("{line}");
    assert!(max <= 10_000, "{line}");
    let _ = p99;
    let c = &q.topics().await.unwrap()[0];
    assert_eq!(
        (c.delayed, c.ready, c.reserved, c.done),
        (0, 0, 0, n as u64),
        "{c:?}"
    );
}
