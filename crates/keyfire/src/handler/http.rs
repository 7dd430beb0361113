//! The `http` built-in handler: call a URL; a 2xx answer is success. Every request is signed by
//! the Standard Webhooks spec (see [`super::webhook`]) and guarded against server-side request
//! forgery. The whole story for users is in `docs/delivery.md`.
//!
//! Params (JSON):
//!
//! | field | meaning |
//! | --- | --- |
//! | `url` | required; `http://` or `https://`, its host must be in `handlers.http.allowed_hosts` |
//! | `method` | default `GET` (`POST` when a `body` is given) |
//! | `headers` | object of header name to value (not `webhook-id`, `webhook-timestamp`, `webhook-signature`) |
//! | `body` | a string, or any other JSON value (sent as JSON with `content-type: application/json`) |
//! | `timeout` | such as `"10s"`; default `handlers.http.timeout`, at most `handlers.http.max_timeout` |
//! | `signing_secrets` | one `whsec_…` secret, or two while rotating; default: the secrets `handlers.http.signing_secrets` gives the target host |
//! | `callbacks` | `{"success": url, "failure": url}`: a signed summary is POSTed after a successful run, and after the last attempt fails (queued in Redis with the outcome: see [`super::Report`]) |
//!
//! `{{job_id}}`, `{{firing_id}}`, `{{scheduled_at}}` (RFC 3339) and `{{attempt}}` in the URL,
//! header values and body are replaced by the firing's values.
//!
//! Each request carries `webhook-id` (the firing id: the same on every attempt, so it is the
//! idempotency key), `webhook-timestamp` (Unix seconds, by Redis's clock), `webhook-signature`
//! (when a secret applies), `keyfire-job-id`, `keyfire-attempt`, `keyfire-fence` (the
//! attempt's fencing token `<attempt>:<claimed ms>`: compare as a pair of numbers, and refuse
//! a request whose token is below the greatest seen for its `webhook-id`),
//! `keyfire-scheduled-at` and a W3C `traceparent` whose trace id is derived from the firing id (so every attempt of a
//! firing is one trace), unless the job's headers give their own.
//!
//! A non-2xx answer, a timeout or a connection error is a failed attempt
//! ([`HandlerError::retry`], honouring `Retry-After` on 429 and 503); a host that is not allowed,
//! an address that is blocked, or params that cannot work, fail without retry
//! ([`HandlerError::abort`]). Redirects are followed (at most 10) under the same rules as the
//! first request: allowed hosts, blocked networks, and a fresh signature when the body changes.
//!
//! Names are resolved by the handler's own resolver, which drops the addresses in
//! `handlers.http.blocked_networks` (link-local and cloud metadata by default) and, for the
//! port of the API the process serves (`handlers.http.own_api`), its own addresses; IP
//! literals are checked the same way before connecting. So the check is made on the address
//! actually connected to, and a DNS answer that changes between a check and the connection
//! (rebinding) cannot get around it.
//! System proxy variables are ignored for the same reason.
//!
//! TLS (`tls`): `https://` is verified against the system's CA store, or, when the system has
//! none (a slim container image), the bundled Mozilla roots, with one warning; plus the CA
//! certificates of `handlers.http.ca_file`. `handlers.http.client_cert` and `client_key` give a
//! client certificate (mutual TLS), and `handlers.http.tls."<host pattern>"` gives other
//! files to the hosts it matches (patterns as in `allowed_hosts`, the most specific wins): the
//! host of each request (every redirect hop, every callback) picks the client that sends it.
//! The files are read when the handler is built; a handler that cannot be built is an error
//! naming the setting ([`HttpHandler::new`]), never a panic.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use ipnet::IpNet;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::Value;
use tracing::Instrument;

use super::webhook::{self, SigningSecret};
use super::{Callback, CallbackCall, CallbackSender, Firing, Handler, HandlerError, HandlerResult};
use crate::config::{HttpHandlerSettings, Settings};
use crate::error::{Error, Result};
use crate::job::ValidationError;
use crate::trace::{Start, TraceParent, Tracer, Value as TraceValue};

mod tls;

/// The TLS configuration the `http` handler uses with default settings: the system's CA
/// store, or the bundled Mozilla roots when it has none (one warning). For other `reqwest`
/// clients of the process (`.tls_backend_preconfigured(..)`), whose default TLS setup fails to
/// build without a system CA store. Its crypto provider is the process default when one is
/// installed, else rustls's ring provider (not installed process-wide).
pub fn default_client_tls() -> Result<rustls::ClientConfig> {
    let profiles = tls::Profiles::load(
        &HttpHandlerSettings::default(),
        tls::DefaultRoots::system(),
        &tls::default_provider(),
    )?;
    Ok(profiles.default.config)
}

use super::template::render;

/// Whether `host` matches one of `allowed`: an exact name, `*.suffix` (any subdomain, not the
/// bare suffix), or `*`. Names compare case-insensitively.
pub fn host_allowed(allowed: &[String], host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    allowed.iter().any(|pattern| {
        let pattern = pattern.trim().to_ascii_lowercase();
        if pattern == "*" {
            true
        } else if let Some(suffix) = pattern.strip_prefix("*.") {
            host.len() > suffix.len() + 1
                && host.ends_with(suffix)
                && host[..host.len() - suffix.len()].ends_with('.')
        } else {
            // Bracketed IPv6 literals appear without brackets in `Url::host_str`.
            pattern.trim_start_matches('[').trim_end_matches(']') == host
        }
    })
}

/// Sort `(pattern, value)` pairs so that the first whose pattern matches a host (by
/// [`host_allowed`]) is the most specific: exact names, then longer suffixes, `*` last.
fn most_specific_first<T>(patterns: &mut [(String, T)]) {
    patterns.sort_by_key(|(p, _)| (p == "*", p.starts_with("*."), std::cmp::Reverse(p.len())));
}

