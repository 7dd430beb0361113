//! What the API sends and accepts, and their OpenAPI schemas.
//!
//! Jobs are accepted as [`JobSpec`] (the library's type, decoded with unknown fields refused),
//! and its OpenAPI schema is derived from that type (the library's `openapi` feature), so the
//! document says what the server takes. The schemas of a job without its id, of a one-shot
//! task and of a stored spec are derived from it too, in `contract` ([`JobSpecWithoutId`],
//! [`TaskSpec`] and [`StoredJobSpec`] only name them).

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::openapi::{RefOr, Schema};
use utoipa::{IntoParams, PartialSchema, ToSchema};

use keyfire::job::{Job, JobSpec, Validation};
use keyfire::{DeadLetter, JobRecord, JobStatus, RunRecord};

/// How many next firings a job view shows.
pub const NEXT_FIRINGS: usize = 5;

fn at_ms(ms: i64) -> Option<DateTime<Utc>> {
    DateTime::<Utc>::from_timestamp_millis(ms)
}

/// One coming firing, in UTC and in the job's zone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FiringTime {
    /// The instant in UTC (RFC 3339).
    #[schema(example = "2026-03-09T08:00:00Z")]
    pub utc: String,
    /// The same instant in the job's zone (RFC 3339 with its offset).
    #[schema(example = "2026-03-09T09:00:00+01:00")]
    pub local: String,
    /// Only for a job with `jitter`: when it fires, its instant plus its offset (UTC). The
    /// instant above stays its firing id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "2026-03-09T08:00:17.342Z")]
    pub fires_at: Option<String>,
}

/// A job as the API shows it: its spec, its state, and its next firings.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobView {
    /// The job's id.
    pub id: String,
    /// `active`, `paused`, `finished`, or `waiting` (a task waiting for its `after_task`).
    #[schema(example = "active")]
    pub status: String,
    /// Bumped by every change of the spec; send it back in `If-Match` to update only that version.
    pub version: u64,
    /// The job as declared (`after` is shown resolved to `at`).
    #[schema(value_type = StoredJobSpec)]
    pub spec: Value,
    /// The zone `next_firings[].local` is shown in (the cron `tz`, else `UTC`).
    pub tz: String,
    /// The next pending firing.
    pub next_at: Option<DateTime<Utc>>,
    /// The last claimed firing.
    pub last_at: Option<DateTime<Utc>>,
    /// When the job was created.
    pub created_at: Option<DateTime<Utc>>,
    /// When it last changed.
    pub updated_at: Option<DateTime<Utc>>,
    /// Runs started (attempts claimed; a run in progress counts).
    pub runs: u64,
    /// Runs that failed.
    pub failures: u64,
    /// Firings skipped under the misfire policy.
    pub missed: u64,
    /// Firings skipped because the previous run still ran (overlap `forbid`).
    #[serde(default)]
    pub skipped: u64,
    /// Firings that used up their attempts and became dead letters.
    #[serde(default)]
    pub dead: u64,
    /// Runs started by hand (`trigger`).
    #[serde(default)]
    pub triggered: u64,
    /// What the run limits (`max_runs`, `pause_after_failures`) counted, and whether they
    /// stopped the job; absent for a job without them that they never stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_limits: Option<RunLimitsView>,
    /// The next five firings (fewer when the schedule ends; none while paused or finished).
    pub next_firings: Vec<FiringTime>,
    /// Only in the answer to an enqueue, and only when true: a task enqueued with the same
    /// dedup key within its window exists, and this is that task (nothing was created).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub duplicate: bool,
    /// Only in the answer to an enqueue that was a duplicate: what it did to this task, as its
    /// `dedup.on_duplicate` says: `kept`, `replaced`, `extended` or `replaced_extended`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        pattern = "^(kept|replaced|extended|replaced_extended)$",
        example = "extended"
    )]
    pub deduplicated: Option<String>,
}

/// A job's run limits at work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RunLimitsView {
    /// Why keyfire stopped the job itself: `max_runs` (finished: it reached `max_runs`
    /// successful firings) or `failures` (paused: `pause_after_failures` firings in a row
    /// failed); absent when they did not stop it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "failures")]
    pub stopped: Option<String>,
    /// Successful firings of the schedule, counted toward `max_runs`.
    pub succeeded: u64,
    /// Failed firings in a row, counted toward `pause_after_failures` (a success or a resume
    /// sets it back to 0).
    pub failure_streak: u64,
}

