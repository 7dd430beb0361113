//! The bounded executor's permits: one per concurrent run, the permits to claim ahead of a
//! free run permit while runs are short, the permits to record outcomes, and the runs in
//! progress (to cancel one, to count them).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// Scheduled claims a node may have sent ahead of a free run permit, per run permit (with
/// the default 256 permits, 3,840: a burst of 10,000 firings on three nodes is claimed in
/// full, in batches, with no claim waiting for a run to end).
pub(super) const CLAIMS_AHEAD_PER_RUN: usize = 15;
/// Runs are short while this node's handlers take less than this, lately (a moving
/// average): then claims go ahead of free run permits. Each permit then runs its
/// [`CLAIMS_AHEAD_PER_RUN`] firings claimed ahead within about 300 ms, well within
/// [`AHEAD_WAIT_MAX`](super::batcher::AHEAD_WAIT_MAX).
const SHORT_RUN: Duration = Duration::from_millis(20);
/// Outcomes that may wait to be recorded, per run permit (`node.max_concurrent_runs`).
pub(super) const RECORD_PERMITS_PER_RUN: usize = 16;

/// Refuse a `node.max_concurrent_runs` whose semaphores could not be made (tokio panics past
/// `Semaphore::MAX_PERMITS`, and the multiplications would overflow first).
pub(super) fn check_run_permits(runs: usize) -> crate::Result<()> {
    let per_run = CLAIMS_AHEAD_PER_RUN.max(RECORD_PERMITS_PER_RUN);
    let most = Semaphore::MAX_PERMITS / per_run;
    if runs > most {
        return Err(crate::error::Error::Config(format!(
            "node.max_concurrent_runs: {runs} is too many; at most {most}"
        )));
    }
    Ok(())
}

/// The executor's permits and the runs in progress.
pub(super) struct Executor {
    max_runs: usize,
    /// One permit per concurrent run: the bounded executor.
    pub(super) permits: Arc<Semaphore>,
    /// Scheduled claims sent ahead of a free run permit, while runs are short (see
    /// [`RunPermit`]).
    pub(super) claims_ahead: Arc<Semaphore>,
    /// Outcomes waiting to be recorded: a run gives its permit back for one of these.
    pub(super) record_permits: Arc<Semaphore>,
    /// How long this node's handlers have been taking, lately.
    pub(super) run_time: RunTime,
    /// Cancellation of the runs in progress here, by firing id (overlap `replace`, cancel
    /// requests).
    active: Mutex<foldhash::HashMap<String, CancellationToken>>,
    /// The node cancelled its runs (drain timeout, stop): a run that starts now is cancelled
    /// at once. Set and read under `active`'s lock.
    stopped: AtomicBool,
    /// Cancel requests, by firing id, with when they came: for a run that starts after its
    /// request came (claimed, not yet running), and to say why a run was cancelled. Kept for
    /// [`REQUEST_MEMORY`].
    requested: Mutex<foldhash::HashMap<String, std::time::Instant>>,
    /// Whether `requested` holds any (set and cleared under its lock): most runs start and
    /// end with none, and take no lock for them.
    any_requested: AtomicBool,
}

/// How long a cancel request is remembered for a run that has not started here yet.
const REQUEST_MEMORY: Duration = Duration::from_secs(60);

impl Executor {
    /// The permits for `max_runs` concurrent runs (checked by [`check_run_permits`]).
    pub(super) fn new(max_runs: usize) -> Self {
        Self {
            max_runs,
            permits: Arc::new(Semaphore::new(max_runs)),
            claims_ahead: Arc::new(Semaphore::new(max_runs * CLAIMS_AHEAD_PER_RUN)),
            record_permits: Arc::new(Semaphore::new(max_runs * RECORD_PERMITS_PER_RUN)),
            run_time: RunTime::default(),
            active: Mutex::default(),
            stopped: AtomicBool::new(false),
            requested: Mutex::default(),
            any_requested: AtomicBool::new(false),
        }
    }

    /// Fewer than a quarter of the record permits are free: outcomes must not be held back
    /// (see [`Completer::run`](super::completer::Completer::run)).
    pub(super) fn records_short(&self) -> bool {
        self.record_permits.available_permits() < self.record_permits_total() / 4
    }

    /// Outcomes of ended runs not recorded in Redis yet, each holding a record permit: they
    /// wait behind this node's claims until fewer than a quarter of the permits are free.
    pub(super) fn outcomes_unrecorded(&self) -> usize {
        self.record_permits_total()
            .saturating_sub(self.record_permits.available_permits())
    }

    /// Record permits in all, free or taken.
    fn record_permits_total(&self) -> usize {
        self.max_runs * RECORD_PERMITS_PER_RUN
    }

