//! One connection handle for every Redis deployment: a standalone server, a master found
//! through Sentinel, or a Redis Cluster; with the ACL credentials and TLS of the settings
//! applied to every connection.
//!
//! [`Conn`] implements [`redis::aio::ConnectionLike`], so commands, pipelines and
//! `Script::invoke_async` run on it as on a `ConnectionManager`. In cluster mode a pipeline
//! or a script must keep its keys in one slot (one hash tag), as keyfire's keys do.

use std::sync::Arc;
#[cfg(feature = "sentinel")]
use std::sync::RwLock;
use std::time::Duration;
#[cfg(feature = "sentinel")]
use std::time::Instant;

#[cfg(feature = "sentinel")]
use redis::ServerErrorKind;
#[cfg(feature = "tls")]
use redis::TlsCertificates;
#[cfg(all(feature = "tls", any(feature = "cluster", feature = "sentinel")))]
use redis::TlsMode;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
#[cfg(feature = "cluster")]
use redis::cluster::ClusterClientBuilder;
#[cfg(feature = "cluster")]
use redis::cluster_async::ClusterConnection;
#[cfg(feature = "cluster")]
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
#[cfg(feature = "sentinel")]
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    Client, Cmd, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisError, RedisFuture,
    RedisResult, Value,
};

pub use crate::config::RedisMode as Mode;
use crate::config::RedisSettings;
#[cfg(feature = "sentinel")]
use crate::config::node_addr;
use crate::error::{Error, Result};

/// Longest wait for one reply from Redis. redis-rs's default (500 ms) turned slow replies to
/// big pipelines and batch scripts into errors, and lease renewals into takeovers.
pub(super) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest wait to open one connection.
pub(super) const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);

/// Sentinel mode: after asking the sentinels, wait at least this long before asking again
/// (every failing command would otherwise ask them).
#[cfg(feature = "sentinel")]
const MIN_RESOLVE_INTERVAL: Duration = Duration::from_millis(200);

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
    Sentinel(SentinelConn),
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
            Mode::Sentinel => Kind::Sentinel(SentinelConn::connect(s, access.clone()).await?),
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

/// `host:port` of a client's server (the socket path for a unix socket).
pub fn client_addr(client: &Client) -> String {
    match client.get_connection_info().addr() {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            format!("{host}:{port}")
        }
        ConnectionAddr::Unix(path) => path.display().to_string(),
        other => format!("{other:?}"),
    }
}

/// A Redis URL fit for messages and logs: `redis://user:secret@host/0` →
/// `redis://user:***@host/0`. A URL that does not parse as a Redis URL keeps nothing of its
/// user part (`scheme://***@host/…`), so a malformed one cannot leak a secret either.
pub fn redact_url(url: &str) -> String {
    match redis::parse_redis_url(url) {
        Some(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        Some(_) => url.to_string(),
        None => {
            let Some((scheme, rest)) = url.split_once("://") else {
                return url.to_string();
            };
            let end = rest.find('/').unwrap_or(rest.len());
            let (authority, path) = rest.split_at(end);
            match authority.rsplit_once('@') {
                Some((_, host)) => format!("{scheme}://***@{host}{path}"),
                None => url.to_string(),
            }
        }
    }
}

/// `CLUSTER SLOTS` as (first slot, last slot, master host, master port), asked of any node
/// (tried a few times: a node may be down while the cluster fails over).
#[cfg(feature = "cluster")]
async fn cluster_slots(conn: &ClusterConnection) -> Result<Vec<(u16, u16, String, u16)>> {
    let mut last = None;
    for attempt in 0..5 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
        }
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SLOTS");
        let routing = RoutingInfo::SingleNode(if attempt % 2 == 0 {
            SingleNodeRoutingInfo::RandomPrimary
        } else {
            SingleNodeRoutingInfo::Random
        });
        match conn.clone().route_command(cmd, routing).await {
            Ok(v) => return parse_cluster_slots(&v),
            Err(e) => last = Some(e),
        }
    }
    Err(Error::redis_op(
        "reading the cluster's masters (CLUSTER SLOTS)",
        // infallible: the loop above made five attempts, and each failed one set `last`.
        last.expect("at least one attempt"),
    ))
}

