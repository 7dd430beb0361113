//! Backfill: run each instant of a job's schedule in a past range once, as a firing of its own
//! (its id `<job id>:<instant ms>`, the nominal instant), at a bounded rate. Built on the
//! queued attempts a trigger uses: the instants wait in Redis as attempts due one after the
//! other, so any node runs them, a node that dies loses none, and nothing polls while none is
//! due.

use chrono::{DateTime, Utc};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::job::{Schedule, Validation, ValidationError};
use crate::store::BackfillReply;

/// Most instants one backfill takes: a range holding more is refused (field `to`).
pub const MAX_BACKFILL: usize = 10_000;
/// Runs per second when none is given.
pub const DEFAULT_BACKFILL_RATE: f64 = 10.0;
/// Most runs per second a backfill may ask for.
pub const MAX_BACKFILL_RATE: f64 = 100.0;
/// Fewest runs per second a backfill may ask for (one every 100 s).
pub const MIN_BACKFILL_RATE: f64 = 0.01;

/// What [`Client::backfill`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backfilled {
    /// Instants of the schedule in the range.
    pub instants: u64,
    /// Those queued to run, one after the other at the rate.
    pub scheduled: u64,
    /// Those skipped: a firing of them ran, runs or waits already (the run history, dead
    /// letters, runs in progress, queued attempts, earlier backfills), the schedule ran them,
    /// or they are the schedule's pending firing or later.
    pub skipped: u64,
    /// When the first scheduled one runs (ms, Redis time), if any.
    pub first_ms: Option<i64>,
    /// When the last scheduled one runs (ms, Redis time), if any.
    pub last_ms: Option<i64>,
}

fn invalid(field: &str, message: impl Into<String>) -> Error {
    Error::Invalid(ValidationError::new(field, message))
}

/// The interval between two backfilled runs for `rate` runs per second (checked).
pub fn backfill_interval_ms(rate: Option<f64>) -> Result<i64> {
    let rate = rate.unwrap_or(DEFAULT_BACKFILL_RATE);
    if !rate.is_finite() || !(MIN_BACKFILL_RATE..=MAX_BACKFILL_RATE).contains(&rate) {
        return Err(invalid(
            "rate",
            format!(
                "runs per second must be from {MIN_BACKFILL_RATE} to {MAX_BACKFILL_RATE}, not {rate}"
            ),
        ));
    }
    Ok((1000.0 / rate).ceil() as i64)
}

impl Client {
    /// Run each instant of job `id`'s schedule from `from` to `to` (both included, within
    /// its validity window) once, each as a firing of its own with its nominal instant as
    /// its id, `rate` runs per second (default [`DEFAULT_BACKFILL_RATE`], at most
    /// [`MAX_BACKFILL_RATE`]; a job's backfills queue one after the other). Instants already
    /// run are skipped (see [`Backfilled::skipped`]), so the same backfill twice runs
    /// nothing more. Each run is attempt 1 of its firing: the job's retry and overlap
    /// policies apply, and its handler sees the instant as `scheduled_ms`.
    ///
    /// Refused, naming the field, with nothing queued: `to` before `from` or in the future,
    /// a range of more than [`MAX_BACKFILL`] instants (`to`), a rate out of bounds (`rate`),
    /// a one-shot job or a paused one (`id`). [`Error::NotFound`] when there is no such job.
    pub async fn backfill(
        &self,
        id: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        rate: Option<f64>,
    ) -> Result<Backfilled> {
        crate::job::validate_id(id)?;
        let interval = backfill_interval_ms(rate)?;
        let (from_ms, to_ms) = (from.timestamp_millis(), to.timestamp_millis());
        if to_ms < from_ms {
            return Err(invalid("to", "must not be before from"));
        }
        for _ in 0..4 {
            let now = self.store().time_ms().await?;
            if to_ms > now {
                return Err(invalid(
                    "to",
                    "must not be in the future: the schedule runs what is still to come",
                ));
            }
            let Some(stored) = self.store().job_spec(id).await? else {
                return Err(Error::NotFound(id.to_string()));
            };
            let job = stored.spec.validate(&Validation {
                now_ms: now,
                created_ms: stored.created_ms,
                known_handler: None,
                max_params_bytes: usize::MAX,
            })?;
            if matches!(job.schedule, Schedule::Once { .. }) {
                return Err(invalid(
                    "id",
                    format!(
                        "job {id} is one-shot: backfill runs the instants of a cron or every schedule"
                    ),
                ));
            }
            let mut instants = Vec::new();
            let mut t = job.next_after(from_ms - 1);
            while let Some(at) = t.filter(|&at| at <= to_ms) {
                if instants.len() == MAX_BACKFILL {
                    return Err(invalid(
                        "to",
                        format!(
                            "the range holds more than {MAX_BACKFILL} instants of the schedule: backfill at most {MAX_BACKFILL} at once"
                        ),
                    ));
                }
                instants.push(at);
                t = job.next_after(at).filter(|&n| n > at);
            }
            let reply = self
                .store()
                .backfill(id, (stored.generation, stored.version), &instants, interval)
                .await?;
            match reply {
                BackfillReply::Queued {
                    queued,
                    skipped,
                    first_ms,
                    last_ms,
                } => {
                    return Ok(Backfilled {
                        instants: instants.len() as u64,
                        scheduled: queued,
                        skipped,
                        first_ms: (queued > 0).then_some(first_ms),
                        last_ms: (queued > 0).then_some(last_ms),
                    });
                }
                BackfillReply::Missing => return Err(Error::NotFound(id.to_string())),
                BackfillReply::Paused => {
                    return Err(invalid(
                        "id",
                        format!("job {id} is paused: resume it first (a paused job runs nothing)"),
                    ));
                }
                // Changed meanwhile: compute the instants again with its new spec.
                BackfillReply::Changed => continue,
            }
        }
        Err(Error::Conflict(id.to_string()))
    }
}
