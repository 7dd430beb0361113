//! What happens around a run: retries, timeouts, misfires, overlaps.

use serde::{Deserialize, Serialize};

use super::validation::{ValidationError, duration_ms};

/// Retry settings as declared (`retry = { max_attempts = 5, backoff = "exponential", … }`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RetrySpec {
    /// Attempts in all, the first included (default 3). 1 disables retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// `fixed` or `exponential` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<String>,
    /// The fixed interval, or the first delay of an exponential backoff (default `1s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// Cap of an exponential backoff (default `5m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_interval: Option<String>,
    /// Randomise exponential delays (between half and all of each), so failing jobs do not
    /// retry in lockstep (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<bool>,
}

/// How retry delays grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backoff {
    /// The same interval every time.
    Fixed,
    /// Doubling from the interval up to the cap.
    Exponential,
}

/// A validated retry policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all.
    pub max_attempts: u32,
    /// Growth of the delay.
    pub backoff: Backoff,
    /// First / fixed delay in ms.
    pub interval_ms: i64,
    /// Cap in ms.
    pub max_interval_ms: i64,
    /// Randomise exponential delays.
    pub jitter: bool,
}

/// Default attempts in all: a crash or a transient failure gets a second and third chance.
pub(super) const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// Most attempts a policy may ask for.
pub const MAX_ATTEMPTS_LIMIT: u32 = 1_000;

/// The names `retry.backoff` takes.
pub const BACKOFFS: &[&str] = &["fixed", "exponential"];
/// The names [`MisfirePolicy::parse`] takes.
pub const MISFIRE_POLICIES: &[&str] = &["fire_once", "skip", "catch_up"];
/// The names [`OverlapPolicy::parse`] takes.
pub const OVERLAP_POLICIES: &[&str] = &["allow", "forbid", "replace"];

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            backoff: Backoff::Exponential,
            interval_ms: 1_000,
            max_interval_ms: 300_000,
            jitter: true,
        }
    }
}

impl RetryPolicy {
    /// Validate a declared policy; errors name `retry.<field>`.
    pub fn from_spec(spec: Option<&RetrySpec>) -> Result<Self, ValidationError> {
        let mut p = Self::default();
        let Some(s) = spec else { return Ok(p) };
        if let Some(n) = s.max_attempts {
            if n == 0 || n > MAX_ATTEMPTS_LIMIT {
                return Err(ValidationError::new(
                    "retry.max_attempts",
                    format!("must be between 1 and {MAX_ATTEMPTS_LIMIT}"),
                ));
            }
            p.max_attempts = n;
        }
        if let Some(b) = &s.backoff {
            p.backoff = match b.as_str() {
                "fixed" => Backoff::Fixed,
                "exponential" => Backoff::Exponential,
                other => {
                    return Err(ValidationError::new(
                        "retry.backoff",
                        format!("'{other}' is not one of fixed, exponential"),
                    ));
                }
            };
        }
        if let Some(i) = &s.interval {
            p.interval_ms = duration_ms("retry.interval", i)?;
            if p.interval_ms <= 0 {
                return Err(ValidationError::new(
                    "retry.interval",
                    "must be greater than zero",
                ));
            }
        }
        if let Some(m) = &s.max_interval {
            p.max_interval_ms = duration_ms("retry.max_interval", m)?;
        }
        if p.max_interval_ms < p.interval_ms {
            if s.max_interval.is_some() {
                return Err(ValidationError::new(
                    "retry.max_interval",
                    "must not be shorter than retry.interval",
                ));
            }
            p.max_interval_ms = p.interval_ms;
        }
        if let Some(j) = s.jitter {
            p.jitter = j;
        }
        Ok(p)
    }

