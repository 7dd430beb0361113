//! Start, stop, restart: graceful drain, durable state, the notification check.

use std::time::Duration;

use chrono::DateTime;
use keyfire::{Error, JobSpec, Node, Registry};
use keyfire_testkit::RedisOptions;
use keyfire_testkit::world::{World, assert_spaced, doubles};
use serde_json::json;

/// A node told to stop finishes its running job within the drain timeout,
/// leaves the live set at once, and the other nodes take the firings that follow.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn graceful_shutdown_hands_over_while_its_runs_drain() {
    let w = World::new().await;
    let a = w.node("a").await;
    let client = w.client().await;
    let soon = DateTime::from_timestamp_millis(w.redis_ms().await + 200).unwrap();
    client
        .upsert(JobSpec::at("slow", soon, "slow").params(json!({"sleep_ms": 1_500})))
        .await
        .unwrap();
    w.recorder.wait_count(1, Duration::from_secs(5)).await;
    assert_eq!(w.recorder.seen()[0].node, "a");
    let b = w.node("b").await;
    let c = w.node("c").await;
    client
        .upsert(JobSpec::every("beat", "300ms", "rec"))
        .await
        .unwrap();

    let slow_id = w.recorder.seen()[0].firing_id.clone();
    assert_eq!(a.running(), 1);
    a.shutdown().await;
    let stopped = w.redis_ms().await;
    let ended = w
        .recorder
        .ended(&slow_id)
        .expect("the running job was cut off");
    assert!(
        ended <= stopped,
        "shutdown returned before the job finished"
    );
    let runs = client.runs("slow", 10).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].outcome, "ok");

    let mut conn = w.conn().await;
    let live: Vec<String> = redis::cmd("ZRANGE")
        .arg(keyfire::store::Keys::new(&w.settings.redis.prefix).nodes())
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        !live.contains(&"a".to_string()),
        "a is still live: {live:?}"
    );

    w.recorder
        .wait_until(Duration::from_secs(10), "6 beats after a stopped", |s| {
            s.iter()
                .filter(|r| r.job_id == "beat" && r.claimed_ms > stopped)
                .count()
                >= 6
        })
        .await;
    client.pause("beat").await.unwrap();
    w.wait_idle(Duration::from_secs(5)).await;
    let beats = w.recorder.seen_of("beat");
    assert!(doubles(&beats).is_empty());
    assert_spaced(&beats, 300, "gap in beats across the handover");
    for r in beats.iter().filter(|r| r.claimed_ms > stopped) {
        assert_ne!(r.node, "a", "a ran after it stopped");
    }
    b.shutdown().await;
    c.shutdown().await;
}

/// Job definitions and pending firings survive stopping every node,
/// and a Redis restart with the shipped redis.conf (AOF).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jobs_and_pending_firings_survive_node_and_redis_restarts() {
    let mut w = World::with(RedisOptions {
        persistent: true,
        ..Default::default()
    })
    .await;
    let nodes = [w.node("a").await, w.node("b").await];
    let client = w.client().await;
    client
        .upsert(JobSpec::cron("tick", "* * * * * *", "rec"))
        .await
        .unwrap();
    let once_at = w.redis_ms().await + 4_000;
    client
        .upsert(JobSpec::at(
            "once",
            DateTime::from_timestamp_millis(once_at).unwrap(),
            "rec",
        ))
        .await
        .unwrap();
    w.recorder
        .wait_until(Duration::from_secs(10), "2 ticks", |s| {
            s.iter().filter(|r| r.job_id == "tick").count() >= 2
        })
        .await;
    for n in nodes {
        n.shutdown().await;
    }
    drop(client);
    let before = w.recorder.seen().len();

    // Redis restarts (SIGTERM: the AOF is flushed), nodes come back.
    w.redis.restart().unwrap();
    let client = w.client().await;
    let tick = client.get("tick").await.unwrap();
    let once = client.get("once").await.unwrap();
    assert!(tick.next_ms.is_some() && once.next_ms == Some(once_at));
    assert!(tick.runs >= 2, "history counters lost");
    let nodes = [w.node("a").await, w.node("b").await];
    w.recorder
        .wait_until(Duration::from_secs(15), "the one-shot and new ticks", |s| {
            s.iter().any(|r| r.job_id == "once") && s.len() >= before + 3
        })
        .await;
    client.pause("tick").await.unwrap();
    w.wait_idle(Duration::from_secs(5)).await;
    let seen = w.recorder.seen();
    assert!(doubles(&seen).is_empty(), "doubles {:?}", doubles(&seen));
    let once_runs: Vec<_> = seen.iter().filter(|r| r.job_id == "once").collect();
    assert_eq!(once_runs.len(), 1);
    assert_eq!(once_runs[0].scheduled_ms, once_at);
    for n in nodes {
        n.shutdown().await;
    }
}

/// A node checks `notify-keyspace-events` at start: it turns expired events on when allowed,
/// and otherwise refuses to start with what to set.
#[tokio::test]
async fn node_start_checks_expired_events() {
    let w = World::with(RedisOptions {
        extra: vec![("notify-keyspace-events".into(), "".into())],
        ..Default::default()
    })
    .await;
    let mut settings = w.settings.clone();
    settings.redis.enable_notifications = false;
    let err = Node::new(settings.clone(), Registry::with_builtins())
        .start()
        .await
        .err()
        .expect("started without expired events");
    assert!(matches!(err, Error::Setup(_)), "{err}");
    let managed =
        w.redis.admin("CONFIG").get_packed_command() != redis::cmd("CONFIG").get_packed_command();
    if managed {
        // Without CONFIG the node probes: no event came, and it names the service setting.
        assert!(
            err.to_string()
                .contains("sent no expired event for a probe key")
                && err.to_string().contains("parameter group"),
            "{err}"
        );
        // Nor can it turn them on.
        let err = Node::new(w.settings.clone(), Registry::with_builtins())
            .start()
            .await
            .err()
            .expect("started without expired events");
        assert!(err.to_string().contains("probe key"), "{err}");
        return;
    }
    assert!(
        err.to_string().contains("notify-keyspace-events Ex"),
        "{err}"
    );

    let node = Node::new(w.settings.clone(), Registry::with_builtins())
        .start()
        .await
        .unwrap();
    let mut conn = w.conn().await;
    let (_, flags): (String, String) = w
        .redis
        .admin("CONFIG")
        .arg("GET")
        .arg("notify-keyspace-events")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(flags.contains('E') && flags.contains('x'), "{flags}");
    node.shutdown().await;
}
