//! `/v1/overview`: the cluster at a glance, for the dashboard and for scripts.
//!
//! Live nodes, job counts by status, the jobs' counters summed (runs, failures, missed, …),
//! the dead letters waiting, and the size of the due, running and retry sets. The counters
//! are cumulative: a caller that polls gets rates (firings per minute) from the differences.
//!
//! Summing needs every job's hash, so one request reads at most [`SCAN_BUDGET`] jobs (in id
//! order, pipelined a page at a time: [`keyfire::Client::job_fields`]) and says whether that was
//! all of them.

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use super::model::NodeView;
use super::system::live_nodes;

/// Most jobs one overview reads.
pub const SCAN_BUDGET: usize = 10_000;
/// Jobs read per round trip.
const PAGE: usize = 1_000;
/// Most jobs listed in `dead_letters.jobs`.
pub const DEAD_JOBS_SHOWN: usize = 100;

/// The job hash fields summed, in this order (see the README's key table).
const FIELDS: [&str; 7] = [
    "status",
    "runs",
    "failures",
    "missed",
    "skipped",
    "dead",
    "triggered",
];

/// The cluster at a glance.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Overview {
    /// Redis's clock when this was read.
    pub now: DateTime<Utc>,
    /// The live nodes, by id.
    pub nodes: Vec<NodeView>,
    /// Jobs by status.
    pub jobs: JobCounts,
    /// The jobs' counters, summed over the jobs read.
    pub totals: Totals,
    /// Dead letters waiting for a replay or purge.
    pub dead_letters: DeadSummary,
    /// Firings due, running and queued for another attempt, cluster-wide.
    pub queues: Queues,
}

/// Jobs by status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct JobCounts {
    /// Every job under the prefix.
    pub total: u64,
    /// Jobs read for the counts and totals (at most 10,000, in listing order).
    pub scanned: u64,
    /// Whether every job was read (`scanned == total`).
    pub complete: bool,
    /// Active jobs among those read.
    pub active: u64,
    /// Paused jobs among those read.
    pub paused: u64,
    /// Finished jobs among those read.
    pub finished: u64,
    /// Tasks waiting for the task their `after_task` names, among those read.
    pub waiting: u64,
}

/// Cumulative counters of the jobs read (jobs deleted since take theirs with them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Totals {
    /// Runs started (attempts claimed; a run in progress counts).
    pub runs: u64,
    /// Runs that failed.
    pub failures: u64,
    /// Firings skipped under the misfire policy.
    pub missed: u64,
    /// Firings skipped because the previous run still ran (overlap `forbid`).
    pub skipped: u64,
    /// Firings that ended in the dead letters (including ones replayed or purged since).
    pub dead: u64,
    /// Manual triggers.
    pub triggered: u64,
}

/// Dead letters waiting, among the jobs read.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct DeadSummary {
    /// Dead letters in all.
    pub total: u64,
    /// The jobs that have some, most first (at most 100).
    pub jobs: Vec<JobDead>,
}

/// One job's dead letters.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobDead {
    /// The job.
    pub job_id: String,
    /// Its dead letters.
    pub count: u64,
}

/// Sizes of the scheduling sets.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct Queues {
    /// Jobs whose next firing is due now or overdue (not claimed yet).
    pub due: u64,
    /// Runs in progress (holding a lease).
    pub running: u64,
    /// Firings queued for another attempt (retries, takeovers, triggers, replays).
    pub retrying: u64,
}

fn count(v: &Option<String>) -> u64 {
    v.as_deref().and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// The cluster at a glance: live nodes, jobs by status, their counters summed, dead letters,
/// and what is due, running and queued for retry.
#[utoipa::path(
    get,
    path = "/v1/overview",
    tag = "nodes",
    responses(
        (status = 200, description = "The overview", body = Overview),
        (status = 503, description = "Redis is unavailable", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn overview(State(state): State<ApiState>) -> Result<Json<Overview>, ApiError> {
    let client = state.client();
    let nodes = live_nodes(client, state.node_ttl_ms()).await?;
    let now = client.time_ms().await?;
    let keyfire::inspect::Totals {
        jobs: total,
        due,
        running,
        retrying,
    } = client.totals(now).await?;

    let mut jobs = JobCounts {
        total,
        ..JobCounts::default()
    };
    let mut totals = Totals::default();
    let mut dead = DeadSummary::default();
    let mut cursor: Option<String> = None;
    while (jobs.scanned as usize) < SCAN_BUDGET {
        let want = PAGE.min(SCAN_BUDGET - jobs.scanned as usize);
        let ids = client.list_ids(cursor.as_deref(), want).await?;
        if ids.is_empty() {
            break;
        }
        let (hashes, lens) = client.job_fields(&ids, &FIELDS).await?;
        for ((id, h), len) in ids.iter().zip(&hashes).zip(lens) {
            jobs.scanned += 1;
            match h.first().and_then(Option::as_deref) {
                Some("active") => jobs.active += 1,
                Some("paused") => jobs.paused += 1,
                Some("waiting") => jobs.waiting += 1,
                Some("finished") => jobs.finished += 1,
                _ => {}
            }
            totals.runs += count(&h[1]);
            totals.failures += count(&h[2]);
            totals.missed += count(&h[3]);
            totals.skipped += count(&h[4]);
            totals.dead += count(&h[5]);
            totals.triggered += count(&h[6]);
            if len > 0 {
                dead.total += len;
                dead.jobs.push(JobDead {
                    job_id: id.clone(),
                    count: len,
                });
            }
        }
        if ids.len() < want {
            break;
        }
        cursor = ids.last().cloned();
    }
    jobs.complete = jobs.scanned >= jobs.total;
    dead.jobs
        .sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.job_id.cmp(&b.job_id)));
    dead.jobs.truncate(DEAD_JOBS_SHOWN);
    Ok(Json(Overview {
        now: DateTime::from_timestamp_millis(now).unwrap_or_default(),
        nodes,
        jobs,
        totals,
        dead_letters: dead,
        queues: Queues {
            due,
            running,
            retrying,
        },
    }))
}
