//! A topic's counters: tasks added are counted once whatever became of them, and a topic that
//! holds only delayed tasks keeps no stats hash (its cost in Redis is its sets alone).

use std::time::Duration;

use keyfire::queue::When;
use keyfire_testkit::wait;
use keyfire_testkit::world::World;

use crate::counts;
use serde_json::json;

async fn stats_keys(w: &World) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("*:q:stats:*")
        .query_async(&mut w.conn().await)
        .await
        .unwrap();
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tasks_added_are_counted_once_whatever_became_of_them() {
    let w = World::new().await;
    let _node = w.queue_node("a").await;
    let q = w.queue().await;
    let later = When::Delay(Duration::from_secs(3_600));
    let ttr = Duration::from_millis(300);

    // Delayed only: counted as added, and no stats hash written for it.
    for _ in 0..2 {
        q.add("c", json!(1), later, ttr, 1).await.unwrap();
    }
    let c = counts(&q, "c").await;
    assert_eq!((c.added, c.delayed), (2, 2), "{c:?}");
    assert_eq!(stats_keys(&w).await, Vec::<String>::new());

    // Three ready: one finished, one left to die (one delivery), one deleted while ready.
    let now = When::Delay(Duration::ZERO);
    let done = q.add("c", json!(2), now, ttr, 1).await.unwrap();
    let dies = q.add("c", json!(3), now, ttr, 1).await.unwrap();
    let gone = q.add("c", json!(4), now, ttr, 1).await.unwrap();
    q.delete(&gone).await.unwrap();
    let mut popped = Vec::new();
    while popped.len() < 2 {
        let r = q
            .pop("c", Duration::from_secs(5))
            .await
            .unwrap()
            .expect("a ready task");
        popped.push(r);
    }
    let r = popped.iter().find(|r| r.id == done).expect("popped");
    q.finish(&r.id, &r.token).await.unwrap();
    assert!(popped.iter().any(|r| r.id == dies));
    // Its reservation lapses: with one delivery allowed it becomes a dead letter.
    let c = wait::until(
        "the unfinished task dead",
        Duration::from_secs(10),
        async || {
            let c = counts(&q, "c").await;
            if c.dead == 1 {
                Ok(c)
            } else {
                Err(format!("{c:?}"))
            }
        },
    )
    .await;
    assert_eq!(
        (c.added, c.delayed, c.ready, c.reserved, c.done, c.deleted),
        (5, 2, 0, 0, 1, 1),
        "{c:?}"
    );

    // Deleting the dead letter and the finished record counts no task again.
    q.delete(&dies).await.unwrap();
    q.delete(&done).await.unwrap();
    let c = counts(&q, "c").await;
    assert_eq!((c.added, c.deleted, c.dead), (5, 1, 0), "{c:?}");
}
