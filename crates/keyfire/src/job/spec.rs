//! A job as declared, its validation, and its validated form.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::dedup::{Dedup, DedupSpec};
use super::policy::{MisfirePolicy, OverlapPolicy, RetryPolicy, RetrySpec};
use super::schedule::{Schedule, parse_cron, parse_tz};
use super::validation::{ValidationError, duration_ms};

/// A job as a user declares it (REST, TOML, CLI, Rust) and as keyfire stores it.
///
/// Exactly one of `cron`, `every`, `at` and `after` gives the schedule. `after` is turned into
/// `at` (by Redis's clock) when the job is created, so the stored form always holds an instant.
///
/// The REST API's OpenAPI schema (feature `openapi`) is derived from this type, so the
/// document and what the server accepts cannot drift apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Unique id, chosen by the client: `[A-Za-z0-9][A-Za-z0-9_.-]*`, at most 128 bytes. In
    /// `PUT /v1/jobs/{id}` it may be left out (the path gives it).
    #[cfg_attr(feature = "openapi", schema(example = "nightly-report"))]
    pub id: String,
    /// Cron expression: 5 fields, 6 with seconds, or a macro such as `@hourly`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(example = "0 9 * * MON-FRI"))]
    pub cron: Option<String>,
    /// IANA zone the cron expression is read in (default `UTC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(example = "Europe/Berlin"))]
    pub tz: Option<String>,
    /// Fixed rate, such as `30s` or `1h 30m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<String>,
    /// Cron and `every` only: each firing is released at its instant plus an offset in
    /// `[0, jitter)` fixed by the job id and the instant (the same on every node), such as
    /// `30s`; less than `every`. The firing keeps its instant as its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(example = "30s"))]
    pub jitter: Option<String>,
    /// Cron and `every` only: names of calendars whose instants this job skips (each skip
    /// is recorded in its ledger as `excluded`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(example = json!(["de-holidays"])))]
    pub exclude: Vec<String>,
    /// One-shot at this instant (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<DateTime<Utc>>,
    /// One-shot after this delay from creation, such as `10m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// Nothing fires before this instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<DateTime<Utc>>,
    /// Nothing fires after this instant; a job past its end is marked finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_at: Option<DateTime<Utc>>,
    /// Name of the handler that runs the job.
    #[cfg_attr(feature = "openapi", schema(example = "http"))]
    pub handler: String,
    /// A JSON object given to the handler; absent (or null) gives none.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub params: Value,
    /// How late a firing may be found and still count as on time (default `10s`); older
    /// firings of a recurring job are skipped and counted as missed (one run happens now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub misfire_tolerance: Option<String>,
    /// `fire_once` (default), `skip` or `catch_up`: what to do with firings found later than
    /// the tolerance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub misfire: Option<String>,
    /// Most late firings `catch_up` runs (default 100); older ones are recorded as missed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up_limit: Option<u32>,
    /// `allow` (default), `forbid` or `replace`: what to do when a firing comes while the
    /// job's previous run still runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<String>,
    /// Longest a run may take (default `1h`); a run that takes longer is a failed attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Retries of a failed run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetrySpec>,
    /// End the job (status `finished`, reason `max_runs`) once this many firings of its
    /// schedule succeeded (cron and every jobs; at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runs: Option<u64>,
    /// Pause the job (reason `failures`) after this many firings in a row failed (a firing
    /// fails when its last attempt fails; a success, or a resume, starts the count again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_after_failures: Option<u32>,
    /// The flow-control key this job's firings count against (see `LimitSpec`); default:
    /// `host:<host>` of an `http` job's URL. A key without a registered limit limits nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_key: Option<String>,
    /// Deduplication on enqueue (one-shot tasks only): a key, or `content: true`, and a
    /// window; enqueueing the same key within the window gives back the task created then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup: Option<DedupSpec>,
    /// The W3C `traceparent` of the request that created the job (the REST API takes it from
    /// the request's `traceparent` header when the body gives none): the spans of its
    /// firings link to that trace when the node exports traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(example = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    )]
    pub traceparent: Option<String>,
    /// One-shot tasks only: run after this one-shot task (its id) succeeded. Until then the
    /// task waits (status `waiting`); `after` is then its delay after that success. If that
    /// task ends otherwise (dead, cancelled, deleted), this one goes to its dead letters with
    /// the reason, and so on down a chain. Both live on one shard: leave `id` out (keyfire
    /// picks one there) or give one on that task's shard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_task: Option<String>,
    /// The batch this task belongs to, set by keyfire when tasks are enqueued as a batch with
    /// a completion callback (`on_complete`); read-only. It stays the spec's last field (the
    /// scripts read it from the end of the spec's JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(read_only))]
    pub batch: Option<String>,
}

