//! Cancel (`Client::cancel`): a running firing is stopped on whichever node runs it (a Rust
//! handler's token, an `http` call's connection, a `command`'s process group) and recorded
//! `cancelled`, never retried, also when its node dies before it records; a pending one-shot
//! instant and a queued attempt are cancelled before they run; an unknown job, a bad id and
//! nothing to cancel are told apart.

use std::time::Duration;

use keyfire::config::HandlerSettings;
use keyfire::job::RetrySpec;
use keyfire::store::{JobStatus, RunRecord};
use keyfire::{Client, JobSpec, Node, Registry};
use keyfire_testkit::world::World;
use keyfire_testkit::{SilentReceiver, wait};
use serde_json::json;

fn retries(max_attempts: u32, interval: &str) -> RetrySpec {
    RetrySpec {
        max_attempts: Some(max_attempts),
        backoff: Some("fixed".into()),
        interval: Some(interval.into()),
        ..Default::default()
    }
}

/// Enqueue `id`, a run of `sleepy` for a minute (five attempts), and wait until it started.
async fn start_a_minute_long_run(w: &World, client: &Client, id: &str) {
    client
        .enqueue(
            JobSpec::after(id, "0s", "sleepy")
                .params(json!({"sleep_ms": 60_000}))
                .retry(retries(5, "100ms")),
        )
        .await
        .unwrap();
    w.recorder.wait_count(1, Duration::from_secs(10)).await;
}

/// The newest run record of `id`, once there is one with outcome `cancelled`.
async fn cancelled_record(client: &Client, id: &str) -> RunRecord {
    wait::until(
        "a cancelled run record",
        Duration::from_secs(15),
        async || {
            let runs = client.runs(id, 10).await.unwrap();
            match runs.first() {
                Some(r) if r.outcome == "cancelled" => Ok(r.clone()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await
}

/// A Rust handler's token fires on the node that runs the firing (one of two), the run is
/// recorded `cancelled` with that node, and no other attempt follows although the job allows
/// five with 100 ms between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_firing_is_stopped_on_its_node_and_never_retried() {
    let w = World::new().await;
    let nodes = [w.node("a").await, w.node("b").await];
    let client = w.client().await;
    start_a_minute_long_run(&w, &client, "long").await;
    let started = w.recorder.seen_of("long").remove(0);

    let asked = std::time::Instant::now();
    let done = client.cancel("long").await.unwrap();
    assert_eq!(
        done.stopping,
        std::slice::from_ref(&started.firing_id),
        "{done:?}"
    );
    assert!(done.cancelled.is_empty(), "{done:?}");
    let record = cancelled_record(&client, "long").await;
    eprintln!(
        "cancel: the run on node {} was stopped and recorded {:?} after the request",
        record.node,
        asked.elapsed()
    );
    assert!(
        w.recorder.was_cancelled(&started.firing_id),
        "the handler's token did not fire"
    );
    assert_eq!(
        record.node, started.node,
        "recorded by the node that ran it"
    );
    assert_eq!(record.fate.as_deref(), Some("done"), "{record:?}");
    assert_eq!(record.error.as_deref(), Some("cancelled on request"));
    w.wait_idle(Duration::from_secs(5)).await;
    // Past several retry intervals: still one attempt.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        w.recorder.seen_of("long").len(),
        1,
        "a cancelled firing ran again"
    );
    let job = client.get("long").await.unwrap();
    assert_eq!((job.status, job.dead), (JobStatus::Finished, 0));
    // Nothing left to cancel.
    assert!(client.cancel("long").await.unwrap().is_empty());
    for n in nodes {
        n.shutdown().await;
    }
}

/// A run that fails on its own while its cancel is on its way (its node had not heard of it
/// yet) is recorded `cancelled` all the same, with no next attempt: completion reads the flag
/// cancel.lua wrote, in the same step. A run that succeeded first stays a success. Both drop
/// the flag. (Driven through the scripts: the race is Redis's order of the two calls.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outcome_that_races_the_cancel_is_recorded_cancelled() {
    use crate::scripts::{LIMITS, run_record};
    use keyfire::store::Fate;
    use redis::AsyncCommands;
    let w = World::new().await;
    let client = w.client().await;
    let store = client.store();
    client
        .upsert(JobSpec::every("r", "1h", "rec").retry(retries(5, "100ms")))
        .await
        .unwrap();
    let k = store.job_keys("r");
    let mut conn = store.connection();
    for (at, outcome, want) in [(1_000, "failed", "cancelled"), (2_000, "ok", "ok")] {
        let claimed = w.redis_ms().await;
        let member = format!("r:{at}|1|{claimed}|n1");
        let _: () = conn
            .zadd(k.running(), &member, claimed + 30_000)
            .await
            .unwrap();
        let done = client.cancel("r").await.unwrap();
        assert_eq!(done.stopping, [format!("r:{at}")]);
        let run = run_record("r", at, 1, claimed, "n1", outcome);
        let retry = (outcome != "ok").then_some(100);
        let (fate, _) = store.complete("r", &run, &LIMITS, retry).await.unwrap();
        assert_eq!(fate, Fate::Done, "{outcome}");
        let recorded = store.runs("r", 1).await.unwrap().remove(0);
        assert_eq!(recorded.outcome, want);
        let queued: usize = conn.zcard(k.retry()).await.unwrap();
        assert_eq!(queued, 0, "a next attempt was queued after {outcome}");
        let flags: bool = conn.exists(k.cancels()).await.unwrap();
        assert!(!flags, "the flag outlived the outcome");
    }
    assert_eq!(client.get("r").await.unwrap().dead, 0);
}

/// An `http` firing running on one of two nodes: its receiver sees the connection closed, and
/// the history says `cancelled`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_http_call_closes_its_connection() {
    let w = World::new().await;
    let mut receiver = SilentReceiver::start().await;
    let addr = receiver.addr;
    let nodes = [w.node("a").await, w.node("b").await];
    let client = w.client().await;
    client
        .enqueue(
            JobSpec::after("hook", "0s", "http")
                .params(json!({"url": format!("http://{addr}/hook"), "timeout": "60s"}))
                .retry(retries(5, "100ms")),
        )
        .await
        .unwrap();
    assert_eq!(receiver.next().await, Some("request"));
    let done = client.cancel("hook").await.unwrap();
    assert_eq!(done.stopping.len(), 1, "{done:?}");
    assert_eq!(receiver.next().await, Some("closed"));
    let record = cancelled_record(&client, "hook").await;
    assert!(["a", "b"].contains(&record.node.as_str()), "{record:?}");
    w.wait_idle(Duration::from_secs(5)).await;
    for n in nodes {
        n.shutdown().await;
    }
}

