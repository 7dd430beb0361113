//! The dashboard: a page of plain HTML, CSS and JavaScript embedded in the binary, served at
//! `/` by every node (no build step, nothing fetched at run time).
//!
//! The static files need no token: they hold no data. The page's script calls the REST API
//! (`/v1/…`) with the token the user enters (kept in the tab's `sessionStorage`), or with
//! none when the node has no `api.token`; `/ui/config.json` tells it which. The script builds
//! every element with `createElement`/`textContent`, never `innerHTML`, so job ids, params and
//! error texts show as text; the Content-Security-Policy below (scripts only from this
//! origin, no inline script, no `eval`) is a second line of defence, not the first.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::LazyLock;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// One embedded file.
struct Asset {
    body: &'static [u8],
    content_type: &'static str,
    etag: LazyLock<String>,
}

macro_rules! asset {
    ($file:literal, $type:literal) => {
        Asset {
            body: include_bytes!(concat!("dashboard/", $file)),
            content_type: $type,
            etag: LazyLock::new(|| etag(include_bytes!(concat!("dashboard/", $file)))),
        }
    };
}

static INDEX: Asset = asset!("index.html", "text/html; charset=utf-8");
static APP_JS: Asset = asset!("app.js", "text/javascript; charset=utf-8");
static STYLE: Asset = asset!("style.css", "text/css; charset=utf-8");
static FAVICON: Asset = asset!("favicon.svg", "image/svg+xml");

/// The policy of the page: everything from this origin, nothing inline, no framing.
pub(super) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// A strong validator: the file's hash and the keyfire version.
fn etag(body: &[u8]) -> String {
    let mut h = DefaultHasher::new();
    body.hash(&mut h);
    env!("CARGO_PKG_VERSION").hash(&mut h);
    format!("\"{:016x}\"", h.finish())
}

fn serve(asset: &'static Asset, headers: &HeaderMap) -> Response {
    let etag = asset.etag.as_str();
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let mut resp = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            )],
            asset.body,
        )
            .into_response()
    };
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(etag) {
        h.insert(header::ETAG, v);
    }
    // Revalidate every time: a node upgraded in place serves the new files at once.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    resp
}

/// The dashboard's routes, none behind the token: `/`, `/ui/app.js`, `/ui/style.css`,
/// `/ui/favicon.svg`, and `/ui/config.json` (`{"auth": bool, "version"}`: whether the API
/// wants a token, so the page asks for one before its first call instead of after a 401).
pub(super) fn routes(auth: bool) -> Router {
    let config = serde_json::json!({
        "auth": auth,
        "version": env!("CARGO_PKG_VERSION"),
    });
    Router::new()
        .route("/", get(|h: HeaderMap| async move { serve(&INDEX, &h) }))
        .route(
            "/ui/app.js",
            get(|h: HeaderMap| async move { serve(&APP_JS, &h) }),
        )
        .route(
            "/ui/style.css",
            get(|h: HeaderMap| async move { serve(&STYLE, &h) }),
        )
        .route(
            "/ui/favicon.svg",
            get(|h: HeaderMap| async move { serve(&FAVICON, &h) }),
        )
        .route(
            "/ui/config.json",
            get(move || async move {
                (
                    [
                        (header::CACHE_CONTROL, "no-store"),
                        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                    ],
                    axum::Json(config),
                )
            }),
        )
}
