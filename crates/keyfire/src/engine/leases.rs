//! The lease renewer: the lease of every run in progress renewed each third of its length,
//! by one loop per node rather than a task per run. Most runs end before their first renewal,
//! and a task per run was a spawn and a timer for every firing.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::context::{NodeCore, ms};
use super::executor::Executor;
use super::specs::CachedJob;
use crate::store::{Renewal, firing_id};

/// The leases of the runs in progress on this node.
pub(super) struct Leases {
    core: Arc<NodeCore>,
    executor: Arc<Executor>,
    book: Mutex<Book>,
}

#[derive(Default)]
struct Book {
    next_id: u64,
    runs: foldhash::HashMap<u64, Held>,
    /// (when to renew, run). Every entry is pushed at now plus a third of the lease, so the
    /// queue is in order; a run that ended leaves its entry, skipped when it comes up.
    queue: VecDeque<(Instant, u64)>,
    /// Whether the loop runs (it stops once nothing is queued or being renewed).
    looping: bool,
}

/// A run's lease, as the renewal names it.
struct Held {
    /// The job as it runs (its id names the lease): shared, not a copy of the id per run.
    job: Arc<CachedJob>,
    at_ms: i64,
    attempt: u32,
    claimed_ms: i64,
    /// Its flow-limit slot, which lives as long as the lease.
    slot: Option<String>,
    /// Cancels the run.
    cancel: CancellationToken,
    /// A renewal found the lease no longer this attempt's (no longer renewed).
    lost: bool,
}

/// A run's lease renewed while this lives; [`LeaseHold::end`] says whether it was lost.
pub(super) struct LeaseHold {
    leases: Arc<Leases>,
    id: u64,
}

impl LeaseHold {
    /// The run ended: its lease is no longer renewed. Whether a renewal found it lost (the
    /// run was cancelled then).
    pub(super) fn end(self) -> bool {
        self.leases.release(self.id)
    }
}

impl Drop for LeaseHold {
    fn drop(&mut self) {
        self.leases.release(self.id);
    }
}

impl Leases {
    pub(super) fn new(core: Arc<NodeCore>, executor: Arc<Executor>) -> Self {
        Self {
            core,
            executor,
            book: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().expect("lease book lock")
    }

    /// Renew a run's lease every third of its length from now until the returned hold is
    /// ended or dropped. A renewal that finds the lease lost cancels `cancel` (and the
    /// hold's end says so); one that finds a cancel request the node missed cancels the run
    /// as the request would have. `slot`: the run's flow-limit slot, renewed with it.
    pub(super) fn hold(
        self: &Arc<Self>,
        job: Arc<CachedJob>,
        at_ms: i64,
        attempt: u32,
        claimed_ms: i64,
        slot: Option<String>,
        cancel: CancellationToken,
    ) -> LeaseHold {
        let due = Instant::now() + self.core.settings.lease / 3;
        let (id, start) = {
            let mut b = self.lock();
            let id = b.next_id;
            b.next_id += 1;
            b.runs.insert(
                id,
                Held {
                    job,
                    at_ms,
                    attempt,
                    claimed_ms,
                    slot,
                    cancel,
                    lost: false,
                },
            );
            b.queue.push_back((due, id));
            (id, !std::mem::replace(&mut b.looping, true))
        };
        if start {
            tokio::spawn(self.clone().run());
        }
        LeaseHold {
            leases: self.clone(),
            id,
        }
    }

    /// Stop renewing a lease; whether it was lost.
    fn release(&self, id: u64) -> bool {
        self.lock().runs.remove(&id).is_some_and(|h| h.lost)
    }

    /// The loop: renew what is due, each renewal on its own (a slow one holds up no other),
    /// until nothing is queued or being renewed.
    async fn run(self: Arc<Self>) {
        let every = self.core.settings.lease / 3;
        let mut renewing = FuturesUnordered::new();
        loop {
            let next = {
                let mut b = self.lock();
                let now = Instant::now();
                while let Some(&(at, id)) = b.queue.front()
                    && at <= now
                {
                    b.queue.pop_front();
                    if let Some(h) = b.runs.get(&id).filter(|h| !h.lost) {
                        renewing.push(self.renew(
                            id,
                            h.job.job.spec.id.clone(),
                            (h.at_ms, h.attempt, h.claimed_ms),
                            h.slot.clone(),
                            h.cancel.clone(),
                        ));
                    }
                }
                if b.queue.is_empty() && renewing.is_empty() {
                    b.looping = false;
                    return;
                }
                b.queue.front().map(|&(at, _)| at)
            };
            tokio::select! {
                _ = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {}
                Some((id, lost)) = renewing.next(), if !renewing.is_empty() => {
                    let mut b = self.lock();
                    if lost {
                        if let Some(h) = b.runs.get_mut(&id) {
                            h.lost = true;
                        }
                    } else if b.runs.contains_key(&id) {
                        b.queue.push_back((Instant::now() + every, id));
                    }
                }
            }
        }
    }

    /// Renew one lease (and its limit slot); whether it was lost (the run is cancelled then).
    async fn renew(
        &self,
        id: u64,
        job_id: String,
        (at_ms, attempt, claimed_ms): (i64, u32, i64),
        slot: Option<String>,
        cancel: CancellationToken,
    ) -> (u64, bool) {
        let lease = ms(self.core.settings.lease);
        let store = &self.core.store;
        match store
            .renew_run(&job_id, at_ms, attempt, claimed_ms, &self.core.id, lease)
            .await
        {
            Ok(renewal @ (Renewal::Renewed | Renewal::Cancelled)) => {
                if renewal == Renewal::Cancelled && !cancel.is_cancelled() {
                    // Its cancel was requested, and this node missed the announcement.
                    let fid = firing_id(&job_id, at_ms);
                    tracing::info!(firing = %fid, "renewal found a cancel request");
                    self.executor.cancel_run(&fid, true);
                    cancel.cancel();
                }
                // The limit slot lives as long as the run's lease.
                if let Some(key) = &slot
                    && let Err(e) = store
                        .renew_limit_slot(key, &firing_id(&job_id, at_ms), lease)
                        .await
                {
                    tracing::warn!(key, error = %e, "limit slot renewal failed");
                }
                (id, false)
            }
            Ok(Renewal::Lost) => {
                tracing::warn!(job = %job_id, at = at_ms, "lease lost; cancelling the run");
                cancel.cancel();
                (id, true)
            }
            Err(e) => {
                tracing::warn!(error = %e, "lease renewal failed");
                (id, false)
            }
        }
    }
}
