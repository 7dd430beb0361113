//! Recovery run by running nodes, with no consumer involved: a delayed task that no event, timer
//! or sentinel key announces (an add that an earlier version left half done) is made ready, and
//! expired reservations of a topic nobody pops are taken back (redelivered or dead-lettered).

use std::time::Duration;

use keyfire::queue::{NewTask, TaskState};
use keyfire_testkit::world::World;
use serde_json::json;

/// Write a delayed task as an add of an earlier version did before it crashed: its record and
/// its entry in the topic's delayed set, no keyfire job and no sentinel key.
pub(crate) async fn write_stranded(w: &World, topic: &str, id: &str, due_ms: i64, job: bool) {
    let q = w.queue().await;
    let k = q.store().keys().clone();
    let mut conn = w.conn().await;
    let mut pipe = redis::pipe();
    pipe.hset_multiple(
        k.qtask(id),
        &[
            ("state", "delayed".to_string()),
            ("topic", topic.to_string()),
            ("payload", json!({ "id": id }).to_string()),
            ("ttr", "30000".to_string()),
            ("max", "3".to_string()),
            ("deliveries", "0".to_string()),
            ("created", (due_ms - 1_000).to_string()),
            ("due", due_ms.to_string()),
        ],
    )
    .zadd(k.qdelayed(topic), id, due_ms)
    .sadd(k.qtopics(), topic)
    .hincr(k.qstats(topic), "added", 1);
    if job {
        pipe.hset(k.qtask(id), "job", keyfire::queue::job_id(id));
    }
    let _: () = pipe.query_async(&mut conn).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stranded_delayed_task_is_made_ready_by_a_running_node() {
    let w = World::new().await;
    let q = w.queue().await;
    let due = w.redis_ms().await + 1_000;
    write_stranded(&w, "s", "stranded-1", due, false).await;
    // Already overdue when written, too.
    write_stranded(&w, "s", "stranded-0", due - 10_000, false).await;
    // The node of this release starts after the earlier one left them: its first sweep walks
    // every topic before it trusts the due index.
    let _node = w.queue_node("a").await;
    let mut got = Vec::new();
    while got.len() < 2 {
        let r = q
            .pop("s", Duration::from_secs(10))
            .await
            .unwrap()
            .expect("the node made the stranded tasks ready");
        assert!(r.ready_at >= r.due_at, "never early: {r:?}");
        q.finish(&r.id, &r.token).await.unwrap();
        got.push(r.id);
    }
    got.sort();
    assert_eq!(got, ["stranded-0", "stranded-1"]);
    assert!(
        q.pop("s", Duration::from_millis(300))
            .await
            .unwrap()
            .is_none()
    );
}

/// A topic nobody pops: its expired reservations are taken back by the running node's sweep,
/// so counts and dead letters stay current.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn expired_reservations_of_an_unpopped_topic_are_taken_back() {
    let w = World::new().await;
    let _node = w.queue_node("a").await;
    let q = w.queue().await;
    let ttr = Duration::from_millis(200);
    let again = q
        .add_task(NewTask::new("idle", json!(1)).ttr(ttr).max_deliveries(2))
        .await
        .unwrap();
    let dead = q
        .add_task(NewTask::new("idle", json!(2)).ttr(ttr).max_deliveries(1))
        .await
        .unwrap();
    let popped = q.pop_many("idle", 2, Duration::ZERO).await.unwrap();
    assert_eq!(popped.len(), 2);
    // Nobody pops "idle" any more; no one calls requeue_expired.
    keyfire_testkit::wait::until(
        "both tasks taken back",
        Duration::from_secs(10),
        async || {
            let (a, d) = (q.get(&again).await.unwrap(), q.get(&dead).await.unwrap());
            if a.state == TaskState::Ready && d.state == TaskState::Dead {
                Ok(())
            } else {
                Err(format!("{a:?} {d:?}"))
            }
        },
    )
    .await;
    let c = &q.topics().await.unwrap()[0];
    assert_eq!(
        (c.ready, c.reserved, c.dead, c.redelivered),
        (1, 0, 1, 1),
        "{c:?}"
    );
    assert_eq!(q.dead_letters("idle", 10).await.unwrap()[0].id, dead);
}

/// A node killed mid-promotion, made deterministic: the topic's owner dies after the first
/// batch of a promotion of 2,500 tasks due at one instant (the script's first run is played
/// here, as the owner ran it); a node started afterwards finishes the promotion. Every task
/// becomes ready exactly once, none before its instant.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_promotion_cut_off_after_its_first_batch_is_finished_by_another_node() {
    const N: usize = 2_500;
    let w = World::new().await;
    let owner = w.queue_node("owner").await;
    let q = w.queue().await;
    let due =
        chrono::DateTime::<chrono::Utc>::from_timestamp_millis(w.redis_ms().await + 1_500).unwrap();
    let tasks: Vec<NewTask> = (0..N)
        .map(|i| NewTask::new("cut", json!(i)).at(due))
        .collect();
    q.add_many(tasks).await.unwrap();
    // The owner crashes before the instant; then its first batch runs, and no more.
    owner.abort();
    w.until_redis_ms(due.timestamp_millis()).await;
    let k = q.store().keys().clone();
    let promote = redis::Script::new(include_str!("../../src/queue/lua/promote.lua"));
    let (moved, _, _, more): (usize, i64, i64, i64) = promote
        .key(k.qdelayed("cut"))
        .key(k.qready("cut"))
        .key(k.qnotify("cut"))
        .key(k.qnext())
        .key(k.qreserved("cut"))
        .key(k.qdue())
        .key(k.qstats("cut"))
        .arg(1_000)
        .arg(1_000)
        .arg("cut:0")
        .invoke_async(&mut w.conn().await)
        .await
        .unwrap();
    assert_eq!((moved, more), (1_000, 1), "one batch of a longer promotion");
    let survivor = w.queue_node("survivor").await;
    let mut seen = std::collections::HashSet::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while seen.len() < N {
        assert!(
            std::time::Instant::now() < deadline,
            "only {} of {N} tasks became ready",
            seen.len()
        );
        for r in q
            .pop_many("cut", 500, Duration::from_secs(2))
            .await
            .unwrap()
        {
            assert!(r.ready_at >= r.due_at, "never early: {r:?}");
            assert_eq!(r.deliveries, 1, "delivered once: {r:?}");
            assert!(seen.insert(r.id.clone()), "{} popped twice", r.id);
            q.finish(&r.id, &r.token).await.unwrap();
        }
    }
    assert!(
        q.pop("cut", Duration::from_millis(300))
            .await
            .unwrap()
            .is_none(),
        "nothing more"
    );
    survivor.shutdown().await;
}
