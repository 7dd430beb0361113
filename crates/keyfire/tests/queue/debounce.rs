//! Topic tasks with a dedup key: a duplicate keeps, replaces or extends the pending task the key
//! names, atomically however many add at once; once that task was popped a duplicate adds a new
//! one; bad declarations are refused by name and write nothing.

use std::time::Duration;

use chrono::Utc;
use keyfire::Error;
use keyfire::job::{DedupSpec, Deduplicated, OnDuplicate};
use keyfire::queue::{NewTask, TaskState};
use keyfire_testkit::world::World;
use serde_json::json;

fn dedup(on: OnDuplicate) -> DedupSpec {
    DedupSpec::key("digest:u1", "1h").with_on_duplicate(on)
}

#[tokio::test]
async fn concurrent_replaces_leave_one_task_with_a_duplicates_payload() {
    let w = World::new().await;
    let _node = w.queue_node("n1").await;
    let q = w.queue().await;
    let adds = (0..40).map(|i| {
        let q = q.clone();
        tokio::spawn(async move {
            q.add_task_outcome(
                NewTask::new("digest", json!({"i": i}))
                    .delay(Duration::from_secs(600))
                    .dedup(dedup(OnDuplicate::Replace)),
                None,
            )
            .await
            .unwrap()
        })
    });
    let outcomes: Vec<_> = futures::future::join_all(adds)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let created: Vec<_> = outcomes
        .iter()
        .filter(|o| o.deduplicated.is_none())
        .collect();
    assert_eq!(created.len(), 1, "{outcomes:?}");
    let id = created[0].id.clone();
    assert!(
        outcomes
            .iter()
            .all(|o| o.id == id && o.deduplicated.is_none_or(|d| d == Deduplicated::Replaced)),
        "{outcomes:?}"
    );
    let c = &q.topics().await.unwrap()[0];
    assert_eq!((c.delayed, c.ready), (1, 0), "one task: {c:?}");
    let held = q.get(&id).await.unwrap().payload.unwrap();
    assert!((0..40).any(|i| held == json!({"i": i})), "{held}");
    // The last duplicate's payload is the one held.
    let last = q
        .add_task_outcome(
            NewTask::new("digest", json!({"i": "last"}))
                .delay(Duration::from_secs(600))
                .priority(4)
                .dedup(dedup(OnDuplicate::Replace)),
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        (last.id.as_str(), last.deduplicated),
        (id.as_str(), Some(Deduplicated::Replaced))
    );
    let info = q.get(&id).await.unwrap();
    assert_eq!(info.payload, Some(json!({"i": "last"})));
    assert_eq!(info.priority, 4);
}

#[tokio::test]
async fn concurrent_extends_leave_one_task_due_at_the_latest_instant() {
    let w = World::new().await;
    let _node = w.queue_node("n1").await;
    let q = w.queue().await;
    let t0 = Utc::now() + chrono::Duration::minutes(10);
    // Instants in a scrambled order: the latest wins whatever order the adds run in.
    let secs: Vec<i64> = (0..40).map(|i| (i * 17) % 40).collect();
    let adds = secs.iter().map(|&s| {
        let q = q.clone();
        tokio::spawn(async move {
            q.add_task_outcome(
                NewTask::new("digest", json!({"s": s}))
                    .at(t0 + chrono::Duration::seconds(s))
                    .dedup(dedup(OnDuplicate::Extend)),
                None,
            )
            .await
            .unwrap()
        })
    });
    let outcomes: Vec<_> = futures::future::join_all(adds)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        outcomes.iter().filter(|o| o.deduplicated.is_none()).count(),
        1
    );
    let id = outcomes[0].id.clone();
    assert!(outcomes.iter().all(|o| o.id == id), "{outcomes:?}");
    let info = q.get(&id).await.unwrap();
    assert_eq!(
        info.due_at.timestamp_millis(),
        (t0 + chrono::Duration::seconds(39)).timestamp_millis()
    );
    let c = &q.topics().await.unwrap()[0];
    assert_eq!(c.delayed, 1, "{c:?}");
    // An earlier instant does not bring it forward: kept.
    let earlier = q
        .add_task_outcome(
            NewTask::new("digest", json!({"s": -1}))
                .at(t0)
                .dedup(dedup(OnDuplicate::Extend)),
            None,
        )
        .await
        .unwrap();
    assert_eq!(earlier.deduplicated, Some(Deduplicated::Kept));
    assert_eq!(q.get(&id).await.unwrap().due_at, info.due_at);
    // Extend leaves the payload; replace_extend changes both.
    assert_eq!(q.get(&id).await.unwrap().payload, info.payload);
    let both = q
        .add_task_outcome(
            NewTask::new("digest", json!({"s": "both"}))
                .at(t0 + chrono::Duration::seconds(60))
                .dedup(dedup(OnDuplicate::ReplaceExtend)),
            None,
        )
        .await
        .unwrap();
    assert_eq!(both.deduplicated, Some(Deduplicated::ReplacedExtended));
    let info = q.get(&id).await.unwrap();
    assert_eq!(info.payload, Some(json!({"s": "both"})));
    assert_eq!(
        info.due_at.timestamp_millis(),
        (t0 + chrono::Duration::seconds(60)).timestamp_millis()
    );
}

