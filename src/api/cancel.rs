//! `POST /v1/jobs/{id}/cancel` and `POST /v1/tasks/{id}/cancel`: cancel what a job (a
//! one-shot task is a job) has in progress, through [`keyfire::Client::cancel`].

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use keyfire::error::Error;

/// What a cancel did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CancelView {
    /// The job.
    pub job_id: String,
    /// Running firings told to stop: the node running each stops it and records it
    /// `cancelled` in the job's runs (unless it succeeded first). Empty with status 200.
    pub stopping: Vec<String>,
    /// Firings cancelled before they ran, recorded `cancelled` in the job's runs already: a
    /// one-shot job's pending instant (the job is then `finished`), attempts queued for a
    /// retry.
    pub cancelled: Vec<String>,
}

/// Cancel the job `id` in the API's terms: a bad id is a bad path (400, `field` "id"), no job
/// 404, nothing to cancel 409 `nothing_to_cancel`; 202 when a running firing was told to stop,
/// 200 when everything cancelled is recorded already.
async fn cancel(state: &ApiState, id: String) -> Result<(StatusCode, Json<CancelView>), ApiError> {
    let done = match state.client().cancel(&id).await {
        Ok(done) => done,
        Err(Error::Invalid(v)) => {
            return Err(ApiError::bad_path(
                "id",
                format!("invalid id: {}", v.message),
            ));
        }
        Err(e) => return Err(e.into()),
    };
    if done.is_empty() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "nothing_to_cancel",
            format!(
                "job '{id}' has nothing to cancel: no firing running, no attempt queued, no \
                 pending one-shot instant (pause a recurring job to stop its next firings)"
            ),
        ));
    }
    let status = if done.stopping.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok((
        status,
        Json(CancelView {
            job_id: id,
            stopping: done.stopping,
            cancelled: done.cancelled,
        }),
    ))
}

/// Cancel what a job has in progress, on whichever node runs it.
///
/// Running firings are told to stop (the handler's cancellation: an `http` call's connection
/// is closed, a `command`'s process group gets SIGTERM then SIGKILL) and are recorded
/// `cancelled` in the job's runs once their node has stopped them; attempts queued for a retry
/// and a one-shot job's pending instant are removed and recorded `cancelled` at once. A
/// cancelled firing is never retried. A recurring job keeps its schedule: its next firing is
/// not cancelled (pause the job for that).
#[utoipa::path(
    post,
    path = "/v1/jobs/{id}/cancel",
    tag = "jobs",
    params(("id" = String, Path, description = "The job's id")),
    responses(
        (status = 200, description = "Cancelled before they ran (`cancelled`), nothing was running: recorded in the job's runs", body = CancelView),
        (status = 202, description = "Running firings (`stopping`) are being stopped; each is recorded `cancelled` once its node stopped it", body = CancelView),
        (status = 400, description = "Bad id (`bad_path`, `field` \"id\")", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 409, description = "Nothing to cancel (`nothing_to_cancel`): no firing running, no attempt queued, no pending one-shot instant", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn cancel_job(
    State(state): State<ApiState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<CancelView>), ApiError> {
    cancel(&state, id).await
}

/// Cancel a one-shot task: its pending instant (the task is then `finished`, its run recorded
/// `cancelled`), or its running firing, on whichever node runs it. A one-shot task is a job:
/// the same as `POST /v1/jobs/{id}/cancel`.
#[utoipa::path(
    post,
    path = "/v1/tasks/{id}/cancel",
    tag = "tasks",
    params(("id" = String, Path, description = "The task's id")),
    responses(
        (status = 200, description = "Cancelled before it ran (`cancelled`): recorded in its runs, the task is finished", body = CancelView),
        (status = 202, description = "Its running firing (`stopping`) is being stopped; recorded `cancelled` once its node stopped it", body = CancelView),
        (status = 400, description = "Bad id (`bad_path`, `field` \"id\")", body = ErrorBody),
        (status = 404, description = "No such task", body = ErrorBody),
        (status = 409, description = "Nothing to cancel (`nothing_to_cancel`): it ran already", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn cancel_task(
    State(state): State<ApiState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<CancelView>), ApiError> {
    cancel(&state, id).await
}
