//! One connection handle for every Redis deployment: a standalone server, a master found
//! through Sentinel, or a Redis Cluster; with the ACL credentials and TLS of the settings
//! applied to every connection.
//!
//! [`Conn`] implements [`redis::aio::ConnectionLike`], so commands, pipelines and
//! `Script::invoke_async` run on it as on a `ConnectionManager`. In cluster mode a pipeline
//! or a script must keep its keys in one slot (one hash tag), as keyfire's keys do.
//!
//! The files:
//!
//! - `mod.rs`: [`Conn`] itself: connecting in each mode, the servers it reaches (masters,
//!   subscription targets, the master of a key), `WAIT`, and its `ConnectionLike` dispatch.
//! - `access.rs`: credentials, TLS and URLs: the `Access` every client is built with,
//!   [`client_addr`], [`redact_url`], [`data_client`] and [`sentinel_client`].
//! - `cluster.rs`: `CLUSTER SLOTS` ([`parse_cluster_slots`], and asking a cluster for it) and
//!   the cluster client's settings (`cluster` feature).
//! - `sentinel.rs`: `SentinelConn`, the master the sentinels name, followed across failovers
//!   (`sentinel` feature).

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
#[cfg(feature = "cluster")]
use redis::cluster_async::ClusterConnection;
#[cfg(feature = "cluster")]
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Client, Cmd, RedisError, RedisFuture, RedisResult, Value};

pub use crate::config::RedisMode as Mode;
use crate::config::RedisSettings;
use crate::error::{Error, Result};

mod access;
mod cluster;
#[cfg(feature = "sentinel")]
mod sentinel;

use access::Access;
pub use access::{client_addr, data_client, redact_url, sentinel_client};
#[cfg(feature = "cluster")]
use cluster::cluster_slots;
pub use cluster::parse_cluster_slots;

/// Longest wait for one reply from Redis. redis-rs's default (500 ms) turned slow replies to
/// big pipelines and batch scripts into errors, and lease renewals into takeovers.
pub(super) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest wait to open one connection.
pub(super) const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);

/// One connection handle for every mode: cheap to clone, multiplexed, reconnecting.
///
/// Clones share the underlying connections: in sentinel mode, when one clone follows a
/// failover to the new master, every clone does.
#[derive(Clone)]
pub struct Conn {
    kind: Kind,
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    access: Arc<Access>,
}

#[derive(Clone)]
enum Kind {
    Standalone {
        manager: ConnectionManager,
        // Boxed: a client with TLS settings is large (clippy::large_enum_variant).
        client: Box<Client>,
    },
    #[cfg(feature = "sentinel")]
    Sentinel(sentinel::SentinelConn),
    #[cfg(feature = "cluster")]
    Cluster(ClusterConnection),
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Conn");
        d.field("mode", &self.mode());
        match &self.kind {
            Kind::Standalone { client, .. } => d.field("server", &client_addr(client)),
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(s) => d.field("master", &s.current().addr),
            #[cfg(feature = "cluster")]
            Kind::Cluster(_) => d.field("seeds", &self.access.seeds),
        };
        d.finish()
    }
}

impl Conn {
    /// Connect as `s` says: `s.url` in standalone mode, the master of `s.sentinel_master`
    /// through the sentinels in `s.nodes`, or the cluster behind the seed nodes in `s.nodes`.
    /// Fails when no server answers (naming what was tried), or on a refused login.
    pub async fn connect(s: &RedisSettings) -> Result<Conn> {
        s.check()?;
        let access = Arc::new(Access::from_settings(s)?);
        let kind = match s.mode {
            Mode::Standalone => {
                let client = access
                    .client(s.url.as_str())
                    .map_err(|e| Error::redis_op(format!("redis.url {}", redact_url(&s.url)), e))?;
                let target = client_addr(&client);
                probe(&client)
                    .await
                    .map_err(|e| access.connect_error(&target, e))?;
                let manager = client
                    .get_connection_manager_with_config(manager_config())
                    .await
                    .map_err(|e| access.connect_error(&target, e))?;
                Kind::Standalone {
                    manager,
                    client: Box::new(client),
                }
            }
            #[cfg(feature = "sentinel")]
            Mode::Sentinel => {
                Kind::Sentinel(sentinel::SentinelConn::connect(s, access.clone()).await?)
            }
            // `RedisSettings::check` refused these above, naming the feature.
            #[cfg(not(feature = "sentinel"))]
            Mode::Sentinel => return Err(crate::config::missing_feature("redis.mode", "sentinel")),
            #[cfg(not(feature = "cluster"))]
            Mode::Cluster => return Err(crate::config::missing_feature("redis.mode", "cluster")),
            #[cfg(feature = "cluster")]
            Mode::Cluster => {
                let builder = access.cluster_builder(s)?;
                let client = builder
                    .build()
                    .map_err(|e| Error::redis_op(format!("redis.nodes {:?}", access.seeds), e))?;
                let conn = client.get_async_connection().await.map_err(|e| {
                    access.connect_error(
                        &format!("the Redis Cluster through redis.nodes {:?}", access.seeds),
                        e,
                    )
                })?;
                Kind::Cluster(conn)
            }
        };
        Ok(Conn { kind, access })
    }

