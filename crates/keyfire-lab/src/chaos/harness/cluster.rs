//! A round on a Redis Cluster: the cluster behind its proxies ([`ClusterRig`]), its faults (a
//! replica SIGKILLed, a slot migrated, a master partitioned away or SIGKILLed and failed
//! over), making it whole again after a fault that failed, and keeping every Redis node's
//! log and directory with the round's files.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::CLUSTER_LIMIT;
use super::redis::Backend;
use super::round::Round;
use crate::chaos::model::FaultKind;
use crate::chaos::plan::PlannedFault;
use crate::chaos::proxy::{Mode, Proxy};
use crate::chaos::record::host_ms;
use keyfire::store::slot_of;
use keyfire_testkit::RedisCluster;

/// A Redis Cluster and the proxies in front of its nodes (`proxies[i]` before node `i` of
/// [`RedisCluster::servers`]).
pub(in crate::chaos) struct ClusterRig {
    pub(in crate::chaos) cluster: Arc<std::sync::Mutex<RedisCluster>>,
    pub(in crate::chaos) proxies: Vec<Proxy>,
}

impl ClusterRig {
    /// Seed URLs: the proxies.
    pub(super) fn nodes(&self) -> Vec<String> {
        self.proxies
            .iter()
            .map(|p| format!("redis://127.0.0.1:{}", p.port()))
            .collect()
    }

    /// Run blocking work on the cluster fixture off the async workers.
    pub(super) async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut RedisCluster) -> std::io::Result<T> + Send + 'static,
    ) -> anyhow::Result<T> {
        let cluster = self.cluster.clone();
        Ok(tokio::task::spawn_blocking(move || {
            let mut c = cluster.lock().expect("cluster lock");
            f(&mut c)
        })
        .await??)
    }

    /// Send `cmd` to every live node (masters only with `masters_only`), each on its own
    /// port (not through its proxy); the replies that came.
    pub(super) async fn on_each(
        &self,
        masters_only: bool,
        cmd: redis::Cmd,
    ) -> anyhow::Result<Vec<i64>> {
        self.with(move |c| {
            let roles = c.roles()?;
            let mut out = Vec::new();
            for r in roles.iter().filter(|r| r.master || !masters_only) {
                let addr = c.servers()[r.index].addr();
                let reply = redis::Client::open(format!("redis://{addr}"))
                    .and_then(|cl| cl.get_connection_with_timeout(Duration::from_secs(1)))
                    .and_then(|mut conn| cmd.query::<redis::Value>(&mut conn));
                match reply {
                    Ok(redis::Value::Int(n)) => out.push(n),
                    Ok(_) => out.push(0),
                    Err(_) => {}
                }
            }
            Ok(out)
        })
        .await
    }
}

impl Round {
    /// A fault of the Redis Cluster, applied to a whole cluster only: first the harness waits
    /// until every node runs and says `cluster_state:ok`, all agree on the slot map and every
    /// replica is in sync (a master killed while its replica still syncs would fail over to a
    /// replica without the data), starting again whatever is down. A fault that fails midway
    /// is recorded as far as it went (from the moment it began to disturb the cluster, so the
    /// checker treats that time as the fault's), noted as an incident, and the cluster is made
    /// whole again. Only a cluster that cannot be made whole ends the round: an error, never
    /// a verdict.
    pub(super) async fn cluster_fault(&self, f: &PlannedFault) -> anyhow::Result<()> {
        let rig = self.rig()?;
        if let Err(e) = rig.with(|c| c.wait_healthy(CLUSTER_LIMIT)).await {
            self.incident(format!("before {}: {e:#}", f.kind));
            self.heal(rig).await?;
        }
        let begun = std::sync::Mutex::new(None);
        let applied = match f.kind {
            FaultKind::MasterKill => self.kill_master(rig, f, &begun).await,
            FaultKind::ReplicaKill => self.kill_replica(rig, f, &begun).await,
            FaultKind::SlotMigration => self.migrate_slot(rig, f, &begun).await,
            FaultKind::MasterPartition => self.partition_master(rig, f, &begun).await,
            _ => anyhow::bail!("{} is no cluster fault", f.kind),
        };
        let Err(e) = applied else {
            return Ok(());
        };
        let begun = *begun.lock().expect("begun lock");
        if let Some(t0) = begun {
            self.record(f.kind, None, t0, format!("incomplete: {e:#}"));
        }
        self.incident(format!(
            "{} failed{}: {e:#}",
            f.kind,
            if begun.is_some() {
                " midway (recorded as a fault up to now)"
            } else {
                ""
            }
        ));
        self.heal(rig).await
    }

