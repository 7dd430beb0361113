//! `redis-server` processes of our own: for `keyfire dev`, the benchmarks and the tests.
//! A [`RedisServer`] runs with the shipped `redis.conf` on a free port in a temporary
//! directory; [`RedisCluster`] and [`RedisSentinelSet`] build the deployments keyfire supports
//! past one server out of such processes (Redis Cluster; a master, a replica and sentinels).
//!
//! The fixtures' calls block (they start processes, poll, run `redis-cli`), but they are safe
//! to call from async tests: on a multi-thread tokio runtime each call first hands the
//! worker's other tasks, the nodes under test, to the other workers (`block_in_place`), so a
//! wait for a failover never stalls the nodes it waits on. Use a multi-thread runtime in tests
//! that run nodes while a fixture waits.
//!
//! [`world`] holds what keyfire's own tests build on those servers: a test's [`World`] (its
//! Redis, settings and key prefix), a [`Recorder`] its handlers write to, and waits on
//! observable conditions ([`wait`]).

use std::io;
use std::time::Duration;

pub mod chaos_cluster;
mod cluster;
mod receiver;
mod sentinel;
mod server;
mod silent;
pub mod wait;
pub mod world;

pub use cluster::RedisCluster;
pub use receiver::{Received, http_receiver};
pub use sentinel::RedisSentinelSet;
pub use server::{
    MANAGED_RENAMES, REDIS_CONF, RedisOptions, RedisServer, StartError, managed_from_env,
};
pub use silent::SilentReceiver;
pub use world::{Recorder, Seen, World, WorldOf, WorldSettings};

/// Run one command on the server at `addr` (`host:port`) over a short-lived connection.
fn query<T: redis::FromRedisValue>(addr: &str, cmd: &redis::Cmd) -> io::Result<T> {
    let client = redis::Client::open(format!("redis://{addr}")).map_err(io::Error::other)?;
    let mut conn = client
        .get_connection_with_timeout(Duration::from_millis(500))
        .map_err(|e| io::Error::other(format!("{addr}: {e}")))?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(io::Error::other)?;
    cmd.query(&mut conn)
        .map_err(|e| io::Error::other(format!("{addr}: {e}")))
}

/// The `field:value` lines of an `INFO` or `CLUSTER INFO` reply.
fn info_field(info: &str, field: &str) -> Option<String> {
    info.lines().find_map(|line| {
        line.strip_prefix(field)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(|v| v.trim().to_string())
    })
}

/// Poll `check` every 50 ms until it gives `Some`, for at most `limit`; on timeout the error
/// says what was awaited and the last state seen ([`wait`]'s loop, as an error).
fn wait_until<T>(
    what: &str,
    limit: Duration,
    mut check: impl FnMut() -> io::Result<Option<T>>,
) -> io::Result<T> {
    wait::poll_blocking(limit, Duration::from_millis(50), || match check() {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err("not yet".to_string()),
        Err(e) => Err(e.to_string()),
    })
    .map_err(|last| {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{what}: not done after {limit:?} (last: {last})"),
        )
    })
}

/// Run blocking fixture work (process start, polling waits, synchronous Redis calls, redis-cli)
/// without holding up an async runtime: on a multi-thread tokio runtime the worker hands its
/// other tasks (the nodes under test) to the other workers first (`block_in_place`).
/// Elsewhere (plain threads, `keyfire dev`'s setup) it just runs.
fn off_runtime<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// A port free on 127.0.0.1 now (the OS picks it; another process may take it before the
/// caller binds it, which tests accept): for the APIs and receivers tests start.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port on 127.0.0.1")
        .port()
}
