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

/// The start of a preview from `--from` (`None`: now): an RFC 3339 instant, such as
/// `2026-10-31T00:00:00Z`; a date, `2027-03-13`, meaning its midnight in `tz` (or the first
/// instant after it, where a DST change skips midnight), and that midnight is included; or a
/// local date and time without an offset, `2027-03-13T02:30`, read in `tz`. The preview lists
/// instants after the returned one.
pub fn parse_from(from: Option<&str>, tz: &str) -> Result<DateTime<Utc>, String> {
    let Some(text) = from.map(str::trim) else {
        return Ok(Utc::now());
    };
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    let zone: chrono_tz::Tz = tz
        .parse()
        .map_err(|_| format!("--tz '{tz}' is not an IANA time zone such as Europe/Berlin"))?;
    let local = if let Ok(date) = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        // Included: start just before midnight.
        date.and_hms_opt(0, 0, 0).map(|t| (t, true))
    } else {
        [
            "%Y-%m-%dT%H:%M:%S",
            "%Y-%m-%dT%H:%M",
            "%Y-%m-%d %H:%M:%S",
            "%Y-%m-%d %H:%M",
        ]
        .iter()
        .find_map(|f| chrono::NaiveDateTime::parse_from_str(text, f).ok())
        .map(|t| (t, false))
    };
    let Some((local, inclusive)) = local else {
        return Err(format!(
            "--from '{text}' is neither a date (2027-03-13, midnight in --tz), a local time \
             (2027-03-13T02:30, in --tz) nor an RFC 3339 instant (2026-10-31T00:00:00Z)"
        ));
    };
    // A local time a DST change skips starts at the first instant after the gap; one it
    // repeats, at its first occurrence.
    let mut probe = local;
    let at = loop {
        if let Some(t) = probe.and_local_timezone(zone).earliest() {
            break t.with_timezone(&Utc);
        }
        probe += chrono::Duration::minutes(1);
        if probe - local > chrono::Duration::hours(3) {
            return Err(format!("--from '{text}' does not exist in {tz}"));
        }
    };
    Ok(if inclusive {
        at - chrono::Duration::milliseconds(1)
    } else {
        at
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_takes_instants_dates_and_local_times() {
        let utc = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        assert_eq!(
            parse_from(Some("2026-10-31T00:00:00Z"), "Europe/Berlin").unwrap(),
            utc("2026-10-31T00:00:00Z")
        );
        // A date is its midnight in --tz, included.
        let from = parse_from(Some("2027-03-13"), "America/New_York").unwrap();
        assert_eq!(from, utc("2027-03-13T04:59:59.999Z"));
        let first = next("0 0 * * *", "America/New_York", 1, from).unwrap();
        assert_eq!(first[0].0, "2027-03-13T05:00:00Z");
        // The next midnight, still in EST (the change is at 02:00 on the 14th).
        let two = next("0 0 * * *", "America/New_York", 2, from).unwrap();
        assert_eq!(two[1].0, "2027-03-14T05:00:00Z");
        // A local time in --tz.
        assert_eq!(
            parse_from(Some("2027-03-13T09:30"), "Europe/Berlin").unwrap(),
            utc("2027-03-13T08:30:00Z")
        );
        // Skipped by DST (02:30 on 2027-03-28 in Berlin): the first instant after the gap.
        assert_eq!(
            parse_from(Some("2027-03-28T02:30"), "Europe/Berlin").unwrap(),
            utc("2027-03-28T01:00:00Z")
        );
        let err = parse_from(Some("next tuesday"), "UTC").unwrap_err();
        assert!(err.contains("--from 'next tuesday'"), "{err}");
        assert!(parse_from(Some("2027-03-13"), "Mars/Base").is_err());
    }
}
