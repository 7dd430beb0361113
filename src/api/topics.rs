//! `/v1/topics`, `/v1/tasks/{id}`: the delay queue ([`keyfire::queue::Queue`]) over HTTP.
//!
//! Producers add tasks to a topic; consumers long-poll `pop`, then `finish` with the
//! reservation token the pop gave them (or `touch` to hold it longer). Inputs are checked by
//! the library, whose errors name the field (422).

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use super::extract::{ApiJson, ApiQuery};
use keyfire::error::Error;
use keyfire::queue::{
    DEFAULT_MAX_DELIVERIES, DEFAULT_TTR, Finished, MAX_POP, NewTask, Reserved, TaskInfo,
    TopicCounts, When,
};

/// Longest `wait` of a pop.
pub use keyfire::queue::MAX_WAIT;

/// A task to add to a topic.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddTask {
    /// Any JSON value (an object, an array, a string, a number, …), handed to the consumer
    /// as it is (at most `limits.max_params_bytes` serialized).
    #[serde(default)]
    #[schema(value_type = Value)]
    pub payload: Value,
    /// Its id (idempotent add: an id that exists is left as it is); a fresh one when absent.
    pub id: Option<String>,
    /// Ready after this delay (`30s`, `5m`); at once when neither `delay` nor `at` is given.
    #[schema(example = "30s")]
    pub delay: Option<String>,
    /// Ready at this instant (RFC 3339).
    pub at: Option<DateTime<Utc>>,
    /// How long a consumer may hold it before it is handed to another (default `60s`).
    #[schema(example = "60s")]
    pub ttr: Option<String>,
    /// Deliveries before it goes to the topic's dead letters (default 5).
    pub max_deliveries: Option<u32>,
    /// Its priority, 0 (default, lowest) to 9: pops take the highest ready first, in the
    /// order they became ready within a level (strict: a lower level waits while a higher one
    /// has ready tasks).
    #[schema(example = 5)]
    pub priority: Option<u8>,
    /// Deduplicate by a key (`key`, or `content: true` for the topic and payload) within a
    /// `window`; no `id`. `on_duplicate` says what a duplicate does to the pending task the key
    /// names: `keep` (default), `replace` (it takes this payload, ttr, deliveries and
    /// priority), `extend` (its due instant moves to this one's, never earlier) or
    /// `replace_extend`. Once that task was popped, a `replace`/`extend` duplicate adds a new
    /// task.
    pub dedup: Option<keyfire::job::DedupSpec>,
}

/// An added task.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Added {
    /// The task's id: with `dedup`, that of the task the key names when this was a duplicate.
    pub id: String,
    /// Its topic.
    pub topic: String,
    /// Only for a duplicate (`dedup`): what it did to the task the key names: `kept`,
    /// `replaced`, `extended` or `replaced_extended`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        pattern = "^(kept|replaced|extended|replaced_extended)$",
        example = "replaced"
    )]
    pub deduplicated: Option<String>,
}

/// The query of a pop.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PopQuery {
    /// How long to wait for a task (`10s`; default `0s`, at most `60s`).
    pub wait: Option<String>,
    /// Take up to this many tasks (1 to 1000). With `max`, the reply is a list
    /// ([`Popped`]), empty when none came; without it, one task or 204.
    pub max: Option<String>,
}

/// The tasks a pop with `max` reserved, each with its own token.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Popped {
    /// The reserved tasks, the longest ready first (empty when none came within `wait`).
    pub tasks: Vec<ReservedView>,
}

/// What a pop answers: one task, or with `max` a list of them.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum PopAnswer {
    /// Without `max`: the task.
    Task(ReservedView),
    /// With `max`: up to `max` tasks, maybe none.
    Tasks(Popped),
}

/// One task to finish in a batch.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FinishItem {
    /// The task's id.
    pub id: String,
    /// The reservation token its pop returned.
    pub token: String,
}

/// A batch finish: the tasks, with the tokens their pops returned.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FinishMany {
    /// 1 to 1000 tasks.
    pub tasks: Vec<FinishItem>,
}

/// How a batch finish answered one task.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FinishOutcome {
    /// The task's id.
    pub id: String,
    /// `done` (also when done already under this token), `lost` (the reservation is no
    /// longer this token's: the task went back to ready, to another consumer or to the dead
    /// letters), `not_found` (no such task, or deleted).
    #[schema(value_type = String, example = "done")]
    pub outcome: Finished,
}

