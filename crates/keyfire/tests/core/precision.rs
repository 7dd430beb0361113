//! On time at any scale: precision timers, the sentinel horizon.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use chrono::DateTime;
use keyfire::JobSpec;
use keyfire::engine::NodeHandle;
use keyfire::engine::membership::owner;
use keyfire::store::Keys;
use keyfire_testkit::world::{Seen, World, doubles, lateness_summary};

fn at(ms: i64) -> DateTime<chrono::Utc> {
    DateTime::from_timestamp_millis(ms).unwrap()
}

/// Each firing ran once, none before its instant, none 1 s late or more (generous: in these
/// tests every other prompt path is off or far away). Prints `what` with the lateness; returns
/// that line.
fn assert_once_on_time(seen: &[Seen], what: &str) -> String {
    assert!(doubles(seen).is_empty(), "{what}: a firing ran twice");
    let (_, _, max, line) = lateness_summary(seen);
    eprintln!("{what}: {line}");
    assert!(max < 1_000, "{what}: {line}");
    assert!(
        seen.iter().all(|s| s.not_early(s.scheduled_ms)),
        "{what}: a firing ran early"
    );
    line
}

/// With 100,000 far-future jobs pending, 200 firings due soon arrive within 1 s of their
/// instants, and the far-future ones hold no sentinel key.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn soon_firings_are_on_time_behind_100k_far_ones() {
    let w = World::new().await;
    let client = w.client().await;
    let hour = w.redis_ms().await + 3_600_000;
    let far: Vec<JobSpec> = (0..100_000)
        .map(|i| JobSpec::at(format!("far{i}"), at(hour + i), "rec"))
        .collect();
    client.enqueue_many(far).await.unwrap();
    let store = client.store();
    assert_eq!(
        store.sentinel_count().await.unwrap(),
        0,
        "far firings hold sentinels"
    );

    let nodes = [w.node("a").await, w.node("b").await];
    let base = w.redis_ms().await + 1_000;
    let soon: Vec<JobSpec> = (0..200)
        .map(|i| JobSpec::at(format!("soon{i}"), at(base + i * 10), "rec"))
        .collect();
    client.enqueue_many(soon).await.unwrap();
    w.recorder.wait_count(200, Duration::from_secs(20)).await;
    assert_once_on_time(
        &w.recorder.seen(),
        "precision, far firings (100k far, 200 soon)",
    );
    for n in nodes {
        n.shutdown().await;
    }
}

/// A job created with an instant 300 ms away fires on time through its owner's timer,
/// with expiry events off and the sweeper far apart, so no other path can fire it on time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn new_job_fires_on_time_via_the_owners_timer() {
    let (w, a, b) = two_nodes_with_only_timers().await;
    let client = w.client().await;
    let due = w.redis_ms().await + 300;
    let live = ["a".to_string(), "b".to_string()];
    // A job id whose firing belongs to b.
    let id = (0..)
        .map(|i| format!("j{i}"))
        .find(|id| owner(&live, id) == Some("b"))
        .unwrap();
    client
        .upsert(JobSpec::at(id.clone(), at(due), "rec"))
        .await
        .unwrap();
    w.recorder.wait_count(1, Duration::from_secs(5)).await;
    let seen = w.recorder.seen();
    let late = seen[0].lateness_ms();
    eprintln!(
        "precision, timers: fired by {} {late} ms after its instant",
        seen[0].node
    );
    assert_eq!(seen[0].node, "b");
    // Generous: the only other paths (sweeps, events) are 60 s away or off.
    assert!((0..1_000).contains(&late), "{late} ms late");
    a.shutdown().await;
    b.shutdown().await;
}

/// Two nodes "a" and "b" (both live, both swept twice) whose only prompt path to a firing is
/// the owner's timer: expiry events off, sweeps and the non-owners' grace 60 s away.
async fn two_nodes_with_only_timers() -> (World, NodeHandle, NodeHandle) {
    let mut w = World::new().await;
    w.settings.redis.enable_notifications = false;
    w.settings.node.sweep_interval = Duration::from_secs(60);
    w.settings.node.claim_grace = Duration::from_secs(60);
    let a = w.node("a").await;
    let b = w.node("b").await;
    keyfire_testkit::wait::until(
        "both nodes to sweep twice and see each other",
        Duration::from_secs(10),
        async || {
            a.stats().sweeps.load(Relaxed) >= 2
                && b.stats().sweeps.load(Relaxed) >= 2
                && a.live_nodes().len() == 2
                && b.live_nodes().len() == 2
        },
    )
    .await;
    w.redis.config_set("notify-keyspace-events", "").await;
    (w, a, b)
}

