//! The server's settings: the library's sections (`[redis]`, `[node]`, `[limits]`,
//! `[handlers]`, see [`keyfire::config`]) and the server's own (`[api]`, `[log]`,
//! `[telemetry]`, `[metrics]`, `prune`, `[[jobs]]`, `[[flow_limits]]`, `[[topics]]`,
//! `[[calendars]]`), loaded
//! from shipped defaults, then a TOML file, then `KEYFIRE__SECTION__KEY` environment variables.

use std::path::Path;
use std::time::Duration;

use keyfire::config::{HandlerSettings, InputLimits, NodeSettings, RedisSettings, Settings};
use keyfire::error::{Error, Result};
use keyfire::job::{CalendarSpec, FlowLimitSpec, JobSpec};
use serde::{Deserialize, Serialize};

mod tokens;
pub use tokens::{ApiToken, MAX_TOKEN_NAME_LEN, Scope, topic_matches};

/// Everything `keyfire serve` and the other commands read from configuration: the library's
/// settings (the first four fields, handed to the node and the client by
/// [`ServerSettings::library`]) and the server's own.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSettings {
    // The library's `Settings` (crates/keyfire/src/config/mod.rs), repeated: serde cannot combine
    // `#[serde(flatten)]` with `deny_unknown_fields`.
    /// Where Redis is and how keyfire uses it.
    pub redis: RedisSettings,
    /// How this node claims and runs firings.
    pub node: NodeSettings,
    /// Bounds on the size of jobs' params and tasks' payloads.
    pub limits: InputLimits,
    /// Settings of the built-in handlers.
    pub handlers: HandlerSettings,
    /// Logging.
    pub log: LogSettings,
    /// OpenTelemetry traces, exported by the server (off by default). The library itself only
    /// emits `tracing` spans; this section tells the server what to do with them.
    pub telemetry: TelemetrySettings,
    /// Delete recurring jobs in Redis that are not declared in `jobs` when the node starts.
    pub prune: bool,
    /// The REST API the node serves.
    pub api: ApiSettings,
    /// The cluster-wide figures `/metrics` reads from Redis (queue, scheduler, memory).
    pub metrics: MetricsSettings,
    /// Jobs declared in the file, upserted (by id) when the node starts.
    pub jobs: Vec<JobSpec>,
    /// Flow-control limits declared in the file (`[[flow_limits]]`: `key`, `rate`,
    /// `in_flight`), set when the node starts. (`[limits]` is the input bounds above.)
    pub flow_limits: Vec<FlowLimitSpec>,
    /// Delay-queue topics declared in the file (`[[topics]]`: `name`, `partitions`), set when
    /// the node starts.
    pub topics: Vec<TopicDecl>,
    /// Calendars declared in the file (`[[calendars]]`: `name`, `tz`, `dates`, `ranges`,
    /// `cron`), written when the node starts, before the jobs that name them.
    pub calendars: Vec<CalendarSpec>,
}

/// A delay-queue topic declared in the file (`[[topics]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicDecl {
    /// The topic's name.
    pub name: String,
    /// How many partitions its tasks spread over (1 to 64; see `keyfire::queue`).
    #[serde(default = "one_partition")]
    pub partitions: usize,
}

fn one_partition() -> usize {
    1
}

impl From<&ServerSettings> for Settings {
    fn from(s: &ServerSettings) -> Self {
        s.library()
    }
}

impl From<ServerSettings> for Settings {
    fn from(s: ServerSettings) -> Self {
        s.library()
    }
}

impl ServerSettings {
    /// The library's part, for the node and the client. The `http` handler learns the API's
    /// address from it (`handlers.http.own_api`, refused under `handlers.http.block_own_api`)
    /// when the API is enabled.
    pub fn library(&self) -> Settings {
        let mut handlers = self.handlers.clone();
        handlers.http.own_api = self.api.enabled.then(|| self.api.listen.clone());
        Settings {
            redis: self.redis.clone(),
            node: self.node.clone(),
            limits: self.limits.clone(),
            handlers,
        }
    }
}

