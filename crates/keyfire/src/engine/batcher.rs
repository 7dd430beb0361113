//! The claim batcher: scheduled claims that arrive together go to Redis as one script call
//! per shard, a few calls in flight.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::Inner;
use super::claim::{ClaimGuard, Kind, Source, Step};
use super::specs::CachedJob;
use crate::store::ClaimArgs;

/// Most scheduled claims sent in one script call.
const CLAIM_BATCH: usize = 128;
/// Batches of claims (or completions) in flight at once.
const CLAIM_BATCHES_IN_FLIGHT: usize = 4;
/// How often a held batch looks again whether it may go.
const HOLD_POLL: std::time::Duration = std::time::Duration::from_millis(2);

/// A scheduled firing waiting in the batcher's queue, with the executor permit it will run on.
pub(super) struct ClaimRequest {
    /// The firing, marked as being claimed until the request is done with.
    pub(super) guard: ClaimGuard,
    pub(super) source: Source,
    pub(super) permit: OwnedSemaphorePermit,
}

/// The first item and whatever else is queued, up to a batch.
pub(super) fn gather<T>(first: T, rx: &mut mpsc::UnboundedReceiver<T>) -> Vec<T> {
    let mut batch = vec![first];
    while batch.len() < CLAIM_BATCH {
        match rx.try_recv() {
            Ok(r) => batch.push(r),
            Err(_) => break,
        }
    }
    batch
}

impl Inner {
    /// Gather what is queued into batches (up to [`CLAIM_BATCH`]) and hand each to `work`,
    /// a few batches in flight, until `stop` is cancelled or the queue closes. Returns once
    /// the batches in flight are done.
    pub(super) async fn run_batches<T, F, Fut>(
        self: &Arc<Self>,
        rx: &mut mpsc::UnboundedReceiver<T>,
        stop: &CancellationToken,
        work: F,
    ) where
        T: Send + 'static,
        F: Fn(Arc<Inner>, Vec<T>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.run_batches_held(rx, stop, |_, _| false, |me, batch, _| work(me, batch))
            .await
    }

    /// [`Inner::run_batches`], holding each batch back while `hold` says so of its first
    /// item (checked every [`HOLD_POLL`]); what queues meanwhile joins the batch. `work`
    /// learns whether the batch was held.
    pub(super) async fn run_batches_held<T, H, F, Fut>(
        self: &Arc<Self>,
        rx: &mut mpsc::UnboundedReceiver<T>,
        stop: &CancellationToken,
        hold: H,
        work: F,
    ) where
        T: Send + 'static,
        H: Fn(&Arc<Inner>, &T) -> bool,
        F: Fn(Arc<Inner>, Vec<T>, bool) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let in_flight = Arc::new(Semaphore::new(CLAIM_BATCHES_IN_FLIGHT));
        loop {
            let first = tokio::select! {
                r = rx.recv() => match r {
                    Some(r) => r,
                    None => break,
                },
                _ = stop.cancelled() => break,
            };
            let mut held = false;
            while !stop.is_cancelled() && hold(self, &first) {
                held = true;
                tokio::time::sleep(HOLD_POLL).await;
            }
            // Wait for a slot before gathering: what queues up meanwhile joins this batch
            // instead of waiting for the next one.
            let Ok(slot) = in_flight.clone().acquire_owned().await else {
                break;
            };
            let batch = gather(first, rx);
            let job = work(self.clone(), batch, held);
            self.runs.spawn(async move {
                job.await;
                drop(slot);
            });
        }
        let _ = in_flight.acquire_many(CLAIM_BATCHES_IN_FLIGHT as u32).await;
    }

    /// Scheduled claims that arrive together go to Redis as one script call.
    pub(super) async fn claim_batcher(
        self: Arc<Self>,
        mut rx: mpsc::UnboundedReceiver<ClaimRequest>,
    ) {
        self.run_batches(&mut rx, &self.claiming, |me, batch| async move {
            me.claim_batch(batch).await;
        })
        .await;
        // Requests left in the queue at shutdown are dropped with their permits and guards.
        rx.close();
        while rx.try_recv().is_ok() {}
    }

    pub(super) async fn claim_batch(self: &Arc<Self>, batch: Vec<ClaimRequest>) {
        // The specs the cache lacks (a one-shot task's, always) in one round trip.
        let ids: Vec<&str> = batch.iter().map(|r| r.guard.job_id()).collect();
        let specs = match self.specs(&ids).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "reading job specs failed; the sweeper retries");
                vec![None; batch.len()]
            }
        };
        drop(ids);
        let mut items: Vec<(ClaimRequest, Arc<CachedJob>)> = Vec::with_capacity(batch.len());
        for (req, spec) in batch.into_iter().zip(specs) {
            match spec {
                Some(cached) => items.push((req, cached)),
                // Gone or not valid: the request (and its guard) is dropped.
                None => drop(req),
            }
        }
        let args: Vec<ClaimArgs> = items
            .iter()
            .map(|(r, c)| self.claim_args(r.guard.job_id(), r.guard.at_ms(), c, None))
            .collect();
        // A fenced node claims nothing: requests queued before the fence are dropped (the
        // sweeps, this node's once the fence lifts or its peers', claim them).
        if self.fence.is_fenced() {
            return;
        }
        let epoch = self.fence.send_epoch();
        let replies = self.store.claim_many(&args).await;
        drop(args);
        let replies = match replies {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, n = items.len(), "batch claim failed; the sweeper retries");
                return;
            }
        };
        for ((req, cached), reply) in items.into_iter().zip(replies) {
            let ClaimRequest {
                guard,
                source,
                permit,
            } = req;
            match self.on_claim_reply(guard.job_id(), guard.at_ms(), cached, reply, 0) {
                Step::Claimed(claimed) => {
                    drop(guard);
                    self.start_run(permit, claimed, Kind::Scheduled, source, epoch);
                }
                Step::Done => {}
                Step::Again(plan) => {
                    // Rare (the job changed, or a misfire): the one-firing protocol finishes it.
                    let me = self.clone();
                    self.runs.spawn(async move {
                        let epoch = me.fence.send_epoch();
                        let claimed = me.try_claim(guard.job_id(), guard.at_ms(), plan).await;
                        let job_id = guard.job_id().to_string();
                        drop(guard);
                        match claimed {
                            Ok(Some(c)) => {
                                me.start_run(permit, c, Kind::Scheduled, source, epoch)
                            }
                            Ok(None) => {}
                            Err(e) => tracing::warn!(job = %job_id, error = %e, "claim failed; the sweeper retries"),
                        }
                    });
                }
            }
        }
    }
}
