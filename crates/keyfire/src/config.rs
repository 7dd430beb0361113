//! The library's settings: where Redis is, how a node runs firings, the bounds on input and
//! the built-in handlers. A [`Settings`] is plain data with serde support and defaults: a
//! service fills it in code or deserializes it from its own configuration (the sections and
//! names are those of the `keyfire` server's TOML file: `[redis]`, `[node]`, `[limits]`,
//! `[handlers]`), then calls [`Settings::check`]. The server's own sections (`[api]`, `[log]`,
//! `[[jobs]]`, ...) and its file and `KEYFIRE__` environment loading belong to the `keyfire`
//! binary, not to the library.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// What a node or a client of the library reads from configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    // The server's `ServerSettings` (src/settings.rs) repeats these four fields: serde cannot
    // combine `#[serde(flatten)]` with `deny_unknown_fields`.
    /// Where Redis is and how keyfire uses it.
    pub redis: RedisSettings,
    /// How this node claims and runs firings.
    pub node: NodeSettings,
    /// Bounds on the size of jobs' params and tasks' payloads.
    pub limits: InputLimits,
    /// Settings of the built-in handlers.
    pub handlers: HandlerSettings,
}

/// Settings of the built-in handlers.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HandlerSettings {
    /// The `http` handler.
    pub http: HttpHandlerSettings,
    /// The `command` handler.
    pub command: CommandHandlerSettings,
}

/// The `http` handler: calls a URL, success on 2xx.
#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpHandlerSettings {
    /// Hosts it may call: `example.com`, `*.example.com` (any subdomain), or `*` (any host).
    /// An empty list refuses every call.
    pub allowed_hosts: Vec<String>,
    /// Networks it never connects to, judged on the address a name resolves to (at connect
    /// time, on every redirect), so DNS rebinding and redirects cannot get around it. CIDRs or
    /// single addresses. The default refuses link-local addresses and the cloud metadata
    /// services; private ranges are allowed (add `10.0.0.0/8` etc. to refuse them, or set
    /// `[]` to allow everything).
    pub blocked_networks: Vec<String>,
    /// Refuse calls to the API this process serves, at [`HttpHandlerSettings::own_api`]: its
    /// address and port, or, when it listens on every interface, any local address at that
    /// port.
    pub block_own_api: bool,
    /// The `host:port` of the API this process serves, which `block_own_api` refuses to call.
    /// Not read from configuration: the `keyfire` server sets it from `api.listen` when its
    /// API is enabled; a service that serves an API of its own may set it. None (the
    /// default): no address is refused for being the process's own.
    #[serde(skip)]
    pub own_api: Option<String>,
    /// Signing secrets by target host (patterns as in `allowed_hosts`; the most specific
    /// matching pattern wins): `"orders.internal" = ["whsec_…"]`. Two secrets sign with both
    /// (a rotation). A job's own `signing_secrets` win over these.
    pub signing_secrets: BTreeMap<String, Vec<String>>,
    /// Timeout of one call when the job's params give none.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Longest timeout a job's params may ask for.
    #[serde(with = "humantime_serde")]
    pub max_timeout: Duration,
    /// Bytes of a failed response's body kept in the run's error (and of any response's
    /// body sent in a callback).
    pub max_error_body_bytes: usize,
    /// A PEM file of CA certificates trusted for `https://` on top of the default roots (the
    /// system's CA store, or the bundled Mozilla roots when the system has none): an internal
    /// CA.
    pub ca_file: Option<PathBuf>,
    /// A PEM file of the client certificate (then its chain) presented to servers that ask
    /// for one (mutual TLS). Needs `client_key`.
    pub client_cert: Option<PathBuf>,
    /// A PEM file of `client_cert`'s private key (PKCS#8, PKCS#1 or SEC1).
    pub client_key: Option<PathBuf>,
    /// TLS by target host (patterns as in `allowed_hosts`; the most specific matching pattern
    /// wins): `[handlers.http.tls."api.internal"]` with `ca_file` (more roots for those hosts,
    /// on top of `ca_file` above) and/or `client_cert` + `client_key` (the identity presented
    /// to those hosts instead of the one above).
    pub tls: BTreeMap<String, HttpTlsSettings>,
}

