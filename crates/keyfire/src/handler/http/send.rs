//! One attempt of the `http` handler: the request built from the params (templates filled,
//! headers set, signed), sent with redirects followed hop by hop under the same rules, and the
//! answer made an outcome; and one attempt at a callback.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use tracing::Instrument;

use super::Inner;
use super::guard::Blocked;
use super::params::{Params, RESERVED_HEADERS, parse_secrets};
use super::trace::{Delivery, traceparent};
use crate::handler::template::render;
use crate::handler::webhook::{self, SigningSecret};
use crate::handler::{Callback, CallbackCall, Firing, HandlerError, HandlerResult};

/// Redirects followed at most.
const MAX_REDIRECTS: usize = 10;

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

    pub(super) async fn call(self: Arc<Self>, f: Firing) -> HandlerResult {
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
    pub(super) async fn callback(&self, call: CallbackCall) -> HandlerResult {
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
pub(super) fn url_without_secrets(url: &reqwest::Url) -> String {
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
}
