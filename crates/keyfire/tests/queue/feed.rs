//! The `topic` handler: recurring jobs feed a topic; a re-run of a firing (at-least-once
//! execution after a crash) never makes a task ready twice.

use std::time::Duration;

use chrono::Utc;
use keyfire::queue::TopicHandler;
use keyfire::queue::{TaskState, When};
use keyfire::{Firing, Handler, JobSpec};
use keyfire_testkit::world::World;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn firing(job_id: &str, at_ms: i64, attempt: u32, params: serde_json::Value) -> Firing {
    let at = chrono::DateTime::from_timestamp_millis(at_ms).unwrap();
    Firing {
        job_id: job_id.into(),
        firing_id: format!("{job_id}:{at_ms}"),
        scheduled_at: at,
        claimed_at: at,
        attempt,
        params,
        node_id: "test".into(),
        cancel: CancellationToken::new(),
        report: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_recurring_job_feeds_a_topic() {
    let w = World::new().await;
    let _node = w.queue_node("a").await;
    let client = w.client().await;
    let q = w.queue().await;
    client
        .upsert(JobSpec::every("feeder", "500ms", "topic").params(json!({
            "topic": "feed", "payload": {"k": 1}, "ttr": "5s", "max_deliveries": 2
        })))
        .await
        .unwrap();
    let mut got = Vec::new();
    while got.len() < 3 {
        let r = q
            .pop("feed", Duration::from_secs(3))
            .await
            .unwrap()
            .expect("a fed task");
        assert_eq!(r.payload, json!({"k": 1}));
        assert_eq!(r.ttr, Duration::from_secs(5));
        assert!(r.reserved_at >= r.due_at);
        let at: i64 = r.id.strip_prefix("feeder.").unwrap().parse().unwrap();
        assert_eq!(at, r.due_at.timestamp_millis(), "id names the firing");
        assert_eq!(q.get(&r.id).await.unwrap().max_deliveries, 2);
        q.finish(&r.id, &r.token).await.unwrap();
        got.push(at);
    }
    assert!(
        got.windows(2).all(|p| p[1] - p[0] == 500),
        "one task per firing: {got:?}"
    );
    client.delete("feeder").await.unwrap();
}

/// A firing run again (its node died after making the task ready, before recording the run):
/// nothing changes the second time, for a delayed task and for a fed one.
#[tokio::test]
async fn a_rerun_firing_makes_nothing_ready_twice() {
    let w = World::new().await;
    let node = w.queue_node("a").await;
    let q = w.queue().await;
    let handler = TopicHandler::new(q.clone());

    let id = q
        .add(
            "t",
            json!("d"),
            When::Delay(Duration::from_secs(60)),
            Duration::from_secs(5),
            3,
        )
        .await
        .unwrap();
    let job = keyfire::queue::job_id(&id);
    let due = q.get(&id).await.unwrap().due_at.timestamp_millis();
    let f = |attempt| firing(&job, due, attempt, json!({"topic": "t", "task": id}));
    handler.run(f(1)).await.unwrap();
    handler.run(f(2)).await.unwrap();
    let c = &q.topics().await.unwrap()[0];
    assert_eq!((c.delayed, c.ready), (0, 1), "{c:?}");
    assert!(
        w.client().await.get(&job).await.is_err(),
        "the job did its work and is gone"
    );
    let r = q.pop("t", Duration::ZERO).await.unwrap().unwrap();
    handler.run(f(3)).await.unwrap();
    assert_eq!(q.get(&id).await.unwrap().state, TaskState::Reserved);
    assert!(q.pop("t", Duration::ZERO).await.unwrap().is_none());
    q.finish(&id, &r.token).await.unwrap();
    handler.run(f(4)).await.unwrap();
    assert_eq!(q.get(&id).await.unwrap().state, TaskState::Done);

    let now = Utc::now().timestamp_millis();
    let fed = |attempt| firing("feeder", now, attempt, json!({"topic": "f", "payload": 1}));
    handler.run(fed(1)).await.unwrap();
    handler.run(fed(2)).await.unwrap();
    let c = q
        .topics()
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.topic == "f")
        .unwrap();
    assert_eq!((c.added, c.ready), (1, 1), "{c:?}");

    // Bad params fail the run without retry.
    let bad = handler
        .run(firing("j", now, 1, json!({"topic": "a:b"})))
        .await;
    assert!(
        matches!(bad, Err(keyfire::HandlerError::Abort(_))),
        "{bad:?}"
    );
    let bad = handler
        .run(firing("j", now, 1, json!({"topik": "a"})))
        .await;
    assert!(
        matches!(bad, Err(keyfire::HandlerError::Abort(_))),
        "{bad:?}"
    );
    node.shutdown().await;
}
