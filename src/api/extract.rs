//! Request extractors that answer in the API's error shape: a JSON body ([`ApiJson`]) and a
//! query string ([`ApiQuery`]).

use std::time::Duration;

use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ApiState;
use super::error::ApiError;

/// Parse a body's bytes as JSON: a syntax error is a 400 (`malformed_json`).
pub(super) fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::malformed_json(format!("malformed JSON: {e}")))
}

/// Extract the quoted name from serde's "unknown field `x`, expected …" / "missing field `x`".
fn quoted_field(message: &str) -> Option<&str> {
    let rest = message
        .strip_prefix("unknown field `")
        .or_else(|| message.strip_prefix("missing field `"))?;
    rest.split('`').next()
}

fn join(prefix: &str, rest: &str) -> String {
    match (prefix.is_empty(), rest.is_empty() || rest == ".") {
        (true, _) => rest.trim_start_matches('.').to_string(),
        (false, true) => prefix.to_string(),
        (false, false) if rest.starts_with('[') => format!("{prefix}{rest}"),
        (false, false) => format!("{prefix}.{rest}"),
    }
}

/// Decode a JSON value into `T`: a value of the wrong shape (unknown field, missing field,
/// wrong type) is a 422 (`invalid`) that names the field, under `prefix` (such as `tasks[2]`).
pub(super) fn decode<T: DeserializeOwned>(value: Value, prefix: &str) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let message = e.inner().to_string();
        let path = join(prefix, if path == "." { "" } else { &path });
        // serde_path_to_error's path ends with an unknown field's name, not a missing one's.
        let field = match quoted_field(&message) {
            Some(name) if path != name && !path.ends_with(&format!(".{name}")) => join(&path, name),
            _ => path,
        };
        let shown = if field.is_empty() {
            message
        } else {
            format!("invalid {field}: {message}")
        };
        ApiError::invalid(&field, shown)
    })
}

/// A JSON body: 415 unless sent as `application/json`, 413 past `api.max_body_bytes`, 400 when
/// it is not JSON, 422 when it does not fit `T` (unknown fields are refused), with the field named.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

/// Whether a `Content-Type` names JSON: `application/json` or `application/<x>+json`, with or
/// without parameters (`; charset=utf-8`).
pub(super) fn is_json_type(value: &str) -> bool {
    let essence = value.split(';').next().unwrap_or_default().trim();
    let Some((kind, sub)) = essence.split_once('/') else {
        return false;
    };
    kind.eq_ignore_ascii_case("application")
        && (sub.eq_ignore_ascii_case("json")
            || sub.len() > 5 && sub[sub.len() - 5..].eq_ignore_ascii_case("+json"))
}

/// Refuse a body that is not declared JSON with 415, before reading it. A `text/plain`,
/// form-encoded or untyped body is what a browser sends cross-site without asking first (a
/// "simple request"), so accepting one would let any web page write through a user's browser.
pub(super) fn require_json_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let given = headers
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or("(not text)"));
    match given {
        Some(t) if is_json_type(t) => Ok(()),
        Some(t) => Err(ApiError::unsupported_media_type(format!(
            "the body must be JSON sent with Content-Type: application/json, not '{t}'"
        ))),
        None => Err(ApiError::unsupported_media_type(
            "the body must be JSON sent with Content-Type: application/json (no Content-Type was given)",
        )),
    }
}

/// Most bytes read and thrown away past `api.max_body_bytes` before a 413, so a client that
/// sends its whole body before reading (most do, without `Expect: 100-continue`) gets to read
/// the 413 instead of a reset connection. A larger declared body is answered at once.
pub(super) const DRAIN_BYTES: usize = 8 << 20;
/// Longest a 413 waits for the rest of a body.
const DRAIN_TIME: Duration = Duration::from_secs(5);

/// The `Content-Length` a request declares, if it is a number.
fn declared_length(headers: &HeaderMap) -> Option<usize> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Read and drop what is left of `body`, up to `budget` bytes and [`DRAIN_TIME`].
async fn drain(mut body: Body, mut budget: usize) {
    let _ = tokio::time::timeout(DRAIN_TIME, async move {
        while let Some(Ok(frame)) = body.frame().await {
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if data.len() > budget {
                return;
            }
            budget -= data.len();
        }
    })
    .await;
}