/// Tasks created in bulk (`Client::enqueue_many`: one `insert.lua` call per batch and one
/// `created` change message) fire on time through their owners' timers, with no other prompt
/// path, including tasks whose instant has passed by the time they are written (a sentinel
/// key cannot fire those). An id that exists already is left as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bulk_created_tasks_fire_via_their_owners_timers() {
    let (w, a, b) = two_nodes_with_only_timers().await;
    let client = w.client().await;
    let hour = w.redis_ms().await + 3_600_000;
    client
        .upsert(JobSpec::at("kept", at(hour), "rec"))
        .await
        .unwrap();
    let now = w.redis_ms().await;
    let mut tasks: Vec<JobSpec> = (0..50)
        .map(|i| JobSpec::at(format!("past{i}"), at(now - i), "rec"))
        .chain((0..50).map(|i| JobSpec::at(format!("soon{i}"), at(now + 300 + i), "rec")))
        .collect();
    tasks.push(JobSpec::at("kept", at(now + 300), "rec"));
    let ids = client.enqueue_many(tasks).await.unwrap();
    assert_eq!(ids.len(), 101);
    w.recorder.wait_count(100, Duration::from_secs(10)).await;
    let seen = w.recorder.seen();
    assert_once_on_time(&seen, "bulk-created tasks, timers only");
    let by: std::collections::HashSet<&str> = seen.iter().map(|s| s.node.as_str()).collect();
    assert_eq!(by.len(), 2, "both owners fired their share: {by:?}");
    // The existing job kept its instant and did not fire.
    assert!(seen.iter().all(|s| s.job_id != "kept"));
    let kept = client.get("kept").await.unwrap();
    assert_eq!(kept.next_ms, Some(hour));
    assert_eq!(kept.version, 1);
    a.shutdown().await;
    b.shutdown().await;
}

/// A job firing every second, with no prompt path but the owner's timers: the job's
/// owner claims each firing and arms the timer of the next one itself, and the claims
/// announce nothing (no `next` change message: no other node reads them). Without that
/// timer the second firing would wait for a sweep, 60 s away here.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_next_firing_reaches_its_owners_timer() {
    let (w, a, b) = two_nodes_with_only_timers().await;
    let client = w.client().await;
    let messages = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    // The change messages, as a node's own subscription reads them.
    let store = keyfire::store::Store::open(&w.settings.redis)
        .await
        .unwrap();
    let mut subscription = store.subscribe();
    loop {
        match subscription.next().await {
            Some(keyfire::store::Event::Subscribed { changes: true, .. }) => break,
            Some(_) => {}
            None => panic!("the subscription stopped"),
        }
    }
    let listener = tokio::spawn({
        let messages = messages.clone();
        async move {
            while let Some(event) = subscription.next().await {
                if let keyfire::store::Event::Change(m) = event {
                    let text = String::from_utf8_lossy(m.bytes()).into_owned();
                    messages.lock().unwrap().push(text);
                }
            }
        }
    });
    client
        .upsert(JobSpec::every("beat", "1s", "rec"))
        .await
        .unwrap();
    w.recorder.wait_count(8, Duration::from_secs(20)).await;
    client.delete("beat").await.unwrap();
    listener.abort();
    let mut seen = w.recorder.seen();
    seen.sort_by_key(|s| s.scheduled_ms);
    let nodes: Vec<&str> = seen.iter().map(|s| s.node.as_str()).collect();
    let live = ["a".to_string(), "b".to_string()];
    let owner = owner(&live, "beat").unwrap();
    assert!(
        nodes.iter().all(|n| *n == owner),
        "every firing by the job's owner {owner}: {nodes:?}"
    );
    let announced: Vec<String> = messages
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m.contains(r#""op":"next""#))
        .cloned()
        .collect();
    assert!(announced.is_empty(), "claims announced: {announced:?}");
    assert_once_on_time(
        &seen,
        &format!("every second, timers only, fired by {nodes:?}"),
    );
    for pair in seen.windows(2) {
        assert_eq!(
            pair[1].scheduled_ms - pair[0].scheduled_ms,
            1_000,
            "a firing was skipped: {nodes:?}"
        );
    }
    a.shutdown().await;
    b.shutdown().await;
}

