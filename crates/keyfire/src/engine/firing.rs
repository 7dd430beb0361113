//! The words the components speak of a firing in: what is taken for it, what found it, and
//! a firing this node holds.

use std::sync::Arc;

use super::specs::CachedJob;

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

/// A firing this node holds.
pub(super) struct Claimed {
    pub(super) job: Arc<CachedJob>,
    pub(super) at_ms: i64,
    pub(super) claimed_ms: i64,
    pub(super) attempt: u32,
    /// Claimed ahead (`node.claim_ahead`): when its run may start, on this node's monotonic
    /// clock. The claim's reply was read after Redis's `now` of the claim, so waiting the
    /// release minus that `now` from the reply starts the run no earlier than its release by
    /// Redis's clock, whatever this node's estimate of the offset.
    pub(super) hold_until: Option<tokio::time::Instant>,
}

impl Claimed {
    /// The hold of a run claimed at Redis time `claimed_ms` and released at `release_ms`
    /// (its instant plus its jitter offset), counted from now (the claim's reply was just
    /// read): none when it is released already.
    pub(super) fn hold(claimed_ms: i64, release_ms: i64) -> Option<tokio::time::Instant> {
        (release_ms > claimed_ms).then(|| {
            tokio::time::Instant::now()
                + std::time::Duration::from_millis((release_ms - claimed_ms) as u64)
        })
    }
}
