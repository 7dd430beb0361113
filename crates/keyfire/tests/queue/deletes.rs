//! Delete in each state removes the task for good; a deleted delayed task never
//! becomes ready, not even when the delete races its firing.

use std::time::Duration;

use futures::future::join_all;
use keyfire::Error;
use keyfire::queue::{NewTask, Queue, TaskState, When};
use keyfire_testkit::wait;
use keyfire_testkit::world::World;
use serde_json::json;

use crate::{add_ready, past_deadlines};

async fn assert_gone_for_good(q: &Queue, id: &str, topic: &str) {
    let t = q.get(id).await.unwrap();
    assert_eq!(t.state, TaskState::Deleted, "{t:?}");
    assert_eq!(t.payload, None);
    assert!(matches!(q.delete(id).await, Err(Error::TaskNotFound(_))));
    let c = q
        .topics()
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.topic == topic)
        .unwrap();
    assert_eq!(
        (c.delayed, c.ready, c.reserved, c.dead),
        (0, 0, 0, 0),
        "{c:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delete_in_each_state_removes_the_task_for_good() {
    let w = World::new().await;
    let _node = w.queue_node("a").await;
    let q = w.queue().await;
    let ttr = Duration::from_millis(300);

    // Delayed: after its instant plus a sweep it is still not ready.
    let delayed = q
        .add(
            "d",
            json!("x"),
            When::Delay(Duration::from_millis(800)),
            ttr,
            2,
        )
        .await
        .unwrap();
    assert_eq!(q.get(&delayed).await.unwrap().state, TaskState::Delayed);
    q.delete(&delayed).await.unwrap();
    let due = q.get(&delayed).await.unwrap().due_at;
    // Past the instant, then a full sweep interval and grace: nothing comes.
    assert!(
        q.pop("d", Duration::from_millis(800 + 2_000))
            .await
            .unwrap()
            .is_none()
    );
    assert!(w.redis_ms().await > due.timestamp_millis() + 1_500);
    q.requeue_expired("d").await.unwrap();
    assert_gone_for_good(&q, &delayed, "d").await;

    // Ready.
    let ready = q
        .add("r", json!("x"), When::Delay(Duration::ZERO), ttr, 2)
        .await
        .unwrap();
    assert_eq!(q.get(&ready).await.unwrap().state, TaskState::Ready);
    q.delete(&ready).await.unwrap();
    assert!(
        q.pop("r", Duration::from_millis(100))
            .await
            .unwrap()
            .is_none()
    );
    assert_gone_for_good(&q, &ready, "r").await;

    // Reserved: the holder's finish and touch are refused, and it never comes back.
    let reserved = q
        .add("s", json!("x"), When::Delay(Duration::ZERO), ttr, 2)
        .await
        .unwrap();
    let r = q.pop("s", Duration::ZERO).await.unwrap().unwrap();
    q.delete(&reserved).await.unwrap();
    assert!(matches!(
        q.finish(&reserved, &r.token).await,
        Err(Error::TaskNotFound(_))
    ));
    assert!(matches!(
        q.touch(&reserved, &r.token, None).await,
        Err(Error::TaskNotFound(_))
    ));
    assert!(q.pop("s", ttr * 3).await.unwrap().is_none());
    assert_eq!(q.requeue_expired("s").await.unwrap().requeued, 0);
    assert_gone_for_good(&q, &reserved, "s").await;

    // Dead.
    let dead = q
        .add("x", json!("x"), When::Delay(Duration::ZERO), ttr, 1)
        .await
        .unwrap();
    let r = q.pop("x", Duration::ZERO).await.unwrap().unwrap();
    w.until_redis_ms(past_deadlines(&[r])).await;
    assert_eq!(q.requeue_expired("x").await.unwrap().dead, 1);
    assert_eq!(q.get(&dead).await.unwrap().state, TaskState::Dead);
    q.delete(&dead).await.unwrap();
    assert!(q.dead_letters("x", 10).await.unwrap().is_empty());
    assert_gone_for_good(&q, &dead, "x").await;

    // Unknown ids.
    assert!(matches!(
        q.delete("nope").await,
        Err(Error::TaskNotFound(_))
    ));
    assert!(matches!(q.get("nope").await, Err(Error::TaskNotFound(_))));
}

/// Deletes racing the firings: 300 tasks due within a few ms of each other, half of them
/// deleted right around their instant. A deleted one is never delivered; every other one is,
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delete_racing_the_firing_never_lets_the_task_become_ready() {
    let w = World::new().await;
    let _nodes = [w.queue_node("a").await, w.queue_node("b").await];
    let q = w.queue().await;
    let base = w.redis_ms().await + 1_000;
    let at = chrono::DateTime::from_timestamp_millis(base).unwrap();
    let tasks: Vec<NewTask> = (0..300)
        .map(|i| NewTask::new("race", json!(i)).at(at + chrono::Duration::milliseconds(i % 10)))
        .collect();
    let ids = q.add_many(tasks).await.unwrap();
    let doomed: Vec<&String> = ids.iter().step_by(2).collect();
    // Delete them from ~20 ms before their instant on, concurrently.
    w.until_redis_ms(base - 20).await;
    let results = join_all(doomed.iter().map(|id| q.delete(id))).await;
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");

    let mut got = Vec::new();
    while let Some(r) = q.pop("race", Duration::from_secs(3)).await.unwrap() {
        q.finish(&r.id, &r.token).await.unwrap();
        got.push(r.id);
    }
    got.sort();
    let mut kept: Vec<String> = ids.iter().skip(1).step_by(2).cloned().collect();
    kept.sort();
    assert_eq!(got, kept, "exactly the tasks not deleted, once each");
    for id in doomed {
        assert_eq!(q.get(id).await.unwrap().state, TaskState::Deleted);
    }
}

/// Deleted and done records are dropped after the retention: memory stays bounded.
#[tokio::test]
async fn records_go_after_the_retention() {
    let w = World::new().await;
    let q = w.queue().await.with_retention(Duration::from_millis(300));
    let id = add_ready(&q, Duration::from_secs(5), 1).await;
    q.delete(&id).await.unwrap();
    assert_eq!(q.get(&id).await.unwrap().state, TaskState::Deleted);
    wait::until(
        "the record to go after its retention",
        Duration::from_secs(5),
        || async { matches!(q.get(&id).await, Err(Error::TaskNotFound(_))) },
    )
    .await;

    let q = q.with_retention(Duration::ZERO);
    let id = add_ready(&q, Duration::from_secs(5), 1).await;
    let r = q.pop("t", Duration::ZERO).await.unwrap().unwrap();
    q.finish(&id, &r.token).await.unwrap();
    assert!(matches!(q.get(&id).await, Err(Error::TaskNotFound(_))));
}
