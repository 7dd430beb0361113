//! Redis deployments past one server: Redis Cluster and Sentinel topologies of real
//! redis-server processes (started by each test on its own ports), ACL users and TLS.
//! One test binary made of modules, so it links once.

mod conn;
mod limits;
mod nodes;
mod pubsub;
mod queue_batch;
mod queue_dead_pause;
mod queue_shards;

#[path = "../support/mod.rs"]
mod support;

use std::time::Duration;

use keyfire::store::Store;

use support::wait;

/// The tests that start a cluster or a sentinel set take turns: run together on a 2-core CI
/// machine (up to 20 redis-server processes and 12 nodes at once), they starved Redis past
/// its own timeouts and measured the machine rather than keyfire.
pub static TOPOLOGY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Wait until nothing is overdue, queued for another attempt or running, on any shard.
pub(crate) async fn wait_idle(store: &Store, limit: Duration) {
    wait::until("nothing due, queued or running", limit, async || {
        // After a failover the first call on an old connection may fail: ask again.
        let now = store.time_ms().await.map_err(|e| e.to_string())?;
        let mut busy = 0usize;
        for k in store.shards().iter() {
            let (d, q, r): (usize, usize, usize) = redis::pipe()
                .zcount(k.due(), "-inf", now)
                .zcard(k.retry())
                .zcard(k.running())
                .query_async(&mut store.connection())
                .await
                .map_err(|e| e.to_string())?;
            busy += d + q + r;
        }
        match busy {
            0 => Ok(()),
            _ => Err(format!("{busy} firings due, queued or running")),
        }
    })
    .await;
}