/// The entry of the first pattern (in [`most_specific_first`] order) that matches `host`.
fn for_host<'a, T>(patterns: &'a [(String, T)], host: &str) -> Option<&'a T> {
    patterns
        .iter()
        .find(|(pattern, _)| host_allowed(std::slice::from_ref(pattern), host))
        .map(|(_, v)| v)
}

/// Headers a job may not set: they carry the signature.
const RESERVED_HEADERS: [&str; 3] = ["webhook-id", "webhook-timestamp", "webhook-signature"];
/// Redirects followed at most.
const MAX_REDIRECTS: usize = 10;
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    url: String,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    body: Option<Value>,
    #[serde(default)]
    timeout: Option<String>,
    #[serde(default)]
    signing_secrets: Vec<String>,
    #[serde(default)]
    callbacks: Callbacks,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Callbacks {
    #[serde(default)]
    success: Option<String>,
    #[serde(default)]
    failure: Option<String>,
}

fn parse_secrets(field: &str, texts: &[String]) -> Result<Vec<SigningSecret>, ValidationError> {
    if texts.len() > webhook::MAX_ACTIVE_SECRETS {
        return Err(ValidationError::new(
            field,
            "give one secret, or two while rotating (both sign)",
        ));
    }
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            SigningSecret::parse(t)
                .map_err(|why| ValidationError::new(format!("{field}[{i}]"), why))
        })
        .collect()
}

/// An IP literal host (`1.2.3.4`, `[::1]`), as `Url::host_str` gives it.
fn ip_literal(host: &str) -> Option<IpAddr> {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// Check a URL a job gives (the target or a callback) against the host rules, without
/// resolving names (that happens on every connection).
fn check_url(
    field: &str,
    text: &str,
    settings: &HttpHandlerSettings,
) -> Result<(), ValidationError> {
    // A templated URL is only known at run time; it is checked then.
    if text.contains("{{") {
        return Ok(());
    }
    let url = reqwest::Url::parse(text)
        .map_err(|e| ValidationError::new(field, format!("'{text}' is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ValidationError::new(
            field,
            format!("scheme must be http or https, not '{}'", url.scheme()),
        ));
    }
    let host = url.host_str().unwrap_or_default();
    if !host_allowed(&settings.allowed_hosts, host) {
        return Err(ValidationError::new(
            field,
            format!("host '{host}' is not in handlers.http.allowed_hosts"),
        ));
    }
    if let Some(ip) = ip_literal(host) {
        let guard = Guard::new(settings, None);
        if let Some(why) = guard.refuse(ip, false) {
            return Err(ValidationError::new(field, why));
        }
    }
    Ok(())
}

/// Check the params of an `http` job as a node with `settings` would run them, naming the
/// field (`params.signing_secrets[0]`, `params.callbacks.failure`, …). Called when a job is
/// created or replaced, so bad params are refused then rather than failing every run.
pub fn check_params(params: &Value, settings: &HttpHandlerSettings) -> Result<(), ValidationError> {
    let p: Params = serde_json::from_value(params.clone())
        .map_err(|e| ValidationError::new("params", format!("http: {e}")))?;
    check_url("params.url", &p.url, settings)?;
    if let Some(m) = &p.method {
        reqwest::Method::from_bytes(m.to_ascii_uppercase().as_bytes())
            .map_err(|_| ValidationError::new("params.method", format!("'{m}' is not a method")))?;
    }
    if let Some(t) = &p.timeout {
        crate::job::parse_duration(t).map_err(|e| ValidationError::new("params.timeout", e))?;
    }
    for (name, value) in &p.headers {
        let field = format!("params.headers.{name}");
        if HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(ValidationError::new(field, "is not a header name"));
        }
        if RESERVED_HEADERS
            .iter()
            .any(|r| name.eq_ignore_ascii_case(r))
        {
            return Err(ValidationError::new(
                field,
                "is set by keyfire (the Standard Webhooks signature); configure signing_secrets instead",
            ));
        }
        if HeaderValue::from_str(value).is_err() {
            return Err(ValidationError::new(field, "is not a valid header value"));
        }
    }
    parse_secrets("params.signing_secrets", &p.signing_secrets)?;
    if let Some(u) = &p.callbacks.success {
        check_url("params.callbacks.success", u, settings)?;
    }
    if let Some(u) = &p.callbacks.failure {
        check_url("params.callbacks.failure", u, settings)?;
    }
    Ok(())
}

/// Replace the signing secrets in an `http` job's params by their redacted forms (a
/// fingerprint), for showing the job back (API, dashboard, logs).
pub fn redact_params(params: &mut Value) {
    if let Some(Value::Array(secrets)) = params.get_mut("signing_secrets") {
        for s in secrets {
            if let Value::String(text) = s {
                *text = webhook::redact(text);
            }
        }
    }
}

/// What the handler refuses to connect to.
#[derive(Debug)]
struct Guard {
    blocked: Vec<IpNet>,
    own: Option<OwnApi>,
}

/// The node's own API address, when `handlers.http.block_own_api` is on.
#[derive(Debug)]
struct OwnApi {
    port: u16,
    ips: Vec<IpAddr>,
    /// It listens on every interface (`0.0.0.0`, `::`).
    any_local: bool,
}

impl Guard {
    fn new(settings: &HttpHandlerSettings, own_api: Option<&str>) -> Self {
        Self {
            // `Settings::check` refused bad entries; one that slipped through blocks nothing.
            blocked: settings.blocked_nets().unwrap_or_default(),
            own: own_api
                .filter(|_| settings.block_own_api)
                .and_then(OwnApi::from_listen),
        }
    }

    /// Why `ip` may not be connected to (`None`: it may). `own_port`: the connection goes to
    /// the port of the node's own API.
    fn refuse(&self, ip: IpAddr, own_port: bool) -> Option<String> {
        let ip = ip.to_canonical();
        for candidate in [Some(ip), embedded_v4(ip).map(IpAddr::V4)]
            .into_iter()
            .flatten()
        {
            if let Some(net) = self.blocked.iter().find(|n| n.contains(&candidate)) {
                return Some(format!(
                    "address {ip} is in {net}, which handlers.http.blocked_networks refuses"
                ));
            }
        }
        if own_port
            && let Some(own) = &self.own
            && own.is_own(ip)
        {
            return Some(format!(
                "address {ip} port {} is this node's own API (handlers.http.block_own_api)",
                own.port
            ));
        }
        None
    }
}

