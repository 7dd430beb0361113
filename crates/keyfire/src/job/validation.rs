//! What validation reports: a bad field and what is wrong with it. A leaf of the job model,
//! so that the spec and its policies both use it without depending on each other.

use super::duration::parse_duration;

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

pub(crate) fn duration_ms(field: &str, s: &str) -> Result<i64, ValidationError> {
    let d = parse_duration(s).map_err(|m| ValidationError::new(field, m))?;
    i64::try_from(d.as_millis()).map_err(|_| ValidationError::new(field, "too large"))
}
