//! Deduplication on enqueue: the same dedup key within its window makes one task, whatever
//! node enqueues it and however many at once; after the window, a new one.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use keyfire::client::Upserted;
use keyfire::job::DedupSpec;
use keyfire::{Client, Error, JobSpec};
use keyfire_testkit::wait;
use keyfire_testkit::world::World;
use serde_json::json;

/// The ids of every job under the world's prefix, over all shards.
async fn job_ids(client: &Client) -> Vec<String> {
    client.store().list_ids(None, 10_000).await.unwrap()
}

fn task(key: &str, window: &str) -> JobSpec {
    JobSpec::after("", "1h", "rec").dedup(DedupSpec::key(key, window))
}

/// 3 clients (each its own connection, as 3 nodes would have) enqueue the same key 100 times
/// each, all at once: one task, every caller told its id; 299 are flagged as duplicates. Once
/// the window has passed (by Redis's clock), the same key makes a new task. Jobs are spread
/// over 4 shards, so the task's id must land on the key's shard for one script to decide.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_task_per_key_and_window_across_nodes_under_concurrency() {
    let mut w = World::new().await;
    w.settings.redis.shards = 4;
    let clients = [w.client().await, w.client().await, w.client().await];
    let window_ms = 5_000;
    let barrier = Arc::new(tokio::sync::Barrier::new(3));
    let mut tasks = Vec::new();
    for client in clients {
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let outcomes = futures::future::join_all(
                (0..100).map(|_| client.enqueue_with_outcome(task("order-7:receipt", "5s"))),
            )
            .await;
            outcomes
                .into_iter()
                .map(|r| r.map(|(rec, how)| (rec.spec.id, rec.created_ms, how)))
                .collect::<Result<Vec<_>, Error>>()
                .unwrap()
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    assert_eq!(all.len(), 300);
    let created: Vec<_> = all.iter().filter(|o| o.2 == Upserted::Created).collect();
    assert_eq!(
        created.len(),
        1,
        "tasks created (first few): {:?}",
        &created[..created.len().min(3)]
    );
    let (first_id, first_created_ms, _) = created[0].clone();
    assert!(
        all.iter().all(|(id, _, how)| *id == first_id
            && (*how == Upserted::Created || *how == Upserted::Duplicate)),
        "every enqueue answers the one task"
    );
    let client = w.client().await;
    assert_eq!(job_ids(&client).await, vec![first_id.clone()]);

    // Within the window: still that task. After it: a new one, created no earlier than the
    // window's end by Redis's clock. Poll generously; the bound is only a hang guard.
    w.until_redis_ms(first_created_ms + window_ms).await;
    let (second, how) = wait::until("the window to end", Duration::from_secs(30), async || {
        let (rec, how) = client
            .enqueue_with_outcome(task("order-7:receipt", "5s"))
            .await
            .unwrap();
        if how != Upserted::Duplicate {
            return Some((rec, how));
        }
        assert_eq!(rec.spec.id, first_id);
        None
    })
    .await;
    assert_eq!(how, Upserted::Created);
    assert_ne!(second.spec.id, first_id);
    assert!(
        second.created_ms >= first_created_ms + window_ms,
        "a new task {} ms after the first, inside its {window_ms} ms window",
        second.created_ms - first_created_ms
    );
    let ids: HashSet<String> = job_ids(&client).await.into_iter().collect();
    assert_eq!(ids, HashSet::from([first_id, second.spec.id.clone()]));
    // The new task holds the key for a window of its own.
    let (again, how) = client
        .enqueue_with_outcome(task("order-7:receipt", "5s"))
        .await
        .unwrap();
    assert_eq!((again.spec.id, how), (second.spec.id, Upserted::Duplicate));
}

/// A deleted task does not hold its key: the next enqueue creates a task (and it holds the key).
#[tokio::test]
async fn a_deleted_task_does_not_block_its_key() {
    let w = World::new().await;
    let client = w.client().await;
    let (first, how) = client.enqueue_with_outcome(task("k", "1h")).await.unwrap();
    assert_eq!(how, Upserted::Created);
    client.delete(&first.spec.id).await.unwrap();
    let (second, how) = client.enqueue_with_outcome(task("k", "1h")).await.unwrap();
    assert_eq!(how, Upserted::Created);
    assert_ne!(second.spec.id, first.spec.id);
    let (third, how) = client.enqueue_with_outcome(task("k", "1h")).await.unwrap();
    assert_eq!((third.spec.id, how), (second.spec.id, Upserted::Duplicate));
}

