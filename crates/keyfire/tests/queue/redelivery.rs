//! A reservation not finished within its ttr goes to another consumer; the late
//! finish is refused; after max deliveries the task is a dead letter.

use std::time::Duration;

use keyfire::Error;
use keyfire::queue::{TaskState, When};
use keyfire_testkit::wait;
use keyfire_testkit::world::World;
use serde_json::json;

use crate::{add_ready, past_deadlines};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unfinished_reservations_are_redelivered_then_dead_lettered() {
    let w = World::new().await;
    let (a, b, c) = (w.queue().await, w.queue().await, w.client().await.queue());
    let ttr = Duration::from_millis(600);
    let id = a
        .add(
            "jobs",
            json!({"order": 7}),
            When::Delay(Duration::ZERO),
            ttr,
            3,
        )
        .await
        .unwrap();

    // Consumer A pops and never finishes.
    let first = a
        .pop("jobs", Duration::from_secs(1))
        .await
        .unwrap()
        .expect("first pop");
    assert_eq!((first.id.as_str(), first.deliveries), (id.as_str(), 1));
    assert_eq!(first.payload, json!({"order": 7}));
    assert_eq!(
        first.deadline - first.reserved_at,
        chrono::Duration::milliseconds(600)
    );
    assert_eq!(a.get(&id).await.unwrap().state, TaskState::Reserved);
    // Nothing else to take meanwhile.
    assert!(c.pop("jobs", Duration::ZERO).await.unwrap().is_none());

    // Consumer B is waiting when the reservation expires: it gets the task, by Redis's clock
    // not before A's deadline, and wakes for it at once.
    let second = b
        .pop("jobs", Duration::from_secs(5))
        .await
        .unwrap()
        .expect("redelivery");
    assert_eq!((second.id.as_str(), second.deliveries), (id.as_str(), 2));
    assert!(
        second.reserved_at >= first.deadline,
        "{second:?} vs {first:?}"
    );
    let late = (second.reserved_at - first.deadline).num_milliseconds();
    eprintln!("acceptance-2: redelivered {late} ms after the deadline");
    assert!(late < 500, "redelivered {late} ms after the deadline");
    assert_ne!(first.token, second.token);

    // A's late finish and touch are refused: the task is B's now.
    assert!(matches!(
        a.finish(&id, &first.token).await,
        Err(Error::ReservationLost(_))
    ));
    assert!(matches!(
        a.touch(&id, &first.token, None).await,
        Err(Error::ReservationLost(_))
    ));
    assert_eq!(a.get(&id).await.unwrap().state, TaskState::Reserved);

    // B touches (extends) but never finishes; C gets the third and last delivery.
    let deadline = b
        .touch(&id, &second.token, Some(Duration::from_millis(900)))
        .await
        .unwrap();
    assert!(deadline > second.deadline);
    let third = c
        .pop("jobs", Duration::from_secs(5))
        .await
        .unwrap()
        .expect("third delivery");
    assert_eq!(third.deliveries, 3);
    assert!(third.reserved_at >= deadline, "touch moved the deadline");

    // After its last ttr the task is a dead letter, not ready again.
    assert!(
        a.pop("jobs", Duration::from_millis(1_200))
            .await
            .unwrap()
            .is_none()
    );
    let t = a.get(&id).await.unwrap();
    assert_eq!(
        (t.state, t.deliveries, t.max_deliveries),
        (TaskState::Dead, 3, 3)
    );
    assert_eq!(
        t.payload,
        Some(json!({"order": 7})),
        "a dead letter keeps its payload"
    );
    let dead = a.dead_letters("jobs", 10).await.unwrap();
    assert_eq!(
        dead.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        [id.as_str()]
    );
    assert!(matches!(
        c.finish(&id, &third.token).await,
        Err(Error::ReservationLost(_))
    ));
    let counts = a.topics().await.unwrap();
    assert_eq!(
        (
            counts[0].dead,
            counts[0].redelivered,
            counts[0].delivered,
            counts[0].ready
        ),
        (1, 2, 3, 0)
    );
}

#[tokio::test]
async fn a_finish_in_time_wins_over_a_late_one() {
    let w = World::new().await;
    let q = w.queue().await.with_retention(Duration::from_millis(800));
    let ttr = Duration::from_millis(300);
    let id = q
        .add("t", json!(1), When::Delay(Duration::ZERO), ttr, 5)
        .await
        .unwrap();
    let first = q.pop("t", Duration::ZERO).await.unwrap().unwrap();
    w.until_redis_ms(past_deadlines(std::slice::from_ref(&first)))
        .await;
    // Expired, but not yet handed on: requeue_expired takes it back.
    let r = q.requeue_expired("t").await.unwrap();
    assert_eq!((r.requeued, r.dead), (1, 0));
    assert_eq!(q.get(&id).await.unwrap().state, TaskState::Ready);
    let second = q.pop("t", Duration::ZERO).await.unwrap().unwrap();
    q.finish(&id, &second.token).await.unwrap();
    // Retried with the same token: still fine. The first consumer: refused.
    q.finish(&id, &second.token).await.unwrap();
    assert!(matches!(
        q.finish(&id, &first.token).await,
        Err(Error::ReservationLost(_))
    ));
    assert!(matches!(
        q.finish(&id, "forged").await,
        Err(Error::ReservationLost(_))
    ));
    let t = q.get(&id).await.unwrap();
    assert_eq!((t.state, t.deliveries), (TaskState::Done, 2));
    assert!(t.finished_at.is_some());
    // The done record goes after the retention.
    wait::until("the done record to go", Duration::from_secs(5), || async {
        matches!(q.get(&id).await, Err(Error::TaskNotFound(_)))
    })
    .await;
}

/// A consumer that holds a task past its deadline, but nobody took it back meanwhile, may still
/// finish it: the token is what counts, not the clock.
#[tokio::test]
async fn an_expired_reservation_not_yet_taken_back_can_still_be_finished() {
    let w = World::new().await;
    let q = w.queue().await;
    let id = add_ready(&q, Duration::from_millis(100), 5).await;
    let r = q.pop("t", Duration::ZERO).await.unwrap().unwrap();
    w.until_redis_ms(past_deadlines(std::slice::from_ref(&r)) + 100)
        .await;
    q.finish(&id, &r.token).await.unwrap();
    assert!(q.pop("t", Duration::ZERO).await.unwrap().is_none());
    assert_eq!(q.get(&id).await.unwrap().state, TaskState::Done);
}
