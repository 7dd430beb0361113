//! What validation reports: a bad field and what is wrong with it. A leaf of the job model,
//! so that the spec and its policies both use it without depending on each other.

use std::time::Duration;

/// A bad field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {field}: {message}")]
pub struct ValidationError {
    /// The field, as named in the input (`cron`, `tz`, `end_at`, …).
    pub field: String,
    /// What is wrong, in words a user can act on.
    pub message: String,
}

impl ValidationError {
    /// An error on `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// The duration syntax, as a regular expression: `0`, or numbers (a fraction allowed) each
/// followed by a unit, such as `30s`, `1.5h` or `1h 30m`. The REST API's OpenAPI document
/// states it; a test checks it against the parser (which also takes a few odd forms, such as
/// spaces inside a number, that no client needs).
pub const DURATION_PATTERN: &str = "^\\s*(0\\s*|([0-9]+(\\.[0-9]+)?\\s*(nanos|nsec|ns|usec|us|µs|millis|msec|ms|seconds|second|secs|sec|s|minutes|minute|mins|min|m|hours|hour|hrs|hr|h|days|day|d|weeks|week|wks|wk|w|months|month|M|years|year|yrs|yr|y)\\s*)+)$";

/// Parse a duration such as `30s`, `250ms`, `1h 30m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim()).map_err(|e| format!("'{s}' is not a duration ({e})"))
}

pub(crate) fn duration_ms(field: &str, s: &str) -> Result<i64, ValidationError> {
    let d = parse_duration(s).map_err(|m| ValidationError::new(field, m))?;
    i64::try_from(d.as_millis()).map_err(|_| ValidationError::new(field, "too large"))
}