/// The TLS of the `http` handler's connections to the hosts of one
/// [`HttpHandlerSettings::tls`] pattern.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpTlsSettings {
    /// A PEM file of CA certificates these hosts are also trusted by.
    pub ca_file: Option<PathBuf>,
    /// A PEM file of the client certificate (then its chain) presented to these hosts.
    pub client_cert: Option<PathBuf>,
    /// A PEM file of `client_cert`'s private key.
    pub client_key: Option<PathBuf>,
}

impl HttpTlsSettings {
    /// Refuse a setting that cannot work, without reading the files (the handler reads them
    /// when it is built, at node start): `name` is `handlers.http` or
    /// `handlers.http.tls."<pattern>"`.
    fn check(&self, name: &str) -> Result<()> {
        for (key, path) in [
            ("ca_file", &self.ca_file),
            ("client_cert", &self.client_cert),
            ("client_key", &self.client_key),
        ] {
            if path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
                return Err(Error::Config(format!(
                    "{name}.{key}: is empty; give the path of a PEM file, or leave it out"
                )));
            }
        }
        match (&self.client_cert, &self.client_key) {
            (Some(_), None) => Err(Error::Config(format!(
                "{name}.client_key: must be set with {name}.client_cert (the certificate's private key)"
            ))),
            (None, Some(_)) => Err(Error::Config(format!(
                "{name}.client_cert: must be set with {name}.client_key (the key's certificate)"
            ))),
            _ => Ok(()),
        }
    }
}

/// What [`HttpHandlerSettings::blocked_networks`] holds by default: link-local addresses
/// (where AWS, GCP, Azure and Oracle serve instance metadata at 169.254.169.254, and ECS task
/// credentials at 169.254.170.2), AWS's IPv6 metadata address, Alibaba Cloud's metadata
/// address and Oracle Cloud Classic's.
pub const DEFAULT_BLOCKED_NETWORKS: &[&str] = &[
    "169.254.0.0/16",
    "fe80::/10",
    "fd00:ec2::254/128",
    "100.100.100.200/32",
    "192.0.0.192/32",
];

impl Default for HttpHandlerSettings {
    fn default() -> Self {
        Self {
            allowed_hosts: vec!["*".into()],
            blocked_networks: DEFAULT_BLOCKED_NETWORKS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            block_own_api: true,
            own_api: None,
            signing_secrets: BTreeMap::new(),
            timeout: Duration::from_secs(30),
            max_timeout: Duration::from_secs(300),
            max_error_body_bytes: 1024,
            ca_file: None,
            client_cert: None,
            client_key: None,
            tls: BTreeMap::new(),
        }
    }
}

/// Secrets never appear in debug output (logs), only their fingerprints.
impl std::fmt::Debug for HttpHandlerSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secrets: BTreeMap<&String, Vec<String>> = self
            .signing_secrets
            .iter()
            .map(|(host, list)| {
                let shown = list.iter().map(|s| crate::webhook::redact(s)).collect();
                (host, shown)
            })
            .collect();
        f.debug_struct("HttpHandlerSettings")
            .field("allowed_hosts", &self.allowed_hosts)
            .field("blocked_networks", &self.blocked_networks)
            .field("block_own_api", &self.block_own_api)
            .field("own_api", &self.own_api)
            .field("signing_secrets", &secrets)
            .field("timeout", &self.timeout)
            .field("max_timeout", &self.max_timeout)
            .field("max_error_body_bytes", &self.max_error_body_bytes)
            // Paths only: the key file's contents are never read here.
            .field("ca_file", &self.ca_file)
            .field("client_cert", &self.client_cert)
            .field("client_key", &self.client_key)
            .field("tls", &self.tls)
            .finish()
    }
}

impl HttpHandlerSettings {
    /// The parsed [`HttpHandlerSettings::blocked_networks`]; the error names the entry.
    pub fn blocked_nets(&self) -> Result<Vec<ipnet::IpNet>> {
        self.blocked_networks
            .iter()
            .map(|text| {
                let t = text.trim();
                t.parse::<ipnet::IpNet>()
                    .or_else(|_| t.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| {
                        Error::Config(format!(
                            "handlers.http.blocked_networks: '{text}' is not a network such as 169.254.0.0/16 or an address"
                        ))
                    })
            })
            .collect()
    }

