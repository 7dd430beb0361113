//! Flow control, driven at the script level: the limiter's rate and in-flight bounds, the
//! place in line of a firing held back, leased slots coming back, and the hold of a denied
//! firing (same attempt, fenced). Deterministic: every step is one script call.

use std::time::Duration;

use keyfire::FlowLimitSpec;
use keyfire::store::{Acquired, Store};
use keyfire_testkit::wait;
use keyfire_testkit::world::World;
use redis::AsyncCommands;

async fn store(w: &World) -> Store {
    Store::open(&w.settings.redis).await.unwrap()
}

async fn ask(s: &Store, key: &str, fid: &str, sched: i64) -> Acquired {
    s.acquire_limit(key, fid, sched, 30_000, 30_000)
        .await
        .unwrap()
}

fn granted(a: &Acquired) -> bool {
    matches!(a, Acquired::Granted { .. })
}

/// Rate 5/s, all 5 at once: of 12 firings asking at once, exactly the first 5 run; the others are told to
/// come back when a slot of the sliding second opens: ranks 0–4 of the line after about a
/// second, ranks 5–6 after about two.
#[tokio::test]
async fn a_rate_bound_spreads_its_line_at_n_per_second() {
    let w = World::new().await;
    let s = store(&w).await;
    s.put_limit(&FlowLimitSpec::new("k", Some(5), None).with_burst(5))
        .await
        .unwrap();
    let mut waits = Vec::new();
    for i in 0..12 {
        match ask(&s, "k", &format!("j{i:02}:1"), 1_000 + i).await {
            Acquired::Granted { .. } => assert!(i < 5, "firing {i} granted past the rate"),
            Acquired::Denied {
                wait_ms, reason, ..
            } => {
                assert!(i >= 5, "firing {i} denied within the rate");
                assert_eq!(reason, "rate");
                waits.push(wait_ms);
            }
            Acquired::Unlimited => panic!("limited key answered unlimited"),
        }
    }
    assert_eq!(waits.len(), 7);
    for (rank, w) in waits.iter().enumerate() {
        let round = (rank / 5) as i64 + 1;
        assert!(
            (round * 1000 - 100..=round * 1000 + 5).contains(w),
            "rank {rank}: wait {w} ms, expected about {} ms ({waits:?})",
            round * 1000
        );
    }
    let st = s.limit_status("k").await.unwrap().unwrap();
    assert_eq!((st.started_last_second, st.held), (5, 7));
    // Asking again within the second changes nothing: still five.
    assert!(!granted(&ask(&s, "k", "j05:1", 1_005).await));
}

/// In flight 2: a firing held back keeps its place: a later one asking first when one slot
/// frees is denied, the earlier one then takes the slot; releasing gives slots back at once.
/// Once a held firing's turn has come, a free slot is its own even if one ahead of it is late.
#[tokio::test]
async fn in_flight_bound_keeps_the_line_in_scheduled_order() {
    let w = World::new().await;
    let s = store(&w).await;
    s.put_limit(&FlowLimitSpec::new("k", None, Some(2)))
        .await
        .unwrap();
    // Runs take a minute on average: the turns given below are a minute away.
    let mut conn = w.conn().await;
    let conf = s.keys().limit("k").conf();
    let _: () = conn.hset(&conf, "avg", 60_000).await.unwrap();
    assert!(granted(&ask(&s, "k", "a:1", 1).await));
    assert!(granted(&ask(&s, "k", "b:2", 2).await));
    match ask(&s, "k", "c:3", 3).await {
        Acquired::Denied {
            reason,
            in_flight,
            held,
            ..
        } => assert_eq!((reason.as_str(), in_flight, held), ("in_flight", 2, 1)),
        other => panic!("{other:?}"),
    }
    assert!(!granted(&ask(&s, "k", "d:4", 4).await));
    assert_eq!(
        s.release_limit_slots("k", &[("a:1", None)]).await.unwrap(),
        1
    );
    // One slot free; d (scheduled later) asks first and must not overtake c.
    assert!(!granted(&ask(&s, "k", "d:4", 4).await), "d overtook c");
    assert!(granted(&ask(&s, "k", "c:3", 3).await));
    assert!(!granted(&ask(&s, "k", "d:4", 4).await), "three in flight");
    // Asking again for a slot it holds keeps it (idempotent), it does not take another.
    assert!(granted(&ask(&s, "k", "c:3", 3).await));
    let st = s.limit_status("k").await.unwrap().unwrap();
    assert_eq!((st.running, st.held), (2, 1));
    assert_eq!(
        s.held_firings("k", 10).await.unwrap(),
        vec![("d:4".to_string(), 4)]
    );
    s.release_limit_slots("k", &[("b:2", None), ("c:3", None)])
        .await
        .unwrap();
    assert!(granted(&ask(&s, "k", "d:4", 4).await));
    assert_eq!(s.limit_status("k").await.unwrap().unwrap().held, 0);

    // e and f wait behind two runs, with turns a minute away; e is ahead in line.
    assert!(granted(&ask(&s, "k", "x:0", 0).await));
    assert!(!granted(&ask(&s, "k", "e:5", 5).await));
    assert!(!granted(&ask(&s, "k", "f:6", 6).await));
    s.release_limit_slots("k", &[("d:4", None)]).await.unwrap();
    assert!(!granted(&ask(&s, "k", "f:6", 6).await), "f before its turn");
    // f's turn comes; e (ahead of it) is late: the free slot is f's.
    let turns = s.keys().limit("k").turns();
    let now = w.redis_ms().await;
    let _: () = conn.zadd(&turns, "f:6", now).await.unwrap();
    assert!(granted(&ask(&s, "k", "f:6", 6).await), "f at its turn");
}

