//! Batches of topic tasks with a completion callback: the script step that ends the batch's
//! last task — a finish, a requeue into the dead letters, a delete — queues exactly one
//! callback in its shard's outbox, with the counts; a replayed dead letter is not counted
//! again; on a queue spread over shards the batch lives on one partition's shard, which is the
//! one its id names, and a node's callback sender sends it.

use std::time::Duration;

use keyfire::Error;
use keyfire::client::OnComplete;
use keyfire::queue::{Finished, NewTask, Reserved};
use keyfire::store::{Keys, Shards};
use keyfire_testkit::wait;
use keyfire_testkit::world::World;
use serde_json::{Value, json};

use crate::past_deadlines;

fn on_complete(url: &str) -> OnComplete {
    OnComplete {
        url: url.to_string(),
        signing_secrets: Vec::new(),
    }
}

/// The outbox of `keys`' tag: its callback ids, and the entry of batch `bid`'s callback.
async fn outbox(w: &World, keys: &Keys, bid: &str) -> (Vec<String>, Option<Value>) {
    let mut c = w.conn().await;
    let ids: Vec<String> = redis::cmd("ZRANGE")
        .arg(keys.outbox())
        .arg(0)
        .arg(-1)
        .query_async(&mut c)
        .await
        .unwrap();
    let entry: Option<String> = redis::cmd("HGET")
        .arg(keys.outbox_data())
        .arg(format!("batch:{bid}:completed"))
        .query_async(&mut c)
        .await
        .unwrap();
    (ids, entry.map(|e| serde_json::from_str(&e).unwrap()))
}

fn pairs(rs: &[&Reserved]) -> Vec<(String, String)> {
    rs.iter().map(|r| (r.id.clone(), r.token.clone())).collect()
}

/// A batch of 7 tasks of one topic: 3 finished, 2 that die on their first lapsed delivery, one
/// that dies on its second, one deleted while ready. Nothing is in the outbox until the last
/// of them ends (the second lapse of the one with two deliveries); then exactly one callback,
/// with the counts, and the batch reads them. Replaying the dead letters and finishing them,
/// or deleting what ended, counts nothing more and queues nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_step_that_ends_the_last_task_queues_one_callback_with_the_counts() {
    let w = World::new().await;
    let q = w.queue().await;
    let client = w.client().await;
    let keys = Keys::new(&w.settings.redis.prefix);
    let long = Duration::from_secs(30);
    let short = Duration::from_millis(300);
    let mut tasks: Vec<NewTask> = (0..3)
        .map(|i| NewTask::new("fan", json!({"ok": i})).ttr(long))
        .collect();
    tasks.push(
        NewTask::new("fan", json!("dies"))
            .ttr(short)
            .max_deliveries(1),
    );
    tasks.push(
        NewTask::new("fan", json!("dies"))
            .ttr(short)
            .max_deliveries(1),
    );
    tasks.push(
        NewTask::new("fan", json!("dies twice"))
            .ttr(short)
            .max_deliveries(2),
    );
    tasks.push(NewTask::new("fan", json!("deleted")).ttr(long));
    let batch = q
        .add_batch("fan", tasks, on_complete("http://127.0.0.1:9/done"))
        .await
        .unwrap();
    let bid = batch.batch_id.clone();
    assert_eq!(batch.ids.len(), 7);
    for id in &batch.ids {
        assert_eq!(
            q.get_in("fan", id).await.unwrap().batch.as_deref(),
            Some(bid.as_str())
        );
    }
    let b = client.get_batch(&bid).await.unwrap();
    assert_eq!((b.total, b.pending, b.completed_ms), (7, 7, None));

    q.delete_in("fan", &batch.ids[6]).await.unwrap();
    let popped = q.pop_many("fan", 10, Duration::ZERO).await.unwrap();
    assert_eq!(popped.len(), 6);
    let by_id = |i: usize| popped.iter().find(|r| r.id == batch.ids[i]).unwrap();
    let done = pairs(&[by_id(0), by_id(1), by_id(2)]);
    assert!(
        q.finish_many(&done)
            .await
            .unwrap()
            .iter()
            .all(|f| *f == Finished::Done)
    );
    w.until_redis_ms(past_deadlines(&popped)).await;
    let r = q.requeue_expired("fan").await.unwrap();
    assert_eq!((r.dead, r.requeued), (2, 1));
    let b = client.get_batch(&bid).await.unwrap();
    assert_eq!(
        (b.succeeded, b.died, b.cancelled, b.pending),
        (3, 2, 1, 1),
        "{b:?}"
    );
    assert_eq!(
        outbox(&w, &keys, &bid).await,
        (Vec::new(), None),
        "no callback while a task is pending"
    );

    // The last one: its second delivery lapses too.
    let again = q.pop_many("fan", 10, Duration::ZERO).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id, batch.ids[5]);
    w.until_redis_ms(past_deadlines(&again)).await;
    assert_eq!(q.requeue_expired("fan").await.unwrap().dead, 1);
    let (ids, entry) = outbox(&w, &keys, &bid).await;
    assert_eq!(ids, vec![format!("batch:{bid}:completed")]);
    let entry = entry.expect("the callback's entry");
    assert_eq!(entry["url"], "http://127.0.0.1:9/done");
    assert_eq!(entry["payload"]["type"], "keyfire.batch.completed");
    let data = &entry["payload"]["data"];
    assert_eq!(
        (
            &data["batch_id"],
            &data["total"],
            &data["succeeded"],
            &data["died"],
            &data["cancelled"]
        ),
        (&json!(bid), &json!(7), &json!(3), &json!(3), &json!(1)),
        "{entry}"
    );
    let b = client.get_batch(&bid).await.unwrap();
    assert_eq!((b.succeeded, b.died, b.cancelled, b.pending), (3, 3, 1, 0));
    assert!(b.completed_ms.is_some());

    // Replayed dead letters leave the batch: finished now, they count nothing more.
    assert_eq!(q.replay_dead("fan", None).await.unwrap(), 3);
    let replayed = q.pop_many("fan", 10, Duration::ZERO).await.unwrap();
    assert_eq!(replayed.len(), 3);
    for r in &replayed {
        assert_eq!(q.get_in("fan", &r.id).await.unwrap().batch, None);
    }
    q.finish_many(&pairs(&replayed.iter().collect::<Vec<_>>()))
        .await
        .unwrap();
    q.delete_in("fan", &batch.ids[0]).await.unwrap();
    let after = client.get_batch(&bid).await.unwrap();
    assert_eq!(after, b, "nothing counted after the batch completed");
    assert_eq!(outbox(&w, &keys, &bid).await.0.len(), 1, "one callback");
}