/// What validation needs from its surroundings.
pub struct Validation<'a> {
    /// Redis time now, in ms: resolves `after`.
    pub now_ms: i64,
    /// The job's creation instant in ms (phase of `every` when there is no `start_at`).
    pub created_ms: i64,
    /// Whether a handler name is known; `None` skips the check (loading stored jobs).
    pub known_handler: Option<&'a dyn Fn(&str) -> bool>,
    /// Largest accepted `params`, serialized, in bytes.
    pub max_params_bytes: usize,
}

/// A validated job: its (normalised) spec and its parsed schedule and window.
#[derive(Debug, Clone)]
pub struct Job {
    /// The spec, with `after` resolved to `at`.
    pub spec: JobSpec,
    /// When it fires.
    pub schedule: Schedule,
    /// Window start in ms.
    pub start_ms: Option<i64>,
    /// Window end in ms (inclusive).
    pub end_ms: Option<i64>,
    /// Misfire tolerance in ms.
    pub misfire_tolerance_ms: i64,
    /// Misfire policy.
    pub misfire: MisfirePolicy,
    /// Most late firings `catch_up` runs.
    pub catch_up_limit: u32,
    /// Overlap policy.
    pub overlap: OverlapPolicy,
    /// Longest run in ms.
    pub timeout_ms: i64,
    /// Retry policy.
    pub retry: RetryPolicy,
    /// The checked dedup declaration, if any.
    pub dedup: Option<Dedup>,
    /// Run limits: `max_runs` and `pause_after_failures`, checked.
    pub limits: RunLimits,
    /// Jitter in ms (0: none).
    pub jitter_ms: i64,
}

/// A job's run limits (see [`JobSpec::max_runs`] and [`JobSpec::pause_after_failures`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunLimits {
    /// End the job after this many successful firings of its schedule.
    pub max_runs: Option<u64>,
    /// Pause the job after this many failed firings in a row.
    pub pause_after_failures: Option<u32>,
}

impl RunLimits {
    /// Whether either limit is set (outcomes and claims of the job then keep its counts).
    pub fn any(&self) -> bool {
        self.max_runs.is_some() || self.pause_after_failures.is_some()
    }
}

/// What kind of JSON value this is, for messages ("a number").
fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The largest job id, in bytes.
pub const MAX_ID_LEN: usize = 128;

/// What `validate_id` accepts besides the length, as a regular expression: the REST API's
/// OpenAPI document states it (a test checks the two agree).
pub const ID_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9_.-]*$";

/// A W3C `traceparent` as [`JobSpec::validate`] takes it, as a regular expression (the REST
/// API's OpenAPI document states it): version `00` exactly as the W3C gives it, a later version
/// (not `ff`) with more fields after a `-`; lower-case hex; visible ASCII only. The ids must
/// not be all zeros as well, which the document states beside it (a test checks they agree).
pub const TRACEPARENT_PATTERN: &str = "^(00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}|(0[1-9a-f]|[1-9a-e][0-9a-f]|f[0-9a-e])-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[!-~]*)?)$";

/// Check a job id: `[A-Za-z0-9][A-Za-z0-9_.-]*`, at most [`MAX_ID_LEN`] bytes. Ids appear in
/// Redis key names, so `:`, `{`, `}` and spaces are refused.
pub(crate) fn validate_id(id: &str) -> Result<(), ValidationError> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    if id.is_empty() {
        return Err(ValidationError::new("id", "must not be empty"));
    }
    if id.len() > MAX_ID_LEN {
        return Err(ValidationError::new(
            "id",
            format!("must be at most {MAX_ID_LEN} bytes"),
        ));
    }
    if !id.chars().all(ok_char) || !id.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(ValidationError::new(
            "id",
            "may hold only letters, digits, '_', '.' and '-', and must start with a letter or digit",
        ));
    }
    Ok(())
}

