//! A Sentinel deployment of our own: a master, a replica and three sentinels.

use std::io;
use std::time::Duration;

use crate::{RedisServer, info_field, off_runtime, query, wait_until};

/// A Sentinel deployment of our own: one master, one replica of it, and three sentinels
/// (quorum 2, `down-after-milliseconds 1000`, `failover-timeout 5000`) watching it under
/// [`RedisSentinelSet::MASTER_NAME`]. All processes are killed (SIGKILL) when it is dropped.
pub struct RedisSentinelSet {
    data: Vec<RedisServer>,
    killed: Vec<bool>,
    sentinels: Vec<RedisServer>,
}

impl std::fmt::Debug for RedisSentinelSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSentinelSet")
            .field("data", &self.data)
            .field("sentinels", &self.sentinels)
            .finish()
    }
}

impl RedisSentinelSet {
    /// The name the sentinels monitor the master under.
    pub const MASTER_NAME: &str = "mymaster";

    /// Start the master and the replica, wait until the replica is in sync, start the
    /// sentinels, and wait until each sees the replica and the two other sentinels (so a
    /// failover can be agreed on).
    pub fn start() -> io::Result<Self> {
        off_runtime(|| {
            let master = RedisServer::start()?;
            let replica = RedisServer::start()?;
            let _: String = query(
                &replica.addr(),
                redis::cmd("REPLICAOF").arg("127.0.0.1").arg(master.port()),
            )?;
            wait_until("replica in sync", Duration::from_secs(20), || {
                let info: String = query(&replica.addr(), redis::cmd("INFO").arg("replication"))?;
                Ok(
                    (info_field(&info, "master_link_status").as_deref() == Some("up"))
                        .then_some(()),
                )
            })?;
            let sentinels = (0..3)
                .map(|_| RedisServer::start_sentinel(Self::MASTER_NAME, "127.0.0.1", master.port()))
                .collect::<io::Result<Vec<_>>>()?;
            let set = Self {
                data: vec![master, replica],
                killed: vec![false, false],
                sentinels,
            };
            wait_until(
                "sentinels see the replica and each other",
                Duration::from_secs(30),
                || {
                    for s in &set.sentinels {
                        let fields: Vec<String> = query(
                            &s.addr(),
                            redis::cmd("SENTINEL").arg("MASTER").arg(Self::MASTER_NAME),
                        )?;
                        let get = |name: &str| {
                            fields
                                .chunks(2)
                                .find(|kv| kv[0] == name)
                                .and_then(|kv| kv.get(1).cloned())
                        };
                        if get("num-slaves").as_deref() != Some("1")
                            || get("num-other-sentinels").as_deref() != Some("2")
                        {
                            return Ok(None);
                        }
                    }
                    Ok(Some(()))
                },
            )?;
            Ok(set)
        })
    }

    /// The sentinels' addresses (`redis://127.0.0.1:<port>`), for `redis.nodes`.
    pub fn sentinels(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|s| format!("redis://{}", s.addr()))
            .collect()
    }

    /// The data servers (the first started as the master, the second as its replica).
    pub fn servers(&self) -> &[RedisServer] {
        &self.data
    }

    /// The master's address (`127.0.0.1:<port>`) as the first sentinel that answers reports it.
    pub fn master_addr(&self) -> io::Result<String> {
        off_runtime(|| {
            let mut last = None;
            for s in &self.sentinels {
                match query::<(String, u16)>(
                    &s.addr(),
                    redis::cmd("SENTINEL")
                        .arg("get-master-addr-by-name")
                        .arg(Self::MASTER_NAME),
                ) {
                    Ok((host, port)) => return Ok(format!("{host}:{port}")),
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| io::Error::other("no sentinel")))
        })
    }

    /// Kill (SIGKILL) the server that is master now; returns its address.
    pub fn kill_master(&mut self) -> io::Result<String> {
        off_runtime(|| {
            let master = self.master_addr()?;
            let i = self
                .data
                .iter()
                .position(|n| n.addr() == master)
                .ok_or_else(|| io::Error::other(format!("master {master} is not one of ours")))?;
            self.data[i].stop(true)?;
            self.killed[i] = true;
            Ok(master)
        })
    }

    /// Wait until every sentinel names a master other than `old` (`host:port`), the same one,
    /// and that server says it is a master. Returns its address.
    pub fn wait_for_failover(&self, old: &str, limit: Duration) -> io::Result<String> {
        off_runtime(|| {
            wait_until("sentinel failover", limit, || {
                let mut agreed: Option<String> = None;
                for s in &self.sentinels {
                    let (host, port): (String, u16) = query(
                        &s.addr(),
                        redis::cmd("SENTINEL")
                            .arg("get-master-addr-by-name")
                            .arg(Self::MASTER_NAME),
                    )?;
                    let addr = format!("{host}:{port}");
                    if addr == old || agreed.as_ref().is_some_and(|a| *a != addr) {
                        return Ok(None);
                    }
                    agreed = Some(addr);
                }
                let Some(addr) = agreed else {
                    return Ok(None);
                };
                let role: Vec<redis::Value> = query(&addr, &redis::cmd("ROLE"))?;
                let is_master =
                    matches!(role.first(), Some(redis::Value::BulkString(b)) if b == b"master");
                Ok(is_master.then_some(addr))
            })
        })
    }
}
