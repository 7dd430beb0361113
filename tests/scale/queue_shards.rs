//! The delay queue sharded by topic on a 3-master Redis Cluster: topics spread over the masters,
//! the partitions of one topic on different masters, the meta tag's commands flat however
//! many tasks pass, the upgrade from the meta-tag layout of earlier releases, and a rolling
//! upgrade beside a node of the previous release.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use keyfire::config::RedisMode;
use keyfire::engine::NodeHandle;
use keyfire::queue::{NewTask, Queue};
use keyfire::store::{Keys, Store};
use keyfire::{Node, Registry, Settings};
use keyfire_testkit::RedisCluster;
use redis::aio::MultiplexedConnection;

use crate::support::{command_calls, fast_node, json_of, wait};

/// An HTTP client (reqwest is built without a default TLS provider).
fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

fn settings(prefix: &str, cluster: &RedisCluster) -> Settings {
    let mut s = Settings::default();
    s.redis.prefix = prefix.to_string();
    s.redis.mode = RedisMode::Cluster;
    s.redis.nodes = cluster.nodes();
    s.redis.shards = 12;
    fast_node(&mut s.node);
    s
}

async fn queue_node(s: &Settings, id: &str) -> NodeHandle {
    let mut registry = Registry::with_builtins();
    keyfire::queue::serve_topics(&mut registry, &s.redis);
    let mut s = s.clone();
    s.node.id = id.into();
    Node::new(s, registry).start().await.expect("start node")
}

/// Node `n1` serving the queue on `s`, and a queue once it has switched to the sharded layout.
async fn sharded_queue(s: &Settings) -> (NodeHandle, Queue) {
    let node = queue_node(s, "n1").await;
    let queue = Queue::connect(s).await.unwrap();
    wait_sharded(&queue, Duration::from_secs(20)).await;
    (node, queue)
}

/// A pop of `topic` gets nothing within 300 ms.
async fn assert_nothing_more(queue: &Queue, topic: &str) {
    let got = queue.pop(topic, Duration::from_millis(300)).await.unwrap();
    assert!(got.is_none(), "more came: {got:?}");
}

/// Wait (up to `limit`) until the queue has switched to the sharded layout.
async fn wait_sharded(queue: &Queue, limit: Duration) {
    wait::until("the queue on the sharded layout", limit, async || {
        queue.is_sharded().await.unwrap()
    })
    .await;
}

async fn master_conns(cluster: &RedisCluster) -> Vec<(String, MultiplexedConnection)> {
    let mut out = Vec::new();
    for m in cluster.masters().unwrap() {
        let c = redis::Client::open(format!("redis://{m}"))
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        out.push((m, c));
    }
    out
}

/// Every command a server ran so far (`INFO commandstats`, the commands of scripts included).
async fn calls(c: &mut MultiplexedConnection) -> u64 {
    let mut calls = command_calls(c).await;
    calls.remove("info");
    calls.values().sum()
}

async fn all_calls(conns: &mut [(String, MultiplexedConnection)]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (m, c) in conns.iter_mut() {
        out.insert(m.clone(), calls(c).await);
    }
    out
}

/// The master holding each of `keys`.
async fn masters_of(store: &Store, keys: &[String]) -> Vec<String> {
    store.connection().master_of_keys(keys).await.unwrap()
}

/// The ready-set key of partition `p` of `topic` with `n` partitions (where its keys live).
fn partition_key(store: &Store, topic: &str, p: usize, n: usize) -> String {
    let shards = store.shards();
    shards
        .keys(shards.of_partition(topic, p, n))
        .qready(&Keys::qpart(topic, p))
}

/// Pop (up to 100 at a time) and finish until `n` deliveries came in all or `limit` passed:
/// each task's deliveries, by id.
async fn drain(queue: &Queue, topic: &str, n: usize, limit: Duration) -> HashMap<String, usize> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let end = tokio::time::Instant::now() + limit;
    while seen.values().sum::<usize>() < n && tokio::time::Instant::now() < end {
        let got = queue
            .pop_many(topic, 100, Duration::from_millis(200))
            .await
            .unwrap();
        if got.is_empty() {
            continue;
        }
        let pairs: Vec<(String, String)> = got
            .iter()
            .map(|r| (r.id.clone(), r.token.clone()))
            .collect();
        for r in &got {
            *seen.entry(r.id.clone()).or_default() += 1;
        }
        let done = queue.finish_many(&pairs).await.unwrap();
        assert!(
            done.iter()
                .all(|f| matches!(f, keyfire::queue::Finished::Done)),
            "{done:?}"
        );
    }
    seen
}

