//! `/v1/batches/{id}`: a batch of tasks enqueued with a completion callback: one-shot tasks
//! ([`keyfire::Client::enqueue_batch`]) or a topic's tasks ([`keyfire::queue::Queue::add_batch`]).

use axum::Json;
use axum::extract::{Path, State};

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use keyfire::BatchStatus;
use keyfire::error::Error;

/// Read a batch's progress: how many of its tasks succeeded, died, were cancelled, and are
/// pending, and when the last one ended (its callback was queued then).
///
/// A batch's record is kept for 7 days after it completed; 404 after that, or for an id no
/// batch has.
#[utoipa::path(
    get,
    path = "/v1/batches/{id}",
    tag = "tasks",
    params(("id" = String, Path, description = "The batch's id (`batch_id` of `POST /v1/tasks/batch` or `POST /v1/topics/{topic}/tasks/batch`)")),
    responses(
        (status = 200, description = "The batch's counts", body = BatchStatus),
        (status = 404, description = "No such batch (`field`: `id`)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn get_batch(
    State(state): State<ApiState>,
    Path(id): Path<String>,
) -> Result<Json<BatchStatus>, ApiError> {
    match state.client().get_batch(&id).await {
        Ok(b) => Ok(Json(b)),
        Err(Error::NotFound(_)) => Err(ApiError::not_found(format!("no batch '{id}'")).field("id")),
        Err(e) => Err(e.into()),
    }
}