fn format_local(ms: i64, tz: chrono_tz::Tz) -> Option<FiringTime> {
    let at = at_ms(ms)?;
    Some(FiringTime {
        utc: at.to_rfc3339_opts(SecondsFormat::AutoSi, true),
        local: at
            .with_timezone(&tz)
            .to_rfc3339_opts(SecondsFormat::AutoSi, true),
        fires_at: None,
    })
}

/// The validated form of a stored job (for previews; never refused for a handler name).
pub fn validated(record: &JobRecord) -> Option<Job> {
    record
        .spec
        .clone()
        .validate(&Validation {
            now_ms: record.updated_ms,
            created_ms: record.created_ms,
            known_handler: None,
            max_params_bytes: usize::MAX,
        })
        .ok()
}

/// A stored spec as the API shows it: the `http` handler's signing secrets redacted to their
/// fingerprints (a secret is never shown back in full).
fn shown_spec(record: &JobRecord) -> Value {
    let mut spec = serde_json::to_value(&record.spec).unwrap_or(Value::Null);
    if record.spec.handler == "http"
        && let Some(params) = spec.get_mut("params")
    {
        keyfire::handler::http::redact_params(params);
    }
    spec
}

impl JobView {
    /// The view of a stored job.
    pub fn from_record(record: &JobRecord) -> Self {
        Self::from_record_with(record, &[])
    }

    /// The view of a stored job whose next firings leave out what `calendars` exclude.
    pub fn from_record_with(record: &JobRecord, calendars: &[keyfire::job::Calendar]) -> Self {
        let tz_name = record
            .spec
            .cron
            .as_ref()
            .and(record.spec.tz.clone())
            .unwrap_or_else(|| "UTC".into());
        let tz: chrono_tz::Tz = tz_name.parse().unwrap_or(chrono_tz::UTC);
        let mut next_firings = Vec::new();
        if record.status == JobStatus::Active
            && let Some(first) = record.next_ms
        {
            let job = validated(record);
            let mut t = first;
            // Instants the calendars exclude are passed over (a bounded search).
            let mut looked = 0;
            while next_firings.len() < NEXT_FIRINGS && looked < 10_000 {
                looked += 1;
                if calendars.iter().any(|c| c.excludes(t)) {
                    match job.as_ref().and_then(|j| j.next_after(t)) {
                        Some(n) if n > t => t = n,
                        _ => break,
                    }
                    continue;
                }
                let Some(mut f) = format_local(t, tz) else {
                    break;
                };
                if let Some(j) = job.as_ref().filter(|j| j.jitter_ms > 0) {
                    f.fires_at = at_ms(j.release_at(t))
                        .map(|r| r.to_rfc3339_opts(SecondsFormat::Millis, true));
                }
                next_firings.push(f);
                match job.as_ref().and_then(|j| j.next_after(t)) {
                    Some(n) if n > t => t = n,
                    _ => break,
                }
            }
        }
        Self {
            id: record.spec.id.clone(),
            status: record.status.as_str().to_string(),
            version: record.version,
            spec: shown_spec(record),
            tz: tz_name,
            next_at: record.next_ms.and_then(at_ms),
            last_at: record.last_ms.and_then(at_ms),
            created_at: at_ms(record.created_ms),
            updated_at: at_ms(record.updated_ms),
            runs: record.runs,
            failures: record.failures,
            missed: record.missed,
            skipped: record.skipped,
            dead: record.dead,
            triggered: record.triggered,
            run_limits: {
                let l = &record.run_limits;
                let has = record.spec.max_runs.is_some()
                    || record.spec.pause_after_failures.is_some()
                    || l.stopped.is_some();
                has.then(|| RunLimitsView {
                    stopped: l.stopped.clone(),
                    succeeded: l.succeeded,
                    failure_streak: l.failure_streak,
                })
            },
            next_firings,
            duplicate: false,
            deduplicated: None,
        }
    }
}

