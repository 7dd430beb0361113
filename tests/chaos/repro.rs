//! Reductions of violations the chaos rounds found, each as the smallest deterministic test
//! of what keyfire guarantees instead.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keyfire::store::Keys;
use keyfire::{Client, Firing, JobSpec, Node, Registry, Settings};
use keyfire_lab::chaos::proxy::{Mode, Proxy};
use keyfire_testkit::{RedisServer, wait};
use serde_json::json;

/// (firing id, `v` param) of every run.
type Runs = Arc<Mutex<Vec<(String, u64)>>>;

/// What a handler saw and how it ended: (firing id, attempt, `v` param, outcome).
type Seen = Arc<Mutex<Vec<(String, u32, u64, &'static str)>>>;

/// Fast node settings against `url`, for node `id`.
fn settings(url: &str, id: &str) -> Settings {
    let mut s = Settings::default();
    s.redis.url = url.into();
    s.redis.prefix = "repro".into();
    let n = &mut s.node;
    n.id = id.into();
    n.heartbeat_interval = Duration::from_millis(200);
    n.node_ttl = Duration::from_millis(1_000);
    n.sweep_interval = Duration::from_millis(500);
    n.claim_grace = Duration::from_millis(1_000);
    n.lease = Duration::from_secs(2);
    s
}

/// `run`: records, sleeps `sleep_ms` (ending early when cancelled), fails attempts up to
/// `fail`.
fn registry(seen: &Seen) -> Registry {
    let mut r = Registry::new();
    let seen = seen.clone();
    r.register("run", move |f: Firing| {
        let seen = seen.clone();
        async move {
            let p = &f.params;
            let v = p["v"].as_u64().unwrap_or(0);
            let sleep = Duration::from_millis(p["sleep_ms"].as_u64().unwrap_or(0));
            let end = |what| {
                seen.lock()
                    .unwrap()
                    .push((f.firing_id.clone(), f.attempt, v, what))
            };
            tokio::select! {
                _ = tokio::time::sleep(sleep) => {}
                _ = f.cancel.cancelled() => {
                    end("cancelled");
                    return Err(keyfire::HandlerError::abort("cancelled"));
                }
            }
            if u64::from(f.attempt) <= p["fail"].as_u64().unwrap_or(0) {
                end("failed");
                return Err(keyfire::HandlerError::retry("planned failure"));
            }
            end("ok");
            Ok(())
        }
    });
    r
}

/// Found by `keyfire chaos` (seeds 9 and 11, 1 minute): a node that misses a job's delete
/// (its subscriber was disconnected: a network cut, a Redis restart, a pub/sub kill) keeps
/// the job's spec cached under its version. A job created again with the same id starts
/// again at version 1, so the claim script's version check accepts the stale spec: the node
/// runs the new job's firing with the deleted job's params, and schedules the next firing
/// by the deleted job's schedule (a firing no current schedule produces).
///
/// What prevents it: a job takes a new generation when created, the claim compares
/// generation and version, and the spec cache is dropped after every resubscribe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_missed_a_delete_runs_the_recreated_job_with_the_deleted_spec() {
    let redis = RedisServer::start().expect("start redis-server");
    let proxy = Proxy::start(format!("127.0.0.1:{}", redis.port()))
        .await
        .unwrap();
    let mut settings = Settings::default();
    settings.redis.url = redis.url();
    settings.redis.prefix = "repro".into();
    let n = &mut settings.node;
    n.id = "a".into();
    n.heartbeat_interval = Duration::from_millis(200);
    n.node_ttl = Duration::from_millis(1_000);
    n.sweep_interval = Duration::from_millis(500);
    n.claim_grace = Duration::from_millis(1_000);
    n.lease = Duration::from_secs(2);

    let runs: Runs = Arc::default();
    let mut registry = Registry::new();
    let seen = runs.clone();
    registry.register("rec", move |f: Firing| {
        let seen = seen.clone();
        async move {
            let v = f.params["v"].as_u64().unwrap_or(0);
            seen.lock().unwrap().push((f.firing_id, v));
            Ok(())
        }
    });
    // The only node, connected through the proxy.
    let mut node_settings = settings.clone();
    node_settings.redis.url = proxy.url();
    let node = Node::new(node_settings, registry).start().await.unwrap();
    let client = Client::connect(&settings)
        .await
        .unwrap()
        .allow_handlers(["rec"]);

    // Version 1 of job `j` runs every second; the node caches its spec.
    client
        .upsert(JobSpec::every("j", "1s", "rec").params(json!({"v": 1})))
        .await
        .unwrap();
    wait::until(
        "two runs of the first job",
        Duration::from_secs(10),
        async || runs.lock().unwrap().len() >= 2,
    )
    .await;

    // The node is cut off; meanwhile `j` is deleted and created again, every 2 s, v2.
    proxy.set(Mode::Drop);
    tokio::time::sleep(Duration::from_millis(300)).await;
    client.delete("j").await.unwrap();
    let again = client
        .upsert(JobSpec::every("j", "2s", "rec").params(json!({"v": 2})))
        .await
        .unwrap();
    assert_eq!(
        again.version, 1,
        "a re-created job starts at version 1 again"
    );
    let first = again.next_ms.unwrap();
    let before = runs.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    proxy.set(Mode::Pass);

    // The node comes back and runs the new job's first firing.
    let fid = format!("j:{first}");
    wait::until(
        "the new job's first firing",
        Duration::from_secs(10),
        async || runs.lock().unwrap().iter().any(|(f, _)| *f == fid),
    )
    .await;
    let ran: Vec<(String, u64)> = runs.lock().unwrap()[before..].to_vec();
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let next: i64 = redis::cmd("ZSCORE")
        .arg(Keys::new("repro").due())
        .arg("j")
        .query_async(&mut conn)
        .await
        .unwrap();
    node.shutdown().await;

    let v = ran.iter().find(|(f, _)| *f == fid).unwrap().1;
    assert_eq!(
        v, 2,
        "the re-created job's firing {fid} ran with the deleted job's params (v{v}); runs: {ran:?}"
    );
    assert_eq!(
        (next - first) % 2_000,
        0,
        "the next firing {next} is not on the new 2 s schedule from {first}"
    );
}

