//! The completer: attempts that end around the same time are recorded in one script call
//! per shard; the executor permit is held until the outcome is in Redis.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, mpsc};

use super::batch::{gather, run_batches_held};
use super::callbacks::Callbacks;
use super::context::{NodeCore, bump_by};
use super::executor::Executor;
use super::firing::Kind;
use super::membership::Live;
use super::specs::CachedJob;
use super::timers::TimerQueue;
use crate::job::Job;
use crate::metrics::name;
use crate::store::{Completion, Fate, RunRecord};

/// An attempt that ended, waiting to be recorded, with the executor permit it ran on.
pub(super) struct Done {
    /// The job as it ran: its id; whether it is one-shot (its success marks it done, which
    /// saves the script a read of the job); its run limits (counted with the outcome); the
    /// batch of a task enqueued with a completion callback (its end counts there). Held, not
    /// copied out per outcome.
    pub(super) job: Arc<CachedJob>,
    pub(super) at_ms: i64,
    pub(super) record: RunRecord,
    pub(super) retry: Option<i64>,
    /// The callback to queue with the outcome, if it is the one it reports.
    pub(super) callback: Option<String>,
    /// The permit it holds until its outcome is in Redis: a permit to record (or, at
    /// shutdown, the run's own). Given back once the outcome is recorded, together with
    /// those of its batch (or as the outcome drops).
    pub(super) permit: Option<OwnedSemaphorePermit>,
    /// When it was queued: an outcome is held behind claims for at most [`HOLD_MAX`].
    pub(super) ended: tokio::time::Instant,
    /// The attempt's span, held open until its outcome is recorded (a disabled span unless
    /// traces are exported).
    pub(super) span: tracing::Span,
}

impl Done {
    pub(super) fn job_id(&self) -> &str {
        &self.job.job.spec.id
    }
}

/// Longest an outcome waits behind this node's claims before it is recorded anyway.
pub(super) const HOLD_MAX: Duration = Duration::from_millis(250);

/// The completer: records the outcomes of this node's runs, one loop per shard.
pub(super) struct Completer {
    pub(super) core: Arc<NodeCore>,
    /// Its record permits: outcomes are not held while they run short.
    pub(super) executor: Arc<Executor>,
    /// Arms the next attempt's timer when this node owns the job.
    pub(super) timers: TimerQueue,
    pub(super) live: Arc<Live>,
    /// Woken when an outcome queued a callback.
    pub(super) callbacks: Arc<Callbacks>,
}

impl Completer {
    /// Attempts that end around the same time are recorded in one script call. Runs until
    /// the node's runs are cancelled (the end of shutdown), then records what is left.
    ///
    /// Claims first: while this node has scheduled claims under way (waiting for a run
    /// permit, queued or in flight), an outcome waits (up to
    /// [`HOLD_MAX`] after its run ended) before it is sent. Redis runs one command at a
    /// time, so under a burst (10,000 cron firings in the same second) every outcome
    /// recorded among the claims makes the firings still to be claimed later; held back,
    /// the outcomes go after the claims, in larger batches. But not once the record permits
    /// run short: each held outcome keeps one, and with none left runs cannot end, so claims
    /// would stop behind the very outcomes held for them.
    pub(super) async fn run(self: Arc<Self>, mut rx: mpsc::UnboundedReceiver<Done>) {
        run_batches_held(
            &mut rx,
            &self.core.runs_cancel,
            &self.core.runs,
            |first: &Done| self.holds(first),
            |batch, held| {
                let me = self.clone();
                async move {
                    if held {
                        bump_by(&me.core.stats.deferred, batch.len() as u64);
                    }
                    me.record_batch(batch).await
                }
            },
        )
        .await;
        while let Ok(first) = rx.try_recv() {
            let batch = gather(first, &mut rx);
            self.record_batch(batch).await;
        }
    }

    /// Whether an outcome (the oldest queued) waits behind claims now (see [`Completer::run`]).
    pub(super) fn holds(&self, first: &Done) -> bool {
        self.core.stats.claims_pending.load(Ordering::Relaxed) > 0
            && first.ended.elapsed() < HOLD_MAX
            && !self.executor.records_short()
    }

