//! `keyfire cron next`: preview a cron expression's next instants, no server needed.

use chrono::{DateTime, Utc};

use keyfire::job::{JobSpec, Validation};

/// The next `n` instants of `expr` in `tz` after `from`, as (UTC, local) strings.
pub fn next(
    expr: &str,
    tz: &str,
    n: usize,
    from: DateTime<Utc>,
) -> Result<Vec<(String, String)>, keyfire::ValidationError> {
    let now = from.timestamp_millis();
    let job = JobSpec::cron("preview", expr, "noop")
        .tz(tz)
        .validate(&Validation {
            now_ms: now,
            created_ms: now,
            known_handler: None,
            max_params_bytes: usize::MAX,
        })?;
    let zone: chrono_tz::Tz = tz.parse().expect("validated");
    let mut out = Vec::with_capacity(n);
    let mut t = now;
    while out.len() < n {
        let Some(next) = job.next_after(t) else { break };
        let at = DateTime::<Utc>::from_timestamp_millis(next).expect("in range");
        out.push((
            at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            at.with_timezone(&zone)
                .format("%Y-%m-%d %H:%M:%S %Z (%:z)")
                .to_string(),
        ));
        t = next;
    }
    Ok(out)
}
