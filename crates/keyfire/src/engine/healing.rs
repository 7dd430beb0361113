//! A Redis that lost keyfire's data: noticed at the heartbeat, said once, healed.
//!
//! Redis can come back without what keyfire wrote: restarted without persistence (a managed
//! Redis whose node was replaced), `FLUSHALL`/`FLUSHDB`, a failover to a replica that was
//! empty, another Redis behind the same address. Each heartbeat reads the data marker under
//! the meta tag (and each shard's, with several shards): a random id written once when none
//! is there (`heartbeat.lua`, `data_marker.lua`). A node that reads another id than the one
//! it knows ([`DataWatch::observe`]) knows the data it wrote is gone; the first beat of a node
//! only learns the id.
//!
//! The node then ([`Healer::heal`]): logs one ERROR naming what happened and what it writes
//! back, counts it (`keyfire_redis_data_loss_total`), records it under the meta tag for an
//! hour ([`DATA_LOSS_SHOWN`]: `/readyz` and `keyfire doctor` show it), and writes back what it
//! owns: the key-layout markers, its handler registrations (without them a delayed topic add
//! is refused), expired-key events (a restarted Redis forgot a `CONFIG SET`); it forgets the
//! specs it cached and the timers it armed, seeds the job generations from Redis's time (a job
//! created again under its old id must not look like the one cached), and sweeps. What the embedding application declared (the server's
//! `[[jobs]]`, `[[topics]]`, `[[flow_limits]]`) it writes back itself when
//! [`NodeHandle::data_losses`](super::NodeHandle::data_losses) changes. Jobs, tasks and
//! queue tasks created at run time are gone with the data: only Redis's persistence keeps
//! them (docs/operations.md, "When Redis loses data").

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;

use super::context::{NodeCore, SweepState};
use super::flow_limiter::FlowLimiter;
use super::specs::Specs;
use crate::metrics::name;
use crate::store::notify;

/// How long a data loss stays recorded under the meta tag (shown by `/readyz` and `keyfire
/// doctor`): an hour.
pub const DATA_LOSS_SHOWN: Duration = Duration::from_secs(3600);

/// The data markers a node knows: the meta tag's and each shard's.
#[derive(Default)]
pub(super) struct DataWatch {
    known: Mutex<Known>,
}

#[derive(Default)]
struct Known {
    meta: Option<String>,
    shards: Vec<Option<String>>,
}

impl DataWatch {
    /// The markers a heartbeat read (`shards`: each shard's, empty with one shard; `None`
    /// when they could not be read). Returns what changed since the last beat (`None`:
    /// nothing; also on the first beat, which only learns them).
    pub(super) fn observe(&self, meta: &str, shards: Option<&[String]>) -> Option<String> {
        let mut known = self.known.lock().expect("data watch lock");
        let mut lost = Vec::new();
        if known.meta.as_deref().is_some_and(|m| m != meta) {
            lost.push("the meta keys (membership, handlers, layout, topics)".to_string());
        }
        known.meta = Some(meta.to_string());
        let Some(shards) = shards else {
            return (!lost.is_empty()).then(|| lost.join(", "));
        };
        if known.shards.len() != shards.len() {
            known.shards = vec![None; shards.len()];
        }
        for (i, (seen, now)) in known.shards.iter_mut().zip(shards).enumerate() {
            if seen.as_deref().is_some_and(|s| s != now) {
                lost.push(format!("shard {i}"));
            }
            *seen = Some(now.clone());
        }
        (!lost.is_empty()).then(|| lost.join(", "))
    }
}

/// Writes back what a node owns after Redis lost its data, and says so.
pub(super) struct Healer {
    pub(super) core: Arc<NodeCore>,
    pub(super) limiter: Arc<FlowLimiter>,
    pub(super) specs: Arc<Specs>,
    pub(super) sweep: Arc<SweepState>,
    /// The handlers this node runs.
    pub(super) handlers: Vec<String>,
    /// Whether this node may turn expiry events on.
    pub(super) notifications_allowed: bool,
    /// How many losses this node has seen; the embedding application writes back what it
    /// declared when it changes.
    pub(super) losses: watch::Sender<u64>,
}

impl Healer {
    /// Redis lost the data under `what`: say it, count it, record it, write back what this
    /// node owns. Each step is tried, whatever the others do; a step that fails is logged and
    /// tried again at the next loss or start.
    pub(super) async fn heal(&self, what: &str) {
        let core = &self.core;
        let store = &core.store;
        tracing::error!(
            node = %core.id,
            prefix = %store.keys().prefix(),
            lost = %what,
            "Redis lost keyfire's data (restarted empty, FLUSHALL/FLUSHDB, a failover to an empty \
             replica, or another Redis behind the address): jobs, tasks and queue tasks created \
             at run time are gone; writing back this node's handler registrations, key layout, \
             expired-key events and declared jobs, topics and flow limits"
        );
        metrics::counter!(name::DATA_LOSS, "node" => core.id.clone()).increment(1);
        // The cached specs name jobs that are gone; a job created again under the same id
        // starts at version 1 again, like the one cached. And generations go on from Redis's
        // time, not from 1: a job created again never takes a generation a node has seen.
        self.specs.clear();
        if let Err(e) = store.seed_generations().await {
            tracing::error!(error = %e, "could not seed the job generations");
        }
        if let Err(e) = store.check_layout().await {
            tracing::error!(error = %e, "could not write the key layout back");
        }
        if let Err(e) = store.register_handlers(&self.handlers).await {
            tracing::error!(error = %e, "could not register this node's handlers again");
        }
        let check = notify::ensure_everywhere(store, self.notifications_allowed, false);
        match tokio::time::timeout(Duration::from_secs(5), check).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "expired events are off"),
            Err(_) => tracing::warn!("notification check timed out"),
        }
        let detail = format!("lost {what}; node {} wrote back what it owns", core.id);
        if let Err(e) = store
            .record_data_loss(&core.id, &detail, DATA_LOSS_SHOWN)
            .await
        {
            tracing::warn!(error = %e, "could not record the data loss");
        }
        self.limiter.refresh().await;
        self.sweep.forget_armed();
        self.sweep.check_holders();
        self.sweep.sweep_now();
        self.losses.send_modify(|n| *n += 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_changed_since_it_was_learnt_is_a_loss() {
        let w = DataWatch::default();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(w.observe("m1", Some(&s(&["a", "b"]))), None, "first beat");
        assert_eq!(w.observe("m1", Some(&s(&["a", "b"]))), None, "unchanged");
        assert_eq!(
            w.observe("m1", None),
            None,
            "shards unread: no verdict on them"
        );
        assert_eq!(
            w.observe("m1", Some(&s(&["a", "c"]))).as_deref(),
            Some("shard 1")
        );
        assert_eq!(
            w.observe("m1", Some(&s(&["a", "c"]))),
            None,
            "healed: learnt"
        );
        let both = w.observe("m2", Some(&s(&["x", "c"]))).unwrap();
        assert!(both.contains("meta") && both.contains("shard 0"), "{both}");
        // One shard: no shard markers, the meta marker alone.
        let one = DataWatch::default();
        assert_eq!(one.observe("m", Some(&[])), None);
        assert!(one.observe("n", Some(&[])).is_some());
    }
}
