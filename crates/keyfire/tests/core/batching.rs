//! The claim and completion scripts take a batch per call and send the writes that go to the
//! same key as one command for the whole call. These drive the scripts directly with batches
//! that meet the same job or firing twice, where a write held back would be missed.

use keyfire::JobSpec;
use keyfire::job::RetrySpec;
use keyfire::store::{ClaimArgs, ClaimReply, Completion, Fate, RunRecord, Store};
use keyfire_testkit::world::World;

use crate::scripts::{LIMITS, claim_args, run_record};
use redis::AsyncCommands;

fn record(id: &str, at_ms: i64, attempt: u32, claimed_ms: i64, outcome: &str) -> RunRecord {
    run_record(id, at_ms, attempt, claimed_ms, "n1", outcome)
}

fn claimed_at(reply: &ClaimReply) -> i64 {
    match reply {
        ClaimReply::Claimed { now_ms, attempt: 1 } => *now_ms,
        other => panic!("not claimed: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_meets_a_job_twice_sees_its_own_writes() {
    let w = World::new().await;
    let client = w.client().await;
    let store = client.store();
    let now = w.redis_ms().await;
    let at = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).unwrap();
    // "cron" will be behind by two firings (a catch-up claims both in one call); "a" and
    // "b" are one-shots, due now.
    client
        .upsert(JobSpec::every("cron", "1s", "rec"))
        .await
        .unwrap();
    for id in ["a", "b"] {
        client
            .enqueue(JobSpec::at(id, at(now - 10), "rec").retry(RetrySpec {
                max_attempts: Some(3),
                backoff: Some("fixed".into()),
                interval: Some("1h".into()),
                ..Default::default()
            }))
            .await
            .unwrap();
    }
    let due = |id: &'static str| async move {
        store.get_job(id).await.unwrap().unwrap().next_ms.unwrap()
    };
    let (c0, a0, b0) = (due("cron").await, due("a").await, due("b").await);
    // No node runs: wait (by Redis's clock) until two of cron's firings are due.
    w.until_redis_ms(c0 + 1_001).await;
    let batch = [
        claim_args(store, "cron", c0, Some(c0 + 1_000)).await,
        claim_args(store, "a", a0, None).await,
        claim_args(store, "cron", c0 + 1_000, Some(c0 + 2_000)).await,
        claim_args(store, "b", b0, None).await,
        // The same firing again in the same call: claimed already.
        claim_args(store, "a", a0, None).await,
    ];
    let replies = store.claim_many(&batch).await.unwrap();
    let claimed: Vec<i64> = replies[..4].iter().map(claimed_at).collect();
    assert_eq!(replies[4], ClaimReply::Stale, "{replies:?}");
    assert_eq!(
        due("cron").await,
        c0 + 2_000,
        "the second firing moved it on"
    );
    let mut conn = store.connection();
    let k = store.job_keys("a");
    let due_left: Vec<String> = conn.zrange(k.due(), 0, -1).await.unwrap();
    assert_eq!(
        due_left,
        vec!["cron".to_string()],
        "one-shots left the due set"
    );
    let leases: Vec<String> = conn.zrange(k.running(), 0, -1).await.unwrap();
    assert_eq!(leases.len(), 4, "{leases:?}");

    // Complete in one call: a success, a failure with a retry, the same success again
    // (refused: its lease went with the first), both cron firings, and an attempt that
    // holds no lease.
    let ok_a = record("a", a0, 1, claimed[1], "ok");
    let failed_b = record("b", b0, 1, claimed[3], "failed");
    let cron0 = record("cron", c0, 1, claimed[0], "ok");
    let cron1 = record("cron", c0 + 1_000, 1, claimed[2], "ok");
    let ghost = record("b", b0, 2, claimed[3], "failed");
    let done = |job_id, run, retry_delay_ms, once| Completion {
        job_id,
        run,
        retry_delay_ms,
        once: Some(once),
        callback: None,
        limits: Default::default(),
        batch: None,
    };
    let fates = store
        .complete_many(
            &[
                done("a", &ok_a, None, true),
                done("b", &failed_b, Some(3_600_000), true),
                done("a", &ok_a, None, true),
                done("cron", &cron0, None, false),
                done("cron", &cron1, None, false),
                done("b", &ghost, None, true),
            ],
            &LIMITS,
        )
        .await
        .unwrap();
    let fates: Vec<Fate> = fates.into_iter().map(|(f, _)| f).collect();
    assert_eq!(
        fates,
        [
            Fate::Done,
            Fate::Retry,
            Fate::Fenced,
            Fate::Done,
            Fate::Done,
            Fate::Fenced
        ]
    );
    let leases: Vec<String> = conn.zrange(k.running(), 0, -1).await.unwrap();
    assert!(leases.is_empty(), "every lease released: {leases:?}");
    let retry: Vec<String> = conn.zrange(k.retry(), 0, -1).await.unwrap();
    assert_eq!(retry, vec![format!("b:{b0}")]);
    let next: Option<String> = conn.hget(k.attempts(), format!("b:{b0}")).await.unwrap();
    assert_eq!(next.as_deref(), Some("2"));
    let finished: Vec<String> = conn.zrange(k.done(), 0, -1).await.unwrap();
    assert_eq!(finished, vec!["a".to_string()]);
    assert_eq!(client.runs("a", 10).await.unwrap().len(), 1, "one record");
    assert_eq!(client.runs("cron", 10).await.unwrap().len(), 2);
}

