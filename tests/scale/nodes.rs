//! keyfire on Redis Cluster and Sentinel: firings exactly once with shards spread
//! over the masters, and through a master's failover.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use chrono::DateTime;
use keyfire::config::RedisMode;
use keyfire::engine::NodeHandle;
use keyfire::store::{Store, slot_of};
use keyfire::{Client, Firing, JobSpec, Node, Registry, Settings};
use keyfire_testkit::{RedisCluster, RedisSentinelSet, RedisServer};

use crate::support::{Recorder, Seen, assert_exactly_once, doubles, fast_node, wait};
use crate::wait_idle;

/// Node settings as in the other suites: fast heartbeats and sweeps.
fn settings(prefix: &str) -> Settings {
    let mut s = Settings::default();
    s.redis.prefix = prefix.to_string();
    fast_node(&mut s.node);
    s
}

/// [`settings`] on `cluster`, keyfire's keys spread over `shards` shards.
fn cluster_settings(prefix: &str, cluster: &RedisCluster, shards: u32) -> Settings {
    let mut s = settings(prefix);
    s.redis.mode = RedisMode::Cluster;
    s.redis.nodes = cluster.nodes();
    s.redis.shards = shards;
    s
}

fn registry(recorder: &Recorder) -> Registry {
    let mut r = Registry::with_builtins();
    let rec = recorder.clone();
    r.register("rec", move |f: Firing| {
        let rec = rec.clone();
        async move { rec.record(f).await }
    });
    r
}

async fn start_nodes(s: &Settings, recorder: &Recorder) -> Vec<NodeHandle> {
    // RUST_LOG=keyfire=info shows what the nodes did (off by default).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let mut nodes = Vec::new();
    for id in ["a", "b", "c"] {
        let mut s = s.clone();
        s.node.id = id.into();
        nodes.push(
            Node::new(s, registry(recorder))
                .start()
                .await
                .expect("node"),
        );
    }
    keyfire_testkit::world::wait_all_seen(&nodes, 3).await;
    nodes
}

fn one_shots(n: usize, from_ms: i64, over_ms: i64) -> Vec<JobSpec> {
    (0..n)
        .map(|i| {
            let at = from_ms + i as i64 * over_ms / n as i64;
            JobSpec::at(
                format!("t{i}"),
                DateTime::from_timestamp_millis(at).unwrap(),
                "rec",
            )
        })
        .collect()
}

/// Redis time (ms) from the recorder's own server (same machine clock as the others).
async fn clock_ms(clock: &RedisServer) -> i64 {
    let mut c = redis::Client::open(clock.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    keyfire::store::redis_time_ms(&mut c).await.unwrap()
}

/// A 3-master cluster (with replicas), 12 shards, 3 keyfire nodes, 10,000
/// firings over 10 s: each exactly once, never early, and the shards' keys on all three
/// masters (four shards each).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_runs_10000_firings_exactly_once_over_three_masters() {
    let _turn = crate::TOPOLOGY.lock().await;
    let cluster = RedisCluster::start(3, 1).expect("cluster");
    let clock = RedisServer::start().unwrap();
    let recorder = Recorder::new(&clock.url()).await;
    let s = cluster_settings("kc1", &cluster, 12);
    let nodes = start_nodes(&s, &recorder).await;
    let client = Client::connect(&s).await.unwrap().allow_handlers(["rec"]);
    let store = Store::open(&s.redis).await.unwrap();

    // Where the shards live: four on each master.
    let tags: Vec<String> = store.shards().iter().map(|k| k.due()).collect();
    let masters = store.connection().master_of_keys(&tags).await.unwrap();
    let mut per_master: BTreeMap<&str, usize> = BTreeMap::new();
    for m in &masters {
        *per_master.entry(m.as_str()).or_default() += 1;
    }
    eprintln!("shards per master: {per_master:?}");
    assert_eq!(per_master.len(), 3, "{per_master:?}");
    assert!(per_master.values().all(|&n| n == 4), "{per_master:?}");

    let base = clock_ms(&clock).await + 2_000;
    client
        .enqueue_many(one_shots(10_000, base, 10_000))
        .await
        .unwrap();
    // Every master holds pending firings.
    for master in cluster.masters().unwrap() {
        let mut c = redis::Client::open(format!("redis://{master}"))
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let keys: i64 = redis::cmd("DBSIZE").query_async(&mut c).await.unwrap();
        assert!(keys > 0, "master {master} holds nothing");
    }
    recorder.wait_count(10_000, Duration::from_secs(90)).await;
    wait_idle(&store, Duration::from_secs(20)).await;
    let (_, _, _, line) = assert_exactly_once(&recorder.seen(), 10_000);
    eprintln!("acceptance-7.1 (cluster): {line}");
    for n in nodes {
        n.shutdown().await;
    }
}