/// The IPv4 address inside an IPv6 one that reaches it: NAT64 (`64:ff9b::/96`), 6to4
/// (`2002::/16`) and IPv4-compatible (`::a.b.c.d`). IPv4-mapped addresses are made IPv4 by
/// `to_canonical` already.
fn embedded_v4(ip: IpAddr) -> Option<Ipv4Addr> {
    let IpAddr::V6(v6) = ip else { return None };
    let s = v6.segments();
    let o = v6.octets();
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4] {
        return Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    if s[..6] == [0; 6] && !v6.is_loopback() && !v6.is_unspecified() {
        return Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    None
}

impl OwnApi {
    fn from_listen(listen: &str) -> Option<Self> {
        use std::net::ToSocketAddrs;
        let addrs: Vec<SocketAddr> = listen.to_socket_addrs().ok()?.collect();
        let port = addrs.first()?.port();
        Some(Self {
            port,
            ips: addrs.iter().map(|a| a.ip().to_canonical()).collect(),
            any_local: addrs.iter().any(|a| a.ip().is_unspecified()),
        })
    }

    fn is_own(&self, ip: IpAddr) -> bool {
        // Connecting to 0.0.0.0 or :: reaches this host.
        ip.is_unspecified()
            || self.ips.contains(&ip)
            || (ip.is_loopback() && (self.any_local || self.ips.iter().any(IpAddr::is_loopback)))
            // Listening on every interface: any address of this host, and a socket binds only
            // to an address of this host.
            || (self.any_local && std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok())
    }
}

/// A connection refused by the guard (found in a `reqwest` error's sources).
#[derive(Debug)]
struct Blocked(String);

impl std::fmt::Display for Blocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Blocked {}

/// Resolves names and drops the addresses the guard refuses, so the check is made on the very
/// addresses the connection uses.
struct GuardedResolver {
    guard: Arc<Guard>,
    own_port: bool,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.guard.clone();
        let own_port = self.own_port;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refused = None;
            let allowed: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| match guard.refuse(a.ip(), own_port) {
                    None => true,
                    Some(why) => {
                        refused.get_or_insert(why);
                        false
                    }
                })
                .collect();
            match (allowed.is_empty(), refused) {
                (true, Some(why)) => Err(Box::new(Blocked(format!("'{host}' resolves to {why}")))
                    as Box<dyn std::error::Error + Send + Sync>),
                _ => Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs),
            }
        })
    }
}

/// The `http` handler.
#[derive(Clone)]
pub struct HttpHandler {
    inner: Arc<Inner>,
}

struct Inner {
    settings: HttpHandlerSettings,
    guard: Arc<Guard>,
    /// For hosts no `handlers.http.tls` pattern matches.
    clients: Clients,
    /// By `handlers.http.tls` pattern, most specific first.
    tls_clients: Vec<(String, Clients)>,
    /// `handlers.http.signing_secrets`, parsed.
    host_secrets: Vec<(String, Vec<SigningSecret>)>,
}

/// The clients of one TLS configuration.
struct Clients {
    /// For every port but the node's own API port.
    any_port: reqwest::Client,
    /// For the node's own API port: its resolver also drops the node's own addresses.
    own_port: reqwest::Client,
}

impl Clients {
    fn new(guard: &Arc<Guard>, tls: tls::Profile) -> Result<Self> {
        Ok(Self {
            any_port: build_client(guard.clone(), false, &tls)?,
            own_port: build_client(guard.clone(), true, &tls)?,
        })
    }
}

fn build_client(guard: Arc<Guard>, own_port: bool, tls: &tls::Profile) -> Result<reqwest::Client> {
    reqwest::Client::builder()
        // Followed by hand, so each hop passes the host rules and the guard.
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(Arc::new(GuardedResolver { guard, own_port }))
        // A proxy would resolve names itself, out of the guard's sight.
        .no_proxy()
        .user_agent(concat!("keyfire/", env!("CARGO_PKG_VERSION")))
        // Our own roots and identity, not the platform verifier's (which fails to build
        // without a system CA store).
        .tls_backend_preconfigured(tls.config.clone())
        .build()
        .map_err(|e| {
            let mut why = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                why.push_str(": ");
                why.push_str(&s.to_string());
                src = s.source();
            }
            Error::Config(format!(
                "{}: the http handler's client cannot be built: {why}",
                tls.setting
            ))
        })
}

impl HttpHandler {
    /// A handler with these settings. It refuses the API at `settings.own_api` when one is
    /// given (`handlers.http.block_own_api`). Fails, naming the setting, when a TLS file
    /// (`handlers.http.ca_file`, `client_cert`, `client_key`, `handlers.http.tls`) cannot be
    /// read or used.
    ///
    /// Its TLS uses the process's default rustls crypto provider when the process installed
    /// one, else rustls's ring provider, which it uses for its own connections without
    /// installing it process-wide. [`HttpHandler::with_provider`] chooses another.
    pub fn new(settings: &HttpHandlerSettings) -> Result<Self> {
        Self::with_provider(settings, tls::default_provider())
    }

