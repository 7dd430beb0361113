//! Change messages on a Redis Cluster: each shard's announcements reach a node over that
//! shard's channel, a node follows a master's failover with its subscriptions, and the
//! messages stay on their shard instead of crossing the cluster bus.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use keyfire::config::RedisMode;
use keyfire::engine::NodeHandle;
use keyfire::store::{Store, slot_of};
use keyfire::{Client, Firing, JobSpec, Node, Registry, Settings};
use keyfire_testkit::{RedisCluster, RedisServer};

use crate::support::{Recorder, fast_node, wait};

/// Settings for one node on `cluster` with one shard per master, and a sweep interval far
/// longer than any wait below: a firing that arrives in time came by a message, not a sweep.
fn settings(cluster: &RedisCluster, prefix: &str) -> Settings {
    let mut s = Settings::default();
    s.redis.prefix = prefix.to_string();
    s.redis.mode = RedisMode::Cluster;
    s.redis.nodes = cluster.nodes();
    s.redis.shards = 3;
    fast_node(&mut s.node);
    s.node.sweep_interval = Duration::from_secs(300);
    s.node.node_ttl = Duration::from_secs(5);
    s
}

async fn start_nodes(s: &Settings, recorder: &Recorder, ids: &[&str]) -> Vec<NodeHandle> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let mut nodes = Vec::new();
    for id in ids {
        let mut r = Registry::with_builtins();
        let rec = recorder.clone();
        r.register("rec", move |f: Firing| {
            let rec = rec.clone();
            async move { rec.record(f).await }
        });
        let mut s = s.clone();
        s.node.id = id.to_string();
        nodes.push(Node::new(s, r).start().await.expect("node"));
    }
    keyfire_testkit::world::wait_all_seen(&nodes, ids.len()).await;
    nodes
}

/// A job id that lives on shard `i`.
fn id_on_shard(store: &Store, i: usize) -> String {
    (0..)
        .map(|n| format!("s{i}-{n}"))
        .find(|id| store.shards().of(id) == i)
        .expect("an id on every shard")
}

/// Trigger `id` and wait for its run: the trigger is announced on the job's shard channel,
/// and only that message brings the attempt to the node before the next sweep, minutes away.
async fn trigger_reaches_the_node(client: &Client, recorder: &Recorder, id: &str, what: &str) {
    let before = recorder.seen_of(id).len();
    let started = Instant::now();
    // Right after a failover the client's first write may meet the old master: ask again.
    let trigger = format!("the trigger of {id} ({what}) accepted");
    wait::until(&trigger, Duration::from_secs(5), async || {
        client.trigger(id).await
    })
    .await;
    recorder
        .wait_until(Duration::from_secs(10), what, |seen| {
            seen.iter().filter(|r| r.job_id == id).count() > before
        })
        .await;
    eprintln!("{what}: ran {:?} after the trigger", started.elapsed());
}

/// A node on a 3-master cluster (a replica each) hears a change published on each shard's
/// channel (SSUBSCRIBE on the master serving it); after the master of one shard is killed and
/// its replica promoted, the node subscribes there again and a change on that shard still
/// reaches it in seconds, with no sweep for minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ssubscribe_resubscribed_after_a_failover() {
    let _turn = crate::TOPOLOGY.lock().await;
    let mut cluster = RedisCluster::start(3, 1).expect("cluster");
    let clock = RedisServer::start().unwrap();
    let s = settings(&cluster, "ps1");
    let store = Store::open(&s.redis).await.unwrap();
    let shards = store.shards().len();
    let masters: Vec<String> = store
        .connection()
        .master_of_keys(&store.change_channels())
        .await
        .unwrap();
    eprintln!(
        "change channels {:?} on {masters:?}",
        store.change_channels()
    );
    let distinct: std::collections::BTreeSet<&String> = masters.iter().skip(1).collect();
    assert_eq!(distinct.len(), 3, "one shard channel on each master");

    let recorder = Recorder::new(&clock.url()).await;
    let node = start_nodes(&s, &recorder, &["a"]).await.remove(0);
    let client = Client::connect(&s).await.unwrap().allow_handlers(["rec"]);
    let ids: Vec<String> = (0..shards).map(|i| id_on_shard(&store, i)).collect();
    for id in &ids {
        client
            .upsert(JobSpec::every(id, "1h", "rec"))
            .await
            .unwrap();
    }
    wait::until("three subscriptions", Duration::from_secs(10), async || {
        wait::at_least(node.stats().subscribed.load(Relaxed), 3)
    })
    .await;
    for (i, id) in ids.iter().enumerate() {
        trigger_reaches_the_node(&client, &recorder, id, &format!("shard {i}")).await;
    }

    let subscribed = node.stats().subscribed.load(Relaxed);
    let sweeps = node.stats().sweeps.load(Relaxed);
    let old = cluster
        .kill_master_of_slot(slot_of(store.shards().keys(0).tag()))
        .unwrap();
    let now = cluster
        .wait_for_failover(&old, RedisCluster::SETTLE_LIMIT)
        .unwrap();
    eprintln!("killed {old}; masters now {now:?}");
    // The node subscribes again on the new layout: on every master, the new one included.
    wait::until(
        "resubscribed after the failover",
        Duration::from_secs(30),
        async || wait::at_least(node.stats().subscribed.load(Relaxed), subscribed + 3),
    )
    .await;
    // Past the sweep that follows a resubscribe (the sweep interval is minutes: a sweep since
    // the failover is one a resubscription asked for): from here only a message brings a
    // trigger.
    wait::until(
        "the sweep that follows the resubscribe",
        Duration::from_secs(10),
        async || wait::at_least(node.stats().sweeps.load(Relaxed), sweeps + 1),
    )
    .await;
    trigger_reaches_the_node(&client, &recorder, &ids[0], "shard 0 after its failover").await;
    for (i, id) in ids.iter().enumerate().skip(1) {
        trigger_reaches_the_node(&client, &recorder, id, &format!("shard {i} after")).await;
    }
    node.shutdown().await;
}

