//! `/v1/jobs`: create or replace, read, list, delete, pause, resume, runs (and skips).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use super::extract::{ApiQuery, RawJson, decode, limit_param};
use super::model::{
    DeadCount, DeadFilter, DeadLetterView, DeadList, DeadQuery, JobList, JobSpecWithoutId, JobView,
    ListQuery, RunList, RunView, RunsQuery, Triggered,
};
use keyfire::client::Upserted;
use keyfire::error::Error;
use keyfire::job::JobSpec;
use keyfire::{JobRecord, JobStatus};

/// Jobs per page by default, and at most (also the most runs and dead letters one read shows).
const PAGE: usize = 100;
pub(super) const MAX_PAGE: usize = 1000;
/// The states `GET /v1/jobs?status=` filters by.
pub(super) const JOB_STATUSES: &[&str] = &["active", "paused", "finished", "waiting"];
/// What `If-Match` takes: `*` (any version), or a version as a number, quoted (an entity tag,
/// as the `ETag` of a job answer gives it) or weak-quoted (`W/"3"`). 19 digits always fit a
/// version. [`if_match`] parses exactly this.
pub(super) const IF_MATCH_PATTERN: &str = r#"^(\*|(W/)?"[0-9]{1,19}"|[0-9]{1,19})$"#;
/// Most job ids one list request reads while filtering, so a rare filter cannot make one
/// request scan everything; the cursor then points past what was scanned.
const SCAN_BUDGET: usize = 10_000;

/// A job answer with its version as the `ETag`; its next firings leave out the instants its
/// calendars exclude.
async fn job_response(
    state: &ApiState,
    status: StatusCode,
    record: &JobRecord,
) -> Result<Response, ApiError> {
    let calendars = if record.spec.exclude.is_empty() {
        Vec::new()
    } else {
        state
            .client()
            .calendars()
            .await?
            .into_iter()
            .filter(|c| record.spec.exclude.contains(&c.name))
            .filter_map(|c| c.validate().ok())
            .collect()
    };
    let view = JobView::from_record_with(record, &calendars);
    let mut resp = (status, Json(view)).into_response();
    if let Ok(v) = header::HeaderValue::from_str(&format!("\"{}\"", record.version)) {
        resp.headers_mut().insert(header::ETAG, v);
    }
    Ok(resp)
}

/// The version an `If-Match` header asks for ([`IF_MATCH_PATTERN`]): `"3"`, `3` or `W/"3"`;
/// none for `*`.
fn if_match(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    let Some(v) = headers.get(header::IF_MATCH) else {
        return Ok(None);
    };
    let text = v.to_str().unwrap_or("(not text)").trim();
    parse_if_match(text).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("If-Match must be a job version such as \"3\" (or *), not '{text}'"),
        )
        .field("If-Match")
    })
}

/// [`IF_MATCH_PATTERN`]'s values: `Some(None)` for `*`, `Some(Some(v))` for a version.
pub(super) fn parse_if_match(text: &str) -> Option<Option<u64>> {
    if text == "*" {
        return Some(None);
    }
    let (weak, rest) = match text.strip_prefix("W/") {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let digits = match rest.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
        Some(inner) => inner,
        None if !weak => rest,
        None => return None,
    };
    if digits.is_empty() || digits.len() > 19 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(Some)
}

/// Upsert the job spec `body` (carrying the request's trace); with `expected`, only if the
/// stored version is still that one (0: must not exist). 201 when created, 200 when replaced
/// or unchanged (a spec equal to the stored one writes nothing and keeps the version).
async fn upsert(
    state: &ApiState,
    headers: &HeaderMap,
    body: Value,
    expected: Option<u64>,
) -> Result<Response, ApiError> {
    let spec: JobSpec = decode(body, "")?;
    let spec = crate::telemetry::traced_job(spec, headers);
    let (record, outcome) = state.client().upsert_with_outcome(spec, expected).await?;
    let status = match outcome {
        Upserted::Created => StatusCode::CREATED,
        Upserted::Replaced | Upserted::Unchanged | Upserted::Kept | Upserted::Duplicate => {
            StatusCode::OK
        }
    };
    job_response(state, status, &record).await
}

