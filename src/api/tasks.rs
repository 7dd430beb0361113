//! `/v1/tasks`: one-shot tasks, one or a batch.

use std::collections::HashSet;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::Value;

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use super::extract::{ApiJson, RawJson, decode};
use super::model::{JobView, TaskBatch, TaskList, TaskSpec};
use keyfire::client::Upserted;
use keyfire::error::Error;
use keyfire::job::JobSpec;

/// Most tasks in one batch.
pub(super) const MAX_BATCH: usize = 1000;

/// Turn a task body into a job spec: one-shot only, `after = "0s"` when no instant is given, an
/// empty id when none is (the client picks one: a UUID, on the dedup key's shard when the task
/// names one). Errors name fields under `prefix`.
fn task_spec(body: Value, prefix: &str) -> Result<JobSpec, ApiError> {
    let at = |f: &str| {
        if prefix.is_empty() {
            f.to_string()
        } else {
            format!("{prefix}.{f}")
        }
    };
    let Value::Object(mut map) = body else {
        return Err(ApiError::invalid(prefix, "a task must be a JSON object"));
    };
    for recurring in ["cron", "every", "tz"] {
        if map.contains_key(recurring) {
            return Err(ApiError::invalid(
                &at(recurring),
                format!(
                    "a task is one-shot: give `at` or `after`, not `{recurring}` (use /v1/jobs for recurring jobs)"
                ),
            ));
        }
    }
    // A null instant is no instant, as for every other optional field: neither given (absent
    // or null) means at once.
    let given = |f: &str| map.get(f).is_some_and(|v| !v.is_null());
    if !given("at") && !given("after") {
        map.insert("after".into(), Value::String("0s".into()));
    }
    match map.get("id") {
        None | Some(Value::Null) => {
            map.insert("id".into(), Value::String(String::new()));
        }
        Some(_) => {}
    }
    decode(Value::Object(map), prefix)
}

fn prefixed(e: Error, prefix: &str) -> ApiError {
    match e {
        Error::Invalid(v) => {
            let field = format!("{prefix}.{}", v.field);
            ApiError::invalid(&field, format!("invalid {field}: {}", v.message))
        }
        other => other.into(),
    }
}

/// Enqueue a one-shot task.
///
/// Runs at `at`, or `after` a delay, or at once when neither is given. Without an `id`, a UUID
/// is chosen. An `id` that exists already is left as it is and answered with 200 (enqueueing
/// is create-if-absent, so a retried request never runs a task twice); replace a pending task
/// with `PUT /v1/jobs/{id}`.
///
/// With `dedup` (a `key`, or `content: true`, and a `window`; no `id`), a task enqueued with
/// the same dedup key within its window is answered with 200 and `"duplicate": true`, and
/// nothing is created; after the window a new task is created (201). `dedup.on_duplicate`
/// says what the duplicate does to that task while it is pending: `keep` (default),
/// `replace` (it takes this spec), `extend` (its instant moves to this one's, never earlier)
/// or `replace_extend`; `deduplicated` answers what it did. Once that task was claimed, a
/// `replace`/`extend` duplicate creates a new task (201).
#[utoipa::path(
    post,
    path = "/v1/tasks",
    tag = "tasks",
    request_body = TaskSpec,
    responses(
        (status = 200, description = "The id exists, or the dedup key names a task enqueued within its window (`duplicate` is true): that task as it is, untouched", body = JobView),
        (status = 201, description = "Enqueued", body = JobView),
        (status = 409, description = "Changed concurrently (`conflict`)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn post_task(
    State(state): State<ApiState>,
    headers: axum::http::HeaderMap,
    RawJson(body): RawJson,
) -> Result<(StatusCode, Json<JobView>), ApiError> {
    let spec = crate::telemetry::traced_job(task_spec(body, "")?, &headers);
    let (record, outcome, deduplicated) = state.client().enqueue_deduplicated(spec).await?;
    let status = if outcome == Upserted::Created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut view = JobView::from_record(&record);
    view.duplicate = outcome == Upserted::Duplicate;
    view.deduplicated = deduplicated.map(|d| d.as_str().to_string());
    Ok((status, Json(view)))
}

/// Enqueue many one-shot tasks. Every task is checked before any is written: one bad task
/// refuses the whole batch (422 naming `tasks[i].field`) and nothing is enqueued. As with one
/// task, an id that exists already is left as it is (and listed as it is), and a task whose
/// dedup key names a task enqueued within its window (an earlier one of the batch too) is
/// listed as that task with `"duplicate": true`.
///
/// With `on_complete`, the tasks are a batch: one signed callback is sent once every task has
/// ended (succeeded, died, or was cancelled or deleted), with the counts (`type`
/// `keyfire.batch.completed`, `webhook-id` `batch:<batch id>:completed`); `batch_id` in the
/// answer reads its progress (`GET /v1/batches/{id}`). keyfire picks the tasks' ids then.
#[utoipa::path(
    post,
    path = "/v1/tasks/batch",
    tag = "tasks",
    request_body = TaskBatch,
    responses(
        (status = 201, description = "Enqueued, in the order given", body = TaskList),
        (status = 409, description = "Changed concurrently (`conflict`)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn post_tasks_batch(
    State(state): State<ApiState>,
    ApiJson(batch): ApiJson<TaskBatch>,
) -> Result<(StatusCode, Json<TaskList>), ApiError> {
    if batch.tasks.len() > MAX_BATCH {
        return Err(ApiError::invalid(
            "tasks",
            format!(
                "at most {MAX_BATCH} tasks in one batch, got {}",
                batch.tasks.len()
            ),
        ));
    }
    let client = state.client();
    if let Some(on_complete) = batch.on_complete {
        let mut specs = Vec::with_capacity(batch.tasks.len());
        for (i, body) in batch.tasks.into_iter().enumerate() {
            specs.push(task_spec(body, &format!("tasks[{i}]"))?);
        }
        let enqueued = client.enqueue_batch(specs, on_complete).await?;
        let records = client.get_many(&enqueued.ids).await?;
        return Ok((
            StatusCode::CREATED,
            Json(TaskList {
                tasks: records.iter().map(JobView::from_record).collect(),
                batch_id: Some(enqueued.batch_id),
            }),
        ));
    }
    let mut specs = Vec::with_capacity(batch.tasks.len());
    let mut ids = HashSet::new();
    for (i, body) in batch.tasks.into_iter().enumerate() {
        let prefix = format!("tasks[{i}]");
        let spec = task_spec(body, &prefix)?;
        client
            .validate_task(&spec)
            .await
            .map_err(|e| prefixed(e, &prefix))?;
        if !spec.id.is_empty() && !ids.insert(spec.id.clone()) {
            return Err(ApiError::invalid(
                &format!("{prefix}.id"),
                format!("id '{}' appears twice in the batch", spec.id),
            ));
        }
        specs.push(spec);
    }
    let mut tasks = Vec::with_capacity(specs.len());
    for spec in specs {
        let (record, outcome, deduplicated) = client.enqueue_deduplicated(spec).await?;
        let mut view = JobView::from_record(&record);
        view.duplicate = outcome == Upserted::Duplicate;
        view.deduplicated = deduplicated.map(|d| d.as_str().to_string());
        tasks.push(view);
    }
    Ok((
        StatusCode::CREATED,
        Json(TaskList {
            tasks,
            batch_id: None,
        }),
    ))
}