/// A page of jobs.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobList {
    /// Jobs in id order, then one-shot tasks still waiting for their firing (in storage order).
    pub jobs: Vec<JobView>,
    /// Pass as `after` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// Filters and paging of `GET /v1/jobs`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only jobs in this state: `active`, `paused`, `finished` or `waiting`.
    pub status: Option<String>,
    /// Only jobs run by this handler.
    pub handler: Option<String>,
    /// Cursor: the `next_cursor` of the previous page (jobs with a greater id).
    pub after: Option<String>,
    /// Jobs per page, 1 to 1000 (default 100).
    #[param(value_type = Option<u32>)]
    pub limit: Option<String>,
}

/// Paging of `GET /v1/jobs/{id}/runs`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct RunsQuery {
    /// Most recent runs to return, 1 to 1000 (default 20).
    #[param(value_type = Option<u32>)]
    pub limit: Option<String>,
    /// `skipped`: also the instants that were due and did not run (the job's ledger, as
    /// many records as `limit`), merged with the runs in `timeline`, newest first.
    #[param(pattern = "^skipped$")]
    pub include: Option<String>,
}

/// One run of a firing.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunView {
    /// `<job id>:<instant ms>`, the same for every attempt of a firing.
    pub firing_id: String,
    /// The instant the firing was scheduled for.
    pub scheduled_at: Option<DateTime<Utc>>,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// The node that ran it (empty for a firing cancelled before it ran).
    pub node: String,
    /// When it was claimed (Redis time); null for a firing cancelled before it ran.
    pub claimed_at: Option<DateTime<Utc>>,
    /// When the handler started.
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended (Redis time).
    pub finished_at: Option<DateTime<Utc>>,
    /// `ok`, `failed`, `timeout`, `cancelled` or `lost`.
    pub outcome: String,
    /// The handler's error, if any.
    pub error: Option<String>,
    /// What became of the firing: `done`, `retry` or `dead`.
    pub fate: Option<String>,
    /// When the next attempt is due, if one was scheduled.
    pub retry_at: Option<DateTime<Utc>>,
}

impl From<&RunRecord> for RunView {
    fn from(r: &RunRecord) -> Self {
        Self {
            firing_id: r.firing_id.clone(),
            scheduled_at: at_ms(r.scheduled_ms),
            attempt: r.attempt,
            node: r.node.clone(),
            // 0: never claimed (a firing cancelled before it ran).
            claimed_at: Some(r.claimed_ms).filter(|&ms| ms > 0).and_then(at_ms),
            started_at: Some(r.started_ms).filter(|&ms| ms > 0).and_then(at_ms),
            finished_at: r.finished_ms.and_then(at_ms),
            outcome: r.outcome.clone(),
            error: r.error.clone(),
            fate: r.fate.clone(),
            retry_at: r.retry_at_ms.and_then(at_ms),
        }
    }
}

/// A job's runs, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunList {
    /// The runs.
    pub runs: Vec<RunView>,
    /// With `include=skipped`: the runs and the instants that did not run, newest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Vec<super::why::TimelineEntry>>,
}

/// A firing that used up its attempts.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeadLetterView {
    /// `<job id>:<instant ms>`.
    pub firing_id: String,
    /// The job.
    pub job_id: String,
    /// The instant the firing was scheduled for.
    pub scheduled_at: Option<DateTime<Utc>>,
    /// Attempts made.
    pub attempts: u32,
    /// The last error.
    pub error: Option<String>,
    /// When it became a dead letter.
    pub failed_at: Option<DateTime<Utc>>,
}

impl From<&DeadLetter> for DeadLetterView {
    fn from(d: &DeadLetter) -> Self {
        Self {
            firing_id: d.firing_id.clone(),
            job_id: d.job_id.clone(),
            scheduled_at: at_ms(d.scheduled_ms),
            attempts: d.attempts,
            error: d.error.clone(),
            failed_at: Some(d.failed_ms).filter(|&ms| ms > 0).and_then(at_ms),
        }
    }
}

/// A job's dead letters, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeadList {
    /// The dead letters.
    pub dead: Vec<DeadLetterView>,
}