/// A slot whose holder never gives it back (its node died) comes back once its lease ran
/// out; renewing the lease keeps it.
#[tokio::test]
async fn a_dead_holders_slot_comes_back_after_its_lease() {
    let w = World::new().await;
    let s = store(&w).await;
    s.put_limit(&FlowLimitSpec::new("k", None, Some(1)))
        .await
        .unwrap();
    let lease = 300;
    assert!(granted(
        &s.acquire_limit("k", "a:1", 1, lease, 5_000).await.unwrap()
    ));
    // The lease's time passing is what this test is about: wall time, on purpose.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(s.renew_limit_slot("k", "a:1", lease).await.unwrap());
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Renewed 200 ms ago for 300 ms: still held.
    assert!(!granted(
        &s.acquire_limit("k", "b:2", 2, lease, 5_000).await.unwrap()
    ));
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(granted(
        &s.acquire_limit("k", "b:2", 2, lease, 5_000).await.unwrap()
    ));
    assert!(!s.renew_limit_slot("k", "a:1", lease).await.unwrap());
}

/// A waiter that never comes back gives up its place after its grace, so it cannot block
/// the line forever.
#[tokio::test]
async fn absent_waiters_leave_the_line_after_their_grace() {
    let w = World::new().await;
    let s = store(&w).await;
    s.put_limit(&FlowLimitSpec::new("k", None, Some(1)))
        .await
        .unwrap();
    assert!(granted(
        &s.acquire_limit("k", "a:1", 1, 30_000, 50).await.unwrap()
    ));
    // b (earlier in line than c) is denied, then never asks again.
    assert!(!granted(
        &s.acquire_limit("k", "b:2", 2, 30_000, 50).await.unwrap()
    ));
    s.release_limit_slots("k", &[("a:1", None)]).await.unwrap();
    assert!(!granted(
        &s.acquire_limit("k", "c:3", 3, 30_000, 50).await.unwrap()
    ));
    // b's grace (50 ms) running out is what this is about: wall time, on purpose.
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(granted(
        &s.acquire_limit("k", "c:3", 3, 30_000, 50).await.unwrap()
    ));
}

/// A key without a limit (never set, or deleted) answers "unlimited" and tracks nothing.
#[tokio::test]
async fn keys_without_a_limit_are_unlimited_and_tracked_nowhere() {
    let w = World::new().await;
    let s = store(&w).await;
    s.put_limit(&FlowLimitSpec::new("k", None, Some(1)))
        .await
        .unwrap();
    assert_eq!(ask(&s, "nolimit", "x:1", 1).await, Acquired::Unlimited);
    let mut conn = w.conn().await;
    let keys: Vec<String> = conn.keys("*nolimit*").await.unwrap();
    assert!(keys.is_empty(), "{keys:?}");
    assert!(s.delete_limit("k").await.unwrap());
    assert_eq!(ask(&s, "k", "d:4", 4).await, Acquired::Unlimited);
    assert!(s.limit_status("k").await.unwrap().is_none());
}

