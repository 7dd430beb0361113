//! `/v1/jobs:pause` and `/v1/jobs:resume`: pause or resume every job picked by handler or by id
//! prefix. The paths sit beside `/v1/jobs` rather than under it, so no job id can be shadowed
//! by them (`/v1/jobs/pause` would be the job `pause`'s path).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use super::extract::ApiJson;
use keyfire::bulk::{BulkOutcome, JobSelector};

/// Which jobs to act on: exactly one of `handler` and `id_prefix`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct JobSelection {
    /// Every job (one-shot tasks included) whose handler is this one.
    #[serde(default, deserialize_with = "given")]
    #[schema(nullable = false)]
    pub handler: Option<String>,
    /// Every job whose id starts with this (such as `billing-`).
    #[serde(default, deserialize_with = "given")]
    #[schema(nullable = false)]
    pub id_prefix: Option<String>,
}

/// A selector that is present is a string: `null` is refused (the document says so), not
/// read as absent.
fn given<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    String::deserialize(d).map(Some)
}

impl JobSelection {
    fn selector(self) -> Result<JobSelector, ApiError> {
        let selector = match (self.handler, self.id_prefix) {
            (Some(h), None) => JobSelector::Handler(h),
            (None, Some(p)) => JobSelector::IdPrefix(p),
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid(
                    "id_prefix",
                    "give either handler or id_prefix, not both",
                ));
            }
            (None, None) => {
                return Err(ApiError::invalid(
                    "handler",
                    "give handler or id_prefix: which jobs to act on",
                ));
            }
        };
        selector.check()?;
        Ok(selector)
    }
}

/// What a bulk pause or resume did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub(super) struct BulkChanged {
    /// Jobs the selection picked, whatever their status.
    pub matched: u64,
    /// Those this request paused (or resumed); the others already were, or are finished.
    pub changed: u64,
}

impl From<BulkOutcome> for BulkChanged {
    fn from(o: BulkOutcome) -> Self {
        Self {
            matched: o.matched,
            changed: o.changed,
        }
    }
}

/// Pause every active job picked by `handler` or by `id_prefix` (exactly one).
///
/// Reads the whole job index, a page at a time, and pauses each match as
/// `POST /v1/jobs/{id}/pause` would; a job created meanwhile may be missed.
#[utoipa::path(
    post,
    path = "/v1/jobs:pause",
    tag = "jobs",
    request_body(content = JobSelection, example = json!({"id_prefix": "billing-"})),
    responses(
        (status = 200, description = "How many jobs matched, and how many this paused", body = BulkChanged),
        (status = 422, description = "Neither or both of `handler` and `id_prefix`, or one that picks nothing (`field` names it)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn pause_jobs(
    State(state): State<ApiState>,
    ApiJson(body): ApiJson<JobSelection>,
) -> Result<Json<BulkChanged>, ApiError> {
    let selector = body.selector()?;
    let outcome = state.client().pause_matching(&selector).await?;
    Ok(Json(outcome.into()))
}

/// Resume every paused job picked by `handler` or by `id_prefix` (exactly one).
///
/// Each is resumed as `POST /v1/jobs/{id}/resume` would: its misfire policy decides what its
/// pause skipped.
#[utoipa::path(
    post,
    path = "/v1/jobs:resume",
    tag = "jobs",
    request_body(content = JobSelection, example = json!({"handler": "send-invoice"})),
    responses(
        (status = 200, description = "How many jobs matched, and how many this resumed", body = BulkChanged),
        (status = 422, description = "Neither or both of `handler` and `id_prefix`, or one that picks nothing (`field` names it); or a picked job no longer passes validation", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn resume_jobs(
    State(state): State<ApiState>,
    ApiJson(body): ApiJson<JobSelection>,
) -> Result<Json<BulkChanged>, ApiError> {
    let selector = body.selector()?;
    let outcome = state.client().resume_matching(&selector).await?;
    Ok(Json(outcome.into()))
}
