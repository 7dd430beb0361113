//! Node settings: shipped defaults, then a TOML file, then `KEYFIRE__SECTION__KEY` env vars.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::job::JobSpec;

/// Everything a node or client reads from configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Where Redis is and how keyfire uses it.
    pub redis: RedisSettings,
    /// How this node claims and runs firings.
    pub node: NodeSettings,
    /// Input limits.
    pub limits: Limits,
    /// Logging.
    pub log: LogSettings,
    /// OpenTelemetry traces, exported by the `keyfire` server (off by default). The library
    /// itself only emits `tracing` spans; this section tells the server what to do with them.
    pub telemetry: TelemetrySettings,
    /// Delete recurring jobs in Redis that are not declared in `jobs` when the node starts.
    pub prune: bool,
    /// The REST API the node serves.
    pub api: ApiSettings,
    /// The cluster-wide figures `/metrics` reads from Redis (queue, scheduler, memory).
    pub metrics: MetricsSettings,
    /// Settings of the built-in handlers.
    pub handlers: HandlerSettings,
    /// Jobs declared in the file, upserted (by id) when the node starts.
    pub jobs: Vec<JobSpec>,
    /// Flow-control limits declared in the file (`[[flow_limits]]`: `key`, `rate`,
    /// `in_flight`), set when the node starts. (`[limits]` is the input limits above.)
    pub flow_limits: Vec<crate::job::LimitSpec>,
}

/// The REST API a node serves (`/v1`, `/healthz`, `/readyz`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiSettings {
    /// Serve the API from `keyfire serve`.
    pub enabled: bool,
    /// `host:port` to listen on. A non-loopback address needs a `token`, and so does a host
    /// name other than `localhost` (it may resolve to any address).
    pub listen: String,
    /// Bearer token every `/v1` request must carry; empty: no auth (loopback only).
    pub token: String,
    /// Largest request body, in bytes (413 past it).
    pub max_body_bytes: usize,
}

impl Default for ApiSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: "127.0.0.1:8080".into(),
            token: String::new(),
            max_body_bytes: 1024 * 1024,
        }
    }
}

/// The cluster-wide figures a node's `/metrics` reads from Redis: the delay queue's topics,
/// the oldest overdue firing, Redis's memory. Read on a scrape, at most once per
/// `min_interval`; every node reports the same figures (aggregate them with `max`, not `sum`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsSettings {
    /// Shortest time between two reads of the figures from Redis; scrapes in between get the
    /// last ones.
    #[serde(with = "humantime_serde")]
    pub min_interval: Duration,
    /// Topics with series of their own (the first by name); the others are summed into
    /// `topic="_other"`. 0: every topic is summed into `_other`.
    pub max_topics: usize,
}

impl Default for MetricsSettings {
    fn default() -> Self {
        Self {
            min_interval: Duration::from_secs(5),
            max_topics: 1_000,
        }
    }
}

/// Most topics [`MetricsSettings::max_topics`] may name: each costs a few series per node.
pub const MAX_METRICS_TOPICS: usize = 10_000;

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
    /// Refuse calls to this node's own API (`api.listen`: its address and port, or, when it
    /// listens on every interface, any local address at that port).
    pub block_own_api: bool,
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

impl RedisSettings {
    /// Refuse connection settings that cannot work, naming the setting.
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

/// Input limits.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest `params` of a job, serialized, in bytes.
    pub max_params_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_params_bytes: 64 * 1024,
        }
    }
}

/// Log output.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogSettings {
    /// `human` or `json`.
    pub format: String,
    /// A `tracing` filter such as `info` or `keyfire=debug`; `RUST_LOG` wins when set.
    pub level: String,
}

impl Default for LogSettings {
    fn default() -> Self {
        Self {
            format: "human".into(),
            level: "info".into(),
        }
    }
}