/// `content: true`: the same handler and params (in any field order) are one task; other
/// params, another handler or another key make others. Keys and content do not mix.
#[tokio::test]
async fn content_dedup_keys_on_handler_and_params() {
    let w = World::new().await;
    let client = w.client().await;
    let by_content = |handler: &str, params: serde_json::Value, after: &str| {
        JobSpec::after("", after, handler)
            .params(params)
            .dedup(DedupSpec::content("1h"))
    };
    let (a, how) = client
        .enqueue_with_outcome(by_content(
            "rec",
            json!({"to": "x", "n": {"a": 1, "b": 2}}),
            "1h",
        ))
        .await
        .unwrap();
    assert_eq!(how, Upserted::Created);
    // Same content, another delay and field order: the instant is not part of the content.
    let (b, how) = client
        .enqueue_with_outcome(by_content(
            "rec",
            json!({"n": {"b": 2, "a": 1}, "to": "x"}),
            "2h",
        ))
        .await
        .unwrap();
    assert_eq!(
        (b.spec.id.as_str(), how),
        (a.spec.id.as_str(), Upserted::Duplicate)
    );
    assert_eq!(b, a, "the duplicate is the first task, untouched");
    for other in [
        by_content("rec", json!({"to": "y", "n": {"a": 1, "b": 2}}), "1h"),
        by_content("noop", json!({"to": "x", "n": {"a": 1, "b": 2}}), "1h"),
        JobSpec::after("", "1h", "rec")
            .params(json!({"to": "x", "n": {"a": 1, "b": 2}}))
            .dedup(DedupSpec::key("to-x", "1h")),
    ] {
        let (rec, how) = client.enqueue_with_outcome(other).await.unwrap();
        assert_eq!(how, Upserted::Created);
        assert_ne!(rec.spec.id, a.spec.id);
    }
    assert_eq!(job_ids(&client).await.len(), 4);
}

/// `enqueue_many`: tasks with a dedup key are decided one by one, within the batch and
/// against earlier enqueues; tasks without one are written in bulk as before.
#[tokio::test]
async fn enqueue_many_dedups_within_and_across_batches() {
    let mut w = World::new().await;
    w.settings.redis.shards = 3;
    let client = w.client().await;
    let out = client
        .enqueue_many_with_outcome(vec![
            task("x", "1h"),
            JobSpec::after("plain", "1h", "rec"),
            task("x", "1h"),
            task("y", "1h"),
        ])
        .await
        .unwrap();
    let how: Vec<Upserted> = out.iter().map(|o| o.1).collect();
    assert_eq!(
        how,
        [
            Upserted::Created,
            Upserted::Created,
            Upserted::Duplicate,
            Upserted::Created
        ]
    );
    assert_eq!(out[0].0, out[2].0);
    assert_eq!(out[1].0, "plain");
    assert_ne!(out[0].0, out[3].0);
    let again = client
        .enqueue_many(vec![task("y", "1h"), task("x", "1h")])
        .await
        .unwrap();
    assert_eq!(again, vec![out[3].0.clone(), out[0].0.clone()]);
    assert_eq!(job_ids(&client).await.len(), 3);
}

/// A task with a dedup key runs like any other: once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deduplicated_task_runs_once() {
    let w = World::new().await;
    let node = w.node("n1").await;
    let client = w.client().await;
    let mut ids = HashSet::new();
    for _ in 0..5 {
        let spec = JobSpec::after("", "200ms", "rec").dedup(DedupSpec::key("once", "1m"));
        ids.insert(client.enqueue(spec).await.unwrap().spec.id);
    }
    assert_eq!(ids.len(), 1);
    let id = ids.into_iter().next().unwrap();
    w.recorder.wait_count(1, Duration::from_secs(10)).await;
    w.wait_idle(Duration::from_secs(20)).await;
    let seen = w.recorder.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].job_id, id);
    node.shutdown().await;
}

