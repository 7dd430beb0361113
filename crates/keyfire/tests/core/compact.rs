//! Compact tasks: a one-shot task is one field of a bucket hash plus its due entry (no job
//! hash, no jobs-index entry), and stays so through a successful run. Everything a user does
//! with a task still works on it, a change or a failed run expands it into a job record, and
//! tasks written in the earlier layout (a job hash each) still fire.

use std::time::Duration;

use chrono::DateTime;
use keyfire::store::{JobStatus, Keys, task_bucket};
use keyfire::{Error, JobSpec};
use keyfire_testkit::world::World;
use redis::AsyncCommands;
use serde_json::json;

/// What Redis holds for one task: (job hash exists, jobs-index entry, compact record, due entry).
async fn layout(w: &World, id: &str) -> (bool, bool, bool, bool) {
    let keys = Keys::new(&w.settings.redis.prefix);
    let mut c = w.conn().await;
    let (hash, index, compact, due): (bool, Option<f64>, bool, Option<f64>) = redis::pipe()
        .exists(keys.job(id))
        .zscore(keys.jobs(), id)
        .hexists(keys.tasks(task_bucket(id)), id)
        .zscore(keys.due(), id)
        .query_async(&mut c)
        .await
        .unwrap();
    (hash, index.is_some(), compact, due.is_some())
}

async fn compact_count(w: &World) -> i64 {
    let keys = Keys::new(&w.settings.redis.prefix);
    let n: Option<i64> = w.conn().await.get(keys.task_count()).await.unwrap();
    n.unwrap_or(0)
}

