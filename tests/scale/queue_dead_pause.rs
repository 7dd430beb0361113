//! A topic's dead letters and its pause on a 3-master Redis Cluster, for a topic of three
//! partitions (one per master): every script keeps to its partition's slot, a pause holds on
//! every partition, a replay and a purge find the dead letters of all of them.

use std::collections::HashSet;
use std::time::Duration;

use keyfire::config::RedisMode;
use keyfire::queue::{NewTask, Queue, TaskState};
use keyfire::{Node, Registry, Settings};
use keyfire_testkit::RedisCluster;

use crate::support::{fast_node, wait};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dead_letters_and_pauses_hold_over_a_cluster() {
    let _turn = crate::TOPOLOGY.lock().await;
    let cluster = RedisCluster::start(3, 0).expect("cluster");
    let mut s = Settings::default();
    s.redis.prefix = "kdp".into();
    s.redis.mode = RedisMode::Cluster;
    s.redis.nodes = cluster.nodes();
    s.redis.shards = 12;
    fast_node(&mut s.node);
    let mut registry = Registry::with_builtins();
    keyfire::queue::serve_topics(&mut registry, &s.redis);
    let mut ns = s.clone();
    ns.node.id = "n1".into();
    let node = Node::new(ns, registry).start().await.expect("start node");
    let queue = Queue::connect(&s).await.unwrap();
    wait::until(
        "the queue on the sharded layout",
        Duration::from_secs(20),
        async || queue.is_sharded().await.unwrap(),
    )
    .await;
    queue.set_partitions("wide", 3).await.unwrap();

    // Twelve tasks over the three partitions, delivered once each and left to lapse.
    let tasks: Vec<NewTask> = (0..12)
        .map(|i| {
            NewTask::new("wide", serde_json::json!(i))
                .id(format!("w{i}"))
                .ttr(Duration::from_millis(300))
                .max_deliveries(1)
        })
        .collect();
    queue.add_many(tasks).await.unwrap();
    let mut popped = Vec::new();
    while popped.len() < 12 {
        let got = queue
            .pop_many("wide", 12, Duration::from_secs(2))
            .await
            .unwrap();
        assert!(!got.is_empty(), "only {} of 12 popped", popped.len());
        popped.extend(got);
    }
    wait::until("twelve dead letters", Duration::from_secs(20), async || {
        queue.requeue_expired("wide").await.unwrap();
        queue.dead_letters("wide", 100).await.unwrap().len() == 12
    })
    .await;
    let dead = queue.dead_letters("wide", 100).await.unwrap();
    assert!(
        dead.iter()
            .all(|d| d.last_error.is_some() && d.finished_at.is_some())
    );

    // Paused: nothing comes out of any partition, though replayed tasks are ready.
    assert!(queue.pause("wide").await.unwrap());
    let ids: Vec<String> = (0..6).map(|i| format!("w{i}")).collect();
    assert_eq!(queue.replay_dead("wide", Some(&ids)).await.unwrap(), 6);
    assert!(
        queue
            .pop_many("wide", 100, Duration::from_millis(500))
            .await
            .unwrap()
            .is_empty(),
        "a paused topic delivered"
    );
    assert_eq!(
        queue
            .topics()
            .await
            .unwrap()
            .iter()
            .find(|t| t.topic == "wide")
            .unwrap()
            .ready,
        6
    );

    // Resumed: the six replayed come out, each once; then the rest, purged, never do.
    assert!(queue.resume("wide").await.unwrap());
    let mut seen = HashSet::new();
    for _ in 0..40 {
        for r in queue
            .pop_many("wide", 100, Duration::from_millis(200))
            .await
            .unwrap()
        {
            assert_eq!(r.deliveries, 1, "a replay resets the deliveries");
            assert!(seen.insert(r.id.clone()), "{} delivered twice", r.id);
            queue.finish(&r.id, &r.token).await.unwrap();
        }
        if seen.len() == 6 {
            break;
        }
    }
    assert_eq!(seen, ids.iter().cloned().collect::<HashSet<_>>());
    assert_eq!(queue.purge_dead("wide", None).await.unwrap(), 6);
    assert!(queue.dead_letters("wide", 100).await.unwrap().is_empty());
    assert_eq!(
        queue.get_in("wide", "w11").await.unwrap().state,
        TaskState::Deleted
    );
    assert!(
        queue
            .pop_many("wide", 100, Duration::from_millis(300))
            .await
            .unwrap()
            .is_empty()
    );
    node.shutdown().await;
}
