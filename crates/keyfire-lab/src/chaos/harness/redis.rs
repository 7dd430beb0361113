//! The round's Redis: one server or a cluster ([`Backend`]), Redis time, the settings that
//! reach it, and the faults of a single Redis: restarted (after a SIGTERM or a SIGKILL),
//! emptied (its data wiped, or `FLUSHALL`), and full (`maxmemory` reached).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use tokio::time::Instant;

use super::cluster::ClusterRig;
use super::round::Round;
use super::{CLUSTER_SHARDS, FULL_MARGIN, HEAL_LIMIT, PREFIX};
use crate::chaos::nodelog;
use crate::chaos::plan::PlannedFault;
use crate::chaos::record::host_ms;
use keyfire::config::{RedisMode, Settings};
use keyfire::store::Conn;
use keyfire_testkit::RedisServer;

/// Redis time in ms over `conn`, or the host's clock when Redis does not answer (the same
/// clock: Redis runs on this host).
pub(in crate::chaos) async fn redis_ms(conn: &mut Conn) -> i64 {
    keyfire::store::redis_time_ms(conn)
        .await
        .unwrap_or_else(|_| host_ms())
}

/// The Redis of a round.
pub(in crate::chaos) enum Backend {
    /// One server; each node reaches it through a proxy of its own (in `Round::proxies`).
    Single(Arc<std::sync::Mutex<RedisServer>>),
    /// A Redis Cluster, each of its nodes behind one proxy that every client goes through.
    Cluster(ClusterRig),
}

impl Round {
    pub(super) async fn restart_redis(&self, crash: bool) -> anyhow::Result<()> {
        let redis = self.single()?;
        tokio::task::spawn_blocking(move || {
            let mut r = redis.lock().expect("redis lock");
            r.stop(crash)
        })
        .await??;
        Ok(())
    }

    pub(super) async fn start_redis(&self) -> anyhow::Result<()> {
        let redis = self.single()?;
        tokio::task::spawn_blocking(move || redis.lock().expect("redis lock").restart()).await??;
        Ok(())
    }

