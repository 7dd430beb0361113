//! Run limits: `max_runs` ends a job after exactly N successful firings, whatever runs at once
//! on how many nodes; `pause_after_failures` pauses it after exactly N failed firings in a row
//! (a firing fails when its last attempt does), and a resume starts the count again.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keyfire::job::RetrySpec;
use keyfire::store::JobStatus;
use keyfire::{Firing, HandlerError, JobSpec, Node, NodeHandle, Registry, SkipReason};
use keyfire_testkit::wait;
use keyfire_testkit::world::World;

/// A node on `w` whose registry has `w`'s handlers and `extra`.
async fn node(w: &World, id: &str, extra: impl FnOnce(&mut Registry)) -> NodeHandle {
    let mut settings = w.settings.clone();
    settings.node.id = id.into();
    let mut registry = w.registry();
    extra(&mut registry);
    Node::new(settings, registry).start().await.unwrap()
}

/// Three nodes, a job firing every 100 ms whose runs take 300 ms (so several run at once)
/// and fail one time in three, `max_runs = 12`: exactly 12 runs succeed, the job is then
/// finished with the reason, no handler starts after the twelfth success is recorded, and
/// the firings that came while running ones could have made up the rest are in the ledger.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn max_runs_ends_a_job_after_exactly_n_successes_across_nodes() {
    let w = World::new().await;
    let calls = Arc::new(AtomicU64::new(0));
    let handler = |r: &mut Registry| {
        let (rec, calls) = (w.recorder.clone(), calls.clone());
        r.register("coin", move |f: Firing| {
            let (rec, calls) = (rec.clone(), calls.clone());
            async move {
                let n = calls.fetch_add(1, Ordering::SeqCst);
                rec.record(f).await?;
                tokio::time::sleep(Duration::from_millis(300)).await;
                if n % 3 == 2 {
                    return Err(HandlerError::abort("one in three fails"));
                }
                Ok(())
            }
        });
    };
    let nodes = [
        node(&w, "a", handler).await,
        node(&w, "b", handler).await,
        node(&w, "c", handler).await,
    ];
    let client = w.client().await.allow_handlers(["coin"]);
    let mut spec = JobSpec::every("limited", "100ms", "coin");
    spec.max_runs = Some(12);
    spec.retry = Some(RetrySpec {
        max_attempts: Some(1),
        ..Default::default()
    });
    client.upsert(spec).await.unwrap();
    wait::until("the job to finish", Duration::from_secs(30), async || {
        client.get("limited").await.unwrap().status == JobStatus::Finished
    })
    .await;
    let started = calls.load(Ordering::SeqCst);
    w.wait_idle(Duration::from_secs(10)).await;
    // Nothing more starts: the job has no next firing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        started,
        "a run started after the end"
    );

    let job = client.get("limited").await.unwrap();
    assert_eq!(job.status, JobStatus::Finished);
    assert_eq!(job.next_ms, None);
    assert_eq!(job.run_limits.stopped.as_deref(), Some("max_runs"));
    assert_eq!(job.run_limits.succeeded, 12);
    let runs = client.runs("limited", 100).await.unwrap();
    let ok = runs.iter().filter(|r| r.outcome == "ok").count();
    assert_eq!(ok, 12, "successful runs: {runs:?}");
    assert_eq!(runs.len() as u64, started, "every run started was recorded");
    // Runs overlapped (300 ms runs every 100 ms), so some firings were held back near the end.
    let skips = client.skips("limited", 100).await.unwrap();
    assert!(
        skips.iter().any(|s| s.reason == SkipReason::MaxRuns),
        "{skips:?}"
    );
    for n in nodes {
        n.shutdown().await;
    }
}

/// A handler that fails or succeeds as a script says, one outcome per run (then succeeds).
fn scripted(w: &World, script: Arc<Mutex<VecDeque<bool>>>) -> impl Fn(&mut Registry) + '_ {
    move |r: &mut Registry| {
        let (rec, script) = (w.recorder.clone(), script.clone());
        r.register("scripted", move |f: Firing| {
            let (rec, script) = (rec.clone(), script.clone());
            async move {
                let ok = script.lock().unwrap().pop_front().unwrap_or(true);
                rec.record(f).await?;
                if ok {
                    Ok(())
                } else {
                    Err(HandlerError::retry("scripted failure"))
                }
            }
        });
    }
}