    /// Make the cluster whole again after a fault that failed: every proxy passing, every
    /// node killed or found exited started again, replicas in sync. An error when it cannot
    /// be, with the state of every node.
    pub(super) async fn heal(&self, rig: &ClusterRig) -> anyhow::Result<()> {
        for p in &rig.proxies {
            p.set(Mode::Pass);
        }
        match rig.with(|c| c.revive(CLUSTER_LIMIT)).await {
            Ok(started) => {
                self.note(format!(
                    "cluster whole again (redis nodes started: {started:?})"
                ));
                Ok(())
            }
            Err(e) => {
                let state = rig.with(|c| Ok(c.describe())).await.unwrap_or_default();
                anyhow::bail!("the Redis Cluster could not be made whole again: {e:#}\n{state}")
            }
        }
    }

    /// SIGKILL a replica, start it again after the hold and wait until it is in sync.
    async fn kill_replica(
        &self,
        rig: &ClusterRig,
        f: &PlannedFault,
        begun: &std::sync::Mutex<Option<i64>>,
    ) -> anyhow::Result<()> {
        let pick = f.pick;
        let t0 = host_ms();
        let victim = rig
            .with(move |c| {
                let replicas: Vec<usize> = c.shape()?.into_iter().flat_map(|(_, r)| r).collect();
                let Some(&victim) = replicas.get(pick % replicas.len().max(1)) else {
                    return Ok(None);
                };
                c.kill(victim)?;
                Ok(Some(victim))
            })
            .await?;
        let Some(victim) = victim else {
            anyhow::bail!("no live replica");
        };
        *begun.lock().expect("begun lock") = Some(t0);
        tokio::time::sleep(f.hold).await;
        rig.with(move |c| c.restart_node(victim, CLUSTER_LIMIT))
            .await?;
        self.record(
            f.kind,
            None,
            t0,
            format!("redis node {victim} down {:?}, back in sync", f.hold),
        );
        Ok(())
    }

    /// Move a shard's slot with its keys to another master.
    async fn migrate_slot(
        &self,
        rig: &ClusterRig,
        f: &PlannedFault,
        begun: &std::sync::Mutex<Option<i64>>,
    ) -> anyhow::Result<()> {
        let shard = f.pick % self.shards.len();
        let slot = slot_of(self.shards.keys(shard).tag());
        let pick = f.pick / self.shards.len();
        let t0 = host_ms();
        // The slot may be half moved when a step fails.
        *begun.lock().expect("begun lock") = Some(t0);
        let (from, to, keys) = rig
            .with(move |c| {
                let masters = c.shape()?;
                let others: Vec<usize> = masters
                    .iter()
                    .filter(|(m, _)| !m.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot)))
                    .map(|(m, _)| m.index)
                    .collect();
                let Some(&to) = others.get(pick % others.len().max(1)) else {
                    return Err(std::io::Error::other("no other master"));
                };
                let (from, keys) = c.migrate_slot(slot, to)?;
                Ok((from, to, keys))
            })
            .await?;
        self.record(
            f.kind,
            None,
            t0,
            format!("shard {shard} (slot {slot}) from redis node {from} to {to}, {keys} keys"),
        );
        Ok(())
    }

    /// Cut a master off from every client and its replica (its proxy drops everything) for
    /// the hold, with the workload's calls held.
    async fn partition_master(
        &self,
        rig: &ClusterRig,
        f: &PlannedFault,
        begun: &std::sync::Mutex<Option<i64>>,
    ) -> anyhow::Result<()> {
        // Calls cut off midway have unknown effects: the workload waits it out.
        let _quiet = self.op_lock.lock().await;
        let pick = f.pick;
        let victim = rig
            .with(move |c| {
                let masters = c.shape()?;
                Ok(masters
                    .get(pick % masters.len().max(1))
                    .map(|(m, _)| m.index))
            })
            .await?;
        let Some(victim) = victim else {
            anyhow::bail!("no master");
        };
        let t0 = host_ms();
        *begun.lock().expect("begun lock") = Some(t0);
        rig.proxies[victim].set(Mode::Drop);
        tokio::time::sleep(f.hold).await;
        rig.proxies[victim].set(Mode::Pass);
        self.record(
            f.kind,
            None,
            t0,
            format!("redis node {victim} cut off {:?}", f.hold),
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(())
    }

    /// SIGKILL a master that has a live replica, wait for the failover, then start the old
    /// master again: it comes back as a replica of the node that took over. The fault (an
    /// outage of the master's shards) ends when every node agrees on the new slot map.
    async fn kill_master(
        &self,
        rig: &ClusterRig,
        f: &PlannedFault,
        begun: &std::sync::Mutex<Option<i64>>,
    ) -> anyhow::Result<()> {
        let pick = f.pick;
        let (victim, heir, t0) = {
            // No workload call may return in the window a failover can lose (writes the
            // replica had not received yet): wait it out with the calls held.
            let _quiet = self.op_lock.lock().await;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let victim = rig
                .with(move |c| {
                    let masters: Vec<usize> = c
                        .shape()?
                        .into_iter()
                        .filter(|(_, r)| !r.is_empty())
                        .map(|(m, _)| m.index)
                        .collect();
                    Ok(masters.get(pick % masters.len().max(1)).copied())
                })
                .await?;
            let Some(victim) = victim else {
                anyhow::bail!("no master with a live replica");
            };
            let t0 = host_ms();
            *begun.lock().expect("begun lock") = Some(t0);
            let heir = rig
                .with(move |c| c.kill_master_and_fail_over(victim, CLUSTER_LIMIT))
                .await?;
            self.record(
                f.kind,
                None,
                t0,
                format!("redis node {victim} SIGKILLed, node {heir} took over"),
            );
            // Recorded: what follows (the old master back as a replica) is no outage.
            *begun.lock().expect("begun lock") = None;
            (victim, heir, t0)
        };
        tokio::time::sleep(f.hold).await;
        rig.with(move |c| c.restart_node(victim, CLUSTER_LIMIT))
            .await?;
        self.note(format!(
            "master_kill: redis node {victim} back as a replica of {heir} ({} ms after the kill)",
            host_ms() - t0
        ));
        Ok(())
    }
}

