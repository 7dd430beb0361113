//! The node processes (and the delay-queue consumer processes): a [`NodeProc`] spawned with
//! its settings, signalled, frozen, killed and stopped; a node started and waited for until
//! it heartbeats.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use super::redis::redis_ms;
use super::round::Round;
use super::workload::stable_seed;
use super::{GRACE_MS, HEARTBEAT_MS, LEASE_MS, NODE_TTL_MS, PREFIX, SWEEP_MS};
use crate::chaos::record::host_ms;

/// A node process (or a delay-queue consumer process) and how to start it again.
pub(in crate::chaos) struct NodeProc {
    pub(in crate::chaos) id: String,
    pub(in crate::chaos) child: Option<Child>,
    pub(in crate::chaos) skew_ms: i64,
    /// `KEYFIRE__REDIS__…` settings: how it reaches Redis.
    pub(in crate::chaos) redis_env: Vec<(String, String)>,
    pub(in crate::chaos) dir: PathBuf,
    pub(in crate::chaos) bin: PathBuf,
    /// A consumer of these topics (comma-separated) instead of a node.
    pub(in crate::chaos) consumer_of: Option<String>,
    /// SIGSTOPped by a fault, not yet continued.
    pub(in crate::chaos) frozen: bool,
    /// When its process was last started (host ms).
    pub(in crate::chaos) started_ms: i64,
}

impl NodeProc {
    pub(in crate::chaos) fn spawn(&mut self) -> anyhow::Result<()> {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{}.log", self.id)))?;
        let ms = |v: i64| format!("{v}ms");
        let mut cmd = Command::new(&self.bin);
        if let Some(topics) = &self.consumer_of {
            cmd.env("KEYFIRE_CHAOS_CONSUMER", &self.id)
                .env("KEYFIRE_CHAOS_TOPICS", topics)
                .env("KEYFIRE_CHAOS_SEED", stable_seed(&self.id).to_string());
        }
        for (k, v) in &self.redis_env {
            cmd.env(k, v);
        }
        let child = cmd
            .env("KEYFIRE__REDIS__PREFIX", PREFIX)
            .env("KEYFIRE__NODE__ID", &self.id)
            .env("KEYFIRE__NODE__LEASE", ms(LEASE_MS))
            .env("KEYFIRE__NODE__HEARTBEAT_INTERVAL", ms(HEARTBEAT_MS))
            .env("KEYFIRE__NODE__NODE_TTL", ms(NODE_TTL_MS))
            .env("KEYFIRE__NODE__SWEEP_INTERVAL", ms(SWEEP_MS))
            .env("KEYFIRE__NODE__CLAIM_GRACE", ms(GRACE_MS))
            .env("KEYFIRE__NODE__TIMER_HORIZON", "1500ms")
            .env("KEYFIRE__NODE__DRAIN_TIMEOUT", "3s")
            .env("KEYFIRE__NODE__HISTORY_LIMIT", "100000")
            .env("KEYFIRE__NODE__DEAD_LETTER_LIMIT", "100000")
            .env(
                "KEYFIRE_CHAOS_LOG",
                self.dir.join(format!("{}.jsonl", self.id)),
            )
            .env("KEYFIRE_CHAOS_SKEW_MS", self.skew_ms.to_string())
            .env(
                "RUST_LOG",
                std::env::var("KEYFIRE_CHAOS_NODE_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(std::process::Stdio::null())
            // Logs go to stdout; both into the node's log file.
            .stdout(stderr.try_clone()?)
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("run {}", self.bin.display()))?;
        self.child = Some(child);
        self.frozen = false;
        self.started_ms = host_ms();
        Ok(())
    }

    /// How its process ended, if it was started and has exited on its own since.
    pub(in crate::chaos) fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// Its own log (what the process prints).
    pub(in crate::chaos) fn log_path(&self) -> PathBuf {
        self.dir.join(format!("{}.log", self.id))
    }

    /// SIGSTOP (`true`) or SIGCONT (`false`).
    pub(in crate::chaos) fn freeze(&mut self, frozen: bool) {
        self.signal(if frozen {
            Signal::SIGSTOP
        } else {
            Signal::SIGCONT
        });
        self.frozen = frozen;
    }

    /// The log of a consumer process.
    pub(in crate::chaos) fn queue_log(&self) -> PathBuf {
        self.dir
            .join(format!("{}.{}", self.id, crate::chaos::consumer::LOG_EXT))
    }

    pub(in crate::chaos) fn signal(&self, sig: Signal) {
        if let Some(pid) = self.child.as_ref().and_then(Child::id) {
            let _ = kill(Pid::from_raw(pid as i32), sig);
        }
    }

    pub(in crate::chaos) async fn kill(&mut self) {
        self.signal(Signal::SIGKILL);
        self.frozen = false;
        if let Some(mut c) = self.child.take() {
            let _ = c.wait().await;
        }
    }

    /// SIGTERM (the node drains), SIGKILL if it takes too long.
    pub(in crate::chaos) async fn stop(&mut self) {
        self.freeze(false);
        self.signal(Signal::SIGTERM);
        if let Some(mut c) = self.child.take()
            && tokio::time::timeout(Duration::from_secs(10), c.wait())
                .await
                .is_err()
        {
            let _ = c.kill().await;
        }
    }
}

impl Round {
    /// The ids of the round's nodes, in start order.
    pub(in crate::chaos) async fn node_ids(&self) -> Vec<String> {
        self.nodes
            .lock()
            .await
            .iter()
            .map(|n| n.id.clone())
            .collect()
    }

    /// Start node `i` (not running) and wait up to 15 s for its first heartbeat. A process
    /// that exits before it beats (a node whose start-up writes Redis refused, as when it is
    /// full) is a harness incident, and it is started again as a supervisor would, up to three
    /// times. Whether it beat.
    pub(super) async fn start_node(&self, i: usize) -> anyhow::Result<bool> {
        for _ in 0..4 {
            let (id, since) = {
                let mut nodes = self.nodes.lock().await;
                let since = host_ms();
                nodes[i].spawn()?;
                (nodes[i].id.clone(), since)
            };
            let deadline = Instant::now() + Duration::from_secs(15);
            let exited = loop {
                if self.beat_since(&id, since).await {
                    return Ok(true);
                }
                if let Some(status) = self.nodes.lock().await[i].exit_status() {
                    break status;
                }
                if Instant::now() >= deadline {
                    return Ok(false);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            self.incident(format!(
                "node {id} exited while starting ({exited}; see {id}.log): started again"
            ));
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        Ok(false)
    }
}

/// Start every node and wait for each one's first heartbeat.
pub(in crate::chaos) async fn start_nodes(round: &Round) -> anyhow::Result<()> {
    let mut conn = round.admin.clone();
    let since = redis_ms(&mut conn).await;
    for n in round.nodes.lock().await.iter_mut() {
        n.spawn()?;
    }
    let ids = round.node_ids().await;
    for id in &ids {
        anyhow::ensure!(
            round
                .wait_heartbeat(id, since, Duration::from_secs(30))
                .await,
            "node {id} did not start; see {}",
            round.dir.join(format!("{id}.log")).display()
        );
    }
    round.note(format!("{} nodes up", ids.len()));
    Ok(())
}
