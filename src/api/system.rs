//! Nodes, health, readiness and the OpenAPI document.

use std::collections::HashMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::DateTime;
use redis::AsyncCommands;
use serde_json::{Map, Value};

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use super::model::{Health, NodeList, NodeView};
use keyfire::engine::notify::has_expired_events;
use keyfire::error::Result;
use keyfire::store::Store;

/// The live nodes (heartbeat within `node_ttl_ms` by Redis's clock) and what they announced.
/// Reads the `nodes` ZSET and each node's hash; the store has no method for this yet.
pub async fn live_nodes(store: &Store, node_ttl_ms: i64) -> Result<Vec<NodeView>> {
    let keys = store.keys();
    let now = store.time_ms().await?;
    let mut conn = store.connection();
    let live: Vec<(String, i64)> = conn
        .zrangebyscore_withscores(keys.nodes(), now - node_ttl_ms, "+inf")
        .await?;
    let mut pipe = redis::pipe();
    for (id, _) in &live {
        pipe.hgetall(keys.node(id));
    }
    let infos: Vec<HashMap<String, String>> = if live.is_empty() {
        Vec::new()
    } else {
        pipe.query_async(&mut conn).await?
    };
    let mut nodes: Vec<NodeView> = live
        .into_iter()
        .zip(infos)
        .map(|((id, seen), hash)| {
            let info: Value = hash
                .get("info")
                .and_then(|s| serde_json::from_str(s).ok())
                .unwrap_or(Value::Null);
            let running = info["running"].as_u64();
            let max = info["max_concurrent_runs"].as_u64();
            NodeView {
                id,
                version: info["version"].as_str().map(str::to_string),
                running,
                max_concurrent_runs: max,
                load: match (running, max) {
                    (Some(r), Some(m)) if m > 0 => Some(r as f64 / m as f64),
                    _ => None,
                },
                runs_started: info["runs_started"].as_u64(),
                share: None,
                handlers: info["handlers"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|h| h.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default(),
                last_seen_at: DateTime::from_timestamp_millis(seen),
            }
        })
        .collect();
    nodes.sort_by(|a, b| a.id.cmp(&b.id));
    let total: u64 = nodes.iter().filter_map(|n| n.runs_started).sum();
    if total > 0 {
        for n in &mut nodes {
            n.share = n.runs_started.map(|r| r as f64 / total as f64);
        }
    }
    Ok(nodes)
}

/// The live nodes of the cluster, their load and version.
#[utoipa::path(
    get,
    path = "/v1/nodes",
    tag = "nodes",
    responses(
        (status = 200, description = "Live nodes", body = NodeList),
        (status = 503, description = "Redis is unavailable", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn list_nodes(State(state): State<ApiState>) -> Result<Json<NodeList>, ApiError> {
    let nodes = live_nodes(state.client().store(), state.node_ttl_ms()).await?;
    Ok(Json(NodeList { nodes }))
}

/// The process is up (no dependency is checked).
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "health",
    responses((status = 200, description = "Up", body = Health))
)]
pub(super) async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        checks: Map::new(),
    })
}

/// Ready to serve: Redis answers and emits expired-key events (`notify-keyspace-events`).
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "health",
    responses(
        (status = 200, description = "Ready", body = Health),
        (status = 503, description = "Not ready; `checks` says why", body = Health),
    )
)]
pub(super) async fn readyz(State(state): State<ApiState>) -> (StatusCode, Json<Health>) {
    let mut checks = Map::new();
    let mut conn = state.client().store().connection();
    let ping = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        redis::cmd("PING").query_async::<String>(&mut conn),
    )
    .await;
    let redis_ok = matches!(ping, Ok(Ok(_)));
    checks.insert(
        "redis".into(),
        Value::String(match ping {
            Ok(Ok(_)) => "ok".into(),
            Ok(Err(e)) => format!("unreachable: {e}"),
            Err(_) => "unreachable: no answer within 2s".into(),
        }),
    );
    let mut ready = redis_ok;
    if redis_ok {
        let flags: std::result::Result<Vec<String>, _> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("notify-keyspace-events")
            .query_async(&mut conn)
            .await;
        let verdict = match flags {
            Ok(reply) => {
                let flags = reply.get(1).cloned().unwrap_or_default();
                if has_expired_events(&flags) {
                    "ok".to_string()
                } else {
                    ready = false;
                    format!(
                        "expired events are off (notify-keyspace-events is \"{flags}\"; needs Ex)"
                    )
                }
            }
            Err(e) => {
                ready = false;
                format!("cannot read notify-keyspace-events: {e}")
            }
        };
        checks.insert("notifications".into(), Value::String(verdict));
    }
    let (code, status) = if ready {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not_ready")
    };
    (
        code,
        Json(Health {
            status: status.into(),
            checks,
        }),
    )
}

/// This document.
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    tag = "meta",
    responses((status = 200, description = "The OpenAPI document", content_type = "application/json"))
)]
pub(super) async fn openapi_json() -> Json<&'static utoipa::openapi::OpenApi> {
    Json(super::openapi())
}