/// The answers of a batch finish, in the order of the request.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FinishedMany {
    /// One per task of the request.
    pub results: Vec<FinishOutcome>,
}

/// A popped task and its reservation. Instants are Redis time.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ReservedView {
    /// The task's id.
    pub id: String,
    /// Its topic.
    pub topic: String,
    /// Its payload: any JSON value, as it was added.
    #[schema(value_type = Value)]
    pub payload: Value,
    /// Deliveries so far, this one included.
    pub deliveries: u32,
    /// The reservation token: `finish` and `touch` need it.
    pub token: String,
    /// The time-to-run of this reservation.
    #[schema(example = "60s")]
    pub ttr: String,
    /// When the task was due.
    pub due_at: DateTime<Utc>,
    /// When it (last) became ready.
    pub ready_at: DateTime<Utc>,
    /// Its priority, 0 to 9 (higher first).
    pub priority: u8,
    /// When this pop reserved it.
    pub reserved_at: DateTime<Utc>,
    /// When the reservation expires unless finished or touched.
    pub deadline: DateTime<Utc>,
}

impl From<Reserved> for ReservedView {
    fn from(r: Reserved) -> Self {
        Self {
            ttr: humantime::format_duration(r.ttr).to_string(),
            id: r.id,
            topic: r.topic,
            payload: r.payload,
            deliveries: r.deliveries,
            token: r.token,
            due_at: r.due_at,
            ready_at: r.ready_at,
            priority: r.priority,
            reserved_at: r.reserved_at,
            deadline: r.deadline,
        }
    }
}

/// A task as stored. Instants are Redis time.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TaskView {
    /// The task's id.
    pub id: String,
    /// Its topic.
    pub topic: String,
    /// `delayed`, `ready`, `reserved`, `done`, `dead` or `deleted`.
    #[schema(example = "ready")]
    pub state: String,
    /// Its payload: any JSON value, as it was added (null once done or deleted).
    #[schema(value_type = Value)]
    pub payload: Option<Value>,
    /// Deliveries so far.
    pub deliveries: u32,
    /// Deliveries before the dead letters.
    pub max_deliveries: u32,
    /// Time-to-run of a reservation.
    #[schema(example = "60s")]
    pub ttr: String,
    /// When it was added.
    pub created_at: DateTime<Utc>,
    /// When it is (was) due.
    pub due_at: DateTime<Utc>,
    /// When it last became ready.
    pub ready_at: Option<DateTime<Utc>>,
    /// Its priority, 0 to 9 (higher first).
    pub priority: u8,
    /// When it was last reserved.
    pub reserved_at: Option<DateTime<Utc>>,
    /// The deadline of its reservation, while reserved.
    pub deadline: Option<DateTime<Utc>>,
    /// When it was finished, went to the dead letters, or was deleted.
    pub finished_at: Option<DateTime<Utc>>,
    /// The batch it was added in (`POST /v1/topics/{topic}/tasks/batch` with `on_complete`);
    /// absent for other tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<String>,
}

impl From<TaskInfo> for TaskView {
    fn from(t: TaskInfo) -> Self {
        Self {
            state: t.state.as_str().to_string(),
            ttr: humantime::format_duration(t.ttr).to_string(),
            id: t.id,
            topic: t.topic,
            payload: t.payload,
            deliveries: t.deliveries,
            max_deliveries: t.max_deliveries,
            created_at: t.created_at,
            due_at: t.due_at,
            ready_at: t.ready_at,
            priority: t.priority,
            reserved_at: t.reserved_at,
            deadline: t.deadline,
            finished_at: t.finished_at,
            batch_id: t.batch,
        }
    }
}

/// The reservation a finish shows.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FinishBody {
    /// The token the pop returned.
    pub token: String,
}

/// The reservation a touch extends.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TouchBody {
    /// The token the pop returned.
    pub token: String,
    /// The new time-to-run from now (default: the task's own).
    #[schema(example = "60s")]
    pub ttr: Option<String>,
}

/// A reservation's new deadline.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Touched {
    /// The task's id.
    pub id: String,
    /// When the reservation now expires (Redis time).
    pub deadline: DateTime<Utc>,
}

/// Every topic.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TopicList {
    /// By name.
    pub topics: Vec<TopicCounts>,
}

