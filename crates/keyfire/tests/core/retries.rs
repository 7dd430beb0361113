//! Retries, dead letters and replays; triggers; history and counts.

use std::time::Duration;

use keyfire::JobSpec;
use keyfire::job::RetrySpec;
use keyfire::store::{JobStatus, RunRecord};
use keyfire_testkit::wait;
use keyfire_testkit::world::World;
use serde_json::json;

/// Each run's outcome, attempt and fate, oldest first.
fn outcomes(runs: &[RunRecord]) -> Vec<(&str, u32, Option<&str>)> {
    runs.iter()
        .rev()
        .map(|r| (r.outcome.as_str(), r.attempt, r.fate.as_deref()))
        .collect()
}

fn fixed(max_attempts: u32, interval: &str) -> RetrySpec {
    RetrySpec {
        max_attempts: Some(max_attempts),
        backoff: Some("fixed".into()),
        interval: Some(interval.into()),
        ..Default::default()
    }
}

/// Fails twice, then succeeds, with fixed 200 ms retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_twice_then_succeeding_takes_three_spaced_attempts() {
    let w = World::new().await;
    let nodes = [w.node("a").await, w.node("b").await];
    let client = w.client().await;
    let spec = JobSpec::after("flaky", "0s", "flaky")
        .params(json!({"ok_at": 3}))
        .retry(fixed(5, "200ms"));
    client.enqueue(spec).await.unwrap();
    w.recorder.wait_count(3, Duration::from_secs(10)).await;
    w.wait_idle(Duration::from_secs(5)).await;

    let seen = w.recorder.seen();
    assert_eq!(seen.len(), 3, "{seen:?}");
    let attempts: Vec<u32> = seen.iter().map(|s| s.attempt).collect();
    assert_eq!(attempts, [1, 2, 3]);
    assert!(
        seen.iter().all(|s| s.firing_id == seen[0].firing_id),
        "one firing id"
    );
    for pair in seen.windows(2) {
        let gap = pair[1].claimed_ms - pair[0].start_ms;
        assert!(
            gap >= 200,
            "attempts {} → {} only {gap} ms apart",
            pair[0].attempt,
            pair[1].attempt
        );
    }
    let runs = client.runs("flaky", 10).await.unwrap();
    assert_eq!(
        outcomes(&runs),
        [
            ("failed", 1, Some("retry")),
            ("failed", 2, Some("retry")),
            ("ok", 3, Some("done"))
        ]
    );
    let job = client.get("flaky").await.unwrap();
    assert_eq!((job.runs, job.failures, job.dead), (3, 2, 0));
    assert_eq!(job.status, JobStatus::Finished);
    assert!(client.dead_letters("flaky", 10).await.unwrap().is_empty());
    for n in nodes {
        n.shutdown().await;
    }
}

/// With max attempts 2 the task lands in dead letters, and
/// replays from there (as attempt 1 of the same firing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_task_replays_from_dead_letters() {
    let w = World::new().await;
    let node = w.node("a").await;
    let client = w.client().await;
    let spec = JobSpec::after("doomed", "0s", "flaky")
        .params(json!({"ok_at": 3}))
        .retry(fixed(2, "100ms"));
    client.enqueue(spec.clone()).await.unwrap();
    w.recorder.wait_count(2, Duration::from_secs(10)).await;
    w.wait_idle(Duration::from_secs(5)).await;
    let dead = client.dead_letters("doomed", 10).await.unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].attempts, 2);
    assert_eq!(dead[0].error.as_deref(), Some("attempt 2 fails"));
    let fid = dead[0].firing_id.clone();
    assert_eq!(client.get("doomed").await.unwrap().dead, 1);

    // Fix the cause (the handler now succeeds at once), then replay.
    let mut fixed_spec = client.get("doomed").await.unwrap().spec;
    fixed_spec.params = json!({"ok_at": 1});
    client.upsert(fixed_spec).await.unwrap();
    assert_eq!(client.replay_dead("doomed", Some(&fid)).await.unwrap(), 1);
    w.recorder.wait_count(3, Duration::from_secs(10)).await;
    w.wait_idle(Duration::from_secs(5)).await;
    let replayed = w.recorder.seen().pop().unwrap();
    assert_eq!(
        (replayed.firing_id.as_str(), replayed.attempt),
        (fid.as_str(), 1)
    );
    assert!(client.dead_letters("doomed", 10).await.unwrap().is_empty());
    assert_eq!(client.runs("doomed", 1).await.unwrap()[0].outcome, "ok");

    // Purge: a second doomed task's dead letter goes away without running again.
    client
        .enqueue(
            JobSpec::after("doomed2", "0s", "flaky")
                .params(json!({"ok_at": 9}))
                .retry(fixed(1, "1s")),
        )
        .await
        .unwrap();
    w.recorder.wait_count(4, Duration::from_secs(10)).await;
    w.wait_idle(Duration::from_secs(5)).await;
    assert_eq!(client.purge_dead("doomed2", None).await.unwrap(), 1);
    assert!(client.dead_letters("doomed2", 10).await.unwrap().is_empty());
    node.shutdown().await;
}

