//! The precision layer: local timers for firings this node owns that are due soon.
//!
//! Redis emits `expired` only when it deletes a key, which its expire cycle may do long
//! after the instant when many keys carry a TTL (DESIGN.md). The owner therefore claims at
//! the instant itself (or up to `node.claim_ahead` before it, then holding the run until the
//! instant); the claim script decides by Redis's clock, so a timer that fires early (a wrong
//! offset estimate) gets `Early` and re-arms for the remaining time.
//!
//! Components arm timers through a [`TimerQueue`]; [`Timers`] keeps them and hands each
//! due one to the function it runs with (the claimer's, wired in `engine/mod.rs`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::context::{NodeCore, bump_by};
use super::firing::Kind;
use super::specs::Specs;

/// A request to claim a firing (or its next attempt) when the local clock reaches a deadline.
#[derive(Debug)]
pub(super) struct Arm {
    job_id: String,
    at_ms: i64,
    kind: Kind,
    /// Local-clock ms.
    deadline_local_ms: i64,
}

/// A firing armed at least this long (ms) before its instant has its job's spec read now, if
/// the node has not cached it, rather than when it fires.
const PREFETCH_AHEAD_MS: i64 = 50;

/// Most timers armed from the queue before the loop looks at its deadlines again.
const ARM_DRAIN: usize = 1024;

/// (deadline, arming order, instant, job id, kind): timers with one deadline (a burst's
/// firings) fire in the order they were armed, compared without their job ids.
type Entry = Reverse<(i64, u64, i64, String, KindKey)>;

/// `Kind` as an orderable heap key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct KindKey(u8);

impl From<Kind> for KindKey {
    fn from(k: Kind) -> Self {
        KindKey(match k {
            Kind::Scheduled => 0,
            Kind::Retry => 1,
            Kind::Lease => 2,
        })
    }
}

impl KindKey {
    fn kind(self) -> Kind {
        match self.0 {
            0 => Kind::Scheduled,
            1 => Kind::Retry,
            _ => Kind::Lease,
        }
    }
}

/// Arms timers: a handle to the timer loop's queue.
#[derive(Clone)]
pub(super) struct TimerQueue {
    core: Arc<NodeCore>,
    tx: mpsc::UnboundedSender<Arm>,
}

impl TimerQueue {
    /// A queue, and the timer loop that keeps what it arms.
    pub(super) fn new(core: Arc<NodeCore>, specs: Arc<Specs>) -> (TimerQueue, Timers) {
        let (tx, rx) = mpsc::unbounded_channel();
        let queue = TimerQueue {
            core: core.clone(),
            tx,
        };
        let timers = Timers {
            core,
            specs,
            rx,
            heap: BinaryHeap::new(),
            seq: 0,
            armed: Default::default(),
            hasher: Default::default(),
        };
        (queue, timers)
    }

    /// Arm a timer for a scheduled firing at its instant (by the estimate of Redis's clock).
    pub(super) fn arm(&self, job_id: String, at_ms: i64) {
        self.arm_due(job_id, at_ms, Kind::Scheduled, at_ms);
    }

    /// Arm a timer for `kind` of firing `at_ms`, due at `due_ms` by Redis's clock: a
    /// scheduled firing's timer fires the claim lead (`node.claim_ahead`) before it.
    pub(super) fn arm_due(&self, job_id: String, at_ms: i64, kind: Kind, due_ms: i64) {
        let lead = match kind {
            Kind::Scheduled => super::context::ms(self.core.settings.claim_ahead),
            Kind::Retry | Kind::Lease => 0,
        };
        let deadline = due_ms - lead - self.core.clock.offset_ms();
        self.arm_at(job_id, at_ms, kind, Some(deadline));
    }

    /// Arm a timer at a local-clock deadline (None: now).
    pub(super) fn arm_at(
        &self,
        job_id: String,
        at_ms: i64,
        kind: Kind,
        deadline_local_ms: Option<i64>,
    ) {
        let _ = self.tx.send(Arm {
            job_id,
            at_ms,
            kind,
            deadline_local_ms: deadline_local_ms.unwrap_or_else(|| self.core.clock.local_ms()),
        });
    }
}

/// The timer loop: the armed timers, by deadline, each armed once.
pub(super) struct Timers {
    core: Arc<NodeCore>,
    specs: Arc<Specs>,
    rx: mpsc::UnboundedReceiver<Arm>,
    heap: BinaryHeap<Entry>,
    /// Timers armed so far (the heap's tie-break).
    seq: u64,
    /// The armed timers, each as a hash of its job id, instant and kind: a lookup allocates
    /// nothing (a collision could only leave a firing to its event or a sweep).
    armed: foldhash::HashSet<u64>,
    hasher: foldhash::fast::RandomState,
}

