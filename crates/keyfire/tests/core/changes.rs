//! Changes are atomic and seen at once (G4).

use std::time::Duration;

use chrono::DateTime;
use futures::future::try_join_all;
use keyfire::JobSpec;
use keyfire_testkit::world::{World, redis_ms};

/// Jobs deleted or paused shortly before their instant never run after the
/// call returned. Each job is a fast fixed-rate job, so a firing is always moments away.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleted_or_paused_jobs_never_run_after_the_call_returned() {
    let w = World::new().await;
    let nodes = [w.node("a").await, w.node("b").await, w.node("c").await];
    let client = w.client().await;
    let ids: Vec<String> = (0..60).map(|i| format!("j{i}")).collect();
    try_join_all(
        ids.iter()
            .map(|id| client.upsert(JobSpec::every(id.clone(), "150ms", "rec"))),
    )
    .await
    .unwrap();
    w.recorder.wait_count(200, Duration::from_secs(10)).await;

    // Delete the even jobs, pause the odd ones; note Redis time when each call returned.
    let mut conn = w.conn().await;
    let mut returned = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        if i % 2 == 0 {
            client.delete(id).await.unwrap();
        } else {
            client.pause(id).await.unwrap();
        }
        returned.push((id.clone(), redis_ms(&mut conn).await));
    }
    // A canary due after every node has swept past the grace period: when it has run, any
    // firing that slipped through would have been claimed too.
    let s = &w.settings.node;
    let after = (s.claim_grace + s.sweep_interval * 2).as_millis() as i64;
    let canary_at = redis_ms(&mut conn).await + after;
    client
        .upsert(JobSpec::at(
            "canary",
            DateTime::from_timestamp_millis(canary_at).unwrap(),
            "rec",
        ))
        .await
        .unwrap();
    w.recorder
        .wait_until(Duration::from_secs(15), "canary", |s| {
            s.iter().any(|r| r.job_id == "canary")
        })
        .await;
    w.wait_idle(Duration::from_secs(10)).await;

    let seen = w.recorder.seen();
    let mut checked = 0;
    for (id, ret) in &returned {
        for r in seen.iter().filter(|r| &r.job_id == id) {
            checked += 1;
            assert!(
                r.claimed_ms <= *ret,
                "{id} claimed at {} after the call returned at {ret}",
                r.claimed_ms
            );
        }
    }
    eprintln!("acceptance-5a: {checked} runs of changed jobs checked, none after the call");
    for id in ids.iter().skip(1).step_by(2) {
        assert_eq!(
            client.get(id).await.unwrap().status,
            keyfire::store::JobStatus::Paused
        );
    }
    assert!(
        client.get("j0").await.is_err(),
        "deleted job still readable"
    );
    for n in nodes {
        n.shutdown().await;
    }
}

/// An updated schedule takes effect on every node for the next firing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn updated_schedule_takes_effect_on_every_node() {
    let w = World::new().await;
    let nodes = [w.node("a").await, w.node("b").await, w.node("c").await];
    let client = w.client().await;
    // Even seconds, then odd seconds.
    client
        .upsert(JobSpec::cron("flip", "*/2 * * * * *", "rec"))
        .await
        .unwrap();
    w.recorder.wait_count(2, Duration::from_secs(10)).await;
    let v1 = client.get("flip").await.unwrap().version;
    let updated = client
        .upsert(JobSpec::cron("flip", "1-59/2 * * * * *", "rec"))
        .await
        .unwrap();
    assert_eq!(updated.version, v1 + 1);
    let returned = w.redis_ms().await;
    let next = updated.next_ms.expect("next firing");
    assert_eq!(
        (next / 1_000) % 2,
        1,
        "next firing after update is on an odd second"
    );

    w.recorder
        .wait_until(Duration::from_secs(15), "6 runs after the update", |s| {
            s.iter().filter(|r| r.claimed_ms > returned).count() >= 6
        })
        .await;
    client.pause("flip").await.unwrap();
    w.wait_idle(Duration::from_secs(5)).await;
    let after: Vec<_> = w
        .recorder
        .seen()
        .into_iter()
        .filter(|r| r.claimed_ms > returned)
        .collect();
    for r in &after {
        assert_eq!(
            (r.scheduled_ms / 1_000) % 2,
            1,
            "old schedule ran after the update: {r:?}"
        );
    }
    let mut instants: Vec<i64> = after.iter().map(|r| r.scheduled_ms).collect();
    instants.sort();
    for pair in instants.windows(2) {
        assert_eq!(pair[1] - pair[0], 2_000, "gap or double: {instants:?}");
    }
    let mut by_node: Vec<&str> = after.iter().map(|r| r.node.as_str()).collect();
    by_node.sort();
    by_node.dedup();
    eprintln!(
        "acceptance-5b: {} runs after the update, on nodes {by_node:?}",
        after.len()
    );
    for n in nodes {
        n.shutdown().await;
    }
}
