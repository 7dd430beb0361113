//! Backfill: each instant of a past range runs once, as a firing of its own, at the rate
//! asked, through the death of the node running them; the same backfill again runs nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use keyfire::JobSpec;
use keyfire::error::Error;
use keyfire_testkit::wait;
use keyfire_testkit::world::World;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

use crate::node_process::{NodeProcess, log_lines};

fn at(ms: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_millis(ms).unwrap()
}

/// A job of an every-second cron schedule whose window closed 10 s ago (so the schedule runs
/// nothing of its own): 100 of its past instants backfilled at 20 per second, the node
/// process running them SIGKILLed after 30 started. Each instant's firing succeeds exactly
/// once (a run lost with the node is taken over as attempt 2 of the same firing), no other
/// firing runs, they ran no faster than the rate, and the same backfill again schedules
/// nothing and runs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backfill_runs_each_instant_once_through_a_node_kill() {
    let mut w = World::new().await;
    w.settings.node.history_limit = 1_000;
    w.settings.node.lease = Duration::from_secs(2);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let mut victim = NodeProcess::spawn(
        &w,
        "victim",
        &log,
        &[("LEASE", "2s"), ("SWEEP_INTERVAL", "200ms")],
    );
    let client = w.client().await.allow_handlers(["slow"]);
    let now = w.redis_ms().await;
    let second = now / 1000 * 1000;
    let mut spec = JobSpec::cron("past", "* * * * * *", "slow").params(json!({"sleep_ms": 150}));
    spec.end_at = Some(at(second - 10_000));
    client.upsert(spec).await.unwrap();
    let (from, to) = (at(second - 109_000), at(second - 10_000));
    let expected: BTreeSet<String> = (0..100)
        .map(|i| format!("past:{}", second - 109_000 + i * 1000))
        .collect();

    let done = client.backfill("past", from, to, Some(20.0)).await.unwrap();
    assert_eq!((done.instants, done.scheduled, done.skipped), (100, 100, 0));
    let (first, last) = (done.first_ms.unwrap(), done.last_ms.unwrap());
    assert!(
        last - first >= 99 * 50,
        "100 runs at 20/s span at least 4.95 s: {first}..{last}"
    );

    wait::until(
        "the victim to start 30 backfilled runs",
        Duration::from_secs(30),
        async || log_lines(&log).iter().filter(|l| l.0 == "start").count() >= 30,
    )
    .await;
    kill(Pid::from_raw(victim.id() as i32), Signal::SIGKILL).unwrap();
    victim.wait().unwrap();
    let nodes = [w.node("b").await, w.node("c").await];

    let ok_per_firing = async || {
        let mut ok: BTreeMap<String, usize> = BTreeMap::new();
        for r in client.runs("past", 1_000).await.unwrap() {
            if r.outcome == "ok" {
                *ok.entry(r.firing_id).or_default() += 1;
            }
        }
        ok
    };
    wait::until(
        "100 firings to succeed",
        Duration::from_secs(60),
        async || ok_per_firing().await.len() >= 100,
    )
    .await;
    w.wait_idle(Duration::from_secs(20)).await;
    let ok = ok_per_firing().await;
    assert_eq!(
        ok.keys().cloned().collect::<BTreeSet<_>>(),
        expected,
        "the firings that succeeded are the 100 instants"
    );
    assert!(
        ok.values().all(|&n| n == 1),
        "a firing succeeded twice: {ok:?}"
    );
    let runs = client.runs("past", 1_000).await.unwrap();
    // Claims by any node: no two attempts 1 of a firing.
    let mut firsts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.attempt == 1) {
        *firsts.entry(r.firing_id.as_str()).or_default() += 1;
    }
    assert!(firsts.values().all(|&n| n == 1), "{firsts:?}");
    let mut claims: Vec<i64> = runs
        .iter()
        .filter(|r| r.attempt == 1)
        .map(|r| r.claimed_ms)
        .collect();
    claims.sort_unstable();
    assert!(
        claims[claims.len() - 1] - claims[0] >= 99 * 50 - 200,
        "ran faster than 20 per second: {} ms for 100",
        claims[claims.len() - 1] - claims[0]
    );

    // The same backfill again: everything ran.
    let again = client.backfill("past", from, to, Some(20.0)).await.unwrap();
    assert_eq!(
        (again.instants, again.scheduled, again.skipped),
        (100, 0, 100)
    );
    assert_eq!((again.first_ms, again.last_ms), (None, None));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(client.runs("past", 1_000).await.unwrap().len(), runs.len());
    for n in nodes {
        n.shutdown().await;
    }
}