    /// [`HttpHandler::new`] with the rustls crypto provider of every TLS connection it makes
    /// (aws-lc-rs, a FIPS build, ...), which is not installed process-wide.
    pub fn with_provider(
        settings: &HttpHandlerSettings,
        provider: Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<Self> {
        Self::build(
            settings,
            settings.own_api.as_deref(),
            tls::DefaultRoots::system(),
            &provider,
        )
    }

    /// The handler a node of `settings` runs: [`HttpHandler::new`] with
    /// `settings.handlers.http`.
    pub fn for_node(settings: &Settings) -> Result<Self> {
        Self::new(&settings.handlers.http)
    }

    fn build(
        settings: &HttpHandlerSettings,
        own_api: Option<&str>,
        roots: &tls::DefaultRoots,
        provider: &Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<Self> {
        let profiles = tls::Profiles::load(settings, roots, provider)?;
        let guard = Arc::new(Guard::new(settings, own_api));
        let clients = Clients::new(&guard, profiles.default)?;
        let tls_clients = profiles
            .by_host
            .into_iter()
            .map(|(pattern, profile)| Ok((pattern, Clients::new(&guard, profile)?)))
            .collect::<Result<Vec<_>>>()?;
        let mut host_secrets: Vec<(String, Vec<SigningSecret>)> = settings
            .signing_secrets
            .iter()
            .map(|(pattern, texts)| {
                // `Settings::check` refused bad secrets; one that slipped through is skipped.
                let secrets = texts
                    .iter()
                    .filter_map(|t| SigningSecret::parse(t).ok())
                    .collect();
                (pattern.trim().to_ascii_lowercase(), secrets)
            })
            .collect();
        most_specific_first(&mut host_secrets);
        Ok(Self {
            inner: Arc::new(Inner {
                settings: settings.clone(),
                guard,
                clients,
                tls_clients,
                host_secrets,
            }),
        })
    }
}

impl Handler for HttpHandler {
    fn run(&self, firing: Firing) -> BoxFuture<'static, HandlerResult> {
        let inner = self.inner.clone();
        Box::pin(async move { inner.call(firing).await })
    }
}

impl CallbackSender for HttpHandler {
    fn send(&self, call: CallbackCall) -> BoxFuture<'static, HandlerResult> {
        let inner = self.inner.clone();
        Box::pin(async move { inner.callback(call).await })
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The time of an attempt by Redis's clock: the claim's instant (Redis time) plus the time
/// since, so a node whose own clock is off still sends timestamps receivers accept.
#[derive(Debug, Clone, Copy)]
struct SendClock {
    base_ms: i64,
    since: Instant,
}

impl SendClock {
    fn new(claimed_at: chrono::DateTime<chrono::Utc>) -> Self {
        Self::at(claimed_at.timestamp_millis())
    }

    fn at(base_ms: i64) -> Self {
        Self {
            base_ms,
            since: Instant::now(),
        }
    }

    fn unix_secs(&self) -> i64 {
        (self.base_ms + self.since.elapsed().as_millis() as i64).div_euclid(1000)
    }
}

/// A W3C `traceparent`: the trace id is derived from the firing id (every attempt of a firing
/// is one trace), the parent id from the firing id and the attempt (see
/// [`TraceParent::for_attempt`]).
pub fn traceparent(firing_id: &str, attempt: u32) -> String {
    TraceParent::for_attempt(firing_id, attempt).to_string()
}

/// The span of one delivery (every redirect hop of it), a child of the handler's, only where
/// traces are exported. It takes the attempt's derived span id, so the `traceparent` sent is
/// its own context (with its sampling decision) and the receiver's spans are its children.
struct Delivery {
    tracer: &'static dyn Tracer,
    span: tracing::Span,
}

impl Delivery {
    fn start(f: &Firing, method: &reqwest::Method, url: &reqwest::Url) -> Option<Self> {
        let tracer = crate::trace::tracer()?;
        let span = tracing::info_span!("http", otel.kind = "client", otel.name = %method);
        if span.is_disabled() {
            return None;
        }
        let ids = TraceParent::for_attempt(&f.firing_id, f.attempt);
        tracer.start(
            &span,
            Start {
                span_id: Some(ids.span_id),
                ..Start::default()
            },
        );
        let port = url.port_or_known_default().map_or(0, i64::from);
        tracer.set_attributes(
            &span,
            &[
                ("http.request.method", TraceValue::Str(method.as_str())),
                ("url.full", TraceValue::Str(&url_without_secrets(url))),
                (
                    "server.address",
                    TraceValue::Str(url.host_str().unwrap_or_default()),
                ),
                ("server.port", TraceValue::Int(port)),
            ],
        );
        Some(Self { tracer, span })
    }

    /// The `traceparent` to send: this span's context.
    fn traceparent(&self, f: &Firing) -> String {
        self.tracer
            .context(&self.span)
            .unwrap_or_else(|| TraceParent::for_attempt(&f.firing_id, f.attempt))
            .to_string()
    }

    fn status(&self, status: reqwest::StatusCode) {
        self.tracer.set_attributes(
            &self.span,
            &[(
                "http.response.status_code",
                TraceValue::Int(i64::from(status.as_u16())),
            )],
        );
    }

