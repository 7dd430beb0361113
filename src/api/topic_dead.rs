//! `/v1/topics/{topic}/dead` (+ `/replay`): a topic's dead letters (tasks delivered
//! `max_deliveries` times without a finish), listed, made ready again or deleted; all of them
//! or those `ids` names. The shape of a job's dead letters (`/v1/jobs/{id}/dead`).
//!
//! Checked in this order, each refusal changing nothing: the topic's name (422 naming
//! `topic`), the query (400 naming `limit`, `ids` or `ids[i]`), then that the topic is known
//! (404 naming `topic`).

use axum::Json;
use axum::extract::{Path, State};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use super::extract::{ApiQuery, limit_param};
use super::model::DeadCount;
use keyfire::error::Error;
use keyfire::queue::{TaskInfo, check_dead_ids, check_topic};

/// Dead letters one list shows by default, and at most.
const PAGE: usize = 100;
const MAX_PAGE: usize = 1000;

/// What the `ids` query parameter takes: task ids, comma-separated.
pub const IDS_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9_.-]*(,[A-Za-z0-9][A-Za-z0-9_.-]*)*$";

/// One dead letter of a topic. Instants are Redis time.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TopicDeadLetter {
    /// The task's id.
    pub id: String,
    /// Its topic.
    pub topic: String,
    /// Its payload, as it was added.
    #[schema(value_type = Value)]
    pub payload: Option<Value>,
    /// Deliveries it was given (its `max_deliveries`, unless that was lowered).
    pub deliveries: u32,
    /// Deliveries it was allowed.
    pub max_deliveries: u32,
    /// Why it died: which delivery's reservation expired unfinished (null for dead letters
    /// of earlier releases).
    pub error: Option<String>,
    /// When it became a dead letter.
    pub died_at: Option<DateTime<Utc>>,
    /// When it was added.
    pub created_at: DateTime<Utc>,
    /// When it was due.
    pub due_at: DateTime<Utc>,
}

impl From<TaskInfo> for TopicDeadLetter {
    fn from(t: TaskInfo) -> Self {
        Self {
            id: t.id,
            topic: t.topic,
            payload: t.payload,
            deliveries: t.deliveries,
            max_deliveries: t.max_deliveries,
            error: t.last_error,
            died_at: t.finished_at,
            created_at: t.created_at,
            due_at: t.due_at,
        }
    }
}

/// A topic's dead letters, newest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TopicDeadList {
    /// The dead letters.
    pub dead: Vec<TopicDeadLetter>,
}

/// How many dead letters `GET /v1/topics/{topic}/dead` lists.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TopicDeadQuery {
    /// Most recent dead letters to return, 1 to 1000 (default 100).
    #[param(value_type = Option<u32>)]
    pub limit: Option<String>,
}

/// Which dead letters a replay or purge acts on.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TopicDeadFilter {
    /// Only these tasks: 1 to 1000 ids, comma-separated (ids that are no dead letters of the
    /// topic are passed over); default: all of the topic's dead letters.
    pub ids: Option<String>,
}

/// The topic's name checked (422), then that it is known (404 naming `topic`).
pub(super) async fn known_topic(state: &ApiState, topic: &str) -> Result<(), ApiError> {
    check_topic(topic)?;
    if state.queue().has_topic(topic).await? {
        Ok(())
    } else {
        Err(ApiError::not_found(format!(
            "no topic '{topic}': it never had a task and was not declared"
        ))
        .field("topic"))
    }
}

/// The `ids` parameter as a list, checked (400 naming `ids` or `ids[i]`).
fn ids_param(ids: Option<&str>) -> Result<Option<Vec<String>>, ApiError> {
    let Some(text) = ids else { return Ok(None) };
    let ids: Vec<String> = if text.is_empty() {
        Vec::new()
    } else {
        text.split(',').map(str::to_string).collect()
    };
    check_dead_ids(&ids).map_err(|e| match e {
        Error::Invalid(v) => ApiError::bad_query(&v.field, v.message),
        other => other.into(),
    })?;
    Ok(Some(ids))
}