    /// Remove what Redis would load its data from (the AOF directory, RDB snapshots) while it
    /// is stopped: it starts again empty.
    async fn wipe_redis_data(&self) -> anyhow::Result<()> {
        let redis = self.single()?;
        let dir = redis.lock().expect("redis lock").dir().to_path_buf();
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() && name == "appendonlydir" {
                std::fs::remove_dir_all(&path)?;
            } else if name.ends_with(".rdb") || name.ends_with(".aof") {
                std::fs::remove_file(&path)?;
            }
        }
        Ok(())
    }

    /// Redis loses everything: SIGKILLed, its data wiped, started again after the hold (two
    /// plans in three), or `FLUSHALL` (one in three: no connection drops, so the nodes can
    /// tell only from the data). With the workload's calls held until every node that ran
    /// before the loss logged it (and healed), at most [`HEAL_LIMIT`] after Redis answers;
    /// then the workload driver creates its jobs again.
    pub(super) async fn empty_redis(&self, f: &PlannedFault) -> anyhow::Result<()> {
        let _quiet = self.op_lock.lock().await;
        let marks: Vec<(String, PathBuf, u64)> = self
            .nodes
            .lock()
            .await
            .iter()
            .map(|n| {
                let path = n.log_path();
                let len = nodelog::len_of(&path);
                (n.id.clone(), path, len)
            })
            .collect();
        let t0 = host_ms();
        let how = if f.pick.is_multiple_of(3) {
            let _: () = redis::cmd("FLUSHALL")
                .arg("SYNC")
                .query_async(&mut self.admin.clone())
                .await
                .context("FLUSHALL")?;
            "FLUSHALL".to_string()
        } else {
            self.restart_redis(true).await?;
            self.wipe_redis_data().await?;
            tokio::time::sleep(f.hold).await;
            self.start_redis().await?;
            format!("SIGKILL, data wiped, down {:?}", f.hold)
        };
        let back = host_ms();
        // Every node whose process ran before the loss must notice it (frozen ones when they
        // wake; the checker counts their lines).
        let deadline = Instant::now() + HEAL_LIMIT;
        let (noticed, waited) = loop {
            let mut nodes = self.nodes.lock().await;
            let waited: Vec<&str> = nodes
                .iter_mut()
                .filter_map(|n| {
                    let waits = n.child.is_some()
                        && n.exit_status().is_none()
                        && !n.frozen
                        && n.started_ms < t0;
                    waits.then_some(n.id.as_str())
                })
                .collect();
            let noticed: Vec<String> = marks
                .iter()
                .filter(|(_, path, from)| {
                    nodelog::count_from(path, *from, nodelog::DATA_LOSS).0 > 0
                })
                .map(|(id, _, _)| id.clone())
                .collect();
            let all = waited.iter().all(|id| noticed.iter().any(|n| n == id));
            if all || Instant::now() >= deadline {
                break (noticed, waited.len());
            }
            drop(nodes);
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let noticed_ms = host_ms() - back;
        // A node logs the loss, then writes back what it owns: a moment to finish.
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.data_losses.fetch_add(1, Ordering::SeqCst);
        self.record(
            f.kind,
            None,
            t0,
            format!(
                "{how}; Redis back after {} ms; {} of {waited} nodes logged the loss ({}) \
                 within {noticed_ms} ms",
                back - t0,
                noticed.len(),
                noticed.join(", "),
            ),
        );
        Ok(())
    }

    /// `maxmemory` just above `used_memory`, `noeviction`, for the hold; then as it was. The
    /// workload goes on meanwhile: what adds data is refused, the rest must work.
    pub(super) async fn fill_redis(&self, f: &PlannedFault) -> anyhow::Result<()> {
        let mut conn = self.admin.clone();
        let get = |name: &'static str| {
            let mut conn = conn.clone();
            async move {
                let v: Vec<String> = redis::cmd("CONFIG")
                    .arg("GET")
                    .arg(name)
                    .query_async(&mut conn)
                    .await?;
                anyhow::Ok(v.get(1).cloned().unwrap_or_default())
            }
        };
        let (old_max, old_policy) = (get("maxmemory").await?, get("maxmemory-policy").await?);
        let info: String = redis::cmd("INFO")
            .arg("memory")
            .query_async(&mut conn)
            .await?;
        let used: u64 = info
            .lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .context("used_memory in INFO memory")?;
        let limit = used + FULL_MARGIN;
        let refused = self.refused.load(Ordering::SeqCst);
        let t0 = host_ms();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory-policy")
            .arg("noeviction")
            .arg("maxmemory")
            .arg(limit)
            .query_async(&mut conn)
            .await?;
        tokio::time::sleep(f.hold).await;
        let mut restored = false;
        for _ in 0..50 {
            let set: redis::RedisResult<()> = redis::cmd("CONFIG")
                .arg("SET")
                .arg("maxmemory")
                .arg(&old_max)
                .arg("maxmemory-policy")
                .arg(&old_policy)
                .query_async(&mut conn)
                .await;
            if set.is_ok() {
                restored = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::ensure!(restored, "could not set maxmemory back to {old_max}");
        self.record(
            f.kind,
            None,
            t0,
            format!(
                "maxmemory {limit} (used_memory {used} + {FULL_MARGIN}) for {:?}; {} calls refused",
                f.hold,
                self.refused.load(Ordering::SeqCst) - refused
            ),
        );
        Ok(())
    }
}

/// Settings that reach `redis` (the harness's client and queue; standalone: directly).
pub(super) fn backend_settings(redis: &Backend) -> Settings {
    let mut s = Settings::default();
    s.redis.prefix = PREFIX.into();
    match redis {
        Backend::Single(r) => s.redis.url = r.lock().expect("redis lock").url(),
        Backend::Cluster(rig) => {
            s.redis.mode = RedisMode::Cluster;
            s.redis.nodes = rig.nodes();
            s.redis.shards = CLUSTER_SHARDS;
        }
    }
    s
}
