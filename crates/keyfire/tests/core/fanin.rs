//! Fan-in: a batch's completion callback is queued exactly once, in the script step that ends
//! its last task, whatever node dies when; `after_task` chains run in order, and a task that
//! ends other than in success dead-letters the tasks waiting on it, down the chain.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keyfire::client::OnComplete;
use keyfire::job::RetrySpec;
use keyfire::store::JobStatus;
use keyfire::{Client, Error, JobSpec};
use keyfire_testkit::wait;
use keyfire_testkit::world::World;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::node_process::{NodeProcess, log_lines};

/// A completion callback to `url`, signed with the host's secrets (none here).
fn on_complete(url: String) -> OnComplete {
    OnComplete {
        url,
        signing_secrets: Vec::new(),
    }
}

fn no_retry() -> Option<RetrySpec> {
    Some(RetrySpec {
        max_attempts: Some(1),
        ..Default::default()
    })
}

/// The callbacks `seen` got on `path`.
fn at(seen: &Mutex<Vec<(String, Value)>>, path: &str) -> Vec<Value> {
    let seen = seen.lock().unwrap();
    seen.iter()
        .filter(|(p, _)| p == path)
        .map(|(_, b)| b.clone())
        .collect()
}

/// A batch of 30 tasks, 7 of which fail with no retry left and 3 of which are cancelled
/// before they run: one callback, once the last has ended, with the counts; the batch reads
/// the same counts, and nothing else arrives later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_calls_back_once_when_every_task_has_ended() {
    let w = World::new().await;
    let (url, seen) = keyfire_testkit::http_receiver().await;
    let node = w.node("a").await;
    let client = w.client().await.allow_handlers(["rec", "ask"]);
    let mut specs = Vec::new();
    for i in 0..30 {
        let mut spec = if i % 4 == 1 && i < 28 {
            JobSpec::after("", "0s", "ask").params(json!({"abort": true}))
        } else if i >= 27 {
            JobSpec::after("", "1h", "rec")
        } else {
            JobSpec::after("", "0s", "rec")
        };
        spec.retry = no_retry();
        specs.push(spec);
    }
    let batch = client
        .enqueue_batch(specs, on_complete(format!("{url}/done")))
        .await
        .unwrap();
    assert_eq!(batch.ids.len(), 30);
    wait::until("27 tasks to end", Duration::from_secs(30), async || {
        let b = client.get_batch(&batch.batch_id).await.unwrap();
        b.succeeded + b.died == 27
    })
    .await;
    // Three wait an hour: the callback waits for them.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        at(&seen, "/done").is_empty(),
        "no callback before the last task ends"
    );
    for id in &batch.ids[27..] {
        client.cancel(id).await.unwrap();
    }
    let got = wait::until("the batch's callback", Duration::from_secs(15), || async {
        let got = at(&seen, "/done");
        (!got.is_empty()).then_some(got)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(at(&seen, "/done").len(), 1, "one callback: {got:?}");
    let body = &got[0];
    assert_eq!(body["type"], "keyfire.batch.completed");
    assert!(body["timestamp"].as_str().unwrap().ends_with('Z'), "{body}");
    let data = &body["data"];
    assert_eq!(data["batch_id"], batch.batch_id.as_str());
    assert_eq!(
        (
            &data["total"],
            &data["succeeded"],
            &data["died"],
            &data["cancelled"]
        ),
        (&json!(30), &json!(20), &json!(7), &json!(3)),
        "{body}"
    );
    let b = client.get_batch(&batch.batch_id).await.unwrap();
    assert_eq!(
        (b.total, b.succeeded, b.died, b.cancelled, b.pending),
        (30, 20, 7, 3, 0)
    );
    assert!(b.completed_ms.is_some());
    node.shutdown().await;
}

/// What a batch refuses, naming the field; nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_with_on_complete_refuses_what_it_cannot_hold() {
    let w = World::new().await;
    let client = w.client().await.allow_handlers(["rec"]);
    let field = |e: Error| match e {
        Error::Invalid(v) => v.field,
        other => panic!("{other}"),
    };
    let good = || JobSpec::after("", "0s", "rec");
    for (specs, url, want) in [
        (vec![], "http://127.0.0.1:9/", "tasks"),
        (
            vec![good(), JobSpec::after("mine", "0s", "rec")],
            "http://127.0.0.1:9/",
            "tasks[1].id",
        ),
        (
            vec![good().after_task("x")],
            "http://127.0.0.1:9/",
            "tasks[0].after_task",
        ),
        (
            vec![JobSpec::after("", "nope", "rec")],
            "http://127.0.0.1:9/",
            "tasks[0].after",
        ),
        (vec![good()], "ftp://x/", "on_complete.url"),
    ] {
        let err = client
            .enqueue_batch(specs, on_complete(url.into()))
            .await
            .unwrap_err();
        assert_eq!(field(err), want);
    }
    assert!(
        w.keys()
            .await
            .iter()
            .all(|k| !k.contains(":batch:") && !k.contains(":due"))
    );
    let err = client.get_batch("no-such-batch").await.unwrap_err();
    assert!(matches!(err, Error::NotFound(_)), "{err}");
}

