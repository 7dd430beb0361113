//! The claimer's batcher: scheduled claims that arrive together go to Redis as one script
//! call per shard, a few calls in flight; and the firings claimed ahead of a run permit,
//! waiting for one.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, mpsc};

use super::batch::run_batches;
use super::claim::{ClaimRequest, Claimer, Step};
use super::executor::RunPermit;
use super::firing::{Claimed, Kind, Source};
use super::specs::CachedJob;
use crate::store::{ClaimArgs, ClaimReply};

/// How long a firing claimed ahead waits for a run permit (at most a quarter of the lease)
/// before it looks whether the node gets through the firings claimed ahead: then it waits
/// on, its lease renewed; if not, it is queued again (as the same attempt, for this node or
/// another).
pub(super) const AHEAD_WAIT_MAX: Duration = Duration::from_secs(1);

impl Claimer {
    /// Scheduled claims that arrive together go to Redis as one script call.
    pub(super) async fn run_batcher(
        self: Arc<Self>,
        mut rx: mpsc::UnboundedReceiver<ClaimRequest>,
    ) {
        run_batches(&mut rx, &self.core.claiming, &self.core.runs, |batch| {
            let me = self.clone();
            async move { me.claim_batch(batch).await }
        })
        .await;
        // Requests left in the queue at shutdown are dropped with their permits and guards.
        rx.close();
        while rx.try_recv().is_ok() {}
    }

