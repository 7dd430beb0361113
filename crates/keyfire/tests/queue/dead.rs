//! A topic's dead letters: listed with why and when they died and their deliveries, replayed
//! (by id and all) and then consumed by pops, purged; bad ids refused naming them, changing
//! nothing.

use std::time::Duration;

use keyfire::Error;
use keyfire::queue::{Queue, Reserved, TaskState, When};
use keyfire_testkit::world::World;
use redis::AsyncCommands;
use serde_json::json;

use crate::past_deadlines;

/// Add `n` ready tasks to `topic` (payloads 0..n, ttr 300 ms, one delivery each), pop them all
/// and let their reservations lapse: they are dead letters. Their ids, in the order added.
async fn kill(w: &World, q: &Queue, topic: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let id = q
            .add(
                topic,
                json!(i),
                When::Delay(Duration::ZERO),
                Duration::from_millis(300),
                1,
            )
            .await
            .unwrap();
        ids.push(id);
    }
    let popped: Vec<Reserved> = q.pop_many(topic, n, Duration::from_secs(2)).await.unwrap();
    assert_eq!(popped.len(), n);
    w.until_redis_ms(past_deadlines(&popped)).await;
    assert_eq!(q.requeue_expired(topic).await.unwrap().dead, n as u64);
    ids
}

