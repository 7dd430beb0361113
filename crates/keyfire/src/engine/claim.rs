//! The claimer: the claim protocol, one firing (or its next attempt, or a lost run) taken by
//! exactly one node, with the bookkeeping of what this node is claiming held by an RAII
//! guard. Scheduled claims go to Redis in batches (`batcher`, the rest of the claimer).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, mpsc};

use super::context::{NodeCore, SweepState, bump, ms};
use super::executor::{Executor, RunPermit};
use super::firing::{Claimed, Kind, Source};
use super::flow_limiter::FlowLimiter;
use super::membership::{Fence, Live};
use super::misfire::{MisfirePlan, misfire_plan};
use super::runner::Runner;
use super::specs::{CachedJob, Specs};
use super::timers::TimerQueue;
use crate::metrics::name;
use crate::store::{ClaimArgs, ClaimReply, Dropped, SkipReason};

/// The next step after a claim reply.
pub(super) enum Step {
    Claimed(Claimed),
    Done,
    /// Claim again, with the misfire plan (None: recompute from the job's current version).
    Again(Option<MisfirePlan>),
}

/// A scheduled firing waiting in its shard's batcher queue, with the permit it holds
/// meanwhile.
pub(super) struct ClaimRequest {
    /// The firing, marked as being claimed until the request is done with.
    pub(super) guard: ClaimGuard,
    pub(super) source: Source,
    pub(super) permit: RunPermit,
}

/// The claimer: claims firings, next attempts and lost runs, and starts their runs.
pub(super) struct Claimer {
    pub(super) core: Arc<NodeCore>,
    pub(super) specs: Arc<Specs>,
    pub(super) executor: Arc<Executor>,
    pub(super) live: Arc<Live>,
    pub(super) fence: Arc<Fence>,
    pub(super) timers: TimerQueue,
    pub(super) runner: Arc<Runner>,
    pub(super) limiter: Arc<FlowLimiter>,
    /// Told when a takeover failed (the next sweep looks at the runs' holders again).
    pub(super) sweep: Arc<SweepState>,
    /// Firings this node is claiming right now, and those to arm again when their claim ends.
    pub(super) book: ClaimBook,
    /// Queues a scheduled claim for its shard's batcher.
    pub(super) claims: Vec<mpsc::UnboundedSender<ClaimRequest>>,
    /// Scheduled claims waiting for a permit, in turn.
    pub(super) waiting: Mutex<Waiting>,
    /// Firings claimed ahead waiting for a run permit, in turn.
    pub(super) ahead_line: Mutex<super::batcher::AheadLine>,
}

/// Scheduled claims waiting for a permit: one task takes them in turn (the first in line
/// gets the next permit), rather than a task per claim, which under a burst was a spawn for
/// most firings.
#[derive(Default)]
pub(super) struct Waiting {
    line: VecDeque<(ClaimGuard, Source)>,
    /// Whether the task that serves the line runs (it stops once the line is empty).
    serving: bool,
}

impl Claimer {
    /// Claim in the background, unless this node is already claiming the same thing (or
    /// settled it lately, for an event): whether a claim started.
    pub(super) fn spawn_claim(
        self: &Arc<Self>,
        job_id: String,
        at_ms: i64,
        kind: Kind,
        source: Source,
    ) -> bool {
        // A node that fenced itself (no heartbeat) claims nothing: its peers may be taking
        // its runs over.
        if self.core.claiming.is_cancelled() || self.fence.is_fenced() {
            return false;
        }
        // Redis emits a sentinel's `expired` event late when many keys expire at once, often
        // after this node's timer claimed the firing: that claim settled it (its due entry
        // moved on), so the event has nothing to claim. Timers and sweeps are never skipped
        // (a job created again with the same instant is theirs to claim).
        if source == Source::Event && kind == Kind::Scheduled && self.book.settled(&job_id, at_ms) {
            return false;
        }
        let Some(guard) = self.enter_inflight(job_id, at_ms, kind) else {
            return false;
        };
        // A scheduled claim with a permit at hand goes to its batcher now; one that must wait
        // for a permit waits in line (behind those waiting already).
        if kind == Kind::Scheduled {
            let mut waiting = self.waiting.lock().expect("claim line lock");
            if waiting.line.is_empty()
                && let Some(permit) = self.try_claim_permit()
            {
                drop(waiting);
                self.send_claim(guard, source, permit);
                return true;
            }
            waiting.line.push_back((guard, source));
            if std::mem::replace(&mut waiting.serving, true) {
                return true;
            }
            drop(waiting);
            let me = self.clone();
            // Tracked with the runs, so shutdown waits for a claim about to start a run.
            self.core.runs.spawn(async move { me.serve_line().await });
            return true;
        }
        let me = self.clone();
        // Tracked with the runs, so shutdown waits for a claim that is about to start a run.
        // The guard takes the firing off `inflight` when the claim ends.
        self.core.runs.spawn(async move {
            me.claim(guard, source).await;
        });
        true
    }

