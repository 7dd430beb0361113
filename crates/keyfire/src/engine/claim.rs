//! Claiming a firing (or its next attempt) and running it in the bounded executor.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::FutureExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{CachedJob, Inner};
use crate::handler::{Firing, HandlerError};
use crate::job::{Job, MisfirePolicy, Validation};
use crate::metrics::name;
use crate::store::{ClaimArgs, ClaimReply, Completion, Fate, RunRecord, StoredSpec, firing_id};

/// What made a node try to claim a firing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    Event,
    Timer,
    Sweep,
}

/// What there is to take for a firing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    /// Its scheduled run, from the due ZSET.
    Scheduled,
    /// Its next attempt, from the retry ZSET.
    Retry,
    /// Its run whose lease expired, from the running ZSET.
    Lease,
}

/// Most scheduled claims sent in one script call.
const CLAIM_BATCH: usize = 128;
/// Batches of claims in flight at once.
const CLAIM_BATCHES_IN_FLIGHT: usize = 4;

/// A scheduled firing waiting in the batcher's queue, with the executor permit it will run on.
pub(super) struct ClaimRequest {
    job_id: String,
    at_ms: i64,
    source: Source,
    permit: OwnedSemaphorePermit,
}

/// An attempt that ended, waiting to be recorded, with the executor permit it ran on.
pub(super) struct Done {
    job_id: String,
    at_ms: i64,
    record: RunRecord,
    retry: Option<i64>,
    permit: OwnedSemaphorePermit,
}

/// The first item and whatever else is queued, up to a batch.
fn gather<T>(first: T, rx: &mut mpsc::UnboundedReceiver<T>) -> Vec<T> {
    let mut batch = vec![first];
    while batch.len() < CLAIM_BATCH {
        match rx.try_recv() {
            Ok(r) => batch.push(r),
            Err(_) => break,
        }
    }
    batch
}

/// The next step after a claim reply.
enum Step {
    Claimed(Claimed),
    Done,
    /// Claim again, with the misfire plan (None: recompute from the job's current version).
    Again(Option<MisfirePlan>),
}

/// After a cancel request, how long a handler may take to return before it is dropped.
pub(super) const CANCEL_GRACE: Duration = Duration::from_secs(1);

/// A firing this node holds.
struct Claimed {
    job: Arc<CachedJob>,
    at_ms: i64,
    claimed_ms: i64,
    attempt: u32,
}

/// How a run ended, as the executor saw it.
enum RunOutcome {
    Ok,
    Failed(HandlerError),
    Timeout,
    Cancelled,
}

/// The decision for a firing found later than the job's misfire tolerance.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct MisfirePlan {
    pub run: bool,
    pub next: Option<i64>,
    pub missed: u64,
}

/// Apply the job's misfire policy to firing `at`, found when firings up to `until` (Redis now
/// minus the tolerance) are late. Bounded work: a long outage of a per-second job is counted,
/// not listed.
pub(crate) fn misfire_plan(job: &Job, at: i64, until: i64) -> MisfirePlan {
    const MAX_SCAN: u64 = 10_000_000;
    let keep = match job.misfire {
        MisfirePolicy::CatchUp => job.catch_up_limit as usize,
        _ => 0,
    };
    // The late firings after `at`: how many, and the newest `keep` of them.
    let mut count = 0u64;
    let mut newest: VecDeque<i64> = VecDeque::with_capacity(keep + 1);
    let mut t = at;
    while let Some(n) = job.next_after(t) {
        if n > until || count >= MAX_SCAN {
            break;
        }
        count += 1;
        if keep > 0 {
            newest.push_back(n);
            if newest.len() > keep {
                newest.pop_front();
            }
        }
        t = n;
    }
    let within = || job.next_after(until);
    match job.misfire {
        MisfirePolicy::FireOnce => MisfirePlan {
            run: true,
            next: within(),
            missed: count,
        },
        MisfirePolicy::Skip => MisfirePlan {
            run: false,
            next: within(),
            missed: count + 1,
        },
        MisfirePolicy::CatchUp => {
            let total = count + 1;
            if total <= keep as u64 {
                MisfirePlan {
                    run: true,
                    next: job.next_after(at),
                    missed: 0,
                }
            } else {
                // Run the newest `keep` late firings: skip `at` and the older ones.
                MisfirePlan {
                    run: false,
                    next: newest.front().copied().or_else(within),
                    missed: total - keep as u64,
                }
            }
        }
    }
}

