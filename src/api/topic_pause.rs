//! `/v1/topics/{topic}/pause`, `/resume`: stop a topic's pops from reserving anything, and
//! let them again ([`keyfire::queue::Queue::pause`]).

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use super::topic_dead::known_topic;

/// A topic's paused state after a pause or resume.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TopicPaused {
    /// The topic.
    pub topic: String,
    /// Whether it is paused now.
    pub paused: bool,
    /// Whether this call changed it (false: it was so already).
    pub changed: bool,
}

/// Pause a topic: its pops reserve nothing until it is resumed.
///
/// A pop, waiting or not, answers nothing (204, or an empty list) while the topic is paused.
/// Adds are accepted, delayed tasks still become ready, and reservations handed out before
/// can still be finished and touched. Pausing a paused topic changes nothing.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/pause",
    tag = "topics",
    params(("topic" = String, Path, description = "The topic")),
    responses(
        (status = 200, description = "Paused", body = TopicPaused),
        (status = 404, description = "No such topic (`field`: `topic`)", body = ErrorBody),
        (status = 422, description = "Not a valid topic name", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn pause_topic(
    State(state): State<ApiState>,
    Path(topic): Path<String>,
) -> Result<Json<TopicPaused>, ApiError> {
    known_topic(&state, &topic).await?;
    let changed = state.queue().pause(&topic).await?;
    Ok(Json(TopicPaused {
        topic,
        paused: true,
        changed,
    }))
}

/// Resume a paused topic: its ready tasks are delivered again, in the order they became
/// ready, and waiting pops are woken. Resuming a topic that is not paused changes nothing.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/resume",
    tag = "topics",
    params(("topic" = String, Path, description = "The topic")),
    responses(
        (status = 200, description = "Resumed", body = TopicPaused),
        (status = 404, description = "No such topic (`field`: `topic`)", body = ErrorBody),
        (status = 422, description = "Not a valid topic name", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn resume_topic(
    State(state): State<ApiState>,
    Path(topic): Path<String>,
) -> Result<Json<TopicPaused>, ApiError> {
    known_topic(&state, &topic).await?;
    let changed = state.queue().resume(&topic).await?;
    Ok(Json(TopicPaused {
        topic,
        paused: false,
        changed,
    }))
}
