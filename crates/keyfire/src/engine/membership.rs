//! Membership: heartbeats in Redis time, the live set, and who owns a firing.

use std::sync::Arc;

use super::Inner;
use crate::metrics::name;

pub use crate::store::stable_hash;

/// The owner of a firing among `live` nodes: rendezvous (highest random weight) hashing, so
/// a node joining or leaving moves only its own share.
pub fn owner<'a>(live: &'a [String], job_id: &str, at_ms: i64) -> Option<&'a str> {
    let at = at_ms.to_string();
    live.iter()
        .max_by_key(|node| stable_hash(&[node, job_id, &at]))
        .map(String::as_str)
}

impl Inner {
    /// Whether this node owns the firing, by its current view of the live set. With no view
    /// yet (or when it is missing from it), a node claims what it sees: G1 makes that safe.
    pub(super) fn owns(&self, job_id: &str, at_ms: i64) -> bool {
        let live = self.live.read().expect("live set lock");
        if !live.iter().any(|n| n == &self.id) {
            return true;
        }
        owner(&live, job_id, at_ms) == Some(self.id.as_str())
    }

    /// Another node joined or left: read the live set now and sweep, so the firings that
    /// change owner are taken by their new owner without waiting for the next heartbeat
    /// (rolling restarts hand over without a gap).
    pub(super) fn on_membership_change(self: &Arc<Self>) {
        if self.claiming.is_cancelled() {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            match me.heartbeat(false).await {
                Ok(()) => me.sweep_now.notify_one(),
                Err(e) => tracing::warn!(error = %e, "live set refresh failed"),
            }
        });
    }

    /// One heartbeat: announce this node (or its leaving), read the live set and Redis time.
    pub(super) async fn heartbeat(self: &Arc<Self>, leaving: bool) -> crate::Result<()> {
        let info = serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "running": self.running(),
            "runs_started": self.stats.started.load(std::sync::atomic::Ordering::Relaxed),
            "max_concurrent_runs": self.settings.max_concurrent_runs,
            "handlers": self.registry.names(),
        })
        .to_string();
        // One heartbeat at a time, and none after leaving: a refresh racing the shutdown
        // would put the node back in the live set for a node_ttl.
        let mut left = self.left.lock().await;
        if *left {
            return Ok(());
        }
        let ttl_ms = self.settings.node_ttl.as_millis() as i64;
        let sent = self.clock.local_ms();
        let (now, mut live) = self
            .store
            .heartbeat(&self.id, ttl_ms, &info, leaving)
            .await?;
        *left = leaving;
        let received = self.clock.local_ms();
        self.clock.observe(sent, now, received);
        live.sort();
        let node = self.id.clone();
        metrics::gauge!(name::LIVE_NODES, "node" => node.clone()).set(live.len() as f64);
        metrics::gauge!(name::CLOCK_OFFSET, "node" => node.clone())
            .set(self.clock.offset_ms() as f64 / 1000.0);
        metrics::gauge!(name::RUNNING, "node" => node).set(self.running() as f64);
        let mut current = self.live.write().expect("live set lock");
        if *current != live {
            // Ownership moved: the next sweep reads the whole horizon again.
            self.armed_upto.lock().expect("armed_upto lock").clear();
        }
        *current = live;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ownership_spreads_and_moves_only_the_leavers_share() {
        let nodes: Vec<String> = (0..3).map(|i| format!("node-{i}")).collect();
        let mut counts = [0usize; 3];
        let mut moved = 0;
        let two = &nodes[..2];
        for at in 0..3000i64 {
            let o = owner(&nodes, "job", at).unwrap();
            let i = nodes.iter().position(|n| n == o).unwrap();
            counts[i] += 1;
            let o2 = owner(two, "job", at).unwrap();
            if o != "node-2" && o2 != o {
                moved += 1;
            }
        }
        assert!(counts.iter().all(|&c| c > 800), "uneven spread {counts:?}");
        assert_eq!(moved, 0, "firings of staying nodes moved");
    }

    #[test]
    fn hash_is_stable() {
        // Pinned: a change here would make mixed-version clusters disagree about owners.
        assert_eq!(stable_hash(&["a", "b"]), stable_hash(&["a", "b"]));
        assert_ne!(stable_hash(&["ab", ""]), stable_hash(&["a", "b"]));
        assert_eq!(
            stable_hash(&["node-1", "job", "1000"]),
            0xa9dd_c5e1_14ee_8ff8
        );
    }
}