/// OpenTelemetry traces (`[telemetry]`): the `keyfire` server exports the spans of firings and
/// queue tasks over OTLP when `enabled`. Resource attributes come from `service_name` and the
/// standard `OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES` variables (the variable wins).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetrySettings {
    /// Export traces.
    pub enabled: bool,
    /// The collector's OTLP/HTTP base URL, such as `http://127.0.0.1:4318` (spans go to
    /// `<endpoint>/v1/traces`).
    pub endpoint: String,
    /// The OTLP transport: `http/protobuf`.
    pub protocol: String,
    /// The share of firings (of traces) exported, 0 to 1; a trace continued from a sampled
    /// caller's `traceparent` follows the caller's decision.
    pub sampling_ratio: f64,
    /// `service.name` of the spans, unless `OTEL_SERVICE_NAME` says otherwise.
    pub service_name: String,
}

impl Default for TelemetrySettings {
    fn default() -> Self {
        Self {
            enabled: false,
            endpoint: "http://127.0.0.1:4318".into(),
            protocol: "http/protobuf".into(),
            sampling_ratio: 1.0,
            service_name: "keyfire".into(),
        }
    }
}

/// The OTLP transports the server speaks.
pub const TELEMETRY_PROTOCOLS: &[&str] = &["http/protobuf"];

impl TelemetrySettings {
    /// Refuse settings that cannot work, naming the setting (checked whether or not
    /// `enabled`, so turning traces on later cannot stop a node that started).
    pub fn check(&self) -> Result<()> {
        let bad = |name: &str, why: String| Err(Error::Config(format!("telemetry.{name}: {why}")));
        if !(0.0..=1.0).contains(&self.sampling_ratio) {
            return bad(
                "sampling_ratio",
                format!("must be from 0 to 1, not {}", self.sampling_ratio),
            );
        }
        if !TELEMETRY_PROTOCOLS.contains(&self.protocol.as_str()) {
            return bad(
                "protocol",
                format!("must be \"http/protobuf\", not \"{}\"", self.protocol),
            );
        }
        if let Err(why) = check_http_url(&self.endpoint) {
            return bad(
                "endpoint",
                format!(
                    "'{}' {why}; give the collector's OTLP/HTTP URL, such as http://127.0.0.1:4318",
                    self.endpoint
                ),
            );
        }
        if self.service_name.trim().is_empty() {
            return bad("service_name", "must not be empty".into());
        }
        Ok(())
    }
}

/// Whether `url` is an `http://` or `https://` URL with a host and, if given, a port number.
fn check_http_url(url: &str) -> std::result::Result<(), &'static str> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or("is not an http:// or https:// URL")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() || authority.contains(|c: char| c.is_whitespace() || c == '@') {
        return Err("has no host");
    }
    let port = match authority.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((_, "")) => None,
            Some((_, tail)) => Some(tail.strip_prefix(':').ok_or("has a bad IPv6 host")?),
            None => return Err("has a bad IPv6 host"),
        },
        None => authority.split_once(':').map(|(_, p)| p),
    };
    if let Some(port) = port
        && port.parse::<u16>().is_err()
    {
        return Err("has a bad port");
    }
    if url.contains(char::is_whitespace) {
        return Err("holds whitespace");
    }
    Ok(())
}

/// List settings that the environment gives as comma-separated values: (variable, key).
const LIST_VARS: &[(&str, &str)] = &[
    ("KEYFIRE__REDIS__NODES", "redis.nodes"),
    (
        "KEYFIRE__HANDLERS__HTTP__ALLOWED_HOSTS",
        "handlers.http.allowed_hosts",
    ),
    (
        "KEYFIRE__HANDLERS__HTTP__BLOCKED_NETWORKS",
        "handlers.http.blocked_networks",
    ),
    (
        "KEYFIRE__HANDLERS__COMMAND__ALLOWED_PROGRAMS",
        "handlers.command.allowed_programs",
    ),
];