    /// The TLS settings for every host (`ca_file`, `client_cert`, `client_key`).
    pub fn default_tls(&self) -> HttpTlsSettings {
        HttpTlsSettings {
            ca_file: self.ca_file.clone(),
            client_cert: self.client_cert.clone(),
            client_key: self.client_key.clone(),
        }
    }

    /// Refuse settings that cannot work, naming the setting. The TLS files are read when the
    /// handler is built (node start), not here: settings are also loaded by commands that
    /// run elsewhere (`keyfire` against a remote API), where those files need not exist.
    pub fn check(&self) -> Result<()> {
        let bad = |name: &str, why: String| Err(Error::Config(format!("{name}: {why}")));
        if self.timeout.is_zero() {
            return bad("handlers.http.timeout", "must be greater than zero".into());
        }
        if self.max_timeout < self.timeout {
            return bad(
                "handlers.http.max_timeout",
                "must be at least handlers.http.timeout".into(),
            );
        }
        self.blocked_nets()?;
        for (host, secrets) in &self.signing_secrets {
            let name = format!("handlers.http.signing_secrets.\"{host}\"");
            if host.trim().is_empty() {
                return bad(
                    &name,
                    "name a host pattern (example.com, *.example.com or *)".into(),
                );
            }
            if secrets.is_empty() || secrets.len() > crate::webhook::MAX_ACTIVE_SECRETS {
                return bad(
                    &name,
                    "give one secret, or two while rotating (both sign)".into(),
                );
            }
            for (i, s) in secrets.iter().enumerate() {
                if let Err(why) = crate::webhook::SigningSecret::parse(s) {
                    return bad(&format!("{name}[{i}]"), why);
                }
            }
        }
        self.default_tls().check("handlers.http")?;
        for (host, tls) in &self.tls {
            let name = format!("handlers.http.tls.\"{host}\"");
            if host.trim().is_empty() {
                return bad(
                    &name,
                    "name a host pattern (example.com, *.example.com or *)".into(),
                );
            }
            if *tls == HttpTlsSettings::default() {
                return bad(&name, "set ca_file, or client_cert and client_key".into());
            }
            tls.check(&name)?;
        }
        Ok(())
    }
}

/// The `command` handler: runs a program (no shell). Off unless enabled.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CommandHandlerSettings {
    /// Register the `command` handler on this node.
    pub enabled: bool,
    /// Programs it may run, exactly as jobs name them (`/usr/bin/backup`), or `*` for any.
    pub allowed_programs: Vec<String>,
    /// Timeout of one run when the job's params give none.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Bytes of output (stdout, then stderr) kept in a failed run's error.
    pub max_output_bytes: usize,
}

impl Default for CommandHandlerSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            allowed_programs: Vec::new(),
            timeout: Duration::from_secs(300),
            max_output_bytes: 4096,
        }
    }
}

/// How keyfire reaches Redis: one server, a master found through Sentinel, or a Redis Cluster.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RedisMode {
    /// One server at `redis.url`.
    #[default]
    Standalone,
    /// The master of `redis.sentinel_master`, as the sentinels in `redis.nodes` report it;
    /// followed across failovers.
    Sentinel,
    /// A Redis Cluster reached through the seed nodes in `redis.nodes`.
    Cluster,
}

impl RedisMode {
    /// The mode as written in settings.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Standalone => "standalone",
            Self::Sentinel => "sentinel",
            Self::Cluster => "cluster",
        }
    }
}