/// The task `body` asks to add to `topic`; errors name its fields after `prefix`
/// (`tasks[2].`).
pub(super) fn new_task(topic: &str, body: AddTask, prefix: &str) -> Result<NewTask, ApiError> {
    let when = match (&body.delay, body.at) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid(
                &format!("{prefix}at"),
                "give `delay` or `at`, not both",
            ));
        }
        (Some(d), None) => When::Delay(duration(&format!("{prefix}delay"), d)?),
        (None, Some(at)) => When::At(at),
        (None, None) => When::Delay(Duration::ZERO),
    };
    let ttr = match &body.ttr {
        Some(t) => duration(&format!("{prefix}ttr"), t)?,
        None => DEFAULT_TTR,
    };
    Ok(NewTask {
        id: body.id,
        topic: topic.to_string(),
        payload: body.payload,
        when,
        ttr,
        max_deliveries: body.max_deliveries.unwrap_or(DEFAULT_MAX_DELIVERIES),
        priority: body.priority.unwrap_or(0),
        dedup: body.dedup,
    })
}

/// A duration field (`30s`, `1m 30s`): 422 naming it when it does not parse.
fn duration(field: &str, text: &str) -> Result<Duration, ApiError> {
    keyfire::job::parse_duration(text)
        .map_err(|e| ApiError::invalid(field, format!("invalid {field}: {e}")))
}

/// The queue's errors, with the one a delayed add meets when no node serves the `topic`
/// handler (a setup problem, not the caller's input) shown rather than hidden as internal.
pub(super) fn queue_error(e: Error) -> ApiError {
    match e {
        Error::Setup(message) => ApiError::new(StatusCode::CONFLICT, "conflict", message),
        other => other.into(),
    }
}

