//! Upgrades: runs claimed by nodes of the earlier key layout (a run's lease record in the
//! attempts hash, its running entry the bare firing id) are renewed, completed and taken
//! over by the current scripts. The earlier shape is written through Redis directly, then
//! the store's scripts are driven one step at a time.

use keyfire::JobSpec;
use keyfire::store::{ClaimReply, Fate, HistoryLimits, Keys, RunRecord, firing_id};
use keyfire_testkit::world::World;

const LIMITS: HistoryLimits = HistoryLimits {
    history: 10,
    history_max_age_ms: 3_600_000,
    dead: 10,
};

fn record(id: &str, at_ms: i64, attempt: u32, claimed_ms: i64, node: &str) -> RunRecord {
    RunRecord {
        firing_id: firing_id(id, at_ms),
        scheduled_ms: at_ms,
        attempt,
        node: node.into(),
        claimed_ms,
        started_ms: claimed_ms,
        outcome: "ok".into(),
        error: None,
        finished_ms: None,
        fate: None,
        retry_at_ms: None,
    }
}

/// What a claim of the earlier layout left in Redis for a one-shot task: the due entry
/// gone, the job finished with `active` the bare firing id, the run's lease record in the
/// attempts hash and its expiry in the running ZSET (no run counted yet).
async fn claim_the_earlier_way(
    w: &World,
    keys: &Keys,
    id: &str,
    at_ms: i64,
    claimed_ms: i64,
    node: &str,
) {
    let fid = firing_id(id, at_ms);
    let mut c = w.conn().await;
    let _: () = redis::pipe()
        .zrem(keys.due(), id)
        .hset_multiple(
            keys.job(id),
            &[
                ("next", String::new()),
                ("last", at_ms.to_string()),
                ("status", "finished".into()),
                ("active", fid.clone()),
            ],
        )
        .hset(keys.attempts(), &fid, format!("1:{claimed_ms}:{node}"))
        .zadd(keys.running(), &fid, claimed_ms + 30_000)
        .query_async(&mut c)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_claimed_by_the_earlier_layout_are_renewed_completed_and_taken_over() {
    let w = World::new().await;
    let client = w.client().await;
    let store = client.store();
    let keys = Keys::new(&w.settings.redis.prefix);
    let now = w.redis_ms().await;
    let at = chrono::DateTime::from_timestamp_millis(now + 3_600_000).unwrap();
    for id in ["old1", "old2"] {
        client.enqueue(JobSpec::at(id, at, "rec")).await.unwrap();
        // The earlier layout kept every task in a job hash.
        assert!(store.expand(id).await.unwrap());
    }
    let at_ms = store
        .get_job("old1")
        .await
        .unwrap()
        .unwrap()
        .next_ms
        .unwrap();
    let claimed = now - 1_000;
    claim_the_earlier_way(&w, &keys, "old1", at_ms, claimed, "n-old").await;
    claim_the_earlier_way(&w, &keys, "old2", at_ms, claimed, "n-old").await;

    // The sweeper reads who holds each run and since when.
    let mut leases = store.leases(0, 10).await.unwrap();
    leases.sort_by(|a, b| a.job_id.cmp(&b.job_id));
    let holders: Vec<(&str, u32, i64, Option<&str>)> = leases
        .iter()
        .map(|l| {
            (
                l.job_id.as_str(),
                l.attempt,
                l.claimed_ms,
                l.node.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        holders,
        [
            ("old1", 1, claimed, Some("n-old")),
            ("old2", 1, claimed, Some("n-old"))
        ]
    );

    // Its holder renews it; no one else can.
    assert!(
        !store
            .renew("old1", at_ms, 1, None, "n-other", 30_000)
            .await
            .unwrap()
    );
    assert!(
        store
            .renew("old1", at_ms, 1, Some(claimed), "n-old", 30_000)
            .await
            .unwrap()
    );
    let mut c = w.conn().await;
    let expiry: i64 = redis::cmd("ZSCORE")
        .arg(keys.running())
        .arg(firing_id("old1", at_ms))
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(expiry > claimed + 30_000, "not renewed: {expiry}");

    // Its holder completes it: the lease and the record go, the run is counted once.
    let (fate, _) = store
        .complete(
            "old1",
            &record("old1", at_ms, 1, claimed, "n-old"),
            &LIMITS,
            None,
        )
        .await
        .unwrap();
    assert_eq!(fate, Fate::Done);
    let (fate, _) = store
        .complete(
            "old1",
            &record("old1", at_ms, 1, claimed, "n-old"),
            &LIMITS,
            None,
        )
        .await
        .unwrap();
    assert_eq!(fate, Fate::Fenced, "a second outcome of the same run");
    let job = store.get_job("old1").await.unwrap().unwrap();
    assert_eq!((job.runs, job.failures), (1, 0));
    let (running, record_left, done): (i64, bool, Option<f64>) = redis::pipe()
        .zcard(keys.running())
        .hexists(keys.attempts(), firing_id("old1", at_ms))
        .zscore(keys.done(), "old1")
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(
        (running, record_left),
        (1, false),
        "old1's lease left behind"
    );
    assert!(
        done.is_some(),
        "the finished task is not marked for cleanup"
    );

    // Its node is gone: the run is taken over, and the history names the node and claim.
    assert_eq!(
        store
            .take_over("old2", at_ms, Some("n-old"), 3, 10, 10)
            .await
            .unwrap(),
        Some(2)
    );
    let lost = store.runs("old2", 10).await.unwrap();
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(
        (
            lost[0].outcome.as_str(),
            lost[0].node.as_str(),
            lost[0].claimed_ms
        ),
        ("lost", "n-old", claimed)
    );
    // The old run can no longer renew or record; the next attempt runs under the new layout.
    assert!(
        !store
            .renew("old2", at_ms, 1, Some(claimed), "n-old", 30_000)
            .await
            .unwrap()
    );
    let next = store
        .claim_retry("old2", at_ms, "n-new", 30_000, "allow", None)
        .await
        .unwrap();
    let ClaimReply::Claimed { now_ms, attempt: 2 } = next else {
        panic!("{next:?}");
    };
    let (fate, _) = store
        .complete(
            "old2",
            &record("old2", at_ms, 1, claimed, "n-old"),
            &LIMITS,
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        fate,
        Fate::Fenced,
        "the taken-over run recorded its outcome"
    );
    let (fate, _) = store
        .complete(
            "old2",
            &record("old2", at_ms, 2, now_ms, "n-new"),
            &LIMITS,
            None,
        )
        .await
        .unwrap();
    assert_eq!(fate, Fate::Done);
    let job = store.get_job("old2").await.unwrap().unwrap();
    assert_eq!(
        (job.runs, job.failures),
        (2, 1),
        "the lost run and the next"
    );
    let (running, records): (i64, i64) = redis::pipe()
        .zcard(keys.running())
        .hlen(keys.attempts())
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!((running, records), (0, 0), "leases left behind");
}

/// A lease names its run with its claim instant: when a dead letter is replayed and claimed
/// again by the same node as attempt 1, the stale run (same node, same attempt number)
/// cannot renew the replay's lease, and once the replay recorded its outcome the stale
/// run's is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_names_its_claim_instant() {
    use keyfire::store::ClaimArgs;
    let w = World::new().await;
    let client = w.client().await;
    let store = client.store();
    let now = w.redis_ms().await;
    let at = chrono::DateTime::from_timestamp_millis(now - 10).unwrap();
    client.enqueue(JobSpec::at("t", at, "rec")).await.unwrap();
    let stored = store.job_spec("t").await.unwrap().unwrap();
    let at_ms = store.get_job("t").await.unwrap().unwrap().next_ms.unwrap();
    let claimed = store
        .claim(&ClaimArgs {
            job_id: "t",
            at_ms,
            version: stored.version,
            generation: stored.generation,
            next_ms: None,
            node: "n1",
            lease_ms: 30_000,
            tolerance_ms: 60_000,
            misfire_applied: false,
            run: true,
            missed: 0,
            overlap: "allow",
            announce_ms: 0,
            arms_next: false,
            compact: stored.compact,
            dropped: None,
            jitter_ms: 0,
        })
        .await
        .unwrap();
    let ClaimReply::Claimed { now_ms: first, .. } = claimed else {
        panic!("{claimed:?}");
    };
    // Taken over (n1 is gone, by the caller's view) with no attempt left: dead.
    assert_eq!(
        store
            .take_over("t", at_ms, Some("n1"), 1, 10, 10)
            .await
            .unwrap(),
        Some(0)
    );
    assert_eq!(store.dead_op("t", true, None).await.unwrap(), Some(1));
    // The same node claims the replay (attempt 1 again) a moment later, by Redis's clock.
    w.until_redis_ms(first + 1).await;
    let replay = store
        .claim_retry("t", at_ms, "n1", 30_000, "allow", None)
        .await
        .unwrap();
    let ClaimReply::Claimed {
        now_ms: second,
        attempt: 1,
    } = replay
    else {
        panic!("{replay:?}");
    };
    assert!(second > first);
    assert!(
        !store
            .renew("t", at_ms, 1, Some(first), "n1", 30_000)
            .await
            .unwrap(),
        "the stale run renewed the replay's lease"
    );
    let stale = record("t", at_ms, 1, first, "n1");
    let mut c = w.conn().await;
    let keys = Keys::new(&w.settings.redis.prefix);
    let members: Vec<String> = redis::cmd("ZRANGE")
        .arg(keys.running())
        .arg(0)
        .arg(-1)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(members, [format!("t:{at_ms}|1|{second}|n1")]);
    // Named exactly, the replay's outcome is the one recorded.
    let (fate, _) = store
        .complete("t", &record("t", at_ms, 1, second, "n1"), &LIMITS, None)
        .await
        .unwrap();
    assert_eq!(fate, Fate::Done);
    let (fate, _) = store.complete("t", &stale, &LIMITS, None).await.unwrap();
    assert_eq!(fate, Fate::Fenced);
}