/// The hold of a denied firing: its lease is given up and the same attempt is queued again,
/// due after the wait, with no run recorded; a hold by a node that no longer holds the run
/// (fenced) changes nothing.
#[tokio::test]
async fn a_hold_by_the_runs_holder_requeues_the_same_attempt() {
    let w = World::new().await;
    let s = store(&w).await;
    let k = s.job_keys("j").clone();
    let mut conn = w.conn().await;
    let fid = "j:1000";
    // The run's lease, as claim.lua writes it: attempt 3, claimed at 500 by n1.
    let member = "j:1000|3|500|n1";
    let _: () = conn
        .zadd(k.running(), member, 99_999_999_999_999i64)
        .await
        .unwrap();
    let _: () = conn
        .hset_multiple(k.job("j"), &[("active", member), ("runs", "4")])
        .await
        .unwrap();
    let hold = |attempt, claimed_ms, wait_ms| keyfire::store::Hold {
        job_id: "j",
        at_ms: 1000,
        attempt,
        claimed_ms,
        wait_ms,
    };

    assert_eq!(s.hold("n2", hold(3, 500, 100)).await.unwrap(), None);
    assert_eq!(s.hold("n1", hold(2, 500, 100)).await.unwrap(), None);
    assert_eq!(s.hold("n1", hold(3, 501, 100)).await.unwrap(), None);
    let running: Option<f64> = conn.zscore(k.running(), member).await.unwrap();
    assert!(running.is_some(), "a fenced hold changed the run");

    let now = w.redis_ms().await;
    let due = s
        .hold("n1", hold(3, 500, 250))
        .await
        .unwrap()
        .expect("held");
    assert!(
        (now + 250..now + 1_250).contains(&due),
        "due {due}, now {now}"
    );
    let running: Option<f64> = conn.zscore(k.running(), member).await.unwrap();
    assert_eq!(running, None);
    let retry: Option<i64> = conn.zscore(k.retry(), fid).await.unwrap();
    assert_eq!(retry, Some(due));
    let attempt: String = conn.hget(k.attempts(), fid).await.unwrap();
    assert_eq!(attempt, "3", "the same attempt is queued again");
    let (active, runs): (Option<String>, i64) = redis::cmd("HMGET")
        .arg(k.job("j"))
        .arg(&["active", "runs"])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(active, None);
    assert_eq!(runs, 3, "the claim's count of a run is taken back");
    let history: i64 = conn.llen(k.runs("j")).await.unwrap();
    assert_eq!(history, 0, "a hold records no run");
}

/// Firings of the same instant wait in the order they first asked, not by id: one that
/// asked later (with a smaller id) does not overtake, and asking again keeps the place.
#[tokio::test]
async fn same_instant_waiters_keep_the_order_they_asked_in() {
    let w = World::new().await;
    let s = store(&w).await;
    s.put_limit(&FlowLimitSpec::new("k", None, Some(1)))
        .await
        .unwrap();
    let at = w.redis_ms().await;
    assert!(granted(&ask(&s, "k", "first:1", at).await));
    assert!(!granted(&ask(&s, "k", "z:1", at).await));
    // "a" asks later than "z" by Redis's clock.
    let asked = w.redis_ms().await;
    w.until_redis_ms(asked + 20).await;
    assert!(!granted(&ask(&s, "k", "a:1", at).await));
    assert!(!granted(&ask(&s, "k", "z:1", at).await), "asking again");
    assert_eq!(
        s.held_firings("k", 10).await.unwrap(),
        vec![("z:1".to_string(), at), ("a:1".to_string(), at)]
    );
    s.release_limit_slots("k", &[("first:1", None)])
        .await
        .unwrap();
    assert!(!granted(&ask(&s, "k", "a:1", at).await), "a overtook z");
    assert!(granted(&ask(&s, "k", "z:1", at).await));
}

