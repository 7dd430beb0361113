//! Read-only diagnostics of the Redis keyfire uses, for tools such as `keyfire doctor`.
//!
//! - [`Server`] and [`ServerConn`]: one server reached directly: `PING`, `INFO`, `CONFIG GET`,
//!   `TIME`, and the expired-events probe.
//! - [`Deployment`]: the deployment reached as a node reaches it (standalone, Sentinel or
//!   Cluster): its masters, which master holds each shard, and the probe keys for each.
//! - [`Data`]: keyfire's data under a prefix: the stored key layout and shard count, the jobs,
//!   and whether the Redis user may run what keyfire needs ([`Data::acl_denied`]).
//! - [`sentinel_master`]: what one sentinel names as the master.
//!
//! The figures a running cluster's API shows (totals, live nodes, memory) are
//! [`crate::Client`] methods; their types live here.
//!
//! Nothing here changes keyfire's data: the reads are plain commands, and the probes touch
//! keys of their own only (the expired-events probe key, expired or deleted at once; the ACL
//! probe deletes a key that does not exist).

use std::collections::BTreeMap;
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, Pipeline, RedisFuture, Value};

use crate::config::RedisSettings;
use crate::error::{Error, Result};
use crate::store::{Conn, Keys, Shards, client_addr};

pub use crate::store::notify::{PROBE_BOUND, has_expired_events, probe_key};
pub use crate::store::{
    LAYOUT_VERSION, LAYOUTS_UNDERSTOOD, LiveNode, ServerMemory, Totals, parse_info, redact_url,
};

/// The key that holds the key-layout version of the data under `prefix` (for messages).
pub fn layout_key(prefix: &str) -> String {
    Keys::new(prefix).layout()
}

/// The key that holds the shard count the data under `prefix` was written with (for
/// messages).
pub fn shard_count_key(prefix: &str) -> String {
    Keys::new(prefix).shard_count()
}

/// One Redis server, reached directly (not through a cluster's routing).
#[derive(Clone)]
pub struct Server {
    client: redis::Client,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr())
            .finish()
    }
}

impl Server {
    /// The server at `url`, with the URL's own credentials and TLS (`rediss://`).
    pub fn open(url: &str) -> Result<Self> {
        let client = redis::Client::open(url)
            .map_err(|e| Error::redis_op(format!("the Redis URL {}", redact_url(url)), e))?;
        Ok(Self { client })
    }

    /// The server at `url`, with the credentials (which override the URL's) and TLS of `s`, as
    /// a node's own connections have them.
    pub fn with_settings(url: &str, s: &RedisSettings) -> Result<Self> {
        Ok(Self {
            client: crate::store::data_client(url, s)?,
        })
    }

    /// `host:port` of the server (the socket path for a unix socket).
    pub fn addr(&self) -> String {
        client_addr(&self.client)
    }

    /// Open a connection (no command is sent: [`ServerConn::ping`] tells whether the server
    /// accepts the login).
    pub async fn connect(&self) -> Result<ServerConn> {
        let conn = self
            .client
            .get_multiplexed_async_connection()
            .await
            .map_err(Error::from)?;
        Ok(ServerConn { conn })
    }

    /// Probe the server's expired key events as a node does where `CONFIG` is unavailable:
    /// subscribe to them, write `key` with a 1 ms TTL, and wait up to `bound` for its event.
    /// `Some(elapsed)` when it came, `None` when it did not (the key is deleted then).
    pub async fn probe_expired_events(
        &self,
        key: &str,
        bound: Duration,
    ) -> Result<Option<Duration>> {
        crate::store::notify::probe_expired_events(&self.client, key, bound).await
    }
}

/// An open connection to one [`Server`]. Cheap to clone: clones share it.
#[derive(Clone)]
pub struct ServerConn {
    conn: MultiplexedConnection,
}

impl std::fmt::Debug for ServerConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConn").finish_non_exhaustive()
    }
}

impl ServerConn {
    /// The server answers `PING` (a wrong password or a protected-mode refusal shows here).
    pub async fn ping(&mut self) -> Result<()> {
        let _: String = redis::cmd("PING").query_async(&mut self.conn).await?;
        Ok(())
    }

    /// The fields of `INFO` (its default sections), by name.
    pub async fn info(&mut self) -> Result<BTreeMap<String, String>> {
        let text: String = redis::cmd("INFO").query_async(&mut self.conn).await?;
        Ok(parse_info(&text))
    }

