//! Priorities within a topic: pops (single, batch) take the highest ready first and keep the
//! order tasks became ready within a level, across a topic's partitions too; delayed tasks
//! land at their level when promoted; a bad priority is refused by name, writing nothing.

use std::time::Duration;

use keyfire::Error;
use keyfire::queue::{MAX_PRIORITY, NewTask, Reserved};
use keyfire_testkit::wait;
use keyfire_testkit::world::World;
use serde_json::json;

/// `(priority, sequence)` of what was popped, from payloads `{"p": level, "s": seq}`.
fn order(popped: &[Reserved]) -> Vec<(u64, u64)> {
    popped
        .iter()
        .map(|r| {
            assert_eq!(u64::from(r.priority), r.payload["p"].as_u64().unwrap());
            (
                r.payload["p"].as_u64().unwrap(),
                r.payload["s"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Highest level first; within a level, in the order added.
fn assert_priority_order(got: &[(u64, u64)]) {
    for w in got.windows(2) {
        let ((p0, s0), (p1, s1)) = (w[0], w[1]);
        assert!(
            p0 > p1 || (p0 == p1 && s0 < s1),
            "out of order at {:?} then {:?}: {got:?}",
            w[0],
            w[1]
        );
    }
}

/// Levels cycling 0, 3, 9, 5, 0, 3, … for `n` tasks, each its own add (so each became ready
/// after the one before).
async fn add_mixed(q: &keyfire::queue::Queue, topic: &str, n: u64) {
    let levels = [0u8, 3, 9, 5];
    for s in 0..n {
        let p = levels[(s % 4) as usize];
        q.add_task(
            NewTask::new(topic, json!({"p": p, "s": s}))
                .id(format!("{topic}-{s:04}"))
                .priority(p),
        )
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn pops_take_the_highest_level_first_and_fifo_within_it() {
    let w = World::new().await;
    let q = w.queue().await;
    add_mixed(&q, "p", 40).await;
    let mut got = Vec::new();
    while let Some(r) = q.pop("p", Duration::ZERO).await.unwrap() {
        got.push(r);
    }
    let got = order(&got);
    assert_eq!(got.len(), 40);
    assert_priority_order(&got);
    assert_eq!(got[0], (9, 2));
    assert_eq!(got[39], (0, 36));

    // Batch pops: the same order across the batches.
    add_mixed(&q, "b", 40).await;
    let mut batches = Vec::new();
    for _ in 0..4 {
        batches.extend(q.pop_many("b", 13, Duration::ZERO).await.unwrap());
    }
    let got = order(&batches);
    assert_eq!(got.len(), 40);
    assert_priority_order(&got);
}

#[tokio::test]
async fn pops_across_partitions_take_the_highest_level_of_any_partition() {
    let w = World::new().await;
    let _node = w.queue_node("n1").await;
    let producer = w.queue().await;
    wait::until(
        "the switch to the sharded layout",
        Duration::from_secs(20),
        async || producer.is_sharded().await.unwrap(),
    )
    .await;
    producer.set_partitions("hot", 4).await.unwrap();
    producer.set_partitions("hot2", 4).await.unwrap();
    add_mixed(&producer, "hot", 80).await;
    add_mixed(&producer, "hot2", 80).await;
    // A consumer of its own: it learns that the topics hold priorities from Redis (the set it
    // reads with the partition counts).
    let consumer = w.queue().await;
    let mut got = Vec::new();
    while let Some(r) = consumer.pop("hot", Duration::ZERO).await.unwrap() {
        got.push(r);
    }
    let got = order(&got);
    assert_eq!(got.len(), 80);
    // Levels never go up; within a level the order across partitions is only approximate.
    for w in got.windows(2) {
        assert!(w[0].0 >= w[1].0, "a lower level came first: {got:?}");
    }
    // Batch pops across the partitions keep the levels in order as well.
    let mut batches = Vec::new();
    loop {
        let b = consumer.pop_many("hot2", 25, Duration::ZERO).await.unwrap();
        if b.is_empty() {
            break;
        }
        batches.extend(b);
    }
    let got = order(&batches);
    assert_eq!(got.len(), 80);
    for w in got.windows(2) {
        assert!(w[0].0 >= w[1].0, "a lower level came first: {got:?}");
    }
}

#[tokio::test]
async fn delayed_tasks_land_at_their_level_when_promoted() {
    let w = World::new().await;
    let _node = w.queue_node("n1").await;
    let q = w.queue().await;
    let delay = Duration::from_millis(400);
    for s in 0..6u64 {
        let p = if s % 2 == 0 { 0 } else { 7 };
        q.add_task(
            NewTask::new("d", json!({"p": p, "s": s}))
                .id(format!("d{s}"))
                .priority(p as u8)
                .delay(delay),
        )
        .await
        .unwrap();
    }
    q.add_task(NewTask::new("d", json!({"p": 3, "s": 100})).priority(3))
        .await
        .unwrap();
    wait::until(
        "the delayed tasks' promotion",
        Duration::from_secs(20),
        async || q.topics().await.unwrap()[0].ready == 7,
    )
    .await;
    let info = q.get("d1").await.unwrap();
    assert_eq!(info.priority, 7);
    let popped = q.pop_many("d", 10, Duration::ZERO).await.unwrap();
    let levels: Vec<u64> = order(&popped).iter().map(|(p, _)| *p).collect();
    assert_eq!(levels, vec![7, 7, 7, 3, 0, 0, 0]);
    // A redelivered task goes back to its level: it comes before a level-0 task ready longer.
    let first = &popped[0];
    q.touch(&first.id, &first.token, Some(Duration::from_millis(1)))
        .await
        .unwrap();
    q.add_task(NewTask::new("d", json!({"p": 0, "s": 200})))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let again = q.pop("d", Duration::ZERO).await.unwrap().unwrap();
    assert_eq!((again.id.as_str(), again.priority), (first.id.as_str(), 7));
}

#[tokio::test]
async fn a_bad_priority_is_refused_by_name_and_writes_nothing() {
    let w = World::new().await;
    let q = w.queue().await;
    let before = w.keys().await;
    let bad = NewTask::new("p", json!(1)).priority(MAX_PRIORITY + 1);
    match q.add_task(bad.clone()).await {
        Err(Error::Invalid(v)) => assert_eq!(v.field, "priority"),
        other => panic!("expected a validation error, got {other:?}"),
    }
    match q.add_many(vec![NewTask::new("p", json!(1)), bad]).await {
        Err(Error::Invalid(v)) => assert_eq!(v.field, "tasks[1].priority"),
        other => panic!("expected a validation error, got {other:?}"),
    }
    assert_eq!(w.keys().await, before);
}