/// A `CLUSTER SLOTS` reply as (first slot, last slot, master host, master port), one per slot
/// range in the reply's order; an error when the reply has another shape or a master has no
/// address.
pub fn parse_cluster_slots(v: &Value) -> Result<Vec<(u16, u16, String, u16)>> {
    let bad = || Error::Corrupt(format!("unexpected CLUSTER SLOTS reply: {v:?}"));
    let Value::Array(ranges) = v else {
        return Err(bad());
    };
    let int = |v: &Value| match v {
        Value::Int(n) => u16::try_from(*n).ok(),
        _ => None,
    };
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    ranges
        .iter()
        .map(|range| {
            let Value::Array(items) = range else {
                return Err(bad());
            };
            let (Some(start), Some(end), Some(Value::Array(master))) = (
                items.first().and_then(int),
                items.get(1).and_then(int),
                items.get(2),
            ) else {
                return Err(bad());
            };
            let host = master.first().and_then(text).ok_or_else(bad)?;
            let port = master.get(1).and_then(int).ok_or_else(bad)?;
            if host.is_empty() || host == "?" {
                return Err(Error::Setup(format!(
                    "CLUSTER SLOTS names no address for the master of slots {start}-{end}"
                )));
            }
            Ok((start, end, host, port))
        })
        .collect()
}

/// A client for one data server at `target`, with the settings' credentials (which override
/// the URL's) and TLS, as the store's own connections have them.
pub fn data_client(target: impl IntoConnectionInfo, s: &RedisSettings) -> Result<Client> {
    let access = Access::from_settings(s)?;
    access
        .client(target)
        .map_err(|e| Error::redis_op("a client for a data server", e))
}

/// A client for a sentinel at `target`: the settings' TLS, credentials from its own URL (a
/// sentinel's credentials are not the data servers').
pub fn sentinel_client(target: impl IntoConnectionInfo, s: &RedisSettings) -> Result<Client> {
    let mut access = Access::from_settings(s)?;
    access.username = None;
    access.password = None;
    access
        .client(target)
        .map_err(|e| Error::redis_op("a client for a sentinel", e))
}

/// Credentials and TLS applied to every connection to a data server.
struct Access {
    username: Option<String>,
    password: Option<String>,
    tls: Option<Tls>,
    /// Sentinel or cluster addresses, for messages.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    seeds: Vec<String>,
}

struct Tls {
    insecure: bool,
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    ca_pem: Option<Vec<u8>>,
}

impl Access {
    fn from_settings(s: &RedisSettings) -> Result<Self> {
        let tls = if s.tls {
            // redis-rs builds its rustls configuration on the process-wide crypto provider.
            // The caller chooses it by installing one before connecting; without one, ring
            // (the provider keyfire builds rustls with) is installed here, as rustls itself
            // would on first use.
            #[cfg(feature = "tls")]
            if rustls::crypto::CryptoProvider::get_default().is_none() {
                let _ = rustls::crypto::ring::default_provider().install_default();
            }
            let ca_pem = match &s.tls_ca {
                Some(path) => Some(std::fs::read(path).map_err(|e| {
                    Error::Config(format!("redis.tls_ca: cannot read {}: {e}", path.display()))
                })?),
                None => None,
            };
            Some(Tls {
                insecure: s.tls_insecure,
                ca_pem,
            })
        } else {
            None
        };
        Ok(Self {
            username: s.username.clone(),
            password: s.password.clone(),
            tls,
            seeds: s.nodes.iter().map(|n| redact_url(n)).collect(),
        })
    }

    #[cfg(feature = "tls")]
    fn certs(&self) -> Option<TlsCertificates> {
        let tls = self.tls.as_ref()?;
        // Verification off: no roots needed (and a CA would turn verification back on).
        if tls.insecure {
            return None;
        }
        tls.ca_pem.as_ref().map(|pem| TlsCertificates {
            client_tls: None,
            root_cert: Some(pem.clone()),
        })
    }