/// A chain of three: B after A, C after B. B and C wait (status `waiting`) until what they
/// follow succeeded, and run in order, each after its delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_task_chains_run_in_order() {
    let w = World::new().await;
    let client = w.client().await.allow_handlers(["rec", "slow"]);
    let a = client
        .enqueue(JobSpec::after("chain-a", "300ms", "slow").params(json!({"sleep_ms": 300})))
        .await
        .unwrap();
    let b = client
        .enqueue(JobSpec::after("", "200ms", "rec").after_task("chain-a"))
        .await
        .unwrap();
    let c = client
        .enqueue(JobSpec::after("", "0s", "rec").after_task(&b.spec.id))
        .await
        .unwrap();
    assert_eq!(
        (b.status, c.status),
        (JobStatus::Waiting, JobStatus::Waiting)
    );
    assert_eq!(b.next_ms, None);
    let node = w.node("a").await;
    w.recorder
        .wait_until(Duration::from_secs(20), "the chain to run", |s| {
            s.len() == 3
        })
        .await;
    let seen = w.recorder.seen();
    let order: Vec<&str> = seen.iter().map(|s| s.job_id.as_str()).collect();
    assert_eq!(order, [a.spec.id.as_str(), &b.spec.id, &c.spec.id]);
    // B started at least its delay after A ended.
    let a_end = w.recorder.ended(&seen[0].firing_id).unwrap();
    assert!(
        seen[1].start_ms >= a_end + 200,
        "{seen:?} a ended at {a_end}"
    );
    assert_eq!(
        client.get(&c.spec.id).await.unwrap().status,
        JobStatus::Finished
    );
    // A task after one that succeeded already is due at once.
    let d = client
        .enqueue(JobSpec::after("", "0s", "rec").after_task(&c.spec.id))
        .await
        .unwrap();
    assert_eq!(d.status, JobStatus::Active);
    w.recorder
        .wait_until(Duration::from_secs(10), "the late follower", |s| {
            s.len() == 4
        })
        .await;
    node.shutdown().await;
}