/// A job's history is bounded by count and by age. A history below its limit loses every
/// record past the maximum age at the next record; a full one is trimmed by count at every
/// record and looked at for age in one completion of 16 (by Redis's clock), so records past
/// the maximum age are gone after a few more completions, never shown past the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_is_bounded_by_count_and_by_age() {
    let w = World::new().await;
    let client = w.client().await;
    let store = client.store();
    client
        .upsert(JobSpec::every("h", "1h", "rec"))
        .await
        .unwrap();
    let mut conn = store.connection();
    let k = store.job_keys("h");
    let now = w.redis_ms().await;
    let old = |i: i64| {
        let mut r = record("h", now - 7_200_000 - i, 1, now - 7_200_000 - i, "ok");
        r.finished_ms = Some(now - 7_200_000 - i);
        serde_json::to_string(&r).unwrap()
    };
    let mut at = now;
    let aged = |runs: &[RunRecord]| {
        runs.iter()
            .filter(|r| r.finished_ms.is_some_and(|f| f < now - 3_600_000))
            .count()
    };

    // Below the limit: three records two hours old (the maximum age is one hour) go at the
    // next record.
    for i in 0..3 {
        let _: () = conn.rpush(k.runs("h"), old(i)).await.unwrap();
    }
    at += 1;
    run_one(&w, store, at).await;
    let runs = store.runs("h", 100).await.unwrap();
    assert_eq!((runs.len(), aged(&runs)), (1, 0), "{runs:?}");

    // Full: ten old records behind the new one. Every completion trims to the limit; the
    // old records go within a few seconds of completions.
    for i in 0..10 {
        let _: () = conn.rpush(k.runs("h"), old(i)).await.unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut completions = 0;
    loop {
        at += 1;
        run_one(&w, store, at).await;
        completions += 1;
        let runs = store.runs("h", 100).await.unwrap();
        assert!(runs.len() <= LIMITS.history, "{} records", runs.len());
        if aged(&runs) == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "records past the maximum age kept through {completions} completions"
        );
    }
    eprintln!("history: the aged records of a full history went after {completions} completions");
}

/// A run of job "h"'s firing `at`: its lease as a claim writes it, then its outcome.
async fn run_one(w: &World, store: &Store, at: i64) {
    let claimed = w.redis_ms().await;
    let member = format!("h:{at}|1|{claimed}|n1");
    let _: () = store
        .connection()
        .zadd(store.job_keys("h").running(), &member, claimed + 30_000)
        .await
        .unwrap();
    let (fate, _) = store
        .complete("h", &record("h", at, 1, claimed, "ok"), &LIMITS, None)
        .await
        .unwrap();
    assert_eq!(fate, Fate::Done);
}