    /// Give the scheduled claims waiting in line their permits, in turn, and queue them for
    /// their batchers; until the line is empty, or the node stops claiming (the claims left
    /// are dropped, with their guards).
    async fn serve_line(self: Arc<Self>) {
        loop {
            let Some(permit) = self.claim_permit().await else {
                let mut waiting = self.waiting.lock().expect("claim line lock");
                let line = std::mem::take(&mut waiting.line);
                waiting.serving = false;
                drop(waiting);
                drop(line);
                return;
            };
            if !self.serve_next(permit) {
                return;
            }
            // Then on to the next in line while permits are free now, without a wait for a
            // permit built per claim; yielding when this task's turn is used up.
            while let Some(permit) = self.try_claim_permit() {
                if !self.serve_next(permit) {
                    return;
                }
                tokio::task::consume_budget().await;
            }
        }
    }

    /// Give the first claim in line `permit` and queue it for its batcher: whether more
    /// wait (if not, the line is no longer served).
    fn serve_next(&self, permit: RunPermit) -> bool {
        let mut waiting = self.waiting.lock().expect("claim line lock");
        let Some((guard, source)) = waiting.line.pop_front() else {
            waiting.serving = false;
            return false;
        };
        let more = !waiting.line.is_empty();
        if !more {
            waiting.serving = false;
        }
        drop(waiting);
        self.send_claim(guard, source, permit);
        more
    }

    /// Queue a scheduled claim for its shard's batcher.
    fn send_claim(&self, guard: ClaimGuard, source: Source, permit: RunPermit) {
        let shard = self.core.store.shards().of(guard.job_id());
        // A batcher that stopped drops the request, and with it the guard.
        let _ = self.claims[shard].send(ClaimRequest {
            guard,
            source,
            permit,
        });
    }

    /// A scheduled claim's permit if one is free now: a run permit, else, while runs are
    /// short, a permit to claim ahead of one (see [`RunPermit`]).
    fn try_claim_permit(&self) -> Option<RunPermit> {
        if let Ok(p) = self.executor.permits.clone().try_acquire_owned() {
            return Some(RunPermit::Run(p));
        }
        if !self.executor.run_time.short() {
            return None;
        }
        let p = self
            .executor
            .claims_ahead
            .clone()
            .try_acquire_owned()
            .ok()?;
        Some(self.ahead(p))
    }

    /// A permit to claim ahead, counted.
    fn ahead(&self, p: OwnedSemaphorePermit) -> RunPermit {
        bump(&self.core.stats.claimed_ahead);
        RunPermit::Ahead(p)
    }