/// Redis connection and layout.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedisSettings {
    /// `standalone` (default), `sentinel` or `cluster`.
    pub mode: RedisMode,
    /// `redis://[user:pass@]host:port/db`: the server in standalone mode (unused otherwise).
    pub url: String,
    /// Sentinel mode: the sentinels' addresses; cluster mode: seed nodes. `redis://host:port`
    /// (or `rediss://`, or a bare `host:port`). Required, non-empty, in those modes. From the
    /// environment, a comma-separated list: `KEYFIRE__REDIS__NODES=redis://a:7000,redis://b:7000`.
    pub nodes: Vec<String>,
    /// Sentinel mode: the name of the monitored master (`sentinel monitor <name> ...`).
    pub sentinel_master: String,
    /// ACL user for every connection to a data server, in every mode (overrides the URL's).
    pub username: Option<String>,
    /// Password for every connection to a data server, in every mode (overrides the URL's).
    pub password: Option<String>,
    /// Use TLS for every connection (data servers and sentinels), as `rediss://` does.
    pub tls: bool,
    /// PEM file of the CA certificate(s) to trust for TLS; unset: the public web PKI roots.
    pub tls_ca: Option<PathBuf>,
    /// Accept any server certificate (no verification at all). For tests and development only.
    pub tls_insecure: bool,
    /// Number of shards keyfire's keys are spread over (each shard is one hash tag, so in
    /// cluster mode shards spread over the masters). 1..=1024.
    pub shards: u32,
    /// After a claim or a recorded outcome, wait until this many replicas acknowledged it
    /// (`WAIT`) before running the handler. With 1 and a healthy replica, a failover cannot
    /// lose a claim, so it cannot run a firing twice. 0 (default): do not wait.
    pub wait_replicas: u32,
    /// Longest `WAIT` for [`RedisSettings::wait_replicas`]; past it the firing runs anyway
    /// (availability first) and `keyfire_unreplicated_writes_total` counts it.
    #[serde(with = "humantime_serde")]
    pub wait_timeout: Duration,
    /// Prefix of every key; keys live under the hash tag `{prefix}`.
    pub prefix: String,
    /// Turn on expired-key events with `CONFIG SET` when they are off. When false and they
    /// are off, the node refuses to start.
    pub enable_notifications: bool,
    /// Only firings due within this horizon hold a sentinel key; later ones live in the due
    /// ZSET alone and get theirs as they come near.
    #[serde(with = "humantime_serde")]
    pub sentinel_horizon: Duration,
}

impl Default for RedisSettings {
    fn default() -> Self {
        Self {
            mode: RedisMode::Standalone,
            url: "redis://127.0.0.1:6379/0".into(),
            nodes: Vec::new(),
            sentinel_master: "mymaster".into(),
            username: None,
            password: None,
            tls: false,
            tls_ca: None,
            tls_insecure: false,
            shards: 1,
            wait_replicas: 0,
            wait_timeout: Duration::from_millis(100),
            prefix: "keyfire".into(),
            enable_notifications: true,
            sentinel_horizon: Duration::from_secs(60),
        }
    }
}

/// The error for a setting that needs a feature of the `keyfire` crate this build leaves out.
pub(crate) fn missing_feature(setting: &str, feature: &str) -> Error {
    Error::Config(format!(
        "{setting}: needs the `{feature}` feature of the keyfire crate, which this build \
         leaves out (the keyfire server has it; a service turns it on in its Cargo.toml: \
         keyfire = {{ features = [\"{feature}\"] }})"
    ))
}

/// Whether `url` names TLS (`rediss://`).
fn is_tls_url(url: &str) -> bool {
    url.trim().to_ascii_lowercase().starts_with("rediss://")
}

impl RedisSettings {
    /// Refuse a deployment this build cannot reach: a mode or TLS whose feature
    /// (`cluster`, `sentinel`, `tls`) is left out.
    fn check_features(&self) -> Result<()> {
        if self.mode == RedisMode::Cluster && !cfg!(feature = "cluster") {
            return Err(missing_feature("redis.mode = \"cluster\"", "cluster"));
        }
        if self.mode == RedisMode::Sentinel && !cfg!(feature = "sentinel") {
            return Err(missing_feature("redis.mode = \"sentinel\"", "sentinel"));
        }
        if !cfg!(feature = "tls") {
            if self.tls {
                return Err(missing_feature("redis.tls", "tls"));
            }
            if self.mode == RedisMode::Standalone && is_tls_url(&self.url) {
                return Err(missing_feature("redis.url (rediss://)", "tls"));
            }
            if self.mode != RedisMode::Standalone && self.nodes.iter().any(|n| is_tls_url(n)) {
                return Err(missing_feature("redis.nodes (rediss://)", "tls"));
            }
        }
        Ok(())
    }

