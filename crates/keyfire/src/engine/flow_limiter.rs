//! Flow control on the firing path. A claimed firing whose limit key has a limit asks the
//! key for a slot before its handler runs ([`FlowLimiter::gate`], the runner's first step);
//! when denied, it is held back: the same attempt is queued again for when its turn should
//! come, with no run recorded, and it keeps its place in the key's line. Its slot is given back when the run ends, or
//! when another node takes the run over.
//!
//! Unlimited firings pay nothing: the node keeps the set of keys that have a limit (read at
//! start, after every change message about limits, and at every sweep), so a firing whose
//! key is not in it (or that has no key) makes no extra Redis call.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::{mpsc, oneshot};

use super::batch::{answer_each, next_batch};
use super::context::{NodeCore, bump, ms};
use super::firing::{Claimed, Kind};
use super::specs::CachedJob;
use super::timers::TimerQueue;
use crate::metrics::name;
use crate::store::{Acquired, Hold, firing_id};

/// The flow-control limiter: the limit keys that have a limit, as this node last read them,
/// the batcher of each key's asks and of each shard's holds.
pub(super) struct FlowLimiter {
    pub(super) core: Arc<NodeCore>,
    /// Arms the timer of a held firing for its turn.
    pub(super) timers: TimerQueue,
    pub(super) keys: RwLock<HashSet<String>>,
    /// Whether any key has a limit: with none (the common case), a firing passes without
    /// taking the lock, whose shared count every run on every worker thread would touch.
    pub(super) any: AtomicBool,
    pub(super) asks: Mutex<HashMap<String, mpsc::UnboundedSender<Ask>>>,
    pub(super) holds: Mutex<HashMap<usize, mpsc::UnboundedSender<HoldAsk>>>,
}

/// A denied firing to hold back, waiting for its shard's next hold call. None back: the
/// call failed (the firing is held on its own, and sees the error).
pub(super) struct HoldAsk {
    job_id: String,
    at_ms: i64,
    attempt: u32,
    claimed_ms: i64,
    wait_ms: i64,
    reply: oneshot::Sender<Option<Option<i64>>>,
}

/// A firing asking its limit key, waiting for its key's next script call. None back: the
/// call failed (the firing asks on its own, and sees the error).
pub(super) struct Ask {
    fid: String,
    at_ms: i64,
    reply: oneshot::Sender<Option<Acquired>>,
}

/// Most firings asking in one script call.
const ASK_BATCH: usize = 128;

/// A denied firing whose turn comes within this many ms waits for it in place (keeping its
/// claim and executor permit) instead of being held back...
const LOCAL_WAIT_MS: i64 = 50;
/// ...for at most this long in all, far below any lease.
const LOCAL_WAIT_TOTAL_MS: i64 = 250;

/// What the gate decided for a claimed firing.
pub(super) enum Gate {
    /// Run it; it holds a slot of this limit key (to give back when the run ends).
    Run(Option<String>),
    /// Held back (queued again for its turn), or no longer this node's: do not run it.
    Held,
}

impl FlowLimiter {
    fn set(&self, keys: HashSet<String>) {
        let mut held = self.keys.write().expect("limited keys lock");
        self.any.store(!keys.is_empty(), Ordering::Release);
        *held = keys;
    }

    /// Read which keys have a limit.
    pub(super) async fn refresh(&self) {
        match self.core.store.limit_keys().await {
            Ok(keys) => self.set(keys),
            Err(e) => {
                tracing::warn!(error = %e, "could not read the limit keys; keeping the last ones")
            }
        }
    }

    /// The limit key this job's firings ask, when that key has a limit.
    pub(super) fn limit_key_of(&self, job: &CachedJob) -> Option<String> {
        let key = job.limit_key.as_ref()?;
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let keys = self.keys.read().expect("limited keys lock");
        keys.contains(key).then(|| key.clone())
    }

    /// Before a claimed firing runs: ask its limit key for a slot, or hold it back. An
    /// unlimited firing passes without a Redis call; the asking is boxed, so the future of
    /// every run that awaits this stays small (it is copied into its task per run).
    pub(super) async fn gate(self: &Arc<Self>, c: &Claimed) -> Gate {
        match self.limit_key_of(&c.job) {
            None => Gate::Run(None),
            Some(key) => Box::pin(self.gate_limited(key, c)).await,
        }
    }