/// What a failover cost: firings run twice, and how late firings were.
fn report_failover(what: &str, seen: &[Seen], kill_ms: i64, settled_ms: i64) -> Vec<String> {
    let distinct: HashMap<&str, Vec<&Seen>> = seen.iter().fold(HashMap::new(), |mut m, s| {
        m.entry(s.firing_id.as_str()).or_default().push(s);
        m
    });
    assert_eq!(distinct.len(), 5_000, "{what}: every firing runs");
    let doubled: Vec<String> = doubles(seen).into_iter().map(|(f, _)| f).collect();
    let mut late: Vec<i64> = distinct
        .values()
        .map(|runs| runs.iter().map(|r| r.lateness_ms()).min().unwrap())
        .collect();
    late.sort_unstable();
    let over_1s = late.iter().filter(|&&l| l > 1_000).count();
    eprintln!(
        "{what}: master killed, failover took {} ms; {} of 5000 firings later than 1 s (max {} ms); {} run twice {:?}",
        settled_ms - kill_ms,
        over_1s,
        late.last().unwrap(),
        doubled.len(),
        doubled
    );
    // Late firings are the ones due while the shard had no master, caught up once it did.
    assert!(
        *late.last().unwrap() < settled_ms - kill_ms + 10_000,
        "{what}: a firing waited far past the failover"
    );
    // A firing may run twice only if its first claim was written to the old master just
    // before it died (unreplicated) — the documented failover window. `kill_ms` is read
    // just before the kill is sent, so the old master may still write for the few ms the
    // kill takes to land (seen: a claim 2 ms after `kill_ms`, lost with its master).
    const KILL_LANDS_MS: i64 = 100;
    for f in &doubled {
        let first = distinct[f.as_str()]
            .iter()
            .map(|r| r.claimed_ms)
            .min()
            .unwrap();
        assert!(
            (kill_ms - 1_000..=kill_ms + KILL_LANDS_MS).contains(&first),
            "{what}: {f} ran twice though first claimed at {first}, {} ms from the kill",
            first - kill_ms
        );
    }
    doubled
}

/// Runs 5,000 firings over 10 s; `kill` kills a master 4 s in and waits for the failover.
async fn failover_round(
    s: Settings,
    clock: &RedisServer,
    kill: impl FnOnce() -> i64,
) -> (Vec<Seen>, i64, i64) {
    // A lease well above the failover time, as in production (default 30 s): a run whose
    // outcome cannot be recorded within its lease is taken over and runs again.
    let mut s = s;
    s.node.lease = Duration::from_secs(20);
    let recorder = Recorder::new(&clock.url()).await;
    let nodes = start_nodes(&s, &recorder).await;
    let client = Client::connect(&s).await.unwrap().allow_handlers(["rec"]);
    let store = Store::open(&s.redis).await.unwrap();
    let base = clock_ms(clock).await + 2_000;
    client
        .enqueue_many(one_shots(5_000, base, 10_000))
        .await
        .unwrap();
    recorder
        .wait_until(Duration::from_secs(30), "runs before the kill", |s| {
            s.len() >= 1_500
        })
        .await;
    let kill_ms = clock_ms(clock).await;
    let settled_ms = kill_ms + kill();
    let distinct = |s: &[Seen]| {
        s.iter()
            .map(|r| r.firing_id.as_str())
            .collect::<std::collections::HashSet<_>>()
            .len()
            >= 5_000
    };
    recorder
        .wait_until(Duration::from_secs(90), "5,000 distinct firings", distinct)
        .await;
    wait_idle(&store, Duration::from_secs(30)).await;
    for n in nodes {
        n.shutdown().await;
    }
    (recorder.seen(), kill_ms, settled_ms)
}