    /// Refuse connection and layout settings that cannot work, naming the setting.
    pub fn check(&self) -> Result<()> {
        let bad = |name: &str, why: String| Err(Error::Config(format!("{name}: {why}")));
        match self.mode {
            RedisMode::Standalone => {
                if redis::parse_redis_url(&self.url).is_none() {
                    return bad("redis.url", format!("'{}' is not a redis:// URL", self.url));
                }
            }
            RedisMode::Sentinel | RedisMode::Cluster => {
                if self.nodes.is_empty() {
                    return bad(
                        "redis.nodes",
                        format!(
                            "name at least one address (redis://host:port) in {} mode",
                            self.mode.as_str()
                        ),
                    );
                }
                for node in &self.nodes {
                    if node_addr(node).is_none() {
                        return bad(
                            "redis.nodes",
                            format!("'{node}' is not an address such as redis://host:port"),
                        );
                    }
                }
            }
        }
        if self.mode == RedisMode::Sentinel && self.sentinel_master.trim().is_empty() {
            return bad(
                "redis.sentinel_master",
                "name the master the sentinels monitor".into(),
            );
        }
        if self.username.is_some() && self.password.is_none() {
            return bad(
                "redis.username",
                "needs redis.password (Redis's AUTH takes a user and a password)".into(),
            );
        }
        if let Some(ca) = &self.tls_ca {
            if !self.tls {
                return bad("redis.tls_ca", "is set but redis.tls is false".into());
            }
            if !ca.is_file() {
                return bad("redis.tls_ca", format!("{} is not a file", ca.display()));
            }
        }
        if self.tls_insecure && !self.tls {
            return bad("redis.tls_insecure", "is set but redis.tls is false".into());
        }
        if !(1..=1024).contains(&self.shards) {
            return bad("redis.shards", "must be between 1 and 1024".into());
        }
        if self.wait_replicas > 0 && self.wait_timeout.is_zero() {
            return bad(
                "redis.wait_timeout",
                "must be more than 0 when redis.wait_replicas is set (WAIT 0 waits forever)".into(),
            );
        }
        self.check_features()?;
        if self.prefix.is_empty() || self.prefix.contains(['{', '}', ' ']) {
            return bad(
                "redis.prefix",
                "must be non-empty without '{', '}' or spaces".into(),
            );
        }
        Ok(())
    }
}

/// `host` and `port` of a node address: `redis://[user:pass@]host:port[/db]`, `rediss://…`,
/// or a bare `host:port`.
pub fn node_addr(node: &str) -> Option<(String, u16)> {
    let url = if node.contains("://") {
        node.to_string()
    } else {
        format!("redis://{node}")
    };
    let parsed = redis::parse_redis_url(&url)?;
    if !matches!(parsed.scheme(), "redis" | "rediss") {
        return None;
    }
    let host = parsed
        .host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']');
    if host.is_empty() {
        return None;
    }
    Some((host.to_string(), parsed.port().unwrap_or(6379)))
}

/// How a node takes part in the cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeSettings {
    /// This node's id; empty picks `<hostname>-<random>`.
    pub id: String,
    /// Runs this node executes at once; past it, it claims nothing new, except ahead of runs
    /// while they are short (docs/architecture.md, claims ahead of runs).
    pub max_concurrent_runs: usize,
    /// How often the node announces itself and re-reads Redis's clock.
    #[serde(with = "humantime_serde")]
    pub heartbeat_interval: Duration,
    /// A node not heard from for this long is no longer live.
    #[serde(with = "humantime_serde")]
    pub node_ttl: Duration,
    /// How often the sweeper looks for overdue firings.
    #[serde(with = "humantime_serde")]
    pub sweep_interval: Duration,
    /// How long after its instant (plus `node_ttl`) a firing is left to its owner before any
    /// node claims it.
    #[serde(with = "humantime_serde")]
    pub claim_grace: Duration,
    /// How far ahead a node arms local timers for the firings it owns.
    #[serde(with = "humantime_serde")]
    pub timer_horizon: Duration,
    /// On shutdown, how long running jobs may take to finish.
    #[serde(with = "humantime_serde")]
    pub drain_timeout: Duration,
    /// Lease of a run: renewed while it runs; a run whose node died is taken over after it.
    #[serde(with = "humantime_serde")]
    pub lease: Duration,
    /// Runs kept in each job's history.
    pub history_limit: usize,
    /// Oldest run record kept in a job's history.
    #[serde(with = "humantime_serde")]
    pub history_max_age: Duration,
    /// Dead letters kept per job.
    pub dead_letter_limit: usize,
    /// How long a one-shot task that succeeded is kept before it is cleaned up.
    #[serde(with = "humantime_serde")]
    pub task_retention: Duration,
}