const COMPACT: (bool, bool, bool, bool) = (false, false, true, true);
const EXPANDED: (bool, bool, bool, bool) = (true, true, false, true);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_pending_tasks_read_like_jobs() {
    let w = World::new().await;
    let client = w.client().await;
    let store = client.store();
    let at = DateTime::from_timestamp_millis(w.redis_ms().await + 3_600_000).unwrap();
    let one = JobSpec::at("one", at, "rec").params(json!({"to": "a@example.com"}));
    client.enqueue(one.clone()).await.unwrap();
    client
        .enqueue_many(vec![
            JobSpec::at("two", at, "rec"),
            JobSpec::at("three", at, "rec"),
        ])
        .await
        .unwrap();
    client
        .upsert(JobSpec::every("beat", "1h", "rec"))
        .await
        .unwrap();
    for id in ["one", "two", "three"] {
        assert_eq!(layout(&w, id).await, COMPACT, "{id}");
    }
    assert_eq!(layout(&w, "beat").await, EXPANDED, "a recurring job");
    assert_eq!(compact_count(&w).await, 3);

    // Read like any job.
    let got = client.get("one").await.unwrap();
    assert_eq!(got.spec, one);
    assert_eq!(
        (got.version, got.status, got.next_ms, got.runs),
        (1, JobStatus::Active, Some(at.timestamp_millis()), 0)
    );
    assert!(got.created_ms > 0 && got.updated_ms == got.created_ms);
    let (state, _) = store.job_state("one").await.unwrap();
    assert_eq!(
        (state.version, state.next_ms),
        (1, Some(at.timestamp_millis()))
    );
    let spec = store.job_spec("one").await.unwrap().unwrap();
    assert!(spec.compact);
    assert_eq!(spec.spec, one);

    // Listed (jobs first, then pending tasks), paged, each once; counted.
    let mut listed = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = client.list(after.as_deref(), 2).await.unwrap();
        if page.is_empty() {
            break;
        }
        after = page.last().map(|j| j.spec.id.clone());
        listed.extend(page.into_iter().map(|j| j.spec.id));
    }
    assert_eq!(listed[0], "beat");
    listed.sort_unstable();
    assert_eq!(listed, ["beat", "one", "three", "two"]);
    let totals = store.totals(0).await.unwrap();
    assert_eq!(totals.jobs, 4);

    // Enqueueing an id that exists keeps the task; creating it as a new job conflicts.
    let (kept, outcome) = client
        .enqueue_with_outcome(JobSpec::at("one", at, "rec").params(json!({"to": "b"})))
        .await
        .unwrap();
    assert_eq!(outcome, keyfire::client::Upserted::Kept);
    assert_eq!(kept.spec, one);
    assert!(matches!(
        client
            .upsert_if_version(JobSpec::at("two", at, "rec"), 0)
            .await,
        Err(Error::VersionMismatch { actual: 1, .. })
    ));
    assert_eq!(
        layout(&w, "two").await,
        COMPACT,
        "a refused write changes nothing"
    );

    // Deleted: record, due entry and sentinel gone, counted down; a second delete finds none.
    client.delete("three").await.unwrap();
    assert_eq!(layout(&w, "three").await, (false, false, false, false));
    assert!(matches!(
        client.delete("three").await,
        Err(Error::NotFound(_))
    ));
    assert!(matches!(client.get("three").await, Err(Error::NotFound(_))));
    assert_eq!(compact_count(&w).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_expand_a_compact_task_first() {
    let w = World::new().await;
    let client = w.client().await;
    let now = w.redis_ms().await;
    let at = DateTime::from_timestamp_millis(now + 3_600_000).unwrap();
    for id in ["p", "u"] {
        client.enqueue(JobSpec::at(id, at, "rec")).await.unwrap();
    }
    assert_eq!(compact_count(&w).await, 2);

    // Pause and resume.
    let paused = client.pause("p").await.unwrap();
    assert_eq!(paused.status, JobStatus::Paused);
    assert_eq!(layout(&w, "p").await, (true, true, false, false));
    let resumed = client.resume("p").await.unwrap();
    assert_eq!(
        (resumed.status, resumed.next_ms),
        (JobStatus::Active, Some(at.timestamp_millis()))
    );
    assert_eq!(layout(&w, "p").await, EXPANDED);

    // Replace at version 1 (the version a compact task reads as).
    let later = DateTime::from_timestamp_millis(now + 7_200_000).unwrap();
    let replaced = client
        .upsert_if_version(JobSpec::at("u", later, "rec"), 1)
        .await
        .unwrap();
    assert_eq!(
        (replaced.version, replaced.next_ms),
        (2, Some(later.timestamp_millis()))
    );
    assert_eq!(layout(&w, "u").await, EXPANDED);
    assert_eq!(compact_count(&w).await, 0);

    // A trigger runs a compact task now, and its schedule stays.
    client.enqueue(JobSpec::at("t", at, "rec")).await.unwrap();
    let _node = w.node("n1").await;
    let firing = client.trigger("t").await.unwrap();
    w.recorder.wait_count(1, Duration::from_secs(10)).await;
    assert_eq!(w.recorder.seen()[0].firing_id, firing);
    let t = client.get("t").await.unwrap();
    assert_eq!(
        (t.status, t.next_ms, t.triggered),
        (JobStatus::Active, Some(at.timestamp_millis()), 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compact_task_stays_compact_through_its_one_firing() {
    let w = World::new().await;
    let client = w.client().await;
    let _a = w.node("a").await;
    let _b = w.node("b").await;
    let now = w.redis_ms().await;
    let at = |i: i64| now + 500 + i * 5;
    let specs: Vec<JobSpec> = (0..200)
        .map(|i| {
            JobSpec::at(
                format!("c{i}"),
                DateTime::from_timestamp_millis(at(i)).unwrap(),
                "rec",
            )
        })
        .collect();
    client.enqueue_many(specs).await.unwrap();
    w.recorder.wait_count(200, Duration::from_secs(20)).await;
    w.wait_idle(Duration::from_secs(10)).await;
    keyfire_testkit::world::assert_exactly_once(&w.recorder.seen(), 200);
    for i in [0, 99, 199] {
        let id = format!("c{i}");
        let fid = format!("{id}:{}", at(i));
        let job = client.get(&id).await.unwrap();
        assert_eq!(
            (job.status, job.runs, job.next_ms, job.last_ms, job.active),
            (JobStatus::Finished, 1, None, Some(at(i)), Some(fid.clone())),
            "{id}"
        );
        // No job hash, no index entry: its record, then its history.
        assert_eq!(layout(&w, &id).await, (false, false, true, false), "{id}");
        let runs = client.runs(&id, 5).await.unwrap();
        assert_eq!((runs.len(), runs[0].firing_id.as_str()), (1, fid.as_str()));
    }
    assert_eq!(compact_count(&w).await, 200);

    // Changed, with the instant it ran at: expanded (a change), never run again (G1).
    let again = client
        .upsert(
            JobSpec::at("c0", DateTime::from_timestamp_millis(at(0)).unwrap(), "rec")
                .params(json!({"changed": true})),
        )
        .await
        .unwrap();
    assert_eq!(
        (again.status, again.next_ms, again.last_ms, again.runs),
        (JobStatus::Finished, None, Some(at(0)), 1)
    );
    assert_eq!(layout(&w, "c0").await, (true, true, false, false));
    assert_eq!(compact_count(&w).await, 199);
    // A step of each node's sweep claims whatever is due; nothing is, and nothing runs.
    _a.sweep_once().await.unwrap();
    _b.sweep_once().await.unwrap();
    w.wait_idle(Duration::from_secs(5)).await;
    assert_eq!(w.recorder.seen_of("c0").len(), 1, "run again");
}

/// While its firing runs a compact task reads as finished with its run named; a run that
/// fails expands it (its failures, retries and history are a job hash's); one deleted while
/// it runs leaves nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compact_task_runs_fails_and_is_deleted_like_a_job() {
    let w = World::new().await;
    let client = w.client().await;
    let now = w.redis_ms().await;
    let at = now + 300;
    let when = DateTime::from_timestamp_millis(at).unwrap();
    let retry = keyfire::job::RetrySpec {
        max_attempts: Some(3),
        backoff: Some("fixed".into()),
        interval: Some("200ms".into()),
        ..Default::default()
    };
    client
        .enqueue_many(vec![
            JobSpec::at("slow", when, "slow").params(json!({"sleep_ms": 1_500})),
            JobSpec::at("gone", when, "slow").params(json!({"sleep_ms": 1_500})),
            JobSpec::at("flaky", when, "flaky")
                .params(json!({"ok_at": 2}))
                .retry(retry),
        ])
        .await
        .unwrap();
    let _a = w.node("a").await;
    w.recorder.wait_count(4, Duration::from_secs(10)).await;

    // Running: still compact, read as finished with its run named.
    let slow = client.get("slow").await.unwrap();
    assert_eq!(
        (slow.status, slow.runs, slow.last_ms, slow.active),
        (JobStatus::Finished, 1, Some(at), Some(format!("slow:{at}")))
    );
    assert_eq!(layout(&w, "slow").await, (false, false, true, false));

    // Deleted mid-run: its outcome finds nothing to record, and writes nothing.
    client.delete("gone").await.unwrap();
    w.wait_idle(Duration::from_secs(10)).await;
    assert!(matches!(client.get("gone").await, Err(Error::NotFound(_))));
    let keys = Keys::new(&w.settings.redis.prefix);
    let history: bool = w.conn().await.exists(keys.runs("gone")).await.unwrap();
    assert!(!history, "a deleted task's outcome wrote its history");

    // Failed, then retried: a job hash with both attempts in its history.
    let flaky = client.get("flaky").await.unwrap();
    assert_eq!(
        (flaky.status, flaky.runs, flaky.failures),
        (JobStatus::Finished, 2, 1)
    );
    assert_eq!(layout(&w, "flaky").await, (true, true, false, false));
    let runs = client.runs("flaky", 5).await.unwrap();
    let fates: Vec<_> = runs
        .iter()
        .map(|r| r.fate.clone().unwrap_or_default())
        .collect();
    assert_eq!(fates, ["done", "retry"]);
    assert_eq!(client.runs("slow", 5).await.unwrap().len(), 1);
    assert_eq!(layout(&w, "slow").await, (false, false, true, false));
    assert_eq!(compact_count(&w).await, 1, "slow stays compact");
}

/// Upgrade: tasks and jobs written by the earlier layout (every task a job hash with a
/// jobs-index entry) fire beside compact ones, each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_the_earlier_layout_fire_beside_compact_ones() {
    let w = World::new().await;
    let client = w.client().await;
    let store = client.store();
    let now = w.redis_ms().await;
    let at = |i: i64| DateTime::from_timestamp_millis(now + 1_000 + i * 10).unwrap();
    for i in 0..50 {
        client
            .enqueue(JobSpec::at(format!("old{i}"), at(i), "rec"))
            .await
            .unwrap();
        // The earlier layout's form of a pending task (the fields its insert wrote).
        assert!(store.expand(&format!("old{i}")).await.unwrap());
        client
            .enqueue(JobSpec::at(format!("new{i}"), at(i), "rec"))
            .await
            .unwrap();
    }
    assert_eq!(layout(&w, "old7").await, EXPANDED);
    assert_eq!(layout(&w, "new7").await, COMPACT);
    let _a = w.node("a").await;
    w.recorder.wait_count(100, Duration::from_secs(20)).await;
    w.wait_idle(Duration::from_secs(10)).await;
    keyfire_testkit::world::assert_exactly_once(&w.recorder.seen(), 100);
    assert_eq!(compact_count(&w).await, 50, "the compact ones stay so");
}