    /// Wait for a scheduled claim's permit: while runs are short, a permit to claim ahead
    /// (the run permits that come free go to the firings already claimed, which wait for
    /// them in line); else a run permit; whichever applies when that changes. None once the
    /// node stops claiming.
    async fn claim_permit(&self) -> Option<RunPermit> {
        loop {
            let changed = self.executor.run_time.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(p) = self.try_claim_permit() {
                return Some(p);
            }
            let short = self.executor.run_time.short();
            let line = if short {
                &self.executor.claims_ahead
            } else {
                &self.executor.permits
            };
            let permit = tokio::select! {
                biased;
                _ = self.core.claiming.cancelled() => None,
                _ = &mut changed => continue,
                p = line.clone().acquire_owned() => p.ok(),
            };
            let permit = permit.filter(|_| !self.core.claiming.is_cancelled())?;
            return Some(if short {
                self.ahead(permit)
            } else {
                RunPermit::Run(permit)
            });
        }
    }

    /// Mark a firing as being claimed by this node; None when a claim of it is under way
    /// already. The firing stays marked while the returned guard lives.
    pub(super) fn enter_inflight(
        self: &Arc<Self>,
        job_id: String,
        at_ms: i64,
        kind: Kind,
    ) -> Option<ClaimGuard> {
        let key = (job_id, at_ms, kind);
        if !self.book.enter(&key) {
            return None;
        }
        if kind == Kind::Scheduled {
            self.core
                .stats
                .claims_pending
                .fetch_add(1, Ordering::Relaxed);
        }
        Some(ClaimGuard {
            claimer: self.clone(),
            key,
        })
    }

    /// Take over a run that `holder` holds, lease or not: that node is gone (no heartbeat
    /// for node_ttl), or it is this node and the run no longer runs.
    /// `expiry`: the lease's expiry as the caller read it; the takeover is refused if the
    /// holder renewed the lease since (it is alive after all).
    pub(super) fn spawn_takeover(
        self: &Arc<Self>,
        job_id: String,
        at_ms: i64,
        holder: String,
        expiry: Option<i64>,
    ) {
        if self.core.claiming.is_cancelled() || self.fence.is_fenced() {
            return;
        }
        let Some(guard) = self.enter_inflight(job_id, at_ms, Kind::Lease) else {
            return;
        };
        let me = self.clone();
        self.core.runs.spawn(async move {
            let (job_id, at_ms) = (guard.job_id(), guard.at_ms());
            if let Err(e) = me.recover(job_id, at_ms, Some(&holder), expiry).await {
                tracing::warn!(job = %job_id, at = at_ms, error = %e, "takeover failed; the sweeper retries");
                me.sweep.check_holders();
            }
        });
    }

    /// Claim what `guard` marks: take over a lost run, queue a scheduled firing for the
    /// shard's batcher, or claim a next attempt.
    pub(super) async fn claim(self: &Arc<Self>, guard: ClaimGuard, source: Source) {
        let (job_id, at_ms, kind) = (guard.job_id(), guard.at_ms(), guard.kind());
        if kind == Kind::Lease {
            if let Err(e) = self.recover(job_id, at_ms, None, None).await {
                tracing::warn!(job = job_id, at = at_ms, error = %e, "lease takeover failed; the sweeper retries");
            }
            return;
        }
        // A permit first: a node at capacity claims nothing and leaves firings to others.
        if kind == Kind::Scheduled {
            if let Some(permit) = self.claim_permit().await {
                self.send_claim(guard, source, permit);
            }
            return;
        }
        let permit = tokio::select! {
            p = self.executor.permits.clone().acquire_owned() => p.ok(),
            _ = self.core.claiming.cancelled() => None,
        };
        let Some(permit) = permit.filter(|_| !self.core.claiming.is_cancelled()) else {
            return;
        };
        let epoch = self.fence.send_epoch();
        match self.try_claim_retry(job_id, at_ms).await {
            Ok(Some(claimed)) => {
                drop(guard);
                self.runner.start_run(permit, claimed, kind, source, epoch);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(job = job_id, at = at_ms, error = %e, "claim failed; the sweeper retries")
            }
        }
    }