impl Inner {
    /// Claim in the background, unless this node is already claiming the same thing.
    pub(super) fn spawn_claim(
        self: &Arc<Self>,
        job_id: String,
        at_ms: i64,
        kind: Kind,
        source: Source,
    ) {
        // A node that fenced itself (no heartbeat) claims nothing: its peers may be taking
        // its runs over.
        if self.claiming.is_cancelled() || self.fenced.load(Ordering::SeqCst) {
            return;
        }
        let key = (job_id, at_ms, kind);
        if !self.enter_inflight(&key) {
            return;
        }
        let me = self.clone();
        // Tracked with the runs, so shutdown waits for a claim that is about to start a run.
        // The claim takes the firing off `inflight` when it ends.
        self.runs.spawn(async move {
            me.claim(&key.0, key.1, kind, source).await;
        });
    }

    /// Mark a firing as being claimed by this node; false when a claim of it is under way
    /// already (the claim takes it off `inflight` when it ends).
    fn enter_inflight(&self, key: &(String, i64, Kind)) -> bool {
        self.inflight
            .lock()
            .expect("inflight lock")
            .insert(key.clone())
    }

    /// Take over a run that `holder` holds, lease or not: that node is gone (no heartbeat
    /// for node_ttl), or it is this node and the run no longer runs.
    pub(super) fn spawn_takeover(self: &Arc<Self>, job_id: String, at_ms: i64, holder: String) {
        if self.claiming.is_cancelled() || self.fenced.load(Ordering::SeqCst) {
            return;
        }
        let key = (job_id, at_ms, Kind::Lease);
        if !self.enter_inflight(&key) {
            return;
        }
        let me = self.clone();
        self.runs.spawn(async move {
            if let Err(e) = me.recover(&key.0, key.1, Some(&holder)).await {
                tracing::warn!(job = %key.0, at = key.1, error = %e, "takeover failed; the sweeper retries");
                me.check_holders.store(true, Ordering::Relaxed);
            }
            me.claim_done(&key.0, key.1, Kind::Lease);
        });
    }

