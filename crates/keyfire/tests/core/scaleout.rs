//! Scaling out on one Redis: runs spread evenly over the live nodes, and a rolling
//! restart of every node loses and doubles nothing.

use std::collections::HashMap;
use std::time::Duration;

use chrono::DateTime;
use keyfire::JobSpec;
use keyfire_testkit::wait;
use keyfire_testkit::world::{World, doubles, lateness_summary, wait_all_seen};

fn one_shots(prefix: &str, n: usize, from_ms: i64, over_ms: i64) -> Vec<JobSpec> {
    (0..n)
        .map(|i| {
            let at = from_ms + (i as i64 * over_ms / n as i64);
            JobSpec::at(
                format!("{prefix}-{i}"),
                DateTime::from_timestamp_millis(at).unwrap(),
                "rec",
            )
        })
        .collect()
}

/// 3 nodes, 30,000 firings: each node runs between 30 % and 37 % of them,
/// and each node's reported share (heartbeat → `/v1/nodes`) says the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_share_30000_firings_evenly() {
    let w = World::new().await;
    let nodes = [w.node("a").await, w.node("b").await, w.node("c").await];
    wait_all_seen(&nodes, 3).await;
    let client = w.client().await;
    let base = w.redis_ms().await + 2_000;
    client
        .enqueue_many(one_shots("spread", 30_000, base, 20_000))
        .await
        .unwrap();
    w.recorder.wait_count(30_000, Duration::from_secs(90)).await;
    w.wait_idle(Duration::from_secs(20)).await;
    let seen = w.recorder.seen();
    assert_eq!(seen.len(), 30_000);
    assert!(doubles(&seen).is_empty(), "doubles: {:?}", doubles(&seen));
    let mut per_node: HashMap<&str, usize> = HashMap::new();
    for s in &seen {
        *per_node.entry(s.node.as_str()).or_default() += 1;
    }
    let (_, _, _, line) = lateness_summary(&seen);
    eprintln!("acceptance-7.4: runs per node {per_node:?}; {line}");
    for n in ["a", "b", "c"] {
        let share = per_node.get(n).copied().unwrap_or(0) as f64 / 30_000.0;
        assert!(
            (0.30..=0.37).contains(&share),
            "node {n} ran {:.1} % ({per_node:?})",
            share * 100.0
        );
    }
    // The shares the nodes report in their heartbeats (`runs_started`, what `/v1/nodes`
    // shows) match what they ran.
    let store = keyfire::store::Store::open(&w.settings.redis)
        .await
        .unwrap();
    let ttl = w.settings.node.node_ttl.as_millis() as i64;
    let reported = || async {
        store
            .live_nodes(ttl)
            .await
            .unwrap()
            .into_iter()
            .map(|(id, _, hash)| {
                let info: serde_json::Value =
                    serde_json::from_str(hash.get("info").map_or("null", String::as_str)).unwrap();
                (id, info["runs_started"].as_u64().unwrap_or(0))
            })
            .collect::<Vec<(String, u64)>>()
    };
    wait::until(
        "the nodes' heartbeats to report every run",
        Duration::from_secs(5),
        || async { reported().await.iter().map(|(_, n)| n).sum::<u64>() >= 30_000 },
    )
    .await;
    let views = reported().await;
    let total: u64 = views.iter().map(|(_, n)| n).sum();
    for (id, started) in views {
        let ran = per_node[id.as_str()] as f64 / 30_000.0;
        let share = started as f64 / total as f64;
        assert!(
            (share - ran).abs() < 0.01,
            "{id}: reported {share}, ran {ran}"
        );
    }
    for n in nodes {
        n.shutdown().await;
    }
}

