//! Misfire and overlap policies, pause and resume.

use std::time::Duration;

use keyfire::JobSpec;
use keyfire_testkit::world::{World, assert_spaced, doubles};
use serde_json::json;

fn every(id: &str, every: &str, handler: &str, f: impl FnOnce(&mut JobSpec)) -> JobSpec {
    let mut s = JobSpec::every(id, every, handler);
    f(&mut s);
    s
}

/// All nodes stopped for 10 s while an every-second job is due. On restart
/// `fire_once` runs it once and records the missed firings; `skip` runs nothing late;
/// `catch_up` runs each missed firing once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outage_meets_each_misfire_policy() {
    let w = World::new().await;
    let client = w.client().await;
    for (id, policy) in [
        ("once", "fire_once"),
        ("skip", "skip"),
        ("catch", "catch_up"),
    ] {
        client
            .upsert(every(id, "1s", "rec", |s| {
                s.misfire = Some(policy.into());
                s.misfire_tolerance = Some("1s".into());
            }))
            .await
            .unwrap();
    }
    let node = w.node("a").await;
    w.recorder
        .wait_until(Duration::from_secs(10), "a run of each", |s| {
            ["once", "skip", "catch"]
                .iter()
                .all(|id| s.iter().any(|r| r.job_id == *id))
        })
        .await;
    node.shutdown().await;
    let stopped = w.redis_ms().await;
    // The outage itself is the scenario: no node runs for 10 s.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let restarted = w.redis_ms().await;
    let node = w.node("b").await;
    w.recorder
        .wait_until(Duration::from_secs(15), "each job back on schedule", |s| {
            ["once", "skip", "catch"].iter().all(|id| {
                s.iter()
                    .any(|r| r.job_id == *id && r.scheduled_ms >= restarted + 2_000)
            })
        })
        .await;
    for id in ["once", "skip", "catch"] {
        client.pause(id).await.unwrap();
    }
    w.wait_idle(Duration::from_secs(5)).await;
    node.shutdown().await;

    let seen = w.recorder.seen();
    assert!(doubles(&seen).is_empty(), "doubles {:?}", doubles(&seen));
    // Firings due while every node was down, found later than the 1 s tolerance.
    let late = |id: &str| -> Vec<i64> {
        let mut v: Vec<i64> = seen
            .iter()
            .filter(|r| {
                r.job_id == id && r.scheduled_ms > stopped && r.scheduled_ms < restarted - 1_000
            })
            .map(|r| r.scheduled_ms)
            .collect();
        v.sort();
        v
    };
    let mut misses = std::collections::HashMap::new();
    for id in ["once", "skip", "catch"] {
        misses.insert(id, client.get(id).await.unwrap().missed);
    }
    let missed = |id: &str| misses[id];
    let once = late("once");
    assert_eq!(once.len(), 1, "fire_once ran the outage's firings {once:?}");
    assert!(missed("once") >= 7, "fire_once recorded too few misses");
    assert!(
        late("skip").is_empty(),
        "skip ran late firings {:?}",
        late("skip")
    );
    assert!(missed("skip") >= 8, "skip recorded too few misses");
    let mut catch: Vec<i64> = seen
        .iter()
        .filter(|r| r.job_id == "catch")
        .map(|r| r.scheduled_ms)
        .collect();
    catch.sort();
    for pair in catch.windows(2) {
        assert_eq!(pair[1] - pair[0], 1_000, "catch_up left a gap: {catch:?}");
    }
    assert!(
        late("catch").len() >= 8,
        "catch_up ran too few: {:?}",
        late("catch")
    );
    assert_eq!(missed("catch"), 0);
    eprintln!(
        "acceptance-4.3: outage {} ms; fire_once ran {} late, skip 0, catch_up {}",
        restarted - stopped,
        once.len(),
        late("catch").len()
    );
}