/// A cluster master killed (SIGKILL) mid-run; its replica is promoted; every
/// firing still runs, none twice outside the failover window; prints what it cost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_master_failover_loses_no_firing() {
    let _turn = crate::TOPOLOGY.lock().await;
    let mut cluster = RedisCluster::start(3, 1).expect("cluster");
    let clock = RedisServer::start().unwrap();
    let mut s = cluster_settings("kc2", &cluster, 12);
    // Claims wait for the replica's acknowledgement (WAIT, routed to the shard's master).
    s.redis.wait_replicas = 1;
    let shard0 = slot_of(Store::open(&s.redis).await.unwrap().shards().keys(0).tag());
    let (seen, kill_ms, settled_ms) = failover_round(s, &clock, || {
        let started = std::time::Instant::now();
        let old = cluster.kill_master_of_slot(shard0).unwrap();
        let masters = cluster
            .wait_for_failover(&old, RedisCluster::SETTLE_LIMIT)
            .unwrap();
        eprintln!("cluster: killed {old}; masters now {masters:?}");
        started.elapsed().as_millis() as i64
    })
    .await;
    report_failover("acceptance-7.2 (cluster)", &seen, kill_ms, settled_ms);
}

/// The same through Sentinel (master + replica + 3 sentinels).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sentinel_failover_loses_no_firing() {
    let _turn = crate::TOPOLOGY.lock().await;
    let mut set = RedisSentinelSet::start().expect("sentinels");
    let clock = RedisServer::start().unwrap();
    let mut s = settings("ks3");
    s.redis.mode = RedisMode::Sentinel;
    s.redis.nodes = set.sentinels();
    s.redis.sentinel_master = RedisSentinelSet::MASTER_NAME.into();
    let (seen, kill_ms, settled_ms) = failover_round(s, &clock, || {
        let started = std::time::Instant::now();
        let old = set.kill_master().unwrap();
        let new = set
            .wait_for_failover(&old, Duration::from_secs(30))
            .unwrap();
        eprintln!("sentinel: killed {old}; master now {new}");
        started.elapsed().as_millis() as i64
    })
    .await;
    report_failover("acceptance-7.3 (sentinel)", &seen, kill_ms, settled_ms);
}

