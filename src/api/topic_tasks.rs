//! `/v1/topics/{topic}/tasks/{id}` (+ `/finish`, `/touch`): a delay-queue task under its
//! topic, where a newcomer looks for it. `/v1/tasks/{id}` (+ `/finish`, `/touch`) are the same
//! operations under their older paths, kept as deprecated aliases; `/v1/tasks` itself (`POST`)
//! enqueues a one-shot *job*, read back under `/v1/jobs/{id}`.
//!
//! Each route checks that the task is in the topic its path names (404 otherwise), then does
//! what its alias does.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;

use keyfire::queue::TaskInfo;

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use super::extract::ApiJson;
use super::topics::{self, FinishBody, TaskView, TouchBody, Touched};

/// Task `id`, found in `topic` (looked for in the topic's partitions only); 404 when it is not
/// there.
pub(super) async fn in_topic(
    state: &ApiState,
    topic: &str,
    id: &str,
) -> Result<TaskInfo, ApiError> {
    match state.queue().get_in(topic, id).await {
        Ok(task) => Ok(task),
        Err(keyfire::Error::TaskNotFound(_)) => Err(ApiError::not_found(format!(
            "no task '{id}' in topic '{topic}'"
        ))),
        Err(e) => Err(e.into()),
    }
}

/// A task's state, delivery count and instants (done and deleted tasks are shown for a
/// retention, without their payload).
#[utoipa::path(
    get,
    path = "/v1/topics/{topic}/tasks/{id}",
    tag = "topics",
    params(
        ("topic" = String, Path, description = "The task's topic"),
        ("id" = String, Path, description = "The task's id"),
    ),
    responses(
        (status = 200, description = "The task", body = TaskView),
        (status = 404, description = "No such task in this topic", body = ErrorBody),
        (status = 422, description = "Invalid id", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn get_topic_task(
    State(state): State<ApiState>,
    Path((topic, id)): Path<(String, String)>,
) -> Result<Json<TaskView>, ApiError> {
    Ok(Json(in_topic(&state, &topic, &id).await?.into()))
}

/// Delete a task in any state, for good: it is never delivered (again).
#[utoipa::path(
    delete,
    path = "/v1/topics/{topic}/tasks/{id}",
    tag = "topics",
    params(
        ("topic" = String, Path, description = "The task's topic"),
        ("id" = String, Path, description = "The task's id"),
    ),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such task in this topic (or already deleted)", body = ErrorBody),
        (status = 422, description = "Invalid id", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn delete_topic_task(
    State(state): State<ApiState>,
    Path((topic, id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    in_topic(&state, &topic, &id).await?;
    state.queue().delete_in(&topic, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Finish (acknowledge) a reserved task with its reservation token: it is done.
///
/// 409 when the reservation is no longer this token's: it expired and the task was handed on
/// (or went to the dead letters), or the token is wrong.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/tasks/{id}/finish",
    tag = "topics",
    params(
        ("topic" = String, Path, description = "The task's topic"),
        ("id" = String, Path, description = "The task's id"),
    ),
    request_body = FinishBody,
    responses(
        (status = 204, description = "Done"),
        (status = 404, description = "No such task in this topic (or it was deleted)", body = ErrorBody),
        (status = 409, description = "The reservation is no longer this token's", body = ErrorBody),
        (status = 422, description = "Not a valid task id", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn finish_topic_task(
    State(state): State<ApiState>,
    Path((topic, id)): Path<(String, String)>,
    body: ApiJson<FinishBody>,
) -> Result<StatusCode, ApiError> {
    in_topic(&state, &topic, &id).await?;
    topics::finish(State(state), Path(id), body).await
}

/// Extend a reservation: its deadline becomes now plus `ttr` (or the task's own).
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/tasks/{id}/touch",
    tag = "topics",
    params(
        ("topic" = String, Path, description = "The task's topic"),
        ("id" = String, Path, description = "The task's id"),
    ),
    request_body = TouchBody,
    responses(
        (status = 200, description = "The new deadline", body = Touched),
        (status = 404, description = "No such task in this topic (or it was deleted)", body = ErrorBody),
        (status = 409, description = "The reservation is no longer this token's", body = ErrorBody),
        (status = 422, description = "Not a valid task id, or `ttr` breaks its rule", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn touch_topic_task(
    State(state): State<ApiState>,
    Path((topic, id)): Path<(String, String)>,
    body: ApiJson<TouchBody>,
) -> Result<Json<Touched>, ApiError> {
    in_topic(&state, &topic, &id).await?;
    topics::touch(State(state), Path(id), body).await
}

/// The older paths of the routes above, kept working and marked deprecated in the document.
pub(super) const DEPRECATED_ALIASES: &[(&str, &str)] = &[
    ("/v1/tasks/{id}", "/v1/topics/{topic}/tasks/{id}"),
    (
        "/v1/tasks/{id}/finish",
        "/v1/topics/{topic}/tasks/{id}/finish",
    ),
    (
        "/v1/tasks/{id}/touch",
        "/v1/topics/{topic}/tasks/{id}/touch",
    ),
];