/// Before its batch completed, a replayed dead letter that is then finished is not counted a
/// second time: the batch completes when its other task ends, with the dead one counted dead.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_letter_replayed_before_the_batch_completed_counts_once() {
    let w = World::new().await;
    let q = w.queue().await;
    let client = w.client().await;
    let keys = Keys::new(&w.settings.redis.prefix);
    let tasks = vec![
        NewTask::new("rp", json!(1))
            .ttr(Duration::from_millis(300))
            .max_deliveries(1),
        NewTask::new("rp", json!(2)).delay(Duration::from_secs(3600)),
    ];
    // A delayed task needs a node that promotes topics: one is registered.
    let _node = w.queue_node("n1").await;
    let batch = q
        .add_batch("rp", tasks, on_complete("http://127.0.0.1:9/rp"))
        .await
        .unwrap();
    let bid = batch.batch_id;
    let popped = q.pop_many("rp", 10, Duration::ZERO).await.unwrap();
    assert_eq!(popped.len(), 1);
    w.until_redis_ms(past_deadlines(&popped)).await;
    wait::until(
        "the lapsed delivery to die",
        Duration::from_secs(20),
        async || {
            let _ = q.requeue_expired("rp").await.unwrap();
            client.get_batch(&bid).await.unwrap().died == 1
        },
    )
    .await;
    assert_eq!(q.replay_dead("rp", None).await.unwrap(), 1);
    let again = q.pop_many("rp", 10, Duration::ZERO).await.unwrap();
    q.finish(&again[0].id, &again[0].token).await.unwrap();
    let b = client.get_batch(&bid).await.unwrap();
    assert_eq!((b.succeeded, b.died, b.pending), (0, 1, 1), "{b:?}");
    assert_eq!(outbox(&w, &keys, &bid).await.0.len(), 0);
    q.delete_in("rp", &batch.ids[1]).await.unwrap();
    let (_, entry) = outbox(&w, &keys, &bid).await;
    let data = entry.expect("the callback")["payload"]["data"].clone();
    assert_eq!(
        (
            &data["total"],
            &data["succeeded"],
            &data["died"],
            &data["cancelled"]
        ),
        (&json!(2), &json!(0), &json!(1), &json!(1))
    );
}