/// Found by `keyfire chaos --minutes 10 --seed 2024` (5 firings): a run whose lease renewal
/// comes back to find its lock expired (renewals held up by a `CLIENT PAUSE`, a stalled
/// network or a frozen node, longer than the lease) is cancelled by its node, and its end is
/// recorded as `cancelled` with fate `done` (the outcome meant for overlap `replace`): the
/// firing is finished without ever succeeding; no retry, no takeover, no dead letter. Unless
/// the sweeper happens to take the lease over first, the firing is lost silently.
///
/// What prevents it: a run cancelled for a lost lease records nothing; its lease hands the
/// firing over as the next attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_lease_expired_during_a_client_pause_is_never_retried() {
    let redis = RedisServer::start().expect("start redis-server");
    let mut s = settings(&redis.url(), "a");
    // A slow sweeper makes the race with its takeover deterministic; the renewal path alone
    // must not lose the firing.
    s.node.sweep_interval = Duration::from_secs(3);
    let seen: Seen = Arc::default();
    let node = Node::new(s.clone(), registry(&seen)).start().await.unwrap();
    let client = Client::connect(&s).await.unwrap().allow_handlers(["run"]);
    let mut admin = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();

    // A 3 s run (lease 2 s, renewed every 667 ms) ...
    client
        .enqueue(JobSpec::after("t", "0s", "run").params(json!({"sleep_ms": 3_000})))
        .await
        .unwrap();
    wait::until("the run to start", Duration::from_secs(10), async || {
        node.running() > 0
    })
    .await;
    // ... whose renewals Redis holds back for longer than the lease.
    let _: () = redis::cmd("CLIENT")
        .arg(&["PAUSE", "2500", "ALL"])
        .query_async(&mut admin)
        .await
        .unwrap();
    // The pause's length passes: the fault itself, wall time on purpose.
    tokio::time::sleep(Duration::from_millis(2_600)).await;

    // The firing must still succeed: as a retry, or taken over as attempt 2. (A dead letter
    // ends the wait too; the assert below tells them apart.)
    wait::until(
        "the firing to succeed or be a dead letter",
        Duration::from_secs(12),
        async || {
            let ran = seen.lock().unwrap().clone();
            if ran.iter().any(|r| r.3 == "ok")
                || !client.dead_letters("t", 10).await.unwrap().is_empty()
            {
                return Ok(());
            }
            let runs = client.runs("t", 10).await.unwrap();
            Err(format!(
                "handler runs {ran:?}; keyfire's records {:?}",
                runs.iter()
                    .map(|r| (r.attempt, r.outcome.as_str(), r.fate.as_deref()))
                    .collect::<Vec<_>>()
            ))
        },
    )
    .await;
    let runs = client.runs("t", 10).await.unwrap();
    let dead = client.dead_letters("t", 10).await.unwrap();
    node.shutdown().await;
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.iter().any(|r| r.3 == "ok") || !dead.is_empty(),
        "the firing never succeeded and is not a dead letter; handler runs {seen:?}; \
         keyfire's records {:?}",
        runs.iter()
            .map(|r| (r.attempt, r.outcome.as_str(), r.fate.as_deref()))
            .collect::<Vec<_>>()
    );
}

