//! `store::Conn` in every mode: cluster (scripts, pipelines, the spread of hash tags over
//! masters, failover), sentinel (failover followed by every clone), ACL users and TLS.
//!
//! The topologies' setup and waits are blocking calls; they run in `block_in_place` on a
//! multi-thread runtime, so the connections' background tasks keep running.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use keyfire::config::{RedisMode, RedisSettings};
use keyfire::store::{Conn, Mode};
use keyfire_testkit::{RedisCluster, RedisOptions, RedisSentinelSet, RedisServer};
use redis::AsyncCommands;
use tokio::task::block_in_place;

use crate::support::wait;

/// `host:port` of a client's server.
fn addr_of(client: &redis::Client) -> String {
    match client.get_connection_info().addr() {
        redis::ConnectionAddr::Tcp(h, p) => format!("{h}:{p}"),
        redis::ConnectionAddr::TcpTls { host, port, .. } => format!("{host}:{port}"),
        other => panic!("unexpected address {other:?}"),
    }
}

async fn role(client: &redis::Client) -> String {
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut c).await.unwrap();
    match &role[0] {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("ROLE: {other:?}"),
    }
}

const ADD: &str =
    "redis.call('SET', KEYS[1], ARGV[1]) return redis.call('INCRBY', KEYS[2], ARGV[1])";