/// Whether `filter` is a `tracing` filter as `RUST_LOG` takes it: comma-separated
/// directives, each a level or `target[span{field=value}]=level`. A bare word that is not a
/// level would be read as a target name and silence everything, so it is refused.
fn is_log_filter(filter: &str) -> bool {
    const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];
    let is_level = |s: &str| LEVELS.contains(&s.trim().to_ascii_lowercase().as_str());
    !filter.trim().is_empty()
        && filter
            .split(',')
            .all(|directive| match directive.rsplit_once('=') {
                // `target=level`, `target[span]=level`, `[span{f=v}]=level`.
                Some((target, level)) if !level.contains(['}', ']']) => {
                    is_level(level)
                        && !target.trim().is_empty()
                        && target.matches('[').count() == target.matches(']').count()
                        && target.matches('{').count() == target.matches('}').count()
                }
                _ => is_level(directive),
            })
}

impl Settings {
    /// Load defaults, then `file` (if given), then `KEYFIRE__SECTION__KEY` environment variables.
    ///
    /// A list setting from the environment is comma-separated:
    /// `KEYFIRE__REDIS__NODES=redis://a:7000,redis://b:7000`.
    pub fn load(file: Option<&Path>) -> Result<Self> {
        Self::load_from(file, std::env::vars())
    }

