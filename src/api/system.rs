//! Nodes, health, readiness and the OpenAPI document.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::DateTime;
use serde_json::{Map, Value};

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use super::model::{Health, NodeList, NodeView};
use keyfire::Client;
use keyfire::error::Result;
use keyfire::inspect::{LiveNode, has_expired_events};

/// Where [`live_nodes`] reads the nodes' heartbeats and hashes: a [`Client`] (and, with the
/// `lab` feature, the library's store, which keyfire's own tests hold).
pub trait NodeSource: Sync {
    /// The nodes whose heartbeat is within `node_ttl_ms` of Redis's clock.
    fn heartbeats(&self, node_ttl_ms: i64) -> impl Future<Output = Result<Vec<LiveNode>>> + Send;
}

impl NodeSource for Client {
    fn heartbeats(&self, node_ttl_ms: i64) -> impl Future<Output = Result<Vec<LiveNode>>> + Send {
        self.live_nodes(node_ttl_ms)
    }
}

#[cfg(feature = "lab")]
impl NodeSource for keyfire::store::Store {
    fn heartbeats(&self, node_ttl_ms: i64) -> impl Future<Output = Result<Vec<LiveNode>>> + Send {
        self.live_nodes(node_ttl_ms)
    }
}

/// The live nodes (heartbeat within `node_ttl_ms` by Redis's clock) and what they announced.
pub async fn live_nodes(source: &impl NodeSource, node_ttl_ms: i64) -> Result<Vec<NodeView>> {
    let live = source.heartbeats(node_ttl_ms).await?;
    let mut nodes: Vec<NodeView> = live
        .into_iter()
        .map(|(id, seen, hash)| {
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
    let nodes = live_nodes(state.client(), state.node_ttl_ms()).await?;
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

/// `used_memory / maxmemory` from which `/readyz` says not ready: at 1 Redis refuses writes
/// (`maxmemory-policy noeviction`), so creates, adds and claims fail.
pub(crate) const NOT_READY_MEMORY_RATIO: f64 = 0.95;

/// Whether a master is at or past [`NOT_READY_MEMORY_RATIO`], and the check's line.
fn memory_verdict(servers: &[keyfire::inspect::ServerMemory]) -> (bool, String) {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let fullest = servers
        .iter()
        .filter(|s| s.max > 0)
        .max_by(|a, b| a.ratio().total_cmp(&b.ratio()));
    match fullest {
        None => (false, "ok: no maxmemory limit".into()),
        Some(s) if s.ratio() >= NOT_READY_MEMORY_RATIO => (
            true,
            format!(
                "full: {} uses {:.0}% of its maxmemory ({:.1} of {:.1} MiB; not ready from {:.0}%): \
                 at 100% Redis refuses writes; free memory (delete tasks and jobs no longer \
                 needed, purge dead letters) or raise maxmemory",
                s.server,
                s.ratio() * 100.0,
                mib(s.used),
                mib(s.max),
                NOT_READY_MEMORY_RATIO * 100.0
            ),
        ),
        Some(s) => (
            false,
            format!(
                "ok: {:.0}% of maxmemory used at most ({})",
                s.ratio() * 100.0,
                s.server
            ),
        ),
    }
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
    let client = state.client();
    let ping = tokio::time::timeout(std::time::Duration::from_secs(2), client.ping()).await;
    let redis_ok = matches!(ping, Ok(Ok(())));
    checks.insert(
        "redis".into(),
        Value::String(match ping {
            Ok(Ok(())) => "ok".into(),
            Ok(Err(e)) => format!("unreachable: {e}"),
            Err(_) => "unreachable: no answer within 2s".into(),
        }),
    );
    let mut ready = redis_ok;
    if redis_ok {
        let verdict = match client.notify_flags().await {
            Ok(Some(flags)) if has_expired_events(&flags) => "ok".to_string(),
            // A managed Redis: the node probed the events at start, and its sweeper covers
            // any lost since.
            Ok(None) => "ok: CONFIG is unavailable; checked by a probe key at start".to_string(),
            Ok(Some(flags)) => {
                ready = false;
                format!("expired events are off (notify-keyspace-events is \"{flags}\"; needs Ex)")
            }
            Err(e) => {
                ready = false;
                format!("cannot read notify-keyspace-events: {e}")
            }
        };
        checks.insert("notifications".into(), Value::String(verdict));
        let (full, verdict) = match state.figures().memory().await {
            Ok(servers) => memory_verdict(&servers),
            // Readiness is not staked on a figure that cannot be read.
            Err(e) => (false, format!("unknown: cannot read INFO memory: {e}")),
        };
        ready &= !full;
        checks.insert("memory".into(), Value::String(verdict));
        // Shown, not staked: the nodes healed what they own; what was created at run time
        // is gone, which no node can fix.
        if let Ok(Some(loss)) = client.data_loss().await {
            let when = chrono::DateTime::from_timestamp_millis(loss.at_ms)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                .unwrap_or_default();
            checks.insert(
                "data_loss".into(),
                Value::String(format!(
                    "Redis lost keyfire's data at {when} (noticed by node {}: {}); jobs and tasks \
                     created at run time before then are gone; shown for an hour, or until \
                     `keyfire doctor --ack-data-loss`",
                    loss.node, loss.detail
                )),
            );
        }
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
pub(super) async fn openapi_json() -> Json<&'static serde_json::Value> {
    Json(super::openapi())
}