/// A handler can ask for a delay (`Retry { after }`) or refuse retries (`Abort`); a run that
/// takes longer than its timeout is a failed attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asked_delay_abort_and_timeout() {
    let w = World::new().await;
    let node = w.node("a").await;
    let client = w.client().await;
    let policy = fixed(3, "10ms");
    client
        .enqueue(
            JobSpec::after("later", "0s", "ask")
                .params(json!({"after_ms": 400}))
                .retry(policy.clone()),
        )
        .await
        .unwrap();
    client
        .enqueue(
            JobSpec::after("refuse", "0s", "ask")
                .params(json!({"abort": true}))
                .retry(policy.clone()),
        )
        .await
        .unwrap();
    let mut hang = JobSpec::after("hang", "0s", "sleepy")
        .params(json!({"sleep_ms": 5_000}))
        .retry(fixed(2, "10ms"));
    hang.timeout = Some("200ms".into());
    client.enqueue(hang).await.unwrap();
    w.recorder
        .wait_until(Duration::from_secs(10), "all attempts", |s| {
            let n = |id: &str| s.iter().filter(|r| r.job_id == id).count();
            n("later") >= 2 && n("refuse") >= 1 && n("hang") >= 2
        })
        .await;
    w.wait_idle(Duration::from_secs(5)).await;

    let later = w.recorder.seen_of("later");
    assert_eq!(later.len(), 2);
    let gap = later[1].claimed_ms - later[0].start_ms;
    assert!(gap >= 400, "asked for 400 ms, retried after {gap} ms");
    assert_eq!(client.runs("later", 1).await.unwrap()[0].outcome, "ok");

    assert_eq!(w.recorder.seen_of("refuse").len(), 1, "Abort was retried");
    let dead = client.dead_letters("refuse", 10).await.unwrap();
    assert_eq!((dead.len(), dead[0].attempts), (1, 1));

    let runs = client.runs("hang", 10).await.unwrap();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert!(runs.iter().all(|r| r.outcome == "timeout"), "{runs:?}");
    assert_eq!(runs[0].fate.as_deref(), Some("dead"));
    node.shutdown().await;
}

/// Trigger runs a job once now without moving its schedule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_runs_once_now_without_moving_the_schedule() {
    let w = World::new().await;
    let node = w.node("a").await;
    let client = w.client().await;
    let job = client
        .upsert(JobSpec::every("hourly", "1h", "rec"))
        .await
        .unwrap();
    let fid = client.trigger("hourly").await.unwrap();
    w.recorder.wait_count(1, Duration::from_secs(5)).await;
    w.wait_idle(Duration::from_secs(5)).await;
    let seen = w.recorder.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].firing_id, fid);
    let after = client.get("hourly").await.unwrap();
    assert_eq!(after.next_ms, job.next_ms, "trigger moved the schedule");
    assert_eq!((after.triggered, after.runs), (1, 1));
    assert!(matches!(
        client.trigger("nope").await,
        Err(keyfire::Error::NotFound(_))
    ));
    node.shutdown().await;
}

/// A one-shot task that succeeded is cleaned up after the retention period; one that ended in
/// the dead letters is kept (it can still be replayed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_tasks_are_cleaned_up_after_retention() {
    let mut w = World::new().await;
    w.settings.node.task_retention = Duration::from_millis(500);
    let node = w.node("a").await;
    let client = w.client().await;
    client
        .enqueue(JobSpec::after("done", "0s", "rec"))
        .await
        .unwrap();
    client
        .enqueue(
            JobSpec::after("dead", "0s", "flaky")
                .params(json!({"ok_at": 9}))
                .retry(fixed(1, "1s")),
        )
        .await
        .unwrap();
    w.recorder.wait_count(2, Duration::from_secs(5)).await;
    wait::until(
        "the finished task to be cleaned up",
        Duration::from_secs(10),
        || async { client.get("done").await.is_err() },
    )
    .await;
    assert!(
        client.runs("done", 10).await.unwrap().is_empty(),
        "its history stayed"
    );
    let dead = client.get("dead").await.unwrap();
    assert_eq!(dead.dead, 1);
    assert_eq!(client.dead_letters("dead", 10).await.unwrap().len(), 1);
    node.shutdown().await;
}

