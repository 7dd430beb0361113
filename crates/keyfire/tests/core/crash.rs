//! A node process killed mid-run: its runs are taken over after their lease (G5).

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use keyfire::JobSpec;
use keyfire_testkit::wait;
use keyfire_testkit::world::World;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

use crate::node_process::{NodeProcess, log_lines};

fn spawn_node(w: &World, id: &str, log: &Path) -> NodeProcess {
    spawn_node_with_lease(w, id, log, "2s")
}

fn spawn_node_with_lease(w: &World, id: &str, log: &Path, lease: &str) -> NodeProcess {
    NodeProcess::spawn(
        w,
        id,
        log,
        &[
            ("LEASE", lease),
            ("SWEEP_INTERVAL", "500ms"),
            ("CLAIM_GRACE", "1s"),
        ],
    )
}

/// A node process killed with SIGKILL while 50 runs are in flight: each of
/// those firings completes on another node with attempt 2, and none completes twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkilled_node_runs_are_taken_over_as_attempt_two() {
    let mut w = World::new().await;
    w.settings.node.lease = Duration::from_secs(2);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let mut victim = spawn_node(&w, "victim", &log);
    let client = w.client().await.allow_handlers(["slow"]);
    let specs: Vec<JobSpec> = (0..50)
        .map(|i| JobSpec::after(format!("t{i}"), "0s", "slow").params(json!({"sleep_ms": 1_500})))
        .collect();
    client.enqueue_many(specs).await.unwrap();
    wait::until(
        "the victim to start 50 runs",
        Duration::from_secs(20),
        async || log_lines(&log).iter().filter(|l| l.0 == "start").count() >= 50,
    )
    .await;
    kill(Pid::from_raw(victim.id() as i32), Signal::SIGKILL).unwrap();
    victim.wait().unwrap();
    let killed_at = w.redis_ms().await;
    assert!(
        log_lines(&log).iter().all(|l| l.0 == "start"),
        "a run ended before the kill"
    );

    let nodes = [w.node("b").await, w.node("c").await];
    w.recorder
        .wait_until(Duration::from_secs(20), "50 takeovers finished", |s| {
            s.iter()
                .filter(|r| w.recorder.ended(&r.firing_id).is_some())
                .count()
                >= 50
        })
        .await;
    w.wait_idle(Duration::from_secs(10)).await;

    let seen = w.recorder.seen();
    assert_eq!(seen.len(), 50, "runs after the kill");
    for r in &seen {
        assert_eq!(r.attempt, 2, "{r:?}");
        assert_ne!(r.node, "victim");
        assert!(
            r.claimed_ms >= killed_at,
            "taken over before the lease could expire"
        );
    }
    let mut ok_per_firing: HashMap<String, usize> = HashMap::new();
    for i in 0..50 {
        let runs = client.runs(&format!("t{i}"), 10).await.unwrap();
        for r in runs.iter().filter(|r| r.outcome == "ok") {
            *ok_per_firing.entry(r.firing_id.clone()).or_default() += 1;
            assert_eq!(r.attempt, 2);
        }
        assert!(
            runs.iter().any(|r| r.outcome == "lost" && r.attempt == 1),
            "{runs:?}"
        );
    }
    assert_eq!(ok_per_firing.len(), 50, "firings completed");
    assert!(
        ok_per_firing.values().all(|&n| n == 1),
        "a firing completed twice"
    );
    let late: Vec<i64> = seen.iter().map(|r| r.claimed_ms - killed_at).collect();
    eprintln!(
        "acceptance-4.1: 50 runs taken over, {} ms to {} ms after the kill (lease 2 s)",
        late.iter().min().unwrap(),
        late.iter().max().unwrap()
    );
    for n in nodes {
        n.shutdown().await;
    }
}