    /// The deployment mode.
    pub fn mode(&self) -> Mode {
        match self.kind {
            Kind::Standalone { .. } => Mode::Standalone,
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(_) => Mode::Sentinel,
            #[cfg(feature = "cluster")]
            Kind::Cluster(_) => Mode::Cluster,
        }
    }

    /// `host:port` of the server commands go to, without asking anyone (sentinel: the master
    /// as last resolved); None in cluster mode, where it depends on the key.
    pub fn server(&self) -> Option<String> {
        match &self.kind {
            Kind::Standalone { client, .. } => Some(client_addr(client)),
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(s) => Some(s.current().addr),
            #[cfg(feature = "cluster")]
            Kind::Cluster(_) => None,
        }
    }

    /// The servers that hold data now (standalone: the server; sentinel: the current master,
    /// asked of the sentinels; cluster: every master that serves slots, from `CLUSTER SLOTS`),
    /// as `redis::Client`s with TLS and ACL applied: the node subscribes to expired events on
    /// each and runs `CONFIG` on each.
    pub async fn masters(&self) -> Result<Vec<Client>> {
        match &self.kind {
            Kind::Standalone { client, .. } => Ok(vec![(**client).clone()]),
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(s) => {
                let current = s.resolve(None, true).await?;
                Ok(vec![current.client])
            }
            #[cfg(feature = "cluster")]
            Kind::Cluster(conn) => {
                let slots = cluster_slots(conn).await?;
                let mut seen = Vec::new();
                let mut out = Vec::new();
                for (_, _, host, port) in slots {
                    if !seen.contains(&(host.clone(), port)) {
                        let client = self.access.node_client(&host, port).map_err(|e| {
                            Error::redis_op(format!("client for master {host}:{port}"), e)
                        })?;
                        seen.push((host, port));
                        out.push(client);
                    }
                }
                Ok(out)
            }
        }
    }

    /// Where to subscribe: every server that holds data now (as [`Conn::masters`] lists
    /// them), each with those of `channels` whose slot it serves (standalone and sentinel:
    /// the one server serves them all), as clients speaking RESP3 (shard channels are read
    /// as RESP3 pushes) with TLS and ACL applied.
    pub async fn subscription_targets(
        &self,
        channels: &[String],
    ) -> Result<Vec<(Client, Vec<String>)>> {
        let one = |client: Client| -> Result<Vec<(Client, Vec<String>)>> {
            Ok(vec![(self.resp3(&client)?, channels.to_vec())])
        };
        match &self.kind {
            Kind::Standalone { client, .. } => one((**client).clone()),
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(s) => one(s.resolve(None, true).await?.client),
            #[cfg(feature = "cluster")]
            Kind::Cluster(conn) => {
                let slots = cluster_slots(conn).await?;
                let mut out: Vec<(String, Client, Vec<String>)> = Vec::new();
                for (_, _, host, port) in &slots {
                    let addr = format!("{host}:{port}");
                    if !out.iter().any(|(a, _, _)| *a == addr) {
                        let client = self
                            .access
                            .node_client(host, *port)
                            .map_err(|e| Error::redis_op(format!("client for master {addr}"), e))?;
                        out.push((addr, self.resp3(&client)?, Vec::new()));
                    }
                }
                for channel in channels {
                    let slot = super::keys::slot_of(channel);
                    let (_, _, host, port) = slots
                        .iter()
                        .find(|(start, end, _, _)| (*start..=*end).contains(&slot))
                        .ok_or_else(|| {
                            Error::Setup(format!(
                                "no master serves slot {slot} (of channel '{channel}'): the \
                                 cluster does not cover every slot"
                            ))
                        })?;
                    let addr = format!("{host}:{port}");
                    if let Some((_, _, held)) = out.iter_mut().find(|(a, _, _)| *a == addr) {
                        held.push(channel.clone());
                    }
                }
                Ok(out.into_iter().map(|(_, c, held)| (c, held)).collect())
            }
        }
    }