/// A manual trigger meets the overlap policy like a scheduled firing: `forbid` skips it
/// while a run is in progress.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_obeys_overlap_forbid() {
    let w = World::new().await;
    let node = w.node("a").await;
    let client = w.client().await;
    let mut spec = JobSpec::every("long", "1h", "sleepy").params(json!({"sleep_ms": 1_500}));
    spec.overlap = Some("forbid".into());
    client.upsert(spec).await.unwrap();
    let first = client.trigger("long").await.unwrap();
    w.recorder.wait_count(1, Duration::from_secs(5)).await;
    let second = client.trigger("long").await.unwrap();
    assert_ne!(first, second);
    w.wait_idle(Duration::from_secs(10)).await;
    let seen = w.recorder.seen();
    assert_eq!(
        seen.len(),
        1,
        "the second trigger ran while the first still ran: {seen:?}"
    );
    assert_eq!(client.get("long").await.unwrap().skipped, 1);
    node.shutdown().await;
}

/// History is bounded by count (the node's `history_limit`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_count_outgrows_a_bounded_history() {
    let mut w = World::new().await;
    w.settings.node.history_limit = 5;
    let node = w.node("a").await;
    let client = w.client().await;
    client
        .upsert(JobSpec::every("often", "100ms", "rec"))
        .await
        .unwrap();
    w.recorder.wait_count(12, Duration::from_secs(10)).await;
    client.pause("often").await.unwrap();
    w.wait_idle(Duration::from_secs(5)).await;
    let job = client.get("often").await.unwrap();
    let ran = w.recorder.seen().len() as u64;
    assert_eq!(job.runs, ran, "runs counter");
    assert_eq!(job.failures, 0);
    let runs = client.runs("often", 100).await.unwrap();
    assert_eq!(runs.len(), 5, "history not bounded");
    assert!(
        runs.windows(2)
            .all(|p| p[0].scheduled_ms > p[1].scheduled_ms),
        "newest first"
    );
    node.shutdown().await;
}