/// Claims first: under a burst a node sends its claims before the outcomes of the runs that
/// ended meanwhile (Redis runs one command at a time, so each outcome recorded among the
/// claims makes the next firing later). Held outcomes are all recorded, each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outcomes_wait_behind_a_burst_of_claims_without_being_lost() {
    use std::sync::atomic::Ordering::Relaxed;
    use std::time::Duration;

    let w = World::new().await;
    let client = w.client().await;
    let node = w.node("a").await;
    let n = 2_000;
    let at = chrono::DateTime::from_timestamp_millis(w.redis_ms().await + 1_500).unwrap();
    let specs: Vec<JobSpec> = (0..n)
        .map(|i| JobSpec::at(format!("h{i}"), at, "rec"))
        .collect();
    client.enqueue_many(specs).await.unwrap();
    w.recorder.wait_count(n, Duration::from_secs(60)).await;
    w.wait_idle(Duration::from_secs(30)).await;
    keyfire_testkit::world::assert_exactly_once(&w.recorder.seen(), n);
    let stats = node.stats();
    // The leases are gone once Redis recorded the outcomes; the node counts each when the
    // script's reply comes back, a moment later.
    keyfire_testkit::wait::until(
        "every outcome completed",
        Duration::from_secs(10),
        async || keyfire_testkit::wait::at_least(stats.completed.load(Relaxed), n as u64),
    )
    .await;
    let deferred = stats.deferred.load(Relaxed);
    eprintln!(
        "{deferred} of {n} outcomes waited behind claims; {} recorded",
        stats.completed.load(Relaxed)
    );
    assert!(deferred > 0, "no outcome waited behind a claim");
    assert_eq!(stats.completed.load(Relaxed), n as u64);
    for i in (0..n).step_by(97) {
        let id = format!("h{i}");
        let job = client.get(&id).await.unwrap();
        assert_eq!(
            (job.status, job.runs),
            (keyfire::JobStatus::Finished, 1),
            "{id}"
        );
        let runs = client.runs(&id, 5).await.unwrap();
        assert_eq!(runs.len(), 1, "{id}");
        assert_eq!(
            (runs[0].outcome.as_str(), runs[0].fate.as_deref()),
            ("ok", Some("done")),
            "{id}"
        );
    }
}

/// A call's firings each send only the keys and arguments they need, so the scripts walk a
/// layout whose length varies per firing: one call mixes every form (a job in the common
/// case, one whose next firing gets its sentinel key, a compact task, an overlap policy
/// other than allow) and each firing must get its own writes, not its neighbour's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_call_mixes_every_form_of_arguments() {
    let w = World::new().await;
    let client = w.client().await;
    let store = client.store();
    let now = w.redis_ms().await;
    let at = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).unwrap();
    let mut forbid = JobSpec::every("forbid", "1s", "rec");
    forbid.overlap = Some("forbid".into());
    for spec in [
        JobSpec::every("near", "1s", "rec"),
        JobSpec::every("far", "1s", "rec"),
        forbid,
    ] {
        client.upsert(spec).await.unwrap();
    }
    client
        .enqueue(JobSpec::at("task", at(now - 10), "rec"))
        .await
        .unwrap();
    let mut conn = store.connection();
    let k = store.job_keys("near");
    let due = |id: &'static str| async move {
        store.get_job(id).await.unwrap().unwrap().next_ms.unwrap()
    };
    let (near, far, fb, task) = (
        due("near").await,
        due("far").await,
        due("forbid").await,
        due("task").await,
    );
    w.until_redis_ms(near.max(far).max(fb)).await;
    // Announce within 5 s: "near"'s next firing is announced (no sentinel key sent),
    // "far"'s (20 s on, as its caller says, within the 60 s sentinel horizon) gets its
    // sentinel key.
    let with_announce = |mut a: ClaimArgs<'static>| {
        a.announce_ms = 5_000;
        a
    };
    let mut forbid_args = claim_args(store, "forbid", fb, Some(fb + 1_000)).await;
    forbid_args.overlap = "forbid";
    let batch = [
        with_announce(claim_args(store, "near", near, Some(near + 1_000)).await),
        with_announce(claim_args(store, "task", task, None).await),
        with_announce(claim_args(store, "far", far, Some(far + 20_000)).await),
        with_announce(forbid_args),
    ];
    assert!(batch[1].compact, "the task is stored compact");
    let replies = store.claim_many(&batch).await.unwrap();
    let claimed: Vec<i64> = replies.iter().map(claimed_at).collect();
    let sentinel = |id: &str, ms: i64| k.fire(id, ms);
    let near_key: bool = conn.exists(sentinel("near", near + 1_000)).await.unwrap();
    let far_ttl: i64 = conn.pttl(sentinel("far", far + 20_000)).await.unwrap();
    assert!(
        !near_key,
        "a next firing within the timer horizon is announced instead"
    );
    assert!(
        far_ttl > 10_000,
        "the next firing past the timer horizon has its sentinel key: pttl {far_ttl}"
    );
    assert_eq!(due("near").await, near + 1_000);
    assert_eq!(due("far").await, far + 20_000);
    assert_eq!(due("forbid").await, fb + 1_000);
    let leases: Vec<String> = conn.zrange(k.running(), 0, -1).await.unwrap();
    assert_eq!(leases.len(), 4, "{leases:?}");
    let job = store.get_job("task").await.unwrap().unwrap();
    assert!(
        job.next_ms.is_none(),
        "the task's firing was claimed: {job:?}"
    );

    // Complete in one call: a success of a job (one character of options), a success of a
    // one-shot with a callback, a failure with a retry, and a failure with none left (its
    // dead-letter entry and its callback follow its options).
    let done = |job_id, run, retry_delay_ms, once, callback| Completion {
        job_id,
        run,
        retry_delay_ms,
        once,
        callback,
        limits: Default::default(),
        batch: None,
    };
    let near_run = record("near", near, 1, claimed[0], "ok");
    let task_run = record("task", task, 1, claimed[1], "ok");
    let far_run = record("far", far, 1, claimed[2], "failed");
    let fb_run = record("forbid", fb, 1, claimed[3], "failed");
    let cb = r#"{"url":"http://127.0.0.1:9/hook"}"#;
    let fates = store
        .complete_many(
            &[
                done("near", &near_run, None, Some(false), None),
                done("task", &task_run, None, None, Some(cb)),
                done("far", &far_run, Some(3_600_000), Some(false), None),
                done("forbid", &fb_run, None, Some(false), Some(cb)),
            ],
            &LIMITS,
        )
        .await
        .unwrap();
    let fates: Vec<Fate> = fates.into_iter().map(|(f, _)| f).collect();
    assert_eq!(fates, [Fate::Done, Fate::Done, Fate::Retry, Fate::Dead]);
    let leases: Vec<String> = conn.zrange(k.running(), 0, -1).await.unwrap();
    assert!(leases.is_empty(), "every lease released: {leases:?}");
    let finished: Vec<String> = conn.zrange(k.done(), 0, -1).await.unwrap();
    assert_eq!(finished, vec!["task".to_string()], "the one-shot is done");
    let retry: Vec<String> = conn.zrange(k.retry(), 0, -1).await.unwrap();
    assert_eq!(retry, vec![format!("far:{far}")]);
    let letters = store.dead_letters("forbid", 10).await.unwrap();
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert!(store.dead_letters("far", 10).await.unwrap().is_empty());
    let outbox: Vec<String> = conn.zrange(k.outbox(), 0, -1).await.unwrap();
    let mut outbox = outbox;
    outbox.sort();
    assert_eq!(
        outbox,
        vec![
            format!("forbid:{fb}:failed"),
            format!("task:{task}:succeeded")
        ]
    );
    for (id, fate) in [
        ("near", "done"),
        ("task", "done"),
        ("far", "retry"),
        ("forbid", "dead"),
    ] {
        let runs = store.runs(id, 10).await.unwrap();
        assert_eq!(runs.len(), 1, "{id}: {runs:?}");
        assert_eq!(runs[0].fate.as_deref(), Some(fate), "{id}: {runs:?}");
        assert!(runs[0].finished_ms.is_some(), "{id}: {runs:?}");
    }
}

