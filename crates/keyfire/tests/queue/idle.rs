//! What an idle node costs Redis for the topics it holds: nothing beyond a read of the due
//! index per sweep, once the index is complete; and what the index alone must do when events,
//! timers and sentinel keys are gone.

use std::time::Duration;

use keyfire::queue::NewTask;
use keyfire_testkit::wait;
use keyfire_testkit::world::{World, command_calls};
use redis::AsyncCommands;
use serde_json::json;

use crate::recovery::write_stranded;

/// Redis commands per second over `span`, the `INFO` calls of the count left out, and the
/// busiest commands (for the failure message).
async fn commands_per_s(w: &World, span: Duration) -> (f64, String) {
    let mut c = w.conn().await;
    let before = command_calls(&mut c).await;
    tokio::time::sleep(span).await;
    let after = command_calls(&mut c).await;
    let mut mix: Vec<(String, u64)> = after
        .iter()
        .filter(|(name, _)| name.as_str() != "info")
        .map(|(name, n)| (name.clone(), n - before.get(name).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect();
    mix.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    let total: u64 = mix.iter().map(|(_, n)| n).sum();
    let mix = mix
        .iter()
        .take(6)
        .map(|(name, n)| format!("{name} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    (total as f64 / span.as_secs_f64(), mix)
}

async fn wait_marked(w: &World) {
    wait::until(
        "the due index to be marked",
        Duration::from_secs(10),
        || index_marked(w),
    )
    .await;
}

async fn index_marked(w: &World) -> bool {
    let q = w.queue().await;
    let key = q.store().keys().qindexed();
    w.conn().await.exists(key).await.unwrap()
}

/// Two idle nodes holding 2,000 topics, each with a task delayed an hour and one reserved for
/// an hour, half of them paused, ask Redis for no more than two idle nodes holding nothing
/// (within 2× and a few commands): nothing polls a topic, paused or not. Walking every topic's heads, as the sweep did before the due index, costs about
/// two reads per topic per node and sweep: 16,000 commands/s here.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_topics_cost_redis_nothing() {
    const TOPICS: usize = 2_000;
    let w = World::new().await;
    let _nodes = [w.queue_node("a").await, w.queue_node("b").await];
    wait_marked(&w).await;
    // Let the start settle (first heartbeats, registrations), then measure nothing held.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (empty, empty_mix) = commands_per_s(&w, Duration::from_secs(3)).await;

    let q = w.queue().await;
    let hour = Duration::from_secs(3_600);
    let mut tasks = Vec::new();
    for i in 0..TOPICS {
        let topic = format!("idle-{i}");
        tasks.push(NewTask::new(&topic, json!(i)).delay(hour));
        tasks.push(NewTask::new(&topic, json!(i)).ttr(hour));
    }
    for chunk in tasks.chunks(1_000) {
        q.add_many(chunk.to_vec()).await.unwrap();
    }
    for i in 0..TOPICS {
        let r = q.pop(&format!("idle-{i}"), Duration::ZERO).await.unwrap();
        assert!(r.is_some(), "topic idle-{i} had a ready task");
    }
    for i in (0..TOPICS).step_by(2) {
        assert!(q.pause(&format!("idle-{i}")).await.unwrap());
    }
    // The adds' and pops' aftermath (wake messages, timers) passes within a sweep or two.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (held, held_mix) = commands_per_s(&w, Duration::from_secs(3)).await;
    eprintln!(
        "idle: nothing held {empty:.1} commands/s ({empty_mix}); {TOPICS} topics held \
         {held:.1} commands/s ({held_mix})"
    );
    assert!(
        held <= 2.0 * empty + 10.0,
        "idle topics cost Redis: {held:.1} commands/s ({held_mix}) against {empty:.1} \
         ({empty_mix}) with nothing held"
    );
    let counts = q.topics().await.unwrap();
    let delayed: u64 = counts.iter().map(|t| t.delayed).sum();
    let reserved: u64 = counts.iter().map(|t| t.reserved).sum();
    assert_eq!((delayed, reserved), (TOPICS as u64, TOPICS as u64));
}

/// Once the index is complete it alone finds a delayed task whose tag's sentinel key is gone
/// (so no expiry event comes) on a node without precision timers: the sweep reads the lane's
/// entry and promotes it, never before its instant.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_due_index_finds_a_task_no_event_or_timer_announces() {
    let mut w = World::new().await;
    w.settings.node.timer_horizon = Duration::ZERO;
    let _node = w.queue_node("a").await;
    wait_marked(&w).await;
    let q = w.queue().await;
    let id = q
        .add_task(
            NewTask::new("quiet", json!(1))
                .delay(Duration::from_millis(1_500))
                .ttr(Duration::from_secs(1)),
        )
        .await
        .unwrap();
    let keys = q.store().keys().clone();
    let mut c = w.conn().await;
    let gone: u64 = c.del(keys.qnext()).await.unwrap();
    assert_eq!(gone, 1, "the add set the tag's sentinel key");
    let per_topic: Vec<String> = c.keys(format!("{}:q:wake:*", keys.tag())).await.unwrap();
    assert!(
        per_topic.is_empty(),
        "no sentinel key per topic: {per_topic:?}"
    );
    let entries: Vec<(String, i64)> = c.zrange_withscores(keys.qdue(), 0, -1).await.unwrap();
    assert_eq!(
        entries.len(),
        1,
        "the add wrote the lane's index entry: {entries:?}"
    );

    let r = q
        .pop("quiet", Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the sweep found the task through the due index");
    assert_eq!(r.id, id);
    let late = (r.ready_at - r.due_at).num_milliseconds();
    assert!(late >= 0, "never early: {r:?}");
    // A sweep every 500 ms finds it; the bound is wide for a loaded machine.
    assert!(late <= 5_000, "found {late} ms after its instant");
    // The pop left the lane's entry at the reservation's deadline.
    let at: Option<f64> = c.zscore(keys.qdue(), "quiet:0").await.unwrap();
    assert_eq!(at.map(|a| a as i64), Some(r.deadline.timestamp_millis()));
    q.finish(&r.id, &r.token).await.unwrap();
    // After the deadline a visit finds nothing delayed or reserved and takes the lane out.
    wait::until(
        "the lane's index entry to go",
        Duration::from_secs(8),
        || async {
            let n: u64 = w.conn().await.zcard(keys.qdue()).await.unwrap();
            (n == 0).then_some(()).ok_or(format!("{n} entries"))
        },
    )
    .await;
}

/// While a node of an earlier release (one that does not keep the due index) is live, the
/// sweep walks every topic: a delayed task such a node left without an index entry is made
/// ready. Once it is gone, a walk marks the index complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sweeps_walk_every_topic_while_a_node_of_an_earlier_release_is_live() {
    let w = World::new().await;
    let q = w.queue().await;
    let keys = q.store().keys().clone();
    let mut c = w.conn().await;
    // The earlier release's node: live by its heartbeat (the index's window is 30 s).
    let now = w.redis_ms().await;
    let _: () = c.zadd(keys.nodes(), "earlier", now).await.unwrap();
    let _node = w.queue_node("a").await;
    let due = w.redis_ms().await + 1_000;
    write_stranded(&w, "older", "left-1", due, false).await;
    let r = q
        .pop("older", Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the walk made the task ready");
    assert!(r.ready_at >= r.due_at, "never early: {r:?}");
    q.finish(&r.id, &r.token).await.unwrap();
    assert!(
        !index_marked(&w).await,
        "not marked while the earlier node lives"
    );

    let _: () = c.zrem(keys.nodes(), "earlier").await.unwrap();
    wait_marked(&w).await;
}

/// The tag's sentinel key alone makes a delayed task ready on time on a node without precision
/// timers whose sweeps come only every 30 s: its `expired` event asks the node for the lanes
/// due. Each promotion sets the key to the index's next head, so three tasks a second apart
/// each come within the expiry's precision, not the sweep's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_tags_sentinel_key_makes_tasks_ready_without_timers_or_sweeps() {
    let mut w = World::new().await;
    w.settings.node.timer_horizon = Duration::ZERO;
    w.settings.node.sweep_interval = Duration::from_secs(30);
    let _node = w.queue_node("a").await;
    wait_marked(&w).await;
    let q = w.queue().await;
    for (i, ms) in [1_000u64, 2_000, 3_000].into_iter().enumerate() {
        q.add_task(NewTask::new(format!("evented-{i}"), json!(i)).delay(Duration::from_millis(ms)))
            .await
            .unwrap();
    }
    for i in 0..3 {
        let r = q
            .pop(&format!("evented-{i}"), Duration::from_secs(10))
            .await
            .unwrap()
            .expect("the expiry event made the task ready");
        let late = (r.ready_at - r.due_at).num_milliseconds();
        assert!(late >= 0, "never early: {r:?}");
        // Redis expires keys within about 100 ms (hz 10) and the node reads the index at once;
        // far below the 30 s sweep, wide for a loaded machine.
        assert!(late <= 3_000, "task {i} ready {late} ms after its instant");
    }
}
