//! The claim batcher: scheduled claims that arrive together go to Redis as one script call
//! per shard, a few calls in flight.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::Inner;
use super::claim::{ClaimGuard, Kind, Source, Step};
use super::specs::CachedJob;
use crate::store::{ClaimArgs, ClaimReply};

/// Most scheduled claims sent in one script call.
const CLAIM_BATCH: usize = 128;
/// Batches of claims (or completions) in flight at once, per shard: with claims ahead of
/// run permits a node claims a burst in full batches, and Redis always has the next one.
const CLAIM_BATCHES_IN_FLIGHT: usize = 8;
/// How often a held batch looks again whether it may go.
const HOLD_POLL: std::time::Duration = std::time::Duration::from_millis(2);

/// Scheduled claims a node may have sent ahead of a free run permit, per run permit (with
/// the default 256 permits, 3,840: a burst of 10,000 firings on three nodes is claimed in
/// full, in batches, with no claim waiting for a run to end).
pub(super) const CLAIMS_AHEAD_PER_RUN: usize = 15;
/// Runs are short while this node's handlers take less than this, lately (a moving
/// average): then claims go ahead of free run permits. Each permit then runs its
/// [`CLAIMS_AHEAD_PER_RUN`] firings claimed ahead within about 300 ms, well within
/// [`AHEAD_WAIT_MAX`].
const SHORT_RUN: Duration = Duration::from_millis(20);
/// How long a firing claimed ahead waits for a run permit (at most a quarter of the lease)
/// before it looks whether the node gets through the firings claimed ahead: then it waits
/// on, its lease renewed; if not, it is queued again (as the same attempt, for this node or
/// another).
pub(super) const AHEAD_WAIT_MAX: Duration = Duration::from_secs(1);

/// What a scheduled claim holds while it is queued and in flight.
///
/// A claim's run permit used to be taken before the claim was sent, so a node had at most
/// `max_concurrent_runs` claims out: with short handlers most permits were held by claims on
/// their way to Redis and back, not by runs, and under a burst Redis waited for the next
/// batch. While runs are short, a claim that finds no free run permit goes ahead with a
/// permit of its own (up to [`CLAIMS_AHEAD_PER_RUN`] per run permit) and takes its run
/// permit when its reply comes; claims waiting to be sent wait for these permits, not for
/// run permits, so the run permits that come free go to firings already claimed. Runs that
/// turn long stop claims going ahead (the moving average), and a firing claimed ahead that
/// finds no run permit within [`AHEAD_WAIT_MAX`] while the node runs fewer firings in that
/// time than wait claimed ahead is queued again as the same attempt, so a node whose
/// handlers slowed down hoards no leased firings.
pub(super) enum RunPermit {
    /// The run's own permit.
    Run(OwnedSemaphorePermit),
    /// A claim ahead of its run permit.
    Ahead(OwnedSemaphorePermit),
}

/// A moving average of how long this node's handlers take, and whether runs are short: below
/// [`SHORT_RUN`] they become short, above twice that they no longer are (not flapping with
/// every run near the line). Claims waiting for a permit are told when that changes: they
/// wait for a run permit while runs are long and for a permit to claim ahead while they
/// are short, never in the run permits' line then (it is for firings already claimed).
pub(super) struct RunTime {
    /// µs; `u64::MAX`: no run ended yet.
    avg: AtomicU64,
    short: AtomicBool,
    pub(super) changed: Notify,
}

impl Default for RunTime {
    fn default() -> Self {
        RunTime {
            avg: AtomicU64::new(u64::MAX),
            short: AtomicBool::new(false),
            changed: Notify::new(),
        }
    }
}

impl RunTime {
    /// A handler took `took`.
    pub(super) fn record(&self, took: Duration) {
        let sample = took.as_micros().min(u64::MAX as u128 / 2) as u64;
        let old = self.avg.load(Ordering::Relaxed);
        // Racy on purpose: a lost update among concurrent ends moves an estimate.
        let new = if old == u64::MAX {
            sample
        } else {
            old - old / 8 + sample / 8
        };
        self.avg.store(new, Ordering::Relaxed);
        let limit = SHORT_RUN.as_micros() as u64;
        let was = self.short.load(Ordering::Relaxed);
        let now = if was { new <= 2 * limit } else { new < limit };
        if now != was {
            self.short.store(now, Ordering::Relaxed);
            self.changed.notify_waiters();
        }
    }

    /// Whether runs have been short lately (not before one ended).
    pub(super) fn short(&self) -> bool {
        self.short.load(Ordering::Relaxed)
    }
}

