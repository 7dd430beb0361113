//! A topic batch with a completion callback on a 3-master Redis Cluster, for a topic of three
//! partitions: the batch's record, its tasks and the outbox its callback goes to share one
//! partition's slot, so the scripts that end its tasks (finish, requeue into the dead letters,
//! delete) count them and queue the callback in that slot, and a node sends it.

use std::time::Duration;

use keyfire::client::OnComplete;
use keyfire::config::RedisMode;
use keyfire::queue::{NewTask, Queue};
use keyfire::{Client, Node, Registry, Settings};
use keyfire_testkit::RedisCluster;
use serde_json::{Value, json};

use crate::support::{fast_node, wait};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_topic_batch_calls_back_once_over_a_cluster() {
    let _turn = crate::TOPOLOGY.lock().await;
    let cluster = RedisCluster::start(3, 0).expect("cluster");
    let mut s = Settings::default();
    s.redis.prefix = "kqb".into();
    s.redis.mode = RedisMode::Cluster;
    s.redis.nodes = cluster.nodes();
    s.redis.shards = 12;
    fast_node(&mut s.node);
    let (url, seen) = keyfire_testkit::http_receiver().await;
    let url = format!("{url}/done");
    let mut registry = Registry::with_builtins();
    keyfire::queue::serve_topics(&mut registry, &s.redis);
    let mut ns = s.clone();
    ns.node.id = "n1".into();
    let node = Node::new(ns, registry).start().await.expect("start node");
    let queue = Queue::connect(&s).await.unwrap();
    let client = Client::connect(&s).await.unwrap();
    wait::until(
        "the queue on the sharded layout",
        Duration::from_secs(20),
        async || queue.is_sharded().await.unwrap(),
    )
    .await;
    queue.set_partitions("wide", 3).await.unwrap();

    // Six tasks: three finished, two that die on their one lapsed delivery, one deleted.
    let mut tasks: Vec<NewTask> = (0..4)
        .map(|i| NewTask::new("wide", json!(i)).ttr(Duration::from_secs(30)))
        .collect();
    for i in 4..6 {
        tasks.push(
            NewTask::new("wide", json!(i))
                .ttr(Duration::from_millis(300))
                .max_deliveries(1),
        );
    }
    let on = OnComplete {
        url,
        signing_secrets: Vec::new(),
    };
    let batch = queue.add_batch("wide", tasks, on).await.unwrap();
    queue.delete_in("wide", &batch.ids[3]).await.unwrap();
    let popped = queue
        .pop_many("wide", 10, Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(popped.len(), 5, "one partition holds them all");
    let done: Vec<(String, String)> = popped
        .iter()
        .filter(|r| batch.ids[..3].contains(&r.id))
        .map(|r| (r.id.clone(), r.token.clone()))
        .collect();
    assert_eq!(done.len(), 3);
    queue.finish_many(&done).await.unwrap();
    let b = client.get_batch(&batch.batch_id).await.unwrap();
    assert_eq!((b.succeeded, b.cancelled, b.pending), (3, 1, 2), "{b:?}");
    wait::until(
        "the two lapsed deliveries to die",
        Duration::from_secs(20),
        async || {
            queue.requeue_expired("wide").await.unwrap();
            client.get_batch(&batch.batch_id).await.unwrap().pending == 0
        },
    )
    .await;
    let got = wait::until("the batch's callback", Duration::from_secs(20), || async {
        let got: Vec<Value> = seen
            .lock()
            .unwrap()
            .iter()
            .map(|(_, b)| b.clone())
            .collect();
        (!got.is_empty()).then_some(got)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(seen.lock().unwrap().len(), 1, "one callback: {got:?}");
    let data = &got[0]["data"];
    assert_eq!(
        (
            &data["batch_id"],
            &data["total"],
            &data["succeeded"],
            &data["died"],
            &data["cancelled"]
        ),
        (
            &json!(batch.batch_id),
            &json!(6),
            &json!(3),
            &json!(2),
            &json!(1)
        ),
        "{:#}",
        got[0]
    );
    node.shutdown().await;
}
