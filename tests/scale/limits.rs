//! Flow control on a sharded Redis Cluster: the limiter's keys live under the limit key's
//! own hash tag, the holds on each job's shard, and the bound holds across them.

use std::time::Duration;

use chrono::DateTime;
use keyfire::config::RedisMode;
use keyfire::{Client, Firing, FlowLimitSpec, JobSpec, Node, Registry, Settings};
use keyfire_testkit::{RedisCluster, RedisServer};

use crate::support::{Recorder, assert_exactly_once, fast_node};

/// 30 tasks due at once over 12 shards, limited to 10 a second one at a time (burst 1):
/// each runs once, none early, and at most 10 start within any second.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_limit_holds_across_the_shards_of_a_cluster() {
    let _turn = crate::TOPOLOGY.lock().await;
    let cluster = RedisCluster::start(3, 0).expect("cluster");
    let clock = RedisServer::start().unwrap();
    let recorder = Recorder::new(&clock.url()).await;
    let mut s = Settings::default();
    s.redis.prefix = "kl".into();
    fast_node(&mut s.node);
    s.redis.mode = RedisMode::Cluster;
    s.redis.nodes = cluster.nodes();
    s.redis.shards = 12;
    let client = Client::connect(&s).await.unwrap().allow_handlers(["rec"]);
    client
        .put_limit(FlowLimitSpec::new("k", Some(10), None).with_burst(1))
        .await
        .unwrap();
    let mut nodes = Vec::new();
    for id in ["a", "b"] {
        let mut r = Registry::with_builtins();
        let rec = recorder.clone();
        r.register("rec", move |f: Firing| {
            let rec = rec.clone();
            async move { rec.record(f).await }
        });
        let mut ns = s.clone();
        ns.node.id = id.into();
        nodes.push(Node::new(ns, r).start().await.unwrap());
    }
    keyfire_testkit::world::wait_all_seen(&nodes, 2).await;
    let at = client.store().time_ms().await.unwrap() + 500;
    let specs: Vec<JobSpec> = (0..30)
        .map(|i| {
            JobSpec::at(
                format!("t{i}"),
                DateTime::from_timestamp_millis(at).unwrap(),
                "rec",
            )
            .limit_key("k")
        })
        .collect();
    client.enqueue_many(specs).await.unwrap();
    recorder.wait_count(30, Duration::from_secs(30)).await;
    // Nothing left due, queued or running: no run can come after, so a double would show.
    let store = keyfire::store::Store::open(&s.redis).await.unwrap();
    crate::wait_idle(&store, Duration::from_secs(10)).await;
    let seen = recorder.seen();
    assert_exactly_once(&seen, 30);
    let mut starts: Vec<i64> = seen.iter().map(|r| r.start_ms).collect();
    starts.sort();
    let most = (0..starts.len())
        .map(|i| {
            starts[i..]
                .iter()
                .take_while(|&&t| t - starts[i] < 1_000)
                .count()
        })
        .max()
        .unwrap();
    // The recorder reads another server's clock as each handler starts: one of jitter.
    assert!(most <= 11, "{most} started within a second: {starts:?}");
    assert!(starts[29] - starts[0] >= 2_000, "{starts:?}");
    assert!(seen.iter().all(|r| r.attempt == 1), "{seen:?}");
    for n in nodes {
        n.shutdown().await;
    }
}
