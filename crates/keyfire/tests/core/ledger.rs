//! The ledger of what did not run: each due instant dropped gets a skip record with its
//! reason, one per reason. Late firings are made by moving a job's pending firing back in
//! Redis before a node starts (an outage of that length, without waiting it out).

use std::time::Duration;

use keyfire::store::Shards;
use keyfire::{Client, JobSpec, SkipReason, SkipRecord};
use keyfire_testkit::world::{World, command_calls};
use serde_json::json;

/// A job firing every second (cron, no phase: any whole second is one of its instants).
fn per_second(id: &str, f: impl FnOnce(&mut JobSpec)) -> JobSpec {
    let mut s = JobSpec::cron(id, "* * * * * *", "rec");
    s.misfire_tolerance = Some("1s".into());
    f(&mut s);
    s
}

/// Move job `id`'s pending firing to `at_ms` (its hash's `next` and its due entry), as if
/// no node had claimed anything since.
async fn rewind(w: &World, id: &str, at_ms: i64) {
    let r = &w.settings.redis;
    let shards = Shards::new(&r.prefix, r.shards as usize);
    let k = shards.for_job(id);
    let mut c = w.conn().await;
    let _: () = redis::pipe()
        .hset(k.job(id), "next", at_ms)
        .zadd(k.due(), id, at_ms)
        .query_async(&mut c)
        .await
        .unwrap();
}

/// A whole second `secs` before Redis's now.
async fn seconds_ago(w: &World, secs: i64) -> i64 {
    (w.redis_ms().await / 1_000 - secs) * 1_000
}