/// A dies (no retry left): B and C, waiting down the chain, go to their dead letters with the
/// reason, never run, and a task added after A later is dead-lettered at once. Cancelling a
/// waiting task dead-letters its own followers. A missing or recurring `after_task` is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_dies_dead_letters_its_chain() {
    let w = World::new().await;
    let client = w.client().await.allow_handlers(["rec", "ask"]);
    let mut a = JobSpec::after("dies", "200ms", "ask").params(json!({"abort": true}));
    a.retry = no_retry();
    client.enqueue(a).await.unwrap();
    let b = client
        .enqueue(JobSpec::after("", "0s", "rec").after_task("dies"))
        .await
        .unwrap();
    let c = client
        .enqueue(JobSpec::after("", "0s", "rec").after_task(&b.spec.id))
        .await
        .unwrap();
    let node = w.node("a").await;
    wait::until(
        "C in its dead letters",
        Duration::from_secs(20),
        async || {
            !client
                .dead_letters(&c.spec.id, 10)
                .await
                .unwrap()
                .is_empty()
        },
    )
    .await;
    let letters = client.dead_letters(&b.spec.id, 10).await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(
        letters[0].error.as_deref(),
        Some("after_task dies ended dead")
    );
    let c_letter = &client.dead_letters(&c.spec.id, 10).await.unwrap()[0];
    assert_eq!(
        c_letter.error.as_deref(),
        Some(format!("after_task {} ended dead", b.spec.id).as_str())
    );
    for id in [&b.spec.id, &c.spec.id] {
        let job = client.get(id).await.unwrap();
        assert_eq!((job.status, job.dead), (JobStatus::Finished, 1), "{id}");
    }
    let late = client
        .enqueue(JobSpec::after("", "0s", "rec").after_task("dies"))
        .await
        .unwrap();
    assert_eq!(late.status, JobStatus::Finished);
    assert_eq!(
        client.dead_letters(&late.spec.id, 10).await.unwrap().len(),
        1
    );

    // Cancel a waiting task: it and its follower end, never run.
    client
        .enqueue(JobSpec::after("later", "1h", "rec"))
        .await
        .unwrap();
    let x = client
        .enqueue(JobSpec::after("", "0s", "rec").after_task("later"))
        .await
        .unwrap();
    let y = client
        .enqueue(JobSpec::after("", "0s", "rec").after_task(&x.spec.id))
        .await
        .unwrap();
    client.cancel(&x.spec.id).await.unwrap();
    assert_eq!(
        client.get(&x.spec.id).await.unwrap().status,
        JobStatus::Finished
    );
    assert_eq!(client.dead_letters(&y.spec.id, 10).await.unwrap().len(), 1);
    // Deleting the awaited task ends its follower too.
    let z = client
        .enqueue(JobSpec::after("", "0s", "rec").after_task("later"))
        .await
        .unwrap();
    client.delete("later").await.unwrap();
    assert_eq!(client.dead_letters(&z.spec.id, 10).await.unwrap().len(), 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        w.recorder.seen().iter().all(|s| s.job_id == "dies"),
        "nothing of the chains ran but A"
    );

    let field = |e: Error| match e {
        Error::Invalid(v) => v.field,
        other => panic!("{other}"),
    };
    let err = client
        .enqueue(JobSpec::after("", "0s", "rec").after_task("never-was"))
        .await
        .unwrap_err();
    assert_eq!(field(err), "after_task");
    client
        .upsert(JobSpec::every("ticker", "1h", "rec"))
        .await
        .unwrap();
    let err = client
        .enqueue(JobSpec::after("", "0s", "rec").after_task("ticker"))
        .await
        .unwrap_err();
    assert_eq!(field(err), "after_task");
    let mut at = JobSpec::at("", chrono::Utc::now(), "rec").after_task("ticker");
    at.id = String::new();
    assert_eq!(field(client.enqueue(at).await.unwrap_err()), "at");
    let err = client
        .upsert(JobSpec::after("by-id", "0s", "rec").after_task("ticker"))
        .await
        .unwrap_err();
    assert_eq!(field(err), "after_task");
    node.shutdown().await;
}

fn spawn(w: &World, id: &str, log: &Path) -> NodeProcess {
    NodeProcess::spawn(
        w,
        id,
        log,
        &[
            ("LEASE", "2s"),
            ("SWEEP_INTERVAL", "500ms"),
            ("CLAIM_GRACE", "1s"),
        ],
    )
}

