//! The reads a tool makes without the library's internals: [`Client`]'s figures of a running
//! cluster, and [`keyfire::inspect`]'s diagnostics of one server, a deployment and the data
//! under a prefix; each against a real redis-server (testkit), through the public API only.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use keyfire::config::RedisMode;
use keyfire::inspect::{self, Deployment, Server};
use keyfire::{Client, JobSpec, JobStatus, Node, Registry, Settings};
use keyfire_testkit::{RedisCluster, RedisServer};

fn settings(redis: &RedisServer, prefix: &str) -> Settings {
    let mut s = Settings::default();
    s.redis.url = redis.url();
    s.redis.prefix = prefix.into();
    s
}

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_reads_what_the_cluster_is_doing() {
    let redis = RedisServer::start().expect("start redis-server");
    let settings = settings(&redis, "reads");
    let node = Node::new(settings.clone(), Registry::with_builtins())
        .start()
        .await
        .expect("start a node");
    let client = Client::connect(&settings).await.expect("connect");

    client.ping().await.expect("PING");
    let now = client.time_ms().await.unwrap();
    assert!((now - wall_ms()).abs() < 60_000, "Redis's clock: {now}");

    // A job far in the future and a task due now (the node runs it).
    client
        .upsert(JobSpec::cron("nightly", "0 3 * * *", "log"))
        .await
        .unwrap();
    let task = client
        .enqueue(JobSpec::after("", "1h", "log"))
        .await
        .unwrap();
    let ids = client.list_ids(None, 10).await.unwrap();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.contains(&"nightly".to_string()) && ids.contains(&task.spec.id));
    assert_eq!(
        client.list_ids(Some(&ids[1]), 10).await.unwrap(),
        Vec::<String>::new()
    );

    // get_many keeps order, leaves out what does not exist, and takes an empty list.
    let mut asked = ids.clone();
    asked.insert(1, "gone".into());
    let read = client.get_many(&asked).await.unwrap();
    let read_ids: Vec<&str> = read.iter().map(|r| r.spec.id.as_str()).collect();
    assert_eq!(read_ids, [ids[0].as_str(), ids[1].as_str()]);
    assert!(client.get_many(&[]).await.unwrap().is_empty());
    assert_eq!(
        client.find("nightly").await.unwrap().unwrap().status,
        JobStatus::Active
    );
    assert!(client.find("gone").await.unwrap().is_none());

    let (fields, dead) = client
        .job_fields(&asked, &["status", "runs", "version"])
        .await
        .unwrap();
    assert_eq!(dead, [0, 0, 0]);
    assert_eq!(fields[0][0].as_deref(), Some("active"), "{fields:?}");
    assert_eq!(fields[0][2].as_deref(), Some("1"), "{fields:?}");
    assert_eq!(fields[1], [None, None, None], "no such job: {fields:?}");
    assert_eq!(fields[2][0].as_deref(), Some("active"), "{fields:?}");
    assert_eq!(
        client.job_fields(&[], &["status"]).await.unwrap().0.len(),
        0
    );

    let totals = client.totals(now).await.unwrap();
    assert_eq!(totals.jobs, 2, "{totals:?}");
    assert_eq!(totals.due, 0, "nothing is due yet: {totals:?}");
    let (heads_now, heads) = client.due_heads().await.unwrap();
    assert_eq!(heads.len(), 1, "one shard");
    let head = heads[0].expect("a pending firing");
    assert!(
        head > heads_now,
        "the earliest firing is ahead: {head} vs {heads_now}"
    );
    // At the earliest firing, the totals count it due.
    assert_eq!(client.totals(head).await.unwrap().due, 1);

    let live = client.live_nodes(30_000).await.unwrap();
    assert_eq!(live.len(), 1, "{live:?}");
    let (id, seen, hash) = &live[0];
    assert_eq!(id, node.id());
    assert!((seen - now).abs() < 30_000, "heartbeat {seen} vs {now}");
    assert!(hash.contains_key("info"), "{hash:?}");

    // The shipped redis.conf turns expired events on.
    let flags = client
        .notify_flags()
        .await
        .unwrap()
        .expect("CONFIG answers");
    assert!(inspect::has_expired_events(&flags), "{flags}");

    let memory = client.memory().await.unwrap();
    assert_eq!(memory.len(), 1, "{memory:?}");
    assert_eq!(memory[0].server, redis.addr());
    assert!(memory[0].used > 0);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_clone_of_a_client_shares_its_connection() {
    let redis = RedisServer::start().expect("start redis-server");
    let client = Client::connect(&settings(&redis, "clone"))
        .await
        .unwrap()
        .allow_handlers(["log"]);
    let clone = client.clone();
    clone
        .upsert(JobSpec::every("tick", "1m", "log"))
        .await
        .expect("the clone knows the handlers the client was given");
    assert!(client.find("tick").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn one_server_is_read_directly() {
    let redis = RedisServer::start().expect("start redis-server");
    let server = Server::open(&redis.url()).unwrap();
    assert_eq!(server.addr(), redis.addr());
    let mut conn = server.connect().await.unwrap();
    conn.ping().await.unwrap();

    let info = conn.info().await.unwrap();
    assert_eq!(info.get("role").map(String::as_str), Some("master"));
    assert!(info.contains_key("redis_version"), "{info:?}");
    let flags = conn.config_get("notify-keyspace-events").await.unwrap();
    assert!(inspect::has_expired_events(&flags.unwrap()));
    assert_eq!(
        conn.config_get("maxmemory-policy")
            .await
            .unwrap()
            .as_deref(),
        Some("noeviction")
    );
    assert_eq!(conn.config_get("no-such-setting").await.unwrap(), None);

    let time = conn.time().await.unwrap().as_millis() as i64;
    assert!((time - wall_ms()).abs() < 60_000, "TIME: {time}");

    let took = server
        .probe_expired_events(&inspect::probe_key("direct"), inspect::PROBE_BOUND)
        .await
        .unwrap();
    assert!(
        took.is_some(),
        "the shipped redis.conf emits expired events"
    );
    // With the events off, the probe waits its bound and says so.
    redis.config_set("notify-keyspace-events", "").await;
    let key = inspect::probe_key("direct");
    let took = server
        .probe_expired_events(&key, Duration::from_millis(300))
        .await
        .unwrap();
    assert_eq!(took, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_data_under_a_prefix_is_read_as_stored() {
    let redis = RedisServer::start().expect("start redis-server");
    let server = Server::open(&redis.url()).unwrap();
    let conn = server.connect().await.unwrap();

    let data = conn.data("fresh");
    assert_eq!(
        data.layout().await.unwrap(),
        inspect::StoredLayout::default()
    );
    assert_eq!(data.job_count(1).await.unwrap(), 0);
    assert_eq!(data.acl_denied().await, Vec::<String>::new());

    // Four shards: the layout says so, and the jobs are counted over all of them.
    let mut s = settings(&redis, "sharded");
    s.redis.shards = 4;
    let client = Client::connect(&s).await.unwrap().allow_handlers(["log"]);
    for i in 0..10 {
        client
            .upsert(JobSpec::every(format!("job-{i}"), "1h", "log"))
            .await
            .unwrap();
    }
    client
        .enqueue(JobSpec::after("", "1h", "log"))
        .await
        .unwrap();
    let data = conn.data("sharded");
    let layout = data.layout().await.unwrap();
    assert_eq!(
        layout.version.as_deref(),
        Some(inspect::LAYOUT_VERSION.to_string().as_str())
    );
    assert_eq!(layout.shards.as_deref(), Some("4"));
    assert_eq!(data.job_count(4).await.unwrap(), 11);
    assert!(
        data.job_count(1).await.unwrap() < 11,
        "one shard holds some only"
    );

    // The same through the deployment, as a node reaches it.
    let deployment = Deployment::connect(&s.redis).await.unwrap();
    assert_eq!(deployment.data("sharded").layout().await.unwrap(), layout);
    assert_eq!(deployment.data("sharded").job_count(4).await.unwrap(), 11);

    // A user kept to other keys is refused what keyfire needs, each probe named.
    let rules = ["on", ">secret", "~other:*", "&other:*", "+@all"].map(String::from);
    redis.acl_setuser("narrow", &rules).await;
    let narrow = Server::open(&format!("redis://narrow:secret@{}/0", redis.addr())).unwrap();
    let denied = narrow
        .connect()
        .await
        .unwrap()
        .data("sharded")
        .acl_denied()
        .await;
    for probe in [
        "EXISTS {sharded}:doctor:probe",
        "DEL {sharded:1}:doctor:probe",
        "SPUBLISH {sharded:1}:doctor:probe",
    ] {
        assert!(denied.iter().any(|d| d == probe), "{probe} in {denied:?}");
    }
    assert!(!denied.iter().any(|d| d == "TIME"), "{denied:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_standalone_deployment_is_its_one_master() {
    let redis = RedisServer::start().expect("start redis-server");
    let s = settings(&redis, "alone");
    let deployment = Deployment::connect(&s.redis).await.unwrap();
    let masters = deployment.masters().await.unwrap();
    assert_eq!(
        masters.iter().map(Server::addr).collect::<Vec<_>>(),
        [redis.addr()]
    );
    assert_eq!(
        deployment.shard_masters("alone", 3).await.unwrap(),
        vec![redis.addr(); 3]
    );
    assert_eq!(
        deployment.meta_master("alone").await.unwrap(),
        Some(redis.addr())
    );
    let keys = deployment.probe_keys("alone", &masters).await.unwrap();
    assert_eq!(keys.len(), 1);
    assert!(
        keys[0].as_deref().unwrap().starts_with("{alone}:"),
        "{keys:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_is_read_master_by_master() {
    let cluster = RedisCluster::start(3, 0).expect("start a Redis Cluster");
    let mut s = Settings::default();
    s.redis.mode = RedisMode::Cluster;
    s.redis.nodes = cluster.nodes();
    s.redis.prefix = "spread".into();
    let deployment = Deployment::connect(&s.redis).await.unwrap();
    let masters = deployment.masters().await.unwrap();
    assert_eq!(masters.len(), 3);
    let addrs: Vec<String> = masters.iter().map(Server::addr).collect();

    // Twelve shards over three masters with equal slot ranges: four each.
    let owners = deployment.shard_masters("spread", 12).await.unwrap();
    assert_eq!(owners.len(), 12);
    for addr in &addrs {
        let n = owners.iter().filter(|o| *o == addr).count();
        assert_eq!(n, 4, "{addr} holds {n} of {owners:?}");
    }
    let meta = deployment.meta_master("spread").await.unwrap().unwrap();
    assert!(addrs.contains(&meta), "{meta} among {addrs:?}");

    // Each master gets a probe key of its own slots, and its expired event comes.
    let keys = deployment.probe_keys("spread", &masters).await.unwrap();
    for (master, key) in masters.iter().zip(keys) {
        let key = key.expect("a probe key on every master");
        let took = master
            .probe_expired_events(&key, inspect::PROBE_BOUND)
            .await
            .unwrap();
        assert!(took.is_some(), "{} emits expired events", master.addr());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sentinel_names_the_master_it_monitors() {
    let master = RedisServer::start().expect("start redis-server");
    let sentinel =
        RedisServer::start_sentinel("main", "127.0.0.1", master.port()).expect("start a sentinel");
    let mut s = Settings::default();
    s.redis.sentinel_master = "main".into();
    let url = format!("redis://{}", sentinel.addr());
    assert_eq!(
        inspect::sentinel_master(&url, &s.redis).await.unwrap(),
        Some(format!("127.0.0.1:{}", master.port()))
    );
    // A bare host:port works too.
    assert_eq!(
        inspect::sentinel_master(&sentinel.addr(), &s.redis)
            .await
            .unwrap(),
        Some(format!("127.0.0.1:{}", master.port()))
    );
    s.redis.sentinel_master = "other".into();
    assert_eq!(
        inspect::sentinel_master(&url, &s.redis).await.unwrap(),
        None
    );
}
