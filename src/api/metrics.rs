//! `/metrics`: the node's Prometheus metrics (text format 0.0.4).

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use super::ApiState;

/// The metrics of every node running in this process, in Prometheus text format, and the
/// cluster-wide figures read from Redis (the delay queue's topics, the oldest overdue firing,
/// Redis's memory; read at most once per `metrics.min_interval`).
/// Behind the bearer token when one is set (Prometheus sends it with `authorization`).
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "health",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain")),
    security(("bearer" = []))
)]
pub(super) async fn metrics(State(state): State<ApiState>) -> impl IntoResponse {
    // Without our recorder (an embedding application installed its own) there is nothing
    // to record the figures into.
    if crate::metrics::handle().is_some() {
        state.figures().refresh().await;
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        crate::metrics::render(),
    )
}
