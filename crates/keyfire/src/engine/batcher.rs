//! The claim batcher: scheduled claims that arrive together go to Redis as one script call
//! per shard, a few calls in flight.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::Inner;
use super::claim::{ClaimGuard, Kind, Source, Step};
use super::misfire::MisfirePlan;
use super::specs::CachedJob;
use crate::store::{ClaimArgs, ClaimReply};

/// Most scheduled claims sent in one script call.
const CLAIM_BATCH: usize = 128;
/// Batches of claims (or completions) in flight at once.
const CLAIM_BATCHES_IN_FLIGHT: usize = 4;

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
        let in_flight = Arc::new(Semaphore::new(CLAIM_BATCHES_IN_FLIGHT));
        loop {
            let first = tokio::select! {
                r = rx.recv() => match r {
                    Some(r) => r,
                    None => break,
                },
                _ = stop.cancelled() => break,
            };
            // Wait for a slot before gathering: what queues up meanwhile joins this batch
            // instead of waiting for the next one.
            let Ok(slot) = in_flight.clone().acquire_owned().await else {
                break;
            };
            let batch = gather(first, rx);
            let job = work(self.clone(), batch);
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
            me.claim_batch(batch).await
        })
        .await;
        // Requests left in the queue at shutdown are dropped with their permits and guards.
        rx.close();
        while rx.try_recv().is_ok() {}
    }

    pub(super) async fn claim_batch(self: &Arc<Self>, batch: Vec<ClaimRequest>) {
        // A job whose spec the cache holds is claimed at the version it holds. The others (a
        // one-shot task's, nearly always) are claimed blind: the script claims a compact
        // task as it finds it and replies with its record, so its spec costs no read.
        let cached: Vec<Option<Arc<CachedJob>>> = batch
            .iter()
            .map(|r| self.specs.get(r.guard.job_id()))
            .collect();
        let args: Vec<ClaimArgs> = batch
            .iter()
            .zip(&cached)
            .map(|(r, c)| match c {
                Some(c) => self.claim_args(r.guard.job_id(), r.guard.at_ms(), c, None),
                None => self.blind_claim_args(r.guard.job_id(), r.guard.at_ms()),
            })
            .collect();
        let replies = self.store.claim_many(&args).await;
        drop(args);
        let replies = match replies {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, n = batch.len(), "batch claim failed; the sweeper retries");
                return;
            }
        };
        for ((req, cached), reply) in batch.into_iter().zip(cached).zip(replies) {
            let ClaimRequest {
                guard,
                source,
                permit,
            } = req;
            let (cached, reply) = match (cached, reply) {
                (Some(c), reply) => (c, reply),
                (None, ClaimReply::ClaimedBlind { now_ms, record }) => {
                    match self.blind_claimed(guard.job_id(), &record) {
                        Some(c) => (c, ClaimReply::Claimed { now_ms, attempt: 1 }),
                        // Claimed but not runnable here: its lease runs out and a takeover
                        // (with a fresh read of the job) deals with it.
                        None => continue,
                    }
                }
                (None, ClaimReply::Early { wait_ms }) => {
                    self.retry_when_due(guard.job_id(), guard.at_ms(), Kind::Scheduled, wait_ms);
                    continue;
                }
                (None, ClaimReply::Stale | ClaimReply::Locked | ClaimReply::Dropped) => {
                    self.count_conflict();
                    continue;
                }
                // Not a compact task on time (a job, a changed or late task): the one-firing
                // protocol reads the job and claims it.
                (None, _) => {
                    self.claim_in_full(guard, source, permit, None);
                    continue;
                }
            };
            match self.on_claim_reply(guard.job_id(), guard.at_ms(), cached, reply, 0) {
                Step::Claimed(claimed) => {
                    drop(guard);
                    self.start_run(permit, claimed, Kind::Scheduled, source);
                }
                Step::Done => {}
                // Rare (the job changed, or a misfire): the one-firing protocol finishes it.
                Step::Again(plan) => self.claim_in_full(guard, source, permit, plan),
            }
        }
    }

    /// Finish a scheduled claim with the one-firing protocol (it reads the job), in a task.
    fn claim_in_full(
        self: &Arc<Self>,
        guard: ClaimGuard,
        source: Source,
        permit: OwnedSemaphorePermit,
        plan: Option<MisfirePlan>,
    ) {
        let me = self.clone();
        self.runs.spawn(async move {
            let claimed = me.try_claim(guard.job_id(), guard.at_ms(), plan).await;
            let job_id = guard.job_id().to_string();
            drop(guard);
            match claimed {
                Ok(Some(c)) => me.start_run(permit, c, Kind::Scheduled, source),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(job = %job_id, error = %e, "claim failed; the sweeper retries")
                }
            }
        });
    }

    /// The spec a blind claim replied with, validated and cached; None (logged) when it does
    /// not decode or validate.
    fn blind_claimed(&self, job_id: &str, record: &str) -> Option<Arc<CachedJob>> {
        match self.store.compact_spec(job_id, record) {
            Ok(stored) => self.specs.insert(job_id, stored),
            Err(e) => {
                tracing::error!(job = job_id, error = %e, "a claimed task's record does not decode; not running it");
                None
            }
        }
    }
}
