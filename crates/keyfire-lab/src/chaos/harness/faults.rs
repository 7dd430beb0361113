//! Injecting the planned faults: the two lanes on their schedule, each fault recorded as it
//! happened (node SIGKILL, SIGSTOP and short pauses of a node running firings, clock skew,
//! a node cut off from Redis, pub/sub connections killed, `CLIENT PAUSE`, and the Redis and
//! cluster faults of `redis` and `cluster`), and the incidents the harness notes when it
//! could not do as planned.

use std::time::Duration;

use anyhow::Context;
use tokio::time::Instant;

use super::redis::Backend;
use super::round::Round;
use crate::chaos::model::FaultKind;
use crate::chaos::plan::PlannedFault;
use crate::chaos::proxy::Mode;
use crate::chaos::record::host_ms;

impl Round {
    /// A node running firings, to pause: the planned one if it runs one that started at
    /// least 100 ms ago (a handler that takes its time), else the next such one, else (after
    /// 2 s) one running any firing, else the planned one. Its index, and how many runs it has
    /// in flight.
    async fn busy_node(&self, planned: usize) -> (usize, usize) {
        let n = self.nodes.lock().await.len();
        let give_up = Instant::now() + Duration::from_secs(2);
        loop {
            let now = host_ms();
            let busy: Vec<(usize, usize, usize)> = {
                let mut tails = self.tails.lock().expect("tails lock");
                (0..n)
                    .map(|k| {
                        let i = (planned + k) % n;
                        // Runs of a process that was killed never end: recent starts only.
                        let open: Vec<i64> = tails[i]
                            .poll()
                            .into_iter()
                            .filter(|t| now - t < 10_000)
                            .collect();
                        let long = open.iter().filter(|t| now - **t >= 100).count();
                        (i, open.len(), long)
                    })
                    .collect()
            };
            if let Some(&(i, open, _)) = busy.iter().find(|b| b.2 > 0) {
                return (i, open);
            }
            if Instant::now() >= give_up {
                return busy
                    .iter()
                    .find(|b| b.1 > 0)
                    .map_or((planned % n.max(1), 0), |b| (b.0, b.1));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub(in crate::chaos) async fn inject(&self, f: &PlannedFault) -> anyhow::Result<()> {
        let t0 = host_ms();
        match f.kind {
            FaultKind::NodeKill => {
                let i = f.node.unwrap_or(0);
                let id = {
                    let mut nodes = self.nodes.lock().await;
                    nodes[i].kill().await;
                    nodes[i].id.clone()
                };
                tokio::time::sleep(f.hold).await;
                self.start_node(i).await?;
                self.record(f.kind, Some(&id), t0, format!("down {:?}", f.hold));
            }
            FaultKind::NodeStop => {
                let i = f.node.unwrap_or(0);
                let id = {
                    let mut nodes = self.nodes.lock().await;
                    nodes[i].freeze(true);
                    nodes[i].id.clone()
                };
                tokio::time::sleep(f.hold).await;
                self.nodes.lock().await[i].freeze(false);
                self.record(f.kind, Some(&id), t0, format!("stopped {:?}", f.hold));
            }
            FaultKind::NodePause => {
                let (i, running) = self.busy_node(f.node.unwrap_or(0)).await;
                let (id, t0) = {
                    let mut nodes = self.nodes.lock().await;
                    let t0 = host_ms();
                    nodes[i].freeze(true);
                    (nodes[i].id.clone(), t0)
                };
                tokio::time::sleep(f.hold).await;
                self.nodes.lock().await[i].freeze(false);
                self.record(
                    f.kind,
                    Some(&id),
                    t0,
                    format!("paused {:?} running {running} firings", f.hold),
                );
            }
            FaultKind::ClockSkew => {
                let i = f.node.unwrap_or(0);
                let id = {
                    let mut nodes = self.nodes.lock().await;
                    nodes[i].stop().await;
                    nodes[i].skew_ms = f.skew_ms;
                    nodes[i].id.clone()
                };
                self.start_node(i).await?;
                self.record(
                    f.kind,
                    Some(&id),
                    t0,
                    format!("restarted with skew {} s", f.skew_ms / 1000),
                );
            }
            FaultKind::CutDrop | FaultKind::CutStall => {
                let i = f.node.unwrap_or(0);
                let mode = if f.kind == FaultKind::CutDrop {
                    Mode::Drop
                } else {
                    Mode::Stall
                };
                self.proxies[i].set(mode);
                // Change jobs while the node cannot hear about it.
                let early = Duration::from_millis(300).min(f.hold);
                tokio::time::sleep(early).await;
                self.churn.notify_one();
                tokio::time::sleep(f.hold - early).await;
                self.proxies[i].set(Mode::Pass);
                let id = self.nodes.lock().await[i].id.clone();
                self.record(f.kind, Some(&id), t0, format!("cut off {:?}", f.hold));
            }
            FaultKind::PubsubKill => {
                let mut kill = redis::cmd("CLIENT");
                kill.arg(&["KILL", "TYPE", "pubsub"]);
                let n: Option<i64> = match &self.redis {
                    Backend::Single(_) => kill.query_async(&mut self.admin.clone()).await.ok(),
                    // Every node: a node subscribes to expired events on every master.
                    Backend::Cluster(rig) => match rig.on_each(false, kill).await {
                        Ok(n) => Some(n.iter().sum()),
                        Err(e) => {
                            self.incident(format!("pubsub_kill: {e:#}"));
                            None
                        }
                    },
                };
                // Subscribers reconnect within ~50 ms; changes made meanwhile go unheard.
                self.churn.notify_one();
                self.record(f.kind, None, t0, format!("killed {n:?}"));
            }
            FaultKind::ClientPause => {
                let _quiet = self.op_lock.lock().await;
                let t0 = host_ms();
                let ms = f.hold.as_millis() as i64;
                let mut pause = redis::cmd("CLIENT");
                pause.arg("PAUSE").arg(ms).arg("ALL");
                match &self.redis {
                    Backend::Single(_) => {
                        let _: redis::RedisResult<()> =
                            pause.query_async(&mut self.admin.clone()).await;
                    }
                    Backend::Cluster(rig) => {
                        if let Err(e) = rig.on_each(true, pause).await {
                            self.incident(format!("client_pause: {e:#}"));
                        }
                    }
                }
                tokio::time::sleep(f.hold).await;
                self.record(f.kind, None, t0, format!("{ms} ms"));
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            FaultKind::RedisTerm | FaultKind::RedisKill => {
                let _quiet = self.op_lock.lock().await;
                let crash = f.kind == FaultKind::RedisKill;
                if crash {
                    // No workload call may return in the window whose writes a crash can
                    // lose: wait it out with the calls held.
                    tokio::time::sleep(Duration::from_millis(3_000)).await;
                }
                let t0 = host_ms();
                self.restart_redis(crash).await?;
                tokio::time::sleep(f.hold).await;
                self.start_redis().await?;
                self.record(f.kind, None, t0, format!("down {:?} + restart", f.hold));
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            FaultKind::RedisEmpty => self.empty_redis(f).await?,
            FaultKind::RedisFull => self.fill_redis(f).await?,
            FaultKind::MasterKill
            | FaultKind::ReplicaKill
            | FaultKind::SlotMigration
            | FaultKind::MasterPartition => self.cluster_fault(f).await?,
            // Queue-round faults: `queue_round` injects them.
            FaultKind::HandlerFail
            | FaultKind::HandlerHang
            | FaultKind::ConsumerKill
            | FaultKind::PromoteKill
            | FaultKind::EventsLost => {}
        }
        Ok(())
    }

    /// Something the harness could not do as planned, kept with the round's results.
    pub(super) fn incident(&self, what: String) {
        self.note(format!("harness incident: {what}"));
        self.incidents.lock().expect("incidents lock").push(what);
    }

    pub(super) async fn run_lane(
        &self,
        lane: &[PlannedFault],
        start: Instant,
    ) -> anyhow::Result<()> {
        for f in lane {
            tokio::time::sleep_until(start + f.at).await;
            self.inject(f)
                .await
                .with_context(|| format!("inject {}", f.kind))?;
        }
        Ok(())
    }
}