/// Pacing: rate 10/s with a burst of 2: two go at once, then one every 100 ms, and the line
/// is told so (the third after about 100 ms, the fourth after about 200 ms).
#[tokio::test]
async fn rate_is_paced_after_the_burst() {
    let w = World::new().await;
    let s = store(&w).await;
    s.put_limit(&FlowLimitSpec::new("k", Some(10), None).with_burst(2))
        .await
        .unwrap();
    assert!(granted(&ask(&s, "k", "a:1", 1).await));
    assert!(granted(&ask(&s, "k", "b:2", 2).await));
    let mut waits = Vec::new();
    for (i, fid) in ["c:3", "d:4", "e:5"].iter().enumerate() {
        match ask(&s, "k", fid, 3 + i as i64).await {
            Acquired::Denied {
                wait_ms, reason, ..
            } => {
                assert_eq!(reason, "rate");
                waits.push(wait_ms);
            }
            other => panic!("{fid}: {other:?}"),
        }
    }
    // Each ask runs at Redis's time, so a slow machine shortens the later waits by the time
    // the asks took (seen: 78 ms for the first under load): generous below, tight above.
    for (i, w) in waits.iter().enumerate() {
        let want = 100 * (i as i64 + 1);
        assert!((want - 50..=want + 5).contains(w), "{waits:?}");
    }
    // The rate's turn coming round is what this is about: wall time, on purpose.
    tokio::time::sleep(Duration::from_millis(110)).await;
    assert!(granted(&ask(&s, "k", "c:3", 3).await), "c at its turn");
    assert!(!granted(&ask(&s, "k", "d:4", 4).await), "d before its turn");
}

/// Any handler, through a job's `limit_key`: 12 tasks of a `slow` handler (150 ms) under
/// in_flight 2, on two in-process nodes: never more than 2 run at once, each runs once, as
/// attempt 1 (held back is not a failed attempt), and the held ones show in the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_named_key_limits_any_handler() {
    let w = World::new().await;
    let client = w.client().await.allow_handlers(["slow"]);
    client
        .put_limit(FlowLimitSpec::new("work", None, Some(2)))
        .await
        .unwrap();
    let nodes = [w.node("a").await, w.node("b").await];
    let specs: Vec<keyfire::JobSpec> = (0..12)
        .map(|i| {
            keyfire::JobSpec::after(format!("w{i:02}"), "0s", "slow")
                .params(serde_json::json!({"sleep_ms": 150}))
                .limit_key("work")
        })
        .collect();
    client.enqueue_many(specs).await.unwrap();
    let s = store(&w).await;
    let mut most_held = 0;
    // Each look also samples the holds, so they are watched while the tasks run.
    wait::until("every task to run", Duration::from_secs(30), async || {
        most_held = most_held.max(s.limit_status("work").await.unwrap().unwrap().held);
        (0..12).all(|i| {
            w.recorder
                .seen_of(&format!("w{i:02}"))
                .iter()
                .any(|r| w.recorder.ended(&r.firing_id).is_some())
        })
    })
    .await;
    w.wait_idle(Duration::from_secs(10)).await;
    let seen = w.recorder.seen();
    assert_eq!(seen.len(), 12, "{seen:?}");
    assert!(seen.iter().all(|r| r.attempt == 1), "{seen:?}");
    let spans: Vec<(i64, i64)> = seen
        .iter()
        .map(|r| (r.start_ms, w.recorder.ended(&r.firing_id).unwrap()))
        .collect();
    let most_at_once = spans
        .iter()
        .map(|&(start, _)| {
            spans
                .iter()
                .filter(|&&(a, b)| a <= start && start < b)
                .count()
        })
        .max()
        .unwrap();
    assert!(most_at_once <= 2, "{most_at_once} at once: {spans:?}");
    assert!(most_held > 0, "no firing was shown held");
    for n in nodes {
        n.shutdown().await;
    }
}

/// Several firings asking in one call are decided in order, each seeing the grants before
/// it: rate 5 (all at once), 7 asking, the first 5 run.
#[tokio::test]
async fn one_call_decides_a_batch_in_order() {
    let w = World::new().await;
    let s = store(&w).await;
    s.put_limit(&FlowLimitSpec::new("k", Some(5), Some(10)).with_burst(5))
        .await
        .unwrap();
    let fids: Vec<String> = (0..7).map(|i| format!("b{i}:{i}")).collect();
    let asks: Vec<(&str, i64)> = fids.iter().zip(0..).map(|(f, i)| (f.as_str(), i)).collect();
    let answers = s.acquire_limits("k", &asks, 30_000, 30_000).await.unwrap();
    let got: Vec<bool> = answers.iter().map(granted).collect();
    assert_eq!(
        got,
        [true, true, true, true, true, false, false],
        "{answers:?}"
    );
    assert_eq!(
        answers[4],
        Acquired::Granted {
            in_flight: 5,
            held: 0
        }
    );
    let st = s.limit_status("k").await.unwrap().unwrap();
    assert_eq!((st.running, st.started_last_second, st.held), (5, 5, 2));
    assert!(
        s.acquire_limits("nolimit", &asks, 30_000, 30_000)
            .await
            .unwrap()
            .iter()
            .all(|a| *a == Acquired::Unlimited)
    );
}