/// Whether process `pid` is gone (or a zombie waiting for its parent).
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// A `command` firing's whole process group is stopped: the program and the child it
/// started, both ignoring SIGTERM, are killed after the grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_command_loses_its_process_group() {
    let w = World::new().await;
    let dir = tempfile::tempdir().unwrap();
    let mut handlers = HandlerSettings::default();
    handlers.command.enabled = true;
    handlers.command.allowed_programs = vec!["sh".into()];
    let registry = Registry::with_builtins_from(&handlers).unwrap();
    let mut settings = w.settings.clone();
    settings.node.id = "a".into();
    let node = Node::new(settings, registry).start().await.unwrap();
    let client = w.client().await.allow_handlers(["command"]);
    let d = dir.path().display();
    let script = format!(
        "trap '' TERM; sleep 300 & echo $! > {d}/child.tmp; mv {d}/child.tmp {d}/child; \
         echo $$ > {d}/sh.tmp; mv {d}/sh.tmp {d}/sh; wait"
    );
    client
        .enqueue(
            JobSpec::after("cmd", "0s", "command")
                .params(json!({"program": "sh", "args": ["-c", script], "timeout": "120s"}))
                .retry(retries(5, "100ms")),
        )
        .await
        .unwrap();
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).ok();
    let (sh, child) = wait::until("the program's pids", Duration::from_secs(15), async || {
        Some((
            read("sh")?.trim().to_string(),
            read("child")?.trim().to_string(),
        ))
    })
    .await;
    assert!(!gone(&sh) && !gone(&child), "started");
    assert_eq!(client.cancel("cmd").await.unwrap().stopping.len(), 1);
    let record = cancelled_record(&client, "cmd").await;
    assert_eq!(record.fate.as_deref(), Some("done"), "{record:?}");
    wait::until("the group killed", Duration::from_secs(10), async || {
        gone(&sh) && gone(&child)
    })
    .await;
    w.wait_idle(Duration::from_secs(5)).await;
    node.shutdown().await;
}

/// A one-shot task cancelled before its instant never runs: it is finished, its firing
/// recorded `cancelled`; a second cancel finds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_task_cancelled_before_it_runs_never_runs() {
    let w = World::new().await;
    let node = w.node("a").await;
    let client = w.client().await;
    let task = client
        .enqueue(JobSpec::after("soon", "2s", "rec"))
        .await
        .unwrap();
    let at = task.next_ms.expect("pending");
    let done = client.cancel("soon").await.unwrap();
    assert_eq!(done.cancelled, [format!("soon:{at}")], "{done:?}");
    assert!(done.stopping.is_empty());
    let job = client.get("soon").await.unwrap();
    assert_eq!((job.status, job.next_ms), (JobStatus::Finished, None));
    let runs = client.runs("soon", 10).await.unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(
        (
            runs[0].outcome.as_str(),
            runs[0].fate.as_deref(),
            runs[0].scheduled_ms
        ),
        ("cancelled", Some("done"), at)
    );
    // Past its instant: nothing ran.
    w.until_redis_ms(at + 1_500).await;
    node.sweep_once().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        w.recorder.seen_of("soon").is_empty(),
        "a cancelled task ran"
    );
    assert!(client.cancel("soon").await.unwrap().is_empty());
    node.shutdown().await;
}

