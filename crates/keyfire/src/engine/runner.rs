//! The runner: a claimed firing runs in the bounded executor under its timeout, its lease
//! renewed, cut off by a lost lease, the fence or the drain timeout.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::FutureExt;
use tokio::sync::{OwnedSemaphorePermit, mpsc};
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
use crate::handler::{Firing, HandlerError, Registry};
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
        let me = self.clone();
        // Boxed: the run's future is large, and a task copies its future in when spawned and
        // its output over it when done; boxed, the future is copied once, into its box.
        let mut run = Box::pin(me.execute(permit, claimed, epoch));
        // While runs are short, the run starts here, in the task that claimed it (a claim
        // batch, the line of firings claimed ahead): most short handlers finish in their
        // first poll, and then the run needs no task of its own (under a burst a spawn per
        // firing, with its allocation, scheduling and tracking, was a good part of the
        // node's cost). A run that has to wait (a handler awaiting I/O, a limit, the fence)
        // goes on in a task of its own, polled there with its own waker at once.
        if self.executor.run_time.short() {
            let mut cx = Context::from_waker(Waker::noop());
            match std::panic::catch_unwind(AssertUnwindSafe(|| run.as_mut().poll(&mut cx))) {
                Ok(Poll::Ready(())) => return,
                Ok(Poll::Pending) => {}
                Err(_) => {
                    // As a spawned run's panic would: the run ends, its permit and lease
                    // are let go (its lease hands the firing over).
                    tracing::error!("a run panicked outside its handler");
                    return;
                }
            }
        }
        self.core.runs.spawn(run);
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
        bump(&self.core.stats.started);
        let job = &c.job.job;
        let spec = &job.spec;
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
        let report = firing.report.clone();
        // A root span: the attempt's trace is its firing's, not that of whatever claimed it.
        let span = tracing::info_span!(parent: None, "run", job = %spec.id, firing = %fid, attempt = c.attempt);
        // Only a process that exports traces pays for their ids and attributes.
        let tracer = trace::for_span(&span);
        if let Some(t) = tracer {
            start_attempt_span(t, &span, &c, &fid);
        }
        async {
            // Cancelled at once if its cancel was asked for (or the node's runs stopped);
            // entered among the runs in progress (for a cancel, for a stop) only if it does not
            // end in its first poll, when nothing could have reached it.
            self.executor.starting(&fid, &token);
            // The node's estimate of Redis time, never before the claim (Redis time), nor
            // before the instant of a run held until it.
            let floor = match c.hold_until {
                Some(_) => c.claimed_ms.max(c.at_ms),
                None => c.claimed_ms,
            };
            let started_ms = self.core.clock.redis_now_ms().max(floor);
            let started = std::time::Instant::now();
            let invoke = self.invoke(&spec.handler, firing, job.timeout_ms, started, &token);
            tokio::pin!(invoke);
            // Its first poll before anything else: most short handlers end in it, and then
            // the run needs no lease renewal (its lease, from the claim, outlasts it), no
            // watch on the fence (the fence tripped meanwhile if it is up now) and no place
            // among the runs in progress. A run that goes on gets all three. (A handler that
            // blocks its thread in its first poll for two thirds of the lease loses its lease,
            // as it would on a runtime of one thread, where no renewal could run meanwhile.)
            let (outcome, cut_off, lease_lost) = match futures::poll!(invoke.as_mut()) {
                Poll::Ready(o) => (o, self.fence.is_fenced(), false),
                Poll::Pending => {
                    let lease = self.leases.hold(
                        c.job.clone(),
                        c.at_ms,
                        c.attempt,
                        c.claimed_ms,
                        slot.clone(),
                        token.clone(),
                    );
                    self.executor.enter(fid.clone(), token.clone());
                    let fence = self.fence.token();
                    // Biased (here and below): the branches are polled in order, not in a
                    // random one, which cost every run a random number.
                    let o = tokio::select! {
                        biased;
                        o = &mut invoke => o,
                        // Fenced (no heartbeat): cancel the run, which then has CANCEL_GRACE
                        // to return before it is dropped, all before others may take it over.
                        _ = async {
                            fence.cancelled().await;
                            token.cancel();
                            std::future::pending::<()>().await
                        } => unreachable!("pending never resolves"),
                    };
                    self.executor.leave(&fid);
                    // Did the run lose its lease (renewal found another attempt, or the lock
                    // gone)?
                    (o, fence.is_cancelled(), lease.end())
                }
            };
            let took = started.elapsed();
            self.executor.run_time.record(took);
            if let Some(key) = &slot {
                // However it ended, the run no longer calls its target.
                let ran = took.as_millis() as i64;
                Box::pin(self.limiter.release_slot(key, &fid, Some(ran))).await;
            }
            let series = self.core.metrics.handler(&spec.handler);
            series.duration(took.as_secs_f64());
            if cut_off && !matches!(outcome, RunOutcome::Ok) {
                // Its peers may take it over; the next heartbeat that succeeds hands it over
                // at once if none did (this node knows it no longer runs).
                tracing::warn!("run cut off by the fence");
                if let Some(t) = tracer {
                    end_attempt_span(
                        t,
                        "cut_off",
                        Some("cut off by the fence: the node lost its heartbeats"),
                    );
                }
                self.fence.release(spec.id.clone(), c.at_ms);
                return;
            }
            if (self.core.runs_cancel.is_cancelled() || lease_lost)
                && !matches!(outcome, RunOutcome::Ok)
            {
                // Stopped past the drain timeout, or its lease was lost: the firing is not
                // done. Leave the lease to expire, so a node runs it again as the next
                // attempt (G5); recorded as `cancelled`, it would never run again.
                tracing::warn!(
                    lease_lost,
                    "run cut off; its lease will hand it to another node"
                );
                if let Some(t) = tracer {
                    end_attempt_span(
                        t,
                        "cut_off",
                        Some("cut off: its lease will hand it to another node"),
                    );
                }
                return;
            }
            let (outcome_name, error, retry) = match outcome {
                RunOutcome::Ok => ("ok", None, None),
                RunOutcome::Cancelled if self.executor.requested(&fid) => {
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
            self.executor.forget_request(&fid);
            if let Some(e) = &error {
                tracing::warn!(outcome = outcome_name, error = %e, "run did not succeed");
            }
            if let Some(t) = tracer {
                end_attempt_span(t, outcome_name, error.as_deref());
            }
            series.run(outcome_name);
            let record = RunRecord {
                firing_id: fid,
                scheduled_ms: c.at_ms,
                attempt: c.attempt,
                node: self.core.id.clone(),
                claimed_ms: c.claimed_ms,
                started_ms,
                outcome: outcome_name.into(),
                error,
                finished_ms: None,
                fate: None,
                retry_at_ms: None,
            };
            // Queued with the outcome, and only if it is the one the callback reports.
            let callback =
                callbacks::entry_for(report.get(), &record, &spec.id, retry.is_none(), || {
                    self.core.clock.redis_now_ms()
                });
            // Recorded in a batch with the attempts that end around the same time. The run's
            // permit is given back for a permit to record (up to four times as many): the
            // next firing can start while outcomes wait their turn behind claims (see the
            // completer), and outcomes Redis has not taken yet stay bounded.
            let record_permit = tokio::select! {
                biased;
                p = self.executor.record_permits.clone().acquire_owned() => p.ok(),
                _ = self.core.runs_cancel.cancelled() => None,
            };
            let permit = match record_permit {
                Some(p) => {
                    drop(permit);
                    p
                }
                None => permit,
            };
            let done = Done {
                job: c.job.clone(),
                at_ms: c.at_ms,
                record,
                retry,
                callback,
                permit: Some(permit),
                ended: tokio::time::Instant::now(),
                // The attempt's span ends when its outcome is recorded.
                span: match tracer {
                    Some(_) => tracing::Span::current(),
                    None => tracing::Span::none(),
                },
            };
            let shard = self.core.store.shards().of(done.job_id());
            if let Err(mpsc::error::SendError(done)) = self.completions[shard].send(done) {
                Box::pin(self.completer.record_batch(vec![done])).await;
            }
        }
        .instrument(span)
        .await;
    }

    /// Run the handler under the job's timeout; a cancel (a cancel request, overlap
    /// `replace`, lost lease, shutdown) gives it [`CANCEL_GRACE`] to return before it is
    /// dropped.
    pub(super) async fn invoke(
        &self,
        handler: &str,
        firing: Firing,
        timeout_ms: i64,
        started: std::time::Instant,
        token: &CancellationToken,
    ) -> RunOutcome {
        let Some(h) = self.registry.get(handler) else {
            return RunOutcome::Failed(HandlerError::abort(format!(
                "handler '{handler}' is not registered on node {}",
                self.core.id
            )));
        };
        // The handler's own span, a child of the attempt's, only where traces are exported.
        let traced = trace::tracer().map(|t| (t, tracing::info_span!("handler")));
        let span = match &traced {
            Some((t, span)) if !span.is_disabled() => {
                t.start(span, Start::default());
                t.set_attributes(span, &[("keyfire.handler", Value::Str(handler))]);
                Some(span)
            }
            _ => None,
        };
        // A panic in the handler, in the call that makes its future as in the future itself,
        // fails the attempt (to be retried), as an error would.
        let outcome = match std::panic::catch_unwind(AssertUnwindSafe(|| h.run(firing))) {
            Err(panic) => Self::ended(Err(panic)),
            Ok(run) => {
                let run = match span {
                    Some(span) => run.instrument(span.clone()).boxed(),
                    None => run,
                };
                let run = AssertUnwindSafe(run).catch_unwind();
                tokio::pin!(run);
                // A handler that ends in its first poll (most short ones) needs no timer; one
                // that waits is timed from the run's start.
                match futures::poll!(run.as_mut()) {
                    Poll::Ready(r) => Self::ended(r),
                    Poll::Pending => {
                        let limit = Duration::from_millis(timeout_ms.max(1) as u64);
                        let deadline = tokio::time::Instant::from_std(started) + limit;
                        tokio::select! {
                            biased;
                            r = tokio::time::timeout_at(deadline, run) => match r {
                                Err(_) => {
                                    token.cancel();
                                    RunOutcome::Timeout
                                }
                                Ok(r) => Self::ended(r),
                            },
                            _ = async {
                                token.cancelled().await;
                                tokio::time::sleep(CANCEL_GRACE).await;
                            } => RunOutcome::Cancelled,
                        }
                    }
                }
            }
        };
        let outcome = match outcome {
            RunOutcome::Failed(_) if token.is_cancelled() => RunOutcome::Cancelled,
            other => other,
        };
        if let Some((t, span)) = &traced
            && !span.is_disabled()
        {
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
    fn ended(r: std::thread::Result<crate::handler::HandlerResult>) -> RunOutcome {
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
