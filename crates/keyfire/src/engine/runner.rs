//! The runner: a claimed firing runs in the bounded executor under its timeout, its lease
//! renewed, cut off by a lost lease, the fence or the drain timeout.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::FutureExt;
use futures::future::{BoxFuture, CatchUnwind};
use tokio::sync::{OwnedSemaphorePermit, TryAcquireError, mpsc};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::callbacks;
use super::completer::{Completer, Done, retry_delay};
use super::context::{NodeCore, bump, ms};
use super::executor::Executor;
use super::firing::{Claimed, Kind, Source};
use super::flow_limiter::{FlowLimiter, Gate};
use super::leases::Leases;
use super::membership::Fence;
use crate::handler::{Firing, HandlerError, HandlerResult, Registry, Report};
use crate::store::{RunRecord, firing_id};
use crate::trace::{self, Start, TraceParent, Tracer, Value};

/// After a cancel request, how long a handler may take to return before it is dropped.
pub(super) const CANCEL_GRACE: Duration = Duration::from_secs(1);

/// How a run ended, as the executor saw it.
pub(super) enum RunOutcome {
    Ok,
    Failed(HandlerError),
    Timeout,
    Cancelled,
}

/// The runner: runs claimed firings on the executor's permits.
pub(super) struct Runner {
    pub(super) core: Arc<NodeCore>,
    pub(super) registry: Arc<Registry>,
    pub(super) executor: Arc<Executor>,
    pub(super) fence: Arc<Fence>,
    pub(super) limiter: Arc<FlowLimiter>,
    /// Queues an ended attempt for its shard's completer.
    pub(super) completions: Vec<mpsc::UnboundedSender<Done>>,
    /// Records an outcome itself when its shard's completer stopped.
    pub(super) completer: Arc<Completer>,
    /// Renews the leases of the runs in progress.
    pub(super) leases: Arc<Leases>,
}

/// An attempt from just before its handler starts to its outcome: what its end needs.
struct Attempt {
    c: Claimed,
    /// Its run permit, held until its outcome is queued (given back for a permit to record).
    permit: OwnedSemaphorePermit,
    /// Its flow-control slot, if its limit gave it one.
    slot: Option<String>,
    fid: String,
    token: CancellationToken,
    report: Report,
    tracer: Option<&'static dyn Tracer>,
    /// The node's estimate of Redis time at its start.
    started_ms: i64,
    started: std::time::Instant,
}

/// A handler that did not end in its first poll, with its span (where traces are exported).
struct Waiting {
    run: CatchUnwind<AssertUnwindSafe<BoxFuture<'static, HandlerResult>>>,
    traced: Traced,
}