    /// The completer's step: record attempts' ends (of one shard: each shard has its loop);
    /// retried with backoff for up to a lease (a failover takes seconds), since a lost
    /// outcome reruns the firing when its lease expires.
    pub(super) async fn record_batch(&self, mut batch: Vec<Done>) {
        let limits = self.core.history_limits();
        let completions: Vec<Completion> = batch
            .iter()
            .map(|d| Completion {
                job_id: d.job_id(),
                run: &d.record,
                retry_delay_ms: d.retry,
                once: Some(d.job.job.schedule.is_once()),
                callback: d.callback.as_deref(),
                limits: d.job.job.limits,
                batch: d.job.job.spec.batch.as_deref(),
            })
            .collect();
        let mut fates = None;
        // Past the lease another node may take the run over (and the outcome is then fenced),
        // but while Redis is unreachable no one can: keep trying a while longer.
        let give_up = tokio::time::Instant::now() + self.core.settings.lease * 2;
        let mut pause = Duration::from_millis(100);
        for n in 1u32.. {
            match self.core.store.complete_many(&completions, &limits).await {
                Ok(f) => {
                    fates = Some(f);
                    break;
                }
                Err(e) if tokio::time::Instant::now() + pause < give_up => {
                    tracing::warn!(error = %e, attempt = n, "could not record runs; retrying");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                Err(e) => {
                    tracing::warn!(error = %e, attempt = n, "could not record runs; giving up");
                    break;
                }
            }
        }
        drop(completions);
        let Some(fates) = fates else {
            // Their leases expire and the firings run again as the next attempt (G5).
            tracing::error!(
                n = batch.len(),
                "runs not recorded; their leases will hand them over"
            );
            return;
        };
        // By reference: moved out of the batch, each outcome (hundreds of bytes) was copied
        // once more. Their permits go back together after the loop: merged, one lock of the
        // semaphore for the batch rather than one per outcome.
        let mut back: Option<OwnedSemaphorePermit> = None;
        for (done, (fate, now)) in batch.iter_mut().zip(fates) {
            if let Some(p) = done.permit.take() {
                match &mut back {
                    Some(b) if Arc::ptr_eq(b.semaphore(), p.semaphore()) => b.merge(p),
                    _ => drop(back.replace(p)),
                }
            }
            if let Some(t) = crate::trace::for_span(&done.span) {
                let fate = match fate {
                    Fate::Done => "done",
                    Fate::Dead => "dead",
                    Fate::Retry => "retry",
                    Fate::Fenced => "fenced",
                    Fate::Gone => "gone",
                };
                t.set_attributes(
                    &done.span,
                    &[("keyfire.fate", crate::trace::Value::Str(fate))],
                );
            }
            if done.callback.is_some() && matches!(fate, Fate::Done | Fate::Dead) {
                // Queued with the outcome: this node's sender takes it at once.
                let shard = self.core.store.shards().of(done.job_id());
                self.callbacks.wake(shard);
            }
            match fate {
                Fate::Dead => {
                    metrics::counter!(name::DEAD, "node" => self.core.id.clone()).increment(1);
                }
                Fate::Retry => {
                    metrics::counter!(name::RETRIES, "node" => self.core.id.clone()).increment(1);
                    if self.live.owns(done.job_id()) {
                        let due = now + done.retry.unwrap_or(0);
                        self.timers.arm_due(
                            done.job_id().to_string(),
                            done.at_ms,
                            Kind::Retry,
                            due,
                        );
                    }
                }
                Fate::Fenced => {
                    tracing::warn!(
                        firing = %done.record.firing_id,
                        "outcome refused: a newer attempt of this firing was granted"
                    );
                }
                Fate::Gone => {
                    tracing::debug!(firing = %done.record.firing_id, "job deleted while it ran");
                }
                Fate::Done => {}
            }
        }
        // Counted once for the batch: a shared counter every worker thread touches.
        bump_by(&self.core.stats.completed, batch.len() as u64);
        drop(batch);
        drop(back);
    }
}

/// The delay before the next attempt, or None when attempts are used up.
pub(super) fn retry_delay(job: &Job, attempt: u32, asked: Option<Duration>) -> Option<i64> {
    if attempt >= job.retry.max_attempts {
        return None;
    }
    Some(match asked {
        Some(d) => d.as_millis() as i64,
        None => job.retry.delay_ms(attempt, rand::random::<f64>()),
    })
}