    /// The claim script's arguments for the firing `at_ms` of `cached`, first try or after
    /// the misfire policy was applied (`plan`).
    pub(super) fn claim_args<'a>(
        &'a self,
        job_id: &'a str,
        at_ms: i64,
        cached: &'a CachedJob,
        plan: Option<&MisfirePlan>,
    ) -> ClaimArgs<'a> {
        let job = &cached.job;
        // An instant a calendar of the job excludes is skipped in the claim's own step
        // (recorded in the ledger as `excluded`), by the calendar as this node has it now.
        // A late one the misfire policy would run is skipped too.
        let excluded = plan.is_none_or(|p| p.run) && cached.excluded_by(at_ms).is_some();
        let only = Dropped {
            reason: SkipReason::Excluded,
            first_ms: at_ms,
            last_ms: at_ms,
        };
        let (next_ms, run, missed, dropped) = match plan {
            // With a range of its own to record, the plan's record stands (its count is
            // `missed`); else this instant's.
            Some(p) if excluded => match p.dropped {
                Some(d) => (p.next, false, p.missed, Some(d)),
                None => (p.next, false, p.missed + 1, Some(only)),
            },
            Some(p) => (p.next, p.run, p.missed, p.dropped),
            None if excluded => (job.next_after(at_ms), false, 1, Some(only)),
            None => (job.next_after(at_ms), true, 0, None),
        };
        ClaimArgs {
            job_id,
            at_ms,
            version: cached.version,
            generation: cached.generation,
            next_ms,
            node: &self.core.id,
            lease_ms: ms(self.core.settings.lease),
            ahead_ms: ms(self.core.settings.claim_ahead),
            tolerance_ms: job.misfire_tolerance_ms,
            misfire_applied: plan.is_some() || excluded,
            run,
            missed,
            overlap: job.overlap.as_str(),
            announce_ms: ms(self.core.settings.timer_horizon),
            arms_next: false,
            compact: cached.compact,
            dropped,
            max_runs: job.limits.max_runs,
            jitter_ms: job.jitter_offset(at_ms),
        }
    }

    /// What a claim reply means for this node.
    pub(super) fn on_claim_reply(
        &self,
        job_id: &str,
        at_ms: i64,
        cached: Arc<CachedJob>,
        reply: ClaimReply,
        missed: u64,
    ) -> Step {
        match reply {
            // This node moved the firing's due entry on: only a change (which arms timers)
            // can make the same instant due again.
            ClaimReply::Claimed { .. } | ClaimReply::Missed => {
                self.book.settle(job_id, at_ms);
            }
            _ => {}
        }
        match reply {
            ClaimReply::Claimed { now_ms, attempt } => {
                bump(&self.core.stats.claimed);
                self.core
                    .metrics
                    .lateness((now_ms - at_ms).max(0) as f64 / 1000.0);
                self.count_missed(missed);
                let release = at_ms + cached.job.jitter_offset(at_ms);
                Step::Claimed(Claimed {
                    job: cached,
                    at_ms,
                    claimed_ms: now_ms,
                    attempt,
                    hold_until: Claimed::hold(now_ms, release),
                })
            }
            ClaimReply::Early { wait_ms } => {
                self.retry_when_due(job_id, at_ms, Kind::Scheduled, wait_ms);
                Step::Done
            }
            ClaimReply::VersionChanged { .. } => {
                self.specs.forget(job_id);
                Step::Again(None)
            }
            ClaimReply::Misfire { now_ms } => {
                let job = &cached.job;
                let p = misfire_plan(job, at_ms, now_ms - job.misfire_tolerance_ms);
                tracing::info!(
                    job = job_id,
                    at = at_ms,
                    run = p.run,
                    missed = p.missed,
                    "misfire"
                );
                Step::Again(Some(p))
            }
            ClaimReply::Overlapped => {
                tracing::info!(
                    job = job_id,
                    at = at_ms,
                    "skipped: the previous run still runs"
                );
                metrics::counter!(name::SKIPPED, "node" => self.core.id.clone(), "reason" => "overlap")
                    .increment(1);
                Step::Done
            }
            ClaimReply::Missed => {
                self.count_missed(missed);
                Step::Done
            }
            ClaimReply::Stale | ClaimReply::Locked | ClaimReply::Dropped => {
                self.core.stats.claim_conflict(&self.core.id);
                Step::Done
            }
        }
    }

    /// The claim protocol for one firing: compute the next firing from the job's spec and let
    /// the claim script compare-and-set it (G1), by Redis's clock (G3); recompute when the job
    /// changed or the firing is a misfire.
    pub(super) async fn try_claim(
        &self,
        job_id: &str,
        at_ms: i64,
        mut plan: Option<MisfirePlan>,
    ) -> crate::Result<Option<Claimed>> {
        for _ in 0..5 {
            let Some(cached) = self.specs.spec(job_id).await? else {
                return Ok(None);
            };
            let args = self.claim_args(job_id, at_ms, &cached, plan.as_ref());
            let missed = args.missed;
            let reply = self.core.store.claim(&args).await?;
            match self.on_claim_reply(job_id, at_ms, cached.clone(), reply, missed) {
                Step::Claimed(c) => return Ok(Some(c)),
                Step::Done => return Ok(None),
                Step::Again(p) => plan = p,
            }
        }
        Ok(None)
    }

    /// Claim the next attempt of a firing (retry, takeover, trigger, replay).
    pub(super) async fn try_claim_retry(
        &self,
        job_id: &str,
        at_ms: i64,
    ) -> crate::Result<Option<Claimed>> {
        // A cached spec behind the job's version (a change message this node missed) is
        // refused by the script; read the job again and ask once more.
        for _ in 0..3 {
            let Some(cached) = self.specs.spec(job_id).await? else {
                // Gone: the claim script drops the entry.
                let _ = self
                    .core
                    .store
                    .claim_retry(
                        job_id,
                        at_ms,
                        &self.core.id,
                        ms(self.core.settings.lease),
                        "allow",
                        None,
                    )
                    .await?;
                return Ok(None);
            };
            let reply = self
                .core
                .store
                .claim_retry(
                    job_id,
                    at_ms,
                    &self.core.id,
                    ms(self.core.settings.lease),
                    cached.job.overlap.as_str(),
                    Some((cached.generation, cached.version)),
                )
                .await?;
            match reply {
                ClaimReply::Claimed { now_ms, attempt } => {
                    bump(&self.core.stats.claimed);
                    return Ok(Some(Claimed {
                        job: cached,
                        at_ms,
                        claimed_ms: now_ms,
                        attempt,
                        hold_until: None,
                    }));
                }
                ClaimReply::Early { wait_ms } => {
                    self.retry_when_due(job_id, at_ms, Kind::Retry, wait_ms);
                    return Ok(None);
                }
                // Left queued: a sweep asks again if the job keeps changing meanwhile.
                ClaimReply::VersionChanged { .. } => self.specs.forget(job_id),
                _ => return Ok(None),
            }
        }
        Ok(None)
    }

    /// Take over a run whose lease expired (`holder` None) or whose holder is gone.
    pub(super) async fn recover(
        self: &Arc<Self>,
        job_id: &str,
        at_ms: i64,
        holder: Option<&str>,
        expiry: Option<i64>,
    ) -> crate::Result<()> {
        let cached = self.specs.spec(job_id).await?;
        let max_attempts = cached.as_ref().map_or(1, |c| c.job.retry.max_attempts);
        let limits = self.core.history_limits();
        if let Some(next) = self
            .core
            .store
            .take_over_unless_renewed(
                job_id,
                at_ms,
                holder,
                expiry,
                max_attempts,
                limits.dead,
                limits.history,
            )
            .await?
        {
            self.core.stats.takeover(&self.core.id);
            // The lost run's limit slot comes back now, not when its lease runs out.
            self.limiter
                .release_taken_over(cached.as_deref(), &crate::store::firing_id(job_id, at_ms))
                .await;
            if next == 0 {
                metrics::counter!(name::DEAD, "node" => self.core.id.clone()).increment(1);
            }
            tracing::warn!(
                job = job_id,
                at = at_ms,
                next_attempt = next,
                holder,
                "took over a run: its lease expired or its node left"
            );
            if next > 0 {
                self.spawn_claim(job_id.to_string(), at_ms, Kind::Retry, Source::Sweep);
            }
        }
        Ok(())
    }

    pub(super) fn count_missed(&self, missed: u64) {
        if missed > 0 {
            metrics::counter!(name::SKIPPED, "node" => self.core.id.clone(), "reason" => "misfire")
                .increment(missed);
        }
    }

    /// A claim came `wait_ms` early (our clock estimate was ahead): try again when Redis's
    /// clock gets there.
    pub(super) fn retry_when_due(&self, job_id: &str, at_ms: i64, kind: Kind, wait_ms: i64) {
        // Armed when this claim ends (its guard drops), not now: a timer that fired before the
        // firing left `inflight` would be refused by `spawn_claim` as a duplicate, and the
        // firing would wait for a sweep.
        let deadline = self.core.clock.local_ms() + wait_ms + 1;
        self.book
            .rearm_later((job_id.to_string(), at_ms, kind), deadline);
    }
}