    /// The value of one setting by `CONFIG GET`; `None` when the server answers no value
    /// (some managed services do for what they do not expose). An error where `CONFIG` is
    /// refused (renamed away, or denied by an ACL).
    pub async fn config_get(&mut self, name: &str) -> Result<Option<String>> {
        let pairs: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query_async(&mut self.conn)
            .await?;
        Ok(pairs.into_iter().nth(1))
    }

    /// Redis's clock (`TIME`), since the Unix epoch, to the microsecond.
    pub async fn time(&mut self) -> Result<Duration> {
        let (s, us): (u64, u32) = redis::cmd("TIME").query_async(&mut self.conn).await?;
        Ok(Duration::new(s, us.saturating_mul(1000).min(999_999_999)))
    }

    /// keyfire's data under `prefix`, read on this server.
    pub fn data(&self, prefix: &str) -> Data {
        Data {
            link: Link::Server(self.conn.clone()),
            prefix: prefix.to_string(),
        }
    }
}

/// A deployment reached as a node reaches it, as `redis.mode` says: the server at
/// `redis.url`, the master found through the sentinels, or a Redis Cluster.
#[derive(Clone, Debug)]
pub struct Deployment {
    conn: Conn,
}

impl Deployment {
    /// Connect as `s` says (mode, addresses, credentials, TLS).
    pub async fn connect(s: &RedisSettings) -> Result<Self> {
        Ok(Self {
            conn: Conn::connect(s).await?,
        })
    }

    /// The servers that hold data now: the server; the master the sentinels name; every
    /// master that serves slots of the cluster. With the settings' credentials and TLS.
    pub async fn masters(&self) -> Result<Vec<Server>> {
        Ok(self
            .conn
            .masters()
            .await?
            .into_iter()
            .map(|client| Server { client })
            .collect())
    }

    /// Which master (`host:port`) holds each of the `shards` shards under `prefix`, in shard
    /// order; in standalone and sentinel mode, the one master for each.
    pub async fn shard_masters(&self, prefix: &str, shards: usize) -> Result<Vec<String>> {
        let keys: Vec<String> = Shards::new(prefix, shards).iter().map(Keys::jobs).collect();
        self.conn.master_of_keys(&keys).await
    }

    /// The master (`host:port`) that holds the meta keys under `prefix`: membership, the
    /// layout version, the change channel.
    pub async fn meta_master(&self, prefix: &str) -> Result<Option<String>> {
        let owner = self.conn.master_of_keys(&[layout_key(prefix)]).await?;
        Ok(owner.into_iter().next())
    }

    /// A key for the expired-events probe of each of `masters` under `prefix`: one whose
    /// slot that master serves (events are local to the server that expires the key); `None`
    /// for a master no candidate key falls on.
    pub async fn probe_keys(
        &self,
        prefix: &str,
        masters: &[Server],
    ) -> Result<Vec<Option<String>>> {
        let clients: Vec<redis::Client> = masters.iter().map(|m| m.client.clone()).collect();
        crate::store::notify::probe_keys(&self.conn, prefix, &clients).await
    }

    /// keyfire's data under `prefix`, each key read on the master that holds it.
    pub fn data(&self, prefix: &str) -> Data {
        Data {
            link: Link::Routed(self.conn.clone()),
            prefix: prefix.to_string(),
        }
    }
}

/// Ask the sentinel at `node` (a URL, or `host:port`) which server is the master of
/// `s.sentinel_master`: its `host:port`, or `None` when it monitors no master of that name. A
/// sentinel's credentials come from its URL, not from `redis.username` and `redis.password`;
/// TLS as `s` says.
pub async fn sentinel_master(node: &str, s: &RedisSettings) -> Result<Option<String>> {
    let url = if node.contains("://") {
        node.to_string()
    } else {
        format!("redis://{node}")
    };
    let client = crate::store::sentinel_client(url.as_str(), s)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
        .arg("get-master-addr-by-name")
        .arg(&s.sentinel_master)
        .query_async(&mut conn)
        .await?;
    Ok(addr.map(|(host, port)| format!("{host}:{port}")))
}

/// The key-layout keys under a prefix as stored, for a tool to judge.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredLayout {
    /// The layout version key's value; `None` when there is no such key (no data yet).
    pub version: Option<String>,
    /// The stored shard count (layout 2); `None` when absent.
    pub shards: Option<String>,
}

/// keyfire's data under one prefix: from [`ServerConn::data`] or [`Deployment::data`].
#[derive(Clone)]
pub struct Data {
    link: Link,
    prefix: String,
}