/// A scheduled firing waiting in the batcher's queue, with the permit it holds meanwhile.
pub(super) struct ClaimRequest {
    /// The firing, marked as being claimed until the request is done with.
    pub(super) guard: ClaimGuard,
    pub(super) source: Source,
    pub(super) permit: RunPermit,
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
        let mut args: Vec<ClaimArgs> = items
            .iter()
            .map(|(r, c)| self.claim_args(r.guard.job_id(), r.guard.at_ms(), c, None))
            .collect();
        // This node owns every job of the batch (its own firings, the common case): it arms
        // the next firings the claim moves the jobs on to itself, and the claim announces
        // none of them (a message every node would read, for one of them).
        let arms_next = self.owns_all(
            args.iter()
                .filter(|a| a.next_ms.is_some())
                .map(|a| a.job_id),
        );
        let next_to_arm: Vec<Option<i64>> = args
            .iter_mut()
            .map(|a| {
                a.arms_next = arms_next;
                a.next_ms
                    .filter(|next| arms_next && next - a.at_ms <= a.announce_ms)
            })
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
        for (((req, cached), reply), next) in items.into_iter().zip(replies).zip(next_to_arm) {
            let ClaimRequest {
                guard,
                source,
                permit,
            } = req;
            if let Some(next) = next
                && matches!(
                    reply,
                    ClaimReply::Claimed { .. } | ClaimReply::Missed | ClaimReply::Overlapped
                )
            {
                self.arm(guard.job_id().to_string(), next);
            }
            match self.on_claim_reply(guard.job_id(), guard.at_ms(), cached, reply, 0) {
                Step::Claimed(claimed) => {
                    drop(guard);
                    self.start_claimed(permit, claimed, source, epoch);
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
                            Ok(Some(c)) => me.start_claimed(permit, c, source, epoch),
                            Ok(None) => {}
                            Err(e) => tracing::warn!(job = %job_id, error = %e, "claim failed; the sweeper retries"),
                        }
                    });
                }
            }
        }
    }

    /// Run a scheduled firing this node claimed: on its own permit, or, claimed ahead, on the
    /// first run permit that comes free (see [`AHEAD_WAIT_MAX`] for when it is queued again
    /// instead, its lease given up, armed for this node's timers).
    pub(super) fn start_claimed(
        self: &Arc<Self>,
        permit: RunPermit,
        claimed: super::claim::Claimed,
        source: Source,
        epoch: u64,
    ) {
        let ahead = match permit {
            RunPermit::Run(p) => return self.start_run(p, claimed, Kind::Scheduled, source, epoch),
            RunPermit::Ahead(a) => a,
        };
        if let Ok(p) = self.permits.clone().try_acquire_owned() {
            drop(ahead);
            return self.start_run(p, claimed, Kind::Scheduled, source, epoch);
        }
        let me = self.clone();
        self.runs.spawn(async move {
            let wait = AHEAD_WAIT_MAX.min(me.settings.lease / 4);
            me.stats.ahead_waiting.fetch_add(1, Ordering::Relaxed);
            let next = loop {
                let started = me.stats.started.load(Ordering::Relaxed);
                let got = tokio::select! {
                    p = tokio::time::timeout(wait, me.permits.clone().acquire_owned()) => p,
                    _ = me.runs_cancel.cancelled() => break AheadNext::Hold,
                };
                match got {
                    Ok(Ok(p)) => break AheadNext::Run(p),
                    Ok(Err(_)) => break AheadNext::Hold,
                    Err(_) => {}
                }
                // No run permit yet. While the node runs through at least as many firings as
                // wait claimed ahead in each wait, this one's turn comes soon (a burst whose
                // outcomes wait behind its claims): it waits on, its lease renewed. Slower
                // than that (its handlers slowed down), it is queued again.
                let ran = me.stats.started.load(Ordering::Relaxed) - started;
                if ran < me.stats.ahead_waiting.load(Ordering::Relaxed) {
                    break AheadNext::Hold;
                }
                match me.renew_claimed(&claimed).await {
                    Ok(true) => {}
                    // Taken over, or not knowing: it does not run (its lease hands it over).
                    Ok(false) => break AheadNext::Drop,
                    Err(e) => {
                        tracing::warn!(error = %e, "could not renew a lease claimed ahead; leaving it to expire");
                        break AheadNext::Drop;
                    }
                }
            };
            me.stats.ahead_waiting.fetch_sub(1, Ordering::Relaxed);
            drop(ahead);
            match next {
                AheadNext::Run(p) => me.start_run(p, claimed, Kind::Scheduled, source, epoch),
                AheadNext::Hold => me.hold_ahead(claimed).await,
                AheadNext::Drop => {}
            }
        });
    }
}

/// What becomes of a firing claimed ahead that waited for a run permit.
enum AheadNext {
    Run(OwnedSemaphorePermit),
    /// Queued again as the same attempt, its lease given up.
    Hold,
    /// Not run here: its lease was lost, or could not be renewed.
    Drop,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::RunTime;

    /// No run ended yet: not short (a node whose handlers are slow from the start claims
    /// nothing ahead). Short runs make it short; runs past 40 ms on average end it (20 ms
    /// starts it again: no flapping near the line), and short runs bring it back.
    #[test]
    fn runs_are_short_by_their_moving_average() {
        let t = RunTime::default();
        assert!(!t.short(), "short before any run ended");
        t.record(Duration::from_micros(300));
        assert!(t.short());
        // One slow run among short ones moves the average by an eighth of its time.
        t.record(Duration::from_millis(100));
        assert!(t.short(), "one 100 ms run among short ones");
        // Past 20 ms on average, still short up to 40 ms.
        t.record(Duration::from_millis(100));
        assert!(t.short(), "23 ms on average");
        for _ in 0..3 {
            t.record(Duration::from_millis(100));
        }
        assert!(!t.short(), "runs of 100 ms");
        for _ in 0..40 {
            t.record(Duration::from_millis(1));
        }
        assert!(t.short(), "short again");
        // An hours-long run does not overflow the average.
        t.record(Duration::from_secs(365 * 24 * 3600));
        assert!(!t.short());
    }
}