/// What the schedule ran is not run again; what its ledger says did not run is; bad input is
/// refused naming the field, and nothing is queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_skips_what_the_schedule_ran_and_refuses_bad_input() {
    let w = World::new().await;
    let client = w.client().await;
    let node = w.node("a").await;
    let spec = JobSpec::every("tick", "200ms", "rec");
    client.upsert(spec).await.unwrap();
    w.recorder
        .wait_until(Duration::from_secs(10), "5 runs", |s| s.len() >= 5)
        .await;
    client.pause("tick").await.unwrap();
    w.wait_idle(Duration::from_secs(5)).await;
    let job = client.get("tick").await.unwrap();
    let ran: BTreeSet<String> = w.recorder.seen().into_iter().map(|s| s.firing_id).collect();
    let (created, last) = (job.created_ms, job.last_ms.unwrap());

    let paused = client
        .backfill("tick", at(created), at(last), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&paused, Error::Invalid(v) if v.field == "id"),
        "{paused}"
    );

    let bad = |e: Error| match e {
        Error::Invalid(v) => v.field,
        other => panic!("{other}"),
    };
    client
        .enqueue(JobSpec::after("once", "1h", "rec"))
        .await
        .unwrap();
    let now = w.redis_ms().await;
    // Every second, its window closed: it runs nothing of its own.
    let mut secondly = JobSpec::cron("secondly", "* * * * * *", "rec");
    secondly.end_at = Some(at(now - 1));
    client.upsert(secondly).await.unwrap();
    let before = w.keys().await;
    assert_eq!(
        bad(client
            .backfill("tick", at(now - 1000), at(now - 2000), None)
            .await
            .unwrap_err()),
        "to"
    );
    assert_eq!(
        bad(client
            .backfill("tick", at(now - 1000), at(now + 60_000), None)
            .await
            .unwrap_err()),
        "to"
    );
    assert_eq!(
        bad(client
            .backfill("tick", at(now - 1000), at(now - 500), Some(0.0))
            .await
            .unwrap_err()),
        "rate"
    );
    assert_eq!(
        bad(client
            .backfill("tick", at(now - 1000), at(now - 500), Some(101.0))
            .await
            .unwrap_err()),
        "rate"
    );
    // Every second: 20,000 instants.
    assert_eq!(
        bad(client
            .backfill("secondly", at(now - 20_000_000), at(now - 1001), None)
            .await
            .unwrap_err()),
        "to",
        "past 10,000 instants"
    );
    assert_eq!(
        bad(client
            .backfill("once", at(now - 1000), at(now - 500), None)
            .await
            .unwrap_err()),
        "id"
    );
    assert!(matches!(
        client
            .backfill("nope", at(now - 1000), at(now - 500), None)
            .await,
        Err(Error::NotFound(_))
    ));
    assert_eq!(before, w.keys().await, "a refused backfill writes nothing");

    client.resume("tick").await.unwrap();
    // Everything from creation to the last claimed instant ran or is in the ledger.
    let done = client
        .backfill("tick", at(created), at(last), Some(100.0))
        .await
        .unwrap();
    assert_eq!(done.skipped + done.scheduled, done.instants);
    let skips = client.skips("tick", 100).await.unwrap();
    let not_run: u64 = skips
        .iter()
        .filter(|s| s.first_ms <= last)
        .map(|s| s.count)
        .sum();
    assert_eq!(
        done.scheduled, not_run,
        "only what the ledger says did not run is queued ({skips:?})"
    );
    assert!(done.instants >= ran.len() as u64);
    node.shutdown().await;
}