    fn fail(&self, message: &str) {
        self.tracer.set_error(&self.span, message);
    }
}

/// One request to send, following redirects.
struct Outgoing {
    url: reqwest::Url,
    method: reqwest::Method,
    headers: HeaderMap,
    body: Option<Vec<u8>>,
    webhook_id: String,
    secrets: Vec<SigningSecret>,
}

/// The attempt's fencing token, `<attempt>:<claimed ms>`: a later attempt of the same firing
/// has a greater one (a higher attempt; or the same attempt claimed again later, after a
/// claim was given back), so a receiver that keeps the greatest token it has seen per
/// `webhook-id` can refuse a stale attempt (docs/delivery.md).
pub(crate) fn fence_token(f: &Firing) -> String {
    format!("{}:{}", f.attempt, f.claimed_at.timestamp_millis())
}

fn header_value(field: &str, text: &str) -> Result<HeaderValue, HandlerError> {
    HeaderValue::from_str(text)
        .map_err(|_| HandlerError::abort(format!("http: {field}: not a valid header value")))
}

/// Read at most `max` bytes of a response body (within 5 s), as text.
async fn body_prefix(mut resp: reqwest::Response, max: usize) -> String {
    let mut out: Vec<u8> = Vec::new();
    let read = async {
        while out.len() < max {
            match resp.chunk().await {
                Ok(Some(chunk)) => out.extend_from_slice(&chunk),
                _ => break,
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), read).await;
    let text = String::from_utf8_lossy(&out);
    truncate(text.trim(), max).to_string()
}

impl Inner {
    /// The secrets `handlers.http.signing_secrets` gives `host`.
    fn secrets_for_host(&self, host: &str) -> Vec<SigningSecret> {
        for_host(&self.host_secrets, host)
            .cloned()
            .unwrap_or_default()
    }

    /// Check `url` against the host rules and, for an IP literal, the guard; the client to
    /// send it with (by the host's `handlers.http.tls` pattern and the port).
    fn client_for(&self, url: &reqwest::Url) -> Result<&reqwest::Client, HandlerError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(HandlerError::abort(format!(
                "http: url scheme must be http or https, not '{}'",
                url.scheme()
            )));
        }
        let host = url.host_str().unwrap_or_default();
        if !host_allowed(&self.settings.allowed_hosts, host) {
            return Err(HandlerError::abort(format!(
                "http: host '{host}' is not in handlers.http.allowed_hosts"
            )));
        }
        let own_port = self
            .guard
            .own
            .as_ref()
            .is_some_and(|o| url.port_or_known_default() == Some(o.port));
        if let Some(ip) = ip_literal(host)
            && let Some(why) = self.guard.refuse(ip, own_port)
        {
            return Err(HandlerError::abort(format!("http: {why}")));
        }
        let clients = for_host(&self.tls_clients, host).unwrap_or(&self.clients);
        Ok(if own_port {
            &clients.own_port
        } else {
            &clients.any_port
        })
    }

    /// Send `out`, following redirects; each hop is checked and signed afresh.
    async fn send(
        &self,
        mut out: Outgoing,
        clock: SendClock,
    ) -> Result<reqwest::Response, HandlerError> {
        for _ in 0..=MAX_REDIRECTS {
            let client = self.client_for(&out.url)?;
            let timestamp = clock.unix_secs();
            let body: &[u8] = out.body.as_deref().unwrap_or_default();
            let mut headers = out.headers.clone();
            headers.insert("webhook-id", header_value("webhook-id", &out.webhook_id)?);
            headers.insert("webhook-timestamp", HeaderValue::from(timestamp));
            if !out.secrets.is_empty() {
                let sig = webhook::signature_header(&out.secrets, &out.webhook_id, timestamp, body);
                headers.insert(
                    "webhook-signature",
                    header_value("webhook-signature", &sig)?,
                );
            }
            let mut req = client
                .request(out.method.clone(), out.url.clone())
                .headers(headers);
            if let Some(b) = &out.body {
                req = req.body(b.clone());
            }
            let what = format!("{} {}", out.method, url_without_secrets(&out.url));
            let resp = req.send().await.map_err(|e| send_error(&what, &e))?;
            let status = resp.status();
            let location = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok());
            let (true, Some(location)) = (status.is_redirection(), location) else {
                return Ok(resp);
            };
            let next = out.url.join(location).map_err(|e| {
                HandlerError::abort(format!("http: {what}: bad redirect location: {e}"))
            })?;
            let to_get = match status.as_u16() {
                301 | 302 => out.method == reqwest::Method::POST,
                303 => out.method != reqwest::Method::HEAD,
                _ => false,
            };
            if to_get {
                out.method = reqwest::Method::GET;
                out.body = None;
                out.headers.remove(reqwest::header::CONTENT_TYPE);
                out.headers.remove(reqwest::header::CONTENT_LENGTH);
            }
            if next.origin() != out.url.origin() {
                // As browsers and reqwest do: credentials stay with their origin.
                for h in [
                    reqwest::header::AUTHORIZATION,
                    reqwest::header::COOKIE,
                    reqwest::header::PROXY_AUTHORIZATION,
                ] {
                    out.headers.remove(h);
                }
            }
            out.url = next;
        }
        Err(HandlerError::abort(format!(
            "http: more than {MAX_REDIRECTS} redirects"
        )))
    }

    async fn call(self: Arc<Self>, f: Firing) -> HandlerResult {
        let clock = SendClock::new(f.claimed_at);
        let p: Params = serde_json::from_value(f.params.clone())
            .map_err(|e| HandlerError::abort(format!("http: bad params: {e}")))?;
        let job_secrets = parse_secrets("params.signing_secrets", &p.signing_secrets)
            .map_err(|e| HandlerError::abort(format!("http: {}: {}", e.field, e.message)))?;
        // Asked for first, so a timeout or a refused request still gets its failure callback.
        let callback = |url: &Option<String>| {
            url.as_ref().map(|u| Callback {
                url: render(u, &f),
                secrets: p.signing_secrets.clone(),
            })
        };
        f.report.callbacks(
            callback(&p.callbacks.success),
            callback(&p.callbacks.failure),
        );
        let url_text = render(&p.url, &f);
        let url = reqwest::Url::parse(&url_text)
            .map_err(|e| HandlerError::abort(format!("http: bad url '{url_text}': {e}")))?;
        let method = match p.method.as_deref() {
            Some(m) => reqwest::Method::from_bytes(m.to_ascii_uppercase().as_bytes())
                .map_err(|_| HandlerError::abort(format!("http: bad method '{m}'")))?,
            None if p.body.is_some() => reqwest::Method::POST,
            None => reqwest::Method::GET,
        };
        let timeout = match &p.timeout {
            Some(t) => crate::job::parse_duration(t)
                .map_err(|e| HandlerError::abort(format!("http: bad timeout: {e}")))?
                .min(self.settings.max_timeout),
            None => self.settings.timeout,
        };
        let mut headers = HeaderMap::new();
        for (name, value) in &p.headers {
            if RESERVED_HEADERS
                .iter()
                .any(|r| name.eq_ignore_ascii_case(r))
            {
                continue;
            }
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| HandlerError::abort(format!("http: bad header name '{name}'")))?;
            headers.insert(
                name.clone(),
                header_value(&format!("headers.{name}"), &render(value, &f))?,
            );
        }
        let body = match &p.body {
            None => None,
            Some(Value::String(s)) => Some(render(s, &f).into_bytes()),
            Some(v) => {
                if !headers.contains_key(reqwest::header::CONTENT_TYPE) {
                    headers.insert(
                        reqwest::header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    );
                }
                Some(render(&v.to_string(), &f).into_bytes())
            }
        };
        let delivery = Delivery::start(&f, &method, &url);
        let trace = match &delivery {
            Some(d) => d.traceparent(&f),
            None => traceparent(&f.firing_id, f.attempt),
        };
        headers.insert("keyfire-job-id", header_value("job id", &f.job_id)?);
        headers.insert("keyfire-attempt", HeaderValue::from(f.attempt));
        headers.insert("keyfire-fence", header_value("fence", &fence_token(&f))?);
        headers.insert(
            "keyfire-scheduled-at",
            header_value(
                "scheduled_at",
                &f.scheduled_at
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            )?,
        );
        if !headers.contains_key("traceparent") {
            headers.insert("traceparent", header_value("traceparent", &trace)?);
        }
        let host = url.host_str().unwrap_or_default().to_string();
        let secrets = if job_secrets.is_empty() {
            self.secrets_for_host(&host)
        } else {
            job_secrets.clone()
        };
        let what = format!("{method} {}", url_without_secrets(&url));
        let out = Outgoing {
            url,
            method,
            headers,
            body,
            webhook_id: f.firing_id.clone(),
            secrets,
        };