/// A rolling restart of 3 nodes, one at a time (each stops gracefully and a
/// new node takes its place), while an every-second job and 5,000 one-shot tasks fire: no
/// firing missed or doubled, and the handovers leave no gap (nothing waits for the grace
/// period that a dead owner would cost).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rolling_restart_misses_and_doubles_nothing() {
    let w = World::new().await;
    let mut nodes = vec![w.node("a").await, w.node("b").await, w.node("c").await];
    wait_all_seen(&nodes, 3).await;
    let client = w.client().await;
    let beat = client
        .upsert(JobSpec::every("beat", "1s", "rec"))
        .await
        .unwrap();
    let first_beat = beat.next_ms.expect("beat scheduled");
    let base = w.redis_ms().await + 1_000;
    client
        .enqueue_many(one_shots("roll", 5_000, base, 14_000))
        .await
        .unwrap();

    // Restart one node every 3 s: stop it (graceful), then start its replacement.
    for (i, new_id) in ["a2", "b2", "c2"].into_iter().enumerate() {
        // The restarts' pace is the scenario: one every 3 s while the firings come due.
        tokio::time::sleep(Duration::from_millis(3_000)).await;
        let old = nodes.remove(0);
        let old_id = old.id().to_string();
        old.shutdown().await;
        nodes.push(w.node(new_id).await);
        wait_all_seen(&nodes, 3).await;
        eprintln!("restart {}: {old_id} -> {new_id}", i + 1);
    }
    let tasks_done = |s: &[keyfire_testkit::world::Seen]| {
        s.iter().filter(|r| r.job_id.starts_with("roll-")).count() >= 5_000
    };
    w.recorder
        .wait_until(Duration::from_secs(30), "5,000 tasks", tasks_done)
        .await;
    client.delete("beat").await.unwrap();
    w.wait_idle(Duration::from_secs(10)).await;
    let last_beat = w.redis_ms().await;

    let seen = w.recorder.seen();
    assert!(doubles(&seen).is_empty(), "doubles: {:?}", doubles(&seen));
    let tasks: Vec<_> = seen
        .iter()
        .filter(|s| s.job_id.starts_with("roll-"))
        .collect();
    assert_eq!(tasks.len(), 5_000, "each task once");
    let mut beats: Vec<i64> = w
        .recorder
        .seen_of("beat")
        .iter()
        .map(|s| s.scheduled_ms)
        .collect();
    beats.sort_unstable();
    assert_eq!(beats.first(), Some(&first_beat), "first beat");
    for pair in beats.windows(2) {
        assert_eq!(pair[1] - pair[0], 1_000, "a beat was missed: {beats:?}");
    }
    assert!(
        beats.last().copied().unwrap_or(0) >= last_beat - 2_500,
        "beats stopped early: last {:?}, deleted at {last_beat}",
        beats.last()
    );
    let (_, p99, max, line) = lateness_summary(&seen);
    let nodes_used: std::collections::BTreeSet<&str> =
        seen.iter().map(|s| s.node.as_str()).collect();
    eprintln!(
        "acceptance-7.5: {} beats, 5000 tasks; {line}; nodes {nodes_used:?}",
        beats.len()
    );
    // A gap would show as firings left to the sweeper of a non-owner, which helps only
    // after claim_grace + node_ttl (2 s here): at least 2 s late.
    assert!(p99 < 1_000 && max < 1_900, "{line}");
    for n in nodes {
        n.shutdown().await;
    }
}

/// Mixed versions: one-shard data keeps key layout 1 (what builds before sharding wrote and
/// understand, so they can run beside newer nodes during an upgrade), sharded data writes
/// layout 2 with its shard count, and a node refuses a layout it does not know.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_layout_versions_guard_mixed_versions() {
    let w = World::new().await;
    let keys = keyfire::store::Keys::new(&w.settings.redis.prefix);
    let node = w.node("a").await;
    let mut c = w.conn().await;
    let (layout, shards): (i64, Option<i64>) = redis::pipe()
        .get(keys.layout())
        .get(keys.shard_count())
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!((layout, shards), (1, None), "one shard keeps layout 1");
    node.shutdown().await;

    let _: () = redis::cmd("SET")
        .arg(keys.layout())
        .arg(99)
        .query_async(&mut c)
        .await
        .unwrap();
    let refused = keyfire::Node::new(w.settings.clone(), w.registry())
        .start()
        .await
        .err()
        .expect("a node started on an unknown layout");
    assert!(refused.to_string().contains("key layout 99"), "{refused}");

    // A fresh prefix with 6 shards: layout 2 and the count.
    let mut sharded = w.settings.clone();
    sharded.redis.prefix = format!("{}-sharded", w.settings.redis.prefix);
    sharded.redis.shards = 6;
    sharded.node.id = "b".into();
    let node = keyfire::Node::new(sharded.clone(), w.registry())
        .start()
        .await
        .unwrap();
    let meta = keyfire::store::Keys::new(&sharded.redis.prefix);
    let (layout, shards): (i64, Option<i64>) = redis::pipe()
        .get(meta.layout())
        .get(meta.shard_count())
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!((layout, shards), (2, Some(6)));
    node.shutdown().await;
}