/// The REST API a node serves (`/v1`, `/healthz`, `/readyz`).
#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiSettings {
    /// Serve the API from `keyfire serve`.
    pub enabled: bool,
    /// `host:port` to listen on. A non-loopback address needs a `token`, and so does a host
    /// name other than `localhost` (it may resolve to any address).
    pub listen: String,
    /// Bearer token every `/v1` request must carry, allowed everything (the `admin` scope);
    /// empty: no auth (loopback only), unless `tokens` names some.
    pub token: String,
    /// Named bearer tokens, each allowed some scopes (`[[api.tokens]]`: `name`, `secret` or
    /// `secret_env`, `scopes`, `topics`); see docs/security.md.
    pub tokens: Vec<ApiToken>,
    /// Largest request body, in bytes (413 past it).
    pub max_body_bytes: usize,
}

impl Default for ApiSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: "127.0.0.1:8080".into(),
            token: String::new(),
            tokens: Vec::new(),
            max_body_bytes: 1024 * 1024,
        }
    }
}

impl ApiSettings {
    /// Whether requests need a bearer token: `token` or `tokens` is set.
    pub fn auth_enabled(&self) -> bool {
        !self.token.is_empty() || !self.tokens.is_empty()
    }
}

/// Secrets never appear in debug output (logs).
impl std::fmt::Debug for ApiSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiSettings")
            .field("enabled", &self.enabled)
            .field("listen", &self.listen)
            .field("token", &tokens::redacted(&self.token))
            .field("tokens", &self.tokens)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish()
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
    #[serde(with = "keyfire::job::duration_serde")]
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

impl ServerSettings {
    /// Load defaults, then `file` (if given), then `KEYFIRE__SECTION__KEY` environment variables.
    ///
    /// A list setting from the environment is comma-separated:
    /// `KEYFIRE__REDIS__NODES=redis://a:7000,redis://b:7000`.
    pub fn load(file: Option<&Path>) -> Result<Self> {
        Self::load_from(file, std::env::vars())
    }

