//! `GET /v1/jobs/{id}/why`: why a job (or a one-shot task) runs or does not, in reason
//! codes and one sentence; and the ledger's view of what did not run, merged with the runs
//! into one timeline (`GET /v1/jobs/{id}/runs?include=skipped`).

use axum::Json;
use axum::extract::{Path, State};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use super::model::RunView;
use super::system::live_nodes;
use keyfire::error::Error;
use keyfire::{JobRecord, JobStatus, RunRecord, SkipReason, SkipRecord};

/// How many runs and skips a `why` answer shows.
const RECENT: usize = 5;
/// A next firing overdue by more than this, with nothing else to say why, is named overdue.
const OVERDUE_MS: i64 = 5_000;

fn at_ms(ms: i64) -> Option<DateTime<Utc>> {
    DateTime::<Utc>::from_timestamp_millis(ms)
}

/// Why an instant did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SkipReasonCode {
    /// Later than the misfire tolerance under the `skip` misfire policy.
    Misfire,
    /// Late with others under `fire_once`: one ran, these were merged into it.
    Merged,
    /// Late under `catch_up`, beyond `catch_up_limit` (the newest ran).
    CatchUpLimit,
    /// The previous run still ran (overlap `forbid`).
    Overlap,
    /// Due while the job was paused.
    Paused,
    /// The job was deleted with it due.
    Deleted,
    /// The job was changed with it due (its schedule moved on).
    Updated,
    /// Runs in progress could make up the job's `max_runs`, or it reached it.
    MaxRuns,
    /// A calendar the job names in `exclude` excludes it.
    Excluded,
    /// A reason this version does not know.
    Other,
}

impl From<SkipReason> for SkipReasonCode {
    fn from(r: SkipReason) -> Self {
        match r {
            SkipReason::Misfire => Self::Misfire,
            SkipReason::Merged => Self::Merged,
            SkipReason::CatchUpLimit => Self::CatchUpLimit,
            SkipReason::Overlap => Self::Overlap,
            SkipReason::Paused => Self::Paused,
            SkipReason::Deleted => Self::Deleted,
            SkipReason::Updated => Self::Updated,
            SkipReason::MaxRuns => Self::MaxRuns,
            SkipReason::Excluded => Self::Excluded,
            SkipReason::Other => Self::Other,
        }
    }
}

/// An instant, or a range of instants, that was due and did not run.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SkipView {
    /// Why.
    pub reason: SkipReasonCode,
    /// The first instant dropped.
    pub first_at: Option<DateTime<Utc>>,
    /// The last instant dropped (`first_at` for one).
    pub last_at: Option<DateTime<Utc>>,
    /// How many instants (a long outage's range is one record).
    pub count: u64,
    /// When it was recorded (Redis time).
    pub recorded_at: Option<DateTime<Utc>>,
    /// More: the firing id of the run that still ran (`overlap`).
    pub detail: Option<String>,
}

impl From<&SkipRecord> for SkipView {
    fn from(s: &SkipRecord) -> Self {
        Self {
            reason: s.reason.into(),
            first_at: at_ms(s.first_ms),
            last_at: at_ms(s.last_ms),
            count: s.count,
            recorded_at: at_ms(s.at_ms),
            detail: s.detail.clone(),
        }
    }
}

/// What a timeline entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A run (an attempt of a firing): `run` is set.
    Run,
    /// Instants that did not run: `skipped` is set.
    Skipped,
}

/// One entry of a job's timeline: a run, or instants that did not run.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TimelineEntry {
    /// `run` or `skipped`.
    pub kind: EntryKind,
    /// The instant it is about: a run's scheduled instant, the last instant skipped.
    pub at: Option<DateTime<Utc>>,
    /// The run, for `kind = run`.
    pub run: Option<RunView>,
    /// The instants skipped, for `kind = skipped`.
    pub skipped: Option<SkipView>,
}

/// Runs and skips in one timeline, newest instant first (a run's attempts keep their order).
pub(super) fn timeline(runs: &[RunRecord], skips: &[SkipRecord]) -> Vec<TimelineEntry> {
    let mut out: Vec<(i64, TimelineEntry)> = runs
        .iter()
        .map(|r| {
            (
                r.scheduled_ms,
                TimelineEntry {
                    kind: EntryKind::Run,
                    at: at_ms(r.scheduled_ms),
                    run: Some(RunView::from(r)),
                    skipped: None,
                },
            )
        })
        .chain(skips.iter().map(|s| {
            (
                s.last_ms,
                TimelineEntry {
                    kind: EntryKind::Skipped,
                    at: at_ms(s.last_ms),
                    run: None,
                    skipped: Some(SkipView::from(s)),
                },
            )
        }))
        .collect();
    out.sort_by_key(|e| std::cmp::Reverse(e.0));
    out.into_iter().map(|(_, e)| e).collect()
}

