//! `/v1/limits`: flow control. Set, read, list and lift per-key limits; each answer shows
//! what runs and waits under the key now.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use super::extract::{RawJson, decode};
use keyfire::FlowLimitSpec;
use keyfire::FlowLimitStatus;

/// Held firings listed by `GET /v1/limits/{key}`, first in line first.
const HELD_SHOWN: usize = 100;

/// Every limit.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LimitList {
    /// By key.
    pub limits: Vec<FlowLimitStatus>,
}

/// A limit, what runs under it, and the firings it holds back.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LimitView {
    /// The limit and its counts.
    #[serde(flatten)]
    pub status: FlowLimitStatus,
    /// The first firings in line (at most 100), first first.
    pub held_firings: Vec<HeldFiring>,
}

/// A firing held back by its limit.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HeldFiring {
    /// The firing id.
    pub firing_id: String,
    /// Its scheduled instant (its place in line).
    pub scheduled_at: Option<DateTime<Utc>>,
}

async fn view(state: &ApiState, key: &str) -> Result<LimitView, ApiError> {
    let client = state.client();
    let status = client.limit(key).await?;
    let held_firings = client
        .held_firings(key, HELD_SHOWN)
        .await?
        .into_iter()
        .map(|(firing_id, ms)| HeldFiring {
            firing_id,
            scheduled_at: DateTime::from_timestamp_millis(ms),
        })
        .collect();
    Ok(LimitView {
        status,
        held_firings,
    })
}

/// Set (create or replace) the limit of a key.
///
/// `rate`: most firings started per second; `in_flight`: most running at once; give one or
/// both, neither 0. The key is `host:<host>` for an `http` target, or the `limit_key` jobs
/// name. Every node applies it at once.
#[utoipa::path(
    put,
    path = "/v1/limits/{key}",
    tag = "limits",
    params(("key" = String, Path, description = "The limit key, such as host:api.example.com")),
    request_body = FlowLimitSpec,
    responses(
        (status = 200, description = "Set", body = LimitView),
        (status = 422, description = "Not a valid limit key, or a bound breaks its rule (`field` names it)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn put_limit(
    State(state): State<ApiState>,
    Path(key): Path<String>,
    RawJson(mut body): RawJson,
) -> Result<Json<LimitView>, ApiError> {
    let Value::Object(map) = &mut body else {
        return Err(ApiError::invalid(
            "",
            "the body must be a JSON object (a limit)",
        ));
    };
    match map.get("key") {
        None => {
            map.insert("key".into(), Value::String(key.clone()));
        }
        Some(Value::String(given)) if *given == key => {}
        Some(_) => {
            return Err(ApiError::invalid(
                "key",
                format!("the body's key does not match the path's '{key}'"),
            ));
        }
    }
    let spec: FlowLimitSpec = decode(body, "")?;
    state.client().put_limit(spec).await?;
    Ok(Json(view(&state, &key).await?))
}

/// A limit, what runs under it now, and the firings it holds back.
#[utoipa::path(
    get,
    path = "/v1/limits/{key}",
    tag = "limits",
    params(("key" = String, Path, description = "The limit key")),
    responses(
        (status = 200, description = "The limit", body = LimitView),
        (status = 404, description = "No limit on this key", body = ErrorBody),
        (status = 422, description = "Not a valid limit key", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn get_limit(
    State(state): State<ApiState>,
    Path(key): Path<String>,
) -> Result<Json<LimitView>, ApiError> {
    Ok(Json(view(&state, &key).await?))
}

/// Lift the limit of a key: the firings it held back run at their turn, unlimited.
#[utoipa::path(
    delete,
    path = "/v1/limits/{key}",
    tag = "limits",
    params(("key" = String, Path, description = "The limit key")),
    responses(
        (status = 204, description = "Lifted"),
        (status = 404, description = "No limit on this key", body = ErrorBody),
        (status = 422, description = "Not a valid limit key", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn delete_limit(
    State(state): State<ApiState>,
    Path(key): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.client().delete_limit(&key).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Every limit, with what runs and waits under each now.
#[utoipa::path(
    get,
    path = "/v1/limits",
    tag = "limits",
    responses((status = 200, description = "Every limit", body = LimitList)),
    security(("bearer" = []))
)]
pub(super) async fn list_limits(
    State(state): State<ApiState>,
) -> Result<Json<LimitList>, ApiError> {
    Ok(Json(LimitList {
        limits: state.client().limits().await?,
    }))
}