fn assert_once(seen: &HashMap<String, usize>, ids: &HashSet<String>) {
    let doubled: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(doubled.is_empty(), "delivered more than once: {doubled:?}");
    let missing: Vec<_> = ids.iter().filter(|id| !seen.contains_key(*id)).collect();
    assert!(
        missing.is_empty(),
        "{} of {} never delivered: {:?}",
        missing.len(),
        ids.len(),
        missing.iter().take(10).collect::<Vec<_>>()
    );
    assert_eq!(
        seen.len(),
        ids.len(),
        "tasks delivered that were never added"
    );
}

/// Twelve topics land on all three masters; a topic of three partitions has one on each
/// master; delayed and ready tasks of all of them are delivered once each.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn topics_and_the_partitions_of_one_topic_spread_over_three_masters() {
    let _turn = crate::TOPOLOGY.lock().await;
    let cluster = RedisCluster::start(3, 0).expect("cluster");
    let s = settings("kqs", &cluster);
    let (node, queue) = sharded_queue(&s).await;
    queue.set_partitions("hot", 3).await.unwrap();
    assert_eq!(queue.partitions("hot").await.unwrap(), 3);
    let store = queue.store().clone();

    let hot: Vec<String> = (0..3).map(|p| partition_key(&store, "hot", p, 3)).collect();
    let hot_masters: HashSet<String> = masters_of(&store, &hot).await.into_iter().collect();
    assert_eq!(
        hot_masters.len(),
        3,
        "partitions of `hot` on {hot_masters:?}"
    );
    let topics: Vec<String> = (0..12).map(|i| format!("t{i}")).collect();
    let keys: Vec<String> = topics
        .iter()
        .map(|t| partition_key(&store, t, 0, 1))
        .collect();
    let topic_masters: HashSet<String> = masters_of(&store, &keys).await.into_iter().collect();
    assert_eq!(topic_masters.len(), 3, "topics on {topic_masters:?}");

    let mut conns = master_conns(&cluster).await;
    let before = all_calls(&mut conns).await;
    let mut ids = HashSet::new();
    let mut tasks = Vec::new();
    for (i, t) in topics.iter().enumerate() {
        for j in 0..50 {
            let id = format!("{t}-{j}");
            ids.insert(id.clone());
            tasks.push(
                NewTask::new(t, serde_json::json!({"j": j}))
                    .delay(Duration::from_millis(200 + ((i * 50 + j) as u64 * 7) % 800))
                    .id(id),
            );
        }
    }
    queue.add_many(tasks).await.unwrap();
    let mut hot_ids = HashSet::new();
    for chunk in (0..3_000).collect::<Vec<_>>().chunks(500) {
        let tasks = chunk
            .iter()
            .map(|j| {
                hot_ids.insert(format!("h{j}"));
                NewTask::new("hot", serde_json::json!({"j": j})).id(format!("h{j}"))
            })
            .collect();
        queue.add_many(tasks).await.unwrap();
    }
    let seen = drain(&queue, "hot", 3_000, Duration::from_secs(60)).await;
    assert_once(&seen, &hot_ids);
    let mut all = HashMap::new();
    for t in &topics {
        all.extend(drain(&queue, t, 50, Duration::from_secs(30)).await);
    }
    assert_once(&all, &ids);
    let after = all_calls(&mut conns).await;
    let per_master: BTreeMap<&String, u64> =
        after.iter().map(|(m, n)| (m, n - before[m])).collect();
    eprintln!("queue_shards: commands per master for 3,600 tasks: {per_master:?}");
    for (m, n) in &per_master {
        assert!(
            *n > 3_000,
            "master {m} ran only {n} commands: the load did not spread"
        );
    }
    let counts = queue.topics().await.unwrap();
    let hot_counts = counts.iter().find(|c| c.topic == "hot").unwrap();
    assert_eq!(
        (hot_counts.partitions, hot_counts.added, hot_counts.done),
        (3, 3_000, 3_000)
    );
    node.shutdown().await;
}