/// A reason a job runs, or does not, now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WhyCode {
    /// Paused (since `paused_since`).
    Paused,
    /// Paused by keyfire: `pause_after_failures` firings in a row failed.
    PausedAfterFailures,
    /// Finished: it reached `max_runs` successful firings.
    MaxRunsReached,
    /// A task created with `after_task`: it waits for that task to succeed.
    AfterTask,
    /// Outside its validity window (`start_at`/`end_at`).
    OutsideWindow,
    /// Finished: no next firing (a one-shot that ran, or a schedule that ended).
    Finished,
    /// Its firings wait for their turn under a flow limit (`flow_limit`).
    FlowLimited,
    /// A firing of it runs now (`running`: on which node, since when).
    Running,
    /// Its last attempt failed; the next attempt is queued (`retry`).
    Retrying,
    /// No node is live: nothing runs.
    NoNode,
    /// Nodes are live but none registers its handler (`handler`).
    NoHandler,
    /// Redis is at `maxmemory`: writes are refused.
    RedisFull,
    /// Its last instant was excluded by a calendar it names in `exclude` (recorded in its
    /// ledger as `excluded`).
    Excluded,
    /// Its next firing is past and no node has claimed it yet.
    Overdue,
    /// Nothing stands in its way: it waits for its next firing.
    Waiting,
}

/// One reason, in a sentence.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WhyCause {
    /// The reason's code.
    pub code: WhyCode,
    /// What it means for this job.
    pub message: String,
}

/// A flow limit that holds the job's firings back.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WhyLimit {
    /// The limit key.
    pub key: String,
    /// Most firings started per second, if bounded.
    pub rate: Option<u32>,
    /// Most firings running at once, if bounded.
    pub in_flight: Option<u32>,
    /// Firings running under it now.
    pub running: u64,
    /// Firings waiting in line.
    pub waiting: u64,
}

/// The run of the job in progress.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WhyRunning {
    /// `<job id>:<instant ms>`.
    pub firing_id: String,
    /// The node running it.
    pub node: String,
    /// When it was claimed.
    pub since: Option<DateTime<Utc>>,
    /// 1 for the first attempt.
    pub attempt: u32,
}

/// A failed attempt with another one queued.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WhyRetry {
    /// `<job id>:<instant ms>`.
    pub firing_id: String,
    /// The attempt that failed.
    pub attempt: u32,
    /// Its error.
    pub error: Option<String>,
    /// When the next attempt is due.
    pub next_attempt_at: Option<DateTime<Utc>>,
}

/// Why a job runs, or does not, now.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WhyView {
    /// The job's id.
    pub id: String,
    /// `active`, `paused`, `finished`, or `waiting` (a task waiting for its `after_task`).
    pub status: String,
    /// The main reason: the first of `causes`.
    pub state: WhyCode,
    /// In one sentence.
    pub summary: String,
    /// Every reason that applies, the main one first.
    pub causes: Vec<WhyCause>,
    /// Redis's clock now.
    pub now: Option<DateTime<Utc>>,
    /// Its next firing, if any.
    pub next_at: Option<DateTime<Utc>>,
    /// How far off the next firing is, in ms (negative: overdue).
    pub next_in_ms: Option<i64>,
    /// When it was paused, if it is.
    pub paused_since: Option<DateTime<Utc>>,
    /// Its handler.
    pub handler: String,
    /// The live nodes that register its handler.
    pub handler_nodes: Vec<String>,
    /// The flow limit its firings count against, if its key has one.
    pub flow_limit: Option<WhyLimit>,
    /// The run in progress, if any.
    pub running: Option<WhyRunning>,
    /// The failed attempt whose next attempt is queued, if any.
    pub retry: Option<WhyRetry>,
    /// Its last runs and skips (five of each at most), newest first.
    pub recent: Vec<TimelineEntry>,
}

