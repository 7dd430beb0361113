//! Bad input is refused with an error naming the field, and writes nothing.

use std::time::Duration;

use keyfire::Error;
use keyfire::queue::{NewTask, When};
use keyfire_testkit::world::World;
use serde_json::json;

use crate::add_ready;

fn field<T: std::fmt::Debug>(r: keyfire::Result<T>) -> String {
    match r {
        Err(Error::Invalid(v)) => v.field,
        other => panic!("expected a validation error, got {other:?}"),
    }
}

#[tokio::test]
async fn bad_input_is_refused_naming_the_field() {
    let w = World::new().await;
    let q = w.queue().await.with_max_payload_bytes(100);
    let now = When::Delay(Duration::ZERO);
    let ttr = Duration::from_secs(1);
    assert_eq!(field(q.add("a b", json!(1), now, ttr, 1).await), "topic");
    assert_eq!(field(q.add("a:b", json!(1), now, ttr, 1).await), "topic");
    assert_eq!(field(q.add("", json!(1), now, ttr, 1).await), "topic");
    assert_eq!(
        field(q.add(&"t".repeat(129), json!(1), now, ttr, 1).await),
        "topic"
    );
    assert_eq!(
        field(q.add("t", json!(1), now, Duration::ZERO, 1).await),
        "ttr"
    );
    assert_eq!(
        field(q.add("t", json!(1), now, ttr, 0).await),
        "max_deliveries"
    );
    assert_eq!(
        field(q.add("t", json!(1), now, ttr, 1_001).await),
        "max_deliveries"
    );
    assert_eq!(
        field(q.add("t", json!("x".repeat(200)), now, ttr, 1).await),
        "payload"
    );
    assert_eq!(
        field(q.add_task(NewTask::new("t", json!(1)).id("no/slash")).await),
        "id"
    );
    assert_eq!(field(q.pop("bad topic", Duration::ZERO).await), "topic");
    assert_eq!(field(q.get("a:b").await), "id");
    assert_eq!(field(q.finish("", "token").await), "id");
    assert_eq!(field(q.touch("x", "t", Some(Duration::ZERO)).await), "ttr");
    assert_eq!(field(q.delete("semi;colon").await), "id");
    assert_eq!(field(q.requeue_expired("{tag}").await), "topic");
    // Pops: max 1 to 1000, wait at most 60 s.
    assert_eq!(field(q.pop_many("t", 0, Duration::ZERO).await), "max");
    assert_eq!(field(q.pop_many("t", 1_001, Duration::ZERO).await), "max");
    assert_eq!(
        field(q.pop_many("t", 1, Duration::from_secs(61)).await),
        "wait"
    );
    // A batch finish is checked whole first: nothing is finished when one pair is bad.
    let token = format!("{}.t", "a".repeat(32));
    let pair = |id: &str, token: &str| (id.to_string(), token.to_string());
    assert_eq!(field(q.finish_many(&[]).await), "tasks");
    assert_eq!(
        field(
            q.finish_many(&[pair("x", &token), pair("y", "forged")])
                .await
        ),
        "tasks[1].token"
    );
    assert_eq!(
        field(
            q.finish_many(&[pair("x", &format!("{}.t", "g".repeat(32)))])
                .await
        ),
        "tasks[0].token"
    );
    assert_eq!(
        field(q.finish_many(&[pair("a:b", &token)]).await),
        "tasks[0].id"
    );
    let many: Vec<_> = (0..1_001).map(|i| pair(&format!("t{i}"), &token)).collect();
    assert_eq!(field(q.finish_many(&many).await), "tasks");
    // A batch names the bad task, and writes none of them.
    let batch = vec![
        NewTask::new("t", json!(1)),
        NewTask::new("t", json!(2)).ttr(Duration::ZERO),
    ];
    assert_eq!(field(q.add_many(batch).await), "tasks[1].ttr");
    assert!(q.topics().await.unwrap().is_empty(), "nothing written");
}

/// A delayed task needs a node serving `topic`: without one the add is refused and leaves
/// nothing behind; a task due at once needs none.
#[tokio::test]
async fn a_delayed_add_without_a_topic_node_is_refused() {
    let w = World::new().await;
    let q = w.queue().await;
    let err = q
        .add_task(
            NewTask::new("t", json!(1))
                .id("later")
                .delay(Duration::from_secs(1)),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Setup(_)), "{err}");
    assert!(err.to_string().contains("topic"), "{err}");
    assert!(matches!(q.get("later").await, Err(Error::TaskNotFound(_))));
    assert!(q.topics().await.unwrap().is_empty(), "nothing written");
    // Due now: no node needed.
    let id = add_ready(&q, Duration::from_secs(1), 1).await;
    assert_eq!(q.pop("t", Duration::ZERO).await.unwrap().unwrap().id, id);
}

/// An add is idempotent by id: adding the same id again leaves the task as it is.
#[tokio::test]
async fn adding_an_existing_id_changes_nothing() {
    let w = World::new().await;
    let q = w.queue().await;
    let t = NewTask::new("t", json!("first")).id("order-1");
    assert_eq!(q.add_task(t.clone()).await.unwrap(), "order-1");
    let again = NewTask::new("t", json!("second")).id("order-1");
    assert_eq!(q.add_task(again).await.unwrap(), "order-1");
    let ids = q.add_many(vec![t.clone(), t]).await.unwrap();
    assert_eq!(ids, ["order-1", "order-1"]);
    assert_eq!(
        q.get("order-1").await.unwrap().payload,
        Some(json!("first"))
    );
    assert_eq!(q.topics().await.unwrap()[0].ready, 1);
}
