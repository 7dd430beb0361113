//! Redis deployments past one server: Redis Cluster and Sentinel topologies of real
//! redis-server processes (started by each test on its own ports), ACL users and TLS.
//! One test binary made of modules, so it links once.

mod conn;
mod limits;
mod nodes;
mod pubsub;
mod queue_shards;

#[path = "../support/mod.rs"]
mod support;

/// The tests that start a cluster or a sentinel set take turns: run together on a 2-core CI
/// machine (up to 20 redis-server processes and 12 nodes at once), they starved Redis past
/// its own timeouts and measured the machine rather than keyfire.
pub static TOPOLOGY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