/// Every task of a batch is checked first: errors name `tasks[i].field` (a task naming an
/// `id`, a `dedup`, another topic, a bad ttr) or `on_complete.url`, and nothing is written.
#[tokio::test]
async fn bad_batches_are_refused_by_field_before_any_write() {
    let w = World::new().await;
    let q = w.queue().await;
    let ok = || NewTask::new("v", json!(1));
    let field = |r: keyfire::Result<keyfire::client::BatchEnqueued>| match r {
        Err(Error::Invalid(v)) => v.field,
        other => panic!("expected a validation error, got {other:?}"),
    };
    let url = || on_complete("http://127.0.0.1:9/v");
    let cases: Vec<(Vec<NewTask>, OnComplete, &str)> = vec![
        (vec![], url(), "tasks"),
        (vec![ok(), ok().id("mine")], url(), "tasks[1].id"),
        (
            vec![
                ok(),
                ok(),
                ok().dedup(keyfire::job::DedupSpec::key("k", "1m")),
            ],
            url(),
            "tasks[2].dedup",
        ),
        (
            vec![NewTask::new("other", json!(1))],
            url(),
            "tasks[0].topic",
        ),
        (vec![ok(), ok().ttr(Duration::ZERO)], url(), "tasks[1].ttr"),
        (vec![ok()], on_complete("ftp://x/y"), "on_complete.url"),
    ];
    for (tasks, on, want) in cases {
        assert_eq!(field(q.add_batch("v", tasks, on).await), want);
    }
    assert_eq!(field(q.add_batch("a:b", vec![ok()], url()).await), "topic");
    assert!(
        w.keys().await.iter().all(|k| !k.contains(":q:")),
        "nothing written"
    );
}

/// Over several shards, before the nodes switched the queue to the sharded layout (a rolling
/// upgrade), a topic's tasks are under the meta tag, whose outbox no callback sender reads and
/// whose tasks are moved later: a batch is refused, naming the wait, and nothing is written.
#[tokio::test]
async fn over_shards_a_batch_waits_for_the_switch_to_the_sharded_layout() {
    let mut w = World::new().await;
    w.settings.redis.shards = 4;
    let q = w.queue().await;
    assert!(!q.is_sharded().await.unwrap());
    let before = w.keys().await;
    match q
        .add_batch(
            "early",
            vec![NewTask::new("early", json!(1))],
            on_complete("http://127.0.0.1:9/early"),
        )
        .await
    {
        Err(Error::Setup(m)) => assert!(m.contains("sharded layout"), "{m}"),
        other => panic!("expected a setup error, got {other:?}"),
    }
    assert_eq!(w.keys().await, before, "nothing written");
}

/// Over 4 shards, a topic of 3 partitions: the batch's tasks all go to one partition, whose
/// shard is the one the batch's id names (so `get_batch` finds it), and its outbox is a
/// scheduler shard's: the node's callback sender sends the one callback once the last task
/// ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn over_shards_the_batch_lives_on_one_partition_and_a_node_sends_its_callback() {
    let mut w = World::new().await;
    w.settings.redis.shards = 4;
    let (url, seen) = keyfire_testkit::http_receiver().await;
    let _node = w.queue_node("n1").await;
    let q = w.queue().await;
    let client = w.client().await;
    wait::until(
        "the switch to the sharded layout",
        Duration::from_secs(20),
        async || q.is_sharded().await.unwrap(),
    )
    .await;
    q.set_partitions("wide", 3).await.unwrap();
    let shards = Shards::new(&w.settings.redis.prefix, 4);
    for _ in 0..3 {
        let batch = q
            .add_batch(
                "wide",
                (0..5).map(|i| NewTask::new("wide", json!(i))).collect(),
                on_complete(&format!("{url}/wide")),
            )
            .await
            .unwrap();
        let keys = shards.for_job(&batch.batch_id);
        let mut c = w.conn().await;
        for id in &batch.ids {
            let topic: Option<String> = redis::cmd("HGET")
                .arg(keys.qtask(id))
                .arg("topic")
                .query_async(&mut c)
                .await
                .unwrap();
            assert_eq!(
                topic.as_deref(),
                Some("wide"),
                "task {id} on the batch's shard"
            );
        }
        let popped = q.pop_many("wide", 10, Duration::ZERO).await.unwrap();
        assert_eq!(popped.len(), 5);
        q.delete_in("wide", &popped[0].id).await.unwrap();
        q.finish_many(&pairs(&popped[1..].iter().collect::<Vec<_>>()))
            .await
            .unwrap();
        let b = client.get_batch(&batch.batch_id).await.unwrap();
        assert_eq!((b.succeeded, b.cancelled, b.pending), (4, 1, 0), "{b:?}");
    }
    let got = wait::until("the three callbacks", Duration::from_secs(20), || async {
        let got: Vec<Value> = seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| p == "/wide")
            .map(|(_, b)| b.clone())
            .collect();
        (got.len() >= 3).then_some(got)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(seen.lock().unwrap().len(), 3, "one callback per batch");
    for body in got {
        assert_eq!(body["type"], "keyfire.batch.completed");
        let data = &body["data"];
        assert_eq!(
            (&data["total"], &data["succeeded"], &data["cancelled"]),
            (&json!(5), &json!(4), &json!(1))
        );
    }
}
