//! Checks every request meets before its handler: browser requests from another site may not
//! change anything, a node without a token answers only to local host names, and a path
//! segment that is not UTF-8 is refused in the API's error shape.
//!
//! Why: a node without `api.token` listens on loopback, and any web page its user visits can
//! make the browser send requests there. A page cannot read the answers (no CORS headers are
//! ever sent), but a "simple" cross-site request (a `POST` with a form or text body, or none)
//! is sent without asking first. Three rules close that door:
//!
//! - bodies must be `application/json` (415 otherwise; see [`super::extract`]), which a page
//!   can only send after a CORS preflight, which this API never grants;
//! - a state-changing request (anything but `GET`, `HEAD`, `OPTIONS`) that a browser marks as
//!   coming from another site (`Sec-Fetch-Site: cross-site` or `same-site`, or an `Origin`
//!   that is not this host) is refused with 403, which covers the body-less `POST`s (pause,
//!   resume, trigger, replay, pop);
//! - without a token, a request whose `Host` is a name other than `localhost` is refused with
//!   403: that is what a DNS-rebinding page (a name of the attacker's, pointed at 127.0.0.1)
//!   sends, and it would otherwise be same-origin to the browser and could read answers.
//!
//! Clients that are not browsers (the CLI, curl, SDKs) send neither `Origin` nor
//! `Sec-Fetch-Site` and use an address or `localhost`, so they are not affected.

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiState;
use super::auth::OPEN_PATHS;
use super::error::ApiError;

/// Whether a host (without port) names this machine whatever DNS says: an IP literal, or
/// `localhost` and its subdomains (RFC 6761).
fn is_literal_or_localhost(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host.starts_with('[')
        || host.parse::<std::net::IpAddr>().is_ok()
        || host == "localhost"
        || host.ends_with(".localhost")
}

/// The host of a `host[:port]` authority (an IPv6 literal keeps its brackets).
fn host_of(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority
            .find(']')
            .map_or(authority, |end| &authority[..=end]);
    }
    authority.rsplit_once(':').map_or(authority, |(h, _)| h)
}

/// The authority the request was sent to: the URI's (HTTP/2, absolute form) or `Host`.
fn request_authority(req: &Request) -> Option<String> {
    if let Some(a) = req.uri().authority() {
        return Some(a.as_str().to_string());
    }
    req.headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_string())
}

/// Why a state-changing request is refused as cross-site, if it is.
fn cross_site(headers: &HeaderMap, authority: Option<&str>) -> Option<String> {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return match site.trim().to_ascii_lowercase().as_str() {
            "same-origin" | "none" => None,
            other => Some(format!(
                "a browser sent this request from another site (Sec-Fetch-Site: {other}); \
                 keyfire's API does not take state-changing requests across sites"
            )),
        };
    }
    let origin = headers
        .get(header::ORIGIN)?
        .to_str()
        .unwrap_or("null")
        .trim();
    let origin_authority = origin
        .split_once("://")
        .map(|(_, rest)| rest.trim_end_matches('/'));
    match (origin_authority, authority) {
        (Some(o), Some(a)) if o.eq_ignore_ascii_case(a) => None,
        _ => Some(format!(
            "a browser sent this request from another origin ({origin}); keyfire's API does \
             not take state-changing requests across sites"
        )),
    }
}

/// The middleware: the host rule (without a token) and the cross-site rule.
pub(super) async fn same_site_only(
    State(state): State<ApiState>,
    req: Request,
    next: Next,
) -> Response {
    let authority = request_authority(&req);
    if state.credentials().is_none()
        && !OPEN_PATHS.contains(&req.uri().path())
        && let Some(a) = authority.as_deref()
        && !is_literal_or_localhost(host_of(a))
    {
        return ApiError::forbidden(format!(
            "this node has no api.token nor api.tokens, so it answers only to an IP address or localhost, \
             not to the name '{}' (a name could be a DNS-rebinding web page); set api.token \
             to serve under a name",
            host_of(a)
        ))
        .field("Host")
        .into_response();
    }
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !safe && let Some(why) = cross_site(req.headers(), authority.as_deref()) {
        return ApiError::forbidden(why).field("Origin").into_response();
    }
    next.run(req).await
}

/// Refuse a path whose segments are not UTF-8 once percent-decoded (`/v1/jobs/%ff`), naming
/// the path parameter, before axum's own extractor answers in plain text.
pub(super) async fn utf8_path(req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let template = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string());
    let segments = path.split('/');
    let mut names = template.as_deref().map(|t| t.split('/'));
    for segment in segments {
        let name = names.as_mut().and_then(Iterator::next);
        if percent_encoding::percent_decode_str(segment)
            .decode_utf8()
            .is_err()
        {
            let field = name
                .and_then(|n| n.strip_prefix('{'))
                .and_then(|n| n.strip_suffix('}'))
                .unwrap_or("path");
            return ApiError::bad_path(
                field,
                format!("the path's {field} is not valid UTF-8 once percent-decoded ('{segment}')"),
            )
            .into_response();
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_hosts() {
        for ok in [
            "127.0.0.1",
            "[::1]",
            "localhost",
            "LOCALHOST.",
            "app.localhost",
            "10.0.0.5",
        ] {
            assert!(is_literal_or_localhost(ok), "{ok}");
        }
        for bad in ["evil.example", "localhost.evil.example", "myhost"] {
            assert!(!is_literal_or_localhost(bad), "{bad}");
        }
        assert_eq!(host_of("[::1]:8080"), "[::1]");
        assert_eq!(host_of("localhost:8080"), "localhost");
        assert_eq!(host_of("localhost"), "localhost");
    }

    #[test]
    fn cross_site_rules() {
        let h = |pairs: &[(&'static str, &'static str)]| {
            let mut m = HeaderMap::new();
            for (k, v) in pairs {
                m.insert(*k, v.parse().unwrap());
            }
            m
        };
        let here = Some("127.0.0.1:8080");
        assert!(cross_site(&h(&[]), here).is_none());
        assert!(cross_site(&h(&[("sec-fetch-site", "same-origin")]), here).is_none());
        assert!(cross_site(&h(&[("sec-fetch-site", "cross-site")]), here).is_some());
        assert!(cross_site(&h(&[("sec-fetch-site", "same-site")]), here).is_some());
        assert!(cross_site(&h(&[("origin", "http://127.0.0.1:8080")]), here).is_none());
        assert!(cross_site(&h(&[("origin", "https://evil.example")]), here).is_some());
        assert!(cross_site(&h(&[("origin", "null")]), here).is_some());
    }
}