/// The commands the meta tag's master runs do not grow with the tasks and pops of topics
/// elsewhere: 1,000 tasks and 5,000 tasks (added, popped and finished in batches) cost it the
/// same handful of commands, while the partitions' masters run several per task.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_meta_tag_runs_no_command_per_task_or_pop() {
    let _turn = crate::TOPOLOGY.lock().await;
    let cluster = RedisCluster::start(3, 0).expect("cluster");
    let s = settings("kqm", &cluster);
    let (node, queue) = sharded_queue(&s).await;
    // No node runs while counting: its heartbeats and sweeps cost the meta tag commands by
    // the second, not by the task (ready tasks need no node).
    node.shutdown().await;
    let store = queue.store().clone();
    let meta = masters_of(&store, &[store.keys().qtopics()])
        .await
        .remove(0);
    // A topic of two partitions on the other two masters.
    let mut topic = None;
    for i in 0.. {
        let t = format!("m{i}");
        let keys: Vec<String> = (0..2).map(|p| partition_key(&store, &t, p, 2)).collect();
        let ms = masters_of(&store, &keys).await;
        if !ms.contains(&meta) && ms[0] != ms[1] {
            topic = Some(t);
            break;
        }
    }
    let topic = topic.unwrap();
    queue.set_partitions(&topic, 2).await.unwrap();
    // Warm: the topic is registered, the scripts loaded, the layout read.
    queue
        .add_task(NewTask::new(&topic, serde_json::json!(0)).id("warm"))
        .await
        .unwrap();
    drain(&queue, &topic, 1, Duration::from_secs(10)).await;

    let mut conns = master_conns(&cluster).await;
    let mut meta_costs = Vec::new();
    for (round, n) in [1_000usize, 5_000].into_iter().enumerate() {
        let before = all_calls(&mut conns).await;
        let mut ids = HashSet::new();
        let tasks: Vec<NewTask> = (0..n)
            .map(|i| {
                let id = format!("r{round}-{i}");
                ids.insert(id.clone());
                NewTask::new(&topic, serde_json::json!({"i": i})).id(id)
            })
            .collect();
        for chunk in tasks.chunks(500) {
            queue.add_many(chunk.to_vec()).await.unwrap();
        }
        let seen = drain(&queue, &topic, n, Duration::from_secs(60)).await;
        assert_once(&seen, &ids);
        let after = all_calls(&mut conns).await;
        let delta: BTreeMap<&String, u64> = after.iter().map(|(m, c)| (m, c - before[m])).collect();
        eprintln!(
            "queue_shards: {n} tasks: commands per master {delta:?} (meta tag on {meta}): \
             meta {} commands, {:.4} per task",
            delta[&meta],
            delta[&meta] as f64 / n as f64
        );
        for (m, c) in &delta {
            if **m != meta {
                assert!(
                    *c as usize >= n,
                    "partition master {m}: {c} commands for {n} tasks"
                );
            }
        }
        meta_costs.push(delta[&meta]);
    }
    // Five times the tasks, not more meta commands: a few reads of the layout (every 5 s)
    // and the INFO calls of this test at most.
    for c in &meta_costs {
        assert!(*c <= 40, "the meta tag ran {meta_costs:?} commands");
    }
}