/// The count of writes not acknowledged by `redis.wait_replicas` replicas in time, from this
/// process's metrics (only this test sets `wait_replicas` in this binary).
fn unreplicated() -> u64 {
    let text = keyfire_server::metrics::render();
    text.lines()
        .filter(|l| l.starts_with("keyfire_unreplicated_writes_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// `redis.wait_replicas = 1`: with a replica in sync, every claim and outcome is acknowledged
/// before the run goes on (nothing counted); with no replica, firings still run once each,
/// after the timeout, and the unacknowledged writes are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_replicas_acknowledges_claims_or_counts_them() {
    let _turn = crate::TOPOLOGY.lock().await;
    let master = RedisServer::start().unwrap();
    let replica = RedisServer::start().unwrap();
    let mut r = redis::Client::open(replica.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(master.port())
        .query_async(&mut r)
        .await
        .unwrap();
    wait::until("the replica in sync", Duration::from_secs(20), async || {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut r)
            .await
            .unwrap();
        info.contains("master_link_status:up")
    })
    .await;
    let recorder = Recorder::new(&master.url()).await;
    let mut s = settings("kw");
    s.redis.url = master.url();
    s.redis.wait_replicas = 1;
    s.redis.wait_timeout = Duration::from_millis(200);
    let nodes = start_nodes(&s, &recorder).await;
    let client = Client::connect(&s).await.unwrap().allow_handlers(["rec"]);
    let before = unreplicated();
    let base = clock_ms(&master).await + 500;
    client
        .enqueue_many(one_shots(200, base, 1_000))
        .await
        .unwrap();
    recorder.wait_count(200, Duration::from_secs(30)).await;
    let store = Store::open(&s.redis).await.unwrap();
    wait_idle(&store, Duration::from_secs(10)).await;
    assert_eq!(
        unreplicated(),
        before,
        "writes not acknowledged with a replica in sync"
    );

    // The replica goes away: runs go on after the timeout, counted.
    drop(replica);
    let later: Vec<JobSpec> = (0..20)
        .map(|i| JobSpec::after(format!("late{i}"), "100ms", "rec"))
        .collect();
    client.enqueue_many(later).await.unwrap();
    recorder.wait_count(220, Duration::from_secs(30)).await;
    wait_idle(&store, Duration::from_secs(10)).await;
    let seen = recorder.seen();
    assert_eq!(seen.len(), 220);
    assert!(doubles(&seen).is_empty(), "doubles: {:?}", doubles(&seen));
    let counted = unreplicated() - before;
    eprintln!("wait_replicas: {counted} writes counted unreplicated after the replica left");
    assert!(
        counted > 0,
        "no unacknowledged write counted without a replica"
    );
    for n in nodes {
        n.shutdown().await;
    }
}

/// The delay queue on a cluster with 12 shards: delayed tasks (whose keyfire jobs live on the
/// shards, their queue records under the meta tag, in other slots) become ready once each, not
/// before their instant, and are popped and finished once each.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delay_queue_works_on_a_sharded_cluster() {
    let _turn = crate::TOPOLOGY.lock().await;
    let cluster = RedisCluster::start(3, 0).expect("cluster");
    let clock = RedisServer::start().unwrap();
    let recorder = Recorder::new(&clock.url()).await;
    let s = cluster_settings("kq", &cluster, 12);
    let mut registry = registry(&recorder);
    keyfire::queue::serve_topics(&mut registry, &s.redis);
    let mut node_settings = s.clone();
    node_settings.node.id = "q".into();
    let node = Node::new(node_settings, registry).start().await.unwrap();
    let queue = keyfire::queue::Queue::connect(&s).await.unwrap();
    let mut due = HashMap::new();
    for i in 0..200u64 {
        let delay = Duration::from_millis(300 + (i * 7) % 1_500);
        let task = keyfire::queue::NewTask::new("orders", serde_json::json!({ "i": i }))
            .delay(delay)
            .id(format!("o{i}"));
        let before = clock_ms(&clock).await;
        let id = queue.add_task(task).await.unwrap();
        due.insert(id, before + delay.as_millis() as i64);
    }
    let mut got: HashMap<String, i64> = HashMap::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while got.len() < 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of 200 tasks delivered",
            got.len()
        );
        if let Some(r) = queue
            .pop("orders", Duration::from_millis(500))
            .await
            .unwrap()
        {
            let at = clock_ms(&clock).await;
            assert!(
                got.insert(r.id.clone(), at).is_none(),
                "{} delivered twice",
                r.id
            );
            queue.finish(&r.id, &r.token).await.unwrap();
        }
    }
    for (id, at) in &got {
        assert!(*at >= due[id], "{id} delivered {} ms early", due[id] - at);
    }
    // Nothing more comes.
    assert!(
        queue
            .pop("orders", Duration::from_millis(500))
            .await
            .unwrap()
            .is_none()
    );
    node.shutdown().await;
}