/// This node is claiming a firing while this lives: an event, a timer and a sweep that find
/// the same firing start one claim between them. Dropping it ends the claim, however it
/// ended, and arms the timer a claim that came early asked for.
pub(super) struct ClaimGuard {
    claimer: Arc<Claimer>,
    key: ClaimKey,
}

impl ClaimGuard {
    pub(super) fn job_id(&self) -> &str {
        &self.key.0
    }

    pub(super) fn at_ms(&self) -> i64 {
        self.key.1
    }

    pub(super) fn kind(&self) -> Kind {
        self.key.2
    }
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        if self.key.2 == Kind::Scheduled {
            self.claimer
                .core
                .stats
                .claims_pending
                .fetch_sub(1, Ordering::Relaxed);
        }
        if let Some(deadline) = self.claimer.book.leave(&self.key) {
            let (job_id, at_ms, kind) = self.key.clone();
            self.claimer
                .timers
                .arm_at(job_id, at_ms, kind, Some(deadline));
        }
    }
}

/// A firing being claimed: job id, instant, what is taken.
pub(super) type ClaimKey = (String, i64, Kind);

/// What this node is claiming right now, so an event, a timer and a sweep that find the same
/// firing start one claim between them; and the firings a claim found early, to arm again
/// (local deadline) when that claim ends.
#[derive(Default)]
pub(super) struct ClaimBook {
    /// The firings being claimed, each as a hash of its key: entering and leaving allocate
    /// nothing (a collision could only leave a firing to a later timer or sweep).
    inflight: Mutex<foldhash::HashSet<u64>>,
    hasher: foldhash::fast::RandomState,
    rearm: Mutex<foldhash::HashMap<ClaimKey, i64>>,
    /// How many are in `rearm` (most claims end with none to arm again: no lock then).
    rearms: AtomicUsize,
    settled: Mutex<Settled>,
}