        let sending = self.send(out, clock);
        let sending = match &delivery {
            Some(d) => sending.instrument(d.span.clone()).left_future(),
            None => sending.right_future(),
        };
        let failed = |e: HandlerError| {
            if let Some(d) = &delivery {
                d.fail(e.message());
            }
            Err(e)
        };
        let resp = tokio::select! {
            r = tokio::time::timeout(timeout, sending) => r,
            () = f.cancel.cancelled() => {
                // Stopped by the node: not an outcome, no callback.
                return failed(HandlerError::retry(format!("http: {what}: cancelled")));
            }
        };
        let resp = match resp {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return failed(e),
            Err(_) => {
                return failed(HandlerError::retry(format!(
                    "http: {what}: timed out after {}",
                    humantime::format_duration(timeout)
                )));
            }
        };
        let status = resp.status();
        if let Some(d) = &delivery {
            d.status(status);
        }
        let max_body = self.settings.max_error_body_bytes;
        if status.is_success() {
            tracing::debug!(job = %f.job_id, firing = %f.firing_id, %status, "http call succeeded");
            // The body is read only for a success callback's summary.
            let body = if p.callbacks.success.is_some() {
                Some(body_prefix(resp, max_body).await)
            } else {
                None
            };
            f.report.response(status.as_u16(), body);
            return Ok(());
        }
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs)
            .filter(|_| {
                status == reqwest::StatusCode::TOO_MANY_REQUESTS
                    || status == reqwest::StatusCode::SERVICE_UNAVAILABLE
            });
        let body = body_prefix(resp, max_body).await;
        let message = if body.is_empty() {
            format!("http: {what}: status {status}")
        } else {
            format!("http: {what}: status {status}: {body}")
        };
        f.report.response(status.as_u16(), Some(body));
        failed(HandlerError::Retry {
            after: retry_after,
            message,
        })
    }

    /// One attempt at a callback (the node retries it, bounded, and never lets its fate
    /// change the firing's).
    async fn callback(&self, call: CallbackCall) -> HandlerResult {
        let url = reqwest::Url::parse(&call.target.url).map_err(|e| {
            HandlerError::abort(format!(
                "callback url '{}' is not a URL: {e}",
                call.target.url
            ))
        })?;
        let job_secrets = parse_secrets("signing_secrets", &call.target.secrets)
            .map_err(|e| HandlerError::abort(format!("callback {}: {}", e.field, e.message)))?;
        let secrets = if job_secrets.is_empty() {
            self.secrets_for_host(url.host_str().unwrap_or_default())
        } else {
            job_secrets
        };
        let mut headers = HeaderMap::new();
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert("keyfire-job-id", header_value("job id", &call.job_id)?);
        headers.insert("keyfire-attempt", HeaderValue::from(call.attempt));
        let trace = traceparent(&call.firing_id, call.attempts);
        headers.insert("traceparent", header_value("traceparent", &trace)?);
        let what = format!("callback {} to {}", call.id, url_without_secrets(&url));
        let out = Outgoing {
            url,
            method: reqwest::Method::POST,
            headers,
            body: Some(call.payload.into_bytes()),
            webhook_id: call.id,
            secrets,
        };
        match tokio::time::timeout(
            self.settings.timeout,
            self.send(out, SendClock::at(call.now_ms)),
        )
        .await
        {
            Ok(Ok(resp)) if resp.status().is_success() => Ok(()),
            Ok(Ok(resp)) => Err(HandlerError::retry(format!(
                "{what}: status {}",
                resp.status()
            ))),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(HandlerError::retry(format!("{what}: timed out"))),
        }
    }
}

/// A `reqwest` error as a handler error: a refused address is not retried, a connection error
/// is.
fn send_error(what: &str, e: &reqwest::Error) -> HandlerError {
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        if let Some(blocked) = s.downcast_ref::<Blocked>() {
            return HandlerError::abort(format!("http: {what}: {blocked}"));
        }
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    HandlerError::retry(format!("http: {what}: {msg}"))
}