    /// [`FlowLimiter::gate`] of a firing whose limit key has a limit.
    async fn gate_limited(self: &Arc<Self>, key: String, c: &Claimed) -> Gate {
        let job_id = &c.job.job.spec.id;
        let fid = firing_id(job_id, c.at_ms);
        let lease = ms(self.core.settings.lease);
        // A held firing keeps its place in line this long past its turn: the node that held
        // it asks again at its turn (a timer); if that node died, the firing's owner claims
        // it at its next sweep, or any node once the grace period passed. Not longer: the
        // place of a firing that never comes back (its job was deleted) blocks the line.
        let grace = ms(self.core.settings.node_ttl
            + self.core.settings.claim_grace
            + self.core.settings.sweep_interval * 2);
        let mut waited = 0;
        let (wait_ms, reason) = loop {
            let reply = self.ask(&key, &fid, c.at_ms, lease, grace).await;
            match reply {
                Ok(Acquired::Unlimited) => return Gate::Run(None),
                Ok(Acquired::Granted { in_flight, held }) => {
                    self.limit_gauges(&key, in_flight, held);
                    return Gate::Run(Some(key));
                }
                Ok(Acquired::Denied {
                    wait_ms,
                    in_flight,
                    held,
                    reason,
                }) => {
                    self.limit_gauges(&key, in_flight, held);
                    // A turn that comes soon is waited for here, holding the claim: one call
                    // to ask again, where a hold costs three (hold, claim, ask) and a timer.
                    if wait_ms <= LOCAL_WAIT_MS && waited + wait_ms <= LOCAL_WAIT_TOTAL_MS {
                        waited += wait_ms;
                        tokio::time::sleep(std::time::Duration::from_millis(wait_ms as u64)).await;
                        continue;
                    }
                    break (wait_ms, reason);
                }
                Err(e) => {
                    // Not knowing whether it may run, it does not: its lease hands it to a
                    // node (as its next attempt) once Redis answers again.
                    tracing::warn!(key, firing = %fid, error = %e, "could not ask the limiter; leaving the run to its lease");
                    return Gate::Held;
                }
            }
        };
        self.core.stats.limit_held(&self.core.id, &key, &reason);
        match self.hold(job_id, c, wait_ms).await {
            Ok(Some(due)) => {
                tracing::debug!(key, firing = %fid, wait_ms, reason, "held back by its limit");
                self.timers
                    .arm_due(job_id.clone(), c.at_ms, Kind::Retry, due);
            }
            Ok(None) => tracing::debug!(firing = %fid, "held back, but the run is no longer ours"),
            Err(e) => {
                tracing::warn!(key, firing = %fid, error = %e, "could not hold the firing back; its lease hands it over")
            }
        }
        Gate::Held
    }

    /// Ask `key` for a slot for `fid`, in one script call with the other firings of this
    /// node asking the same key meanwhile (a burst of claims asks in a few calls, not one
    /// each).
    async fn ask(
        self: &Arc<Self>,
        key: &str,
        fid: &str,
        at_ms: i64,
        lease: i64,
        grace: i64,
    ) -> crate::Result<Acquired> {
        let tx = {
            let mut asks = self.asks.lock().expect("asks lock");
            asks.entry(key.to_string())
                .or_insert_with(|| {
                    let (tx, rx) = mpsc::unbounded_channel();
                    tokio::spawn(self.clone().ask_batcher(key.to_string(), rx, lease, grace));
                    tx
                })
                .clone()
        };
        let (reply, answer) = oneshot::channel();
        let ask = Ask {
            fid: fid.to_string(),
            at_ms,
            reply,
        };
        if tx.send(ask).is_ok()
            && let Ok(Some(a)) = answer.await
        {
            return Ok(a);
        }
        // The batcher stopped (the node is stopping) or its call failed: ask alone.
        self.core
            .store
            .acquire_limit(key, fid, at_ms, lease, grace)
            .await
    }

    /// One key's asks: the first waiting and whatever else is queued (up to [`ASK_BATCH`])
    /// go in one script call; one call in flight per key.
    async fn ask_batcher(
        self: Arc<Self>,
        key: String,
        mut rx: mpsc::UnboundedReceiver<Ask>,
        lease: i64,
        grace: i64,
    ) {
        while let Some(batch) = next_batch(&mut rx, &self.core.runs_cancel, ASK_BATCH).await {
            let firings: Vec<(&str, i64)> =
                batch.iter().map(|a| (a.fid.as_str(), a.at_ms)).collect();
            let answers = self
                .core
                .store
                .acquire_limits(&key, &firings, lease, grace)
                .await;
            answer_each(batch, answers, |a| a.reply);
        }
        self.asks.lock().expect("asks lock").remove(&key);
    }