/// Messages published so far (a script's `SPUBLISH` counts).
async fn publishes(conn: &mut redis::aio::ConnectionManager) -> u64 {
    let calls = keyfire_testkit::world::command_calls(conn).await;
    calls.get("spublish").copied().unwrap_or(0)
}

/// A claim whose caller owns every next firing and arms their timers itself (`arms_next`)
/// publishes no announcement: the next firing sent without its sentinel key is the caller's
/// to arm, and one sent with its sentinel key still gets it. The same claim without the flag
/// announces the next firing (one message), so the flag is what keeps it quiet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_caller_arms_the_next_firings_announces_none() {
    let w = World::new().await;
    let client = w.client().await;
    let store = client.store();
    for id in ["near", "far"] {
        client
            .upsert(JobSpec::every(id, "1s", "rec"))
            .await
            .unwrap();
    }
    let mut conn = w.conn().await;
    let k = store.job_keys("near");
    let due = |id: &'static str| async move {
        store.get_job(id).await.unwrap().unwrap().next_ms.unwrap()
    };
    let (near, far) = (due("near").await, due("far").await);
    w.until_redis_ms(near.max(far)).await;
    let quiet = |mut a: ClaimArgs<'static>, arms_next: bool| {
        a.announce_ms = 5_000;
        a.arms_next = arms_next;
        a
    };
    let before = publishes(&mut conn).await;
    let batch = [
        quiet(
            claim_args(store, "near", near, Some(near + 1_000)).await,
            true,
        ),
        quiet(
            claim_args(store, "far", far, Some(far + 20_000)).await,
            true,
        ),
    ];
    let replies = store.claim_many(&batch).await.unwrap();
    assert!(
        replies
            .iter()
            .all(|r| matches!(r, ClaimReply::Claimed { .. })),
        "{replies:?}"
    );
    assert_eq!(publishes(&mut conn).await - before, 0, "nothing announced");
    let near_key: bool = conn.exists(k.fire("near", near + 1_000)).await.unwrap();
    let far_ttl: i64 = conn.pttl(k.fire("far", far + 20_000)).await.unwrap();
    assert!(
        !near_key,
        "the caller arms the near next firing: no sentinel key"
    );
    assert!(
        far_ttl > 10_000,
        "the far next firing has its sentinel key: pttl {far_ttl}"
    );
    assert_eq!(due("near").await, near + 1_000);
    assert_eq!(due("far").await, far + 20_000);

    // The next firing of "near", claimed without the flag: announced.
    w.until_redis_ms(near + 1_000).await;
    let before = publishes(&mut conn).await;
    let loud = [quiet(
        claim_args(store, "near", near + 1_000, Some(near + 2_000)).await,
        false,
    )];
    let replies = store.claim_many(&loud).await.unwrap();
    assert!(
        matches!(replies[0], ClaimReply::Claimed { .. }),
        "{replies:?}"
    );
    assert_eq!(
        publishes(&mut conn).await - before,
        1,
        "the next firing announced"
    );
    assert_eq!(due("near").await, near + 2_000);
}