/// A dead letter replayed starts again at attempt 1 under the same firing id. A stale run of
/// attempt 1 (its node froze past the lease, the firing went to the dead letters) that ends
/// before or while the replay runs on another node must not be taken for the replay's
/// outcome: it has no lease, or the lock names another holder, so it is fenced and the
/// replay's outcome is recorded.
/// Driven through the store's scripts, one step at a time, so every interleaving is exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_run_cannot_complete_a_replay_of_its_firing() {
    use crate::scripts::{LIMITS, claim_args, run_record};
    use keyfire::store::{ClaimArgs, ClaimReply, Fate};

    let w = World::new().await;
    let client = w.client().await;
    let store = client.store();
    let now = w.redis_ms().await;
    let at = chrono::DateTime::from_timestamp_millis(now - 10).unwrap();
    client
        .enqueue(JobSpec::at("t", at, "rec").retry(fixed(1, "1s")))
        .await
        .unwrap();
    let at_ms = store.get_job("t").await.unwrap().unwrap().next_ms.unwrap();
    let args = ClaimArgs {
        lease_ms: 100,
        ahead_ms: 0,
        tolerance_ms: 60_000,
        ..claim_args(store, "t", at_ms, None).await
    };
    let claimed = store.claim(&args).await.unwrap();
    assert!(
        matches!(claimed, ClaimReply::Claimed { attempt: 1, .. }),
        "{claimed:?}"
    );

    // n1 freezes: its lease runs out and the takeover, with no attempt left, dead-letters it.
    wait::until("the takeover", Duration::from_secs(5), async || match store
        .recover("t", at_ms, 1, 10, 10)
        .await
        .unwrap()
    {
        Some(0) => true,
        None => false,
        Some(n) => panic!("granted attempt {n} past max_attempts 1"),
    })
    .await;
    assert_eq!(store.dead_op("t", true, None).await.unwrap(), Some(1));
    let record = |node: &str| run_record("t", at_ms, 1, now, node, "ok");
    // n1 wakes up while the replay is queued: refused (no lease of its own), the replay
    // stays queued.
    let (fate, _) = store
        .complete("t", &record("n1"), &LIMITS, None)
        .await
        .unwrap();
    assert_eq!(fate, Fate::Fenced);
    let replay = store
        .claim_retry("t", at_ms, "n2", 30_000, "allow", None)
        .await
        .unwrap();
    assert!(
        matches!(replay, ClaimReply::Claimed { attempt: 1, .. }),
        "{replay:?}"
    );

    // n1 reports attempt 1 again while the replay runs: refused, its lease and lock stay.
    let (fate, _) = store
        .complete("t", &record("n1"), &LIMITS, None)
        .await
        .unwrap();
    assert_eq!(fate, Fate::Fenced);
    assert_eq!(
        store.expired_leases(0, i64::MAX, 10).await.unwrap().len(),
        1
    );
    // The replay's own outcome is the one recorded.
    let (fate, _) = store
        .complete("t", &record("n2"), &LIMITS, None)
        .await
        .unwrap();
    assert_eq!(fate, Fate::Done);
    let runs = store.runs("t", 10).await.unwrap();
    // Newest first: the replay's success, then the lost first run (its lock had expired
    // with its lease, so the takeover could not name its node).
    let outcomes: Vec<(&str, &str)> = runs
        .iter()
        .map(|r| (r.outcome.as_str(), r.fate.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(outcomes, [("ok", "done"), ("lost", "dead")], "{runs:?}");
    assert_eq!(runs[0].node, "n2");
}

/// A queued attempt (a retry, a trigger, a takeover) never runs a version of its job older
/// than the job's: the claim names the version the node will run it with, and a node whose
/// cached spec is behind (it missed the change message) is told the job changed, with
/// nothing written, so it reads the job again. Seen in a chaos round before the check: a
/// retry ran with the spec of the version before an update.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_attempt_is_not_claimed_with_an_older_version_of_its_job() {
    use keyfire::store::ClaimReply;

    let w = World::new().await;
    let client = w.client().await;
    let store = client.store();
    client
        .upsert(JobSpec::every("j", "1h", "rec"))
        .await
        .unwrap();
    let v1 = store.job_spec("j").await.unwrap().unwrap();
    let fid = client.trigger("j").await.unwrap();
    let (_, at_ms) = keyfire::store::parse_firing_id(&fid).unwrap();
    // The job changes after the attempt was queued.
    client
        .upsert(JobSpec::every("j", "1h", "rec").params(json!({ "v": 2 })))
        .await
        .unwrap();
    let v2 = store.job_spec("j").await.unwrap().unwrap();
    assert_eq!(v2.version, v1.version + 1);

    let claim = |v: &keyfire::store::StoredSpec| {
        let expect = Some((v.generation, v.version));
        async move {
            store
                .claim_retry("j", at_ms, "n1", 30_000, "allow", expect)
                .await
                .unwrap()
        }
    };
    assert_eq!(
        claim(&v1).await,
        ClaimReply::VersionChanged {
            version: v2.version
        }
    );
    // Nothing was written: the attempt is still queued, and claimed with the current version.
    assert!(
        matches!(claim(&v2).await, ClaimReply::Claimed { attempt: 1, .. }),
        "the attempt was not left queued"
    );
    assert_eq!(claim(&v2).await, ClaimReply::Stale, "claimed twice");
}

/// A handler that panics fails its attempt, which is retried, wherever the panic comes
/// from: the call that makes the handler's future, the future's first poll, or a later one.
/// Runs first until the node knows its runs are short, so the attempts start where they
/// were claimed (a run that waits goes on in a task of its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_fails_its_attempt_and_is_retried() {
    let w = World::new().await;
    let node = w.node("a").await;
    let client = w.client().await;
    client
        .enqueue(JobSpec::after("warm", "0s", "rec"))
        .await
        .unwrap();
    w.recorder.wait_count(1, Duration::from_secs(10)).await;
    w.wait_idle(Duration::from_secs(5)).await;
    for at in ["call", "poll", "later"] {
        client
            .enqueue(
                JobSpec::after(format!("panics-{at}"), "0s", "panicky")
                    .params(json!({ "at": at }))
                    .retry(fixed(2, "10ms")),
            )
            .await
            .unwrap();
    }
    w.recorder.wait_count(4, Duration::from_secs(10)).await;
    w.wait_idle(Duration::from_secs(5)).await;
    for at in ["call", "poll", "later"] {
        let id = format!("panics-{at}");
        let seen = w.recorder.seen_of(&id);
        assert_eq!(seen.len(), 1, "{id}: the second attempt ran once");
        assert_eq!(seen[0].attempt, 2, "{id}");
        let runs = client.runs(&id, 10).await.unwrap();
        assert_eq!(
            outcomes(&runs),
            [("failed", 1, Some("retry")), ("ok", 2, Some("done"))],
            "{id}"
        );
        let error = runs[1].error.as_deref().unwrap_or_default();
        assert!(error.starts_with("handler panicked: boom"), "{id}: {error}");
    }
    node.shutdown().await;
}