/// Redis commands per enqueue, from `INFO commandstats` (commands run inside scripts count):
/// a task without dedup runs no command of the dedup branch (no GET, no SET), so dedup costs
/// it nothing; a task with a key adds one GET and one SET inside the same script; a duplicate
/// writes nothing.
#[tokio::test]
async fn redis_commands_per_enqueue() {
    let w = World::new().await;
    let client = w.client().await;
    let mut c = w.conn().await;
    let n = 50;
    // Warm up: handler names cached, scripts loaded.
    client
        .enqueue(JobSpec::after("warm", "1h", "rec"))
        .await
        .unwrap();
    client.enqueue(task("warm", "1h")).await.unwrap();

    async fn stats(
        c: &mut redis::aio::ConnectionManager,
    ) -> std::collections::BTreeMap<String, u64> {
        let mut calls = keyfire_testkit::world::command_calls(c).await;
        calls.retain(|name, _| name != "info" && name != "config|resetstat");
        calls
    }
    let mut measure = async |label: &str, specs: Vec<JobSpec>| {
        let _: () = w
            .redis
            .admin("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut c)
            .await
            .unwrap();
        for spec in specs {
            client.enqueue(spec).await.unwrap();
        }
        let s = stats(&mut c).await;
        let total: u64 = s.values().sum();
        eprintln!(
            "{label}: {:.1} commands per enqueue: {s:?}",
            total as f64 / n as f64
        );
        s
    };
    let plain = measure(
        "without dedup",
        (0..n)
            .map(|i| JobSpec::after(format!("p{i}"), "1h", "rec"))
            .collect(),
    )
    .await;
    assert!(
        !plain.contains_key("get") && !plain.contains_key("set"),
        "{plain:?}"
    );
    let created = measure(
        "with a dedup key, created",
        (0..n).map(|i| task(&format!("k{i}"), "1h")).collect(),
    )
    .await;
    assert_eq!(
        (created.get("get"), created.get("set")),
        (Some(&n), Some(&n)),
        "{created:?}"
    );
    let dup = measure(
        "with a dedup key, duplicate",
        (0..n).map(|i| task(&format!("k{i}"), "1h")).collect(),
    )
    .await;
    assert_eq!(dup.get("get"), Some(&n));
    for write in ["set", "hset", "zadd", "spublish", "incr", "del"] {
        assert!(!dup.contains_key(write), "a duplicate wrote: {dup:?}");
    }
}

/// On Redis Cluster (3 masters, 12 shards) the dedup key and its task share a slot, so the
/// deciding script runs (no CROSSSLOT): 3 clients enqueueing one key at once make one task,
/// and 30 keys make 30 tasks spread over the shards, each answering its duplicates.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dedup_works_on_redis_cluster() {
    let cluster = tokio::task::block_in_place(|| keyfire_testkit::RedisCluster::start(3, 0))
        .expect("cluster");
    let mut s = keyfire::Settings::default();
    s.redis.prefix = "kd".into();
    s.redis.mode = keyfire::config::RedisMode::Cluster;
    s.redis.nodes = cluster.nodes();
    s.redis.shards = 12;
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(Client::connect(&s).await.unwrap().allow_handlers(["rec"]));
    }
    let per_client = futures::future::join_all(clients.iter().map(|c| {
        futures::future::join_all((0..30).map(|_| c.enqueue_with_outcome(task("shared", "1h"))))
    }))
    .await;
    let outcomes: Vec<(String, Upserted)> = per_client
        .into_iter()
        .flatten()
        .map(|r| r.map(|(rec, how)| (rec.spec.id, how)).unwrap())
        .collect();
    let ids: HashSet<&String> = outcomes.iter().map(|o| &o.0).collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(
        outcomes.iter().filter(|o| o.1 == Upserted::Created).count(),
        1
    );

    let client = &clients[0];
    let mut shards = HashSet::new();
    for i in 0..30 {
        let (first, how) = client
            .enqueue_with_outcome(task(&format!("key-{i}"), "1h"))
            .await
            .unwrap();
        assert_eq!(how, Upserted::Created);
        shards.insert(client.store().shards().of(&first.spec.id));
        let (again, how) = clients[1]
            .enqueue_with_outcome(task(&format!("key-{i}"), "1h"))
            .await
            .unwrap();
        assert_eq!((again.spec.id, how), (first.spec.id, Upserted::Duplicate));
    }
    assert!(shards.len() > 3, "tasks spread over the shards: {shards:?}");
    assert_eq!(job_ids(client).await.len(), 31);
}