/// Scheduled firings this node claimed (or skipped as missed) lately, in two generations:
/// each is remembered for at least [`SETTLED_FOR`] (at most twice that), and at most
/// [`SETTLED_MAX`] of them. A generation is dropped whole (its room kept for the next), so
/// settling a firing is one insert: no queue of times to keep in order beside the set.
/// Keyed by a hash of job id and instant, so the lookup for each `expired` event allocates
/// nothing (a collision could only skip an event claim, which timers and sweeps back up).
#[derive(Default)]
struct Settled {
    hasher: foldhash::fast::RandomState,
    current: foldhash::HashSet<u64>,
    previous: foldhash::HashSet<u64>,
    /// When `current` was started (None: not yet).
    since: Option<Instant>,
}

impl Settled {
    fn key(&self, job_id: &str, at_ms: i64) -> u64 {
        use std::hash::BuildHasher;
        self.hasher.hash_one((job_id, at_ms))
    }

    fn insert(&mut self, key: u64, now: Instant) {
        let since = *self.since.get_or_insert(now);
        if self.current.len() >= SETTLED_MAX / 2 || now.duration_since(since) >= SETTLED_FOR {
            std::mem::swap(&mut self.current, &mut self.previous);
            self.current.clear();
            self.since = Some(now);
        }
        self.current.insert(key);
    }