    /// Run permits taken now (runs in progress, and outcomes recorded on their run's permit).
    pub(super) fn running(&self) -> usize {
        self.max_runs - self.permits.available_permits()
    }

    /// A run of `firing` is about to start here, stopped by `token`: cancelled at once if its
    /// cancel was requested before, or the node's runs were stopped.
    pub(super) fn starting(&self, firing: &str, token: &CancellationToken) {
        if self.requested(firing) {
            tracing::info!(firing, "cancelling the run: its cancel was requested");
            token.cancel();
        }
        if self.stopped.load(Ordering::Relaxed) {
            token.cancel();
        }
    }

    /// A run of `firing` goes on here (it did not end in its first poll), stopped by
    /// `token`: a cancel requested since it started, or a stop, reaches it from now on.
    pub(super) fn enter(&self, firing: String, token: CancellationToken) {
        if !token.is_cancelled() && self.requested(&firing) {
            tracing::info!(firing, "cancelling the run: its cancel was requested");
            token.cancel();
        }
        let mut active = self.active.lock().expect("active runs lock");
        if self.stopped.load(Ordering::Relaxed) {
            token.cancel();
        }
        active.insert(firing, token);
    }

    /// Cancel every run in progress here, and every run that starts from now on (the node's
    /// runs are cancelled: each run's token is its own, not a child of the node's, whose
    /// shared lock every run took twice).
    pub(super) fn stop_all(&self) {
        let active = self.active.lock().expect("active runs lock");
        self.stopped.store(true, Ordering::Relaxed);
        for token in active.values() {
            token.cancel();
        }
    }

    /// The run of `firing` ended.
    pub(super) fn leave(&self, firing: &str) {
        self.active.lock().expect("active runs lock").remove(firing);
    }

    /// Whether a cancel of `firing` was requested (lately).
    pub(super) fn requested(&self, firing: &str) -> bool {
        if !self.any_requested.load(Ordering::Acquire) {
            return false;
        }
        let requested = self.requested.lock().expect("cancel requests lock");
        requested
            .get(firing)
            .is_some_and(|at| at.elapsed() < REQUEST_MEMORY)
    }

    /// Forget the cancel request of `firing` (its outcome is recorded).
    pub(super) fn forget_request(&self, firing: &str) {
        if !self.any_requested.load(Ordering::Acquire) {
            return;
        }
        let mut requested = self.requested.lock().expect("cancel requests lock");
        requested.remove(firing);
        self.any_requested
            .store(!requested.is_empty(), Ordering::Release);
    }

    /// How many runs are in progress here.
    pub(super) fn active(&self) -> usize {
        self.active.lock().expect("active runs lock").len()
    }

    /// Cancel a local run of `firing`: a newer run replaces it (overlap `replace` from any
    /// node), or its cancel was `requested` (cancel.lua). A requested cancel is remembered for
    /// a run that starts here later (claimed, waiting for its permit).
    pub(super) fn cancel_run(&self, firing: &str, requested: bool) {
        if requested {
            let mut pending = self.requested.lock().expect("cancel requests lock");
            pending.retain(|_, at| at.elapsed() < REQUEST_MEMORY);
            pending.insert(firing.to_string(), std::time::Instant::now());
            self.any_requested.store(true, Ordering::Release);
        }
        if let Some(token) = self.active.lock().expect("active runs lock").get(firing) {
            if requested {
                tracing::info!(firing, "cancelling the run: its cancel was requested");
            } else {
                tracing::info!(firing, "cancelling the run: a newer run replaces it");
            }
            token.cancel();
        }
    }
}

/// What a scheduled claim holds while it is queued and in flight.
///
/// Were a claim's run permit taken before the claim is sent, a node would have at most
/// `max_concurrent_runs` claims out: with short handlers most permits would be held by
/// claims on their way to Redis and back, not by runs, and under a burst Redis would wait
/// for the next batch. So while runs are short, a claim that finds no free run permit goes
/// ahead with a permit of its own (up to [`CLAIMS_AHEAD_PER_RUN`] per run permit) and takes
/// its run permit when its reply comes; claims waiting to be sent wait for these permits, not
/// for run permits, so the run permits that come free go to firings already claimed. Runs
/// that turn long stop claims going ahead (the moving average), and a firing claimed ahead
/// that finds no run permit within [`AHEAD_WAIT_MAX`](super::batcher::AHEAD_WAIT_MAX) while
/// the node runs fewer firings in that time than wait claimed ahead is queued again as the
/// same attempt, so a node whose handlers slowed down hoards no leased firings.
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

    #[test]
    fn too_many_concurrent_runs_are_refused_by_name() {
        super::check_run_permits(1_000_000).unwrap();
        let err = super::check_run_permits(usize::MAX)
            .unwrap_err()
            .to_string();
        assert!(err.contains("node.max_concurrent_runs"), "{err}");
    }
}