/// A sweep reads only what is overdue and what came within the timer horizon since the last
/// one (the rest is armed already): 1,000 firings coming into the horizon (1.5 s in tests)
/// with a sweep every 300 ms are read about once each (a full read each sweep would read
/// each about five times), and every firing is on time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sweeps_read_each_due_entry_about_once() {
    let mut w = World::new().await;
    w.settings.node.sweep_interval = Duration::from_millis(300);
    let a = w.node("a").await;
    keyfire_testkit::wait::until("two sweeps", Duration::from_secs(10), async || {
        keyfire_testkit::wait::at_least(a.stats().sweeps.load(Relaxed), 2)
    })
    .await;
    let client = w.client().await;
    let base = w.redis_ms().await + 1_500;
    let tasks: Vec<JobSpec> = (0..1_000)
        .map(|i| JobSpec::at(format!("t{i}"), at(base + i), "rec"))
        .collect();
    let (read0, sweeps0) = (
        a.stats().due_read.load(Relaxed),
        a.stats().sweeps.load(Relaxed),
    );
    client.enqueue_many(tasks).await.unwrap();
    w.recorder.wait_count(1_000, Duration::from_secs(10)).await;
    let read = a.stats().due_read.load(Relaxed) - read0;
    let sweeps = a.stats().sweeps.load(Relaxed) - sweeps0;
    assert_once_on_time(
        &w.recorder.seen(),
        &format!("incremental sweeps: {sweeps} sweeps read {read} due entries for 1,000 firings"),
    );
    assert!(sweeps >= 5, "only {sweeps} sweeps");
    // Reading the whole horizon each time: each entry once per sweep while inside it.
    assert!(read < 2_500, "{sweeps} sweeps read {read} entries");
    a.shutdown().await;
}

/// When a node leaves, the survivors own its firings: their next sweep reads the whole
/// horizon again (not only the part not read yet) and arms timers for them. With expiry
/// events off and sweeps a minute apart, only that keeps them on time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leaving_nodes_firings_reach_the_survivors_timers() {
    let (w, a, b) = two_nodes_with_only_timers().await;
    let client = w.client().await;
    // Inside the timer horizon (1.5 s in tests) and inside what the sweeps read already.
    let base = w.redis_ms().await + 800;
    let tasks: Vec<JobSpec> = (0..100)
        .map(|i| JobSpec::at(format!("t{i}"), at(base + i * 5), "rec"))
        .collect();
    client.enqueue_many(tasks).await.unwrap();
    b.shutdown().await;
    w.recorder.wait_count(100, Duration::from_secs(10)).await;
    let seen = w.recorder.seen();
    assert_once_on_time(&seen, "after b left, timers only");
    assert!(seen.iter().all(|s| s.node == "a"));
    a.shutdown().await;
}

/// The horizon never holds more sentinel keys than the firings inside it, and firings beyond
/// it still fire once each as they come near.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sentinel_keys_stay_within_the_horizon() {
    let mut w = World::new().await;
    w.settings.redis.sentinel_horizon = Duration::from_secs(3);
    let client = w.client().await;
    let keys = Keys::new(&w.settings.redis.prefix);
    let base = w.redis_ms().await + 500;
    let tasks: Vec<JobSpec> = (0..300)
        .map(|i| JobSpec::at(format!("t{i}"), at(base + i * 40), "rec"))
        .collect();
    client.enqueue_many(tasks).await.unwrap();
    let node = w.node("a").await;
    let mut conn = w.conn().await;
    let mut samples = 0;
    let mut max_seen = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while w.recorder.seen().len() < 300 {
        assert!(
            std::time::Instant::now() < deadline,
            "{} of 300 ran",
            w.recorder.seen().len()
        );
        // Both counts in one MULTI, so no claim slips between them.
        let now = w.redis_ms().await;
        let (found, inside): (Vec<String>, usize) = redis::pipe()
            .atomic()
            .cmd("KEYS")
            .arg(format!("{}*", keys.fire_prefix()))
            .cmd("ZCOUNT")
            .arg(keys.due())
            .arg(now - 1_000)
            .arg(now + 4_000)
            .query_async(&mut conn)
            .await
            .unwrap();
        let sentinels = found.len();
        assert!(
            sentinels <= inside,
            "{sentinels} sentinel keys, only {inside} firings within the horizon"
        );
        max_seen = max_seen.max(sentinels);
        samples += 1;
        // The sampling period: the horizon is watched while the firings come due.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    w.wait_idle(Duration::from_secs(5)).await;
    assert!(doubles(&w.recorder.seen()).is_empty());
    assert!(max_seen > 0, "promotion never created a sentinel");
    eprintln!(
        "precision, sentinel horizon: {samples} samples, at most {max_seen} sentinel keys (horizon 3 s, 300 firings over 12 s)"
    );
    node.shutdown().await;
}