impl Timers {
    fn key(&self, job_id: &str, at_ms: i64, kind: KindKey) -> u64 {
        use std::hash::BuildHasher;
        self.hasher.hash_one((job_id, at_ms, kind))
    }

    /// Read the specs of jobs whose firings were just armed, in the background: the claim
    /// at the instant then finds them cached. An every-second cron job's instants go to
    /// each node in turn (ownership is per firing), so a node meets most of its jobs for
    /// the first time in the seconds after it starts; read at the instant, their specs
    /// were read and validated among the claims of a burst.
    fn prefetch_specs(&self, ids: Vec<String>) {
        let (core, specs) = (self.core.clone(), self.specs.clone());
        tokio::spawn(async move {
            let ids: Vec<&str> = ids
                .iter()
                .map(String::as_str)
                .filter(|id| !specs.contains(id))
                .collect();
            bump_by(&core.stats.specs_read_ahead, ids.len() as u64);
            if let Err(e) = specs.specs(&ids, false).await {
                tracing::debug!(error = %e, "reading specs ahead failed; the claims read them");
            }
        });
    }

    /// Keep `arm` and whatever else is queued (up to a bound, so due timers are not held
    /// up): announcements arm thousands of timers at once.
    fn take(&mut self, arm: Arm) {
        let mut next = Some(arm);
        let mut taken = 0;
        let ahead = self.core.clock.local_ms() + PREFETCH_AHEAD_MS;
        let mut fetch = Vec::new();
        while let Some(arm) = next {
            taken += 1;
            let key = KindKey::from(arm.kind);
            if self.armed.insert(self.key(&arm.job_id, arm.at_ms, key)) {
                if arm.kind == Kind::Scheduled
                    && arm.deadline_local_ms >= ahead
                    && !self.specs.contains(&arm.job_id)
                {
                    fetch.push(arm.job_id.clone());
                }
                self.seq += 1;
                self.heap.push(Reverse((
                    arm.deadline_local_ms,
                    self.seq,
                    arm.at_ms,
                    arm.job_id,
                    key,
                )));
            }
            next = if taken < ARM_DRAIN {
                self.rx.try_recv().ok()
            } else {
                None
            };
        }
        if !fetch.is_empty() {
            self.prefetch_specs(fetch);
        }
    }

    /// The timer loop's step: keep what is queued, then hand every timer due by the local
    /// clock to `fire`; how many fired.
    pub(super) fn run_once(&mut self, fire: &impl Fn(String, i64, Kind)) -> usize {
        if let Ok(arm) = self.rx.try_recv() {
            self.take(arm);
        }
        self.fire_due(fire)
    }

    /// The timers armed (taking what is queued first), as `(job id, instant, kind)`.
    #[cfg(test)]
    pub(super) fn armed(&mut self) -> Vec<(String, i64, Kind)> {
        if let Ok(arm) = self.rx.try_recv() {
            self.take(arm);
        }
        let mut armed: Vec<_> = (self.heap.iter())
            .map(|Reverse((_, _, at, id, key))| (id.clone(), *at, key.kind()))
            .collect();
        armed.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        armed
    }

    fn fire_due(&mut self, fire: &impl Fn(String, i64, Kind)) -> usize {
        let local = self.core.clock.local_ms();
        let mut fired = 0;
        while let Some(Reverse((deadline, ..))) = self.heap.peek() {
            if *deadline > local {
                break;
            }
            let Reverse((_, _, at, job_id, key)) = self.heap.pop().expect("peeked");
            self.armed.remove(&self.key(&job_id, at, key));
            fire(job_id, at, key.kind());
            fired += 1;
        }
        fired
    }

    /// Keep timers and fire them when due, until the node stops claiming.
    pub(super) async fn run(mut self, fire: impl Fn(String, i64, Kind)) {
        loop {
            let wait = self
                .heap
                .peek()
                .map(|Reverse((deadline, ..))| (deadline - self.core.clock.local_ms()).max(0));
            let sleep = async {
                match wait {
                    Some(ms) => tokio::time::sleep(Duration::from_millis(ms as u64)).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = self.core.claiming.cancelled() => break,
                msg = self.rx.recv() => match msg {
                    None => break,
                    Some(arm) => self.take(arm),
                },
                _ = sleep => {
                    self.run_once(&fire);
                }
            }
        }
    }
}