    fn contains(&self, key: u64) -> bool {
        self.current.contains(&key) || self.previous.contains(&key)
    }
}

/// How long a settled firing is remembered: an `expired` event comes later than that only
/// under a backlog that the sweeper handles anyway.
const SETTLED_FOR: Duration = Duration::from_secs(30);
/// The most settled firings remembered (a few MB at most).
const SETTLED_MAX: usize = 65_536;

impl ClaimBook {
    /// Mark a firing as being claimed; false when it is already.
    fn enter(&self, key: &ClaimKey) -> bool {
        let h = self.hash(key);
        self.inflight.lock().expect("inflight lock").insert(h)
    }

    fn hash(&self, (job_id, at_ms, kind): &ClaimKey) -> u64 {
        use std::hash::BuildHasher;
        self.hasher.hash_one((job_id.as_str(), *at_ms, *kind))
    }

    /// Arm the firing again at `deadline` (local ms) once its claim ends.
    fn rearm_later(&self, key: ClaimKey, deadline: i64) {
        let mut rearm = self.rearm.lock().expect("rearm lock");
        if rearm.insert(key, deadline).is_none() {
            self.rearms.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The claim ended: unmark it; the deadline to arm it again at, if one was asked for.
    fn leave(&self, key: &ClaimKey) -> Option<i64> {
        let h = self.hash(key);
        self.inflight.lock().expect("inflight lock").remove(&h);
        // Asked for under this claim (its guard lives while it is asked): seen here.
        if self.rearms.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let deadline = self.rearm.lock().expect("rearm lock").remove(key);
        if deadline.is_some() {
            self.rearms.fetch_sub(1, Ordering::Relaxed);
        }
        deadline
    }

    /// A claim of this scheduled firing settled it: no later scheduled claim can take it.
    pub(super) fn settle(&self, job_id: &str, at_ms: i64) {
        let mut s = self.settled.lock().expect("settled lock");
        let key = s.key(job_id, at_ms);
        s.insert(key, Instant::now());
    }

    /// Whether a claim of this scheduled firing settled it lately.
    pub(super) fn settled(&self, job_id: &str, at_ms: i64) -> bool {
        let s = self.settled.lock().expect("settled lock");
        s.contains(s.key(job_id, at_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A settled firing is remembered for at least `SETTLED_FOR` (at most twice that), and
    /// no more than `SETTLED_MAX` are: a generation is dropped whole.
    #[test]
    fn settled_firings_are_kept_for_a_while_in_two_generations() {
        let mut s = Settled::default();
        let t0 = Instant::now();
        s.insert(1, t0);
        s.insert(2, t0 + SETTLED_FOR - Duration::from_millis(1));
        assert!(s.contains(1) && s.contains(2));
        // A new generation: the last one is still asked.
        s.insert(3, t0 + SETTLED_FOR);
        assert!(s.contains(1) && s.contains(2) && s.contains(3));
        // And the next drops the first, whole.
        s.insert(4, t0 + SETTLED_FOR * 2);
        assert!(
            !s.contains(1) && !s.contains(2),
            "older than two generations"
        );
        assert!(s.contains(3) && s.contains(4));
        assert!(!s.contains(5), "never settled");

        // By count: at most SETTLED_MAX in all, however fast they come.
        let mut s = Settled::default();
        for k in 0..SETTLED_MAX as u64 {
            s.insert(k, t0);
        }
        assert!(s.contains(0) && s.contains(SETTLED_MAX as u64 - 1));
        s.insert(u64::MAX, t0);
        assert!(!s.contains(0), "the first generation dropped");
        assert!(s.contains(SETTLED_MAX as u64 / 2) && s.contains(u64::MAX));
        assert!(s.current.len() + s.previous.len() <= SETTLED_MAX);
    }
}