/// Distinct firings the job ran, in order, each with whether its last attempt succeeded.
async fn firings(client: &keyfire::Client, id: &str) -> Vec<(String, bool)> {
    let mut runs = client.runs(id, 200).await.unwrap();
    runs.reverse();
    let mut out: Vec<(String, bool)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for r in runs {
        let ok = r.outcome == "ok";
        match index.get(&r.firing_id) {
            Some(&i) => out[i].1 = ok,
            None => {
                index.insert(r.firing_id.clone(), out.len());
                out.push((r.firing_id, ok));
            }
        }
    }
    out
}

/// `pause_after_failures = 3`: failed, failed, ok, failed, failed does not pause (the
/// failures are not in a row); the next failure does, after exactly six firings, with the
/// reason and the count on the job. A resume starts the count again: two more failures
/// leave it active, the third pauses it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pause_after_failures_pauses_after_exactly_n_in_a_row() {
    let w = World::new().await;
    let script = Arc::new(Mutex::new(VecDeque::from([
        false, false, true, false, false, false, // paused here
        false, false, false, // after the resume: paused again
    ])));
    let nodes = [
        node(&w, "a", scripted(&w, script.clone())).await,
        node(&w, "b", scripted(&w, script.clone())).await,
    ];
    let client = w.client().await.allow_handlers(["scripted"]);
    // Far enough apart that each outcome is recorded before the next firing is claimed.
    let mut spec = JobSpec::every("fragile", "400ms", "scripted");
    spec.pause_after_failures = Some(3);
    spec.retry = Some(RetrySpec {
        max_attempts: Some(1),
        ..Default::default()
    });
    client.upsert(spec).await.unwrap();
    wait::until("the job to pause", Duration::from_secs(20), async || {
        client.get("fragile").await.unwrap().status == JobStatus::Paused
    })
    .await;
    w.wait_idle(Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let ran = firings(&client, "fragile").await;
    let outcomes: Vec<bool> = ran.iter().map(|f| f.1).collect();
    assert_eq!(
        outcomes,
        [false, false, true, false, false, false],
        "{ran:?}"
    );
    let job = client.get("fragile").await.unwrap();
    assert_eq!(job.run_limits.stopped.as_deref(), Some("failures"));
    assert_eq!(job.run_limits.failure_streak, 3);
    assert_eq!(job.next_ms, None);
    assert!(job.paused_ms.is_some());

    let job = client.resume("fragile").await.unwrap();
    assert_eq!(
        job.run_limits.failure_streak, 0,
        "a resume starts the count again"
    );
    assert_eq!(job.run_limits.stopped, None);
    wait::until(
        "the job to pause again",
        Duration::from_secs(10),
        async || client.get("fragile").await.unwrap().status == JobStatus::Paused,
    )
    .await;
    w.wait_idle(Duration::from_secs(5)).await;
    // Three failures after the resume, not two: the count started again.
    let ran = firings(&client, "fragile").await;
    assert_eq!(ran.len(), 9, "{ran:?}");
    assert!(ran[6..].iter().all(|f| !f.1));
    for n in nodes {
        n.shutdown().await;
    }
}

/// A firing fails when its last attempt fails: with two attempts each, a job whose handler
/// always fails and `pause_after_failures = 2` pauses after two firings (four attempts).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_of_a_firing_count_as_one_failure() {
    let w = World::new().await;
    let script = Arc::new(Mutex::new(VecDeque::from([false; 20])));
    let n = node(&w, "a", scripted(&w, script.clone())).await;
    let client = w.client().await.allow_handlers(["scripted"]);
    let mut spec = JobSpec::every("retried", "400ms", "scripted");
    spec.pause_after_failures = Some(2);
    spec.retry = Some(RetrySpec {
        max_attempts: Some(2),
        backoff: Some("fixed".into()),
        interval: Some("50ms".into()),
        ..Default::default()
    });
    client.upsert(spec).await.unwrap();
    wait::until("the job to pause", Duration::from_secs(20), async || {
        client.get("retried").await.unwrap().status == JobStatus::Paused
    })
    .await;
    w.wait_idle(Duration::from_secs(5)).await;
    let ran = firings(&client, "retried").await;
    assert_eq!(ran.len(), 2, "{ran:?}");
    let job = client.get("retried").await.unwrap();
    assert_eq!(job.run_limits.failure_streak, 2);
    n.shutdown().await;
}