impl JobSpec {
    /// A cron job (5 or 6 fields, or a macro) in UTC; set [`JobSpec::tz`] for a zone.
    pub fn cron(
        id: impl Into<String>,
        expr: impl Into<String>,
        handler: impl Into<String>,
    ) -> Self {
        Self {
            cron: Some(expr.into()),
            ..Self::bare(id, handler)
        }
    }

    /// A fixed-rate job, such as `every("beat", "30s", "log")`.
    pub fn every(
        id: impl Into<String>,
        every: impl Into<String>,
        handler: impl Into<String>,
    ) -> Self {
        Self {
            every: Some(every.into()),
            ..Self::bare(id, handler)
        }
    }

    /// A one-shot job at an instant.
    pub fn at(id: impl Into<String>, at: DateTime<Utc>, handler: impl Into<String>) -> Self {
        Self {
            at: Some(at),
            ..Self::bare(id, handler)
        }
    }

    /// A one-shot job after a delay (resolved by Redis's clock when created).
    pub fn after(
        id: impl Into<String>,
        delay: impl Into<String>,
        handler: impl Into<String>,
    ) -> Self {
        Self {
            after: Some(delay.into()),
            ..Self::bare(id, handler)
        }
    }

    fn bare(id: impl Into<String>, handler: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            cron: None,
            tz: None,
            every: None,
            jitter: None,
            exclude: Vec::new(),
            at: None,
            after: None,
            start_at: None,
            end_at: None,
            handler: handler.into(),
            params: Value::Null,
            misfire_tolerance: None,
            misfire: None,
            catch_up_limit: None,
            overlap: None,
            timeout: None,
            retry: None,
            max_runs: None,
            pause_after_failures: None,
            limit_key: None,
            dedup: None,
            traceparent: None,
            after_task: None,
            batch: None,
        }
    }

    /// Run this one-shot task only after task `id` succeeded (see [`JobSpec::after_task`]).
    pub fn after_task(mut self, id: impl Into<String>) -> Self {
        self.after_task = Some(id.into());
        self
    }

    /// Count this job's firings against a flow-control key (see `FlowLimitSpec`).
    pub fn limit_key(mut self, key: impl Into<String>) -> Self {
        self.limit_key = Some(key.into());
        self
    }

    /// Set the time zone of a cron job.
    pub fn tz(mut self, tz: impl Into<String>) -> Self {
        self.tz = Some(tz.into());
        self
    }

    /// Set the handler's params.
    pub fn params(mut self, params: Value) -> Self {
        self.params = params;
        self
    }

    /// Set the retry policy.
    pub fn retry(mut self, retry: RetrySpec) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Link the spans of this job's firings to the trace of `traceparent` (a W3C header value).
    pub fn traceparent(mut self, traceparent: impl Into<String>) -> Self {
        self.traceparent = Some(traceparent.into());
        self
    }

    /// Deduplicate this task on enqueue (see [`DedupSpec`]).
    pub fn dedup(mut self, dedup: DedupSpec) -> Self {
        self.dedup = Some(dedup);
        self
    }

    /// Release each firing at a deterministic offset in `[0, jitter)` after its instant.
    pub fn jitter(mut self, jitter: impl Into<String>) -> Self {
        self.jitter = Some(jitter.into());
        self
    }

    /// Skip the instants the named calendars exclude.
    pub fn exclude<S: Into<String>>(mut self, calendars: impl IntoIterator<Item = S>) -> Self {
        self.exclude = calendars.into_iter().map(Into::into).collect();
        self
    }

    /// Set the validity window.
    pub fn window(mut self, start: Option<DateTime<Utc>>, end: Option<DateTime<Utc>>) -> Self {
        self.start_at = start;
        self.end_at = end;
        self
    }

    /// Check every field and build the validated [`Job`]. The error names the first bad field.
    pub fn validate(mut self, v: &Validation<'_>) -> Result<Job, ValidationError> {
        validate_id(&self.id)?;
        // Visible ASCII only: the parser also trims whitespace around a header's value, which a
        // body's field has no reason to hold.
        if let Some(tp) = &self.traceparent
            && (crate::trace::TraceParent::parse(tp).is_none()
                || !tp.bytes().all(|b| b.is_ascii_graphic()))
        {
            return Err(ValidationError::new(
                "traceparent",
                "must be a W3C traceparent such as 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            ));
        }
        if let Some(key) = &self.limit_key {
            super::flow_limit::validate_limit_key("limit_key", key)?;
        }
        if let Some(awaited) = &self.after_task {
            validate_id(awaited).map_err(|e| ValidationError::new("after_task", e.message))?;
            if self.cron.is_some() || self.every.is_some() {
                return Err(ValidationError::new(
                    "after_task",
                    "only a one-shot task can wait for another task",
                ));
            }
            if awaited == &self.id {
                return Err(ValidationError::new(
                    "after_task",
                    "a task cannot wait for itself",
                ));
            }
        }
        if let Some(batch) = &self.batch {
            validate_id(batch).map_err(|e| ValidationError::new("batch", e.message))?;
        }

        let given: Vec<&str> = [
            ("cron", self.cron.is_some()),
            ("every", self.every.is_some()),
            ("at", self.at.is_some()),
            ("after", self.after.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect();
        match given.as_slice() {
            [] => {
                return Err(ValidationError::new(
                    "schedule",
                    "one of cron, every, at or after is required",
                ));
            }
            [_] => {}
            [first, second, ..] => {
                return Err(ValidationError::new(
                    *second,
                    format!("give only one of cron, every, at and after (also got {first})"),
                ));
            }
        }
        if self.tz.is_some() && self.cron.is_none() {
            return Err(ValidationError::new("tz", "applies only to cron schedules"));
        }

        let start_ms = self.start_at.map(|t| t.timestamp_millis());
        let end_ms = self.end_at.map(|t| t.timestamp_millis());
        if let (Some(s), Some(e)) = (start_ms, end_ms)
            && e <= s
        {
            return Err(ValidationError::new("end_at", "must be after start_at"));
        }

        let from_after = self.after.is_some();
        if let Some(after) = self.after.take() {
            let delay = duration_ms("after", &after)?;
            let at = DateTime::<Utc>::from_timestamp_millis(v.now_ms + delay)
                .ok_or_else(|| ValidationError::new("after", "too large"))?;
            self.at = Some(at);
        }

        let schedule = if let Some(expr) = &self.cron {
            let tz = parse_tz(self.tz.as_deref().unwrap_or("UTC"))
                .map_err(|m| ValidationError::new("tz", m))?;
            let cron = parse_cron(expr).map_err(|m| ValidationError::new("cron", m))?;
            Schedule::Cron {
                expr: expr.clone(),
                cron: Box::new(cron),
                tz,
            }
        } else if let Some(every) = &self.every {
            let interval_ms = duration_ms("every", every)?;
            if interval_ms <= 0 {
                return Err(ValidationError::new(
                    "every",
                    "must be at least 1ms (zero interval)",
                ));
            }
            Schedule::Every {
                interval_ms,
                anchor_ms: start_ms.unwrap_or(v.created_ms),
                fire_at_anchor: start_ms.is_some(),
            }
        } else {
            let at_ms = self.at.expect("one schedule is set").timestamp_millis();
            if start_ms.is_some_and(|s| at_ms < s) || end_ms.is_some_and(|e| at_ms > e) {
                return Err(ValidationError::new(
                    if from_after { "after" } else { "at" },
                    "falls outside the start_at/end_at window",
                ));
            }
            Schedule::Once { at_ms }
        };

        if self.handler.is_empty() {
            return Err(ValidationError::new("handler", "must not be empty"));
        }
        if let Some(known) = v.known_handler
            && !known(&self.handler)
        {
            return Err(ValidationError::new(
                "handler",
                format!("unknown handler '{}'", self.handler),
            ));
        }
        // Stored jobs (no handler check) are not judged again by rules newer than them.
        if v.known_handler.is_some() && !(self.params.is_null() || self.params.is_object()) {
            return Err(ValidationError::new(
                "params",
                format!(
                    "must be a JSON object (or left out), not {}",
                    json_kind(&self.params)
                ),
            ));
        }
        let params_len = serde_json::to_vec(&self.params).map_or(0, |b| b.len());
        if params_len > v.max_params_bytes {
            return Err(ValidationError::new(
                "params",
                format!(
                    "too large: {params_len} bytes, the limit is {}",
                    v.max_params_bytes
                ),
            ));
        }
        let misfire_tolerance_ms = match &self.misfire_tolerance {
            Some(t) => duration_ms("misfire_tolerance", t)?,
            None => super::DEFAULT_MISFIRE_TOLERANCE_MS,
        };

        let misfire = match &self.misfire {
            Some(m) => MisfirePolicy::parse(m)?,
            None => MisfirePolicy::default(),
        };
        let catch_up_limit = match self.catch_up_limit {
            Some(0) => {
                return Err(ValidationError::new("catch_up_limit", "must be at least 1"));
            }
            Some(n) => n,
            None => super::DEFAULT_CATCH_UP_LIMIT,
        };
        let overlap = match &self.overlap {
            Some(o) => OverlapPolicy::parse(o)?,
            None => OverlapPolicy::default(),
        };
        let timeout_ms = match &self.timeout {
            Some(t) => duration_ms("timeout", t)?,
            None => super::DEFAULT_TIMEOUT_MS,
        };
        if timeout_ms <= 0 {
            return Err(ValidationError::new("timeout", "must be greater than zero"));
        }
        let retry = RetryPolicy::from_spec(self.retry.as_ref())?;
        let jitter_ms = match &self.jitter {
            Some(j) => super::jitter::validate_jitter(j, &schedule)?,
            None => 0,
        };
        super::calendar::validate_exclude(&self.exclude)?;
        if !self.exclude.is_empty() && matches!(schedule, Schedule::Once { .. }) {
            return Err(ValidationError::new(
                "exclude",
                "applies only to cron and every schedules, not to one-shot jobs",
            ));
        }
        let dedup = match &self.dedup {
            Some(_) if !matches!(schedule, Schedule::Once { .. }) => {
                return Err(ValidationError::new(
                    "dedup",
                    "applies only to one-shot tasks (at or after), not to cron or every",
                ));
            }
            Some(d) => Some(d.resolve(&self.handler, &self.params)?),
            None => None,
        };

        let once = matches!(schedule, Schedule::Once { .. });
        let limits = RunLimits {
            max_runs: match self.max_runs {
                Some(_) if once => {
                    return Err(ValidationError::new(
                        "max_runs",
                        "applies only to cron and every jobs (a one-shot runs once)",
                    ));
                }
                Some(0) => return Err(ValidationError::new("max_runs", "must be at least 1")),
                n => n,
            },
            pause_after_failures: match self.pause_after_failures {
                Some(0) => {
                    return Err(ValidationError::new(
                        "pause_after_failures",
                        "must be at least 1",
                    ));
                }
                n => n,
            },
        };

        Ok(Job {
            spec: self,
            schedule,
            start_ms,
            end_ms,
            misfire_tolerance_ms,
            misfire,
            catch_up_limit,
            overlap,
            timeout_ms,
            retry,
            dedup,
            limits,
            jitter_ms,
        })
    }
}

impl Job {
    /// The first firing strictly after `after_ms`, inside the window.
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        let from = match self.start_ms {
            // The window opens at start: a firing exactly at start counts.
            Some(s) if after_ms < s => s - 1,
            _ => after_ms,
        };
        let next = self.schedule.next_after(from)?;
        match self.end_ms {
            Some(e) if next > e => None,
            _ => Some(next),
        }
    }

    /// The first firing of a job created or resumed at `now_ms`. A one-shot job's instant
    /// counts even when already past (it fires at once).
    pub fn first_firing(&self, now_ms: i64) -> Option<i64> {
        match self.schedule {
            Schedule::Once { at_ms } => Some(at_ms),
            _ => self.next_after(now_ms),
        }
    }

    /// The offset past `nominal_ms` its firing is released at (0 without jitter).
    pub fn jitter_offset(&self, nominal_ms: i64) -> i64 {
        super::jitter::jitter_offset(&self.spec.id, nominal_ms, self.jitter_ms)
    }

    /// When the firing at `nominal_ms` is released: the instant plus its jitter offset.
    pub fn release_at(&self, nominal_ms: i64) -> i64 {
        nominal_ms + self.jitter_offset(nominal_ms)
    }

    /// The first firing after `at_ms` whose release comes after `until_ms`: where a late
    /// job resumes its schedule (the first firing not yet late).
    pub fn next_released_after(&self, at_ms: i64, until_ms: i64) -> Option<i64> {
        let mut t = at_ms.max(until_ms - self.jitter_ms);
        loop {
            let n = self.next_after(t)?;
            if self.release_at(n) > until_ms {
                return Some(n);
            }
            t = n;
        }
    }

    /// The job's id.
    pub fn id(&self) -> &str {
        &self.spec.id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx() -> Validation<'static> {
        static KNOWN: fn(&str) -> bool = |h| h == "log";
        Validation {
            now_ms: 1_000_000,
            created_ms: 1_000_000,
            known_handler: Some(&KNOWN),
            max_params_bytes: 64,
        }
    }

    fn field_of(spec: JobSpec) -> String {
        spec.validate(&ctx()).unwrap_err().field
    }

    #[test]
    fn each_bad_field_is_named() {
        assert_eq!(field_of(JobSpec::cron("a", "not a cron", "log")), "cron");
        assert_eq!(
            field_of(JobSpec::cron("a", "* * * * *", "log").tz("Mars/Olympus")),
            "tz"
        );
        assert_eq!(field_of(JobSpec::every("a", "0s", "log")), "every");
        assert_eq!(field_of(JobSpec::every("a", "soon", "log")), "every");
        assert_eq!(field_of(JobSpec::every("a", "1s", "nope")), "handler");
        assert_eq!(
            field_of(JobSpec::every("a", "1s", "log").params(json!({"x": "y".repeat(100)}))),
            "params"
        );
        let t = Utc::now();
        assert_eq!(
            field_of(JobSpec::every("a", "1s", "log").window(Some(t), Some(t))),
            "end_at"
        );
        assert_eq!(field_of(JobSpec::every("bad id", "1s", "log")), "id");
        assert_eq!(field_of(JobSpec::every("a:b", "1s", "log")), "id");
        assert_eq!(field_of(JobSpec::every("", "1s", "log")), "id");
        let mut both = JobSpec::every("a", "1s", "log");
        both.cron = Some("* * * * *".into());
        assert_eq!(field_of(both), "every");
        let mut none = JobSpec::every("a", "1s", "log");
        none.every = None;
        assert_eq!(field_of(none), "schedule");
        assert_eq!(field_of(JobSpec::every("a", "1s", "log").tz("UTC")), "tz");
        let with = |f: fn(&mut JobSpec)| {
            let mut s = JobSpec::every("a", "1s", "log");
            f(&mut s);
            field_of(s)
        };
        assert_eq!(with(|s| s.misfire = Some("later".into())), "misfire");
        assert_eq!(with(|s| s.overlap = Some("queue".into())), "overlap");
        assert_eq!(with(|s| s.timeout = Some("0s".into())), "timeout");
        assert_eq!(with(|s| s.catch_up_limit = Some(0)), "catch_up_limit");
        assert_eq!(with(|s| s.max_runs = Some(0)), "max_runs");
        assert_eq!(
            with(|s| s.pause_after_failures = Some(0)),
            "pause_after_failures"
        );
        let mut once = JobSpec::after("a", "1s", "log");
        once.max_runs = Some(3);
        assert_eq!(field_of(once), "max_runs", "a one-shot runs once");
        assert_eq!(
            with(|s| s.retry = Some(RetrySpec {
                max_attempts: Some(0),
                ..Default::default()
            })),
            "retry.max_attempts"
        );
        assert_eq!(
            with(|s| s.dedup = Some(DedupSpec::key("k", "1m"))),
            "dedup",
            "dedup is for one-shot tasks"
        );
        assert_eq!(
            field_of(JobSpec::after("a", "1s", "log").dedup(DedupSpec::key("k", "0s"))),
            "dedup.window"
        );
    }

    #[test]
    fn jitter_is_bounded_and_for_recurring_jobs_only() {
        let err = |s: JobSpec| s.validate(&ctx()).unwrap_err();
        let e = err(JobSpec::every("a", "1m", "log").jitter("1m"));
        assert_eq!(e.field, "jitter");
        assert!(e.message.contains("less than every (60000ms)"), "{e}");
        assert_eq!(
            err(JobSpec::after("a", "1m", "log").jitter("1s")).field,
            "jitter"
        );
        assert_eq!(
            err(JobSpec::every("a", "1m", "log").jitter("0s")).field,
            "jitter"
        );
        assert_eq!(
            err(JobSpec::every("a", "1m", "log").jitter("soon")).field,
            "jitter"
        );
        assert_eq!(
            err(JobSpec::cron("a", "@hourly", "log").jitter("25h")).field,
            "jitter"
        );
        let job = JobSpec::every("a", "1m", "log")
            .jitter("59s")
            .validate(&ctx())
            .unwrap();
        assert_eq!(job.jitter_ms, 59_000);
        let cron = JobSpec::cron("a", "0 * * * *", "log")
            .jitter("30m")
            .validate(&ctx())
            .unwrap();
        // Two validations (two nodes) release each firing at the same instant.
        let again = JobSpec::cron("a", "0 * * * *", "log")
            .jitter("30m")
            .validate(&ctx())
            .unwrap();
        let mut t = 0;
        for _ in 0..100 {
            let n = cron.next_after(t).unwrap();
            assert_eq!(cron.release_at(n), again.release_at(n));
            assert!((n..n + 1_800_000).contains(&cron.release_at(n)));
            t = n;
        }
    }

    #[test]
    fn a_late_jittered_job_resumes_at_the_first_firing_not_yet_released() {
        let job = JobSpec::every("a", "10s", "log")
            .jitter("9s")
            .validate(&ctx())
            .unwrap();
        // Firings at 1_010_000 + 10 s k; find one whose release is after `until`.
        let until = 1_100_000;
        let n = job.next_released_after(1_010_000, until).unwrap();
        assert!(job.release_at(n) > until);
        let prev = n - 10_000;
        assert!(prev <= 1_010_000 || job.release_at(prev) <= until);
    }

    #[test]
    fn after_becomes_at_by_the_given_clock() {
        let job = JobSpec::after("a", "1500ms", "log")
            .validate(&ctx())
            .unwrap();
        assert_eq!(job.spec.after, None);
        assert_eq!(job.spec.at.unwrap().timestamp_millis(), 1_001_500);
        assert_eq!(job.first_firing(5_000_000), Some(1_001_500));
        assert_eq!(job.next_after(1_001_500), None);
    }

    #[test]
    fn window_bounds_firings() {
        let start = DateTime::<Utc>::from_timestamp_millis(2_000_000).unwrap();
        let end = DateTime::<Utc>::from_timestamp_millis(2_003_000).unwrap();
        let job = JobSpec::every("a", "1s", "log")
            .window(Some(start), Some(end))
            .validate(&ctx())
            .unwrap();
        assert_eq!(job.first_firing(1_000_000), Some(2_000_000));
        assert_eq!(job.next_after(2_002_000), Some(2_003_000));
        assert_eq!(job.next_after(2_003_000), None);
    }

    #[test]
    fn specs_round_trip_through_json_refusing_unknown_fields() {
        let spec = JobSpec::cron("a", "0 9 * * *", "log")
            .tz("Europe/Berlin")
            .params(json!({"k": 1}));
        let text = serde_json::to_string(&spec).unwrap();
        assert_eq!(serde_json::from_str::<JobSpec>(&text).unwrap(), spec);
        let err =
            serde_json::from_str::<JobSpec>(r#"{"id":"a","handler":"log","crn":"x"}"#).unwrap_err();
        assert!(err.to_string().contains("crn"), "{err}");
    }
}