/// Redis emits the `expired` events of many sentinels expiring at once late, after the
/// owner's timer claimed their firings: a node remembers the firings it claimed and makes no
/// second (stale) claim for their late events, which cost a spec read and a script call each.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn late_expiry_events_of_claimed_firings_make_no_claim() {
    let mut w = World::new().await;
    // The firings are armed by their jobs' upsert messages alone, which keep their sentinel
    // keys: no sweep reads them ahead, and they are not created in bulk (either would retire
    // their sentinel keys, and with them the events).
    w.settings.node.sweep_interval = Duration::from_secs(60);
    let a = w.node("a").await;
    let client = w.client().await;
    let base = w.redis_ms().await + 2_500;
    futures::future::try_join_all(
        (0..500).map(|i| client.upsert(JobSpec::at(format!("t{i}"), at(base), "rec"))),
    )
    .await
    .unwrap();
    assert!(
        w.redis_ms().await < base,
        "creating took too long to mean anything"
    );
    w.recorder.wait_count(500, Duration::from_secs(10)).await;
    // The events trail the claims; wait until (nearly) all of them came (at least 400 must:
    // asserted below). Not `wait::until`: this wait gives up at its deadline without failing,
    // since not all 500 events need come.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while a.stats().events.load(Relaxed) < 490 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // No counter tells that a node has handled the last event it received: a stale claim, if
    // one is made, would follow within this moment.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (events, stale, claimed) = (
        a.stats().events.load(Relaxed),
        a.stats().stale.load(Relaxed),
        a.stats().claimed.load(Relaxed),
    );
    assert_once_on_time(
        &w.recorder.seen(),
        &format!("{events} events, {claimed} claims, {stale} stale"),
    );
    assert!(events >= 400, "only {events} expired events came");
    assert_eq!(claimed, 500);
    // A node that forgot the firings it settled would make a stale claim for each event that
    // comes after its claim's reply (some 70 of the 500 here); this one makes none.
    assert!(
        stale <= 10,
        "{stale} stale claims for {events} events of 500 claimed firings"
    );
    a.shutdown().await;
}

/// The owner's read-ahead retires the sentinel key of each firing it arms a timer for: the
/// timer claims at the instant, so the key would only expire after that claim, a deletion
/// and an `expired` event to every node for nothing. The firings still run once each, on
/// time, and no node receives an event for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn armed_firings_fire_on_time_without_their_sentinel_keys() {
    let w = World::new().await;
    let client = w.client().await;
    let keys = Keys::new(&w.settings.redis.prefix);
    // Beyond the timer horizon (1.5 s) when created, within the sentinel horizon.
    let base = w.redis_ms().await + 4_000;
    let firings: Vec<(String, i64)> = (0..300).map(|i| (format!("r{i}"), base + i)).collect();
    let specs: Vec<JobSpec> = firings
        .iter()
        .map(|(id, ms)| JobSpec::at(id.clone(), at(*ms), "rec"))
        .collect();
    client.enqueue_many(specs).await.unwrap();
    assert_eq!(
        sentinels(&w, &keys, &firings).await,
        300,
        "created with their sentinel keys"
    );
    let nodes = [w.node("a").await, w.node("b").await];
    // Within the horizon the owners arm timers and retire the keys, before the instants.
    w.until_redis_ms(base - 300).await;
    let left = sentinels(&w, &keys, &firings).await;
    assert_eq!(
        left, 0,
        "{left} sentinel keys left 300 ms before their instants"
    );
    w.recorder.wait_count(300, Duration::from_secs(10)).await;
    w.wait_idle(Duration::from_secs(5)).await;
    let events: u64 = nodes.iter().map(|n| n.stats().events.load(Relaxed)).sum();
    assert_once_on_time(
        &w.recorder.seen(),
        &format!("sentinels retired, {events} expired events"),
    );
    assert_eq!(w.recorder.seen().len(), 300);
    assert_eq!(events, 0, "expired events came for retired sentinels");
}