impl Default for NodeSettings {
    fn default() -> Self {
        Self {
            id: String::new(),
            max_concurrent_runs: 256,
            heartbeat_interval: Duration::from_secs(1),
            node_ttl: Duration::from_secs(5),
            sweep_interval: Duration::from_secs(1),
            claim_grace: Duration::from_secs(2),
            timer_horizon: Duration::from_secs(3),
            drain_timeout: Duration::from_secs(30),
            lease: Duration::from_secs(30),
            history_limit: 100,
            history_max_age: Duration::from_secs(7 * 24 * 3600),
            dead_letter_limit: 1_000,
            task_retention: Duration::from_secs(24 * 3600),
        }
    }
}

/// Bounds on the size of what callers hand keyfire (`[limits]`): a job's `params`, a
/// delay-queue task's payload. Not flow control ([`crate::FlowLimitSpec`]) nor history
/// retention ([`NodeSettings::history_limit`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InputLimits {
    /// Largest `params` of a job, serialized, in bytes.
    pub max_params_bytes: usize,
}

impl Default for InputLimits {
    fn default() -> Self {
        Self {
            max_params_bytes: 64 * 1024,
        }
    }
}

impl Settings {
    /// The list-valued settings, by their dotted names: a configuration source without lists
    /// (the `keyfire` server's `KEYFIRE__` environment variables) gives them as
    /// comma-separated values.
    pub const LIST_KEYS: &'static [&'static str] = &[
        "redis.nodes",
        "handlers.http.allowed_hosts",
        "handlers.http.blocked_networks",
        "handlers.command.allowed_programs",
    ];

    /// Refuse settings that cannot work, naming the setting (`redis.shards`,
    /// `handlers.http.timeout`, ...). A node and a client check their settings when they
    /// start; call it first to report a bad one early.
    pub fn check(&self) -> Result<()> {
        self.node.check()?;
        self.redis.check()?;
        self.handlers.check()
    }
}

impl NodeSettings {
    /// Refuse node settings that cannot work, naming the setting.
    pub fn check(&self) -> Result<()> {
        let bad = |name: &str, why: &str| Err(Error::Config(format!("{name}: {why}")));
        if self.max_concurrent_runs == 0 {
            return bad("node.max_concurrent_runs", "must be at least 1");
        }
        for (name, d) in [
            ("node.heartbeat_interval", self.heartbeat_interval),
            ("node.sweep_interval", self.sweep_interval),
            ("node.lease", self.lease),
        ] {
            if d.is_zero() {
                return bad(name, "must be greater than zero");
            }
        }
        if self.node_ttl <= self.heartbeat_interval {
            return bad(
                "node.node_ttl",
                "must be longer than node.heartbeat_interval",
            );
        }
        Ok(())
    }
}

impl HandlerSettings {
    /// Refuse handler settings that cannot work, naming the setting.
    pub fn check(&self) -> Result<()> {
        self.http.check()?;
        self.command.check()
    }
}