#[tokio::test]
async fn a_duplicate_after_the_pop_adds_a_new_task() {
    let w = World::new().await;
    let q = w.queue().await;
    let add = |on: OnDuplicate, v: i64| {
        let q = q.clone();
        async move {
            q.add_task_outcome(NewTask::new("t", json!(v)).dedup(dedup(on)), None)
                .await
                .unwrap()
        }
    };
    let first = add(OnDuplicate::Replace, 1).await;
    assert_eq!(first.deduplicated, None);
    // Ready, not popped yet: replaced in place.
    let dup = add(OnDuplicate::Replace, 2).await;
    assert_eq!(
        (dup.id.clone(), dup.deduplicated),
        (first.id.clone(), Some(Deduplicated::Replaced))
    );
    let popped = q.pop("t", Duration::ZERO).await.unwrap().unwrap();
    assert_eq!(
        (popped.id.clone(), popped.payload),
        (first.id.clone(), json!(2))
    );
    // `keep` still names the popped task within the window, as for one-shot tasks.
    let kept = add(OnDuplicate::Keep, 3).await;
    assert_eq!(
        (kept.id.clone(), kept.deduplicated),
        (first.id.clone(), Some(Deduplicated::Kept))
    );
    // `replace` and `extend` act only on a pending task: a new one, which the key names now.
    let new = add(OnDuplicate::Extend, 4).await;
    assert_eq!(new.deduplicated, None);
    assert_ne!(new.id, first.id);
    assert_eq!(q.get(&first.id).await.unwrap().state, TaskState::Reserved);
    let again = add(OnDuplicate::Replace, 5).await;
    assert_eq!(
        (again.id, again.deduplicated),
        (new.id.clone(), Some(Deduplicated::Replaced))
    );
    let next = q.pop("t", Duration::ZERO).await.unwrap().unwrap();
    assert_eq!((next.id, next.payload), (new.id, json!(5)));
}

#[tokio::test]
async fn an_extended_ready_task_waits_again() {
    let w = World::new().await;
    let _node = w.queue_node("n1").await;
    let q = w.queue().await;
    let on = OnDuplicate::Extend;
    let first = q
        .add_task_outcome(NewTask::new("e", json!(1)).dedup(dedup(on)), None)
        .await
        .unwrap();
    assert_eq!(q.get(&first.id).await.unwrap().state, TaskState::Ready);
    let dup = q
        .add_task_outcome(
            NewTask::new("e", json!(2))
                .delay(Duration::from_millis(500))
                .dedup(dedup(on)),
            None,
        )
        .await
        .unwrap();
    assert_eq!(dup.deduplicated, Some(Deduplicated::Extended));
    assert_eq!(q.get(&first.id).await.unwrap().state, TaskState::Delayed);
    assert!(
        q.pop("e", Duration::ZERO).await.unwrap().is_none(),
        "not ready now"
    );
    let popped = q.pop("e", Duration::from_secs(10)).await.unwrap().unwrap();
    assert_eq!((popped.id, popped.payload), (first.id, json!(1)));
}

#[tokio::test]
async fn bad_dedup_declarations_are_refused_by_name_and_write_nothing() {
    let w = World::new().await;
    let q = w.queue().await;
    let before = w.keys().await;
    let field = |r: keyfire::Result<keyfire::queue::TaskAdded>| match r {
        Err(Error::Invalid(v)) => v.field,
        other => panic!("expected a validation error, got {other:?}"),
    };
    let mut bad = DedupSpec::key("k", "1m");
    bad.on_duplicate = Some("merge".into());
    let t = NewTask::new("t", json!(1));
    assert_eq!(
        field(q.add_task_outcome(t.clone().dedup(bad), None).await),
        "dedup.on_duplicate"
    );
    assert_eq!(
        field(
            q.add_task_outcome(t.clone().dedup(DedupSpec::key("k", "0s")), None)
                .await
        ),
        "dedup.window"
    );
    assert_eq!(
        field(
            q.add_task_outcome(t.clone().id("mine").dedup(DedupSpec::key("k", "1m")), None)
                .await
        ),
        "id"
    );
    assert_eq!(w.keys().await, before);
}