/// Runs of 1.5 s firing every second. `forbid` never has two runs at once
/// across three nodes; `replace` cancels the older one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn overlap_forbid_and_replace_hold_across_nodes() {
    let w = World::new().await;
    let nodes = [w.node("a").await, w.node("b").await, w.node("c").await];
    let client = w.client().await;
    for (id, policy) in [("forbid", "forbid"), ("replace", "replace")] {
        client
            .upsert(every(id, "1s", "sleepy", |s| {
                s.overlap = Some(policy.into());
                s.params = json!({"sleep_ms": 1_500});
            }))
            .await
            .unwrap();
    }
    w.recorder
        .wait_until(Duration::from_secs(20), "6 runs of each", |s| {
            ["forbid", "replace"]
                .iter()
                .all(|id| s.iter().filter(|r| r.job_id == *id).count() >= 6)
        })
        .await;
    client.pause("forbid").await.unwrap();
    client.pause("replace").await.unwrap();
    w.wait_idle(Duration::from_secs(10)).await;

    let mut forbid = w.recorder.seen_of("forbid");
    forbid.sort_by_key(|r| r.start_ms);
    for pair in forbid.windows(2) {
        let end = w
            .recorder
            .ended(&pair[0].firing_id)
            .expect("forbid run ended");
        assert!(
            pair[1].start_ms >= end,
            "two forbid runs at once: {} started before {} ended",
            pair[1].firing_id,
            pair[0].firing_id
        );
    }
    let job = client.get("forbid").await.unwrap();
    assert!(job.skipped >= 3, "forbid skipped {} firings", job.skipped);

    let mut replace = w.recorder.seen_of("replace");
    replace.sort_by_key(|r| r.start_ms);
    let cancelled = replace
        .iter()
        .filter(|r| w.recorder.was_cancelled(&r.firing_id))
        .count();
    // Every run but the last is replaced by the next one, a second later.
    assert!(
        cancelled >= replace.len() - 2,
        "only {cancelled} of {} replaced",
        replace.len()
    );
    for pair in replace.windows(2) {
        if w.recorder.was_cancelled(&pair[0].firing_id) {
            let end = w.recorder.ended(&pair[0].firing_id).unwrap();
            assert!(
                end <= pair[1].start_ms + 1_000,
                "replaced run went on for too long"
            );
        }
    }
    let runs = client.runs("replace", 50).await.unwrap();
    assert!(runs.iter().any(|r| r.outcome == "cancelled"), "{runs:?}");
    let nodes_used: std::collections::HashSet<&str> = forbid
        .iter()
        .chain(&replace)
        .map(|r| r.node.as_str())
        .collect();
    eprintln!(
        "acceptance-4.4: forbid {} runs {} skipped; replace {} runs {} cancelled; nodes {nodes_used:?}",
        forbid.len(),
        job.skipped,
        replace.len(),
        cancelled
    );
    for n in nodes {
        n.shutdown().await;
    }
}

/// Paused jobs fire nothing; a short pause (within the tolerance) loses nothing on resume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_job_fires_nothing_until_it_resumes_on_schedule() {
    let w = World::new().await;
    let node = w.node("a").await;
    let client = w.client().await;
    client
        .upsert(JobSpec::every("p", "300ms", "rec"))
        .await
        .unwrap();
    w.recorder.wait_count(2, Duration::from_secs(5)).await;
    client.pause("p").await.unwrap();
    let paused = w.redis_ms().await;
    w.wait_idle(Duration::from_secs(5)).await;
    // The pause's length (not a wait for anything): two periods, so the first firing after
    // the pause began is past when the job resumes, and its owner claims it at once.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let before = w.recorder.seen().len();
    let resumed = client.resume("p").await.unwrap();
    w.recorder
        .wait_count(before + 3, Duration::from_secs(5))
        .await;
    // resume() reports the firing it scheduled (the first after the pause began, past now),
    // not whatever the job's next firing became after a node claimed that one.
    assert_eq!(resumed.status, keyfire::store::JobStatus::Active);
    // The earliest firing run since: the firings due since the pause began run at once, side
    // by side, so the one recorded first need not be the earliest.
    let first = w.recorder.seen()[before..]
        .iter()
        .map(|s| s.scheduled_ms)
        .min()
        .unwrap();
    assert_eq!(resumed.next_ms, Some(first));
    assert!(
        first <= paused + 300,
        "{first} is the first firing after the pause"
    );
    client.pause("p").await.unwrap();
    w.wait_idle(Duration::from_secs(5)).await;
    let seen = w.recorder.seen();
    let resumed_at = seen[before..].iter().map(|r| r.claimed_ms).min().unwrap();
    assert!(
        seen.iter()
            .all(|r| r.claimed_ms <= paused || r.claimed_ms >= resumed_at),
        "a run while paused"
    );
    assert_spaced(
        &seen,
        300,
        "a pause shorter than the tolerance lost a firing",
    );
    node.shutdown().await;
}