/// A raw JSON body, checked for type, size and syntax only.
///
/// A body past the limit is a 413 that the client can read: a declared length past the limit
/// is answered before anything is read when the client waits for a go-ahead (`Expect:
/// 100-continue`) or sends more than can be drained; otherwise the rest of the body (up to
/// [`DRAIN_BYTES`]) is read and dropped first.
pub(super) async fn body_value(req: Request, state: &ApiState) -> Result<Value, ApiError> {
    require_json_type(req.headers())?;
    let limit = state.max_body_bytes();
    if let Some(declared) = declared_length(req.headers())
        && declared > limit
    {
        let waits = req
            .headers()
            .get(header::EXPECT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("100-continue"));
        if waits || declared - limit > DRAIN_BYTES {
            return Err(ApiError::too_large(limit));
        }
        drain(req.into_body(), DRAIN_BYTES + limit).await;
        return Err(ApiError::too_large(limit));
    }
    let mut body = req.into_body();
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| ApiError::malformed_json(format!("cannot read the body: {e}")))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if bytes.len() + data.len() > limit {
            drain(body, DRAIN_BYTES).await;
            return Err(ApiError::too_large(limit));
        }
        bytes.extend_from_slice(&data);
    }
    parse_json(&bytes)
}

impl<T: DeserializeOwned> FromRequest<ApiState> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &ApiState) -> Result<Self, Self::Rejection> {
        let value = body_value(req, state).await?;
        decode(value, "").map(ApiJson)
    }
}

/// A body that is JSON, not yet decoded (for bodies completed from the path, like `PUT`).
#[derive(Debug)]
pub(super) struct RawJson(pub Value);

impl FromRequest<ApiState> for RawJson {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &ApiState) -> Result<Self, Self::Rejection> {
        body_value(req, state).await.map(RawJson)
    }
}

/// A query string: unknown or repeated parameters and bad values are a 400 (`bad_query`) that
/// names the parameter.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        serde_urlencoded::from_str(query)
            .map(ApiQuery)
            .map_err(|e| {
                let message = e.to_string();
                let field = quoted_field(&message).unwrap_or_default().to_string();
                ApiError::bad_query(&field, format!("bad query string: {message}"))
            })
    }
}

/// Parse an optional numeric query parameter in `1..=max`, naming it when it is wrong.
pub(super) fn limit_param(
    name: &str,
    value: Option<&str>,
    default: usize,
    max: usize,
) -> Result<usize, ApiError> {
    let Some(v) = value else { return Ok(default) };
    match v.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(ApiError::bad_query(
            name,
            format!("{name} must be a whole number from 1 to {max}, not '{v}'"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        a: u32,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        items: Vec<Inner>,
    }

    #[test]
    fn json_types() {
        for ok in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/merge-patch+json",
        ] {
            assert!(is_json_type(ok), "{ok}");
        }
        for bad in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonx",
            "text/json",
            "+json",
            "application/+json",
            "",
        ] {
            assert!(!is_json_type(bad), "{bad}");
        }
    }

    #[test]
    fn decode_names_the_field() {
        let f = |v: Value| {
            decode::<Outer>(v, "")
                .unwrap_err()
                .field
                .unwrap_or_default()
        };
        assert_eq!(
            f(serde_json::json!({"items": [{"a": 1}, {"b": 2}]})),
            "items[1].b"
        );
        assert_eq!(f(serde_json::json!({"items": [{"a": "x"}]})), "items[0].a");
        assert_eq!(f(serde_json::json!({"items": [{}]})), "items[0].a");
        assert_eq!(f(serde_json::json!({"itemz": []})), "itemz");
        let e = decode::<Inner>(serde_json::json!({"a": 1, "z": 0}), "tasks[3]").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("tasks[3].z"));
        assert_eq!(e.status, axum::http::StatusCode::UNPROCESSABLE_ENTITY);
    }
}