/// Tasks created in bulk due within their owners' timer horizon: each owner arms its timers
/// from the creation's message and retires the tasks' sentinel keys at once (no sweep reads
/// them ahead here): the burst runs once each, on time, and no node receives an event for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bulk_created_firings_due_soon_lose_their_sentinel_keys_to_the_timers() {
    let mut w = World::new().await;
    w.settings.node.sweep_interval = Duration::from_secs(60);
    let nodes = [w.node("a").await, w.node("b").await];
    keyfire_testkit::wait::until(
        "both nodes to see each other",
        Duration::from_secs(10),
        async || nodes.iter().all(|n| n.live_nodes().len() == 2),
    )
    .await;
    let client = w.client().await;
    let keys = Keys::new(&w.settings.redis.prefix);
    // Within the timer horizon (1.5 s) when created.
    let base = w.redis_ms().await + 1_200;
    let firings: Vec<(String, i64)> = (0..300).map(|i| (format!("s{i}"), base + i)).collect();
    let specs: Vec<JobSpec> = firings
        .iter()
        .map(|(id, ms)| JobSpec::at(id.clone(), at(*ms), "rec"))
        .collect();
    client.enqueue_many(specs).await.unwrap();
    w.until_redis_ms(base - 500).await;
    let left = sentinels(&w, &keys, &firings).await;
    assert_eq!(
        left, 0,
        "{left} sentinel keys left 500 ms before their instants"
    );
    w.recorder.wait_count(300, Duration::from_secs(10)).await;
    w.wait_idle(Duration::from_secs(5)).await;
    let events: u64 = nodes.iter().map(|n| n.stats().events.load(Relaxed)).sum();
    assert_once_on_time(
        &w.recorder.seen(),
        &format!("created due soon, {events} expired events"),
    );
    assert_eq!(w.recorder.seen().len(), 300);
    assert_eq!(events, 0, "expired events came for retired sentinels");
}

/// How many of these firings' sentinel keys exist.
async fn sentinels(w: &World, keys: &Keys, firings: &[(String, i64)]) -> i64 {
    let names: Vec<String> = firings.iter().map(|(id, ms)| keys.fire(id, *ms)).collect();
    redis::cmd("EXISTS")
        .arg(&names)
        .query_async(&mut w.conn().await)
        .await
        .unwrap()
}

/// The read-ahead pages through a shard's due entries, also through more entries at one
/// instant than a page holds: every firing is read, armed and has its sentinel key retired
/// before its instant (one that a page skipped would keep its key).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_read_ahead_pages_through_many_firings_at_one_instant() {
    let mut w = World::new().await;
    w.settings.node.timer_horizon = Duration::from_secs(5);
    let client = w.client().await;
    let keys = Keys::new(&w.settings.redis.prefix);
    let base = w.redis_ms().await + 3_000;
    // 2,500 at one instant, 500 at the next: three pages of 1,000, ties across two.
    let firings: Vec<(String, i64)> = (0..3_000)
        .map(|i| (format!("p{i}"), if i < 2_500 { base } else { base + 1 }))
        .collect();
    let specs: Vec<JobSpec> = firings
        .iter()
        .map(|(id, ms)| JobSpec::at(id.clone(), at(*ms), "rec"))
        .collect();
    client.enqueue_many(specs).await.unwrap();
    assert_eq!(sentinels(&w, &keys, &firings).await, 3_000);
    let node = w.node("a").await;
    w.until_redis_ms(base - 500).await;
    let (left, read) = (
        sentinels(&w, &keys, &firings).await,
        node.stats().due_read.load(Relaxed),
    );
    assert_eq!(
        left, 0,
        "{left} sentinel keys left after reading {read} due entries"
    );
    w.recorder.wait_count(3_000, Duration::from_secs(20)).await;
    w.wait_idle(Duration::from_secs(5)).await;
    assert_once_on_time(
        &w.recorder.seen(),
        &format!("3,000 firings, {read} entries read"),
    );
    assert_eq!(w.recorder.seen().len(), 3_000);
}