/// Counters summed over every server of the cluster: `CLUSTER INFO`'s messages received
/// over the cluster bus (plain and shard pub/sub) and `INFO commandstats`' publish calls.
fn bus_counters(cluster: &RedisCluster) -> [u64; 4] {
    let mut out = [0u64; 4];
    for server in cluster.servers() {
        let Ok(client) = redis::Client::open(server.url()) else {
            continue;
        };
        let Ok(mut conn) = client.get_connection() else {
            continue; // a killed server
        };
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query(&mut conn)
            .unwrap_or_default();
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut conn)
            .unwrap_or_default();
        let field = |text: &str, name: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        let calls = |name: &str| -> u64 {
            stats
                .lines()
                .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
                .and_then(|v| v.split(',').next()?.parse().ok())
                .unwrap_or(0)
        };
        out[0] += field(&info, "cluster_stats_messages_publish_received");
        out[1] += field(&info, "cluster_stats_messages_publishshard_received");
        out[2] += calls("publish");
        out[3] += calls("spublish");
    }
    out
}

/// Measures what change messages cost on a 3-master cluster with a replica each (6 servers)
/// and three nodes, for one-shot tasks enqueued in batches: messages received over the
/// cluster bus per server and per firing, and messages published per firing (each node receives each once). A shard
/// channel's message goes to its master's replica only; a plain `PUBLISH` went to all five
/// other servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn change_messages_stay_on_their_shard() {
    let _turn = crate::TOPOLOGY.lock().await;
    let cluster = RedisCluster::start(3, 1).expect("cluster");
    let clock = RedisServer::start().unwrap();
    let s = settings(&cluster, "ps2");
    let recorder = Recorder::new(&clock.url()).await;
    // Three nodes: a claim announces the next firings it does not own itself.
    let nodes = start_nodes(&s, &recorder, &["a", "b", "c"]).await;
    let client = Client::connect(&s).await.unwrap().allow_handlers(["rec"]);
    // 3,000 one-shot tasks, enqueued 100 at a time, due over 5 s from 2 s on: each insert
    // announces the tasks due soon on each shard it wrote to.
    let before = bus_counters(&cluster);
    let base = chrono::Utc::now() + chrono::Duration::seconds(2);
    for batch in 0..30 {
        let tasks: Vec<JobSpec> = (0..100)
            .map(|i| {
                let n = batch * 100 + i;
                let at = base + chrono::Duration::milliseconds(n as i64 * 5_000 / 3_000);
                JobSpec::at(format!("t{n}"), at, "rec")
            })
            .collect();
        client.enqueue_many(tasks).await.unwrap();
    }
    recorder.wait_count(3_000, Duration::from_secs(60)).await;
    let firings = recorder.seen().len() as f64;
    // Read the counters once the nodes are stopped: a heartbeat's message published between
    // the read of its master and of that master's replica would count on the bus only.
    for n in nodes {
        n.shutdown().await;
    }
    let after = bus_counters(&cluster);
    let servers = cluster.servers().len() as f64;
    let d = |i: usize| (after[i] - before[i]) as f64;
    eprintln!(
        "change messages over {firings} firings, {servers} servers: bus messages received per \
         server per firing: plain {:.3}, shard {:.3}; published per firing (each received once \
         by each node): PUBLISH {:.3}, SPUBLISH {:.3} (totals: {:?} bus plain, bus shard, \
         PUBLISH, SPUBLISH)",
        d(0) / servers / firings,
        d(1) / servers / firings,
        d(2) / firings,
        d(3) / firings,
        [d(0), d(1), d(2), d(3)],
    );
    assert_eq!(firings, 3_000.0);
    assert_eq!(d(0), 0.0, "no message is broadcast over the cluster bus");
    assert!(d(3) > 0.0, "the inserts announced the tasks due soon");
    // Each shard message reaches its master's one replica, nothing else.
    assert!(d(1) <= d(3), "shard messages went past their replicas");
}