    /// [`Settings::load`] with the given environment instead of the process's.
    pub fn load_from(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self> {
        let env: config::Map<String, String> = env
            .into_iter()
            .filter(|(k, _)| k.to_ascii_uppercase().starts_with("KEYFIRE__"))
            .collect();
        let mut builder = config::Config::builder();
        if let Some(path) = file {
            if !path.exists() {
                return Err(Error::Config(format!("{} does not exist", path.display())));
            }
            builder = builder.add_source(config::File::from(path).format(config::FileFormat::Toml));
        }
        builder = builder.add_source(
            config::Environment::with_prefix("KEYFIRE")
                .prefix_separator("__")
                .separator("__")
                .source(Some(env.clone())),
        );
        // The `config` crate splits lists only with `try_parsing`, which would also turn
        // every numeric-looking string (a token, a password) into a number; split the list
        // settings here instead.
        for (var, key) in LIST_VARS {
            if let Some((_, value)) = env.iter().find(|(k, _)| k.eq_ignore_ascii_case(var)) {
                let items: Vec<String> = value
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect();
                builder = builder
                    .set_override(*key, items)
                    .map_err(|e| Error::Config(format!("{var}: {e}")))?;
            }
        }
        let settings: Settings = builder
            .build()
            .and_then(|c| c.try_deserialize())
            .map_err(|e| Error::Config(e.to_string()))?;
        settings.check()?;
        Ok(settings)
    }

    /// Refuse settings that cannot work, naming the setting.
    pub fn check(&self) -> Result<()> {
        let bad = |name: &str, why: &str| Err(Error::Config(format!("{name}: {why}")));
        if self.node.max_concurrent_runs == 0 {
            return bad("node.max_concurrent_runs", "must be at least 1");
        }
        for (name, d) in [
            ("node.heartbeat_interval", self.node.heartbeat_interval),
            ("node.sweep_interval", self.node.sweep_interval),
            ("node.lease", self.node.lease),
        ] {
            if d.is_zero() {
                return bad(name, "must be greater than zero");
            }
        }
        if self.node.node_ttl <= self.node.heartbeat_interval {
            return bad(
                "node.node_ttl",
                "must be longer than node.heartbeat_interval",
            );
        }
        self.redis.check()?;
        if self.redis.prefix.is_empty() || self.redis.prefix.contains(['{', '}', ' ']) {
            return bad(
                "redis.prefix",
                "must be non-empty without '{', '}' or spaces",
            );
        }
        if !matches!(self.log.format.as_str(), "human" | "json") {
            return bad("log.format", "must be \"human\" or \"json\"");
        }
        // A bare word that is not a level would be read as a target name and silence
        // everything; refuse it.
        if !is_log_filter(&self.log.level) {
            return bad(
                "log.level",
                "must be a level (trace, debug, info, warn, error, off) or a filter such as \"keyfire=debug,info\"",
            );
        }
        if self.api.max_body_bytes == 0 {
            return bad("api.max_body_bytes", "must be at least 1");
        }
        if self.metrics.min_interval < Duration::from_millis(100) {
            return bad("metrics.min_interval", "must be at least 100ms");
        }
        if self.metrics.max_topics > MAX_METRICS_TOPICS {
            return bad(
                "metrics.max_topics",
                &format!("must be at most {MAX_METRICS_TOPICS}"),
            );
        }
        for (i, l) in self.flow_limits.iter().enumerate() {
            if let Err(e) = l.validate() {
                return bad(&format!("flow_limits[{i}].{}", e.field), &e.message);
            }
        }
        if self.api.enabled && self.api.token.is_empty() {
            match self.api.listen.parse::<std::net::SocketAddr>() {
                Ok(addr) if !addr.ip().is_loopback() => {
                    return bad(
                        "api.listen",
                        "a non-loopback address needs api.token (bearer auth); set a token or listen on 127.0.0.1",
                    );
                }
                Ok(_) => {}
                // A host name may resolve to any address, and to another one tomorrow: without
                // a token only `localhost` (loopback by definition) is taken.
                Err(_) if !is_localhost_name(&self.api.listen) => {
                    return Err(Error::Config(format!(
                        "api.listen: '{}' is a host name, which may resolve to a non-loopback \
                         address; without api.token only a loopback address (127.0.0.1:8080, \
                         [::1]:8080) or localhost is allowed: set api.token (bearer auth) or \
                         listen on 127.0.0.1",
                        self.api.listen
                    )));
                }
                Err(_) => {}
            }
        }
        self.handlers.http.check()?;
        self.telemetry.check()?;
        if self.handlers.command.timeout.is_zero() {
            return bad("handlers.command.timeout", "must be greater than zero");
        }
        if self.handlers.command.enabled && self.handlers.command.allowed_programs.is_empty() {
            return bad(
                "handlers.command.allowed_programs",
                "name at least one program (or \"*\") when handlers.command.enabled is true",
            );
        }
        Ok(())
    }
}

/// Whether a `host:port` listen address names `localhost` (or a name under it, RFC 6761).
fn is_localhost_name(listen: &str) -> bool {
    let host = listen.rsplit_once(':').map_or(listen, |(h, _)| h);
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_name_without_a_token_is_refused() {
        let mut s = Settings::default();
        for name in ["myhost:8080", "keyfire.example.com:80", "0:8080"] {
            s.api.listen = name.into();
            let err = s.check().unwrap_err().to_string();
            assert!(
                err.contains("api.listen") && err.contains("api.token"),
                "{name}: {err}"
            );
        }
        for ok in [
            "localhost:8080",
            "LOCALHOST:1",
            "127.0.0.1:8080",
            "[::1]:8080",
        ] {
            s.api.listen = ok.into();
            s.check().unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        s.api.listen = "myhost:8080".into();
        s.api.token = "t".into();
        s.check().unwrap();
        s.api.token.clear();
        s.api.enabled = false;
        s.check().unwrap();
    }

    #[test]
    fn example_file_loads_and_matches_defaults_where_it_says_so() {
        // The shipped example lives at the workspace root.
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../keyfire.example.toml");
        let s = Settings::load(Some(&path)).unwrap();
        assert_eq!(s.redis.prefix, "keyfire");
        assert!(!s.jobs.is_empty());
        let http = HttpHandlerSettings::default();
        assert_eq!(s.handlers.http.blocked_networks, http.blocked_networks);
        assert_eq!(s.handlers.http.block_own_api, http.block_own_api);
    }

    #[test]
    fn bad_telemetry_settings_are_refused_by_name() {
        let refused = |f: &dyn Fn(&mut TelemetrySettings)| {
            let mut s = Settings::default();
            f(&mut s.telemetry);
            s.check().unwrap_err().to_string()
        };
        assert!(refused(&|t| t.sampling_ratio = 1.5).contains("telemetry.sampling_ratio"));
        assert!(refused(&|t| t.sampling_ratio = f64::NAN).contains("telemetry.sampling_ratio"));
        assert!(refused(&|t| t.protocol = "grpc".into()).contains("telemetry.protocol"));
        for bad in [
            "",
            "127.0.0.1:4318",
            "http://",
            "http://host:port",
            "ftp://host",
            "http://[::1",
        ] {
            let err = refused(&|t| t.endpoint = bad.into());
            assert!(err.contains("telemetry.endpoint"), "{bad}: {err}");
        }
        let mut s = Settings::default();
        for good in [
            "http://127.0.0.1:4318",
            "https://otel.example.com/",
            "http://[::1]:4318",
            "http://collector",
        ] {
            s.telemetry.endpoint = good.into();
            s.check().unwrap_or_else(|e| panic!("{good}: {e}"));
        }
    }

    #[test]
    fn metrics_settings_out_of_bounds_are_refused_by_name() {
        let mut s = Settings::default();
        s.metrics.min_interval = Duration::from_millis(10);
        assert!(
            s.check()
                .unwrap_err()
                .to_string()
                .contains("metrics.min_interval")
        );
        let mut s = Settings::default();
        s.metrics.max_topics = MAX_METRICS_TOPICS + 1;
        assert!(
            s.check()
                .unwrap_err()
                .to_string()
                .contains("metrics.max_topics")
        );
        s.metrics.max_topics = 0;
        s.check().unwrap();
    }

    #[test]
    fn bad_log_level_is_refused() {
        let mut s = Settings::default();
        s.log.level = "verbose".into();
        assert!(s.check().unwrap_err().to_string().contains("log.level"));
        s.log.level = "keyfire=debug,info".into();
        s.check().unwrap();
        s.log.level = "WARN".into();
        s.check().unwrap();
    }

    #[test]
    fn unknown_setting_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.toml");
        std::fs::write(&path, "[node]\nsweep_intervall = \"1s\"\n").unwrap();
        let err = Settings::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("sweep_intervall"), "{err}");
    }