    #[cfg(all(feature = "tls", any(feature = "cluster", feature = "sentinel")))]
    fn tls_mode(&self) -> Option<TlsMode> {
        self.tls.as_ref().map(|t| {
            if t.insecure {
                TlsMode::Insecure
            } else {
                TlsMode::Secure
            }
        })
    }

    /// A client for `target` (a URL or a `ConnectionInfo`) with the credentials and TLS applied.
    fn client(&self, target: impl IntoConnectionInfo) -> RedisResult<Client> {
        let info = self.apply(target.into_connection_info()?);
        #[cfg(feature = "tls")]
        if matches!(info.addr(), ConnectionAddr::TcpTls { .. })
            && let Some(certs) = self.certs()
        {
            return Client::build_with_tls(info, certs);
        }
        Client::open(info)
    }

    /// A client for one data node.
    #[cfg(feature = "cluster")]
    fn node_client(&self, host: &str, port: u16) -> RedisResult<Client> {
        self.client(ConnectionAddr::Tcp(host.to_string(), port))
    }

    /// `info` with the settings' credentials and, when `redis.tls` is on, a TLS address.
    fn apply(&self, info: ConnectionInfo) -> ConnectionInfo {
        let mut redis_info = info.redis_settings().clone();
        if let Some(user) = &self.username {
            redis_info = redis_info.set_username(user);
        }
        if let Some(password) = &self.password {
            redis_info = redis_info.set_password(password);
        }
        let addr = match (info.addr().clone(), &self.tls) {
            (ConnectionAddr::Tcp(host, port), Some(tls)) => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: tls.insecure,
                tls_params: None,
            },
            (
                ConnectionAddr::TcpTls {
                    host,
                    port,
                    insecure,
                    ..
                },
                Some(tls),
            ) => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: insecure || tls.insecure,
                tls_params: None,
            },
            (addr, _) => addr,
        };
        info.set_addr(addr).set_redis_settings(redis_info)
    }

    #[cfg(feature = "cluster")]
    fn cluster_builder(&self, s: &RedisSettings) -> Result<ClusterClientBuilder> {
        let seeds = s
            .nodes
            .iter()
            .map(|node| {
                let url = if node.contains("://") {
                    node.clone()
                } else {
                    format!("redis://{node}")
                };
                url.as_str()
                    .into_connection_info()
                    .map(|info| self.apply(info))
                    .map_err(|e| Error::redis_op(format!("redis.nodes: '{}'", redact_url(node)), e))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut b = ClusterClientBuilder::new(seeds)
            .response_timeout(RESPONSE_TIMEOUT)
            .connection_timeout(CONNECTION_TIMEOUT)
            // Follow a failover: while a master is down and until a replica takes over (a few
            // node timeouts), retry every few hundred ms, refreshing the slot map on
            // connection errors, MOVED and READONLY, within the overall response timeout.
            .retries(30)
            .min_retry_wait(50)
            .max_retry_wait(500)
            .retry_wait_formula(50, 2);
        if let Some(user) = &self.username {
            b = b.username(user);
        }
        if let Some(password) = &self.password {
            b = b.password(password);
        }
        #[cfg(feature = "tls")]
        if let Some(mode) = self.tls_mode() {
            b = b.tls(mode);
        }
        #[cfg(feature = "tls")]
        if let Some(certs) = self.certs() {
            b = b.certs(certs);
        }
        Ok(b)
    }

    fn connect_error(&self, target: &str, e: RedisError) -> Error {
        let who = match &self.username {
            Some(user) => format!(" as user '{user}'"),
            None if self.password.is_some() => " with redis.password".to_string(),
            None => String::new(),
        };
        let hint = match e.kind() {
            redis::ErrorKind::AuthenticationFailed => {
                " (check redis.username and redis.password, or the URL's credentials)"
            }
            _ if e.code() == Some("WRONGPASS") || e.code() == Some("NOAUTH") => {
                " (check redis.username and redis.password, or the URL's credentials)"
            }
            _ => "",
        };
        Error::redis_op(format!("connecting to {target}{who}{hint}"), e)
    }
}

#[cfg(feature = "sentinel")]
/// Sentinel mode: a connection to the master the sentinels name, re-resolved on failover.
///
/// Clones share the connection: when one clone finds the master moved, all use the new one.
#[derive(Clone)]
pub(super) struct SentinelConn(Arc<SentinelShared>);

#[cfg(feature = "sentinel")]
struct SentinelShared {
    /// The sentinels; one lookup at a time.
    resolver: tokio::sync::Mutex<Resolver>,
    current: RwLock<Master>,
    service: String,
    access: Arc<Access>,
}

#[cfg(feature = "sentinel")]
struct Resolver {
    client: SentinelClient,
    last: Option<Instant>,
}

#[cfg(feature = "sentinel")]
/// The master in use.
#[derive(Clone)]
struct Master {
    manager: ConnectionManager,
    client: Client,
    addr: String,
    /// Bumped at each switch, so a caller can tell whether someone switched already.
    generation: u64,
}

#[cfg(feature = "sentinel")]
impl SentinelConn {
    async fn connect(s: &RedisSettings, access: Arc<Access>) -> Result<Self> {
        let mut sentinels = Vec::new();
        let mut sentinel_user = None;
        let mut sentinel_password = None;
        for node in &s.nodes {
            let (host, port) = node_addr(node).ok_or_else(|| {
                Error::Config(format!(
                    "redis.nodes: '{}' is not an address",
                    redact_url(node)
                ))
            })?;
            // A sentinel's own credentials come from its URL, not from redis.username and
            // redis.password (which are the data servers').
            if let Some(u) = redis::parse_redis_url(&with_scheme(node)) {
                if !u.username().is_empty() && sentinel_user.is_none() {
                    sentinel_user = Some(u.username().to_string());
                }
                if let Some(p) = u.password()
                    && sentinel_password.is_none()
                {
                    sentinel_password = Some(p.to_string());
                }
            }
            sentinels.push(match &access.tls {
                Some(tls) => ConnectionAddr::TcpTls {
                    host,
                    port,
                    insecure: tls.insecure,
                    tls_params: None,
                },
                None => ConnectionAddr::Tcp(host, port),
            });
        }
        let mut b = SentinelClientBuilder::new(
            sentinels,
            s.sentinel_master.clone(),
            SentinelServerType::Master,
        )
        .map_err(|e| Error::redis_op("redis.nodes (sentinels)", e))?;
        if let Some(user) = &access.username {
            b = b.set_client_to_redis_username(user);
        }
        if let Some(password) = &access.password {
            b = b.set_client_to_redis_password(password);
        }
        if let Some(user) = sentinel_user {
            b = b.set_client_to_sentinel_username(user);
        }
        if let Some(password) = sentinel_password {
            b = b.set_client_to_sentinel_password(password);
        }
        #[cfg(feature = "tls")]
        if let Some(mode) = access.tls_mode() {
            b = b
                .set_client_to_redis_tls_mode(mode)
                .set_client_to_sentinel_tls_mode(mode);
        }
        #[cfg(feature = "tls")]
        if let Some(certs) = access.certs() {
            b = b
                .set_client_to_redis_certificates(certs.clone())
                .set_client_to_sentinel_certificates(certs);
        }
        let mut client = b
            .build()
            .map_err(|e| Error::redis_op("redis.nodes (sentinels)", e))?;
        let what = format!(
            "master '{}' through the sentinels {:?}",
            s.sentinel_master, access.seeds
        );
        let (master_client, manager) = open_master(&mut client)
            .await
            .map_err(|e| access.connect_error(&what, e))?;
        let addr = client_addr(&master_client);
        tracing::debug!(master = %addr, service = %s.sentinel_master, "sentinel: connected to the master");
        Ok(Self(Arc::new(SentinelShared {
            resolver: tokio::sync::Mutex::new(Resolver {
                client,
                last: Some(Instant::now()),
            }),
            current: RwLock::new(Master {
                manager,
                client: master_client,
                addr,
                generation: 0,
            }),
            service: s.sentinel_master.clone(),
            access,
        })))
    }

    fn current(&self) -> Master {
        self.0
            .current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Ask the sentinels for the master and switch to it if it moved. `seen`: the generation
    /// the caller failed on (when someone switched since, that switch is the answer);
    /// `force`: ask even if the sentinels were asked a moment ago.
    async fn resolve(&self, seen: Option<u64>, force: bool) -> Result<Master> {
        let shared = &self.0;
        let mut resolver = shared.resolver.lock().await;
        let current = self.current();
        if seen.is_some_and(|g| g != current.generation) {
            return Ok(current);
        }
        if !force
            && resolver
                .last
                .is_some_and(|t| t.elapsed() < MIN_RESOLVE_INTERVAL)
        {
            return Ok(current);
        }
        resolver.last = Some(Instant::now());
        let what = format!(
            "asking the sentinels {:?} for master '{}'",
            shared.access.seeds, shared.service
        );
        let client = tokio::time::timeout(RESPONSE_TIMEOUT, resolver.client.async_get_client())
            .await
            .map_err(|_| {
                Error::redis_op(
                    what.clone(),
                    RedisError::from(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "no answer in time",
                    )),
                )
            })?
            .map_err(|e| Error::redis_op(what, e))?;
        let addr = client_addr(&client);
        if addr == current.addr {
            return Ok(current);
        }
        let manager = client
            .get_connection_manager_with_config(sentinel_manager_config())
            .await
            .map_err(|e| {
                shared
                    .access
                    .connect_error(&format!("new master {addr}"), e)
            })?;
        tracing::warn!(
            service = %shared.service,
            from = %current.addr,
            to = %addr,
            "sentinel failover: the master moved; following it"
        );
        let next = Master {
            manager,
            client,
            addr,
            generation: current.generation + 1,
        };
        *shared.current.write().unwrap_or_else(|e| e.into_inner()) = next.clone();
        Ok(next)
    }

    /// After `err` on the master of generation `seen`: when it may mean the master moved,
    /// ask the sentinels; returns the master to retry on when the command was surely not
    /// executed and there is a new master.
    async fn after_error(&self, err: &RedisError, seen: u64) -> Option<Master> {
        if !may_have_moved(err) {
            return None;
        }
        match self.resolve(Some(seen), false).await {
            Ok(master) if master.generation != seen && not_executed(err) => Some(master),
            Ok(_) => None,
            Err(e) => {
                tracing::debug!(error = %e, "sentinel: master lookup failed");
                None
            }
        }
    }

    async fn command(&self, cmd: &Cmd) -> RedisResult<Value> {
        let master = self.current();
        match master.manager.clone().send_packed_command(cmd).await {
            Err(e) => match self.after_error(&e, master.generation).await {
                Some(next) => next.manager.clone().send_packed_command(cmd).await,
                None => Err(e),
            },
            ok => ok,
        }
    }

    async fn commands(
        &self,
        pipeline: &redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let master = self.current();
        match master
            .manager
            .clone()
            .send_packed_commands(pipeline, offset, count)
            .await
        {
            Err(e) => match self.after_error(&e, master.generation).await {
                Some(next) => {
                    next.manager
                        .clone()
                        .send_packed_commands(pipeline, offset, count)
                        .await
                }
                None => Err(e),
            },
            ok => ok,
        }
    }
}

#[cfg(feature = "sentinel")]
impl ConnectionLike for SentinelConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(self.command(cmd))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(self.commands(pipeline, offset, count))
    }

    fn get_db(&self) -> i64 {
        self.current().manager.get_db()
    }
}

