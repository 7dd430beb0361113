//! `POST /v1/jobs/{id}/backfill`: run each instant of a job's schedule in a past range once, as
//! a firing of its own, at a bounded rate ([`keyfire::Client::backfill`]).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use super::extract::ApiJson;

/// The range to backfill, and how fast.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct BackfillRequest {
    /// The first instant of the range (included).
    #[schema(example = "2026-03-01T00:00:00Z")]
    pub from: DateTime<Utc>,
    /// The last instant of the range (included); not in the future. The range may hold at
    /// most 10,000 instants of the schedule.
    #[schema(example = "2026-03-02T00:00:00Z")]
    pub to: DateTime<Utc>,
    /// Runs per second, from 0.01 to 100 (default 10); a job's backfills run one after the
    /// other at their rates.
    #[serde(default)]
    #[schema(minimum = 0.01, maximum = 100.0, example = 10.0)]
    pub rate: Option<f64>,
}

/// What a backfill queued.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub(super) struct BackfillView {
    /// The job.
    pub job_id: String,
    /// Instants of the schedule in the range.
    pub instants: u64,
    /// Those queued to run, each once, as firing `<job id>:<instant ms>`.
    pub scheduled: u64,
    /// Those skipped as already run (or running, queued, or still to come on the schedule).
    pub skipped: u64,
    /// When the first queued run is due.
    pub first_at: Option<DateTime<Utc>>,
    /// When the last queued run is due.
    pub last_at: Option<DateTime<Utc>>,
}

/// Run each instant of the job's schedule from `from` to `to` once, each as a firing of its
/// own (its id names the instant), at `rate` runs per second.
///
/// Instants a firing ran, runs or waits for already are skipped (the run history, dead
/// letters, runs in progress, queued attempts, earlier backfills; from the job's creation to
/// its last firing, what its ledger does not name as skipped), so sending the same backfill
/// again queues nothing. The runs wait in Redis as queued attempts: any node runs them.
#[utoipa::path(
    post,
    path = "/v1/jobs/{id}/backfill",
    tag = "jobs",
    params(("id" = String, Path, description = "The job's id")),
    request_body(content = BackfillRequest, example = json!({"from": "2026-03-01T00:00:00Z", "to": "2026-03-02T00:00:00Z", "rate": 5})),
    responses(
        (status = 202, description = "The instants are queued", body = BackfillView),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 409, description = "The job changed while the instants were queued (`conflict`)", body = ErrorBody),
        (status = 422, description = "`to` before `from`, in the future, or past 10,000 instants; `rate` out of bounds; a one-shot or paused job (`id`)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn backfill_job(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<BackfillRequest>,
) -> Result<(StatusCode, Json<BackfillView>), ApiError> {
    let done = state
        .client()
        .backfill(&id, body.from, body.to, body.rate)
        .await?;
    let at = |ms: Option<i64>| ms.and_then(DateTime::<Utc>::from_timestamp_millis);
    Ok((
        StatusCode::ACCEPTED,
        Json(BackfillView {
            job_id: id,
            instants: done.instants,
            scheduled: done.scheduled,
            skipped: done.skipped,
            first_at: at(done.first_ms),
            last_at: at(done.last_ms),
        }),
    ))
}
