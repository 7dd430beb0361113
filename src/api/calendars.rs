//! `/v1/calendars`: named exclusions (dates, date ranges, cron expressions in a zone) that
//! jobs name in `exclude`. Written, read, listed and deleted; a calendar a job names is not
//! deleted.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use super::extract::{RawJson, decode};
use keyfire::CalendarSpec;

/// Every calendar.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CalendarList {
    /// By name.
    pub calendars: Vec<CalendarSpec>,
}

/// Create or replace a calendar.
///
/// Each instant of a job that names it in `exclude` is judged by the calendar as it is when
/// that instant comes: a change applies at once to every instant not yet claimed, on every
/// node; an excluded instant is skipped and recorded in the job's ledger as `excluded`.
#[utoipa::path(
    put,
    path = "/v1/calendars/{name}",
    tag = "calendars",
    params(("name" = String, Path, description = "The calendar's name, such as de-holidays")),
    request_body = CalendarSpec,
    responses(
        (status = 200, description = "Written", body = CalendarSpec),
        (status = 422, description = "A field breaks its rule (`field` names it)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn put_calendar(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    RawJson(mut body): RawJson,
) -> Result<Json<CalendarSpec>, ApiError> {
    let Value::Object(map) = &mut body else {
        return Err(ApiError::invalid(
            "",
            "the body must be a JSON object (a calendar)",
        ));
    };
    match map.get("name") {
        None => {
            map.insert("name".into(), Value::String(name.clone()));
        }
        Some(Value::String(given)) if *given == name => {}
        Some(_) => {
            return Err(ApiError::invalid(
                "name",
                format!("the body's name does not match the path's '{name}'"),
            ));
        }
    }
    let spec: CalendarSpec = decode(body, "")?;
    let calendar = state.client().put_calendar(spec).await?;
    Ok(Json(calendar.spec))
}

/// A calendar.
#[utoipa::path(
    get,
    path = "/v1/calendars/{name}",
    tag = "calendars",
    params(("name" = String, Path, description = "The calendar's name")),
    responses(
        (status = 200, description = "The calendar", body = CalendarSpec),
        (status = 404, description = "No such calendar", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn get_calendar(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Result<Json<CalendarSpec>, ApiError> {
    Ok(Json(state.client().calendar(&name).await?))
}

/// Delete a calendar; refused (409, naming them) while jobs name it in `exclude`.
#[utoipa::path(
    delete,
    path = "/v1/calendars/{name}",
    tag = "calendars",
    params(("name" = String, Path, description = "The calendar's name")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such calendar", body = ErrorBody),
        (status = 409, description = "Jobs name it in `exclude` (the message names them)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn delete_calendar(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.client().delete_calendar(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Every calendar.
#[utoipa::path(
    get,
    path = "/v1/calendars",
    tag = "calendars",
    responses((status = 200, description = "Every calendar", body = CalendarList)),
    security(("bearer" = []))
)]
pub(super) async fn list_calendars(
    State(state): State<ApiState>,
) -> Result<Json<CalendarList>, ApiError> {
    Ok(Json(CalendarList {
        calendars: state.client().calendars().await?,
    }))
}