/// A script (EVALSHA, loaded on NOSCRIPT) and a pipeline on keys of one hash tag; returns the
/// script's reply and the pipeline's.
async fn script_and_pipeline(conn: &mut Conn, tag: &str) -> (i64, (i64, i64, String)) {
    let n: i64 = redis::Script::new(ADD)
        .key(format!("{{{tag}}}:a"))
        .key(format!("{{{tag}}}:n"))
        .arg(2)
        .invoke_async(conn)
        .await
        .expect("script");
    let row: (i64, i64, String) = redis::pipe()
        .set(format!("{{{tag}}}:p"), "v")
        .ignore()
        .incr(format!("{{{tag}}}:n"), 1)
        .incr(format!("{{{tag}}}:n"), 1)
        .get(format!("{{{tag}}}:p"))
        .query_async(conn)
        .await
        .expect("pipeline");
    (n, row)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_runs_scripts_and_pipelines_spreads_tags_and_follows_failover() {
    let _turn = crate::TOPOLOGY.lock().await;
    let started = Instant::now();
    let mut cluster = block_in_place(|| RedisCluster::start(3, 1)).expect("start cluster");
    eprintln!("cluster of 6 up in {:?}", started.elapsed());
    let settings = RedisSettings {
        mode: RedisMode::Cluster,
        // Two seeds are enough: the client learns the rest from CLUSTER SLOTS.
        nodes: cluster.nodes()[..2].to_vec(),
        ..Default::default()
    };
    let mut conn = Conn::connect(&settings).await.expect("connect");
    assert_eq!(conn.mode(), Mode::Cluster);

    // Every master, as redis::Clients that work.
    let masters = conn.masters().await.expect("masters");
    let mut got: Vec<String> = masters.iter().map(addr_of).collect();
    got.sort();
    let mut want = block_in_place(|| cluster.masters()).unwrap();
    want.sort();
    assert_eq!(got.len(), 3);
    assert_eq!(got, want, "masters() names the cluster's masters");
    for m in &masters {
        assert_eq!(role(m).await, "master");
    }

    // Scripts and pipelines on one tag.
    assert_eq!(
        script_and_pipeline(&mut conn, "t").await,
        (2, (3, 4, "v".to_string()))
    );

    // After SCRIPT FLUSH on the tag's master, EVALSHA gets NOSCRIPT and the script is loaded
    // again.
    let key = "{t}:a".to_string();
    let owner = conn
        .master_of_keys(std::slice::from_ref(&key))
        .await
        .unwrap()[0]
        .clone();
    let owner_client = masters.iter().find(|m| addr_of(m) == owner).expect("owner");
    let mut oc = owner_client
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut oc)
        .await
        .unwrap();
    let sha = redis::Script::new(ADD).get_hash().to_string();
    let exists: Vec<bool> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(&sha)
        .query_async(&mut oc)
        .await
        .unwrap();
    assert_eq!(exists, [false]);
    assert_eq!(script_and_pipeline(&mut conn, "t").await.0, 6);

    // Tags {p:0}..{p:63} spread over all three masters; each agrees with CLUSTER KEYSLOT and
    // the cluster's own slot map.
    let keys: Vec<String> = (0..64).map(|i| format!("{{p:{i}}}:due")).collect();
    let owners = conn.master_of_keys(&keys).await.unwrap();
    assert_eq!(owners.len(), keys.len());
    let spread: HashSet<&String> = owners.iter().collect();
    assert_eq!(spread.len(), 3, "64 tags land on every master: {owners:?}");
    for (key, owner) in keys.iter().zip(&owners).take(10) {
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(
            &block_in_place(|| cluster.master_of_slot(slot)).unwrap(),
            owner
        );
    }

    // Failover: kill the master of {t}'s slot. A write issued at once rides out the
    // failover within its retries; afterwards everything works and masters() names the
    // promoted replica.
    let _: () = conn.set("{t}:before", "1").await.unwrap();
    // Replication is asynchronous: the kill must not race the write to the replica, or the
    // promoted replica rightly lacks it (CI once saw exactly that). WAIT until it has it.
    assert_eq!(
        conn.wait_replicas("{t}:before", 1, 10_000).await.unwrap(),
        1,
        "the replica acknowledged the write before the kill"
    );
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    let killed = block_in_place(|| cluster.kill_master_of_slot(slot)).unwrap();
    assert_eq!(killed, owner);
    let t = Instant::now();
    let during: redis::RedisResult<()> = conn.set("{t}:during", "1").await;
    eprintln!(
        "write issued right after the kill: {:?} after {:?}",
        during.as_ref().map_err(|e| e.to_string()),
        t.elapsed()
    );
    let after = block_in_place(|| cluster.wait_for_failover(&killed, RedisCluster::SETTLE_LIMIT))
        .expect("failover");
    eprintln!("failover done {:?} after the kill", t.elapsed());
    assert_eq!(after.len(), 3);
    assert!(!after.contains(&killed));
    let promoted = block_in_place(|| cluster.master_of_slot(slot)).unwrap();
    assert!(!want.contains(&promoted), "a replica took over: {promoted}");

    // Commands, scripts and pipelines work again (the first may still see the old map).
    wait::until(
        "writes to succeed after the failover",
        Duration::from_secs(5),
        async || conn.set::<_, _, ()>("{t}:after", "1").await,
    )
    .await;
    // The replica was in sync: what was written before the kill is there.
    let before: Option<String> = conn.get("{t}:before").await.unwrap();
    assert_eq!(before.as_deref(), Some("1"));
    let (_, (_, _, v)) = script_and_pipeline(&mut conn, "t").await;
    assert_eq!(v, "v");
    let masters = conn.masters().await.unwrap();
    let mut got: Vec<String> = masters.iter().map(addr_of).collect();
    got.sort();
    let mut after = after;
    after.sort();
    assert_eq!(got, after);
    assert!(got.contains(&promoted));
    assert_eq!(
        conn.master_of_keys(std::slice::from_ref(&key))
            .await
            .unwrap(),
        vec![promoted.clone()]
    );
    for m in &masters {
        assert_eq!(role(m).await, "master");
    }
    eprintln!("cluster test took {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_conn_follows_the_master_across_a_failover() {
    let _turn = crate::TOPOLOGY.lock().await;
    let started = Instant::now();
    let mut set = block_in_place(RedisSentinelSet::start).expect("start sentinel set");
    eprintln!("sentinel set up in {:?}", started.elapsed());
    let first = block_in_place(|| set.master_addr()).unwrap();
    let settings = RedisSettings {
        mode: RedisMode::Sentinel,
        nodes: set.sentinels(),
        sentinel_master: RedisSentinelSet::MASTER_NAME.into(),
        ..Default::default()
    };
    let mut conn = Conn::connect(&settings).await.expect("connect");
    assert_eq!(conn.mode(), Mode::Sentinel);
    let masters = conn.masters().await.unwrap();
    assert_eq!(
        masters.iter().map(addr_of).collect::<Vec<_>>(),
        vec![first.clone()]
    );
    assert_eq!(
        conn.master_of_keys(&["a".into(), "b".into()])
            .await
            .unwrap(),
        [first.clone(), first.clone()]
    );

    let _: () = conn.set("before", "1").await.unwrap();
    let (n, row) = script_and_pipeline(&mut conn, "s").await;
    assert_eq!((n, row.2.as_str()), (2, "v"));
    // Make sure the replica has it before the master dies.
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(acked, 1);

    let mut clone = conn.clone();
    let killed = block_in_place(|| set.kill_master()).unwrap();
    assert_eq!(killed, first);
    let t = Instant::now();
    let promoted =
        block_in_place(|| set.wait_for_failover(&killed, Duration::from_secs(30))).unwrap();
    eprintln!(
        "sentinels promoted {promoted} {:?} after the kill",
        t.elapsed()
    );
    assert_ne!(promoted, killed);

    // The clone's first write finds the dead master, asks the sentinels and switches; the
    // one that found a refused connection is retried on the new master at once.
    let mut failures = Vec::new();
    for _ in 0..5 {
        match clone.set::<_, _, ()>("after", "2").await {
            Ok(()) => break,
            Err(e) => failures.push(e.to_string()),
        }
    }
    assert!(
        failures.len() <= 1,
        "at most the in-flight write fails: {failures:?}"
    );
    // The original handle uses the new master too, without a failure.
    let after: Option<String> = conn.get("after").await.unwrap();
    assert_eq!(after.as_deref(), Some("2"));
    let before: Option<String> = conn.get("before").await.unwrap();
    assert_eq!(before.as_deref(), Some("1"));
    assert_eq!(script_and_pipeline(&mut conn, "s").await.0, 6);

    let masters = conn.masters().await.unwrap();
    assert_eq!(
        masters.iter().map(addr_of).collect::<Vec<_>>(),
        vec![promoted.clone()]
    );
    assert_eq!(role(&masters[0]).await, "master");
    assert_eq!(
        conn.master_of_keys(&["a".into()]).await.unwrap(),
        [promoted]
    );
    eprintln!("sentinel test took {:?}", started.elapsed());
}

#[tokio::test]
async fn acl_user_from_settings_is_used_and_a_wrong_password_is_named() {
    let server = RedisServer::start().expect("start redis-server");
    // The user first, then the default user off (this connection keeps working).
    let admin = redis::Client::open(server.url()).unwrap();
    let mut a = admin.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("keyfire")
        .arg("on")
        .arg(">secret")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .query_async(&mut a)
        .await
        .unwrap();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("default")
        .arg("off")
        .query_async(&mut a)
        .await
        .unwrap();

    let mut settings = RedisSettings {
        url: server.url(),
        username: Some("keyfire".into()),
        password: Some("secret".into()),
        ..Default::default()
    };
    let mut conn = Conn::connect(&settings).await.expect("connect as keyfire");
    let who: String = redis::cmd("ACL")
        .arg("WHOAMI")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(who, "keyfire");
    let _: () = conn.set("k", "v").await.unwrap();
    assert_eq!(script_and_pipeline(&mut conn, "acl").await.0, 2);
    // The clients masters() gives carry the credentials too.
    let masters = conn.masters().await.unwrap();
    let mut m = masters[0].get_multiplexed_async_connection().await.unwrap();
    let who: String = redis::cmd("ACL")
        .arg("WHOAMI")
        .query_async(&mut m)
        .await
        .unwrap();
    assert_eq!(who, "keyfire");

    // Without credentials: the disabled default user is refused.
    let anonymous = RedisSettings {
        url: server.url(),
        ..Default::default()
    };
    let t = Instant::now();
    let err = Conn::connect(&anonymous).await.unwrap_err().to_string();
    eprintln!("anonymous: {err}");
    assert!(
        err.contains(&server.addr()) && err.contains("NOAUTH"),
        "{err}"
    );

    // A wrong password: a clear error, at once, naming the server and the user.
    settings.password = Some("wrong".into());
    let err = Conn::connect(&settings).await.unwrap_err().to_string();
    eprintln!("wrong password: {err}");
    assert!(t.elapsed() < Duration::from_secs(3), "refused at once");
    assert!(err.contains(&server.addr()), "{err}");
    assert!(err.contains("'keyfire'"), "{err}");
    assert!(
        err.contains("WRONGPASS") || err.to_lowercase().contains("authentication failed"),
        "{err}"
    );
    assert!(err.contains("redis.password"), "{err}");
}

#[tokio::test]
async fn tls_with_a_private_ca_connects() {
    let Some((server, ca, _certs)) = crate::support::tls_redis(RedisOptions::default()) else {
        eprintln!("SKIP tls_with_a_private_ca_connects: redis-server lacks TLS support");
        return;
    };
    let tls_port = server.extra_port().unwrap();
    let url = format!("redis://127.0.0.1:{tls_port}/0");

    // Verified against the private CA (the certificate names 127.0.0.1).
    let settings = RedisSettings {
        url: url.clone(),
        tls: true,
        tls_ca: Some(ca.clone()),
        ..Default::default()
    };
    let mut conn = Conn::connect(&settings).await.expect("connect over TLS");
    let _: () = conn.set("k", "v").await.unwrap();
    assert_eq!(script_and_pipeline(&mut conn, "tls").await.0, 2);
    let masters = conn.masters().await.unwrap();
    assert!(matches!(
        masters[0].get_connection_info().addr(),
        redis::ConnectionAddr::TcpTls { .. }
    ));
    let mut m = masters[0].get_multiplexed_async_connection().await.unwrap();
    let v: String = m.get("k").await.unwrap();
    assert_eq!(v, "v");
    // The server sees a TLS client? It sees our commands on the TLS port, which speaks only
    // TLS.
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(info.contains(&format!("tcp_port:{}", server.port())));

    // Without verification: connects too.
    let insecure = RedisSettings {
        url: url.clone(),
        tls: true,
        tls_insecure: true,
        ..Default::default()
    };
    let mut c = Conn::connect(&insecure)
        .await
        .expect("connect, no verification");
    let v: String = c.get("k").await.unwrap();
    assert_eq!(v, "v");

    // Against the public roots only, the private CA's certificate is refused, at once.
    let public = RedisSettings {
        url,
        tls: true,
        ..Default::default()
    };
    let t = Instant::now();
    let err = Conn::connect(&public).await.unwrap_err().to_string();
    eprintln!("public roots: {err}");
    assert!(t.elapsed() < Duration::from_secs(3), "refused at once");
    assert!(
        err.to_lowercase().contains("certificate") || err.contains("UnknownIssuer"),
        "{err}"
    );
}