/// How long from `from` to `to`, for people: `3 s`, `4 min`, `2 h 5 min`, `3 d`.
fn span(ms: i64) -> String {
    let s = ms.abs() / 1000;
    match s {
        0 => format!("{} ms", ms.abs()),
        1..=119 => format!("{s} s"),
        120..=7_199 => format!("{} min", s / 60),
        7_200..=172_799 => format!("{} h {} min", s / 3600, s / 60 % 60),
        _ => format!("{} d", s / 86_400),
    }
}

fn when(ms: i64) -> String {
    at_ms(ms).map_or_else(|| ms.to_string(), |t| t.to_rfc3339())
}

/// Why a job (or a one-shot task) runs or does not, now: its next firing and how far off;
/// if it does not run when it should, why (paused, outside its validity window, held by a
/// flow limit, no live node registers its handler, Redis full, its last attempt failing and
/// its next one queued, a firing in a node's hands); its last runs and skips.
#[utoipa::path(
    get,
    path = "/v1/jobs/{id}/why",
    tag = "jobs",
    params(("id" = String, Path, description = "The job's (or task's) id")),
    responses(
        (status = 200, description = "Why it runs or not, now", body = WhyView),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn job_why(
    State(state): State<ApiState>,
    Path(id): Path<String>,
) -> Result<Json<WhyView>, ApiError> {
    let client = state.client();
    let Some(job) = client.find(&id).await? else {
        return Err(Error::NotFound(id).into());
    };
    let now = client.time_ms().await?;
    let runs = client.runs(&id, RECENT).await?;
    let skips = client.skips(&id, RECENT).await?;
    let running = client.running(&id).await?;
    let nodes = live_nodes(client, state.node_ttl_ms()).await?;
    let limit = match job.spec.effective_limit_key() {
        Some(key) => match client.limit(&key).await {
            Ok(l) => Some(l),
            Err(Error::LimitNotFound(_)) => None,
            Err(e) => return Err(e.into()),
        },
        None => None,
    };
    let full = client
        .memory()
        .await?
        .iter()
        .find(|m| m.max > 0 && m.used >= m.max)
        .map(|m| format!("Redis {} is full ({} of {} bytes)", m.server, m.used, m.max));
    let facts = Facts {
        now,
        handler_nodes: nodes
            .iter()
            .filter(|n| n.handlers.contains(&job.spec.handler))
            .map(|n| n.id.clone())
            .collect(),
        live: nodes.len(),
        limit: limit.map(|l| WhyLimit {
            key: l.key,
            rate: l.rate,
            in_flight: l.in_flight,
            running: l.running,
            waiting: l.held,
        }),
        running: running.map(|l| WhyRunning {
            firing_id: l.firing_id,
            node: l.node,
            since: at_ms(l.claimed_ms),
            attempt: l.attempt,
        }),
        full,
    };
    Ok(Json(explain(&job, &runs, &skips, facts)))
}

/// What `explain` needs besides the job's own records.
struct Facts {
    now: i64,
    handler_nodes: Vec<String>,
    live: usize,
    limit: Option<WhyLimit>,
    running: Option<WhyRunning>,
    full: Option<String>,
}

/// The reasons, in order: those that stop it first, then what it is doing, then what is in
/// its way, then waiting.
fn explain(job: &JobRecord, runs: &[RunRecord], skips: &[SkipRecord], f: Facts) -> WhyView {
    let now = f.now;
    let spec = &job.spec;
    let mut causes: Vec<WhyCause> = Vec::new();
    fn cause(causes: &mut Vec<WhyCause>, code: WhyCode, message: String) {
        causes.push(WhyCause { code, message });
    }
    let start = spec.start_at.map(|t| t.timestamp_millis());
    let end = spec.end_at.map(|t| t.timestamp_millis());
    let stopped = job.run_limits.stopped.as_deref();
    if job.status == JobStatus::Paused {
        let since = job
            .paused_ms
            .map(when)
            .unwrap_or_else(|| "an unknown time".into());
        if stopped == Some("failures") {
            cause(
                &mut causes,
                WhyCode::PausedAfterFailures,
                format!(
                    "it was paused (at {since}) after {} firings in a row failed (pause_after_failures): it fires nothing until resumed",
                    job.run_limits.failure_streak
                ),
            );
        } else {
            cause(
                &mut causes,
                WhyCode::Paused,
                format!("it is paused (since {since}): it fires nothing until resumed"),
            );
        }
    }
    if job.status == JobStatus::Waiting {
        cause(
            &mut causes,
            WhyCode::AfterTask,
            format!(
                "it waits for task '{}' (its after_task) to succeed, and runs its delay after \
                 that; if that task ends otherwise, this one goes to its dead letters",
                spec.after_task.as_deref().unwrap_or("?"),
            ),
        );
    }
    if job.status == JobStatus::Finished && stopped == Some("max_runs") {
        cause(
            &mut causes,
            WhyCode::MaxRunsReached,
            format!(
                "it finished after {} successful firings (max_runs)",
                job.run_limits.succeeded
            ),
        );
    }
    if let Some(s) = start.filter(|&s| s > now) {
        cause(
            &mut causes,
            WhyCode::OutsideWindow,
            format!(
                "its validity window opens at {} (in {})",
                when(s),
                span(s - now)
            ),
        );
    } else if let Some(e) = end.filter(|&e| e <= now) {
        cause(
            &mut causes,
            WhyCode::OutsideWindow,
            format!("its validity window closed at {}", when(e)),
        );
    }
    if let Some(l) = f.limit.as_ref().filter(|l| l.waiting > 0) {
        let rate = l
            .rate
            .map(|r| format!("{r}/s"))
            .unwrap_or("unbounded".into());
        let in_flight = l
            .in_flight
            .map(|n| n.to_string())
            .unwrap_or("unbounded".into());
        cause(
            &mut causes,
            WhyCode::FlowLimited,
            format!(
                "its firings are held by flow limit {} (rate {rate}, in flight {in_flight}; {} running, {} waiting)",
                l.key, l.running, l.waiting
            ),
        );
    }
    if let Some(r) = &f.running {
        let since = r.since.map(|t| t.to_rfc3339()).unwrap_or_default();
        cause(
            &mut causes,
            WhyCode::Running,
            format!(
                "firing {} (attempt {}) is in node {}'s hands since {since}",
                r.firing_id, r.attempt, r.node
            ),
        );
    }
    let retry = runs
        .first()
        .filter(|r| r.fate.as_deref() == Some("retry"))
        .map(|r| WhyRetry {
            firing_id: r.firing_id.clone(),
            attempt: r.attempt,
            error: r.error.clone(),
            next_attempt_at: r.retry_at_ms.and_then(at_ms),
        });
    if let Some(r) = &retry
        && f.running
            .as_ref()
            .is_none_or(|run| run.firing_id != r.firing_id)
    {
        let at = r
            .next_attempt_at
            .map(|t| format!(" at {}", t.to_rfc3339()))
            .unwrap_or_default();
        cause(
            &mut causes,
            WhyCode::Retrying,
            format!(
                "attempt {} of firing {} failed ({}); attempt {} is due{at}",
                r.attempt,
                r.firing_id,
                r.error.as_deref().unwrap_or("no error given"),
                r.attempt + 1
            ),
        );
    }
    if job.status == JobStatus::Finished
        && f.running.is_none()
        && retry.is_none()
        && !causes
            .iter()
            .any(|c| matches!(c.code, WhyCode::OutsideWindow | WhyCode::MaxRunsReached))
    {
        let last = job
            .last_ms
            .map(|l| format!(" (its last firing was at {})", when(l)))
            .unwrap_or_default();
        cause(
            &mut causes,
            WhyCode::Finished,
            format!("it has no next firing{last}"),
        );
    }
    // The job's last instant (the one its schedule moved on from) was excluded by a calendar.
    if let Some(x) = skips
        .first()
        .filter(|x| x.reason == SkipReason::Excluded && job.last_ms == Some(x.last_ms))
    {
        cause(
            &mut causes,
            WhyCode::Excluded,
            format!(
                "its last instant ({}) was excluded by its calendars ({}): it did not run",
                when(x.last_ms),
                spec.exclude.join(", ")
            ),
        );
    }
    let stopped = causes.iter().any(|c| {
        matches!(
            c.code,
            WhyCode::Paused
                | WhyCode::PausedAfterFailures
                | WhyCode::AfterTask
                | WhyCode::OutsideWindow
                | WhyCode::Finished
                | WhyCode::MaxRunsReached
        )
    });
    if !stopped {
        if f.live == 0 {
            cause(
                &mut causes,
                WhyCode::NoNode,
                "no node is live: nothing runs until one starts".into(),
            );
        } else if f.handler_nodes.is_empty() {
            cause(
                &mut causes,
                WhyCode::NoHandler,
                format!(
                    "none of the {} live nodes registers its handler '{}'",
                    f.live, spec.handler
                ),
            );
        }
    }
    if let Some(full) = &f.full {
        cause(
            &mut causes,
            WhyCode::RedisFull,
            format!("{full}: claims and outcomes may be refused"),
        );
    }
    let next = job.next_ms.filter(|_| job.status == JobStatus::Active);
    if causes.is_empty()
        && let Some(n) = next.filter(|&n| n < now - OVERDUE_MS)
    {
        cause(
            &mut causes,
            WhyCode::Overdue,
            format!(
                "its next firing ({}) is {} overdue and no node has claimed it",
                when(n),
                span(now - n)
            ),
        );
    }
    if causes.is_empty() {
        let message = match next {
            Some(n) if n >= now => format!(
                "nothing stands in its way: its next firing is at {} (in {})",
                when(n),
                span(n - now)
            ),
            Some(n) => format!(
                "nothing stands in its way: its next firing ({}) is due now",
                when(n)
            ),
            None => "nothing stands in its way".into(),
        };
        cause(&mut causes, WhyCode::Waiting, message);
    }
    let summary = {
        let mut s = format!("{} {}", spec.id, causes[0].message);
        if causes.len() > 1 {
            let more: Vec<&str> = causes[1..].iter().map(|c| c.message.as_str()).collect();
            s.push_str("; also, ");
            s.push_str(&more.join("; "));
        }
        if let Some(n) = next
            && causes[0].code != WhyCode::Waiting
            && causes[0].code != WhyCode::Overdue
        {
            let off = if n >= now {
                format!("in {}", span(n - now))
            } else {
                format!("{} ago", span(now - n))
            };
            s.push_str(&format!(". Its next firing is at {} ({off})", when(n)));
        }
        s.push('.');
        s
    };
    WhyView {
        id: spec.id.clone(),
        status: job.status.as_str().to_string(),
        state: causes[0].code,
        summary,
        now: at_ms(now),
        next_at: next.and_then(at_ms),
        next_in_ms: next.map(|n| n - now),
        paused_since: job
            .paused_ms
            .filter(|_| job.status == JobStatus::Paused)
            .and_then(at_ms),
        handler: spec.handler.clone(),
        handler_nodes: f.handler_nodes,
        flow_limit: f.limit,
        running: f.running,
        retry,
        recent: timeline(runs, skips),
        causes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyfire::JobSpec;

    #[test]
    fn spans_read_as_people_say_them() {
        assert_eq!(span(250), "250 ms");
        assert_eq!(span(3_000), "3 s");
        assert_eq!(span(-3_000), "3 s");
        assert_eq!(span(240_000), "4 min");
        assert_eq!(span(7_500_000), "2 h 5 min");
        assert_eq!(span(3 * 86_400_000), "3 d");
    }

    fn job(status: JobStatus, next_ms: Option<i64>) -> JobRecord {
        JobRecord {
            spec: JobSpec::every("j", "1m", "log"),
            version: 1,
            status,
            next_ms,
            last_ms: None,
            created_ms: 0,
            updated_ms: 0,
            runs: 0,
            failures: 0,
            missed: 0,
            skipped: 0,
            dead: 0,
            triggered: 0,
            active: None,
            paused_ms: None,
            run_limits: Default::default(),
        }
    }

    fn facts(now: i64, live: usize, handler_nodes: &[&str], full: bool) -> Facts {
        Facts {
            now,
            handler_nodes: handler_nodes.iter().map(|s| s.to_string()).collect(),
            live,
            limit: None,
            running: None,
            full: full.then(|| "Redis r:1 is full (10 of 10 bytes)".to_string()),
        }
    }

    #[test]
    fn each_cause_is_named_and_the_main_one_comes_first() {
        let now = 1_000_000;
        let active = job(JobStatus::Active, Some(now + 60_000));
        let w = explain(&active, &[], &[], facts(now, 0, &[], false));
        assert_eq!(w.state, WhyCode::NoNode);
        let w = explain(&active, &[], &[], facts(now, 2, &[], false));
        assert_eq!(w.state, WhyCode::NoHandler);
        assert!(
            w.summary
                .contains("none of the 2 live nodes registers its handler 'log'")
        );
        assert!(w.summary.contains("(in 60 s)"), "{}", w.summary);
        let w = explain(&active, &[], &[], facts(now, 1, &["n"], true));
        assert_eq!(w.state, WhyCode::RedisFull);
        let w = explain(&active, &[], &[], facts(now, 1, &["n"], false));
        assert_eq!((w.state, w.next_in_ms), (WhyCode::Waiting, Some(60_000)));
        let overdue = job(JobStatus::Active, Some(now - 60_000));
        let w = explain(&overdue, &[], &[], facts(now, 1, &["n"], false));
        assert_eq!(w.state, WhyCode::Overdue);
        assert!(w.summary.contains("60 s overdue"), "{}", w.summary);
        // A paused job: paused first, and no node is not its problem.
        let mut paused = job(JobStatus::Paused, None);
        paused.paused_ms = Some(now - 5_000);
        let w = explain(&paused, &[], &[], facts(now, 0, &[], false));
        let codes: Vec<WhyCode> = w.causes.iter().map(|c| c.code).collect();
        assert_eq!(codes, [WhyCode::Paused]);
        assert!(w.paused_since.is_some());
        // Waiting for its after_task: that, and no node is not its problem.
        let mut after = job(JobStatus::Waiting, None);
        after.spec.after_task = Some("extract".into());
        let w = explain(&after, &[], &[], facts(now, 0, &[], false));
        assert_eq!(w.state, WhyCode::AfterTask);
        assert!(w.summary.contains("'extract'"), "{}", w.summary);
        // Paused by its run limits, or finished by them: that reason, named.
        paused.run_limits.stopped = Some("failures".into());
        paused.run_limits.failure_streak = 3;
        let w = explain(&paused, &[], &[], facts(now, 1, &["n"], false));
        assert_eq!(w.state, WhyCode::PausedAfterFailures);
        assert!(
            w.summary.contains("after 3 firings in a row failed"),
            "{}",
            w.summary
        );
        let mut ended = job(JobStatus::Finished, None);
        ended.run_limits.stopped = Some("max_runs".into());
        ended.run_limits.succeeded = 5;
        let w = explain(&ended, &[], &[], facts(now, 1, &["n"], false));
        let codes: Vec<WhyCode> = w.causes.iter().map(|c| c.code).collect();
        assert_eq!(codes, [WhyCode::MaxRunsReached]);
    }

    #[test]
    fn an_excluded_last_instant_is_named_with_its_calendars() {
        let now = 1_800_000_000_000;
        let mut j = job(JobStatus::Active, Some(now + 3_600_000));
        j.spec.exclude = vec!["de-holidays".into()];
        j.last_ms = Some(now - 60_000);
        let skip = SkipRecord {
            reason: SkipReason::Excluded,
            first_ms: now - 60_000,
            last_ms: now - 60_000,
            count: 1,
            at_ms: now - 60_000,
            detail: None,
        };
        let w = explain(
            &j,
            &[],
            std::slice::from_ref(&skip),
            facts(now, 1, &["n"], false),
        );
        assert_eq!(w.state, WhyCode::Excluded);
        assert!(
            w.summary
                .contains("excluded by its calendars (de-holidays)"),
            "{}",
            w.summary
        );
        assert!(w.summary.contains("Its next firing is at"), "{}", w.summary);
        // Once a later instant ran, it is history only.
        j.last_ms = Some(now - 1_000);
        let w = explain(&j, &[], &[skip], facts(now, 1, &["n"], false));
        assert_eq!(w.state, WhyCode::Waiting);
    }

    #[test]
    fn the_timeline_is_newest_instant_first() {
        let run = |at: i64| RunRecord {
            firing_id: format!("j:{at}"),
            scheduled_ms: at,
            attempt: 1,
            node: "n".into(),
            claimed_ms: at,
            started_ms: at,
            outcome: "ok".into(),
            error: None,
            finished_ms: Some(at + 1),
            fate: Some("done".into()),
            retry_at_ms: None,
        };
        let skip = SkipRecord {
            reason: SkipReason::Overlap,
            first_ms: 2_000,
            last_ms: 3_000,
            count: 2,
            at_ms: 3_000,
            detail: None,
        };
        let t = timeline(&[run(4_000), run(1_000)], &[skip]);
        let kinds: Vec<EntryKind> = t.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [EntryKind::Run, EntryKind::Skipped, EntryKind::Run]);
        assert_eq!(t[1].skipped.as_ref().unwrap().count, 2);
    }
}
