//! `POST /v1/topics/{topic}/tasks/batch`: many tasks added to one topic in one call, and with
//! `on_complete` a batch whose completion sends one callback
//! ([`keyfire::queue::Queue::add_batch`]); its progress reads at `GET /v1/batches/{id}`.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use super::extract::ApiJson;
use super::topics::{AddTask, Added, new_task, queue_error};
use keyfire::client::{MAX_BATCH_TASKS, OnComplete};

/// Tasks to add to one topic.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TopicBatch {
    /// 1 to 1000 tasks, as `POST /v1/topics/{topic}/tasks` takes them (with `on_complete`:
    /// without `id` or `dedup`, keyfire picks the ids).
    pub tasks: Vec<AddTask>,
    /// A callback sent once every task of the batch has ended: finished, gone to the topic's
    /// dead letters, or deleted before it ended. One signed POST with the counts (type
    /// `keyfire.batch.completed`, `webhook-id` `batch:<batch id>:completed`).
    #[serde(default)]
    #[schema(value_type = Option<keyfire::client::OnComplete>)]
    pub on_complete: Option<OnComplete>,
}

/// The tasks added, in the order given.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AddedBatch {
    /// The batch's id, when it was added with `on_complete` (`GET /v1/batches/{id}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<String>,
    /// One per task of the request.
    pub tasks: Vec<Added>,
}

/// Add many tasks to a topic in one call; with `on_complete`, as a batch with a completion
/// callback.
///
/// Every task is checked first: one that breaks a rule refuses the whole request (422 naming
/// `tasks[i].field`) and nothing is added. Without `on_complete` each task is added as
/// `POST /v1/topics/{topic}/tasks` adds it (an id that exists is left as it is). With it, keyfire
/// picks the ids (all on one partition of the topic) and sends one signed callback once every
/// task has ended — finished, gone to the dead letters, or deleted before it ended — queued in
/// the same step that ended the last one; a dead letter replayed later leaves the batch. A
/// delayed task needs a node serving the `topic` handler (409 otherwise).
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/tasks/batch",
    tag = "topics",
    params(("topic" = String, Path, description = "Letters, digits, `_`, `.`, `-`; at most 128 bytes")),
    request_body = TopicBatch,
    responses(
        (status = 201, description = "Added", body = AddedBatch),
        (status = 409, description = "No node serves the `topic` handler, so a delayed task could not become ready; or (with `on_complete`) the queue has not switched to the sharded layout yet", body = ErrorBody),
        (status = 422, description = "Not a valid topic name, or a field breaks its rule (`field` names it: `tasks[2].ttr`, `on_complete.url`)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn add_topic_batch(
    State(state): State<ApiState>,
    Path(topic): Path<String>,
    ApiJson(body): ApiJson<TopicBatch>,
) -> Result<(StatusCode, Json<AddedBatch>), ApiError> {
    keyfire::queue::check_topic(&topic)?;
    if body.tasks.is_empty() || body.tasks.len() > MAX_BATCH_TASKS {
        return Err(ApiError::invalid(
            "tasks",
            format!(
                "give 1 to {MAX_BATCH_TASKS} tasks, got {}",
                body.tasks.len()
            ),
        ));
    }
    let mut tasks = Vec::with_capacity(body.tasks.len());
    for (i, task) in body.tasks.into_iter().enumerate() {
        tasks.push(new_task(&topic, task, &format!("tasks[{i}]."))?);
    }
    let queue = state.queue();
    let (batch_id, ids) = match body.on_complete {
        Some(on_complete) => {
            let b = queue
                .add_batch(&topic, tasks, on_complete)
                .await
                .map_err(queue_error)?;
            (Some(b.batch_id), b.ids)
        }
        None => (None, queue.add_many(tasks).await.map_err(queue_error)?),
    };
    let tasks = ids
        .into_iter()
        .map(|id| Added {
            id,
            topic: topic.clone(),
            deduplicated: None,
        })
        .collect();
    Ok((StatusCode::CREATED, Json(AddedBatch { batch_id, tasks })))
}