/// Create or replace the job with this id (idempotent).
///
/// The body is a job spec; its `id` may be left out, and must match the path when given.
/// With `If-Match: "<version>"` the job is replaced only if it is still at that version
/// (`"0"`: only if it does not exist yet), else 409. Sending the spec the job already has
/// changes nothing and keeps its version (200); `after` is resolved against the clock on
/// each write, so re-sending an `after` sets a new instant.
#[utoipa::path(
    put,
    path = "/v1/jobs/{id}",
    tag = "jobs",
    params(
        ("id" = String, Path, description = "The job's id"),
        ("If-Match" = Option<String>, Header, description = "Only if the job is at this version, such as \"3\" (\"0\": only create; `*`: any)"),
    ),
    request_body = JobSpecWithoutId,
    responses(
        (status = 200, description = "Replaced, or unchanged (the same spec keeps its version)", body = JobView, headers(("ETag" = String, description = "The job's version, quoted: send it back in `If-Match`"))),
        (status = 201, description = "Created", body = JobView, headers(("ETag" = String, description = "The job's version, quoted: send it back in `If-Match`"))),
        (status = 400, description = "`If-Match` is not a version (`bad_request`)", body = ErrorBody),
        (status = 409, description = "Changed concurrently, or not at the If-Match version (`conflict`)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn put_job(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    RawJson(mut body): RawJson,
) -> Result<Response, ApiError> {
    let expected = if_match(&headers)?;
    let Value::Object(map) = &mut body else {
        return Err(ApiError::invalid(
            "",
            "the body must be a JSON object (a job spec)",
        ));
    };
    match map.get("id") {
        None => {
            map.insert("id".into(), Value::String(id.clone()));
        }
        Some(Value::String(given)) if *given == id => {}
        Some(_) => {
            return Err(ApiError::invalid(
                "id",
                format!("the body's id does not match the path's '{id}'"),
            ));
        }
    }
    upsert(&state, &headers, body, expected).await
}

/// Create or replace a job, the id given in the body (idempotent, like `PUT /v1/jobs/{id}`).
#[utoipa::path(
    post,
    path = "/v1/jobs",
    tag = "jobs",
    params(
        ("If-Match" = Option<String>, Header, description = "Only if the job is at this version, such as \"3\" (\"0\": only create; `*`: any)"),
    ),
    request_body = JobSpec,
    responses(
        (status = 200, description = "Replaced, or unchanged (the same spec keeps its version)", body = JobView, headers(("ETag" = String, description = "The job's version, quoted: send it back in `If-Match`"))),
        (status = 201, description = "Created", body = JobView, headers(("ETag" = String, description = "The job's version, quoted: send it back in `If-Match`"))),
        (status = 400, description = "`If-Match` is not a version (`bad_request`)", body = ErrorBody),
        (status = 409, description = "Changed concurrently, or not at the If-Match version (`conflict`)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn post_job(
    State(state): State<ApiState>,
    headers: HeaderMap,
    RawJson(body): RawJson,
) -> Result<Response, ApiError> {
    let expected = if_match(&headers)?;
    if !body.is_object() {
        return Err(ApiError::invalid(
            "",
            "the body must be a JSON object (a job spec)",
        ));
    }
    upsert(&state, &headers, body, expected).await
}

/// Read a job, with its next five firings.
#[utoipa::path(
    get,
    path = "/v1/jobs/{id}",
    tag = "jobs",
    params(("id" = String, Path, description = "The job's id")),
    responses(
        (status = 200, description = "The job", body = JobView),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn get_job(
    State(state): State<ApiState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let record = state.client().get(&id).await?;
    job_response(&state, StatusCode::OK, &record).await
}

/// List jobs, filtered by status and handler, a page at a time: jobs in id order, then the
/// one-shot tasks still waiting for their firing (stored compact, listed in storage order).
#[utoipa::path(
    get,
    path = "/v1/jobs",
    tag = "jobs",
    params(ListQuery),
    responses(
        (status = 200, description = "A page of jobs", body = JobList),
        (status = 400, description = "Bad query parameter", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn list_jobs(
    State(state): State<ApiState>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<JobList>, ApiError> {
    let limit = limit_param("limit", q.limit.as_deref(), PAGE, MAX_PAGE)?;
    let status = match q.status.as_deref() {
        None => None,
        Some("active") => Some(JobStatus::Active),
        Some("paused") => Some(JobStatus::Paused),
        Some("finished") => Some(JobStatus::Finished),
        Some("waiting") => Some(JobStatus::Waiting),
        Some(other) => {
            return Err(ApiError::bad_query(
                "status",
                format!(
                    "status must be one of {}, not '{other}'",
                    JOB_STATUSES.join(", ")
                ),
            ));
        }
    };
    let client = state.client();
    let filtered = status.is_some() || q.handler.is_some();
    let keep = |r: &JobRecord| {
        status.is_none_or(|s| r.status == s)
            && q.handler.as_ref().is_none_or(|h| &r.spec.handler == h)
    };
    let mut cursor = q.after.clone();
    let mut jobs: Vec<JobView> = Vec::new();
    let mut scanned = 0;
    loop {
        // Unfiltered, one more than the page tells whether a next page exists.
        let want = if filtered {
            500
        } else {
            limit + 1 - jobs.len()
        };
        let ids = client.list_ids(cursor.as_deref(), want).await?;
        let records = client.get_many(&ids).await?;
        for record in records.iter().filter(|r| keep(r)) {
            if jobs.len() == limit {
                let next_cursor = jobs.last().map(|j| j.id.clone());
                return Ok(Json(JobList { jobs, next_cursor }));
            }
            jobs.push(JobView::from_record(record));
        }
        if ids.len() < want {
            return Ok(Json(JobList {
                jobs,
                next_cursor: None,
            }));
        }
        cursor = ids.last().cloned();
        scanned += ids.len();
        if scanned >= SCAN_BUDGET {
            // A rare filter must not make one request read every job: continue from here.
            return Ok(Json(JobList {
                jobs,
                next_cursor: cursor,
            }));
        }
    }
}

/// Delete a job, its pending firing and its history.
#[utoipa::path(
    delete,
    path = "/v1/jobs/{id}",
    tag = "jobs",
    params(("id" = String, Path, description = "The job's id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn delete_job(
    State(state): State<ApiState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.client().delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Pause a job: it keeps its definition and fires nothing until resumed.
#[utoipa::path(
    post,
    path = "/v1/jobs/{id}/pause",
    tag = "jobs",
    params(("id" = String, Path, description = "The job's id")),
    responses(
        (status = 200, description = "Paused", body = JobView),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn pause_job(
    State(state): State<ApiState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let record = state.client().pause(&id).await?;
    job_response(&state, StatusCode::OK, &record).await
}

/// Resume a paused job: it is scheduled from the first firing after the pause began, so
/// its misfire policy decides what the pause skipped (a pause shorter than the misfire
/// tolerance loses nothing).
#[utoipa::path(
    post,
    path = "/v1/jobs/{id}/resume",
    tag = "jobs",
    params(("id" = String, Path, description = "The job's id")),
    responses(
        (status = 200, description = "Resumed", body = JobView),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 422, description = "The stored job no longer passes validation (written by an earlier version); `field` names what", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn resume_job(
    State(state): State<ApiState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let record = state.client().resume(&id).await?;
    job_response(&state, StatusCode::OK, &record).await
}

/// A job's most recent runs, newest first; with `include=skipped`, also the instants that
/// were due and did not run, with their reasons, merged with the runs in `timeline`.
#[utoipa::path(
    get,
    path = "/v1/jobs/{id}/runs",
    tag = "jobs",
    params(("id" = String, Path, description = "The job's id"), RunsQuery),
    responses(
        (status = 200, description = "Runs, newest first", body = RunList),
        (status = 400, description = "Bad query parameter", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn job_runs(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<RunsQuery>,
) -> Result<Json<RunList>, ApiError> {
    let limit = limit_param("limit", q.limit.as_deref(), 20, MAX_PAGE)?;
    let skipped = match q.include.as_deref() {
        None => false,
        Some("skipped") => true,
        Some(other) => {
            return Err(ApiError::bad_query(
                "include",
                format!("include takes 'skipped', not '{other}'"),
            ));
        }
    };
    require_job(&state, &id).await?;
    let runs = state.client().runs(&id, limit).await?;
    let timeline = if skipped {
        let skips = state.client().skips(&id, limit).await?;
        Some(super::why::timeline(&runs, &skips))
    } else {
        None
    };
    Ok(Json(RunList {
        runs: runs.iter().map(RunView::from).collect(),
        timeline,
    }))
}

/// Run a job once now, without moving its schedule (its overlap policy applies).
#[utoipa::path(
    post,
    path = "/v1/jobs/{id}/trigger",
    tag = "jobs",
    params(("id" = String, Path, description = "The job's id")),
    responses(
        (status = 202, description = "A run is queued", body = Triggered),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn trigger_job(
    State(state): State<ApiState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Triggered>), ApiError> {
    let firing_id = state.client().trigger(&id).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(Triggered {
            job_id: id,
            firing_id,
        }),
    ))
}

async fn require_job(state: &ApiState, id: &str) -> Result<(), ApiError> {
    match state.client().find(id).await? {
        Some(_) => Ok(()),
        None => Err(Error::NotFound(id.to_string()).into()),
    }
}

/// A job's dead letters (firings that used up their attempts), newest first.
#[utoipa::path(
    get,
    path = "/v1/jobs/{id}/dead",
    tag = "dead letters",
    params(("id" = String, Path, description = "The job's id"), DeadQuery),
    responses(
        (status = 200, description = "Dead letters, newest first", body = DeadList),
        (status = 400, description = "Bad query parameter", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn list_dead(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<DeadQuery>,
) -> Result<Json<DeadList>, ApiError> {
    let limit = limit_param("limit", q.limit.as_deref(), PAGE, MAX_PAGE)?;
    require_job(&state, &id).await?;
    let dead = state.client().dead_letters(&id, limit).await?;
    let dead = dead
        .iter()
        .filter(|d| q.firing.as_ref().is_none_or(|f| &d.firing_id == f))
        .map(DeadLetterView::from)
        .collect();
    Ok(Json(DeadList { dead }))
}

/// Queue dead letters again, as attempt 1 with their firing ids: one (`firing`) or all.
#[utoipa::path(
    post,
    path = "/v1/jobs/{id}/dead/replay",
    tag = "dead letters",
    params(("id" = String, Path, description = "The job's id"), DeadFilter),
    responses(
        (status = 200, description = "How many were queued", body = DeadCount),
        (status = 400, description = "Bad query parameter", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn replay_dead(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<DeadFilter>,
) -> Result<Json<DeadCount>, ApiError> {
    require_job(&state, &id).await?;
    let count = state.client().replay_dead(&id, q.firing.as_deref()).await?;
    Ok(Json(DeadCount { count }))
}

/// Drop dead letters: one (`firing`) or all.
#[utoipa::path(
    delete,
    path = "/v1/jobs/{id}/dead",
    tag = "dead letters",
    params(("id" = String, Path, description = "The job's id"), DeadFilter),
    responses(
        (status = 200, description = "How many were dropped", body = DeadCount),
        (status = 400, description = "Bad query parameter", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn purge_dead(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<DeadFilter>,
) -> Result<Json<DeadCount>, ApiError> {
    require_job(&state, &id).await?;
    let count = state.client().purge_dead(&id, q.firing.as_deref()).await?;
    Ok(Json(DeadCount { count }))
}