/// The URL as shown in errors: no user info, no query (either may hold a secret).
fn url_without_secrets(url: &reqwest::Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.set_query(None);
    u.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hosts_match_exactly_by_suffix_or_any() {
        let allowed: Vec<String> = ["api.example.com", "*.internal.test", "[::1]"]
            .map(String::from)
            .to_vec();
        assert!(host_allowed(&allowed, "api.example.com"));
        assert!(host_allowed(&allowed, "API.Example.com."));
        assert!(!host_allowed(&allowed, "example.com"));
        assert!(!host_allowed(&allowed, "evilapi.example.com"));
        assert!(host_allowed(&allowed, "a.internal.test"));
        assert!(host_allowed(&allowed, "a.b.internal.test"));
        assert!(!host_allowed(&allowed, "internal.test"));
        assert!(!host_allowed(&allowed, "xinternal.test"));
        assert!(host_allowed(&allowed, "::1"));
        assert!(host_allowed(&["*".to_string()], "anything"));
        assert!(!host_allowed(&[], "anything"));
    }

    #[test]
    fn templates_fill_the_firing_fields() {
        let at = chrono::DateTime::from_timestamp_millis(1000).unwrap();
        assert_eq!(
            crate::handler::template::render_fields(
                "{{job_id}} {{firing_id}} {{scheduled_at}} {{attempt}} {{other}}",
                "j",
                "j:1000",
                at,
                2
            ),
            "j j:1000 1970-01-01T00:00:01.000Z 2 {{other}}"
        );
        assert_eq!(truncate("héllo", 2), "h");
    }
    fn guard(extra: &[&str], own: Option<&str>) -> Guard {
        let mut s = HttpHandlerSettings::default();
        s.blocked_networks
            .extend(extra.iter().map(|e| e.to_string()));
        Guard::new(&s, own)
    }

    #[test]
    fn the_guard_refuses_metadata_in_every_spelling() {
        let g = guard(&[], None);
        for ip in [
            "169.254.169.254",
            "169.254.170.2",
            "fe80::1",
            "fd00:ec2::254",
            "100.100.100.200",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:a9fe:a9fe::1",
            "::169.254.169.254",
        ] {
            let why = g.refuse(ip.parse().unwrap(), false);
            assert!(why.is_some_and(|w| w.contains("blocked_networks")), "{ip}");
        }
        // Private ranges and loopback stay allowed by default.
        for ip in [
            "10.1.2.3",
            "192.168.1.1",
            "172.16.0.1",
            "127.0.0.1",
            "::1",
            "fd00::1",
        ] {
            assert_eq!(g.refuse(ip.parse().unwrap(), false), None, "{ip}");
        }
        let g = guard(&["10.0.0.0/8"], None);
        assert!(g.refuse("10.1.2.3".parse().unwrap(), false).is_some());
    }

    #[test]
    fn the_guard_knows_the_nodes_own_api() {
        let g = guard(&[], Some("127.0.0.1:8080"));
        assert_eq!(g.own.as_ref().unwrap().port, 8080);
        for ip in [
            "127.0.0.1",
            "0.0.0.0",
            "::",
            "::ffff:127.0.0.1",
            "127.0.0.2",
        ] {
            let why = g.refuse(ip.parse().unwrap(), true);
            assert!(why.is_some_and(|w| w.contains("block_own_api")), "{ip}");
            // Another port: an ordinary local receiver.
            assert_eq!(g.refuse(ip.parse().unwrap(), false), None, "{ip}");
        }
        assert_eq!(g.refuse("10.9.9.9".parse().unwrap(), true), None);
        let any = guard(&[], Some("0.0.0.0:8080"));
        assert!(any.refuse("127.0.0.1".parse().unwrap(), true).is_some());
        let off = HttpHandlerSettings {
            block_own_api: false,
            ..Default::default()
        };
        assert!(Guard::new(&off, Some("127.0.0.1:8080")).own.is_none());
    }

    #[test]
    fn params_are_checked_naming_the_field() {
        let s = HttpHandlerSettings {
            allowed_hosts: vec!["*.example.com".into()],
            ..Default::default()
        };
        let field = |p: Value| check_params(&p, &s).map_err(|e| e.field);
        assert_eq!(field(json!({"url": "https://a.example.com/x"})), Ok(()));
        assert_eq!(field(json!({"url": "https://{{job_id}}.other/x"})), Ok(()));
        assert_eq!(
            field(json!({"url": "https://other.com/"})),
            Err("params.url".into())
        );
        assert_eq!(
            field(json!({"url": "ftp://a.example.com/"})),
            Err("params.url".into())
        );
        assert_eq!(
            field(json!({"url": "https://a.example.com/", "method": "NOT A METHOD"})),
            Err("params.method".into())
        );
        assert_eq!(
            field(json!({"url": "https://a.example.com/", "timeout": "soon"})),
            Err("params.timeout".into())
        );
        assert_eq!(
            field(
                json!({"url": "https://a.example.com/", "callbacks": {"failure": "https://b.other/"}})
            ),
            Err("params.callbacks.failure".into())
        );
        assert_eq!(
            field(json!({"url": "https://a.example.com/", "headers": {"Webhook-Id": "x"}})),
            Err("params.headers.Webhook-Id".into())
        );
        assert_eq!(field(json!({"url": 5})), Err("params".into()));
        // Numeric spellings of an IPv4 address are normalised before the check.
        let any = HttpHandlerSettings::default();
        for url in [
            "http://2852039166/",
            "http://0xa9fea9fe/",
            "http://169.254.43518/",
        ] {
            let err = check_params(&json!({ "url": url }), &any).unwrap_err();
            assert_eq!(err.field, "params.url", "{url}");
        }
    }

    #[test]
    fn host_secrets_pick_the_most_specific_pattern() {
        let mut s = HttpHandlerSettings::default();
        let key = |b: u8| SigningSecret::from_key(vec![b; 32]);
        for (pattern, b) in [
            ("*", 1),
            ("*.example.com", 2),
            ("api.example.com", 3),
            ("*.b.example.com", 4),
        ] {
            s.signing_secrets
                .insert(pattern.into(), vec![key(b).expose()]);
        }
        let h = HttpHandler::new(&s).unwrap();
        let pick = |host: &str| h.inner.secrets_for_host(host);
        assert_eq!(pick("api.example.com"), vec![key(3)]);
        assert_eq!(pick("x.b.example.com"), vec![key(4)]);
        assert_eq!(pick("x.example.com"), vec![key(2)]);
        assert_eq!(pick("elsewhere.org"), vec![key(1)]);
        assert!(
            HttpHandler::new(&HttpHandlerSettings::default())
                .unwrap()
                .inner
                .secrets_for_host("a")
                .is_empty()
        );
    }

    #[test]
    fn no_system_ca_store_means_the_bundled_roots_and_one_warning() {
        let bundled = webpki_roots::TLS_SERVER_ROOTS.len();
        // A slim image: no store at all, or only loader errors.
        for errors in [
            vec![],
            vec!["could not load certs from dir /etc/ssl/certs: No such file or directory".into()],
        ] {
            let roots = tls::DefaultRoots::from_system(vec![], &errors);
            assert_eq!(roots.store.len(), bundled);
            let warning = roots.warning.clone().expect("a warning");
            assert!(warning.contains("bundled Mozilla roots"), "{warning}");
            for e in &errors {
                assert!(warning.contains(e.as_str()), "{warning}");
            }
            // The handler builds on them; no panic, no error.
            let provider = tls::default_provider();
            let h = HttpHandler::build(&HttpHandlerSettings::default(), None, &roots, &provider);
            assert!(h.is_ok(), "{:?}", h.err());
            let profiles =
                tls::Profiles::load(&HttpHandlerSettings::default(), &roots, &provider).unwrap();
            assert!(profiles.by_host.is_empty());
            assert!(
                reqwest::Client::builder()
                    .tls_backend_preconfigured(profiles.default.config)
                    .build()
                    .is_ok()
            );
        }
        let junk = tls::DefaultRoots::from_system(vec![vec![1u8, 2, 3].into()], &[]);
        assert_eq!(junk.store.len(), bundled);
        assert!(
            junk.warning
                .unwrap()
                .contains("none of its 1 certificates parses")
        );
        // A store that loads is used as it is, silently.
        let ca = rcgen::generate_simple_self_signed(vec!["ca.test".to_string()]).unwrap();
        let system = tls::DefaultRoots::from_system(vec![ca.cert.der().clone()], &[]);
        assert_eq!((system.store.len(), system.warning), (1, None));
    }

    #[test]
    fn traceparents_are_w3c_and_stable_per_firing() {
        let a1 = traceparent("job:1000", 1);
        let a2 = traceparent("job:1000", 2);
        let other = traceparent("job:2000", 1);
        let parts: Vec<&str> = a1.split('-').collect();
        assert_eq!(parts.len(), 4);
        assert_eq!(
            (parts[0], parts[1].len(), parts[2].len(), parts[3]),
            ("00", 32, 16, "01")
        );
        assert!(
            parts[1]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_eq!(a1.split('-').nth(1), a2.split('-').nth(1));
        assert_ne!(a1, a2);
        assert_ne!(a1.split('-').nth(1), other.split('-').nth(1));
    }
    /// What signing adds to a delivery: the same burst through the handler to a minimal local
    /// HTTP/1.1 receiver, unsigned and signed alternately (median of 5), and the HMAC alone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a measurement: cargo test -p keyfire --release --lib signing_overhead -- --ignored --nocapture"]
    async fn signing_overhead() {
        use futures::StreamExt;
        use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
        const N: usize = 4000;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut conn = BufReader::new(conn);
                    loop {
                        let mut len = 0usize;
                        loop {
                            let mut line = String::new();
                            if conn.read_line(&mut line).await.unwrap_or(0) == 0 {
                                return;
                            }
                            if line == "\r\n" {
                                break;
                            }
                            if let Some(v) =
                                line.to_ascii_lowercase().strip_prefix("content-length:")
                            {
                                len = v.trim().parse().unwrap();
                            }
                        }
                        let mut body = vec![0; len];
                        conn.read_exact(&mut body).await.unwrap();
                        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nfine";
                        if conn.get_mut().write_all(ok).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let handler = HttpHandler::new(&HttpHandlerSettings::default()).unwrap();
        let secret = SigningSecret::from_key(vec![1u8; 32]).expose();
        let body = json!({"order": 42, "customer": "c-1234567", "items": [1, 2, 3], "note": "x".repeat(150)});
        let burst = |signed: bool| {
            let handler = handler.clone();
            let mut params = json!({"url": format!("http://{addr}/ok"), "body": body});
            if signed {
                params["signing_secrets"] = json!([secret]);
            }
            async move {
                let start = Instant::now();
                futures::stream::iter(0..N)
                    .for_each_concurrent(64, |i| {
                        let run = handler.run(Firing {
                            job_id: "bench".into(),
                            firing_id: format!("bench:{i}"),
                            scheduled_at: chrono::Utc::now(),
                            claimed_at: chrono::Utc::now(),
                            attempt: 1,
                            params: params.clone(),
                            node_id: "n".into(),
                            cancel: Default::default(),
                            report: Default::default(),
                        });
                        async move { run.await.unwrap() }
                    })
                    .await;
                start.elapsed()
            }
        };
        burst(false).await; // warm up
        let (mut plain, mut signed) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            plain.push(burst(false).await);
            signed.push(burst(true).await);
        }
        plain.sort();
        signed.sort();
        let (p, s) = (plain[2], signed[2]);
        let per = |d: Duration| d.as_secs_f64() * 1e6 / N as f64;
        let key = SigningSecret::from_key(vec![1u8; 32]);
        let bytes = body.to_string().into_bytes();
        let start = Instant::now();
        for i in 0..100_000 {
            std::hint::black_box(key.sign("bench:1", i, &bytes));
        }
        let hmac = start.elapsed().as_secs_f64() * 1e6 / 100_000.0;
        println!(
            "{N} deliveries, median of 5: unsigned {p:?} ({:.1} us each), signed {s:?} ({:.1} us each): {:+.1} %; one signature of {} bytes: {hmac:.2} us",
            per(p),
            per(s),
            (s.as_secs_f64() / p.as_secs_f64() - 1.0) * 100.0,
            bytes.len()
        );
    }
}
