//! Bearer-token auth: every route but `/healthz`, `/readyz` and the OpenAPI document needs
//! `Authorization: Bearer <token>` when `api.token` or `api.tokens` is configured. This layer
//! finds which token was presented (401 when none matches) and hands its [`Grant`] to the
//! request; `scopes::require_scope` then checks it against the route (403).

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use std::sync::Arc;

use super::ApiState;
use super::error::ApiError;
use super::scopes::Grant;
use crate::settings::ApiSettings;

/// The configured tokens: each secret with what it allows.
pub(super) struct Credentials(Vec<(String, Arc<Grant>)>);

impl Credentials {
    /// `api.token` (allowed everything) and `api.tokens`; `None` when neither is set.
    pub(super) fn from_settings(api: &ApiSettings) -> Option<Self> {
        let mut all = Vec::new();
        if !api.token.is_empty() {
            all.push((api.token.clone(), Arc::new(Grant::admin("api.token"))));
        }
        for t in &api.tokens {
            all.push((t.secret.clone(), Arc::new(Grant::of(t))));
        }
        (!all.is_empty()).then_some(Self(all))
    }

    /// The grant of the token `presented`. Every secret is compared, in constant time, so the
    /// time taken does not tell which one (nor where) a wrong token differs.
    fn find(&self, presented: &str) -> Option<Arc<Grant>> {
        let mut found = None;
        for (secret, grant) in &self.0 {
            if token_matches(presented.as_bytes(), secret.as_bytes()) {
                found = Some(grant.clone());
            }
        }
        found
    }
}

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
pub(super) async fn require_token(
    State(state): State<ApiState>,
    mut req: Request,
    next: Next,
) -> Response {
    let Some(credentials) = state.credentials() else {
        req.extensions_mut().insert(no_auth());
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
    match presented.and_then(|t| credentials.find(t)) {
        Some(grant) => {
            req.extensions_mut().insert(grant);
            next.run(req).await
        }
        None => ApiError::unauthorized().into_response(),
    }
}

/// A node without tokens allows everything to whoever reaches it (loopback only).
fn no_auth() -> Arc<Grant> {
    static GRANT: std::sync::LazyLock<Arc<Grant>> =
        std::sync::LazyLock::new(|| Arc::new(Grant::admin("(no token configured)")));
    GRANT.clone()
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
