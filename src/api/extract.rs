//! Request extractors that answer in the API's error shape: a JSON body ([`ApiJson`]) and a
//! query string ([`ApiQuery`]).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
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

/// A JSON body: 413 past `api.max_body_bytes`, 400 when it is not JSON, 422 when it does not
/// fit `T` (unknown fields are refused), with the field named.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

/// A raw JSON body, checked for size and syntax only.
pub(super) async fn body_value(req: Request, state: &ApiState) -> Result<Value, ApiError> {
    let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(state.max_body_bytes())
        } else {
            ApiError::malformed_json(format!("cannot read the body: {rejection}"))
        }
    })?;
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
        assert_eq!(e.status, StatusCode::UNPROCESSABLE_ENTITY);
    }
}
