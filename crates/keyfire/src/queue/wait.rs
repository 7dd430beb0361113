//! How a `pop` waits for a task to become ready between its attempts.
//!
//! Blocking (preferred): `BLPOP` on the notify lists of the topic's lanes, to which every script
//! that makes a task ready pushes a wake-up token, through the store's blocking pool
//! ([`super::store::BlockingPool`]). A waiting pop wakes within a millisecond of a task becoming
//! ready.
//!
//! Polling (fallback, when the queue has no `redis::Client` to open connections with): short
//! sleeps, growing from 2 ms to 50 ms while nothing comes, so a pop sees a new task at most
//! 50 ms late and an idle consumer costs Redis a few cheap calls per lane 40 times a second.

use std::time::Duration;

use super::Queue;
use super::lane::Lane;
use super::store::BlockingPool;
use crate::error::Result;

/// Shortest and longest sleep between polls.
const POLL_MIN: Duration = Duration::from_millis(2);
const POLL_MAX: Duration = Duration::from_millis(50);

pub(super) enum Waiter {
    Poll,
    Block(BlockingPool),
}

/// One pop's waiting state (the poll interval grows while nothing comes).
pub(super) struct Backoff(Duration);

impl Backoff {
    pub(super) fn new() -> Self {
        Self(POLL_MIN)
    }
}

impl Waiter {
    pub(super) fn blocking(client: redis::Client) -> Self {
        Waiter::Block(BlockingPool::new(client))
    }

    pub(super) fn is_blocking(&self) -> bool {
        matches!(self, Waiter::Block(_))
    }

    /// Wait up to `limit` for a wake-up token on the lanes' notify lists (blocking) or for one
    /// poll interval.
    pub(super) async fn wait(
        &self,
        queue: &Queue,
        lanes: &[Lane],
        limit: Duration,
        backoff: &mut Backoff,
    ) -> Result<()> {
        if limit.is_zero() {
            return Ok(());
        }
        match self {
            Waiter::Poll => {
                tokio::time::sleep(limit.min(backoff.0)).await;
                backoff.0 = (backoff.0 * 2).min(POLL_MAX);
                Ok(())
            }
            Waiter::Block(pool) => pool.wait(queue, lanes, limit).await,
        }
    }
}