    /// [`ServerSettings::load`] with the given environment instead of the process's.
    pub fn load_from(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self> {
        let env: Vec<(String, String)> = env.into_iter().collect();
        // Every variable, for the tokens' `secret_env`.
        let all_env: std::collections::HashMap<String, String> = env.iter().cloned().collect();
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
        for key in Settings::LIST_KEYS {
            let var = format!("KEYFIRE__{}", key.replace('.', "__").to_ascii_uppercase());
            if let Some((_, value)) = env.iter().find(|(k, _)| k.eq_ignore_ascii_case(&var)) {
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
        let mut settings: ServerSettings = builder
            .build()
            .and_then(|c| c.try_deserialize())
            .map_err(|e| Error::Config(e.to_string()))?;
        tokens::resolve_secrets(&mut settings.api.tokens, &all_env)?;
        settings.check()?;
        Ok(settings)
    }

    /// Refuse settings that cannot work, naming the setting: the library's
    /// ([`Settings::check`]) and the server's.
    pub fn check(&self) -> Result<()> {
        let bad = |name: &str, why: &str| Err(Error::Config(format!("{name}: {why}")));
        self.library().check()?;
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
        for (i, c) in self.calendars.iter().enumerate() {
            if let Err(e) = c.clone().validate() {
                return bad(&format!("calendars[{i}].{}", e.field), &e.message);
            }
        }
        for (i, t) in self.topics.iter().enumerate() {
            let checked = keyfire::queue::check_topic(&t.name)
                .map_err(|e| ("name", e))
                .and_then(|_| {
                    keyfire::queue::check_partitions(t.partitions).map_err(|e| ("partitions", e))
                });
            if let Err((field, e)) = checked {
                let message = match e {
                    Error::Invalid(v) => v.message,
                    other => other.to_string(),
                };
                return bad(&format!("topics[{i}].{field}"), &message);
            }
        }
        tokens::check_tokens(&self.api.tokens, &self.api.token)?;
        if self.api.enabled && !self.api.auth_enabled() {
            match self.api.listen.parse::<std::net::SocketAddr>() {
                Ok(addr) if !addr.ip().is_loopback() => {
                    return bad(
                        "api.listen",
                        "a non-loopback address needs api.token or api.tokens (bearer auth); set a token or listen on 127.0.0.1",
                    );
                }
                Ok(_) => {}
                // A host name may resolve to any address, and to another one tomorrow: without
                // a token only `localhost` (loopback by definition) is taken.
                Err(_) if !is_localhost_name(&self.api.listen) => {
                    return Err(Error::Config(format!(
                        "api.listen: '{}' is a host name, which may resolve to a non-loopback \
                         address; without api.token or api.tokens only a loopback address (127.0.0.1:8080, \
                         [::1]:8080) or localhost is allowed: set api.token or api.tokens (bearer auth) or \
                         listen on 127.0.0.1",
                        self.api.listen
                    )));
                }
                Err(_) => {}
            }
        }
        self.telemetry.check()?;
        Ok(())
    }
}

/// Whether a `host:port` listen address names `localhost` (or a name under it, RFC 6761).
fn is_localhost_name(listen: &str) -> bool {
    let host = listen.rsplit_once(':').map_or(listen, |(h, _)| h);
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost")
}

/// The server's tests keep the server's settings in their world (its API and log sections
/// beside the library's).
#[cfg(feature = "lab")]
impl keyfire_testkit::world::WorldSettings for ServerSettings {
    fn library(&self) -> Settings {
        ServerSettings::library(self)
    }
    fn redis(&self) -> &keyfire::config::RedisSettings {
        &self.redis
    }
    fn redis_mut(&mut self) -> &mut keyfire::config::RedisSettings {
        &mut self.redis
    }
    fn node_mut(&mut self) -> &mut keyfire::config::NodeSettings {
        &mut self.node
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyfire::config::{HttpHandlerSettings, RedisMode};

    #[test]
    fn the_library_part_knows_the_api_address_only_when_the_api_is_served() {
        let mut s = ServerSettings::default();
        s.redis.prefix = "p".into();
        s.node.history_limit = 7;
        s.limits.max_params_bytes = 9;
        s.handlers.command.max_output_bytes = 11;
        let lib = s.library();
        assert_eq!(
            (lib.redis.prefix.as_str(), lib.node.history_limit),
            ("p", 7)
        );
        assert_eq!(
            (
                lib.limits.max_params_bytes,
                lib.handlers.command.max_output_bytes
            ),
            (9, 11)
        );
        assert_eq!(lib.handlers.http.own_api.as_deref(), Some("127.0.0.1:8080"));
        s.api.enabled = false;
        assert_eq!(s.library().handlers.http.own_api, None);
        // A library-only service names no API address at all.
        assert_eq!(Settings::default().handlers.http.own_api, None);
    }

    #[test]
    fn the_file_format_is_the_library_sections_plus_the_servers() {
        // The sections of each, from their serialized defaults.
        let server = ServerSettings::default();
        let serialized = serde_json::to_value(&server).unwrap();
        let all = serialized.as_object().unwrap();
        let library = serde_json::to_value(server.library()).unwrap();
        let library = library.as_object().unwrap();
        assert!(!library.is_empty());
        // Each of the library's sections is the server's section of that name...
        let mut part = all.clone();
        part.retain(|k, _| library.contains_key(k));
        assert_eq!(&part, library);
        // ...and the library refuses each of the server's own.
        let own: Vec<&String> = all.keys().filter(|k| !library.contains_key(*k)).collect();
        assert!(!own.is_empty());
        for key in own {
            let mut one = serde_json::Map::new();
            one.insert(key.clone(), all[key].clone());
            let err = serde_json::from_value::<Settings>(one.into())
                .unwrap_err()
                .to_string();
            assert!(err.contains(key.as_str()), "{key}: {err}");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.toml");
        std::fs::write(&path, "[apii]\nenabled = false\n").unwrap();
        let err = ServerSettings::load_from(Some(&path), Vec::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("apii"), "{err}");
        std::fs::write(&path, "[handlers.http]\nown_api = \"127.0.0.1:1\"\n").unwrap();
        let err = ServerSettings::load_from(Some(&path), Vec::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("own_api"), "{err}");
    }

    #[test]
    fn a_host_name_without_a_token_is_refused() {
        let mut s = ServerSettings::default();
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
    fn the_example_file_matches_the_defaults_where_it_says_so() {
        // The shipped example lives at the workspace root.
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("keyfire.example.toml");
        let s = ServerSettings::load(Some(&path)).unwrap();
        assert_eq!(s.redis.prefix, "keyfire");
        assert!(!s.jobs.is_empty());
        let http = HttpHandlerSettings::default();
        assert_eq!(s.handlers.http.blocked_networks, http.blocked_networks);
        assert_eq!(s.handlers.http.block_own_api, http.block_own_api);
    }

    #[test]
    fn bad_telemetry_settings_are_refused_by_name() {
        let refused = |f: &dyn Fn(&mut TelemetrySettings)| {
            let mut s = ServerSettings::default();
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
        let mut s = ServerSettings::default();
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
        let mut s = ServerSettings::default();
        s.metrics.min_interval = Duration::from_millis(10);
        assert!(
            s.check()
                .unwrap_err()
                .to_string()
                .contains("metrics.min_interval")
        );
        let mut s = ServerSettings::default();
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
        let mut s = ServerSettings::default();
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
        let err = ServerSettings::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("sweep_intervall"), "{err}");
    }

    #[test]
    fn declared_flow_limits_load_refusing_a_zero_bound_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.toml");
        let ok = "[[flow_limits]]\nkey = \"host:api.example.com\"\nrate = 100\nin_flight = 10\n\n[[flow_limits]]\nkey = \"mail\"\nin_flight = 2\n";
        std::fs::write(&path, ok).unwrap();
        let s = ServerSettings::load(Some(&path)).unwrap();
        assert_eq!(s.flow_limits.len(), 2);
        assert_eq!(
            (s.flow_limits[0].rate, s.flow_limits[1].in_flight),
            (Some(100), Some(2))
        );
        std::fs::write(&path, ok.replace("in_flight = 2", "in_flight = 0")).unwrap();
        let err = ServerSettings::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("flow_limits[1].in_flight"), "{err}");
    }

    #[test]
    fn declared_topics_load_refusing_a_bad_partition_count_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.toml");
        let ok = "[[topics]]\nname = \"orders\"\npartitions = 4\n\n[[topics]]\nname = \"mail\"\n";
        std::fs::write(&path, ok).unwrap();
        let s = ServerSettings::load(Some(&path)).unwrap();
        assert_eq!(
            s.topics,
            vec![
                TopicDecl {
                    name: "orders".into(),
                    partitions: 4
                },
                TopicDecl {
                    name: "mail".into(),
                    partitions: 1
                }
            ]
        );
        for bad in ["partitions = 0", "partitions = 65"] {
            std::fs::write(&path, ok.replace("partitions = 4", bad)).unwrap();
            let err = ServerSettings::load(Some(&path)).unwrap_err().to_string();
            assert!(err.contains("topics[0].partitions"), "{err}");
        }
        std::fs::write(&path, ok.replace("\"orders\"", "\"bad:name\"")).unwrap();
        let err = ServerSettings::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("topics[0].name"), "{err}");
    }

    fn env(vars: &[(&str, &str)]) -> Vec<(String, String)> {
        vars.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn redis_deployment_settings_come_from_the_environment() {
        let s = ServerSettings::load_from(
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

        let s = ServerSettings::load_from(
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

        let err = ServerSettings::load_from(None, env(&[("KEYFIRE__REDIS__MODE", "galaxy")]))
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
        let s = ServerSettings::load_from(Some(&path), Vec::new()).unwrap();
        assert_eq!(s.redis.mode, RedisMode::Sentinel);
        assert_eq!(s.redis.nodes.len(), 2);
        assert_eq!(s.redis.sentinel_master, "mymaster");
        assert_eq!(s.redis.shards, 1);
    }

    #[test]
    fn http_tls_files_load_from_the_environment_and_a_file_unread() {
        // The files are not read by the check (a remote CLI loads the same settings).
        let s = ServerSettings::load_from(
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
        let s = ServerSettings::load_from(Some(&path), env(&[])).unwrap();
        let tls = &s.handlers.http.tls["*.internal.example"];
        assert_eq!(tls.client_key, Some("/etc/keyfire/client.key".into()));
        assert!(format!("{s:?}").contains("internal-ca.pem"));
    }

    #[test]
    fn blocked_networks_come_from_the_environment() {
        let s = ServerSettings::load_from(
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
