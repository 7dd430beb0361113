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
//!
//! The files:
//!
//! - `mod.rs`: [`HttpHandler`]: building it (its clients, one per TLS profile and port), and
//!   picking the client and the signing secrets for a URL.
//! - `params.rs`: a job's params and their checks ([`check_params`], [`redact_params`]).
//! - `guard.rs`: the host rules ([`host_allowed`]) and the guard against server-side request
//!   forgery: blocked networks, the node's own API, and the resolver that applies them.
//! - `send.rs`: one attempt: the request built from the params, signed and sent, redirects
//!   followed hop by hop, the answer read; and callbacks.
//! - `trace.rs`: the `traceparent` sent ([`traceparent`]) and the span of one delivery.
//! - `tls.rs`: the roots and client certificates of every TLS profile.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::webhook::SigningSecret;
use super::{CallbackCall, CallbackSender, Firing, Handler, HandlerError, HandlerResult};
use crate::config::{HttpHandlerSettings, Settings};
use crate::error::{Error, Result};

mod guard;
mod params;
mod send;
mod tls;
mod trace;

pub use guard::host_allowed;
use guard::{Guard, GuardedResolver, for_host, ip_literal, most_specific_first};
pub use params::{check_params, redact_params};
pub use trace::traceparent;

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
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    use serde_json::json;

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
    fn no_system_ca_store_falls_back_to_the_bundled_roots_with_a_warning() {
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