    /// The batcher's step: claim a batch of scheduled firings in one script call, and start
    /// the runs of those claimed.
    pub(super) async fn claim_batch(self: &Arc<Self>, batch: Vec<ClaimRequest>) {
        // The specs the cache lacks (a one-shot task's, always) in one round trip.
        let ids: Vec<&str> = batch.iter().map(|r| r.guard.job_id()).collect();
        let specs = match self.specs.specs(&ids, true).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "reading job specs failed; the sweeper retries");
                vec![None; batch.len()]
            }
        };
        drop(ids);
        let mut items: Vec<(ClaimRequest, Arc<CachedJob>)> = Vec::with_capacity(batch.len());
        let now = self.core.clock.redis_now_ms();
        for (req, spec) in batch.into_iter().zip(specs) {
            match spec {
                Some(cached) if self.released(&req, &cached, now) => items.push((req, cached)),
                // Gone or not valid, or a jittered firing not released yet: the request (and
                // its guard) is dropped.
                _ => drop(req),
            }
        }
        let mut args: Vec<ClaimArgs> = items
            .iter()
            .map(|(r, c)| self.claim_args(r.guard.job_id(), r.guard.at_ms(), c, None))
            .collect();
        // This node owns every job of the batch (its own firings, the common case): it arms
        // the next firings the claim moves the jobs on to itself, and the claim announces
        // none of them (a message every node would read, for one of them).
        let arms_next = self.live.owns_all(
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
        let replies = self.core.store.claim_many(&args).await;
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
                self.timers.arm(guard.job_id().to_string(), next);
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
                    self.core.runs.spawn(async move {
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

    /// Whether a scheduled firing is released, by this node's estimate of Redis's clock: its
    /// instant has come, plus its jitter offset when its job has jitter. The due entry,
    /// sentinel key and timers of a jittered firing keep its instant (its id and its
    /// compare-and-set value), so they bring it here early; its owner then arms a timer for
    /// its release (armed when the request's guard drops). Another node's sweep takes it
    /// over only once its release is overdue by the grace period, as for any firing. The
    /// claim script checks the release again by Redis's own clock.
    fn released(&self, req: &ClaimRequest, cached: &CachedJob, now: i64) -> bool {
        let (job_id, at_ms) = (req.guard.job_id(), req.guard.at_ms());
        let offset = cached.job.jitter_offset(at_ms);
        if offset == 0 {
            return true;
        }
        let release = at_ms + offset;
        if !self.live.owns(job_id) {
            let grace =
                super::context::ms(self.core.settings.claim_grace + self.core.settings.node_ttl);
            return release <= now - grace;
        }
        // Claimed up to the claim lead ahead, as any firing of this node's.
        let lead = super::context::ms(self.core.settings.claim_ahead);
        if release <= now + lead {
            return true;
        }
        self.retry_when_due(job_id, at_ms, Kind::Scheduled, release - now - lead);
        false
    }

    /// Run a scheduled firing this node claimed: on its own permit, or, claimed ahead, on the
    /// first run permit that comes free (see [`AHEAD_WAIT_MAX`] for when it is queued again
    /// instead, its lease given up, armed for this node's timers).
    pub(super) fn start_claimed(
        self: &Arc<Self>,
        permit: RunPermit,
        claimed: Claimed,
        source: Source,
        epoch: u64,
    ) {
        let ahead = match permit {
            RunPermit::Run(p) => {
                return self
                    .runner
                    .start_run(p, claimed, Kind::Scheduled, source, epoch);
            }
            RunPermit::Ahead(a) => a,
        };
        if let Ok(p) = self.executor.permits.clone().try_acquire_owned() {
            drop(ahead);
            return self
                .runner
                .start_run(p, claimed, Kind::Scheduled, source, epoch);
        }
        // In line for a run permit, behind the firings claimed ahead before it: one task
        // serves the line (a task and a timer per waiting firing were a good part of a
        // burst's cost).
        let wait = AHEAD_WAIT_MAX.min(self.core.settings.lease / 4);
        self.core
            .stats
            .ahead_waiting
            .fetch_add(1, Ordering::Relaxed);
        let mut line = self.ahead_line.lock().expect("ahead line lock");
        line.line.push_back(AheadRun {
            claimed,
            source,
            epoch,
            ahead,
            check_at: tokio::time::Instant::now() + wait,
            started: self.core.stats.started.load(Ordering::Relaxed),
        });
        if std::mem::replace(&mut line.serving, true) {
            return;
        }
        drop(line);
        let me = self.clone();
        // Tracked with the runs, so shutdown waits for the firings in line to be queued again.
        self.core
            .runs
            .spawn(async move { me.serve_ahead_line(wait).await });
    }

    /// Give the firings claimed ahead their run permits, in turn, until the line is empty.
    /// Each one that waited `wait` looks whether the node gets through the firings claimed
    /// ahead: then it waits on, its lease renewed; if not, it is queued again (as the same
    /// attempt, for this node or another). At shutdown, those left are queued again.
    async fn serve_ahead_line(self: Arc<Self>, wait: Duration) {
        loop {
            let check_at = {
                let mut line = self.ahead_line.lock().expect("ahead line lock");
                match line.line.front() {
                    Some(a) => a.check_at,
                    None => {
                        line.serving = false;
                        return;
                    }
                }
            };
            tokio::select! {
                biased;
                _ = self.core.runs_cancel.cancelled() => {
                    let left = std::mem::take(&mut self.ahead_line.lock().expect("ahead line lock").line);
                    futures::future::join_all(
                        left.into_iter().map(|a| self.leave_ahead_line(a, AheadNext::Hold)),
                    )
                    .await;
                }
                p = self.executor.permits.clone().acquire_owned() => {
                    let Ok(mut p) = p else { continue };
                    // Then on to the next in line while permits are free now, without a
                    // select (a timer and a wait for a permit built) per firing; yielding
                    // when this task's turn is used up.
                    loop {
                        let next = self.ahead_line.lock().expect("ahead line lock").line.pop_front();
                        let Some(a) = next else { break };
                        self.leave_ahead_line(a, AheadNext::Run(p)).await;
                        if self.core.runs_cancel.is_cancelled() {
                            break;
                        }
                        match self.executor.permits.clone().try_acquire_owned() {
                            Ok(more) => p = more,
                            Err(_) => break,
                        }
                        tokio::task::consume_budget().await;
                    }
                }
                _ = tokio::time::sleep_until(check_at) => self.check_ahead_line(wait).await,
            }
        }
    }

    /// The firings in line that waited `wait` since they last looked: each waits on, its
    /// lease renewed, while the node ran at least as many firings meanwhile as wait claimed
    /// ahead (a burst whose outcomes wait behind its claims); slower than that (its handlers
    /// slowed down), it is queued again.
    async fn check_ahead_line(&self, wait: Duration) {
        let now = tokio::time::Instant::now();
        let started = self.core.stats.started.load(Ordering::Relaxed);
        let waiting = self.core.stats.ahead_waiting.load(Ordering::Relaxed);
        let mut due = Vec::new();
        {
            let mut line = self.ahead_line.lock().expect("ahead line lock");
            while line.line.front().is_some_and(|a| a.check_at <= now) {
                due.extend(line.line.pop_front());
            }
        }
        // Queued again, or renewed, concurrently (each a script call, batched per shard).
        let (held, renewed): (Vec<AheadRun>, Vec<AheadRun>) =
            due.into_iter().partition(|a| started - a.started < waiting);
        let leases = futures::future::join(
            futures::future::join_all(
                held.into_iter()
                    .map(|a| self.leave_ahead_line(a, AheadNext::Hold)),
            ),
            futures::future::join_all(
                renewed
                    .iter()
                    .map(|a| self.runner.renew_claimed(&a.claimed)),
            ),
        )
        .await
        .1;
        let mut back = Vec::new();
        for (mut a, lease) in renewed.into_iter().zip(leases) {
            match lease {
                Ok(true) => {
                    a.check_at = now + wait;
                    a.started = started;
                    back.push(a);
                }
                // Taken over, or not knowing: it does not run (its lease hands it over).
                Ok(false) => self.leave_ahead_line(a, AheadNext::Drop).await,
                Err(e) => {
                    tracing::warn!(error = %e, "could not renew a lease claimed ahead; leaving it to expire");
                    self.leave_ahead_line(a, AheadNext::Drop).await;
                }
            }
        }
        // Back at the end of the line, in their order (their next look is the latest).
        self.ahead_line
            .lock()
            .expect("ahead line lock")
            .line
            .extend(back);
    }

    /// A firing leaves the line claimed ahead: to run, to be queued again, or dropped.
    async fn leave_ahead_line(&self, a: AheadRun, next: AheadNext) {
        self.core
            .stats
            .ahead_waiting
            .fetch_sub(1, Ordering::Relaxed);
        let AheadRun {
            claimed,
            source,
            epoch,
            ahead,
            ..
        } = a;
        drop(ahead);
        match next {
            AheadNext::Run(p) => self
                .runner
                .start_run(p, claimed, Kind::Scheduled, source, epoch),
            AheadNext::Hold => self.limiter.hold_ahead(claimed).await,
            AheadNext::Drop => {}
        }
    }
}

/// Firings claimed ahead of a run permit, waiting for one in turn.
#[derive(Default)]
pub(super) struct AheadLine {
    line: VecDeque<AheadRun>,
    /// Whether the task that serves the line runs (it stops once the line is empty).
    serving: bool,
}

/// A firing claimed ahead, in line for a run permit.
struct AheadRun {
    claimed: Claimed,
    source: Source,
    epoch: u64,
    /// Its permit to be claimed ahead, given back when it leaves the line.
    ahead: OwnedSemaphorePermit,
    /// When it next looks whether it waits on (see `check_ahead_line`).
    check_at: tokio::time::Instant,
    /// Runs this node had started when it last looked.
    started: u64,
}

/// What becomes of a firing claimed ahead that waited for a run permit.
enum AheadNext {
    Run(OwnedSemaphorePermit),
    /// Queued again as the same attempt, its lease given up.
    Hold,
    /// Not run here: its lease was lost, or could not be renewed.
    Drop,
}
