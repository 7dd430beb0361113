//! A paused topic: pops (blocking and polling, waiting across the pause too) reserve nothing,
//! adds are accepted, delayed tasks still become ready, reservations handed out before can be
//! touched and finished; the resume delivers what is ready, in order.

use std::time::{Duration, Instant};

use keyfire::queue::{Queue, TaskState};
use keyfire_testkit::wait;
use keyfire_testkit::world::World;
use serde_json::json;

async fn add(q: &Queue, topic: &str, id: &str, delay: Duration) {
    q.add_task(
        keyfire::queue::NewTask::new(topic, json!(id))
            .id(id)
            .delay(delay)
            .ttr(Duration::from_secs(30)),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_topic_delivers_nothing_until_resumed_then_in_order() {
    let w = World::new().await;
    let _node = w.queue_node("n1").await;
    let q = w.queue().await;
    let polling = w.client().await.queue();
    for id in ["a", "b"] {
        add(&q, "p", id, Duration::ZERO).await;
    }
    let held = q.pop("p", Duration::from_secs(2)).await.unwrap().unwrap();
    assert_eq!(held.id, "a");

    assert!(q.pause("p").await.unwrap());
    assert!(!q.pause("p").await.unwrap(), "paused already");
    assert!(q.is_paused("p").await.unwrap());
    assert!(q.topics().await.unwrap()[0].paused);
    assert_eq!(q.topic_stats(&["p".into()]).await.unwrap()[0].paused, 1);

    // Pops give nothing for their whole wait, blocking or polling, though "b" is ready.
    for (label, queue) in [("blocking", &q), ("polling", &polling)] {
        let t = Instant::now();
        let got = queue
            .pop_many("p", 10, Duration::from_millis(400))
            .await
            .unwrap();
        assert!(got.is_empty(), "{label}: a paused topic delivered {got:?}");
        assert!(
            t.elapsed() >= Duration::from_millis(400),
            "{label}: returned after {:?}, before its wait",
            t.elapsed()
        );
    }
    assert!(q.pop("p", Duration::ZERO).await.unwrap().is_none());

    // Adds are accepted; a delayed task still becomes ready.
    add(&q, "p", "c", Duration::ZERO).await;
    add(&q, "p", "d", Duration::from_millis(300)).await;
    wait::until(
        "the delayed task to become ready",
        Duration::from_secs(10),
        || async { q.get_in("p", "d").await.unwrap().state == TaskState::Ready },
    )
    .await;
    assert!(q.pop("p", Duration::ZERO).await.unwrap().is_none());
    let c = q.topics().await.unwrap();
    assert_eq!((c[0].ready, c[0].reserved, c[0].delayed), (3, 1, 0));

    // The reservation handed out before the pause is still the consumer's.
    q.touch(&held.id, &held.token, Some(Duration::from_secs(40)))
        .await
        .unwrap();
    q.finish(&held.id, &held.token).await.unwrap();
    assert_eq!(q.get_in("p", "a").await.unwrap().state, TaskState::Done);

    assert!(q.resume("p").await.unwrap());
    assert!(!q.resume("p").await.unwrap(), "not paused any more");
    assert!(!q.is_paused("p").await.unwrap());
    assert!(!q.topics().await.unwrap()[0].paused);
    let got = q.pop_many("p", 10, Duration::from_secs(2)).await.unwrap();
    let order: Vec<&str> = got.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(order, ["b", "c", "d"], "the order they became ready");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pop_waiting_across_the_pause_gets_nothing_until_the_resume() {
    let w = World::new().await;
    let q = w.queue().await;
    add(&q, "x", "first", Duration::ZERO).await;
    q.pop("x", Duration::ZERO).await.unwrap().unwrap();

    // A pop waits on the empty topic; the topic is paused under it, and a task is added.
    let popper = q.clone();
    let pop = tokio::spawn(async move {
        let t = Instant::now();
        (popper.pop("x", Duration::from_secs(20)).await, t)
    });
    wait::until("the pop to block", Duration::from_secs(10), || async {
        w.blocked_clients().await >= 1
    })
    .await;
    q.pause("x").await.unwrap();
    add(&q, "x", "second", Duration::ZERO).await;
    // The add woke the pop: it found the topic paused and waits again.
    wait::until(
        "the pop to block again",
        Duration::from_secs(10),
        || async {
            w.blocked_clients().await >= 1
                && q.get_in("x", "second").await.unwrap().state == TaskState::Ready
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!pop.is_finished(), "a pop delivered from a paused topic");
    assert_eq!(
        q.get_in("x", "second").await.unwrap().state,
        TaskState::Ready
    );

    let resumed = Instant::now();
    q.resume("x").await.unwrap();
    let (got, _) = pop.await.unwrap();
    let got = got.unwrap().expect("the task, once resumed");
    assert_eq!(got.id, "second");
    assert!(
        resumed.elapsed() < Duration::from_secs(5),
        "the resume woke the waiting pop after {:?}",
        resumed.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pause_holds_on_every_partition() {
    let w = World::new().await;
    let q = w.queue().await;
    q.set_partitions("wide", 4).await.unwrap();
    for i in 0..12 {
        add(&q, "wide", &format!("t{i}"), Duration::ZERO).await;
    }
    q.pause("wide").await.unwrap();
    assert!(
        q.pop_many("wide", 100, Duration::from_millis(200))
            .await
            .unwrap()
            .is_empty()
    );
    q.resume("wide").await.unwrap();
    let mut got = Vec::new();
    for _ in 0..20 {
        got.extend(
            q.pop_many("wide", 100, Duration::from_millis(200))
                .await
                .unwrap(),
        );
        if got.len() >= 12 {
            break;
        }
    }
    assert_eq!(got.len(), 12);
}