/// A topic's dead letters (tasks delivered `max_deliveries` times without a finish), newest
/// first, each with its deliveries, when it died and why.
#[utoipa::path(
    get,
    path = "/v1/topics/{topic}/dead",
    tag = "topics",
    params(("topic" = String, Path, description = "The topic"), TopicDeadQuery),
    responses(
        (status = 200, description = "Dead letters, newest first", body = TopicDeadList),
        (status = 400, description = "`limit` is not 1 to 1000 (`bad_query`)", body = ErrorBody),
        (status = 404, description = "No such topic (`field`: `topic`)", body = ErrorBody),
        (status = 422, description = "Not a valid topic name", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn list_topic_dead(
    State(state): State<ApiState>,
    Path(topic): Path<String>,
    ApiQuery(q): ApiQuery<TopicDeadQuery>,
) -> Result<Json<TopicDeadList>, ApiError> {
    check_topic(&topic)?;
    let limit = limit_param("limit", q.limit.as_deref(), PAGE, MAX_PAGE)?;
    known_topic(&state, &topic).await?;
    let dead = state.queue().dead_letters(&topic, limit).await?;
    Ok(Json(TopicDeadList {
        dead: dead.into_iter().map(TopicDeadLetter::from).collect(),
    }))
}

/// The ids a replay or a purge names (None: all of the topic's dead letters), once the topic
/// name, the ids and the topic's existence are checked, in that order.
async fn dead_ids(
    state: &ApiState,
    topic: &str,
    q: &TopicDeadFilter,
) -> Result<Option<Vec<String>>, ApiError> {
    check_topic(topic)?;
    let ids = ids_param(q.ids.as_deref())?;
    known_topic(state, topic).await?;
    Ok(ids)
}

/// Make dead letters ready again: those `ids` names, or all of the topic's.
///
/// Each goes to the tail of the ready set with its delivery count reset to 0 (so it gets its
/// `max_deliveries` again), and waiting consumers are woken, as for a ready add.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/dead/replay",
    tag = "topics",
    params(("topic" = String, Path, description = "The topic"), TopicDeadFilter),
    responses(
        (status = 200, description = "How many were made ready", body = DeadCount),
        (status = 400, description = "`ids` is empty, holds more than 1000 ids or one that is not a task id (`bad_query`, `field`: `ids` or `ids[i]`)", body = ErrorBody),
        (status = 404, description = "No such topic (`field`: `topic`)", body = ErrorBody),
        (status = 422, description = "Not a valid topic name", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn replay_topic_dead(
    State(state): State<ApiState>,
    Path(topic): Path<String>,
    ApiQuery(q): ApiQuery<TopicDeadFilter>,
) -> Result<Json<DeadCount>, ApiError> {
    let ids = dead_ids(&state, &topic, &q).await?;
    let count = state.queue().replay_dead(&topic, ids.as_deref()).await?;
    Ok(Json(DeadCount { count }))
}

/// Delete dead letters for good: those `ids` names, or all of the topic's.
#[utoipa::path(
    delete,
    path = "/v1/topics/{topic}/dead",
    tag = "topics",
    params(("topic" = String, Path, description = "The topic"), TopicDeadFilter),
    responses(
        (status = 200, description = "How many were deleted", body = DeadCount),
        (status = 400, description = "`ids` is empty, holds more than 1000 ids or one that is not a task id (`bad_query`, `field`: `ids` or `ids[i]`)", body = ErrorBody),
        (status = 404, description = "No such topic (`field`: `topic`)", body = ErrorBody),
        (status = 422, description = "Not a valid topic name", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn purge_topic_dead(
    State(state): State<ApiState>,
    Path(topic): Path<String>,
    ApiQuery(q): ApiQuery<TopicDeadFilter>,
) -> Result<Json<DeadCount>, ApiError> {
    let ids = dead_ids(&state, &topic, &q).await?;
    let count = state.queue().purge_dead(&topic, ids.as_deref()).await?;
    Ok(Json(DeadCount { count }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_and_name_the_bad_one() {
        assert_eq!(ids_param(None).unwrap(), None);
        assert_eq!(
            ids_param(Some("a,b.c")).unwrap(),
            Some(vec!["a".to_string(), "b.c".to_string()])
        );
        assert_eq!(
            ids_param(Some("")).unwrap_err().field.as_deref(),
            Some("ids")
        );
        assert_eq!(
            ids_param(Some("a,,b")).unwrap_err().field.as_deref(),
            Some("ids[1]")
        );
        let re = regex::Regex::new(IDS_PATTERN).unwrap();
        for ok in ["a", "a,b", "x-1.y_2,z"] {
            assert!(re.is_match(ok) && ids_param(Some(ok)).is_ok(), "{ok}");
        }
        for bad in ["", ",a", "a,", "a b", "a,,b"] {
            assert!(!re.is_match(bad) && ids_param(Some(bad)).is_err(), "{bad}");
        }
    }
}