    /// A firing claimed ahead that found no run permit in time: give its lease up and queue
    /// the same attempt again, due now, armed on this node's timers (its peers' sweeps take
    /// it if this node stays busy).
    pub(super) async fn hold_ahead(self: &Arc<Self>, c: Claimed) {
        bump(&self.core.stats.ahead_held);
        let job_id = &c.job.job.spec.id;
        match self.hold(job_id, &c, 0).await {
            Ok(Some(due)) => self
                .timers
                .arm_due(job_id.clone(), c.at_ms, Kind::Retry, due),
            Ok(None) => {
                tracing::debug!(job = %job_id, at = c.at_ms, "claimed ahead, but the run is no longer ours")
            }
            Err(e) => {
                tracing::warn!(job = %job_id, at = c.at_ms, error = %e, "could not queue a firing claimed ahead again; its lease hands it over")
            }
        }
    }

    /// Hold a denied firing back, in one script call with the others of its shard that this
    /// node holds back meanwhile.
    async fn hold(
        self: &Arc<Self>,
        job_id: &str,
        c: &Claimed,
        wait_ms: i64,
    ) -> crate::Result<Option<i64>> {
        let shard = self.core.store.shards().of(job_id);
        let tx = {
            let mut holds = self.holds.lock().expect("holds lock");
            holds
                .entry(shard)
                .or_insert_with(|| {
                    let (tx, rx) = mpsc::unbounded_channel();
                    tokio::spawn(self.clone().hold_batcher(shard, rx));
                    tx
                })
                .clone()
        };
        let (reply, answer) = oneshot::channel();
        let ask = HoldAsk {
            job_id: job_id.to_string(),
            at_ms: c.at_ms,
            attempt: c.attempt,
            claimed_ms: c.claimed_ms,
            wait_ms,
            reply,
        };
        if tx.send(ask).is_ok()
            && let Ok(Some(due)) = answer.await
        {
            return Ok(due);
        }
        let hold = Hold {
            job_id,
            at_ms: c.at_ms,
            attempt: c.attempt,
            claimed_ms: c.claimed_ms,
            wait_ms,
        };
        self.core.store.hold(&self.core.id, hold).await
    }

    /// One shard's holds: the first waiting and whatever else is queued go in one call.
    async fn hold_batcher(self: Arc<Self>, shard: usize, mut rx: mpsc::UnboundedReceiver<HoldAsk>) {
        while let Some(batch) = next_batch(&mut rx, &self.core.runs_cancel, ASK_BATCH).await {
            let holds: Vec<Hold> = batch
                .iter()
                .map(|a| Hold {
                    job_id: &a.job_id,
                    at_ms: a.at_ms,
                    attempt: a.attempt,
                    claimed_ms: a.claimed_ms,
                    wait_ms: a.wait_ms,
                })
                .collect();
            let dues = self.core.store.hold_many(&self.core.id, &holds).await;
            answer_each(batch, dues, |a| a.reply);
        }
        self.holds.lock().expect("holds lock").remove(&shard);
    }

    /// Give back the slot a run held (its run ended after `ran_ms`, if known).
    pub(super) async fn release_slot(&self, key: &str, fid: &str, ran_ms: Option<i64>) {
        if let Err(e) = self
            .core
            .store
            .release_limit_slots(key, &[(fid, ran_ms)])
            .await
        {
            // It comes back when its lease runs out.
            tracing::warn!(key, firing = fid, error = %e, "could not give back a limit slot");
        }
    }

    /// A run was taken over: its slot (if it held one) comes back at once.
    pub(super) async fn release_taken_over(&self, job: Option<&CachedJob>, fid: &str) {
        if let Some(key) = job.and_then(|j| self.limit_key_of(j)) {
            self.release_slot(&key, fid, None).await;
        }
    }

    fn limit_gauges(&self, key: &str, in_flight: u64, held: u64) {
        metrics::gauge!(name::LIMIT_IN_FLIGHT, "node" => self.core.id.clone(), "key" => key.to_string())
            .set(in_flight as f64);
        metrics::gauge!(name::LIMIT_WAITING, "node" => self.core.id.clone(), "key" => key.to_string())
            .set(held as f64);
    }
}