impl std::fmt::Debug for Data {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Data")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl Data {
    /// The last data loss a node noticed under the prefix, within the hour it is kept
    /// (`at` ms, `node`, `detail`), if any.
    pub async fn data_loss(&self) -> Result<Option<crate::DataLoss>> {
        let keys = Keys::new(&self.prefix);
        let fields: std::collections::HashMap<String, String> = redis::cmd("HGETALL")
            .arg(keys.data_loss())
            .query_async(&mut self.link.clone())
            .await?;
        Ok(fields
            .get("at")
            .and_then(|at| at.parse().ok())
            .map(|at_ms| crate::DataLoss {
                at_ms,
                node: fields.get("node").cloned().unwrap_or_default(),
                detail: fields.get("detail").cloned().unwrap_or_default(),
            }))
    }

    /// The layout version and the shard count as stored.
    pub async fn layout(&self) -> Result<StoredLayout> {
        let keys = Keys::new(&self.prefix);
        let mut conn = self.link.clone();
        let version: Option<String> = redis::cmd("GET")
            .arg(keys.layout())
            .query_async(&mut conn)
            .await?;
        let shards: Option<String> = redis::cmd("GET")
            .arg(keys.shard_count())
            .query_async(&mut conn)
            .await?;
        Ok(StoredLayout { version, shards })
    }

    /// The jobs stored over `shards` shards (the count the data was written with): each
    /// shard's job index, plus its one-shot tasks stored compact.
    pub async fn job_count(&self, shards: usize) -> Result<u64> {
        let mut conn = self.link.clone();
        let mut jobs = 0;
        for shard in Shards::new(&self.prefix, shards.max(1)).iter() {
            let (n, compact): (u64, Option<i64>) = redis::pipe()
                .zcard(shard.jobs())
                .get(shard.task_count())
                .query_async(&mut conn)
                .await?;
            jobs += n + compact.unwrap_or(0).max(0) as u64;
        }
        Ok(jobs)
    }

    /// Probe, without changing anything, whether the connected user may run what keyfire
    /// needs on the keys and channels of the prefix: read and write a key of the meta tag and
    /// of another shard's tag, load and run scripts, publish on its channels, read the clock.
    /// Returns each probe refused with `NOPERM`, named (`EXISTS {keyfire}:doctor:probe`);
    /// other failures are not refusals and are not reported.
    pub async fn acl_denied(&self) -> Vec<String> {
        let prefix = &self.prefix;
        let meta = format!("{{{prefix}}}:doctor:probe");
        let shard = format!("{{{prefix}:1}}:doctor:probe");
        let no_script = "0".repeat(40);
        let probes: Vec<(String, Cmd)> = vec![
            (
                format!("EXISTS {meta}"),
                redis::cmd("EXISTS").arg(&meta).clone(),
            ),
            (format!("DEL {meta}"), redis::cmd("DEL").arg(&meta).clone()),
            (
                format!("EXISTS {shard}"),
                redis::cmd("EXISTS").arg(&shard).clone(),
            ),
            (
                format!("DEL {shard}"),
                redis::cmd("DEL").arg(&shard).clone(),
            ),
            (
                format!("EVALSHA ... 1 {meta}"),
                redis::cmd("EVALSHA")
                    .arg(&no_script)
                    .arg(1)
                    .arg(&meta)
                    .clone(),
            ),
            (
                "SCRIPT LOAD".to_string(),
                redis::cmd("SCRIPT").arg("LOAD").arg("return 0").clone(),
            ),
            (
                format!("SPUBLISH {shard}"),
                redis::cmd("SPUBLISH").arg(&shard).arg("").clone(),
            ),
            ("TIME".to_string(), redis::cmd("TIME").clone()),
        ];
        let mut conn = self.link.clone();
        let mut denied = Vec::new();
        for (name, cmd) in probes {
            if let Err(e) = cmd.query_async::<Value>(&mut conn).await
                && (e.code() == Some("NOPERM") || e.to_string().contains("NOPERM"))
            {
                denied.push(name);
            }
        }
        denied
    }
}

/// A connection to one server, or one that routes each key to its master.
#[derive(Clone)]
enum Link {
    Server(MultiplexedConnection),
    Routed(Conn),
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Link::Server(c) => c.req_packed_command(cmd),
            Link::Routed(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Link::Server(c) => c.req_packed_commands(pipeline, offset, count),
            Link::Routed(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Link::Server(c) => c.get_db(),
            Link::Routed(c) => c.get_db(),
        }
    }
}
