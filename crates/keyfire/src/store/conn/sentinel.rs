//! Sentinel mode: [`SentinelConn`], a connection to the master the sentinels name, asked
//! again when an error says the master may have moved, and followed to the new one.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use redis::ServerErrorKind;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{Client, Cmd, ConnectionAddr, RedisError, RedisFuture, RedisResult, Value};

use super::access::{Access, client_addr, redact_url};
use super::{RESPONSE_TIMEOUT, manager_config};
use crate::config::{RedisSettings, node_addr};
use crate::error::{Error, Result};

/// Sentinel mode: after asking the sentinels, wait at least this long before asking again
/// (every failing command would otherwise ask them).
const MIN_RESOLVE_INTERVAL: Duration = Duration::from_millis(200);

/// Sentinel mode: a connection to the master the sentinels name, re-resolved on failover.
///
/// Clones share the connection: when one clone finds the master moved, all use the new one.
#[derive(Clone)]
pub(super) struct SentinelConn(Arc<SentinelShared>);

struct SentinelShared {
    /// The sentinels; one lookup at a time.
    resolver: tokio::sync::Mutex<Resolver>,
    current: RwLock<Master>,
    service: String,
    access: Arc<Access>,
}

struct Resolver {
    client: SentinelClient,
    last: Option<Instant>,
}

/// The master in use.
#[derive(Clone)]
pub(super) struct Master {
    pub(super) manager: ConnectionManager,
    pub(super) client: Client,
    pub(super) addr: String,
    /// Bumped at each switch, so a caller can tell whether someone switched already.
    generation: u64,
}

impl SentinelConn {
    pub(super) async fn connect(s: &RedisSettings, access: Arc<Access>) -> Result<Self> {
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

    pub(super) fn current(&self) -> Master {
        self.0
            .current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Ask the sentinels for the master and switch to it if it moved. `seen`: the generation
    /// the caller failed on (when someone switched since, that switch is the answer);
    /// `force`: ask even if the sentinels were asked a moment ago.
    pub(super) async fn resolve(&self, seen: Option<u64>, force: bool) -> Result<Master> {
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

/// Sentinel mode: a dead master should surface fast (so the sentinels are asked), not after
/// the default six reconnect attempts with growing pauses.
fn sentinel_manager_config() -> ConnectionManagerConfig {
    manager_config()
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(200))
}

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

fn with_scheme(node: &str) -> String {
    if node.contains("://") {
        node.to_string()
    } else {
        format!("redis://{node}")
    }
}

/// Errors after which the master may have moved: the connection failed, or the server says
/// it is no longer a writable master.
fn may_have_moved(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_refusal()
        || e.is_connection_dropped()
        || e.is_timeout()
        || not_executed(e)
}

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