/// An attempt queued for a retry is cancelled before it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_retry_is_cancelled_before_it_runs() {
    let w = World::new().await;
    let node = w.node("a").await;
    let client = w.client().await;
    client
        .enqueue(
            JobSpec::after("failing", "0s", "flaky")
                .params(json!({"ok_at": 9}))
                .retry(retries(5, "3s")),
        )
        .await
        .unwrap();
    let first = wait::until(
        "the first attempt's outcome",
        Duration::from_secs(10),
        async || {
            let runs = client.runs("failing", 10).await.unwrap();
            runs.into_iter()
                .find(|r| r.fate.as_deref() == Some("retry"))
        },
    )
    .await;
    let done = client.cancel("failing").await.unwrap();
    assert_eq!(
        done.cancelled,
        std::slice::from_ref(&first.firing_id),
        "{done:?}"
    );
    let runs = client.runs("failing", 10).await.unwrap();
    assert_eq!(
        (
            runs[0].outcome.as_str(),
            runs[0].attempt,
            runs[0].fate.as_deref()
        ),
        ("cancelled", 2, Some("done"))
    );
    w.wait_idle(Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert_eq!(w.recorder.seen_of("failing").len(), 1, "the retry ran");
    node.shutdown().await;
}

/// A node that dies while a cancelled firing runs on it: the takeover records the run
/// `cancelled` and does not run it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_does_not_run_a_cancelled_firing_again() {
    let w = World::new().await;
    let a = w.node("a").await;
    let client = w.client().await;
    start_a_minute_long_run(&w, &client, "orphan").await;
    // Dies mid-run: records nothing, its lease stays until a peer takes it over.
    a.abort();
    let done = client.cancel("orphan").await.unwrap();
    assert_eq!(done.stopping.len(), 1, "{done:?}");
    let b = w.node("b").await;
    let record = cancelled_record(&client, "orphan").await;
    assert_eq!(record.node, "a", "{record:?}");
    assert_eq!(record.fate.as_deref(), Some("done"), "{record:?}");
    w.wait_idle(Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        w.recorder.seen_of("orphan").len(),
        1,
        "taken over and run again"
    );
    b.shutdown().await;
}

/// No such job, a bad id and nothing to cancel are three answers; none writes anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_bad_and_idle_jobs_have_nothing_cancelled() {
    let w = World::new().await;
    let client = w.client().await;
    client
        .upsert(JobSpec::every("hourly", "1h", "rec"))
        .await
        .unwrap();
    let before = w.keys().await;
    assert!(matches!(
        client.cancel("nope").await,
        Err(keyfire::Error::NotFound(_))
    ));
    match client.cancel("bad id").await {
        Err(keyfire::Error::Invalid(v)) => assert_eq!(v.field, "id"),
        other => panic!("{other:?}"),
    }
    assert!(client.cancel("hourly").await.unwrap().is_empty());
    assert_eq!(w.keys().await, before, "a refused cancel wrote something");
    assert_eq!(
        client.get("hourly").await.unwrap().status,
        JobStatus::Active
    );
}

/// A node that missed a cancel's announcement (a subscription lost and made again) stops the
/// run at its next lease renewal, which reads the flag. The flag is written here as cancel.lua
/// writes it, with no announcement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missed_announcement_stops_the_run_at_its_next_renewal() {
    use redis::AsyncCommands;
    let w = World::new().await;
    let node = w.node("a").await;
    let client = w.client().await;
    start_a_minute_long_run(&w, &client, "deaf").await;
    let fid = w.recorder.seen_of("deaf").remove(0).firing_id;
    let store = client.store();
    let k = store.job_keys("deaf");
    let mut conn = store.connection();
    let leases: Vec<String> = conn.zrange(k.running(), 0, -1).await.unwrap();
    let lease = leases
        .into_iter()
        .find(|m| m.starts_with(&format!("{fid}|")))
        .expect("the run's lease");
    let flagged = std::time::Instant::now();
    let _: () = conn.hset(k.cancels(), &fid, &lease).await.unwrap();
    let record = cancelled_record(&client, "deaf").await;
    assert!(
        w.recorder.was_cancelled(&fid),
        "the handler's token did not fire"
    );
    assert_eq!(record.error.as_deref(), Some("cancelled on request"));
    // Within one renewal (a third of the 5 s lease) and the handler's return.
    let took = flagged.elapsed();
    assert!(took < Duration::from_secs(4), "stopped after {took:?}");
    eprintln!("cancel: a missed announcement stopped the run after {took:?}");
    w.wait_idle(Duration::from_secs(5)).await;
    assert_eq!(
        w.recorder.seen_of("deaf").len(),
        1,
        "a cancelled firing ran again"
    );
    node.shutdown().await;
}
