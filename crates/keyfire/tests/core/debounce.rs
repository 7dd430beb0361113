//! Debounce of one-shot tasks: a duplicate with `on_duplicate` replace/extend changes the
//! pending task its dedup key names, in one script, however many enqueue at once; once that
//! task was claimed a duplicate creates a new one; a bad `on_duplicate` is refused by name and
//! writes nothing.

use std::sync::Arc;
use std::time::Duration;

use keyfire::client::Upserted;
use keyfire::job::{DedupSpec, Deduplicated, OnDuplicate};
use keyfire::{Error, JobSpec};
use keyfire_testkit::world::World;
use serde_json::json;

fn task(after: &str, on: OnDuplicate, params: serde_json::Value) -> JobSpec {
    JobSpec::after("", after, "rec")
        .params(params)
        .dedup(DedupSpec::key("digest:u1", "1h").with_on_duplicate(on))
}

/// 3 clients enqueue 30 duplicates each at once with `replace_extend`, each its own delay (in
/// a scrambled order) and params: one task, due at the latest of the instants, holding the
/// params of one of them; a last duplicate's params are held, and it runs once, with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_duplicates_replace_and_extend_one_pending_task() {
    let mut w = World::new().await;
    w.settings.redis.shards = 4;
    let clients = [w.client().await, w.client().await, w.client().await];
    let barrier = Arc::new(tokio::sync::Barrier::new(3));
    let mut handles = Vec::new();
    for (c, client) in clients.into_iter().enumerate() {
        let barrier = barrier.clone();
        handles.push(tokio::spawn(async move {
            barrier.wait().await;
            let outcomes = futures::future::join_all((0..30).map(|i| {
                let n = c * 30 + i;
                // Delays 1h + 0..89 s, scrambled.
                let delay = format!("1h {}s", (n * 37) % 90);
                client.enqueue_deduplicated(task(
                    &delay,
                    OnDuplicate::ReplaceExtend,
                    json!({"n": n}),
                ))
            }))
            .await;
            outcomes
                .into_iter()
                .map(|r| r.map(|(rec, how, d)| (rec.spec.id, rec.next_ms, how, d)))
                .collect::<Result<Vec<_>, Error>>()
                .unwrap()
        }));
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.await.unwrap());
    }
    let created: Vec<_> = all.iter().filter(|o| o.2 == Upserted::Created).collect();
    assert_eq!(created.len(), 1, "{created:?}");
    let id = created[0].0.clone();
    assert!(
        all.iter().all(|o| o.0 == id),
        "every enqueue answers the one task"
    );
    assert!(
        all.iter()
            .filter(|o| o.2 == Upserted::Duplicate)
            .all(|o| o.3.is_some()),
        "{all:?}"
    );
    let client = w.client().await;
    assert_eq!(
        client.store().list_ids(None, 100).await.unwrap(),
        vec![id.clone()]
    );
    let rec = client.get(&id).await.unwrap();
    // Each duplicate's instant is its enqueue plus its delay: the latest delay (89 s) enqueued
    // last is the latest instant; the task is due no earlier than any answer said.
    let latest = all.iter().filter_map(|o| o.1).max().unwrap();
    assert_eq!(rec.next_ms, Some(latest));
    let created_ms = rec.created_ms;
    // (An enqueue's instant is the Redis time it read plus its delay; the creation instant is
    // read by the script after it: a few ms later at most.)
    assert!(
        latest + 50 >= created_ms + 3_600_000 + 89_000,
        "{latest} {created_ms}"
    );
    let n = rec.spec.params["n"].as_u64().unwrap();
    assert!(n < 90);
    assert_eq!(
        rec.spec.at.unwrap().timestamp_millis(),
        latest,
        "the spec's `at` moved too"
    );

    // A last duplicate, replace only: its params, the instant as it was.
    let (after, how, done) = client
        .enqueue_deduplicated(task("1s", OnDuplicate::Replace, json!({"n": "last"})))
        .await
        .unwrap();
    assert_eq!(
        (after.spec.id.as_str(), how, done),
        (
            id.as_str(),
            Upserted::Duplicate,
            Some(Deduplicated::Replaced)
        )
    );
    assert_eq!(after.spec.params, json!({"n": "last"}));
    assert_eq!(after.next_ms, Some(latest));
    assert!(after.version > rec.version, "a change raises the version");
}

/// Extend pushes the instant back (never forward); once the task was claimed and ran, a
/// duplicate creates a new task, which runs with its own params.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_after_the_claim_creates_a_new_task() {
    let w = World::new().await;
    let node = w.node("n1").await;
    let client = w.client().await;
    let (first, how, _) = client
        .enqueue_deduplicated(task("300ms", OnDuplicate::Extend, json!({"v": 1})))
        .await
        .unwrap();
    assert_eq!(how, Upserted::Created);
    let (same, how, done) = client
        .enqueue_deduplicated(task("600ms", OnDuplicate::Extend, json!({"v": 2})))
        .await
        .unwrap();
    assert_eq!(
        (same.spec.id.as_str(), how),
        (first.spec.id.as_str(), Upserted::Duplicate)
    );
    assert_eq!(done, Some(Deduplicated::Extended));
    assert!(same.next_ms > first.next_ms);
    assert_eq!(same.spec.params, json!({"v": 1}), "extend keeps the params");
    w.recorder.wait_count(1, Duration::from_secs(10)).await;
    w.wait_idle(Duration::from_secs(20)).await;
    let (second, how, done) = client
        .enqueue_deduplicated(task("200ms", OnDuplicate::Replace, json!({"v": 3})))
        .await
        .unwrap();
    assert_eq!((how, done), (Upserted::Created, None));
    assert_ne!(second.spec.id, first.spec.id);
    w.recorder.wait_count(2, Duration::from_secs(10)).await;
    w.wait_idle(Duration::from_secs(20)).await;
    let seen = w.recorder.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].job_id, first.spec.id);
    assert_eq!(seen[1].job_id, second.spec.id);
    node.shutdown().await;
}

/// A bad `on_duplicate` is refused naming `dedup.on_duplicate`, writing nothing.
#[tokio::test]
async fn a_bad_on_duplicate_is_refused_by_name() {
    let w = World::new().await;
    let client = w.client().await;
    let before = w.keys().await;
    let mut d = DedupSpec::key("k", "1m");
    d.on_duplicate = Some("merge".into());
    match client
        .enqueue(JobSpec::after("", "1h", "rec").dedup(d))
        .await
    {
        Err(Error::Invalid(v)) => assert_eq!(v.field, "dedup.on_duplicate"),
        other => panic!("expected a validation error, got {other:?}"),
    }
    assert_eq!(w.keys().await, before);
}