/// Start a Redis Cluster of 3 masters with a replica each, every node behind a proxy it
/// announces as its address.
pub(super) async fn start_cluster() -> anyhow::Result<ClusterRig> {
    let mut cluster = tokio::task::spawn_blocking(|| RedisCluster::start(3, 1))
        .await?
        .context("start a Redis Cluster")?;
    let mut proxies = Vec::new();
    for server in cluster.servers() {
        proxies.push(Proxy::start(server.addr()).await?);
    }
    let ports: Vec<u16> = proxies.iter().map(Proxy::port).collect();
    let cluster =
        tokio::task::spawn_blocking(move || cluster.announce_ports(&ports).map(|()| cluster))
            .await?
            .context("announce the proxies' ports")?;
    Ok(ClusterRig {
        cluster: Arc::new(std::sync::Mutex::new(cluster)),
        proxies,
    })
}

/// On a cluster: a copy of every Redis node's log and `nodes.conf` in the round's directory
/// (`redis-<i>/`), kept with the round's other files.
pub(super) async fn copy_redis_logs(round: &Round, dir: &Path) {
    let Backend::Cluster(rig) = &round.redis else {
        return;
    };
    let dirs: Vec<PathBuf> = match rig
        .with(|c| Ok(c.servers().iter().map(|n| n.dir().to_path_buf()).collect()))
        .await
    {
        Ok(d) => d,
        Err(_) => return,
    };
    for (i, from) in dirs.iter().enumerate() {
        let to = dir.join(format!("redis-{i}"));
        if std::fs::create_dir_all(&to).is_err() {
            continue;
        }
        for name in ["redis.log", "redis.out", "nodes.conf"] {
            let _ = std::fs::copy(from.join(name), to.join(name));
        }
    }
}

/// On a cluster: keep every Redis node's directory (AOF, `nodes.conf`, log) after the round,
/// and say where each is, with its state, in `redis-nodes.txt` of the round's directory.
pub(super) async fn keep_redis_dirs(round: &Round, dir: &Path) {
    let Backend::Cluster(rig) = &round.redis else {
        return;
    };
    if let Ok(state) = rig
        .with(|c| {
            c.keep_dirs();
            Ok(c.describe())
        })
        .await
    {
        let _ = std::fs::write(dir.join("redis-nodes.txt"), state);
    }
}