/// A batch of 1,000 tasks on two node processes, one SIGKILLed mid-batch with runs in flight:
/// its runs are taken over, and the batch's callback arrives exactly once, with 1,000
/// successes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_survives_a_node_killed_mid_batch_with_one_callback() {
    let mut w = World::new().await;
    w.settings.node.lease = Duration::from_secs(2);
    let (url, seen) = keyfire_testkit::http_receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let mut victim = spawn(&w, "victim", &log);
    let mut other = spawn(&w, "other", &log);
    let client: Client = w.client().await.allow_handlers(["slow"]);
    let specs: Vec<JobSpec> = (0..1000)
        .map(|_| JobSpec::after("", "0s", "slow").params(json!({"sleep_ms": 200})))
        .collect();
    let batch = client
        .enqueue_batch(specs, on_complete(format!("{url}/batch")))
        .await
        .unwrap();
    wait::until(
        "the victim to be mid-batch",
        Duration::from_secs(60),
        async || {
            log_lines(&log)
                .iter()
                .filter(|l| l.0 == "end" && l.3 == "victim")
                .count()
                >= 50
        },
    )
    .await;
    kill(Pid::from_raw(victim.id() as i32), Signal::SIGKILL).unwrap();
    victim.0.wait().unwrap();
    let started_by_victim = log_lines(&log)
        .iter()
        .filter(|l| l.0 == "start" && l.3 == "victim")
        .count();
    let got = wait::until("the batch's callback", Duration::from_secs(180), || async {
        let got = at(&seen, "/batch");
        (!got.is_empty()).then_some(got)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let all = at(&seen, "/batch");
    assert_eq!(all.len(), 1, "exactly one callback: {all:?}");
    let data = &got[0]["data"];
    assert_eq!(
        (
            &data["total"],
            &data["succeeded"],
            &data["died"],
            &data["cancelled"]
        ),
        (&json!(1000), &json!(1000), &json!(0), &json!(0)),
        "{data}"
    );
    let b = client.get_batch(&batch.batch_id).await.unwrap();
    assert_eq!((b.succeeded, b.pending), (1000, 0));
    // Every task ended exactly once; some ran twice (taken over from the victim).
    let ends = log_lines(&log);
    let taken_over = ends.iter().filter(|l| l.0 == "start" && l.2 == 2).count();
    eprintln!(
        "victim started {started_by_victim} runs before SIGKILL; {taken_over} taken over as attempt 2"
    );
    other.0.kill().ok();
    other.0.wait().ok();
}

/// On Redis Cluster (3 masters, 12 shards) the scripts that end a task reach its batch and its
/// waiters under the task's own hash tag (no CROSSSLOT): a batch of 40 calls back once, and a
/// chain of three runs in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fan_in_works_on_redis_cluster() {
    let cluster = tokio::task::block_in_place(|| keyfire_testkit::RedisCluster::start(3, 0))
        .expect("cluster");
    let mut s = keyfire::Settings::default();
    s.redis.prefix = "kf".into();
    s.redis.mode = keyfire::config::RedisMode::Cluster;
    s.redis.nodes = cluster.nodes();
    s.redis.shards = 12;
    s.node.id = "c".into();
    let ran = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut registry = keyfire::Registry::with_builtins();
    let seen = ran.clone();
    registry.register("rec", move |f: keyfire::Firing| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().push(f.job_id);
            Ok(())
        }
    });
    let node = keyfire::Node::new(s.clone(), registry)
        .start()
        .await
        .unwrap();
    let client = Client::connect(&s).await.unwrap().allow_handlers(["rec"]);
    let (url, got) = keyfire_testkit::http_receiver().await;
    let batch = client
        .enqueue_batch(
            (0..40).map(|_| JobSpec::after("", "0s", "rec")).collect(),
            on_complete(format!("{url}/cluster")),
        )
        .await
        .unwrap();
    let a = client
        .enqueue(JobSpec::after("", "200ms", "rec"))
        .await
        .unwrap();
    let b = client
        .enqueue(JobSpec::after("", "0s", "rec").after_task(&a.spec.id))
        .await
        .unwrap();
    let c = client
        .enqueue(JobSpec::after("", "0s", "rec").after_task(&b.spec.id))
        .await
        .unwrap();
    wait::until(
        "the batch's callback and the chain",
        Duration::from_secs(30),
        || async { at(&got, "/cluster").len() == 1 && ran.lock().unwrap().len() == 43 },
    )
    .await;
    let order: Vec<String> = ran
        .lock()
        .unwrap()
        .iter()
        .filter(|id| [&a.spec.id, &b.spec.id, &c.spec.id].contains(id))
        .cloned()
        .collect();
    assert_eq!(order, [a.spec.id, b.spec.id, c.spec.id]);
    assert_eq!(at(&got, "/cluster")[0]["data"]["succeeded"], 40);
    assert_eq!(client.get_batch(&batch.batch_id).await.unwrap().pending, 0);
    node.shutdown().await;
}
