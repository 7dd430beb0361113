//! How a `pop` waits for a task to become ready between its attempts.
//!
//! Blocking (preferred): `BLPOP` on the topic's notify list, to which every script that makes a
//! task ready pushes a wake-up token. A blocking command stalls every other command queued on
//! its connection, and the store's multiplexed connection times responses out after 500 ms, so
//! each waiting pop takes a connection of its own (no response timeout) from a small pool.
//! A waiting pop wakes within a millisecond of a task becoming ready.
//!
//! Polling (fallback, when the queue has no `redis::Client` to open connections with): short
//! sleeps, growing from 2 ms to 50 ms while nothing comes, so a pop sees a new task at most
//! 50 ms late and an idle consumer costs Redis about 40 cheap calls a second.

use std::sync::Mutex;
use std::time::Duration;

use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;

use crate::error::Result;

/// Shortest and longest sleep between polls.
const POLL_MIN: Duration = Duration::from_millis(2);
const POLL_MAX: Duration = Duration::from_millis(50);
/// Idle blocking connections kept for reuse.
const POOL_MAX: usize = 64;
/// How much longer than its own timeout a `BLPOP` may take before the connection is given up.
const BLOCK_SLACK: Duration = Duration::from_secs(2);

pub(super) enum Waiter {
    Poll,
    Block {
        // Boxed: a client with TLS settings is large (clippy::large_enum_variant).
        client: Box<redis::Client>,
        idle: Mutex<Vec<MultiplexedConnection>>,
    },
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
        Waiter::Block {
            client: Box::new(client),
            idle: Mutex::new(Vec::new()),
        }
    }

    pub(super) fn is_blocking(&self) -> bool {
        matches!(self, Waiter::Block { .. })
    }

    /// Wait up to `limit` for a wake-up token on `notify` (blocking) or for one poll interval.
    pub(super) async fn wait(
        &self,
        notify: &str,
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
            Waiter::Block { client, idle } => {
                let pooled = idle.lock().expect("blocking pool lock").pop();
                let mut conn = match pooled {
                    Some(c) => c,
                    None => {
                        let config = AsyncConnectionConfig::new().set_response_timeout(None);
                        client
                            .get_multiplexed_async_connection_with_config(&config)
                            .await?
                    }
                };
                // BLPOP takes seconds as a float (Redis >= 6); 0 would mean "forever".
                let secs = limit.as_secs_f64().max(0.001);
                let blpop = super::store::blpop(&mut conn, notify, secs);
                let reply = tokio::time::timeout(limit + BLOCK_SLACK, blpop).await;
                match reply {
                    Ok(Ok(_)) => {
                        let mut pool = idle.lock().expect("blocking pool lock");
                        if pool.len() < POOL_MAX {
                            pool.push(conn);
                        }
                        Ok(())
                    }
                    // The connection failed: drop it (a fresh one is opened next time).
                    Ok(Err(e)) => Err(e.into()),
                    // No answer in time: the connection may still hold the BLPOP; drop it,
                    // which closes it and lets Redis forget the blocked client.
                    Err(_) => Ok(()),
                }
            }
        }
    }
}