    /// `client`'s server and settings, speaking RESP3.
    fn resp3(&self, client: &Client) -> Result<Client> {
        let info = client.get_connection_info().clone();
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(redis::ProtocolVersion::RESP3);
        self.access
            .client(info.set_redis_settings(settings))
            .map_err(|e| Error::redis_op(format!("client for {}", client_addr(client)), e))
    }

    /// `WAIT replicas timeout_ms` on the connection to the master serving `key`'s slot: the
    /// writes sent on it so far (a claim just made) reach `replicas` replicas, or the timeout
    /// passes. Returns how many replicas acknowledged.
    pub async fn wait_replicas(&self, key: &str, replicas: u32, timeout_ms: u64) -> Result<u32> {
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(replicas).arg(timeout_ms);
        // One connection, one master: the key picks the master in a cluster only.
        #[cfg(not(feature = "cluster"))]
        let _ = key;
        let acked: i64 = match &self.kind {
            #[cfg(feature = "cluster")]
            Kind::Cluster(conn) => {
                let route = redis::cluster_routing::Route::with_key(
                    key,
                    redis::cluster_routing::SlotAddr::Master,
                );
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
                let v = conn
                    .clone()
                    .route_command(cmd, routing)
                    .await
                    .map_err(|e| Error::redis_op("WAIT", e))?;
                redis::from_redis_value(v)
                    .map_err(|e| Error::redis_op("WAIT", redis::RedisError::from(e)))?
            }
            _ => cmd
                .query_async(&mut self.clone())
                .await
                .map_err(|e| Error::redis_op("WAIT", e))?,
        };
        Ok(acked.max(0) as u32)
    }

    /// Which master (as `host:port`) serves each of `keys`' slots, in order (for reporting the
    /// spread of shards over masters); in standalone and sentinel mode every key maps to the
    /// one master.
    pub async fn master_of_keys(&self, keys: &[String]) -> Result<Vec<String>> {
        let one = |addr: String| vec![addr; keys.len()];
        match &self.kind {
            Kind::Standalone { client, .. } => Ok(one(client_addr(client))),
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(s) => Ok(one(s.current().addr)),
            #[cfg(feature = "cluster")]
            Kind::Cluster(conn) => {
                let slots = cluster_slots(conn).await?;
                keys.iter()
                    .map(|key| {
                        let slot = super::keys::slot_of(key);
                        slots
                            .iter()
                            .find(|(start, end, _, _)| (*start..=*end).contains(&slot))
                            .map(|(_, _, host, port)| format!("{host}:{port}"))
                            .ok_or_else(|| {
                                Error::Setup(format!(
                                    "no master serves slot {slot} (of key '{key}'): the cluster \
                                     does not cover every slot"
                                ))
                            })
                    })
                    .collect()
            }
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.kind {
            Kind::Standalone { manager, .. } => manager.req_packed_command(cmd),
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(s) => s.req_packed_command(cmd),
            #[cfg(feature = "cluster")]
            Kind::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.kind {
            Kind::Standalone { manager, .. } => {
                manager.req_packed_commands(pipeline, offset, count)
            }
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(s) => s.req_packed_commands(pipeline, offset, count),
            #[cfg(feature = "cluster")]
            Kind::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.kind {
            Kind::Standalone { manager, .. } => manager.get_db(),
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(s) => s.current().manager.get_db(),
            #[cfg(feature = "cluster")]
            Kind::Cluster(c) => c.get_db(),
        }
    }
}

/// One plain connection attempt and a PING, so that a refused login or a TLS failure is
/// reported at once; the `ConnectionManager` would retry those with growing pauses (seconds). A server
/// that is not up yet (refused, timed out) is left to the manager's retries.
async fn probe(client: &Client) -> RedisResult<()> {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECTION_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT));
    let transient =
        |e: &RedisError| e.is_connection_refusal() || e.is_timeout() || e.is_connection_dropped();
    let mut conn = match client
        .get_multiplexed_async_connection_with_config(&config)
        .await
    {
        Ok(conn) => conn,
        Err(e) if transient(&e) => return Ok(()),
        Err(e) => return Err(e),
    };
    // Without AUTH (or when the default user is off) the connection opens and the first
    // command fails with NOAUTH.
    match redis::cmd("PING").query_async::<()>(&mut conn).await {
        Err(e) if !transient(&e) => Err(e),
        _ => Ok(()),
    }
}

fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_connection_timeout(Some(CONNECTION_TIMEOUT))
}
