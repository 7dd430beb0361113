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
}
