//! The precision layer: local timers for firings this node owns that are due soon.
//!
//! Redis emits `expired` only when it deletes a key, which its expire cycle may do long
//! after the instant when many keys carry a TTL (DESIGN.md). The owner therefore claims at
//! the instant itself; the claim script decides by Redis's clock, so a timer that fires
//! early (a wrong offset estimate) gets `Early` and re-arms for the remaining time.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::Inner;
use super::claim::{Kind, Source};

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

type Entry = Reverse<(i64, i64, String, KindKey)>;

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

impl Inner {
    /// Arm a timer for a scheduled firing at its instant (by the estimate of Redis's clock).
    pub(super) fn arm(&self, job_id: String, at_ms: i64) {
        self.arm_due(job_id, at_ms, Kind::Scheduled, at_ms);
    }

    /// Arm a timer for `kind` of firing `at_ms`, due at `due_ms` by Redis's clock.
    pub(super) fn arm_due(&self, job_id: String, at_ms: i64, kind: Kind, due_ms: i64) {
        let deadline = due_ms - self.clock.offset_ms();
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
        let _ = self.timers.send(Arm {
            job_id,
            at_ms,
            kind,
            deadline_local_ms: deadline_local_ms.unwrap_or_else(|| self.clock.local_ms()),
        });
    }

    /// Read the specs of jobs whose firings were just armed, in the background: the claim
    /// at the instant then finds them cached. An every-second cron job's instants go to
    /// each node in turn (ownership is per firing), so a node meets most of its jobs for
    /// the first time in the seconds after it starts; read at the instant, their specs
    /// were read and validated among the claims of a burst.
    fn prefetch_specs(self: &Arc<Self>, ids: Vec<String>) {
        let me = self.clone();
        tokio::spawn(async move {
            let ids: Vec<&str> = ids
                .iter()
                .map(String::as_str)
                .filter(|id| !me.specs.contains(id))
                .collect();
            Inner::bump_by(&me.stats.specs_read_ahead, ids.len() as u64);
            if let Err(e) = me.specs(&ids).await {
                tracing::debug!(error = %e, "reading specs ahead failed; the claims read them");
            }
        });
    }

    pub(super) async fn timer_loop(self: Arc<Self>, mut rx: mpsc::UnboundedReceiver<Arm>) {
        let mut heap: BinaryHeap<Entry> = BinaryHeap::new();
        let mut armed: HashSet<(String, i64, KindKey)> = HashSet::new();
        loop {
            let wait = heap
                .peek()
                .map(|Reverse((deadline, ..))| (deadline - self.clock.local_ms()).max(0));
            let sleep = async {
                match wait {
                    Some(ms) => tokio::time::sleep(Duration::from_millis(ms as u64)).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = self.claiming.cancelled() => break,
                msg = rx.recv() => match msg {
                    None => break,
                    Some(arm) => {
                        // What else is queued goes in too (up to a bound, so due timers are
                        // not held up) before the next sleep is set up: announcements arm
                        // thousands of timers at once.
                        let mut next = Some(arm);
                        let mut taken = 0;
                        let ahead = self.clock.local_ms() + PREFETCH_AHEAD_MS;
                        let mut fetch = Vec::new();
                        while let Some(arm) = next {
                            taken += 1;
                            let key = KindKey::from(arm.kind);
                            if armed.insert((arm.job_id.clone(), arm.at_ms, key)) {
                                if arm.kind == Kind::Scheduled
                                    && arm.deadline_local_ms >= ahead
                                    && !self.specs.contains(&arm.job_id)
                                {
                                    fetch.push(arm.job_id.clone());
                                }
                                heap.push(Reverse((arm.deadline_local_ms, arm.at_ms, arm.job_id, key)));
                            }
                            next = if taken < ARM_DRAIN { rx.try_recv().ok() } else { None };
                        }
                        if !fetch.is_empty() {
                            self.prefetch_specs(fetch);
                        }
                    }
                },
                _ = sleep => {
                    let local = self.clock.local_ms();
                    while let Some(Reverse((deadline, ..))) = heap.peek() {
                        if *deadline > local {
                            break;
                        }
                        let Reverse((_, at, job_id, key)) = heap.pop().expect("peeked");
                        armed.remove(&(job_id.clone(), at, key));
                        self.spawn_claim(job_id, at, key.kind(), Source::Timer);
                    }
                }
            }
        }
    }
}
