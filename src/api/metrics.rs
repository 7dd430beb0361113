//! `/metrics`: the node's Prometheus metrics (text format 0.0.4).

use axum::http::header;
use axum::response::IntoResponse;

/// The metrics of every node running in this process, in Prometheus text format.
/// Behind the bearer token when one is set (Prometheus sends it with `authorization`).
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "health",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain")),
    security(("bearer" = []))
)]
pub(super) async fn metrics() -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        crate::metrics::render(),
    )
}