/// Which dead letters `GET /v1/jobs/{id}/dead` lists.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeadQuery {
    /// Only this firing (its `firing_id`); default: all of the job's dead letters.
    pub firing: Option<String>,
    /// Most recent dead letters to return, 1 to 1000 (default 100).
    #[param(value_type = Option<u32>)]
    pub limit: Option<String>,
}

/// Which dead letters a replay or purge acts on (they act on all or one, so take no `limit`).
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeadFilter {
    /// Only this firing (its `firing_id`); default: all of the job's dead letters.
    pub firing: Option<String>,
}

/// How many dead letters a replay or purge acted on.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeadCount {
    /// Dead letters queued again (replay) or dropped (purge).
    pub count: u64,
}

/// A run queued by a trigger.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Triggered {
    /// The job.
    pub job_id: String,
    /// The firing id of the queued run (see its runs).
    pub firing_id: String,
}

/// A live node.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NodeView {
    /// The node's id.
    pub id: String,
    /// Its keyfire version.
    pub version: Option<String>,
    /// Runs in progress at its last heartbeat.
    pub running: Option<u64>,
    /// Its limit of concurrent runs.
    pub max_concurrent_runs: Option<u64>,
    /// `running / max_concurrent_runs`, from 0 to 1.
    pub load: Option<f64>,
    /// Attempts it started since it started (at its last heartbeat).
    #[serde(default)]
    pub runs_started: Option<u64>,
    /// Its share of the attempts the live nodes started, from 0 to 1: the owner hash spreads
    /// runs evenly, so each of N nodes that started together is near 1/N.
    #[serde(default)]
    pub share: Option<f64>,
    /// Handlers it has registered.
    pub handlers: Vec<String>,
    /// Its last heartbeat (Redis time).
    pub last_seen_at: Option<DateTime<Utc>>,
}

/// The live nodes.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NodeList {
    /// Nodes heard from within `node.node_ttl`, by id.
    pub nodes: Vec<NodeView>,
}

/// Tasks to enqueue together.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskBatch {
    /// One-shot tasks (see `TaskSpec`), at most 1000.
    #[schema(value_type = Vec<TaskSpec>)]
    pub tasks: Vec<Value>,
    /// A callback sent once every task of the batch has ended (succeeded, died, or was
    /// cancelled or deleted), with the counts. keyfire then picks the tasks' ids, on one
    /// shard: a task names no `id`, `dedup` or `after_task`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<keyfire::client::OnComplete>)]
    pub on_complete: Option<keyfire::client::OnComplete>,
}

/// Enqueued tasks, in the order given.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskList {
    /// The tasks as stored.
    pub tasks: Vec<JobView>,
    /// The batch's id, when it was enqueued with `on_complete` (`GET /v1/batches/{id}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<String>,
}

/// Status of `/healthz` and `/readyz`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// `ok`, `ready` or `not_ready`.
    pub status: String,
    /// Each check and its result (`ok` or what is wrong); empty for `/healthz`.
    #[schema(value_type = std::collections::BTreeMap<String, String>)]
    pub checks: serde_json::Map<String, Value>,
}

/// Names a schema derived from the library's `JobSpec` in `contract`: the derive would
/// only repeat `JobSpec`'s fields by hand, which could drift from it.
macro_rules! derived_schema {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name;

        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                // Replaced whole by `contract::job_schemas`.
                utoipa::openapi::ObjectBuilder::new().into()
            }
        }

        impl ToSchema for $name {}
    };
}

derived_schema!(
    /// `PUT /v1/jobs/{id}`'s body: a `JobSpec` without its id.
    JobSpecWithoutId
);
derived_schema!(
    /// A one-shot task: a job with `at` or `after` (neither: at once) and an optional id.
    TaskSpec
);
derived_schema!(
    /// A job's spec as a job answer shows it.
    StoredJobSpec
);

/// The field names of the library's `JobSpec`, read from its own "unknown field" error, so a
/// test notices when the OpenAPI mirror falls behind.
pub fn job_spec_fields() -> Vec<String> {
    let err = serde_json::from_value::<JobSpec>(serde_json::json!({"\u{1}probe": 0}))
        .expect_err("the probe field is unknown")
        .to_string();
    let list = err.split("expected one of").nth(1).unwrap_or_default();
    list.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}