/// Tasks stored in the meta-tag layout of earlier releases (records and sets under `{prefix}`,
/// written here with the old scripts' key shapes), ready, delayed and reserved, are delivered
/// once each after nodes of this release switch the queue to the sharded layout and move them
/// to the topic's partitions; the reservation made before the upgrade still finishes with
/// its token.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tasks_of_the_meta_layout_are_delivered_once_after_the_upgrade() {
    let _turn = crate::TOPOLOGY.lock().await;
    let cluster = RedisCluster::start(3, 0).expect("cluster");
    let s = settings("kqu", &cluster);
    let store = Store::open(&s.redis).await.unwrap();
    store.check_layout().await.unwrap();
    let k = store.keys().clone();
    let mut c = store.connection();
    let now = keyfire::store::redis_time_ms(&mut c).await.unwrap();
    let topic = "legacy";
    let mut ids = HashSet::new();
    let mut pipe = redis::pipe();
    for i in 0..60 {
        let id = format!("old-r{i}");
        pipe.hset_multiple(
            k.qtask(&id),
            &[
                ("state", "ready".to_string()),
                ("topic", topic.to_string()),
                ("payload", format!("{{\"i\":{i}}}")),
                ("due", now.to_string()),
                ("created", now.to_string()),
                ("deliveries", "0".to_string()),
                ("ttr", "60000".to_string()),
                ("max", "5".to_string()),
                ("ready_at", now.to_string()),
            ],
        )
        .zadd(k.qready(topic), &id, now);
        ids.insert(id);
    }
    for i in 0..60 {
        let id = format!("old-d{i}");
        let due = now + 1_500 + i * 20;
        pipe.hset_multiple(
            k.qtask(&id),
            &[
                ("state", "delayed".to_string()),
                ("topic", topic.to_string()),
                ("payload", format!("{{\"i\":{i}}}")),
                ("due", due.to_string()),
            ],
        )
        .zadd(k.qdelayed(topic), &id, due);
        ids.insert(id);
    }
    // One reserved by a consumer of the earlier release, its token a plain UUID.
    let token = format!("{}.{topic}", uuid::Uuid::new_v4().simple());
    pipe.hset_multiple(
        k.qtask("old-held"),
        &[
            ("state", "reserved".to_string()),
            ("topic", topic.to_string()),
            ("payload", "{}".to_string()),
            ("due", now.to_string()),
            ("deliveries", "1".to_string()),
            ("ttr", "60000".to_string()),
            ("max", "5".to_string()),
            ("token", token.clone()),
            ("deadline", (now + 60_000).to_string()),
        ],
    )
    .zadd(k.qreserved(topic), "old-held", now + 60_000)
    .sadd(k.qtopics(), topic)
    .hincr(k.qstats(topic), "added", 121);
    let () = pipe.query_async(&mut c).await.unwrap();

    // Declared before the switch: the moved tasks spread over three partitions.
    let queue = Queue::connect(&s).await.unwrap();
    assert!(!queue.is_sharded().await.unwrap());
    queue.set_partitions(topic, 3).await.unwrap();
    let node = queue_node(&s, "n1").await;
    wait_sharded(&queue, Duration::from_secs(20)).await;

    let seen = drain(&queue, topic, ids.len(), Duration::from_secs(60)).await;
    assert_once(&seen, &ids);
    queue.finish("old-held", &token).await.unwrap();
    assert_eq!(
        queue.get("old-held").await.unwrap().state,
        keyfire::queue::TaskState::Done
    );
    // Nothing is left under the meta tag but the done record of the held task.
    let left: (u64, u64, u64) = redis::pipe()
        .zcard(k.qready(topic))
        .zcard(k.qdelayed(topic))
        .zcard(k.qreserved(topic))
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(left, (0, 0, 0));
    let counts = queue.topics().await.unwrap();
    let t = counts.iter().find(|t| t.topic == topic).unwrap();
    assert_eq!((t.added, t.done, t.partitions), (121, 121, 3), "{t:?}");
    // Nothing more comes.
    assert_nothing_more(&queue, topic).await;
    node.shutdown().await;
}

/// A node of the previous release, run from its binary (`KEYFIRE_OLD_BIN`).
struct OldNode {
    child: std::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl OldNode {
    async fn start(bin: &str, s: &Settings) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.toml");
        let nodes: Vec<String> = s.redis.nodes.iter().map(|n| format!("\"{n}\"")).collect();
        std::fs::write(
            &path,
            format!(
                "[redis]\nmode = \"cluster\"\nnodes = [{}]\nshards = {}\nprefix = \"{}\"\n\n\
                 [node]\nid = \"old\"\n\n[api]\nlisten = \"127.0.0.1:{port}\"\n",
                nodes.join(", "),
                s.redis.shards,
                s.redis.prefix
            ),
        )
        .unwrap();
        let child = std::process::Command::new(bin)
            .arg("serve")
            .arg("--config")
            .arg(&path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("run the previous release's keyfire");
        let url = format!("http://127.0.0.1:{port}");
        let http = http();
        wait::until(
            "the old node ready (/readyz)",
            Duration::from_secs(30),
            async || {
                let r = http.get(format!("{url}/readyz")).send().await;
                let status = r.map_err(|e| e.to_string())?.status();
                match status.is_success() {
                    true => Ok(()),
                    false => Err(format!("status {status}")),
                }
            },
        )
        .await;
        Self {
            child,
            url,
            _dir: dir,
        }
    }

    /// SIGINT, and wait until it has left.
    fn stop(mut self) {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGINT);
        let _ = self.child.wait();
    }
}

impl Drop for OldNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// Add task `id` (`{"i": i}`, delayed `delay_ms`) to `topic` through the library. Its id.
async fn add_new(queue: &Queue, topic: &str, id: String, i: u64, delay_ms: u64) -> String {
    queue
        .add_task(
            NewTask::new(topic, serde_json::json!({"i": i}))
                .delay(Duration::from_millis(delay_ms))
                .id(id.clone()),
        )
        .await
        .unwrap();
    id
}