/// Found by `keyfire chaos --minutes 10 --seed 2024` (2 firings): a job deleted while one of
/// its firings waits for a retry, then created again under the same id, gets that retry run
/// under the new job: a firing of the deleted job runs after the delete returned. The delete
/// leaves the firing's entries in the retry ZSET and the attempts hash, and `claim_retry`
/// only checks that some job of that id exists.
///
/// What prevents it: a delete drops its job's queued attempts and leases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_of_a_deleted_job_runs_under_the_job_created_again() {
    let redis = RedisServer::start().expect("start redis-server");
    let s = settings(&redis.url(), "a");
    let seen: Seen = Arc::default();
    let node = Node::new(s.clone(), registry(&seen)).start().await.unwrap();
    let client = Client::connect(&s).await.unwrap().allow_handlers(["run"]);

    // `j` fails its first attempt; its retry is due 2 s later.
    let retry = keyfire::job::RetrySpec {
        max_attempts: Some(3),
        backoff: Some("fixed".into()),
        interval: Some("2s".into()),
        ..Default::default()
    };
    let first = client
        .upsert(
            JobSpec::after("j", "0s", "run")
                .params(json!({"v": 1, "fail": 1}))
                .retry(retry),
        )
        .await
        .unwrap();
    let fid = format!("j:{}", first.next_ms.unwrap());
    wait::until("attempt 1 to fail", Duration::from_secs(10), async || {
        seen.lock()
            .unwrap()
            .iter()
            .any(|r| r.0 == fid && r.3 == "failed")
    })
    .await;

    // Deleted, and created again as another job (first firing a minute away).
    client.delete("j").await.unwrap();
    client
        .upsert(JobSpec::every("j", "60s", "run").params(json!({"v": 2})))
        .await
        .unwrap();
    let after_delete = seen.lock().unwrap().len();
    tokio::time::sleep(Duration::from_secs(4)).await;
    node.shutdown().await;
    let late: Vec<_> = seen.lock().unwrap()[after_delete..].to_vec();
    assert!(
        late.is_empty(),
        "the deleted job's firing {fid} ran after the delete returned: {late:?}"
    );
}