/// A job hash's `next` field and its due entry, as (field, score digits); claim.lua's
/// compare-and-set reads the field, so the two must agree after every change.
async fn next_and_due(w: &World, id: &str) -> (String, Option<String>) {
    let keys = keyfire::store::Keys::new(&w.settings.redis.prefix);
    let mut c = w.conn().await;
    let (next, due): (Option<String>, Option<String>) = redis::pipe()
        .hget(keys.job(id), "next")
        .zscore(keys.due(), id)
        .query_async(&mut c)
        .await
        .unwrap();
    (next.expect("a job hash with a next field"), due)
}

async fn assert_mirrored(w: &World, id: &str, step: &str) -> Option<i64> {
    let (next, due) = next_and_due(w, id).await;
    match &due {
        Some(due) => assert_eq!(&next, due, "{step}: next field and due entry differ"),
        None => assert_eq!(next, "", "{step}: a next field without a due entry"),
    }
    due.map(|d| d.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_next_field_mirrors_its_due_entry_fencing_stale_claims() {
    let w = World::new().await;
    let client = w.client().await;
    let store = client.store();
    // Created one by one and in bulk, updated, paused, resumed.
    client
        .upsert(JobSpec::every("j", "1s", "rec"))
        .await
        .unwrap();
    assert_mirrored(&w, "j", "created").await.unwrap();
    let now = w.redis_ms().await;
    let bulk = [(
        JobSpec::cron("bulk", "* * * * * *", "rec"),
        Some(now / 1000 * 1000 + 5_000),
    )];
    assert_eq!(store.insert_many(&bulk, now).await.unwrap(), 1);
    assert_mirrored(&w, "bulk", "created in bulk")
        .await
        .unwrap();
    client
        .upsert(JobSpec::every("j", "2s", "rec"))
        .await
        .unwrap();
    assert_mirrored(&w, "j", "updated").await.unwrap();
    client.pause("j").await.unwrap();
    assert_eq!(assert_mirrored(&w, "j", "paused").await, None);
    client.resume("j").await.unwrap();
    let at = assert_mirrored(&w, "j", "resumed").await.unwrap();

    // Claimed: the field moves with the entry, and the same instant is not claimable again.
    w.until_redis_ms(at).await;
    let next = at + 2_000;
    let replies = store
        .claim_many(&[claim_args(store, "j", at, Some(next)).await])
        .await
        .unwrap();
    claimed_at(&replies[0]);
    assert_eq!(assert_mirrored(&w, "j", "claimed").await, Some(next));
    let again = store
        .claim_many(&[claim_args(store, "j", at, Some(next)).await])
        .await
        .unwrap();
    assert!(
        matches!(again[0], ClaimReply::Stale),
        "claimed twice: {again:?}"
    );

    // A field that disagrees with the entry fences the claim: the field is what is read.
    let keys = keyfire::store::Keys::new(&w.settings.redis.prefix);
    let mut c = w.conn().await;
    let _: () = c.hset(keys.job("j"), "next", at + 1).await.unwrap();
    let early = store
        .claim_many(&[claim_args(store, "j", next, Some(next + 2_000)).await])
        .await
        .unwrap();
    assert!(
        matches!(early[0], ClaimReply::Stale),
        "claimed on a stale field: {early:?}"
    );

    // A compact task expanded into a job hash gets the field of its entry.
    let soon = chrono::DateTime::from_timestamp_millis(w.redis_ms().await + 60_000).unwrap();
    client.enqueue(JobSpec::at("t", soon, "rec")).await.unwrap();
    assert!(store.expand("t").await.unwrap(), "expanded");
    assert_mirrored(&w, "t", "expanded").await.unwrap();
}