#[cfg(feature = "sentinel")]
/// Sentinel mode: a dead master should surface fast (so the sentinels are asked), not after
/// the default six reconnect attempts with growing pauses.
fn sentinel_manager_config() -> ConnectionManagerConfig {
    manager_config()
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(200))
}

#[cfg(feature = "sentinel")]
async fn open_master(client: &mut SentinelClient) -> RedisResult<(Client, ConnectionManager)> {
    let master = tokio::time::timeout(RESPONSE_TIMEOUT, client.async_get_client())
        .await
        .map_err(|_| {
            RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the sentinels did not answer in time",
            ))
        })??;
    let manager = master
        .get_connection_manager_with_config(sentinel_manager_config())
        .await?;
    Ok((master, manager))
}

#[cfg(feature = "sentinel")]
fn with_scheme(node: &str) -> String {
    if node.contains("://") {
        node.to_string()
    } else {
        format!("redis://{node}")
    }
}

#[cfg(feature = "sentinel")]
/// Errors after which the master may have moved: the connection failed, or the server says
/// it is no longer a writable master.
fn may_have_moved(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_refusal()
        || e.is_connection_dropped()
        || e.is_timeout()
        || not_executed(e)
}

#[cfg(feature = "sentinel")]
/// Errors that mean the command was not executed, so it may be sent again to a new master:
/// no connection could be made, or the server refused it as a replica (`READONLY`) or as a
/// master without its replicas (`MASTERDOWN`).
fn not_executed(e: &RedisError) -> bool {
    e.is_connection_refusal()
        || matches!(
            e.kind(),
            redis::ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(feature = "cluster")]
    #[test]
    fn key_slots_match_redis_rs() {
        use redis::cluster_routing::Slot;
        // keys::slot_of (the crc16 crate) against redis-rs's own slot computation.
        for key in [
            "a",
            "{kf:3}:due",
            "x{}y",
            "{{a}}",
            "plain",
            "",
            "foo",
            "123456789",
        ] {
            assert_eq!(
                Slot::new(super::super::keys::slot_of(key)),
                Some(Slot::for_key(key)),
                "{key}"
            );
        }
    }

    #[test]
    fn cluster_slots_reply_parses() {
        let node = |host: &str, port: i64| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
                Value::Array(vec![]),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("127.0.0.1", 7000),
                node("127.0.0.1", 7003),
            ]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(16383),
                node("10.0.0.2", 7001),
            ]),
        ]);
        let slots = parse_cluster_slots(&reply).unwrap();
        assert_eq!(
            slots,
            [
                (0, 5460, "127.0.0.1".to_string(), 7000),
                (5461, 16383, "10.0.0.2".to_string(), 7001)
            ]
        );
        assert!(parse_cluster_slots(&Value::Int(1)).is_err());
    }

    #[test]
    fn credentials_and_tls_apply_to_every_client() {
        let access = Access {
            username: Some("keyfire".into()),
            password: Some("secret".into()),
            tls: Some(Tls {
                insecure: true,
                ca_pem: None,
            }),
            seeds: Vec::new(),
        };
        let client = access.client("redis://other:pw@h:7000/2").unwrap();
        let info = client.get_connection_info();
        assert_eq!(info.redis_settings().username(), Some("keyfire"));
        assert_eq!(info.redis_settings().password(), Some("secret"));
        assert_eq!(info.redis_settings().db(), 2);
        assert!(matches!(
            info.addr(),
            ConnectionAddr::TcpTls {
                insecure: true,
                port: 7000,
                ..
            }
        ));
        let plain = Access {
            username: None,
            password: None,
            tls: None,
            seeds: Vec::new(),
        };
        let client = plain.client("redis://u:pw@h:7000").unwrap();
        assert_eq!(
            client.get_connection_info().redis_settings().password(),
            Some("pw")
        );
        assert!(matches!(
            client.get_connection_info().addr(),
            ConnectionAddr::Tcp(..)
        ));
        assert_eq!(client_addr(&client), "h:7000");
    }

    #[cfg(feature = "sentinel")]
    #[test]
    fn failover_errors_are_told_apart() {
        let refused = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(may_have_moved(&refused) && not_executed(&refused));
        let reset = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(may_have_moved(&reset) && !not_executed(&reset));
        assert_eq!(redact_url("redis://u:pw@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact_url("redis://h:1/0"), "redis://h:1/0");
        assert_eq!(redact_url("bogus://u:pw@h:1/0"), "bogus://***@h:1/0");
    }
}