    async fn claim(self: &Arc<Self>, job_id: &str, at_ms: i64, kind: Kind, source: Source) {
        if kind == Kind::Lease {
            if let Err(e) = self.recover(job_id, at_ms, None).await {
                tracing::warn!(job = job_id, at = at_ms, error = %e, "lease takeover failed; the sweeper retries");
            }
            return self.claim_done(job_id, at_ms, kind);
        }
        // A permit first: a node at capacity claims nothing and leaves firings to others.
        let permit = tokio::select! {
            p = self.permits.clone().acquire_owned() => p.ok(),
            _ = self.claiming.cancelled() => None,
        };
        let Some(permit) = permit.filter(|_| !self.claiming.is_cancelled()) else {
            return self.claim_done(job_id, at_ms, kind);
        };
        if kind == Kind::Scheduled {
            let req = ClaimRequest {
                job_id: job_id.to_string(),
                at_ms,
                source,
                permit,
            };
            let shard = self.store.shards().of(job_id);
            if self.claims[shard].send(req).is_err() {
                self.claim_done(job_id, at_ms, kind);
            }
            return;
        }
        match self.try_claim_retry(job_id, at_ms).await {
            Ok(Some(claimed)) => self.start_run(permit, claimed, kind, source),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(job = job_id, at = at_ms, error = %e, "claim failed; the sweeper retries")
            }
        }
        self.claim_done(job_id, at_ms, kind);
    }

    /// The validated spec of a job at its current version (cached by version).
    pub(super) async fn spec(&self, job_id: &str) -> crate::Result<Option<Arc<CachedJob>>> {
        if let Some(c) = self.specs.lock().expect("spec cache lock").get(job_id) {
            return Ok(Some(c.clone()));
        }
        let Some(stored) = self.store.job_spec(job_id).await? else {
            return Ok(None);
        };
        Ok(self.cache_spec(job_id, stored))
    }

    /// The specs of several jobs: cached ones from the cache, the others in one round trip.
    async fn specs(&self, job_ids: &[&str]) -> crate::Result<Vec<Option<Arc<CachedJob>>>> {
        let mut out: Vec<Option<Arc<CachedJob>>> = {
            let cache = self.specs.lock().expect("spec cache lock");
            job_ids.iter().map(|id| cache.get(*id).cloned()).collect()
        };
        let missing: Vec<&str> = job_ids
            .iter()
            .zip(&out)
            .filter(|(_, c)| c.is_none())
            .map(|(id, _)| *id)
            .collect();
        if missing.is_empty() {
            return Ok(out);
        }
        let mut loaded = self.store.job_specs(&missing).await?.into_iter();
        for (slot, id) in out.iter_mut().zip(job_ids) {
            if slot.is_none()
                && let Some(Some(stored)) = loaded.next()
            {
                *slot = self.cache_spec(id, stored);
            }
        }
        Ok(out)
    }

    fn cache_spec(&self, job_id: &str, stored: StoredSpec) -> Option<Arc<CachedJob>> {
        let StoredSpec {
            version,
            generation,
            spec,
            created_ms,
        } = stored;
        let job = spec.validate(&Validation {
            now_ms: created_ms,
            created_ms,
            known_handler: None,
            max_params_bytes: usize::MAX,
        });
        let job = match job {
            Ok(job) => job,
            Err(e) => {
                tracing::error!(job = job_id, error = %e, "stored job no longer validates; not firing it");
                return None;
            }
        };
        let cached = Arc::new(CachedJob {
            version,
            generation,
            job,
        });
        self.specs
            .lock()
            .expect("spec cache lock")
            .insert(job_id.to_string(), cached.clone());
        Some(cached)
    }

    fn forget(&self, job_id: &str) {
        self.specs.lock().expect("spec cache lock").remove(job_id);
    }

    /// The claim script's arguments for the firing `at_ms` of `cached`, first try or after
    /// the misfire policy was applied (`plan`).
    fn claim_args<'a>(
        &'a self,
        job_id: &'a str,
        at_ms: i64,
        cached: &'a CachedJob,
        plan: Option<&MisfirePlan>,
    ) -> ClaimArgs<'a> {
        let job = &cached.job;
        let (next_ms, run, missed) = match plan {
            Some(p) => (p.next, p.run, p.missed),
            None => (job.next_after(at_ms), true, 0),
        };
        ClaimArgs {
            job_id,
            at_ms,
            version: cached.version,
            generation: cached.generation,
            next_ms,
            node: &self.id,
            lease_ms: Inner::ms(self.settings.lease),
            tolerance_ms: job.misfire_tolerance_ms,
            misfire_applied: plan.is_some(),
            run,
            missed,
            overlap: job.overlap.as_str(),
            announce_ms: Inner::ms(self.settings.timer_horizon),
        }
    }

    /// What a claim reply means for this node.
    fn on_claim_reply(
        &self,
        job_id: &str,
        at_ms: i64,
        cached: Arc<CachedJob>,
        reply: ClaimReply,
        missed: u64,
    ) -> Step {
        match reply {
            ClaimReply::Claimed { now_ms, attempt } => {
                Inner::bump(&self.stats.claimed);
                metrics::histogram!(name::LATENESS, "node" => self.id.clone())
                    .record((now_ms - at_ms).max(0) as f64 / 1000.0);
                self.count_missed(missed);
                Step::Claimed(Claimed {
                    job: cached,
                    at_ms,
                    claimed_ms: now_ms,
                    attempt,
                })
            }
            ClaimReply::Early { wait_ms } => {
                self.retry_when_due(job_id, at_ms, Kind::Scheduled, wait_ms);
                Step::Done
            }
            ClaimReply::VersionChanged { .. } => {
                self.forget(job_id);
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
                metrics::counter!(name::SKIPPED, "node" => self.id.clone(), "reason" => "overlap")
                    .increment(1);
                Step::Done
            }
            ClaimReply::Missed => {
                self.count_missed(missed);
                Step::Done
            }
            ClaimReply::Stale | ClaimReply::Locked | ClaimReply::Dropped => {
                Inner::bump(&self.stats.stale);
                metrics::counter!(name::CONFLICTS, "node" => self.id.clone()).increment(1);
                Step::Done
            }
        }
    }

    /// The claim protocol for one firing: compute the next firing from the job's spec and let
    /// the claim script compare-and-set it (G1), by Redis's clock (G3); recompute when the job
    /// changed or the firing is a misfire.
    async fn try_claim(
        &self,
        job_id: &str,
        at_ms: i64,
        mut plan: Option<MisfirePlan>,
    ) -> crate::Result<Option<Claimed>> {
        for _ in 0..5 {
            let Some(cached) = self.spec(job_id).await? else {
                return Ok(None);
            };
            let args = self.claim_args(job_id, at_ms, &cached, plan.as_ref());
            let missed = args.missed;
            let reply = self.store.claim(&args).await?;
            match self.on_claim_reply(job_id, at_ms, cached.clone(), reply, missed) {
                Step::Claimed(c) => return Ok(Some(c)),
                Step::Done => return Ok(None),
                Step::Again(p) => plan = p,
            }
        }
        Ok(None)
    }

    /// Gather what is queued into batches (up to [`CLAIM_BATCH`]) and hand each to `work`,
    /// a few batches in flight, until `stop` is cancelled or the queue closes. Returns once
    /// the batches in flight are done.
    async fn run_batches<T, F, Fut>(
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
        // Requests left in the queue at shutdown are dropped with their permits.
        while let Ok(r) = rx.try_recv() {
            self.claim_done(&r.job_id, r.at_ms, Kind::Scheduled);
        }
    }

    async fn claim_batch(self: &Arc<Self>, batch: Vec<ClaimRequest>) {
        // The specs the cache lacks (a one-shot task's, always) in one round trip.
        let ids: Vec<&str> = batch.iter().map(|r| r.job_id.as_str()).collect();
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
                None => self.claim_done(&req.job_id, req.at_ms, Kind::Scheduled),
            }
        }
        let args: Vec<ClaimArgs> = items
            .iter()
            .map(|(r, c)| self.claim_args(&r.job_id, r.at_ms, c, None))
            .collect();
        let replies = self.store.claim_many(&args).await;
        drop(args);
        let replies = match replies {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, n = items.len(), "batch claim failed; the sweeper retries");
                for (r, _) in &items {
                    self.claim_done(&r.job_id, r.at_ms, Kind::Scheduled);
                }
                return;
            }
        };
        for ((req, cached), reply) in items.into_iter().zip(replies) {
            match self.on_claim_reply(&req.job_id, req.at_ms, cached, reply, 0) {
                Step::Claimed(claimed) => {
                    self.claim_done(&req.job_id, req.at_ms, Kind::Scheduled);
                    self.start_run(req.permit, claimed, Kind::Scheduled, req.source);
                }
                Step::Done => self.claim_done(&req.job_id, req.at_ms, Kind::Scheduled),
                Step::Again(plan) => {
                    // Rare (the job changed, or a misfire): the one-firing protocol finishes it.
                    let me = self.clone();
                    self.runs.spawn(async move {
                        let claimed = me.try_claim(&req.job_id, req.at_ms, plan).await;
                        me.claim_done(&req.job_id, req.at_ms, Kind::Scheduled);
                        match claimed {
                            Ok(Some(c)) => me.start_run(req.permit, c, Kind::Scheduled, req.source),
                            Ok(None) => {}
                            Err(e) => tracing::warn!(job = %req.job_id, error = %e, "claim failed; the sweeper retries"),
                        }
                    });
                }
            }
        }
    }

    /// This node is no longer claiming the firing (the claim ended, one way or another).
    fn claim_done(&self, job_id: &str, at_ms: i64, kind: Kind) {
        let key = (job_id.to_string(), at_ms, kind);
        self.inflight.lock().expect("inflight lock").remove(&key);
        let rearm = self.rearm.lock().expect("rearm lock").remove(&key);
        if let Some(deadline) = rearm {
            self.arm_at(key.0, at_ms, kind, Some(deadline));
        }
    }

    /// Count a claimed firing and run it.
    fn start_run(
        self: &Arc<Self>,
        permit: OwnedSemaphorePermit,
        claimed: Claimed,
        kind: Kind,
        source: Source,
    ) {
        let kind = if kind == Kind::Scheduled {
            "scheduled"
        } else {
            "retry"
        };
        metrics::counter!(name::CLAIMED, "node" => self.id.clone(), "kind" => kind).increment(1);
        if source == Source::Sweep {
            Inner::bump(&self.stats.swept);
            metrics::counter!(name::SWEPT, "node" => self.id.clone()).increment(1);
        }
        let me = self.clone();
        self.runs.spawn(me.execute(permit, claimed));
    }

    /// Claim the next attempt of a firing (retry, takeover, trigger, replay).
    async fn try_claim_retry(&self, job_id: &str, at_ms: i64) -> crate::Result<Option<Claimed>> {
        let Some(cached) = self.spec(job_id).await? else {
            // Gone: the claim script drops the entry.
            let _ = self
                .store
                .claim_retry(
                    job_id,
                    at_ms,
                    &self.id,
                    Inner::ms(self.settings.lease),
                    "allow",
                )
                .await?;
            return Ok(None);
        };
        let reply = self
            .store
            .claim_retry(
                job_id,
                at_ms,
                &self.id,
                Inner::ms(self.settings.lease),
                cached.job.overlap.as_str(),
            )
            .await?;
        match reply {
            ClaimReply::Claimed { now_ms, attempt } => {
                Inner::bump(&self.stats.claimed);
                Ok(Some(Claimed {
                    job: cached,
                    at_ms,
                    claimed_ms: now_ms,
                    attempt,
                }))
            }
            ClaimReply::Early { wait_ms } => {
                self.retry_when_due(job_id, at_ms, Kind::Retry, wait_ms);
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    /// Take over a run whose lease expired (`holder` None) or whose holder is gone.
    async fn recover(
        self: &Arc<Self>,
        job_id: &str,
        at_ms: i64,
        holder: Option<&str>,
    ) -> crate::Result<()> {
        let max_attempts = match self.spec(job_id).await? {
            Some(c) => c.job.retry.max_attempts,
            None => 1,
        };
        let limits = self.history_limits();
        if let Some(next) = self
            .store
            .take_over(
                job_id,
                at_ms,
                holder,
                max_attempts,
                limits.dead,
                limits.history,
            )
            .await?
        {
            Inner::bump(&self.stats.recovered);
            metrics::counter!(name::TAKEOVERS, "node" => self.id.clone()).increment(1);
            if next == 0 {
                metrics::counter!(name::DEAD, "node" => self.id.clone()).increment(1);
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

    /// Run a claimed firing, renew its lease while it runs, record the outcome.
    async fn execute(self: Arc<Self>, permit: OwnedSemaphorePermit, c: Claimed) {
        Inner::bump(&self.stats.started);
        let job = &c.job.job;
        let spec = &job.spec;
        let fid = firing_id(&spec.id, c.at_ms);
        let token = self.runs_cancel.child_token();
        let firing = Firing {
            job_id: spec.id.clone(),
            firing_id: fid.clone(),
            scheduled_at: DateTime::<Utc>::from_timestamp_millis(c.at_ms).unwrap_or_default(),
            claimed_at: DateTime::<Utc>::from_timestamp_millis(c.claimed_ms).unwrap_or_default(),
            attempt: c.attempt,
            params: spec.params.clone(),
            node_id: self.id.clone(),
            cancel: token.clone(),
        };
        let span = tracing::info_span!("run", job = %spec.id, firing = %fid, attempt = c.attempt);
        async {
            self.active_runs
                .lock()
                .expect("active runs lock")
                .insert(fid.clone(), token.clone());
            // The node's estimate of Redis time, never before the claim (Redis time).
            let started_ms = self.clock.redis_now_ms().max(c.claimed_ms);
            let started = std::time::Instant::now();
            let renewer = tokio::spawn(self.clone().renew_loop(
                spec.id.clone(),
                c.at_ms,
                c.attempt,
                token.clone(),
            ));
            let fence = self.fence.lock().expect("fence lock").clone();
            let outcome = tokio::select! {
                o = self.invoke(&spec.handler, firing, job.timeout_ms, &token) => o,
                // Fenced (no heartbeat): cancel the run, which then has CANCEL_GRACE to
                // return before it is dropped, all before others may take it over.
                _ = async {
                    fence.cancelled().await;
                    token.cancel();
                    std::future::pending::<()>().await
                } => unreachable!("pending never resolves"),
            };
            let cut_off = fence.is_cancelled();
            // Did the run lose its lease (renewal found another attempt, or the lock gone)?
            let lease_lost = if renewer.is_finished() {
                renewer.await.unwrap_or(false)
            } else {
                renewer.abort();
                false
            };
            self.active_runs.lock().expect("active runs lock").remove(&fid);
            metrics::histogram!(name::DURATION, "node" => self.id.clone(), "handler" => spec.handler.clone())
                .record(started.elapsed().as_secs_f64());
            if cut_off && !matches!(outcome, RunOutcome::Ok) {
                // Its peers may take it over; the next heartbeat that succeeds hands it over
                // at once if none did (this node knows it no longer runs).
                tracing::warn!("run cut off by the fence");
                self.released
                    .lock()
                    .expect("released lock")
                    .push((spec.id.clone(), c.at_ms));
                return;
            }
            if (self.runs_cancel.is_cancelled() || lease_lost) && !matches!(outcome, RunOutcome::Ok)
            {
                // Stopped past the drain timeout, or its lease was lost: the firing is not
                // done. Leave the lease to expire, so a node runs it again as the next
                // attempt (G5). (Found by the chaos suite: a run cancelled on a lost lease was
                // recorded as `cancelled` and never ran again.)
                tracing::warn!(lease_lost, "run cut off; its lease will hand it to another node");
                return;
            }
            let (outcome_name, error, retry) = match outcome {
                RunOutcome::Ok => ("ok", None, None),
                RunOutcome::Cancelled => ("cancelled", Some("cancelled".to_string()), None),
                RunOutcome::Timeout => (
                    "timeout",
                    Some(format!("timed out after {} ms", job.timeout_ms)),
                    retry_delay(job, c.attempt, None),
                ),
                RunOutcome::Failed(HandlerError::Retry { after, message }) => {
                    ("failed", Some(message), retry_delay(job, c.attempt, after))
                }
                RunOutcome::Failed(HandlerError::Abort(message)) => ("failed", Some(message), None),
            };
            if let Some(e) = &error {
                tracing::warn!(outcome = outcome_name, error = %e, "run did not succeed");
            }
            metrics::counter!(
                name::RUNS,
                "node" => self.id.clone(),
                "handler" => spec.handler.clone(),
                "outcome" => outcome_name
            )
            .increment(1);
            let record = RunRecord {
                firing_id: fid.clone(),
                scheduled_ms: c.at_ms,
                attempt: c.attempt,
                node: self.id.clone(),
                claimed_ms: c.claimed_ms,
                started_ms,
                outcome: outcome_name.into(),
                error,
                finished_ms: None,
                fate: None,
                retry_at_ms: None,
            };
            // Recorded in a batch with the attempts that end around the same time; the
            // permit goes with it, so the executor stays bounded until the outcome is in Redis.
            let done = Done {
                job_id: spec.id.clone(),
                at_ms: c.at_ms,
                record,
                retry,
                permit,
            };
            let shard = self.store.shards().of(&done.job_id);
            if let Err(mpsc::error::SendError(done)) = self.completions[shard].send(done) {
                self.record_batch(vec![done]).await;
            }
            // A one-shot job fires once: do not keep its spec in the cache until it is
            // cleaned up (a day later, by default).
            if job.schedule.is_once() {
                self.forget(&spec.id);
            }
        }
        .instrument(span)
        .await;
    }

    /// Run the handler under the job's timeout; a cancel request (overlap `replace`, lost
    /// lease, shutdown) gives it [`CANCEL_GRACE`] to return before it is dropped.
    async fn invoke(
        &self,
        handler: &str,
        firing: Firing,
        timeout_ms: i64,
        token: &CancellationToken,
    ) -> RunOutcome {
        let Some(h) = self.registry.get(handler) else {
            return RunOutcome::Failed(HandlerError::abort(format!(
                "handler '{handler}' is not registered on node {}",
                self.id
            )));
        };
        let run = AssertUnwindSafe(h.run(firing)).catch_unwind();
        let limit = Duration::from_millis(timeout_ms.max(1) as u64);
        let outcome = tokio::select! {
            r = tokio::time::timeout(limit, run) => match r {
                Err(_) => {
                    token.cancel();
                    RunOutcome::Timeout
                }
                Ok(Err(panic)) => {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    RunOutcome::Failed(HandlerError::retry(format!("handler panicked: {what}")))
                }
                Ok(Ok(Ok(()))) => RunOutcome::Ok,
                Ok(Ok(Err(e))) => RunOutcome::Failed(e),
            },
            _ = async {
                token.cancelled().await;
                tokio::time::sleep(CANCEL_GRACE).await;
            } => RunOutcome::Cancelled,
        };
        match outcome {
            RunOutcome::Failed(_) if token.is_cancelled() => RunOutcome::Cancelled,
            other => other,
        }
    }

    /// Attempts that end around the same time are recorded in one script call. Runs until
    /// the node's runs are cancelled (the end of shutdown), then records what is left.
    pub(super) async fn completer(self: Arc<Self>, mut rx: mpsc::UnboundedReceiver<Done>) {
        self.run_batches(&mut rx, &self.runs_cancel, |me, batch| async move {
            me.record_batch(batch).await
        })
        .await;
        while let Ok(first) = rx.try_recv() {
            let batch = gather(first, &mut rx);
            self.record_batch(batch).await;
        }
    }

    /// Record attempts' ends (of one shard: each shard has its completer); retried with
    /// backoff for up to a lease (a failover takes seconds), since a lost outcome reruns the
    /// firing when its lease expires.
    async fn record_batch(&self, batch: Vec<Done>) {
        let limits = self.history_limits();
        let completions: Vec<Completion> = batch
            .iter()
            .map(|d| Completion {
                job_id: &d.job_id,
                run: &d.record,
                retry_delay_ms: d.retry,
            })
            .collect();
        let mut fates = None;
        // Past the lease another node may take the run over (and the outcome is then fenced),
        // but while Redis is unreachable no one can: keep trying a while longer.
        let give_up = tokio::time::Instant::now() + self.settings.lease * 2;
        let mut pause = Duration::from_millis(100);
        for n in 1u32.. {
            match self.store.complete_many(&completions, &limits).await {
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
        for (done, (fate, now)) in batch.into_iter().zip(fates) {
            match fate {
                Fate::Dead => {
                    metrics::counter!(name::DEAD, "node" => self.id.clone()).increment(1);
                }
                Fate::Retry => {
                    metrics::counter!(name::RETRIES, "node" => self.id.clone()).increment(1);
                    if self.owns(&done.job_id, done.at_ms) {
                        let due = now + done.retry.unwrap_or(0);
                        self.arm_due(done.job_id.clone(), done.at_ms, Kind::Retry, due);
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
            Inner::bump(&self.stats.completed);
            drop(done.permit);
        }
    }

    /// Renew a run's lease every third of its length; cancel the run if the lease is lost
    /// (and return true).
    async fn renew_loop(
        self: Arc<Self>,
        job_id: String,
        at_ms: i64,
        attempt: u32,
        cancel: CancellationToken,
    ) -> bool {
        let lease = Inner::ms(self.settings.lease);
        let every = self.settings.lease / 3;
        loop {
            tokio::time::sleep(every).await;
            match self
                .store
                .renew(&job_id, at_ms, attempt, &self.id, lease)
                .await
            {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(job = %job_id, at = at_ms, "lease lost; cancelling the run");
                    cancel.cancel();
                    return true;
                }
                Err(e) => tracing::warn!(error = %e, "lease renewal failed"),
            }
        }
    }

    fn count_missed(&self, missed: u64) {
        if missed > 0 {
            metrics::counter!(name::SKIPPED, "node" => self.id.clone(), "reason" => "misfire")
                .increment(missed);
        }
    }

    /// A claim came `wait_ms` early (our clock estimate was ahead): try again when Redis's
    /// clock gets there.
    fn retry_when_due(&self, job_id: &str, at_ms: i64, kind: Kind, wait_ms: i64) {
        // Armed when this claim ends (`claim_done`), not now: a timer that fired before the
        // firing left `inflight` would be refused by `spawn_claim` as a duplicate, and the
        // firing would wait for a sweep.
        let deadline = self.clock.local_ms() + wait_ms + 1;
        self.rearm
            .lock()
            .expect("rearm lock")
            .insert((job_id.to_string(), at_ms, kind), deadline);
    }

    /// Cancel a local run of `firing` (overlap `replace` from any node).
    pub(super) fn cancel_run(&self, firing: &str) {
        if let Some(token) = self
            .active_runs
            .lock()
            .expect("active runs lock")
            .get(firing)
        {
            tracing::info!(firing, "cancelling the run: a newer run replaces it");
            token.cancel();
        }
    }
}

/// The delay before the next attempt, or None when attempts are used up.
fn retry_delay(job: &Job, attempt: u32, asked: Option<Duration>) -> Option<i64> {
    if attempt >= job.retry.max_attempts {
        return None;
    }
    Some(match asked {
        Some(d) => d.as_millis() as i64,
        None => job.retry.delay_ms(attempt, rand::random::<f64>()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobSpec;

    fn every_second(policy: &str, limit: Option<u32>) -> Job {
        let mut spec = JobSpec::every("j", "1s", "noop");
        spec.misfire = Some(policy.into());
        spec.catch_up_limit = limit;
        spec.validate(&Validation {
            now_ms: 0,
            created_ms: 0,
            known_handler: None,
            max_params_bytes: usize::MAX,
        })
        .unwrap()
    }

    // Firing at 1000 found when firings up to 10_500 are late: 2000..=10000 (9) are late too.
    #[test]
    fn fire_once_runs_one_and_counts_the_rest() {
        let p = misfire_plan(&every_second("fire_once", None), 1_000, 10_500);
        assert_eq!(
            p,
            MisfirePlan {
                run: true,
                next: Some(11_000),
                missed: 9
            }
        );
    }

    #[test]
    fn skip_runs_none_of_the_late_ones() {
        let p = misfire_plan(&every_second("skip", None), 1_000, 10_500);
        assert_eq!(
            p,
            MisfirePlan {
                run: false,
                next: Some(11_000),
                missed: 10
            }
        );
    }

    #[test]
    fn catch_up_runs_each_up_to_the_limit() {
        let p = misfire_plan(&every_second("catch_up", None), 1_000, 10_500);
        assert_eq!(
            p,
            MisfirePlan {
                run: true,
                next: Some(2_000),
                missed: 0
            }
        );
        // Limit 4: run the newest four of the ten late firings (7000..=10000).
        let p = misfire_plan(&every_second("catch_up", Some(4)), 1_000, 10_500);
        assert_eq!(
            p,
            MisfirePlan {
                run: false,
                next: Some(7_000),
                missed: 6
            }
        );
        // And that one, found again, runs with the rest.
        let p = misfire_plan(&every_second("catch_up", Some(4)), 7_000, 10_500);
        assert_eq!(
            p,
            MisfirePlan {
                run: true,
                next: Some(8_000),
                missed: 0
            }
        );
    }
}