fn field<T: std::fmt::Debug>(r: keyfire::Result<T>) -> String {
    match r {
        Err(Error::Invalid(v)) => v.field,
        other => panic!("expected a validation error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dead_letters_show_why_when_and_how_often() {
    let w = World::new().await;
    let q = w.queue().await;
    let t0 = w.redis_ms().await;
    let ids = kill(&w, &q, "d", 3).await;
    let dead = q.dead_letters("d", 10).await.unwrap();
    assert_eq!(dead.len(), 3);
    let mut got: Vec<&str> = dead.iter().map(|d| d.id.as_str()).collect();
    got.sort();
    let mut want: Vec<&str> = ids.iter().map(String::as_str).collect();
    want.sort();
    assert_eq!(got, want);
    for d in &dead {
        assert_eq!(d.state, TaskState::Dead);
        assert_eq!((d.deliveries, d.max_deliveries), (1, 1));
        let died = d.finished_at.expect("when it died").timestamp_millis();
        assert!(died >= t0, "died at {died}, before the test began at {t0}");
        let error = d.last_error.as_deref().expect("why it died");
        assert!(
            error.contains("delivery 1 of 1") && error.contains("expired"),
            "{error}"
        );
        assert!(d.payload.is_some(), "a dead letter keeps its payload");
    }
    assert_eq!(q.dead_letters("d", 2).await.unwrap().len(), 2, "the limit");
    assert!(q.dead_letters("d", 0).await.unwrap().is_empty());
    // `get` shows the same.
    let one = q.get_in("d", &ids[0]).await.unwrap();
    assert!(one.last_error.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replayed_dead_letters_are_ready_again_and_consumed() {
    let w = World::new().await;
    let q = w.queue().await;
    let ids = kill(&w, &q, "r", 3).await;

    // By id: only that one; ids that are no dead letters of the topic are passed over.
    let n = q
        .replay_dead("r", Some(&[ids[1].clone(), "nosuch".into()]))
        .await
        .unwrap();
    assert_eq!(n, 1);
    let t = q.get_in("r", &ids[1]).await.unwrap();
    assert_eq!(t.state, TaskState::Ready);
    assert_eq!(t.deliveries, 0, "a replay resets the deliveries");
    assert_eq!((t.finished_at, t.last_error), (None, None));
    // Its record no longer expires with the dead-letter retention.
    let k = q.store().keys().clone();
    let ttl: i64 = w.conn().await.pttl(k.qtask(&ids[1])).await.unwrap();
    assert_eq!(ttl, -1, "a replayed task's record must not expire");
    assert_eq!(q.dead_letters("r", 10).await.unwrap().len(), 2);
    let c = q.topics().await.unwrap();
    assert_eq!((c[0].dead, c[0].ready, c[0].replayed), (2, 1, 1));

    let again = q.pop("r", Duration::from_secs(2)).await.unwrap().unwrap();
    assert_eq!((again.id.as_str(), again.deliveries), (ids[1].as_str(), 1));
    assert_eq!(again.payload, json!(1));
    q.finish(&again.id, &again.token).await.unwrap();
    // Replaying it again finds no dead letter.
    assert_eq!(
        q.replay_dead("r", Some(&[ids[1].clone()])).await.unwrap(),
        0
    );

    // All: both left, then consumed.
    assert_eq!(q.replay_dead("r", None).await.unwrap(), 2);
    assert!(q.dead_letters("r", 10).await.unwrap().is_empty());
    let rest = q.pop_many("r", 10, Duration::from_secs(2)).await.unwrap();
    let mut got: Vec<&str> = rest.iter().map(|r| r.id.as_str()).collect();
    got.sort();
    let mut want = vec![ids[0].as_str(), ids[2].as_str()];
    want.sort();
    assert_eq!(got, want);
    assert!(rest.iter().all(|r| r.deliveries == 1));
    let c = q.topics().await.unwrap();
    assert_eq!((c[0].dead, c[0].ready, c[0].replayed), (0, 0, 3));
    assert_eq!(q.replay_dead("r", None).await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiting_pop_is_woken_by_a_replay() {
    let w = World::new().await;
    let q = w.queue().await;
    let ids = kill(&w, &q, "wake", 1).await;
    let popper = q.clone();
    let pop = tokio::spawn(async move { popper.pop("wake", Duration::from_secs(20)).await });
    keyfire_testkit::wait::until("the pop to block", Duration::from_secs(10), || async {
        w.blocked_clients().await >= 1
    })
    .await;
    let t = std::time::Instant::now();
    assert_eq!(q.replay_dead("wake", None).await.unwrap(), 1);
    let r = pop.await.unwrap().unwrap().expect("the replayed task");
    assert_eq!(r.id, ids[0]);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "woken after {:?}",
        t.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn purged_dead_letters_are_gone() {
    let w = World::new().await;
    let q = w.queue().await;
    let ids = kill(&w, &q, "p", 3).await;
    assert_eq!(q.purge_dead("p", Some(&[ids[0].clone()])).await.unwrap(), 1);
    assert_eq!(
        q.get_in("p", &ids[0]).await.unwrap().state,
        TaskState::Deleted
    );
    assert_eq!(q.dead_letters("p", 10).await.unwrap().len(), 2);
    assert_eq!(q.purge_dead("p", None).await.unwrap(), 2);
    assert!(q.dead_letters("p", 10).await.unwrap().is_empty());
    let c = q.topics().await.unwrap();
    // Dead letters purged are not counted as deleted again: they were counted when they died.
    assert_eq!(
        (c[0].dead, c[0].deleted, c[0].ready, c[0].added),
        (0, 0, 0, 3)
    );
    // Nothing of them is delivered, and a replay finds none.
    assert_eq!(q.replay_dead("p", None).await.unwrap(), 0);
    assert!(q.pop("p", Duration::ZERO).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_ids_are_refused_naming_them_and_change_nothing() {
    let w = World::new().await;
    let q = w.queue().await;
    let ids = kill(&w, &q, "b", 2).await;
    let bad = vec![ids[0].clone(), "not an id".to_string()];
    assert_eq!(field(q.replay_dead("b", Some(&bad)).await), "ids[1]");
    assert_eq!(field(q.purge_dead("b", Some(&bad)).await), "ids[1]");
    assert_eq!(field(q.replay_dead("b", Some(&[])).await), "ids");
    let many: Vec<String> = (0..1_001).map(|i| format!("t{i}")).collect();
    assert_eq!(field(q.purge_dead("b", Some(&many)).await), "ids");
    assert_eq!(field(q.replay_dead("{b}", None).await), "topic");
    assert_eq!(field(q.dead_letters("bad topic", 10).await), "topic");
    // Nothing changed: both are still dead letters.
    assert_eq!(q.dead_letters("b", 10).await.unwrap().len(), 2);
    assert_eq!(q.get_in("b", &ids[0]).await.unwrap().state, TaskState::Dead);
    assert!(q.has_topic("b").await.unwrap());
    assert!(!q.has_topic("never").await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dead_letters_of_every_partition_are_listed_and_replayed() {
    let w = World::new().await;
    let q = w.queue().await;
    q.set_partitions("parts", 4).await.unwrap();
    let ids = kill(&w, &q, "parts", 12).await;
    assert_eq!(q.dead_letters("parts", 100).await.unwrap().len(), 12);
    assert_eq!(q.replay_dead("parts", Some(&ids[..3])).await.unwrap(), 3);
    assert_eq!(q.replay_dead("parts", None).await.unwrap(), 9);
    let mut got = Vec::new();
    for _ in 0..20 {
        got.extend(
            q.pop_many("parts", 12, Duration::from_millis(200))
                .await
                .unwrap(),
        );
        if got.len() >= 12 {
            break;
        }
    }
    assert_eq!(got.len(), 12);
}
