//! Bearer-token auth: every route but `/healthz`, `/readyz` and the OpenAPI document needs
//! `Authorization: Bearer <api.token>` when a token is configured.

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::ApiState;
use super::error::ApiError;

/// Paths served without a token: probes for orchestrators, and the document (it holds no data).
pub const OPEN_PATHS: &[&str] = &["/healthz", "/readyz", "/v1/openapi.json"];

/// Compare a presented token with the configured one in time that depends only on the
/// configured token's length, not on where the two first differ (nor on the presented length).
pub fn token_matches(presented: &[u8], expected: &[u8]) -> bool {
    let mut same = (presented.len() as u64).ct_eq(&(expected.len() as u64));
    for (i, e) in expected.iter().enumerate() {
        let p = presented.get(i).copied().unwrap_or(0);
        same &= p.ct_eq(e);
    }
    same.into()
}

/// The middleware.
pub(super) async fn require_token(State(state): State<ApiState>, req: Request, next: Next) -> Response {
    let Some(expected) = state.token() else {
        return next.run(req).await;
    };
    if OPEN_PATHS.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
    match presented {
        Some(t) if token_matches(t.as_bytes(), expected.as_bytes()) => next.run(req).await,
        _ => ApiError::unauthorized().into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_exactly() {
        assert!(token_matches(b"s3cret", b"s3cret"));
        assert!(!token_matches(b"s3cre", b"s3cret"));
        assert!(!token_matches(b"s3cretx", b"s3cret"));
        assert!(!token_matches(b"S3cret", b"s3cret"));
        assert!(!token_matches(b"", b"s3cret"));
        // A presented token that is a prefix padded with NULs is still refused.
        assert!(!token_matches(b"s3cret\0", b"s3cret"));
    }
}