/// Topology changes: a master is added and the slots rebalanced onto it (keys migrate with
/// `MIGRATE`) while 4,000 tasks fire: each runs exactly once, and every node subscribes to
/// expired events on the new master.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_resharding_onto_a_new_master_loses_and_doubles_nothing() {
    let _turn = crate::TOPOLOGY.lock().await;
    let mut cluster = RedisCluster::start(3, 0).expect("cluster");
    let clock = RedisServer::start().unwrap();
    let recorder = Recorder::new(&clock.url()).await;
    let s = cluster_settings("kr", &cluster, 12);
    let nodes = start_nodes(&s, &recorder).await;
    let client = Client::connect(&s).await.unwrap().allow_handlers(["rec"]);
    let store = Store::open(&s.redis).await.unwrap();
    let base = clock_ms(&clock).await + 1_000;
    client
        .enqueue_many(one_shots(4_000, base, 12_000))
        .await
        .unwrap();
    recorder
        .wait_until(Duration::from_secs(30), "runs before the change", |s| {
            s.len() >= 500
        })
        .await;
    let started = std::time::Instant::now();
    let added = cluster.add_master().unwrap();
    cluster.rebalance().unwrap();
    let masters = cluster.masters().unwrap();
    eprintln!(
        "resharding: added {added}, rebalanced in {} ms; masters {masters:?}",
        started.elapsed().as_millis()
    );
    assert!(
        masters.contains(&added),
        "{added} serves no slots: {masters:?}"
    );
    let tags: Vec<String> = store.shards().iter().map(|k| k.due()).collect();
    let owners = store.connection().master_of_keys(&tags).await.unwrap();
    assert!(
        owners.contains(&added),
        "no shard moved to {added}: {owners:?}"
    );

    // Every node follows: three subscribers on the new master (the re-read runs every 2 s).
    let mut c = redis::Client::open(format!("redis://{added}"))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let what = format!("three subscribers on {added}");
    wait::until(&what, Duration::from_secs(10), async || {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .arg("TYPE")
            .arg("pubsub")
            .query_async(&mut c)
            .await
            .unwrap();
        match list.lines().count() >= 3 {
            true => Ok(()),
            false => Err(format!("subscribers: {list}")),
        }
    })
    .await;

    recorder.wait_count(4_000, Duration::from_secs(60)).await;
    wait_idle(&store, Duration::from_secs(20)).await;
    let (_, _, max, line) = assert_exactly_once(&recorder.seen(), 4_000);
    eprintln!("resharding: {line}");
    assert!(max < 10_000, "{line}");
    for n in nodes {
        n.shutdown().await;
    }
}

/// `keyfire dev --cluster`: its own 3-master cluster with replicas, a node, the demo jobs
/// firing; Ctrl-C stops it cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyfire_dev_cluster_shows_firings() {
    let _turn = crate::TOPOLOGY.lock().await;
    let lines = tokio::task::spawn_blocking(|| crate::support::run_keyfire_dev(&["--cluster"]))
        .await
        .unwrap();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("dev Redis Cluster started")),
        "{}",
        lines.join("\n")
    );
}

