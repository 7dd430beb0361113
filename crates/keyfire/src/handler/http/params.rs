//! The `http` handler's params (the table in the handler's documentation), parsed and checked
//! as a node with the given settings would run them.

use std::collections::BTreeMap;

use reqwest::header::{HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::Value;

use super::guard::{Guard, host_allowed, ip_literal};
use crate::config::HttpHandlerSettings;
use crate::handler::webhook::{self, SigningSecret};
use crate::job::ValidationError;

/// Headers a job may not set: they carry the signature.
pub(super) const RESERVED_HEADERS: [&str; 3] =
    ["webhook-id", "webhook-timestamp", "webhook-signature"];
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Params {
    pub(super) url: String,
    #[serde(default)]
    pub(super) method: Option<String>,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) body: Option<Value>,
    #[serde(default)]
    pub(super) timeout: Option<String>,
    #[serde(default)]
    pub(super) signing_secrets: Vec<String>,
    #[serde(default)]
    pub(super) callbacks: Callbacks,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Callbacks {
    #[serde(default)]
    pub(super) success: Option<String>,
    #[serde(default)]
    pub(super) failure: Option<String>,
}

pub(super) fn parse_secrets(
    field: &str,
    texts: &[String],
) -> Result<Vec<SigningSecret>, ValidationError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