/// A handler's span and the tracer that exports it.
type Traced = Option<(&'static dyn Tracer, tracing::Span)>;

impl Runner {
    /// Count a claimed firing and run it.
    pub(super) fn start_run(
        self: &Arc<Self>,
        permit: OwnedSemaphorePermit,
        claimed: Claimed,
        kind: Kind,
        source: Source,
        epoch: u64,
    ) {
        self.core.metrics.claimed(kind == Kind::Scheduled);
        if source == Source::Sweep {
            self.core.stats.sweeper_claim(&self.core.id);
        }
        // While runs are short, a run that may start at once starts here, in the task that
        // claimed it (a claim batch, the line of firings claimed ahead), and with no future
        // of its own: most short handlers finish in their first poll, and then the run needs
        // no task, no boxed future and no async step (under a burst a spawn per firing, with
        // its allocation, scheduling and tracking, was a good part of the node's cost, and
        // then the boxed future of the whole run, copied into its box, the next part). A
        // handler that has to wait (for I/O, a timer) goes on in a task of its own, polled
        // there with its own waker at once. A run that has to wait before it starts (until
        // its release, for its limit, out the fence) is spawned whole.
        if self.executor.run_time.short() && self.may_start_now(&claimed, epoch) {
            if std::panic::catch_unwind(AssertUnwindSafe(|| self.run_now(permit, claimed))).is_err()
            {
                // As a spawned run's panic would: the run ends, its permit and lease are let
                // go (its lease hands the firing over).
                tracing::error!("a run panicked outside its handler");
            }
            return;
        }
        let me = self.clone();
        // Boxed: the run's future is large, and a task copies its future in when spawned and
        // its output over it when done; boxed, the future is copied once, into its box.
        self.core
            .runs
            .spawn(Box::pin(me.execute(permit, claimed, epoch)));
    }

    /// Whether a claimed firing may start without waiting: due now (not held until its
    /// release), unlimited (no flow-control slot to ask for), and claimed while the node was
    /// not fenced, in the fence's current epoch.
    fn may_start_now(&self, c: &Claimed, epoch: u64) -> bool {
        c.hold_until.is_none()
            && !self.fence.is_fenced()
            && self.fence.epoch() == epoch
            && self.limiter.limit_key_of(&c.job).is_none()
    }

    /// Run a firing that may start now (see [`Runner::may_start_now`]) in the calling task:
    /// its handler's first poll here, and its outcome queued here if it ended in it; if not,
    /// it goes on in a task of its own.
    fn run_now(self: &Arc<Self>, permit: OwnedSemaphorePermit, c: Claimed) {
        let (a, firing, span) = self.begin(c, permit, None);
        let entered = span.enter();
        self.executor.starting(&a.fid, &a.token);
        let spec = &a.c.job.job.spec;
        let mut cx = Context::from_waker(Waker::noop());
        match self.start_handler(&spec.handler, firing, &a.token, &mut cx) {
            Ok(outcome) => {
                let fenced = self.fence.is_fenced();
                let took = self.ended_after(&a);
                if let Some(done) = self.outcome(a, outcome, took, fenced, false) {
                    self.hand_over_now(done);
                }
            }
            Err(waiting) => {
                drop(entered);
                let me = self.clone();
                self.core
                    .runs
                    .spawn(Box::pin(me.go_on(a, waiting).instrument(span)));
            }
        }
    }

    /// Wait (up to the lease) until this node is no longer fenced, then renew the claimed
    /// attempt's lease: whether it may start.
    async fn wait_out_the_fence(&self, c: &Claimed) -> bool {
        let deadline = tokio::time::Instant::now() + self.core.settings.lease;
        while self.fence.is_fenced() {
            if tokio::time::Instant::now() >= deadline || self.core.runs_cancel.is_cancelled() {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        matches!(self.renew_claimed(c).await, Ok(true))
    }

    /// Renew a claimed attempt's lease before its run starts: false when it is no longer
    /// this node's (taken over).
    pub(super) async fn renew_claimed(&self, c: &Claimed) -> crate::Result<bool> {
        let lease = ms(self.core.settings.lease);
        let id = &c.job.job.spec.id;
        self.core
            .store
            .renew(
                id,
                c.at_ms,
                c.attempt,
                Some(c.claimed_ms),
                &self.core.id,
                lease,
            )
            .await
    }

    /// The runner's step: run a claimed firing, renew its lease while it runs, and queue
    /// its outcome for the completer. `epoch`: the fence's epoch when the claim was sent.
    pub(super) async fn execute(
        self: Arc<Self>,
        permit: OwnedSemaphorePermit,
        c: Claimed,
        epoch: u64,
    ) {
        // Claimed ahead of its release: it starts at its release, by Redis's clock. Its lease
        // is this node's already (the claim wrote it), so no other node can run it meanwhile.
        if let Some(at) = c.hold_until {
            Box::pin(tokio::time::sleep_until(at)).await;
        }
        // Flow control: a firing its limit holds back gives its permit back and waits for
        // its turn (queued again); unlimited firings pass without a Redis call.
        // The awaits off the common path are boxed (the gate boxes its own Redis call): this
        // future is spawned (copied into its task) for every run, and its size is that of the
        // largest future it awaits.
        let slot = match self.limiter.gate(&c).await {
            Gate::Run(slot) => slot,
            Gate::Held => return,
        };
        // A claim sent before the node fenced itself and answered after (it was in flight
        // when the heartbeats stopped; Redis answered it after a failover) starts no
        // handler yet: the node's peers may be taking its runs over. It starts once a
        // heartbeat succeeds again and a renewal finds its lease still this node's (the
        // renewal also moves the lease's expiry, which a takeover decided on an older view
        // checks, see recover.lua); if the lease was taken over, or the fence outlasts the
        // lease, this attempt never starts.
        if (self.fence.is_fenced() || self.fence.epoch() != epoch)
            && !Box::pin(self.wait_out_the_fence(&c)).await
        {
            tracing::warn!(job = %c.job.job.spec.id, at = c.at_ms, "claimed while fenced; not started");
            if let Some(key) = &slot {
                Box::pin(self.limiter.release_slot(
                    key,
                    &firing_id(&c.job.job.spec.id, c.at_ms),
                    None,
                ))
                .await;
            }
            return;
        }
        let (a, firing, span) = self.begin(c, permit, slot);
        async {
            self.executor.starting(&a.fid, &a.token);
            let mut firing = Some(firing);
            let first = std::future::poll_fn(|cx| {
                let firing = firing.take().expect("polled once: it is ready at once");
                let handler = &a.c.job.job.spec.handler;
                Poll::Ready(self.start_handler(handler, firing, &a.token, cx))
            })
            .await;
            match first {
                Ok(outcome) => {
                    let fenced = self.fence.is_fenced();
                    self.conclude(a, outcome, fenced, false).await;
                }
                Err(waiting) => Box::pin(self.go_on(a, waiting)).await,
            }
        }
        .instrument(span)
        .await;
    }

    /// What a run needs before its handler starts: its attempt, the handler's [`Firing`]
    /// and the attempt's span (a root span: the attempt's trace is its firing's, not that of
    /// whatever claimed it; its ids and attributes only where traces are exported).
    fn begin(
        &self,
        c: Claimed,
        permit: OwnedSemaphorePermit,
        slot: Option<String>,
    ) -> (Attempt, Firing, tracing::Span) {
        bump(&self.core.stats.started);
        let spec = &c.job.job.spec;
        let fid = firing_id(&spec.id, c.at_ms);
        // Cancelled with the node's runs by the executor (see `Executor::stop_all`).
        let token = CancellationToken::new();
        let firing = Firing {
            job_id: spec.id.clone(),
            firing_id: fid.clone(),
            scheduled_at: DateTime::<Utc>::from_timestamp_millis(c.at_ms).unwrap_or_default(),
            claimed_at: DateTime::<Utc>::from_timestamp_millis(c.claimed_ms).unwrap_or_default(),
            attempt: c.attempt,
            params: spec.params.clone(),
            node_id: self.core.id.clone(),
            cancel: token.clone(),
            report: Default::default(),
        };
        let span = tracing::info_span!(parent: None, "run", job = %spec.id, firing = %fid, attempt = c.attempt);
        let tracer = trace::for_span(&span);
        if let Some(t) = tracer {
            start_attempt_span(t, &span, &c, &fid);
        }
        // The node's estimate of Redis time, never before the claim (Redis time), nor before
        // the instant of a run held until it.
        let floor = match c.hold_until {
            Some(_) => c.claimed_ms.max(c.at_ms),
            None => c.claimed_ms,
        };
        let attempt = Attempt {
            started_ms: self.core.clock.redis_now_ms().max(floor),
            started: std::time::Instant::now(),
            report: firing.report.clone(),
            c,
            permit,
            slot,
            fid,
            token,
            tracer,
        };
        (attempt, firing, span)
    }

    /// A run whose handler did not end in its first poll: it goes on under the job's
    /// timeout with its lease renewed, its place among the runs in progress (for a cancel,
    /// for a stop) and a watch on the fence, until it ends or is cut off.
    async fn go_on(self: Arc<Self>, a: Attempt, waiting: Waiting) {
        // (A handler that blocks its thread in its first poll for two thirds of the lease
        // loses its lease, as it would on a runtime of one thread, where no renewal could
        // run meanwhile.)
        let c = &a.c;
        let lease = self.leases.hold(
            c.job.clone(),
            c.at_ms,
            c.attempt,
            c.claimed_ms,
            a.slot.clone(),
            a.token.clone(),
        );
        self.executor.enter(a.fid.clone(), a.token.clone());
        let fence = self.fence.token();
        let token = &a.token;
        // Biased (here and below): the branches are polled in order, not in a random one,
        // which cost every run a random number.
        let o = tokio::select! {
            biased;
            o = wait_handler(waiting, c.job.job.timeout_ms, a.started, token) => o,
            // Fenced (no heartbeat): cancel the run, which then has CANCEL_GRACE to return
            // before it is dropped, all before others may take it over.
            _ = async {
                fence.cancelled().await;
                token.cancel();
                std::future::pending::<()>().await
            } => unreachable!("pending never resolves"),
        };
        self.executor.leave(&a.fid);
        // Did the run lose its lease (renewal found another attempt, or the lock gone)?
        let (cut_off, lease_lost) = (fence.is_cancelled(), lease.end());
        self.conclude(a, o, cut_off, lease_lost).await;
    }

    /// How long the attempt's handler took, recorded for the executor's estimate.
    fn ended_after(&self, a: &Attempt) -> Duration {
        let took = a.started.elapsed();
        self.executor.run_time.record(took);
        took
    }

    /// The end of a run in a task of its own: its slot let go, its outcome queued.
    async fn conclude(&self, a: Attempt, outcome: RunOutcome, cut_off: bool, lease_lost: bool) {
        let took = self.ended_after(&a);
        if let Some(key) = &a.slot {
            // However it ended, the run no longer calls its target.
            let ran = took.as_millis() as i64;
            Box::pin(self.limiter.release_slot(key, &a.fid, Some(ran))).await;
        }
        if let Some(done) = self.outcome(a, outcome, took, cut_off, lease_lost) {
            self.hand_over(done).await;
        }
    }

    /// An ended run's outcome, to be recorded: None when it is not to be (cut off by the
    /// fence, stopped or its lease lost, and not a success: another attempt will run it).
    /// Called in the attempt's span.
    fn outcome(
        &self,
        a: Attempt,
        outcome: RunOutcome,
        took: Duration,
        cut_off: bool,
        lease_lost: bool,
    ) -> Option<Done> {
        let c = &a.c;
        let job = &c.job.job;
        let spec = &job.spec;
        let series = self.core.metrics.handler(&spec.handler);
        series.duration(took.as_secs_f64());
        if cut_off && !matches!(outcome, RunOutcome::Ok) {
            // Its peers may take it over; the next heartbeat that succeeds hands it over at
            // once if none did (this node knows it no longer runs).
            tracing::warn!("run cut off by the fence");
            if let Some(t) = a.tracer {
                end_attempt_span(
                    t,
                    "cut_off",
                    Some("cut off by the fence: the node lost its heartbeats"),
                );
            }
            self.fence.release(spec.id.clone(), c.at_ms);
            return None;
        }
        if (self.core.runs_cancel.is_cancelled() || lease_lost)
            && !matches!(outcome, RunOutcome::Ok)
        {
            // Stopped past the drain timeout, or its lease was lost: the firing is not done.
            // Leave the lease to expire, so a node runs it again as the next attempt (G5);
            // recorded as `cancelled`, it would never run again.
            tracing::warn!(
                lease_lost,
                "run cut off; its lease will hand it to another node"
            );
            if let Some(t) = a.tracer {
                end_attempt_span(
                    t,
                    "cut_off",
                    Some("cut off: its lease will hand it to another node"),
                );
            }
            return None;
        }
        let (outcome_name, error, retry) = match outcome {
            RunOutcome::Ok => ("ok", None, None),
            RunOutcome::Cancelled if self.executor.requested(&a.fid) => {
                ("cancelled", Some("cancelled on request".to_string()), None)
            }
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
        self.executor.forget_request(&a.fid);
        if let Some(e) = &error {
            tracing::warn!(outcome = outcome_name, error = %e, "run did not succeed");
        }
        if let Some(t) = a.tracer {
            end_attempt_span(t, outcome_name, error.as_deref());
        }
        series.run(outcome_name);
        let record = RunRecord {
            firing_id: a.fid,
            scheduled_ms: c.at_ms,
            attempt: c.attempt,
            node: self.core.id.clone(),
            claimed_ms: c.claimed_ms,
            started_ms: a.started_ms,
            outcome: outcome_name.into(),
            error,
            finished_ms: None,
            fate: None,
            retry_at_ms: None,
        };
        // Queued with the outcome, and only if it is the one the callback reports.
        let callback =
            callbacks::entry_for(a.report.get(), &record, &spec.id, retry.is_none(), || {
                self.core.clock.redis_now_ms()
            });
        let at_ms = c.at_ms;
        Some(Done {
            job: a.c.job,
            at_ms,
            record,
            retry,
            callback,
            // The run's permit, given back for a permit to record (see `hand_over`).
            permit: Some(a.permit),
            ended: tokio::time::Instant::now(),
            // The attempt's span ends when its outcome is recorded.
            span: match a.tracer {
                Some(_) => tracing::Span::current(),
                None => tracing::Span::none(),
            },
        })
    }

    /// Queue an outcome for its shard's completer, to be recorded in a batch with the
    /// attempts that end around the same time. The run's permit is given back for a permit
    /// to record (up to four times as many): the next firing can start while outcomes wait
    /// their turn behind claims (see the completer), and outcomes Redis has not taken yet
    /// stay bounded. At shutdown the run's permit is kept instead.
    async fn hand_over(&self, mut done: Done) {
        let record_permit = tokio::select! {
            biased;
            p = self.executor.record_permits.clone().acquire_owned() => p.ok(),
            _ = self.core.runs_cancel.cancelled() => None,
        };
        if let Some(p) = record_permit {
            done.permit = Some(p);
        }
        if let Some(done) = self.queue_outcome(done) {
            Box::pin(self.completer.record_batch(vec![done])).await;
        }
    }

    /// [`Runner::hand_over`] without waiting: when no permit to record is free, or the
    /// shard's completer stopped, the rest goes on in a task of its own.
    fn hand_over_now(self: &Arc<Self>, mut done: Done) {
        match self.executor.record_permits.clone().try_acquire_owned() {
            Ok(p) => done.permit = Some(p),
            Err(TryAcquireError::Closed) => {}
            Err(TryAcquireError::NoPermits) => {
                let me = self.clone();
                self.core
                    .runs
                    .spawn(Box::pin(async move { me.hand_over(done).await }));
                return;
            }
        }
        if let Some(done) = self.queue_outcome(done) {
            let me = self.clone();
            self.core.runs.spawn(Box::pin(async move {
                me.completer.record_batch(vec![done]).await
            }));
        }
    }

    /// Queue an outcome for its shard's completer; the outcome back if that completer
    /// stopped.
    fn queue_outcome(&self, done: Done) -> Option<Done> {
        let shard = self.core.store.shards().of(done.job_id());
        self.completions[shard]
            .send(done)
            .err()
            .map(|mpsc::error::SendError(done)| done)
    }

    /// Start a run's handler and poll it once: its outcome if it ended in that poll (most
    /// short handlers do), or the handler to wait for. A panic in the handler, in the call
    /// that makes its future as in the future itself, fails the attempt (to be retried), as
    /// an error would.
    fn start_handler(
        &self,
        handler: &str,
        firing: Firing,
        token: &CancellationToken,
        cx: &mut Context<'_>,
    ) -> Result<RunOutcome, Waiting> {
        let Some(h) = self.registry.get(handler) else {
            return Ok(RunOutcome::Failed(HandlerError::abort(format!(
                "handler '{handler}' is not registered on node {}",
                self.core.id
            ))));
        };
        // The handler's own span, a child of the attempt's, only where traces are exported.
        let traced: Traced = trace::tracer()
            .map(|t| (t, tracing::info_span!("handler")))
            .filter(|(_, span)| !span.is_disabled());
        if let Some((t, span)) = &traced {
            t.start(span, Start::default());
            t.set_attributes(span, &[("keyfire.handler", Value::Str(handler))]);
        }
        let run = match std::panic::catch_unwind(AssertUnwindSafe(|| h.run(firing))) {
            Err(panic) => return Ok(settle(ended(Err(panic)), token, &traced)),
            Ok(run) => match &traced {
                Some((_, span)) => run.instrument(span.clone()).boxed(),
                None => run,
            },
        };
        let mut run = AssertUnwindSafe(run).catch_unwind();
        // A handler that ends in its first poll (most short ones) needs no timer; one that
        // waits is timed from the run's start.
        match run.poll_unpin(cx) {
            Poll::Ready(r) => Ok(settle(ended(r), token, &traced)),
            Poll::Pending => Err(Waiting { run, traced }),
        }
    }
}

/// Wait for a handler that did not end in its first poll, under the job's timeout; a cancel
/// (a cancel request, overlap `replace`, lost lease, shutdown) gives it [`CANCEL_GRACE`] to
/// return before it is dropped.
async fn wait_handler(
    waiting: Waiting,
    timeout_ms: i64,
    started: std::time::Instant,
    token: &CancellationToken,
) -> RunOutcome {
    let limit = Duration::from_millis(timeout_ms.max(1) as u64);
    let deadline = tokio::time::Instant::from_std(started) + limit;
    let outcome = tokio::select! {
        biased;
        r = tokio::time::timeout_at(deadline, waiting.run) => match r {
            Err(_) => {
                token.cancel();
                RunOutcome::Timeout
            }
            Ok(r) => ended(r),
        },
        _ = async {
            token.cancelled().await;
            tokio::time::sleep(CANCEL_GRACE).await;
        } => RunOutcome::Cancelled,
    };
    settle(outcome, token, &waiting.traced)
}

/// A handler's outcome as the run reports it: a failure after a cancel is the cancel; the
/// handler's span marked with how it did not succeed.
fn settle(outcome: RunOutcome, token: &CancellationToken, traced: &Traced) -> RunOutcome {
    let outcome = match outcome {
        RunOutcome::Failed(_) if token.is_cancelled() => RunOutcome::Cancelled,
        other => other,
    };
    if let Some((t, span)) = traced {
        match &outcome {
            RunOutcome::Ok => {}
            RunOutcome::Failed(HandlerError::Retry { message, .. })
            | RunOutcome::Failed(HandlerError::Abort(message)) => t.set_error(span, message),
            RunOutcome::Timeout => t.set_error(span, "timed out"),
            RunOutcome::Cancelled => t.set_error(span, "cancelled"),
        }
    }
    outcome
}

/// What a handler's result (or its panic) means.
fn ended(r: std::thread::Result<HandlerResult>) -> RunOutcome {
    match r {
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            RunOutcome::Failed(HandlerError::retry(format!("handler panicked: {what}")))
        }
        Ok(Ok(())) => RunOutcome::Ok,
        Ok(Err(e)) => RunOutcome::Failed(e),
    }
}

/// Give an attempt's span (created, not yet entered) its firing's trace, the link to the
/// request that created the job, and its attributes.
fn start_attempt_span(t: &dyn Tracer, span: &tracing::Span, c: &Claimed, fid: &str) {
    let spec = &c.job.job.spec;
    let ids = TraceParent::for_attempt(fid, c.attempt);
    let created_by = spec.traceparent.as_deref().and_then(TraceParent::parse);
    t.start(
        span,
        Start {
            trace_id: Some(ids.trace_id),
            links: created_by.as_slice(),
            ..Start::default()
        },
    );
    let scheduled = DateTime::<Utc>::from_timestamp_millis(c.at_ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    t.set_attributes(
        span,
        &[
            ("keyfire.job.id", Value::Str(&spec.id)),
            ("keyfire.firing.id", Value::Str(fid)),
            ("keyfire.attempt", Value::Int(i64::from(c.attempt))),
            ("keyfire.scheduled_at", Value::Str(&scheduled)),
            (
                "keyfire.lateness_ms",
                Value::Int((c.claimed_ms - c.at_ms).max(0)),
            ),
            ("keyfire.handler", Value::Str(&spec.handler)),
        ],
    );
}

/// Record how the attempt in whose span this runs ended.
fn end_attempt_span(t: &dyn Tracer, outcome: &str, error: Option<&str>) {
    let span = tracing::Span::current();
    t.set_attributes(&span, &[("keyfire.outcome", Value::Str(outcome))]);
    if let Some(e) = error {
        t.set_error(&span, e);
    }
}