async fn wait_skips(client: &Client, id: &str, what: &str) -> Vec<SkipRecord> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let skips = client.skips(id, 100).await.unwrap();
        if !skips.is_empty() {
            return skips;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no skip record of {id}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One record of a range of whole seconds: its count matches its ends.
fn assert_range(r: &SkipRecord) {
    assert_eq!(
        r.count as i64,
        (r.last_ms - r.first_ms) / 1_000 + 1,
        "range {r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_policy_records_the_late_instants_as_misfire() {
    let w = World::new().await;
    let client = w.client().await;
    client
        .upsert(per_second("s", |s| s.misfire = Some("skip".into())))
        .await
        .unwrap();
    let from = seconds_ago(&w, 20).await;
    rewind(&w, "s", from).await;
    let node = w.node("a").await;
    let skips = wait_skips(&client, "s", "the skip policy dropped the late ones").await;
    node.shutdown().await;
    assert_eq!(skips.len(), 1, "{skips:?}");
    let r = &skips[0];
    assert_eq!(r.reason, SkipReason::Misfire);
    assert_eq!(r.first_ms, from);
    assert!(r.count >= 19, "{r:?}");
    assert_range(r);
    assert_eq!(client.get("s").await.unwrap().missed, r.count);
    assert!(
        w.recorder
            .seen_of("s")
            .iter()
            .all(|s| s.scheduled_ms > r.last_ms),
        "a dropped instant ran"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fire_once_records_the_instants_merged_into_its_run() {
    let w = World::new().await;
    let client = w.client().await;
    client.upsert(per_second("o", |_| {})).await.unwrap();
    let from = seconds_ago(&w, 20).await;
    rewind(&w, "o", from).await;
    let node = w.node("a").await;
    let skips = wait_skips(&client, "o", "fire_once merged the late ones").await;
    w.recorder
        .wait_until(Duration::from_secs(10), "the late run", |s| {
            s.iter().any(|r| r.scheduled_ms == from)
        })
        .await;
    node.shutdown().await;
    let r = &skips[0];
    assert_eq!(r.reason, SkipReason::Merged);
    // The first late instant ran; the ones after it were merged into that run.
    assert_eq!(r.first_ms, from + 1_000);
    assert!(r.count >= 18, "{r:?}");
    assert_range(r);
}

/// A long outage under `catch_up`: ten thousand instants beyond the limit are one record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catch_up_records_what_is_beyond_its_limit_as_one_range() {
    let w = World::new().await;
    let client = w.client().await;
    client
        .upsert(per_second("c", |s| {
            s.misfire = Some("catch_up".into());
            s.catch_up_limit = Some(3);
        }))
        .await
        .unwrap();
    let from = seconds_ago(&w, 10_010).await;
    rewind(&w, "c", from).await;
    let node = w.node("a").await;
    let skips = wait_skips(&client, "c", "catch_up dropped the oldest").await;
    w.recorder
        .wait_until(Duration::from_secs(10), "the three newest late ones", |s| {
            s.iter().filter(|r| r.job_id == "c").count() >= 3
        })
        .await;
    node.shutdown().await;
    assert_eq!(skips.len(), 1, "one record for the range: {skips:?}");
    let r = &skips[0];
    assert_eq!(r.reason, SkipReason::CatchUpLimit);
    assert_eq!(r.first_ms, from);
    assert!(r.count >= 10_000, "{r:?}");
    assert_range(r);
    let ran: Vec<i64> = w
        .recorder
        .seen_of("c")
        .iter()
        .map(|s| s.scheduled_ms)
        .collect();
    assert!(ran.iter().all(|&t| t > r.last_ms), "a dropped one ran");
    assert!(ran.contains(&(r.last_ms + 1_000)), "the oldest kept ran");
}

/// Overlap `forbid`: the instants a long run refuses are one record naming that run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlap_forbid_records_the_refused_instants_with_the_run_that_held_them() {
    let w = World::new().await;
    let client = w.client().await;
    let node = w.node("a").await;
    client
        .upsert(per_second("f", |s| {
            s.handler = "slow".into();
            s.overlap = Some("forbid".into());
            s.params = json!({"sleep_ms": 3_500});
        }))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let r = loop {
        let skips = client.skips("f", 10).await.unwrap();
        if let Some(r) = skips.first().filter(|r| r.count >= 2) {
            break r.clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "{skips:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    client.pause("f").await.unwrap();
    node.shutdown().await;
    assert_eq!(r.reason, SkipReason::Overlap);
    assert_range(&r);
    let running = r.detail.clone().expect("the run that held it");
    let first_run = w.recorder.seen_of("f")[0].firing_id.clone();
    assert_eq!(running, first_run);
}

/// A pause: resumed, the instants the pause skipped are recorded as `paused`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_records_the_instants_it_skipped_as_paused() {
    let w = World::new().await;
    let client = w.client().await;
    client.upsert(per_second("p", |_| {})).await.unwrap();
    client.pause("p").await.unwrap();
    // A pause of 20 s: its start moved back (the resume schedules from it).
    let began = seconds_ago(&w, 20).await;
    let r = &w.settings.redis;
    let shards = Shards::new(&r.prefix, r.shards as usize);
    let _: () = redis::cmd("HSET")
        .arg(shards.for_job("p").job("p"))
        .arg("paused_at")
        .arg(began - 1)
        .query_async(&mut w.conn().await)
        .await
        .unwrap();
    let node = w.node("a").await;
    client.resume("p").await.unwrap();
    // (The pause itself may have met its first instant due, and recorded it.)
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let skips = loop {
        let skips = wait_skips(&client, "p", "the resume's late instants").await;
        if skips[0].detail.is_none() || tokio::time::Instant::now() > deadline {
            break skips;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    node.shutdown().await;
    let r = &skips[0];
    assert_eq!(r.reason, SkipReason::Paused);
    assert!(r.first_ms >= began && r.count >= 18, "{r:?}");
    assert_range(r);
}

/// A pause that finds an instant due and not yet claimed (no node ran it) drops it: the ledger
/// records it `paused`; a one-shot task paused so is recorded too, and its resume finishes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_records_the_due_instant_it_dropped() {
    let w = World::new().await;
    let client = w.client().await;
    client.upsert(per_second("late", |_| {})).await.unwrap();
    let due = seconds_ago(&w, 3).await;
    rewind(&w, "late", due).await;
    client.pause("late").await.unwrap();
    let skips = client.skips("late", 10).await.unwrap();
    assert_eq!(skips.len(), 1, "{skips:?}");
    let r = &skips[0];
    assert_eq!(
        (
            r.reason,
            r.first_ms,
            r.last_ms,
            r.count,
            r.detail.as_deref()
        ),
        (SkipReason::Paused, due, due, 1, Some("due when paused"))
    );
    // Not due yet when paused: nothing to record.
    client.upsert(per_second("early", |_| {})).await.unwrap();
    client.pause("early").await.unwrap();
    assert!(client.skips("early", 10).await.unwrap().is_empty());

    let task = client
        .enqueue(JobSpec::after("once", "0s", "rec"))
        .await
        .unwrap();
    client.pause("once").await.unwrap();
    let skips = client.skips("once", 10).await.unwrap();
    assert_eq!(skips.len(), 1, "{skips:?}");
    assert_eq!(
        (skips[0].reason, Some(skips[0].first_ms)),
        (SkipReason::Paused, task.next_ms)
    );
}

/// A change that moves the schedule off a due instant not yet claimed records it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_records_the_due_instant_it_dropped() {
    let w = World::new().await;
    let client = w.client().await;
    client.upsert(per_second("u", |_| {})).await.unwrap();
    let due = seconds_ago(&w, 5).await;
    rewind(&w, "u", due).await;
    client
        .upsert(per_second("u", |s| s.params = json!({"v": 2})))
        .await
        .unwrap();
    let skips = client.skips("u", 10).await.unwrap();
    assert_eq!(skips.len(), 1, "{skips:?}");
    assert_eq!(skips[0].reason, SkipReason::Updated);
    assert_eq!((skips[0].first_ms, skips[0].count), (due, 1));
}

/// A delete with an instant due: the record outlives the job (a job created again under
/// the id shows it); a delete with nothing due leaves no ledger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_records_the_due_instant_it_dropped() {
    let w = World::new().await;
    let client = w.client().await;
    client.upsert(per_second("d", |_| {})).await.unwrap();
    let due = seconds_ago(&w, 5).await;
    rewind(&w, "d", due).await;
    client.delete("d").await.unwrap();
    let skips = client.skips("d", 10).await.unwrap();
    assert_eq!(skips.len(), 1, "{skips:?}");
    assert_eq!(skips[0].reason, SkipReason::Deleted);
    assert_eq!(skips[0].first_ms, due);

    client.upsert(per_second("n", |_| {})).await.unwrap();
    client.delete("n").await.unwrap();
    assert!(w.keys().await.iter().all(|k| !k.contains(":skips:n")));
}

/// What a skip record costs Redis: three commands and about a hundred bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skip_record_costs_three_commands() {
    let w = World::new().await;
    let client = w.client().await;
    client.upsert(per_second("m", |_| {})).await.unwrap();
    rewind(&w, "m", seconds_ago(&w, 5).await).await;
    let mut c = w.conn().await;
    let before = command_calls(&mut c).await;
    client
        .upsert(per_second("m", |s| s.params = json!({"v": 2})))
        .await
        .unwrap();
    let after = command_calls(&mut c).await;
    let delta = |name: &str| after.get(name).unwrap_or(&0) - before.get(name).unwrap_or(&0);
    assert_eq!(
        (delta("lpush"), delta("ltrim"), delta("pexpire")),
        (1, 1, 1)
    );
    let r = &w.settings.redis;
    let key = Shards::new(&r.prefix, r.shards as usize)
        .for_job("m")
        .skips("m");
    let record: String = redis::cmd("LINDEX")
        .arg(&key)
        .arg(0)
        .query_async(&mut c)
        .await
        .unwrap();
    let usage: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(&key)
        .query_async(&mut c)
        .await
        .unwrap();
    // Ten more records: what each adds to the list's memory.
    for v in 3..13 {
        rewind(&w, "m", seconds_ago(&w, 5).await).await;
        client
            .upsert(per_second("m", |s| s.params = json!({ "v": v })))
            .await
            .unwrap();
    }
    let len: i64 = redis::cmd("LLEN")
        .arg(&key)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(len, 11);
    let usage_11: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(&key)
        .query_async(&mut c)
        .await
        .unwrap();
    eprintln!(
        "ledger cost: a record of {} bytes of JSON; the list {usage} bytes in Redis with one, \
         {usage_11} with eleven ({} per record)",
        record.len(),
        (usage_11 - usage) / 10
    );
    assert!(record.len() < 120, "{record}");
}

/// A manual trigger refused by overlap `forbid` (the previous run still runs) is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_refused_by_overlap_forbid_is_recorded() {
    let w = World::new().await;
    let client = w.client().await;
    let node = w.node("a").await;
    let mut spec = JobSpec::cron("t", "0 0 1 1 *", "slow");
    spec.overlap = Some("forbid".into());
    spec.params = json!({"sleep_ms": 3_000});
    client.upsert(spec).await.unwrap();
    let first = client.trigger("t").await.unwrap();
    w.recorder
        .wait_until(Duration::from_secs(10), "the first trigger runs", |s| {
            s.iter().any(|r| r.firing_id == first)
        })
        .await;
    let second = client.trigger("t").await.unwrap();
    let skips = wait_skips(&client, "t", "the second trigger refused").await;
    node.shutdown().await;
    let r = &skips[0];
    assert_eq!(r.reason, SkipReason::Overlap);
    assert_eq!(r.detail.as_deref(), Some(first.as_str()));
    assert_eq!(format!("t:{}", r.first_ms), second);
    assert!(w.recorder.seen().iter().all(|s| s.firing_id != second));
}