    /// Delay before the attempt after failed attempt `attempt` (1-based). `unit` is a random
    /// number in [0, 1) used for jitter.
    pub fn delay_ms(&self, attempt: u32, unit: f64) -> i64 {
        match self.backoff {
            Backoff::Fixed => self.interval_ms,
            Backoff::Exponential => {
                let shift = attempt.saturating_sub(1).min(40);
                let d = self
                    .interval_ms
                    .saturating_mul(1_i64 << shift)
                    .min(self.max_interval_ms);
                if self.jitter {
                    d / 2 + ((d - d / 2) as f64 * unit.clamp(0.0, 1.0)) as i64
                } else {
                    d
                }
            }
        }
    }
}

/// What to do with a firing found later than the job's misfire tolerance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MisfirePolicy {
    /// Run once now; the other late firings are recorded as missed.
    #[default]
    FireOnce,
    /// Run none of the late firings; record them as missed.
    Skip,
    /// Run each late firing, oldest first, up to the catch-up limit.
    CatchUp,
}

impl MisfirePolicy {
    /// Parse `fire_once`, `skip` or `catch_up`; errors name `misfire`.
    pub fn parse(s: &str) -> Result<Self, ValidationError> {
        match s {
            "fire_once" => Ok(Self::FireOnce),
            "skip" => Ok(Self::Skip),
            "catch_up" => Ok(Self::CatchUp),
            other => Err(ValidationError::new(
                "misfire",
                format!("'{other}' is not one of fire_once, skip, catch_up"),
            )),
        }
    }
}

/// What to do when a firing comes while the job's previous run still runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OverlapPolicy {
    /// Run both.
    #[default]
    Allow,
    /// Skip the new firing (recorded as skipped).
    Forbid,
    /// Cancel the running one, run the new one.
    Replace,
}

impl OverlapPolicy {
    /// Parse `allow`, `forbid` or `replace`; errors name `overlap`.
    pub fn parse(s: &str) -> Result<Self, ValidationError> {
        match s {
            "allow" => Ok(Self::Allow),
            "forbid" => Ok(Self::Forbid),
            "replace" => Ok(Self::Replace),
            other => Err(ValidationError::new(
                "overlap",
                format!("'{other}' is not one of allow, forbid, replace"),
            )),
        }
    }

    /// The name the claim scripts use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Forbid => "forbid",
            Self::Replace => "replace",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_backoff_doubles_to_the_cap_with_jitter_in_the_upper_half() {
        let p = RetryPolicy {
            max_attempts: 10,
            backoff: Backoff::Exponential,
            interval_ms: 100,
            max_interval_ms: 1_000,
            jitter: false,
        };
        let d: Vec<i64> = (1..=6).map(|a| p.delay_ms(a, 0.0)).collect();
        assert_eq!(d, [100, 200, 400, 800, 1_000, 1_000]);
        let j = RetryPolicy { jitter: true, ..p };
        assert_eq!(j.delay_ms(3, 0.0), 200);
        assert_eq!(j.delay_ms(3, 0.999_999), 399);
        assert_eq!(j.delay_ms(60, 0.5), 750, "large attempts do not overflow");
    }

    #[test]
    fn bad_values_name_their_field() {
        let bad = |s: RetrySpec| RetryPolicy::from_spec(Some(&s)).unwrap_err().field;
        assert_eq!(
            bad(RetrySpec {
                max_attempts: Some(0),
                ..Default::default()
            }),
            "retry.max_attempts"
        );
        assert_eq!(
            bad(RetrySpec {
                backoff: Some("linear".into()),
                ..Default::default()
            }),
            "retry.backoff"
        );
        assert_eq!(
            bad(RetrySpec {
                interval: Some("0s".into()),
                ..Default::default()
            }),
            "retry.interval"
        );
        assert_eq!(
            bad(RetrySpec {
                interval: Some("10s".into()),
                max_interval: Some("1s".into()),
                ..Default::default()
            }),
            "retry.max_interval"
        );
        assert_eq!(MisfirePolicy::parse("later").unwrap_err().field, "misfire");
        assert_eq!(OverlapPolicy::parse("queue").unwrap_err().field, "overlap");
    }
}