impl CommandHandlerSettings {
    /// Refuse `command` handler settings that cannot work, naming the setting.
    pub fn check(&self) -> Result<()> {
        let bad = |name: &str, why: &str| Err(Error::Config(format!("{name}: {why}")));
        if self.timeout.is_zero() {
            return bad("handlers.command.timeout", "must be greater than zero");
        }
        if self.enabled && self.allowed_programs.is_empty() {
            return bad(
                "handlers.command.allowed_programs",
                "name at least one program (or \"*\") when handlers.command.enabled is true",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_redis_deployment_settings_are_refused_by_name() {
        let refused = |f: &dyn Fn(&mut RedisSettings)| {
            let mut s = Settings::default();
            f(&mut s.redis);
            s.check().unwrap_err().to_string()
        };
        let err = refused(&|r| r.mode = RedisMode::Cluster);
        assert!(err.contains("redis.nodes"), "{err}");
        let err = refused(&|r| r.mode = RedisMode::Sentinel);
        assert!(err.contains("redis.nodes"), "{err}");
        let err = refused(&|r| {
            r.mode = RedisMode::Cluster;
            r.nodes = vec!["http://x:1".into()];
        });
        assert!(
            err.contains("redis.nodes") && err.contains("http://x:1"),
            "{err}"
        );
        let err = refused(&|r| {
            r.mode = RedisMode::Sentinel;
            r.nodes = vec!["s1:26379".into()];
            r.sentinel_master = " ".into();
        });
        assert!(err.contains("redis.sentinel_master"), "{err}");
        let err = refused(&|r| r.shards = 0);
        assert!(err.contains("redis.shards"), "{err}");
        let err = refused(&|r| r.shards = 1025);
        assert!(err.contains("redis.shards"), "{err}");
        let err = refused(&|r| r.tls_ca = Some("/nonexistent/ca.pem".into()));
        assert!(err.contains("redis.tls_ca"), "{err}");
        let err = refused(&|r| {
            r.tls = true;
            r.tls_ca = Some("/nonexistent/ca.pem".into());
        });
        assert!(err.contains("redis.tls_ca"), "{err}");
        let err = refused(&|r| r.tls_insecure = true);
        assert!(err.contains("redis.tls_insecure"), "{err}");
        let err = refused(&|r| r.username = Some("u".into()));
        assert!(err.contains("redis.username"), "{err}");
        let err = refused(&|r| r.url = "http://localhost".into());
        assert!(err.contains("redis.url"), "{err}");

        let mut s = Settings::default();
        s.redis.mode = RedisMode::Cluster;
        s.redis.nodes = vec!["redis://127.0.0.1:7000".into(), "127.0.0.1:7001".into()];
        s.redis.shards = 1024;
        // A build without the `cluster` feature refuses it, naming the feature.
        assert_eq!(s.check().is_ok(), cfg!(feature = "cluster"));
    }

    #[test]
    fn a_deployment_this_build_leaves_out_is_refused_naming_the_feature() {
        let check = |f: &dyn Fn(&mut RedisSettings)| {
            let mut s = Settings::default();
            f(&mut s.redis);
            s.check()
        };
        let cluster = check(&|r| {
            r.mode = RedisMode::Cluster;
            r.nodes = vec!["redis://127.0.0.1:7000".into()];
        });
        let sentinel = check(&|r| {
            r.mode = RedisMode::Sentinel;
            r.nodes = vec!["127.0.0.1:26379".into()];
        });
        let tls = check(&|r| r.tls = true);
        let rediss = check(&|r| r.url = "rediss://127.0.0.1:6380/0".into());
        for (result, on, setting, feature) in [
            (cluster, cfg!(feature = "cluster"), "redis.mode", "cluster"),
            (
                sentinel,
                cfg!(feature = "sentinel"),
                "redis.mode",
                "sentinel",
            ),
            (tls, cfg!(feature = "tls"), "redis.tls", "tls"),
            (rediss, cfg!(feature = "tls"), "redis.url", "tls"),
        ] {
            match result {
                Ok(()) => assert!(on, "{setting} passed without the {feature} feature"),
                Err(e) => {
                    let e = e.to_string();
                    assert!(!on, "{setting}: {e}");
                    assert!(
                        e.contains(setting) && e.contains(&format!("`{feature}` feature")),
                        "{e}"
                    );
                }
            }
        }
    }

    #[test]
    fn node_addresses_parse() {
        assert_eq!(node_addr("redis://h:7000"), Some(("h".to_string(), 7000)));
        assert_eq!(
            node_addr("rediss://u:p@h:7001/0"),
            Some(("h".to_string(), 7001))
        );
        assert_eq!(node_addr("h:26379"), Some(("h".to_string(), 26379)));
        assert_eq!(node_addr("h"), Some(("h".to_string(), 6379)));
        assert_eq!(node_addr("http://h:1"), None);
    }
    #[test]
    fn http_handler_settings_are_checked_by_name_and_secrets_never_debug_printed() {
        let refused = |f: &dyn Fn(&mut HttpHandlerSettings)| {
            let mut s = Settings::default();
            f(&mut s.handlers.http);
            s.check().unwrap_err().to_string()
        };
        let err = refused(&|h| h.blocked_networks.push("10.0.0.0/33".into()));
        assert!(
            err.contains("handlers.http.blocked_networks") && err.contains("10.0.0.0/33"),
            "{err}"
        );
        let err = refused(&|h| {
            h.signing_secrets
                .insert("api.example.com".into(), vec!["nope".into()]);
        });
        assert!(
            err.contains("handlers.http.signing_secrets.\"api.example.com\"[0]"),
            "{err}"
        );
        let err = refused(&|h| {
            h.signing_secrets.insert("*".into(), vec![]);
        });
        assert!(err.contains("handlers.http.signing_secrets"), "{err}");
        let err = refused(&|h| h.max_timeout = Duration::from_secs(1));
        assert!(err.contains("handlers.http.max_timeout"), "{err}");
        let err = refused(&|h| h.timeout = Duration::ZERO);
        assert!(err.contains("handlers.http.timeout"), "{err}");

        let secret = crate::webhook::SigningSecret::from_key(vec![1u8; 32]).expose();
        let mut s = Settings::default();
        s.handlers
            .http
            .signing_secrets
            .insert("*".into(), vec![secret.clone()]);
        s.handlers.http.blocked_networks.push("10.0.0.1".into());
        s.check().unwrap();
        let shown = format!("{s:?}");
        let b64 = secret.trim_start_matches("whsec_");
        assert!(
            !shown.contains(b64) && shown.contains("redacted"),
            "{shown}"
        );
    }

    #[test]
    fn http_tls_settings_are_checked_by_name() {
        let refused = |f: &dyn Fn(&mut HttpHandlerSettings)| {
            let mut s = Settings::default();
            f(&mut s.handlers.http);
            s.check().unwrap_err().to_string()
        };
        let err = refused(&|h| h.client_cert = Some("/c.pem".into()));
        assert!(
            err.contains("handlers.http.client_key: must be set"),
            "{err}"
        );
        let err = refused(&|h| h.client_key = Some("/k.pem".into()));
        assert!(
            err.contains("handlers.http.client_cert: must be set"),
            "{err}"
        );
        let err = refused(&|h| h.ca_file = Some("".into()));
        assert!(err.contains("handlers.http.ca_file: is empty"), "{err}");
        let err = refused(&|h| {
            h.tls.insert(
                "api.internal".into(),
                HttpTlsSettings {
                    client_cert: Some("/c.pem".into()),
                    ..Default::default()
                },
            );
        });
        assert!(
            err.contains("handlers.http.tls.\"api.internal\".client_key: must be set"),
            "{err}"
        );
        let err = refused(&|h| {
            h.tls
                .insert("api.internal".into(), HttpTlsSettings::default());
        });
        assert!(
            err.contains("handlers.http.tls.\"api.internal\": set ca_file"),
            "{err}"
        );
        let err = refused(&|h| {
            let tls = HttpTlsSettings {
                ca_file: Some("/ca.pem".into()),
                ..Default::default()
            };
            h.tls.insert(" ".into(), tls);
        });
        assert!(err.contains("name a host pattern"), "{err}");

        let mut s = Settings::default();
        s.handlers.http.ca_file = Some("/nowhere/ca.pem".into());
        s.handlers.http.client_cert = Some("/nowhere/c.pem".into());
        s.handlers.http.client_key = Some("/nowhere/k.pem".into());
        // The files are not read by the check (a remote CLI checks the same settings).
        s.check().unwrap();
    }

    #[test]
    fn the_list_keys_are_the_list_valued_settings() {
        // Every list in the defaults' serialization (the maps, empty by default, add none).
        fn lists(prefix: &str, value: &serde_json::Value, out: &mut Vec<String>) {
            match value {
                serde_json::Value::Array(_) => out.push(prefix.to_string()),
                serde_json::Value::Object(map) => {
                    for (key, v) in map {
                        let name = if prefix.is_empty() {
                            key.clone()
                        } else {
                            format!("{prefix}.{key}")
                        };
                        lists(&name, v, out);
                    }
                }
                _ => {}
            }
        }
        let mut found = Vec::new();
        lists(
            "",
            &serde_json::to_value(Settings::default()).unwrap(),
            &mut found,
        );
        found.sort_unstable();
        let mut declared = Settings::LIST_KEYS.to_vec();
        declared.sort_unstable();
        assert_eq!(found, declared);
        Settings::default().check().unwrap();
    }
}