/// A failed attempt's retry, due while the job is paused, is dropped and recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_dropped_by_a_pause_is_recorded() {
    let w = World::new().await;
    let client = w.client().await;
    let node = w.node("a").await;
    let mut spec = JobSpec::cron("r", "0 0 1 1 *", "flaky");
    spec.params = json!({"ok_at": 3});
    spec.retry = Some(keyfire::job::RetrySpec {
        max_attempts: Some(3),
        backoff: Some("fixed".into()),
        interval: Some("1s".into()),
        ..Default::default()
    });
    client.upsert(spec).await.unwrap();
    let fid = client.trigger("r").await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let runs = client.runs("r", 1).await.unwrap();
        if runs.first().and_then(|run| run.fate.as_deref()) == Some("retry") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no failed attempt");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    client.pause("r").await.unwrap();
    let skips = wait_skips(&client, "r", "the retry dropped by the pause").await;
    node.shutdown().await;
    assert_eq!(skips[0].reason, SkipReason::Paused);
    assert_eq!(format!("r:{}", skips[0].first_ms), fid);
    assert_eq!(w.recorder.seen_of("r").len(), 1, "the retry ran");
}

/// A one-shot task (stored compact) found late under `skip` is recorded too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_task_skipped_by_its_misfire_policy_is_recorded() {
    let w = World::new().await;
    let client = w.client().await;
    let at = chrono::Utc::now() - chrono::Duration::hours(1);
    let mut task = JobSpec::at("late", at, "rec");
    task.misfire = Some("skip".into());
    task.misfire_tolerance = Some("1s".into());
    client.enqueue(task).await.unwrap();
    let node = w.node("a").await;
    let skips = wait_skips(&client, "late", "the late task skipped").await;
    node.shutdown().await;
    assert_eq!(skips[0].reason, SkipReason::Misfire);
    assert_eq!(
        (skips[0].first_ms, skips[0].count),
        (at.timestamp_millis(), 1)
    );
    assert!(w.recorder.seen_of("late").is_empty());
}