/// Fencing: a node frozen (SIGSTOP) past its lease loses the run to another node; when it
/// wakes up its outcome is refused, so the firing completes once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn frozen_node_cannot_record_over_the_takeover() {
    let mut w = World::new().await;
    w.settings.node.lease = Duration::from_secs(2);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let mut frozen = spawn_node(&w, "frozen", &log);
    let client = w.client().await.allow_handlers(["slow"]);
    client
        .enqueue(JobSpec::after("t", "0s", "slow").params(json!({"sleep_ms": 1_000})))
        .await
        .unwrap();
    wait::until("a run to start", Duration::from_secs(10), async || {
        !log_lines(&log).is_empty()
    })
    .await;
    let pid = Pid::from_raw(frozen.id() as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    let node = w.node("b").await;
    w.recorder.wait_count(1, Duration::from_secs(15)).await;
    let fid = w.recorder.seen()[0].firing_id.clone();
    w.recorder
        .wait_until(Duration::from_secs(5), "takeover done", |_| {
            w.recorder.ended(&fid).is_some()
        })
        .await;
    kill(pid, Signal::SIGCONT).unwrap();
    // The frozen node's handler finishes its sleep and tries to record; wait for its "end".
    wait::until(
        "the frozen run to end",
        Duration::from_secs(10),
        async || log_lines(&log).iter().any(|l| l.0 == "end"),
    )
    .await;
    kill(pid, Signal::SIGTERM).unwrap();
    frozen.wait().unwrap();
    w.wait_idle(Duration::from_secs(5)).await;
    let runs = client.runs("t", 10).await.unwrap();
    let ok: Vec<_> = runs.iter().filter(|r| r.outcome == "ok").collect();
    assert_eq!(ok.len(), 1, "{runs:?}");
    assert_eq!((ok[0].node.as_str(), ok[0].attempt), ("b", 2));
    // Whatever the woken run ended with (ok, or cancelled on its lost lease), it was refused:
    // the only record naming the frozen node is the takeover's record of its lost attempt.
    assert!(
        runs.iter()
            .all(|r| r.node != "frozen" || (r.outcome == "lost" && r.attempt == 1)),
        "{runs:?}"
    );
    node.shutdown().await;
}

/// A node process SIGKILLed with runs in flight and a lease far longer than the test: its
/// runs are taken over once it has left the live set (no heartbeat for node_ttl), within
/// seconds of the kill and not after the lease, each once, as attempt 2; the record of each
/// lost attempt names the dead node, its claim time and when the next attempt was due.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkilled_node_runs_are_taken_over_within_seconds_not_after_the_lease() {
    let w = World::new().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    // Survivors run first, so the takeover is by membership alone (no node starts after the
    // kill, which would look at every holder as it starts).
    let nodes = [w.node("b").await, w.node("c").await];
    let mut victim = spawn_node_with_lease(&w, "victim", &log, "120s");
    wait::until("the victim to join", Duration::from_secs(20), async || {
        nodes[0].live_nodes().iter().any(|n| n == "victim")
    })
    .await;
    let client = w.client().await.allow_handlers(["slow"]);
    let n = 30;
    // Each node runs the firings it owns: about a third of them start on the victim.
    let specs: Vec<JobSpec> = (0..n)
        .map(|i| JobSpec::after(format!("k{i}"), "0s", "slow").params(json!({"sleep_ms": 3_000})))
        .collect();
    client.enqueue_many(specs).await.unwrap();
    // Some runs start on the survivors (the firings they own): wait until the victim holds
    // at least one, then kill it with whatever it holds in flight.
    let started = || -> Vec<String> {
        log_lines(&log)
            .into_iter()
            .filter(|l| l.0 == "start")
            .map(|l| l.1)
            .collect()
    };
    wait::until(
        "the runs to all start",
        Duration::from_secs(20),
        async || {
            let on_victim = started().len();
            on_victim > 0 && w.recorder.seen().len() + on_victim >= n
        },
    )
    .await;
    let victim_runs = started();
    kill(Pid::from_raw(victim.id() as i32), Signal::SIGKILL).unwrap();
    victim.wait().unwrap();
    let killed_at = w.redis_ms().await;
    assert!(
        log_lines(&log).iter().all(|l| l.0 == "start"),
        "a run ended on the victim before the kill"
    );

    w.recorder
        .wait_until(
            Duration::from_secs(15),
            "the victim's runs taken over",
            |s| {
                victim_runs
                    .iter()
                    .all(|f| s.iter().any(|r| &r.firing_id == f && r.attempt == 2))
            },
        )
        .await;
    for f in &victim_runs {
        let again: Vec<_> = w
            .recorder
            .seen()
            .into_iter()
            .filter(|r| &r.firing_id == f)
            .collect();
        assert_eq!(again.len(), 1, "{f} ran again more than once: {again:?}");
        let r = &again[0];
        assert_eq!(r.attempt, 2);
        assert!(
            r.claimed_ms - killed_at <= 10_000,
            "{f} taken over {} ms after the kill (lease 120 s)",
            r.claimed_ms - killed_at
        );
    }
    w.wait_idle(Duration::from_secs(15)).await;
    let mut late = Vec::new();
    for f in &victim_runs {
        let (job, _) = keyfire::store::parse_firing_id(f).unwrap();
        let runs = client.runs(job, 10).await.unwrap();
        let lost: Vec<_> = runs.iter().filter(|r| r.outcome == "lost").collect();
        assert_eq!(lost.len(), 1, "{runs:?}");
        let lost = lost[0];
        assert_eq!(
            (lost.node.as_str(), lost.attempt),
            ("victim", 1),
            "{lost:?}"
        );
        assert!(
            lost.claimed_ms > 0 && lost.claimed_ms <= killed_at,
            "claim time of the lost attempt: {lost:?}"
        );
        assert_eq!(lost.fate.as_deref(), Some("retry"), "{lost:?}");
        let due = lost.retry_at_ms.expect("when the next attempt is due");
        assert!(
            due >= lost.claimed_ms && due <= killed_at + 10_000,
            "{lost:?}"
        );
        let ok: Vec<_> = runs.iter().filter(|r| r.outcome == "ok").collect();
        assert_eq!(ok.len(), 1, "{runs:?}");
        assert_eq!(ok[0].attempt, 2);
        late.push(
            w.recorder
                .seen()
                .iter()
                .find(|r| &r.firing_id == f)
                .unwrap()
                .claimed_ms
                - killed_at,
        );
    }
    eprintln!(
        "takeover by membership: {} runs of the killed node taken over {} ms to {} ms after the kill (lease 120 s, node_ttl 1 s)",
        victim_runs.len(),
        late.iter().min().unwrap(),
        late.iter().max().unwrap()
    );
    for n in nodes {
        n.shutdown().await;
    }
}

