//! The `http` built-in handler: call a URL; a 2xx answer is success.
//!
//! Params (JSON):
//!
//! | field | meaning |
//! | --- | --- |
//! | `url` | required; `http://` or `https://`, its host must be in `handlers.http.allowed_hosts` |
//! | `method` | default `GET` (`POST` when a `body` is given) |
//! | `headers` | object of header name to value |
//! | `body` | a string, or any other JSON value (sent as JSON with `content-type: application/json`) |
//! | `timeout` | such as `"10s"`; default `handlers.http.timeout`, at most `handlers.http.max_timeout` |
//!
//! `{{job_id}}`, `{{firing_id}}`, `{{scheduled_at}}` (RFC 3339) and `{{attempt}}` in the URL,
//! header values and body are replaced by the firing's values, so the receiver can use the
//! firing id as an idempotency key.
//!
//! A non-2xx answer, a timeout or a connection error is a failed attempt
//! ([`HandlerError::retry`], honouring `Retry-After` on 429 and 503); a host that is not allowed,
//! or params that cannot work, fail without retry ([`HandlerError::abort`]). Redirects are
//! followed only to allowed hosts.

use std::collections::BTreeMap;
use std::sync::{Arc, Once};
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::Value;

use super::{Firing, Handler, HandlerError, HandlerResult};
use crate::config::HttpHandlerSettings;

/// Install the process-wide TLS crypto provider (ring) that `reqwest` uses for `https://`.
/// Safe to call many times; every place that builds a `reqwest::Client` calls it first.
pub fn install_tls_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err means another provider was installed first, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Replace `{{job_id}}`, `{{firing_id}}`, `{{scheduled_at}}` and `{{attempt}}` with the
/// firing's values; anything else is left as written.
pub fn render(template: &str, f: &Firing) -> String {
    render_fields(template, &f.job_id, &f.firing_id, f.scheduled_at, f.attempt)
}

fn render_fields(
    template: &str,
    job_id: &str,
    firing_id: &str,
    scheduled_at: chrono::DateTime<chrono::Utc>,
    attempt: u32,
) -> String {
    if !template.contains("{{") {
        return template.to_string();
    }
    template
        .replace("{{job_id}}", job_id)
        .replace("{{firing_id}}", firing_id)
        .replace(
            "{{scheduled_at}}",
            &scheduled_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        )
        .replace("{{attempt}}", &attempt.to_string())
}

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
}

/// The `http` handler.
#[derive(Clone)]
pub struct HttpHandler {
    inner: Arc<Inner>,
}

struct Inner {
    settings: HttpHandlerSettings,
    client: reqwest::Client,
}

impl HttpHandler {
    /// A handler with these settings.
    pub fn new(settings: &HttpHandlerSettings) -> Self {
        install_tls_provider();
        let allowed = settings.allowed_hosts.clone();
        // Follow redirects only to allowed hosts, or the allow-list could be sidestepped.
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= 10 {
                attempt.error("too many redirects")
            } else if attempt
                .url()
                .host_str()
                .is_some_and(|h| host_allowed(&allowed, h))
            {
                attempt.follow()
            } else {
                attempt.error("redirect to a host that is not in handlers.http.allowed_hosts")
            }
        });
        let client = reqwest::Client::builder()
            .redirect(policy)
            .user_agent(concat!("keyfire/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("the http handler's client builds (TLS provider installed)");
        Self {
            inner: Arc::new(Inner {
                settings: settings.clone(),
                client,
            }),
        }
    }
}

impl Handler for HttpHandler {
    fn run(&self, firing: Firing) -> BoxFuture<'static, HandlerResult> {
        let inner = self.inner.clone();
        Box::pin(async move { inner.call(firing).await })
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

impl Inner {
    async fn call(&self, f: Firing) -> HandlerResult {
        let p: Params = serde_json::from_value(f.params.clone())
            .map_err(|e| HandlerError::abort(format!("http: bad params: {e}")))?;
        let url_text = render(&p.url, &f);
        let url = reqwest::Url::parse(&url_text)
            .map_err(|e| HandlerError::abort(format!("http: bad url '{url_text}': {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(HandlerError::abort(format!(
                "http: url scheme must be http or https, not '{}'",
                url.scheme()
            )));
        }
        let host = url.host_str().unwrap_or_default().to_string();
        if !host_allowed(&self.settings.allowed_hosts, &host) {
            return Err(HandlerError::abort(format!(
                "http: host '{host}' is not in handlers.http.allowed_hosts"
            )));
        }
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
        let mut req = self
            .client
            .request(method.clone(), url.clone())
            .timeout(timeout);
        for (name, value) in &p.headers {
            req = req.header(name.as_str(), render(value, &f));
        }
        match &p.body {
            None => {}
            Some(Value::String(s)) => req = req.body(render(s, &f)),
            Some(v) => {
                if !p
                    .headers
                    .keys()
                    .any(|k| k.eq_ignore_ascii_case("content-type"))
                {
                    req = req.header("content-type", "application/json");
                }
                req = req.body(render(&v.to_string(), &f));
            }
        }
        let what = format!("{method} {}", url_without_secrets(&url));
        let resp = tokio::select! {
            r = req.send() => r,
            () = f.cancel.cancelled() => {
                return Err(HandlerError::retry(format!("http: {what}: cancelled")));
            }
        };
        let resp = match resp {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                return Err(HandlerError::retry(format!(
                    "http: {what}: timed out after {}",
                    humantime::format_duration(timeout)
                )));
            }
            Err(e) if e.is_redirect() => {
                return Err(HandlerError::abort(format!("http: {what}: {e:#}")));
            }
            Err(e) => {
                let mut msg = e.to_string();
                let mut src = std::error::Error::source(&e);
                while let Some(s) = src {
                    msg.push_str(": ");
                    msg.push_str(&s.to_string());
                    src = s.source();
                }
                return Err(HandlerError::retry(format!("http: {what}: {msg}")));
            }
        };
        let status = resp.status();
        if status.is_success() {
            tracing::debug!(job = %f.job_id, firing = %f.firing_id, %status, "http call succeeded");
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
        let body = tokio::time::timeout(Duration::from_secs(5), resp.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        let body = truncate(body.trim(), self.settings.max_error_body_bytes);
        let message = if body.is_empty() {
            format!("http: {what}: status {status}")
        } else {
            format!("http: {what}: status {status}: {body}")
        };
        Err(HandlerError::Retry {
            after: retry_after,
            message,
        })
    }
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
            render_fields(
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
}