/// Add a task to a topic.
///
/// Ready after `delay`, at `at`, or at once. A delayed task becomes ready through keyfire's
/// firing machinery, so a node serving the `topic` handler must be running (409 otherwise).
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/tasks",
    tag = "topics",
    params(("topic" = String, Path, description = "Letters, digits, `_`, `.`, `-`; at most 128 bytes")),
    request_body = AddTask,
    responses(
        (status = 200, description = "A duplicate (`dedup`): `deduplicated` says what it did to the task its key names, whose id this is", body = Added),
        (status = 201, description = "Added (or an add with this id was already made to this topic)", body = Added),
        (status = 409, description = "No node serves the `topic` handler, so a delayed task could not become ready; or a task with this id is in another topic (`conflict`)", body = ErrorBody),
        (status = 422, description = "Not a valid topic name, or a field breaks its rule (`field` names it)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn add_task(
    State(state): State<ApiState>,
    Path(topic): Path<String>,
    headers: axum::http::HeaderMap,
    ApiJson(body): ApiJson<AddTask>,
) -> Result<(StatusCode, Json<Added>), ApiError> {
    let task = new_task(&topic, body, "")?;
    let given = task.id.is_some();
    let traceparent = crate::telemetry::request_traceparent(&headers);
    let added = state
        .queue()
        .add_task_outcome(task, traceparent.as_deref())
        .await
        .map_err(queue_error)?;
    let id = added.id;
    // An id that exists is left as it is, in whatever topic holds it: task ids are unique
    // across topics, so an add under another topic did not add anything here.
    if given {
        let held = state.queue().get(&id).await?;
        if held.topic != topic {
            return Err(ApiError::conflict(format!(
                "task '{id}' exists in topic '{}' (task ids are unique across topics); \
                 give another id, or none",
                held.topic
            ))
            .field("id"));
        }
    }
    let deduplicated = added.deduplicated.map(|d| d.as_str().to_string());
    let status = if deduplicated.is_some() {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((
        status,
        Json(Added {
            id,
            topic,
            deduplicated,
        }),
    ))
}

/// Pop the oldest ready task of a topic and reserve it for its time-to-run.
///
/// Long-polls: waits up to `wait` (at most 60 s) for a task, and answers as soon as one is
/// ready; 204 when none came. Finish it with the token before its deadline, or it is handed to
/// another consumer.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/pop",
    tag = "topics",
    params(("topic" = String, Path, description = "The topic"), PopQuery),
    responses(
        (status = 200, description = "A task, reserved; with `max`, a list of up to `max` (`Popped`, maybe empty)", body = PopAnswer),
        (status = 204, description = "No task became ready within `wait` (without `max`)"),
        (status = 400, description = "`wait` is not a duration or above 60s, or `max` not 1 to 1000 (`bad_query`)", body = ErrorBody),
        (status = 422, description = "Not a valid topic name", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn pop(
    State(state): State<ApiState>,
    Path(topic): Path<String>,
    ApiQuery(q): ApiQuery<PopQuery>,
) -> Result<Response, ApiError> {
    let wait = match q.wait.as_deref() {
        None => Duration::ZERO,
        Some(w) => keyfire::job::parse_duration(w)
            .map_err(|e| ApiError::bad_query("wait", format!("invalid wait: {e}")))?,
    };
    if wait > MAX_WAIT {
        return Err(ApiError::bad_query(
            "wait",
            format!(
                "wait must be at most {}, not {}",
                humantime::format_duration(MAX_WAIT),
                humantime::format_duration(wait)
            ),
        ));
    }
    let max = match q.max.as_deref() {
        None => None,
        Some(m) => match m.trim().parse::<usize>() {
            Ok(n) if (1..=MAX_POP).contains(&n) => Some(n),
            _ => {
                return Err(ApiError::bad_query(
                    "max",
                    format!("max must be a whole number from 1 to {MAX_POP}, not '{m}'"),
                ));
            }
        },
    };
    let popped = state
        .queue()
        .pop_many(&topic, max.unwrap_or(1), wait)
        .await?;
    if max.is_some() {
        let tasks = popped.into_iter().map(ReservedView::from).collect();
        return Ok(Json(PopAnswer::Tasks(Popped { tasks })).into_response());
    }
    match popped.into_iter().next() {
        Some(r) => Ok(Json(PopAnswer::Task(ReservedView::from(r))).into_response()),
        None => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}

/// Finish many reserved tasks of a topic in one call.
///
/// The batch is checked first, all or nothing: an empty list, more than 1000 tasks, a bad id
/// or a token no pop could have given (or one of another topic) is refused with 422 naming
/// the task (`tasks[2].token`), and nothing is finished. Then each task is answered on its
/// own, in order: a stale token (`lost`) does not keep the others from finishing.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/finish",
    tag = "topics",
    params(("topic" = String, Path, description = "The topic the tasks were popped from")),
    request_body = FinishMany,
    responses(
        (status = 200, description = "Each task's outcome, in order", body = FinishedMany),
        (status = 422, description = "Not a valid topic name, or a task's id or token is refused (a token of another topic too); the batch is refused whole", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn finish_many(
    State(state): State<ApiState>,
    Path(topic): Path<String>,
    ApiJson(body): ApiJson<FinishMany>,
) -> Result<Json<FinishedMany>, ApiError> {
    keyfire::queue::check_topic(&topic)?;
    for (i, t) in body.tasks.iter().enumerate() {
        let field = format!("tasks[{i}].token");
        if keyfire::queue::token_topic(&field, &t.token)? != topic {
            return Err(ApiError::invalid(
                &field,
                format!("the token is of another topic than '{topic}'"),
            ));
        }
    }
    let pairs: Vec<(String, String)> = body.tasks.into_iter().map(|t| (t.id, t.token)).collect();
    let outcomes = state.queue().finish_many(&pairs).await?;
    let results = pairs
        .into_iter()
        .zip(outcomes)
        .map(|((id, _), outcome)| FinishOutcome { id, outcome })
        .collect();
    Ok(Json(FinishedMany { results }))
}

/// Finish (acknowledge) a reserved task with its reservation token: it is done.
///
/// 409 when the reservation is no longer this token's: it expired and the task was handed on
/// (or went to the dead letters), or the token is wrong. Finishing again with the token that
/// finished it succeeds.
#[utoipa::path(
    post,
    path = "/v1/tasks/{id}/finish",
    tag = "topics",
    params(("id" = String, Path, description = "The task's id")),
    request_body = FinishBody,
    responses(
        (status = 204, description = "Done"),
        (status = 404, description = "No such task (or it was deleted)", body = ErrorBody),
        (status = 409, description = "The reservation is no longer this token's", body = ErrorBody),
        (status = 422, description = "Not a valid task id", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn finish(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<FinishBody>,
) -> Result<StatusCode, ApiError> {
    state.queue().finish(&id, &body.token).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Extend a reservation: its deadline becomes now plus `ttr` (or the task's own).
#[utoipa::path(
    post,
    path = "/v1/tasks/{id}/touch",
    tag = "topics",
    params(("id" = String, Path, description = "The task's id")),
    request_body = TouchBody,
    responses(
        (status = 200, description = "The new deadline", body = Touched),
        (status = 404, description = "No such task (or it was deleted)", body = ErrorBody),
        (status = 409, description = "The reservation is no longer this token's", body = ErrorBody),
        (status = 422, description = "Not a valid task id, or `ttr` breaks its rule", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn touch(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<TouchBody>,
) -> Result<Json<Touched>, ApiError> {
    let ttr = body
        .ttr
        .as_deref()
        .map(|t| duration("ttr", t))
        .transpose()?;
    let deadline = state.queue().touch(&id, &body.token, ttr).await?;
    Ok(Json(Touched { id, deadline }))
}

/// A task's state, delivery count and instants (done and deleted tasks are shown for a
/// retention, without their payload).
#[utoipa::path(
    get,
    path = "/v1/tasks/{id}",
    tag = "topics",
    params(("id" = String, Path, description = "The task's id")),
    responses(
        (status = 200, description = "The task", body = TaskView),
        (status = 404, description = "No such task", body = ErrorBody),
        (status = 422, description = "Invalid id", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get_task(
    State(state): State<ApiState>,
    Path(id): Path<String>,
) -> Result<Json<TaskView>, ApiError> {
    Ok(Json(state.queue().get(&id).await?.into()))
}

/// Delete a task in any state, for good: it is never delivered (again).
#[utoipa::path(
    delete,
    path = "/v1/tasks/{id}",
    tag = "topics",
    params(("id" = String, Path, description = "The task's id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such task (or already deleted)", body = ErrorBody),
        (status = 422, description = "Invalid id", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn delete_task(
    State(state): State<ApiState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.queue().delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Every topic that ever had a task, with its tasks by state and its counters.
#[utoipa::path(
    get,
    path = "/v1/topics",
    tag = "topics",
    responses((status = 200, description = "Topics by name", body = TopicList)),
    security(("bearer" = []))
)]
pub async fn list_topics(State(state): State<ApiState>) -> Result<Json<TopicList>, ApiError> {
    let topics = state.queue().topics().await?;
    Ok(Json(TopicList { topics }))
}

/// A topic's settings, as `PUT /v1/topics/{topic}` takes them.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TopicSettings {
    /// How many partitions the topic's tasks spread over (1 to 64): each on a shard of its
    /// own while there are shards enough, so a hot topic's tasks, memory and pops spread over
    /// the masters of a cluster. Set once, before the topic's first task, never changed.
    #[schema(minimum = 1, maximum = 64)]
    pub partitions: usize,
}

/// A topic's settings as stored.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TopicView {
    /// The topic.
    pub topic: String,
    /// Its number of partitions.
    pub partitions: usize,
    /// Paused: its pops reserve nothing (`POST /v1/topics/{topic}/pause`, `/resume`).
    #[serde(default)]
    pub paused: bool,
}

/// Declare a topic's settings: its number of partitions.
///
/// A topic needs no declaration (it has one partition); declare it before its first task to
/// spread its tasks over more. The count is set once and never changed: a count out of 1–64,
/// or another count than the one set (or, for a topic that has had tasks, than 1), is
/// refused naming `partitions`, and nothing is written.
#[utoipa::path(
    put,
    path = "/v1/topics/{topic}",
    tag = "topics",
    params(("topic" = String, Path, description = "Letters, digits, `_`, `.`, `-`; at most 128 bytes")),
    request_body = TopicSettings,
    responses(
        (status = 200, description = "The topic's settings now", body = TopicView),
        (status = 409, description = "The topic has another partition count already (or had tasks with its count): a count is set once; nothing was written", body = ErrorBody),
        (status = 422, description = "Not a valid topic name, or `partitions` out of 1 to 64", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn put_topic(
    State(state): State<ApiState>,
    Path(topic): Path<String>,
    ApiJson(body): ApiJson<TopicSettings>,
) -> Result<Json<TopicView>, ApiError> {
    state
        .queue()
        .set_partitions(&topic, body.partitions)
        .await?;
    let paused = state.queue().is_paused(&topic).await?;
    Ok(Json(TopicView {
        topic,
        partitions: body.partitions,
        paused,
    }))
}

/// A topic's settings: its number of partitions (1 for a topic never declared), and whether it
/// is paused.
#[utoipa::path(
    get,
    path = "/v1/topics/{topic}",
    tag = "topics",
    params(("topic" = String, Path, description = "The topic")),
    responses(
        (status = 200, description = "The topic's settings", body = TopicView),
        (status = 422, description = "Not a valid topic name", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get_topic(
    State(state): State<ApiState>,
    Path(topic): Path<String>,
) -> Result<Json<TopicView>, ApiError> {
    let partitions = state.queue().partitions(&topic).await?;
    let paused = state.queue().is_paused(&topic).await?;
    Ok(Json(TopicView {
        topic,
        partitions,
        paused,
    }))
}
