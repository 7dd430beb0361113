//! Flow control: a limit on a key (a target host, or any name jobs share), and which key a
//! job's firings count against.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::spec::JobSpec;
use super::validation::ValidationError;

/// The largest limit key, in bytes.
pub const MAX_LIMIT_KEY_LEN: usize = 200;

/// What [`validate_limit_key`] accepts besides the length, as a regular expression (stated in
/// the REST API's OpenAPI document; a test checks the two agree).
pub const LIMIT_KEY_PATTERN: &str = "^[A-Za-z0-9_.:-]+$";

/// A limit shared by the whole cluster: at most `rate` firings of the key start in any one
/// second, and at most `in_flight` run at once. At least one of the two is given; neither
/// may be 0. A firing held back by its limit is delayed (same attempt, not a failure), in
/// the order of its scheduled instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
// The REST API's schema keeps its name.
#[cfg_attr(feature = "openapi", schema(as = LimitSpec))]
#[serde(deny_unknown_fields)]
pub struct FlowLimitSpec {
    /// The limit key: `host:<host>` for the `http` handler's target hosts, or any name jobs
    /// give in `limit_key`. Letters, digits, `_ . : -`, at most 200 bytes. In
    /// `PUT /v1/limits/{key}` it may be left out (the path gives it).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(example = "host:api.example.com"))]
    pub key: String,
    /// Most firings started per second (a sliding window of one second), paced: `burst`
    /// at once, then one every 1/rate of a second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(example = 1000))]
    pub rate: Option<u32>,
    /// With `rate`: most firings started at once before the pacing applies (default a tenth
    /// of `rate`, at least 1; at most `rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(example = 100))]
    pub burst: Option<u32>,
    /// Most firings running at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(example = 50))]
    pub in_flight: Option<u32>,
}

impl FlowLimitSpec {
    /// A limit on `key`.
    pub fn new(key: impl Into<String>, rate: Option<u32>, in_flight: Option<u32>) -> Self {
        Self {
            key: key.into(),
            rate,
            burst: None,
            in_flight,
        }
    }

    /// Let `burst` firings start at once before the pacing applies.
    pub fn with_burst(mut self, burst: u32) -> Self {
        self.burst = Some(burst);
        self
    }

    /// Check the key and the bounds, naming the bad field.
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate_limit_key("key", &self.key)?;
        if self.rate == Some(0) {
            return Err(ValidationError::new(
                "rate",
                "must be at least 1 (leave it out for no rate bound)",
            ));
        }
        match (self.burst, self.rate) {
            (Some(0), _) => return Err(ValidationError::new("burst", "must be at least 1")),
            (Some(_), None) => {
                return Err(ValidationError::new("burst", "needs a rate to burst over"));
            }
            (Some(b), Some(r)) if b > r => {
                return Err(ValidationError::new(
                    "burst",
                    format!("must be at most rate ({r}): no more than rate start in a second"),
                ));
            }
            _ => {}
        }
        if self.in_flight == Some(0) {
            return Err(ValidationError::new(
                "in_flight",
                "must be at least 1 (leave it out for no in-flight bound)",
            ));
        }
        if self.rate.is_none() && self.in_flight.is_none() {
            return Err(ValidationError::new(
                "rate",
                "give rate, in_flight or both (to lift a limit, delete it)",
            ));
        }
        Ok(())
    }
}

/// Check a limit key: letters, digits, `_ . : -`, 1 to [`MAX_LIMIT_KEY_LEN`] bytes. Keys
/// appear in Redis key names (inside a hash tag), so `{`, `}` and spaces are refused.
pub fn validate_limit_key(field: &str, key: &str) -> Result<(), ValidationError> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-');
    if key.is_empty() {
        return Err(ValidationError::new(field, "must not be empty"));
    }
    if key.len() > MAX_LIMIT_KEY_LEN {
        return Err(ValidationError::new(
            field,
            format!("must be at most {MAX_LIMIT_KEY_LEN} bytes"),
        ));
    }
    if !key.chars().all(ok_char) {
        return Err(ValidationError::new(
            field,
            "may hold only letters, digits, '_', '.', ':' and '-'",
        ));
    }
    Ok(())
}

/// The limit key of an `http` target: `host:<host>`, the URL's host in lower case, without
/// port, credentials or IPv6 brackets. None when `url` has no host.
pub fn host_limit_key(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = hostport.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        hostport.split(':').next().unwrap_or_default()
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let key = format!("host:{host}");
    (!host.is_empty() && validate_limit_key("url", &key).is_ok()).then_some(key)
}

impl JobSpec {
    /// The limit key this job's firings count against: its `limit_key`, else `host:<host>`
    /// of the `http` handler's target URL, else none.
    pub fn effective_limit_key(&self) -> Option<String> {
        if let Some(k) = &self.limit_key {
            return Some(k.clone());
        }
        if self.handler != "http" {
            return None;
        }
        match self.params.get("url") {
            Some(Value::String(url)) => host_limit_key(url),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_keys_from_urls() {
        let k = |u: &str| host_limit_key(u);
        assert_eq!(
            k("https://API.example.com/x?y"),
            Some("host:api.example.com".into())
        );
        assert_eq!(
            k("http://u:p@127.0.0.1:8080/hook"),
            Some("host:127.0.0.1".into())
        );
        assert_eq!(k("http://[::1]:9000/"), Some("host:::1".into()));
        assert_eq!(k("http:///nohost"), None);
        assert_eq!(k("http://{{host}}/x"), None);
    }

    #[test]
    fn zero_bounds_are_refused_by_name() {
        let e = FlowLimitSpec::new("k", Some(0), None)
            .validate()
            .unwrap_err();
        assert_eq!(e.field, "rate");
        let e = FlowLimitSpec::new("k", Some(5), Some(0))
            .validate()
            .unwrap_err();
        assert_eq!(e.field, "in_flight");
        let e = FlowLimitSpec::new("k", None, None).validate().unwrap_err();
        assert_eq!(e.field, "rate");
        let e = FlowLimitSpec::new("a b", Some(1), None)
            .validate()
            .unwrap_err();
        assert_eq!(e.field, "key");
        assert!(
            FlowLimitSpec::new("host:a.b", Some(1), Some(2))
                .validate()
                .is_ok()
        );
        for (spec, field) in [
            (
                FlowLimitSpec::new("k", Some(5), None).with_burst(0),
                "burst",
            ),
            (
                FlowLimitSpec::new("k", None, Some(5)).with_burst(2),
                "burst",
            ),
            (
                FlowLimitSpec::new("k", Some(5), None).with_burst(6),
                "burst",
            ),
        ] {
            assert_eq!(spec.validate().unwrap_err().field, field, "{spec:?}");
        }
        assert!(
            FlowLimitSpec::new("k", Some(5), None)
                .with_burst(5)
                .validate()
                .is_ok()
        );
    }
}