/// The claim script takes a firing up to the claim lead before its instant and no earlier,
/// by Redis's clock: driven step by step, with no node running.
#[tokio::test]
async fn a_claim_comes_up_to_its_lead_ahead_and_no_earlier() {
    use keyfire::store::ClaimReply;
    let w = World::new().await;
    let client = w.client().await;
    let store = client.store();
    let due = w.redis_ms().await + 3_000;
    client
        .enqueue(JobSpec::at("ahead", at(due), "rec"))
        .await
        .unwrap();
    let at_ms = store
        .get_job("ahead")
        .await
        .unwrap()
        .unwrap()
        .next_ms
        .unwrap();
    let args = |ahead_ms| async move {
        keyfire::store::ClaimArgs {
            ahead_ms,
            ..crate::scripts::claim_args(store, "ahead", at_ms, None).await
        }
    };
    // At its instant only: about 3 s early.
    let reply = store.claim(&args(0).await).await.unwrap();
    let ClaimReply::Early { wait_ms } = reply else {
        panic!("{reply:?}")
    };
    assert!((2_000..=3_000).contains(&wait_ms), "{reply:?}");
    // A 1 s lead: early still, by about 1 s less.
    let reply = store.claim(&args(1_000).await).await.unwrap();
    let ClaimReply::Early { wait_ms: less } = reply else {
        panic!("{reply:?}")
    };
    assert!(
        less <= wait_ms - 1_000 + 50 && less > 0,
        "{wait_ms} then {less}"
    );
    // Within the lead: claimed, answering Redis's now, before the instant.
    w.until_redis_ms(at_ms - 900).await;
    let reply = store.claim(&args(1_000).await).await.unwrap();
    let ClaimReply::Claimed { now_ms, attempt } = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(attempt, 1);
    assert!(
        now_ms < at_ms && now_ms >= at_ms - 1_000,
        "claimed at {now_ms} for {at_ms}"
    );
    // Once only.
    let again = store.claim(&args(1_000).await).await.unwrap();
    assert_eq!(again, ClaimReply::Stale);
}

/// A node claims its firings `node.claim_ahead` before their instants and holds each run
/// until its instant: every handler starts at or after it by Redis's clock, and the claims
/// came ahead. With the lead at 0 the same firings are claimed at or after their instants.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_claims_ahead_and_starts_each_run_at_its_instant() {
    for lead_ms in [300, 0] {
        let mut w = World::new().await;
        w.settings.node.claim_ahead = Duration::from_millis(lead_ms);
        let node = w.node("a").await;
        let client = w.client().await;
        let base = w.redis_ms().await + 1_000;
        let specs: Vec<JobSpec> = (0..20)
            .map(|i| JobSpec::at(format!("t{i}"), at(base + i * 37), "rec"))
            .collect();
        client.enqueue_many(specs).await.unwrap();
        w.recorder.wait_count(20, Duration::from_secs(10)).await;
        let seen = w.recorder.seen();
        assert_eq!(seen.len(), 20, "lead {lead_ms}: runs");
        assert!(doubles(&seen).is_empty(), "lead {lead_ms}: doubles");
        for s in &seen {
            assert!(
                s.start_ms >= s.scheduled_ms,
                "lead {lead_ms}: started early: {s:?}"
            );
            assert!(
                s.claimed_ms >= s.scheduled_ms - lead_ms as i64,
                "lead {lead_ms}: claimed past the lead: {s:?}"
            );
        }
        let ahead = seen
            .iter()
            .filter(|s| s.claimed_ms < s.scheduled_ms)
            .count();
        eprintln!(
            "claim lead {lead_ms} ms: {ahead} of 20 claimed ahead; {}",
            lateness_summary(&seen).3
        );
        if lead_ms == 0 {
            assert_eq!(ahead, 0, "no lead, no claim ahead");
        } else {
            // Generous: a timer may fire late on a busy machine, never most of them 300 ms late.
            assert!(
                ahead >= 10,
                "lead {lead_ms}: only {ahead} of 20 claimed ahead"
            );
        }
        node.shutdown().await;
    }
}
