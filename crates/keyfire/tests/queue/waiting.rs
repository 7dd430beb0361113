//! A pop on an empty topic waits up to `wait` and returns none promptly; a task
//! that becomes ready during the wait is returned at once. Measured for blocking and polling pops.

use std::time::{Duration, Instant};

use keyfire::queue::{Queue, When};
use keyfire_testkit::world::World;
use serde_json::json;

use crate::add_ready;

async fn empty_wait_is_bounded(q: &Queue, label: &str) {
    for wait in [
        Duration::ZERO,
        Duration::from_millis(300),
        Duration::from_millis(1_000),
    ] {
        let t = Instant::now();
        assert!(q.pop("empty", wait).await.unwrap().is_none());
        let took = t.elapsed();
        eprintln!("{label}: empty pop, wait {wait:?}: returned after {took:?}");
        assert!(took >= wait, "{label}: returned before its wait");
        assert!(
            took < wait + Duration::from_millis(150),
            "{label}: {took:?} for {wait:?}"
        );
    }
}

/// A pop waiting when a delayed task becomes ready returns it at once: measures the time from
/// ready (Redis time, set by the `topic` handler) to popped (Redis time, in the pop script).
async fn wakes_for_a_task(w: &World, q: &Queue, topic: &str, label: &str) -> Vec<i64> {
    let mut woke = Vec::new();
    for i in 0..20 {
        let delay = Duration::from_millis(200 + 13 * i);
        let adder = q.clone();
        let topic_owned = topic.to_string();
        let add = tokio::spawn(async move {
            adder
                .add(
                    &topic_owned,
                    json!(i),
                    When::Delay(delay),
                    Duration::from_secs(5),
                    1,
                )
                .await
                .unwrap()
        });
        let t = Instant::now();
        let r = q
            .pop(topic, Duration::from_secs(5))
            .await
            .unwrap()
            .expect("a task in time");
        assert_eq!(r.id, add.await.unwrap());
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "{label}: took {:?}",
            t.elapsed()
        );
        assert!(r.reserved_at >= r.due_at);
        woke.push((r.reserved_at - r.ready_at).num_milliseconds());
        q.finish(&r.id, &r.token).await.unwrap();
    }
    let _ = w;
    woke.sort();
    eprintln!(
        "{label}: ready→popped for a waiting pop, 20 tasks: p50={} max={} ms",
        woke[woke.len() / 2],
        woke[woke.len() - 1]
    );
    woke
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pops_wait_for_a_task_up_to_their_wait() {
    let w = World::new().await;
    let _node = w.queue_node("a").await;
    let blocking = w.queue().await;
    let polling = w.client().await.queue();
    empty_wait_is_bounded(&blocking, "blocking").await;
    empty_wait_is_bounded(&polling, "polling").await;

    let b = wakes_for_a_task(&w, &blocking, "wake-b", "blocking").await;
    let p = wakes_for_a_task(&w, &polling, "wake-p", "polling").await;
    assert!(b[b.len() - 1] <= 20, "blocking pops wake at once: {b:?}");
    assert!(
        p[p.len() - 1] <= 80,
        "polling pops wake within a poll: {p:?}"
    );
}

/// A dropped pop (an HTTP client that went away) leaves nothing behind: the next pops work and
/// no task is lost to it.
#[tokio::test]
async fn a_cancelled_pop_takes_nothing() {
    let w = World::new().await;
    let q = w.queue().await;
    let waiting = tokio::time::timeout(
        Duration::from_millis(100),
        q.pop("t", Duration::from_secs(5)),
    )
    .await;
    assert!(waiting.is_err(), "the pop was still waiting");
    let id = add_ready(&q, Duration::from_secs(5), 1).await;
    let r = q
        .pop("t", Duration::from_secs(1))
        .await
        .unwrap()
        .expect("the task");
    assert_eq!(r.id, id);
}
