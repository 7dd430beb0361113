//! Partitioned topics on one Redis: a count out of range is refused naming `partitions` and
//! writes nothing; pops visit every partition, taking from each in turn; get, delete, finish
//! and touch find a task in its partition; a count is fixed once its partitions had tasks;
//! the layout switches when every live node serves it.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use keyfire::Error;
use keyfire::queue::{MAX_PARTITIONS, NewTask, TaskState};
use keyfire::store::Keys;
use serde_json::json;

use keyfire_testkit::wait;
use keyfire_testkit::world::World;

/// The keys under the world's prefix (sorted) but the nodes' heartbeats and handler sets,
/// which change on their own: equal before and after means nothing written.
async fn keys(w: &World) -> Vec<String> {
    let mut keys = w.keys().await;
    keys.retain(|k| !k.contains(":node") && !k.ends_with(":handlers") && !k.contains(":nodes"));
    keys
}

fn field<T: std::fmt::Debug>(r: keyfire::Result<T>) -> String {
    match r {
        Err(Error::Invalid(v)) => v.field,
        other => panic!("expected a validation error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_bad_partition_count_is_refused_by_name_before_any_write() {
    let w = World::new().await;
    let q = w.queue().await;
    let before = keys(&w).await;
    assert_eq!(field(q.set_partitions("orders", 0).await), "partitions");
    assert_eq!(
        field(q.set_partitions("orders", MAX_PARTITIONS + 1).await),
        "partitions"
    );
    assert_eq!(field(q.set_partitions("a:b", 2).await), "topic");
    assert_eq!(keys(&w).await, before);
    assert_eq!(q.partitions("orders").await.unwrap(), 1);
    q.set_partitions("orders", MAX_PARTITIONS).await.unwrap();
    assert_eq!(q.partitions("orders").await.unwrap(), MAX_PARTITIONS);
}

#[tokio::test]
async fn pops_take_each_task_once_from_every_partition_in_turn() {
    let w = World::new().await;
    let node = w.queue_node("n1").await;
    let q = w.queue().await;
    wait::until(
        "the switch to the sharded layout",
        Duration::from_secs(20),
        async || q.is_sharded().await.unwrap(),
    )
    .await;
    q.set_partitions("hot", 4).await.unwrap();
    let mut ids = HashSet::new();
    let tasks: Vec<NewTask> = (0..400)
        .map(|i| {
            ids.insert(format!("h{i}"));
            NewTask::new("hot", json!({"i": i})).id(format!("h{i}"))
        })
        .collect();
    q.add_many(tasks).await.unwrap();
    // Every partition holds some (one shard: the partitions are keys of their own).
    let mut c = w.conn().await;
    let k = Keys::new(&w.settings.redis.prefix);
    let mut per_part = Vec::new();
    for p in 0..4 {
        let n: u64 = redis::cmd("ZCARD")
            .arg(k.qready(&Keys::qpart("hot", p)))
            .query_async(&mut c)
            .await
            .unwrap();
        per_part.push(n);
    }
    assert!(per_part.iter().all(|&n| n > 50), "{per_part:?}");
    assert_eq!(per_part.iter().sum::<u64>(), 400);
    // Single pops go round the partitions: the first four come from four partitions.
    let mut first = Vec::new();
    for _ in 0..4 {
        let r = q.pop("hot", Duration::from_secs(1)).await.unwrap().unwrap();
        first.push(r);
    }
    let parts: HashSet<String> = first.iter().map(|r| r.token[28..32].to_string()).collect();
    assert_eq!(
        parts.len(),
        4,
        "tokens {:?}",
        first.iter().map(|r| &r.token).collect::<Vec<_>>()
    );
    // get, touch and finish find them in their partitions.
    let r = &first[0];
    assert_eq!(q.get(&r.id).await.unwrap().state, TaskState::Reserved);
    assert_eq!(
        q.get_in("hot", &r.id).await.unwrap().state,
        TaskState::Reserved
    );
    assert!(matches!(
        q.get_in("cold", &r.id).await,
        Err(Error::TaskNotFound(_))
    ));
    q.touch(&r.id, &r.token, Some(Duration::from_secs(30)))
        .await
        .unwrap();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for r in &first {
        q.finish(&r.id, &r.token).await.unwrap();
        *seen.entry(r.id.clone()).or_default() += 1;
    }
    // Delete one still ready, by its topic.
    let victim = (0..400)
        .map(|i| format!("h{i}"))
        .find(|id| !seen.contains_key(id))
        .unwrap();
    q.delete_in("hot", &victim).await.unwrap();
    assert_eq!(q.get(&victim).await.unwrap().state, TaskState::Deleted);
    ids.remove(&victim);
    // Batch pops take the rest, each once; a waiting pop wakes for a task in any partition.
    while seen.len() < ids.len() {
        let got = q
            .pop_many("hot", 50, Duration::from_millis(300))
            .await
            .unwrap();
        assert!(!got.is_empty(), "{} of {} delivered", seen.len(), ids.len());
        let pairs: Vec<(String, String)> = got
            .iter()
            .map(|r| (r.id.clone(), r.token.clone()))
            .collect();
        for r in &got {
            *seen.entry(r.id.clone()).or_default() += 1;
        }
        q.finish_many(&pairs).await.unwrap();
    }
    assert!(seen.values().all(|&n| n == 1));
    assert_eq!(seen.keys().cloned().collect::<HashSet<_>>(), ids);
    let waiter = {
        let q = q.clone();
        tokio::spawn(async move { q.pop("hot", Duration::from_secs(5)).await })
    };
    // The pop is waiting: Redis counts it among its blocked clients.
    wait::until("the pop to block", Duration::from_secs(5), async || {
        wait::at_least(w.blocked_clients().await, 1)
    })
    .await;
    let started = tokio::time::Instant::now();
    q.add_task(NewTask::new("hot", json!(1)).id("late"))
        .await
        .unwrap();
    let r = waiter
        .await
        .unwrap()
        .unwrap()
        .expect("the waiting pop got it");
    assert_eq!(r.id, "late");
    assert!(started.elapsed() < Duration::from_secs(2));
    // The count is set once: not changed, and not set for a topic that had tasks.
    assert!(matches!(
        q.set_partitions("hot", 2).await,
        Err(Error::PartitionsSet { partitions: 4, .. })
    ));
    assert_eq!(q.partitions("hot").await.unwrap(), 4);
    q.set_partitions("hot", 4).await.unwrap();
    q.add_task(NewTask::new("used", json!(1))).await.unwrap();
    assert!(matches!(
        q.set_partitions("used", 3).await,
        Err(Error::PartitionsSet { partitions: 1, .. })
    ));
    assert_eq!(q.partitions("used").await.unwrap(), 1);
    node.shutdown().await;
}