/// A Redis Cluster as a managed service offers it (CONFIG, DEBUG, ACL, ROLE, COMMAND and
/// MONITOR renamed away; CLUSTER SLOTS kept): a node checks every master's expired events by a
/// probe key in that master's own slots (events are local to the server that expires the
/// key), starts and fires; with one master's events off, a node refuses, naming that master.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_managed_cluster_is_probed_master_by_master() {
    let _turn = crate::TOPOLOGY.lock().await;
    let cluster = RedisCluster::start_managed(3, 0).expect("cluster");
    let clock = RedisServer::start().unwrap();
    let recorder = Recorder::new(&clock.url()).await;
    let mut s = cluster_settings("kmc", &cluster, 6);
    s.node.id = "a".into();
    let node = Node::new(s.clone(), registry(&recorder))
        .start()
        .await
        .expect("a node starts on a managed cluster");
    let client = Client::connect(&s).await.unwrap().allow_handlers(["rec"]);
    let base = clock_ms(&clock).await + 1_000;
    client.enqueue_many(one_shots(60, base, 500)).await.unwrap();
    recorder.wait_count(60, Duration::from_secs(20)).await;
    assert_exactly_once(&recorder.seen(), 60);
    node.shutdown().await;

    // One master's events off: the probe of that master fails, and the error names it.
    let masters = cluster.masters().unwrap();
    let off = &masters[1];
    let server = cluster
        .servers()
        .iter()
        .find(|r| &r.addr() == off)
        .expect("the master's process");
    server.config_set("notify-keyspace-events", "").await;
    let err = Node::new(s.clone(), registry(&recorder))
        .start()
        .await
        .err()
        .expect("a node starts with a master's events off");
    let text = err.to_string();
    assert!(
        text.contains(off.as_str()) && text.contains("probe key"),
        "{text}"
    );
}

/// One master of a cluster comes back empty (`FLUSHALL` on it): the nodes notice by the
/// shards' data markers within 5 s, first for a master holding shards only, then for the
/// master holding the meta tag; after that one they register their handlers again, so a
/// delayed topic add (refused while no node serves topics) is taken again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_heal_after_a_cluster_master_loses_its_data() {
    let _turn = crate::TOPOLOGY.lock().await;
    let cluster = RedisCluster::start(3, 0).expect("cluster");
    let clock = RedisServer::start().unwrap();
    let recorder = Recorder::new(&clock.url()).await;
    let s = cluster_settings("kl", &cluster, 3);
    let mut nodes = Vec::new();
    for id in ["a", "b"] {
        let mut ns = s.clone();
        ns.node.id = id.into();
        let mut registry = registry(&recorder);
        keyfire::queue::serve_topics(&mut registry, &s.redis);
        nodes.push(Node::new(ns, registry).start().await.unwrap());
    }
    let mut losses: Vec<_> = nodes.iter().map(|n| n.data_losses()).collect();
    let store = Store::open(&s.redis).await.unwrap();
    let meta = store
        .connection()
        .master_of_keys(&[store.keys().nodes()])
        .await
        .unwrap()[0]
        .clone();
    let tags: Vec<String> = store.shards().iter().map(|k| k.due()).collect();
    let owners = store.connection().master_of_keys(&tags).await.unwrap();
    let shard_only = owners
        .iter()
        .find(|m| **m != meta)
        .expect("a master with shards and not the meta tag")
        .clone();
    // Every node learns the markers at its heartbeat: wait for a beat of each that saw both
    // nodes (the live set is read in the same beat, after the markers).
    keyfire_testkit::world::wait_all_seen(&nodes, 2).await;

    for (round, master) in [shard_only, meta].into_iter().enumerate() {
        let mut c = redis::Client::open(format!("redis://{master}"))
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let _: () = redis::cmd("FLUSHALL").query_async(&mut c).await.unwrap();
        for (i, rx) in losses.iter_mut().enumerate() {
            tokio::time::timeout(Duration::from_secs(5), rx.changed())
                .await
                .unwrap_or_else(|_| panic!("node {i} did not notice round {round} in 5 s"))
                .unwrap();
            assert_eq!(*rx.borrow(), round as u64 + 1, "node {i}");
        }
    }
    // A fresh client (nothing cached): a delayed add needs a node that serves topics.
    let queue = keyfire::queue::Queue::connect(&s).await.unwrap();
    wait::until(
        "a delayed add taken again after the loss",
        Duration::from_secs(5),
        async || {
            let task = keyfire::queue::NewTask::new("after-loss", serde_json::json!({}))
                .delay(Duration::from_secs(60));
            queue.add_task(task).await
        },
    )
    .await;
    for n in nodes {
        n.shutdown().await;
    }
}