/// A node frozen (SIGSTOP) for less than node_ttl keeps its runs: it wakes still in the live
/// set, asks Redis with a heartbeat instead of fencing itself, and records each outcome once,
/// as attempt 1. Two pauses while 50 runs are in flight: 0.5 × node_ttl, and 0.7 × node_ttl,
/// after which its last good heartbeat is always older than the fence's 3/5 of node_ttl (a
/// node that fenced itself then would stop its runs, and they would run again as attempt 2).
/// A peer that could take the runs over is live throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_paused_for_less_than_node_ttl_keeps_its_runs() {
    let mut w = World::new().await;
    w.settings.node.node_ttl = Duration::from_secs(2);
    w.settings.node.heartbeat_interval = Duration::from_millis(200);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let mut paused = NodeProcess::spawn(
        &w,
        "paused",
        &log,
        &[
            ("NODE_TTL", "2s"),
            ("LEASE", "10s"),
            ("SWEEP_INTERVAL", "500ms"),
            ("CLAIM_GRACE", "1s"),
        ],
    );
    let client = w.client().await.allow_handlers(["slow"]);
    let specs: Vec<JobSpec> = (0..50)
        .map(|i| JobSpec::after(format!("p{i}"), "0s", "slow").params(json!({"sleep_ms": 6_000})))
        .collect();
    client.enqueue_many(specs).await.unwrap();
    wait::until(
        "the node to start 50 runs",
        Duration::from_secs(20),
        async || log_lines(&log).iter().filter(|l| l.0 == "start").count() >= 50,
    )
    .await;
    let peer = w.node("peer").await;
    let pid = Pid::from_raw(paused.id() as i32);
    // The stops, and the half second the node runs between them, pace the faults: wall time
    // on purpose.
    for stop in [Duration::from_millis(1_000), Duration::from_millis(1_400)] {
        kill(pid, Signal::SIGSTOP).unwrap();
        tokio::time::sleep(stop).await;
        kill(pid, Signal::SIGCONT).unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    wait::until("50 runs to end", Duration::from_secs(20), async || {
        log_lines(&log).iter().filter(|l| l.0 == "end").count() >= 50
    })
    .await;
    kill(pid, Signal::SIGTERM).unwrap();
    paused.wait().unwrap();
    w.wait_idle(Duration::from_secs(10)).await;

    let lines = log_lines(&log);
    let again: Vec<_> = lines
        .iter()
        .filter(|l| l.0 == "start" && l.2 != 1)
        .collect();
    assert!(
        again.is_empty(),
        "{} runs were run again, such as {:?}",
        again.len(),
        &again[..again.len().min(3)]
    );
    assert_eq!(lines.len(), 100, "50 starts and 50 ends");
    assert!(w.recorder.seen().is_empty(), "the peer ran a firing");
    for i in 0..50 {
        let runs = client.runs(&format!("p{i}"), 10).await.unwrap();
        assert_eq!(runs.len(), 1, "p{i}: {runs:?}");
        assert_eq!(
            (
                runs[0].outcome.as_str(),
                runs[0].attempt,
                runs[0].node.as_str()
            ),
            ("ok", 1, "paused"),
            "p{i}"
        );
    }
    peer.shutdown().await;
}