    #[test]
    fn declared_flow_limits_load_and_a_zero_bound_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.toml");
        let ok = "[[flow_limits]]\nkey = \"host:api.example.com\"\nrate = 100\nin_flight = 10\n\n[[flow_limits]]\nkey = \"mail\"\nin_flight = 2\n";
        std::fs::write(&path, ok).unwrap();
        let s = Settings::load(Some(&path)).unwrap();
        assert_eq!(s.flow_limits.len(), 2);
        assert_eq!(
            (s.flow_limits[0].rate, s.flow_limits[1].in_flight),
            (Some(100), Some(2))
        );
        std::fs::write(&path, ok.replace("in_flight = 2", "in_flight = 0")).unwrap();
        let err = Settings::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("flow_limits[1].in_flight"), "{err}");
    }

    fn env(vars: &[(&str, &str)]) -> Vec<(String, String)> {
        vars.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn redis_deployment_settings_come_from_the_environment() {
        let s = Settings::load_from(
            None,
            env(&[
                ("KEYFIRE__REDIS__MODE", "cluster"),
                (
                    "KEYFIRE__REDIS__NODES",
                    "redis://10.0.0.1:7000, redis://10.0.0.2:7000,10.0.0.3:7000",
                ),
                ("KEYFIRE__REDIS__USERNAME", "keyfire"),
                ("KEYFIRE__REDIS__PASSWORD", "0042"),
                ("KEYFIRE__REDIS__TLS", "true"),
                ("KEYFIRE__REDIS__TLS_INSECURE", "true"),
                ("KEYFIRE__REDIS__SHARDS", "16"),
                ("KEYFIRE__API__TOKEN", "12345"),
                ("OTHER__REDIS__MODE", "sentinel"),
            ]),
        )
        .unwrap();
        let r = &s.redis;
        assert_eq!(r.mode, RedisMode::Cluster);
        assert_eq!(
            r.nodes,
            [
                "redis://10.0.0.1:7000",
                "redis://10.0.0.2:7000",
                "10.0.0.3:7000"
            ]
        );
        assert_eq!(r.username.as_deref(), Some("keyfire"));
        // Numeric-looking strings stay strings.
        assert_eq!(r.password.as_deref(), Some("0042"));
        assert_eq!(s.api.token, "12345");
        assert!(r.tls && r.tls_insecure);
        assert_eq!(r.shards, 16);

        let s = Settings::load_from(
            None,
            env(&[
                ("KEYFIRE__REDIS__MODE", "sentinel"),
                ("KEYFIRE__REDIS__NODES", "127.0.0.1:26379"),
                ("KEYFIRE__REDIS__SENTINEL_MASTER", "orders"),
            ]),
        )
        .unwrap();
        assert_eq!(s.redis.mode, RedisMode::Sentinel);
        assert_eq!(s.redis.nodes, ["127.0.0.1:26379"]);
        assert_eq!(s.redis.sentinel_master, "orders");

        let err = Settings::load_from(None, env(&[("KEYFIRE__REDIS__MODE", "galaxy")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("galaxy"), "{err}");
    }

    #[test]
    fn redis_deployment_settings_load_from_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.toml");
        std::fs::write(
            &path,
            "[redis]\nmode = \"sentinel\"\nnodes = [\"redis://s1:26379\", \"redis://s2:26379\"]\n",
        )
        .unwrap();
        let s = Settings::load_from(Some(&path), Vec::new()).unwrap();
        assert_eq!(s.redis.mode, RedisMode::Sentinel);
        assert_eq!(s.redis.nodes.len(), 2);
        assert_eq!(s.redis.sentinel_master, "mymaster");
        assert_eq!(s.redis.shards, 1);
    }

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
        s.check().unwrap();
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

        // The files are not read by the check (a remote CLI loads the same settings).
        let s = Settings::load_from(
            None,
            env(&[
                ("KEYFIRE__HANDLERS__HTTP__CA_FILE", "/nowhere/ca.pem"),
                ("KEYFIRE__HANDLERS__HTTP__CLIENT_CERT", "/nowhere/c.pem"),
                ("KEYFIRE__HANDLERS__HTTP__CLIENT_KEY", "/nowhere/k.pem"),
            ]),
        )
        .unwrap();
        assert_eq!(s.handlers.http.ca_file, Some("/nowhere/ca.pem".into()));
        assert_eq!(
            s.handlers.http.default_tls().client_key,
            Some("/nowhere/k.pem".into())
        );
        let toml = r#"
[handlers.http.tls."*.internal.example"]
ca_file = "/etc/keyfire/internal-ca.pem"
client_cert = "/etc/keyfire/client.pem"
client_key = "/etc/keyfire/client.key"
"#;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keyfire.toml");
        std::fs::write(&path, toml).unwrap();
        let s = Settings::load_from(Some(&path), env(&[])).unwrap();
        let tls = &s.handlers.http.tls["*.internal.example"];
        assert_eq!(tls.client_key, Some("/etc/keyfire/client.key".into()));
        assert!(format!("{s:?}").contains("internal-ca.pem"));
    }

    #[test]
    fn blocked_networks_come_from_the_environment() {
        let s = Settings::load_from(
            None,
            env(&[(
                "KEYFIRE__HANDLERS__HTTP__BLOCKED_NETWORKS",
                "169.254.0.0/16, 10.0.0.0/8",
            )]),
        )
        .unwrap();
        assert_eq!(
            s.handlers.http.blocked_networks,
            ["169.254.0.0/16", "10.0.0.0/8"]
        );
        assert_eq!(s.handlers.http.blocked_nets().unwrap().len(), 2);
    }
}