/// The same through the REST API of the node at `url`.
async fn add_old(
    http: &reqwest::Client,
    url: &str,
    topic: &str,
    id: String,
    i: u64,
    delay_ms: u64,
) -> String {
    let r = http
        .post(format!("{url}/v1/topics/{topic}/tasks"))
        .json(&serde_json::json!({"payload": {"i": i}, "delay": format!("{delay_ms}ms"), "id": id}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "old add: {}", r.status());
    id
}

/// A rolling upgrade: a node of the previous release (its binary, `KEYFIRE_OLD_BIN`) and a
/// node and consumers of this one side by side. Tasks are added through both, popped through
/// one and finished through the other; the queue stays in the meta-tag layout while the old
/// node lives. Then the old node leaves, the new one switches the layout, tasks the old node
/// added (some still delayed) move to the partitions, and new tasks go there: every task is
/// delivered exactly once. Skipped (saying so) when `KEYFIRE_OLD_BIN` is not set.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rolling_upgrade_beside_the_previous_release_loses_and_doubles_nothing() {
    let Ok(bin) = std::env::var("KEYFIRE_OLD_BIN") else {
        eprintln!(
            "skipped: set KEYFIRE_OLD_BIN to a keyfire binary of the previous release \
             (`cargo build --bin keyfire` at its commit)"
        );
        return;
    };
    let _turn = crate::TOPOLOGY.lock().await;
    let cluster = RedisCluster::start(3, 0).expect("cluster");
    let s = settings("kqr", &cluster);
    let topic = "orders";
    let old = OldNode::start(&bin, &s).await;
    let node = queue_node(&s, "new").await;
    let queue = Queue::connect(&s).await.unwrap();
    let http = http();
    let mut ids = HashSet::new();

    // Side by side: adds through both releases (delayed), in the meta-tag layout.
    for i in 0..100 {
        ids.insert(add_new(&queue, topic, format!("new-{i}"), i, 200 + i * 10).await);
        ids.insert(add_old(&http, &old.url, topic, format!("old-{i}"), i, 200 + i * 10).await);
    }
    assert!(
        !queue.is_sharded().await.unwrap(),
        "switched beside an old node"
    );
    // Pops through one release, finishes through the other.
    let mut seen: HashMap<String, usize> = HashMap::new();
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut turn = 0;
    let (mut via_old, mut via_new) = (0, 0);
    while seen.len() < 200 {
        assert!(
            tokio::time::Instant::now() < end,
            "{} of 200 delivered",
            seen.len()
        );
        turn += 1;
        if turn % 2 == 0 {
            let r: serde_json::Value = json_of(http.post(format!(
                "{}/v1/topics/{topic}/pop?max=20&wait=200ms",
                old.url
            )))
            .await;
            let pairs: Vec<(String, String)> = r["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    (
                        t["id"].as_str().unwrap().to_string(),
                        t["token"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            for (id, _) in &pairs {
                *seen.entry(id.clone()).or_default() += 1;
            }
            via_old += pairs.len();
            if !pairs.is_empty() {
                let done = queue.finish_many(&pairs).await.unwrap();
                assert!(
                    done.iter()
                        .all(|f| matches!(f, keyfire::queue::Finished::Done)),
                    "{done:?}"
                );
            }
        } else {
            let got = queue
                .pop_many(topic, 20, Duration::from_millis(200))
                .await
                .unwrap();
            for r in &got {
                *seen.entry(r.id.clone()).or_default() += 1;
            }
            via_new += got.len();
            if !got.is_empty() {
                let body = serde_json::json!({"tasks": got.iter().map(|r| serde_json::json!({"id": r.id, "token": r.token})).collect::<Vec<_>>()});
                let r: serde_json::Value = json_of(
                    http.post(format!("{}/v1/topics/{topic}/finish", old.url))
                        .json(&body),
                )
                .await;
                let outcomes = r["results"].as_array().unwrap();
                assert!(outcomes.iter().all(|o| o["outcome"] == "done"), "{r}");
            }
        }
    }
    eprintln!(
        "queue_shards: side by side, {via_old} popped through the old node, {via_new} through the new"
    );
    assert!(via_old > 0 && via_new > 0, "old {via_old}, new {via_new}");
    // Tasks the old node adds due later, still delayed when it leaves.
    for i in 0..100 {
        ids.insert(
            add_old(
                &http,
                &old.url,
                topic,
                format!("late-{i}"),
                i,
                3_000 + i * 20,
            )
            .await,
        );
    }
    old.stop();
    wait_sharded(&queue, Duration::from_secs(45)).await;
    for i in 0..100 {
        ids.insert(add_new(&queue, topic, format!("after-{i}"), i, 100 + i * 5).await);
    }
    let rest = drain(&queue, topic, 200, Duration::from_secs(60)).await;
    for (id, n) in rest {
        *seen.entry(id).or_default() += n;
    }
    assert_once(&seen, &ids);
    assert_nothing_more(&queue, topic).await;
    node.shutdown().await;
}
