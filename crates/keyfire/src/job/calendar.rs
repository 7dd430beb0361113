//! Calendars: named lists of dates, date ranges and cron expressions, read in a time zone,
//! whose instants the jobs that name them in `exclude` skip.

use chrono::{NaiveDate, TimeZone};
use chrono_tz::Tz;
use croner::Cron;
use serde::{Deserialize, Serialize};

use super::schedule::{parse_cron, parse_tz};
use super::spec::validate_id;
use super::validation::ValidationError;

/// Most entries (dates, ranges and expressions together) a calendar holds.
pub const MAX_CALENDAR_ENTRIES: usize = 1_000;

/// A calendar as a user declares it (REST, TOML, CLI, Rust) and as keyfire stores it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CalendarSpec {
    /// Its name, as jobs give it in `exclude`: `[A-Za-z0-9][A-Za-z0-9_.-]*`, at most 128
    /// bytes. In `PUT /v1/calendars/{name}` it may be left out (the path gives it).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(example = "de-holidays"))]
    pub name: String,
    /// IANA zone its dates and expressions are read in (default `UTC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(example = "Europe/Berlin"))]
    pub tz: Option<String>,
    /// Whole days excluded, as `YYYY-MM-DD` in the calendar's zone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(example = json!(["2026-12-25", "2026-12-26"])))]
    pub dates: Vec<String>,
    /// Ranges of whole days excluded, both ends included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<DateRange>,
    /// Cron expressions (5 fields, 6 with seconds): an instant they match, in the calendar's
    /// zone, is excluded (`* * 2-3 * * SUN`: every instant of 02:00-03:59 on Sundays).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(example = json!(["* * 2-3 * * SUN"])))]
    pub cron: Vec<String>,
}

/// A range of whole days, both ends included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DateRange {
    /// The first day (`YYYY-MM-DD`).
    #[cfg_attr(feature = "openapi", schema(example = "2026-12-24"))]
    pub from: String,
    /// The last day (`YYYY-MM-DD`), not before `from`.
    #[cfg_attr(feature = "openapi", schema(example = "2026-12-31"))]
    pub to: String,
}

/// A validated calendar.
#[derive(Debug, Clone)]
pub struct Calendar {
    /// The spec it was built from.
    pub spec: CalendarSpec,
    tz: Tz,
    days: Vec<(NaiveDate, NaiveDate)>,
    crons: Vec<Cron>,
}

fn parse_day(field: &str, text: &str) -> Result<NaiveDate, ValidationError> {
    NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| {
        ValidationError::new(field, format!("'{text}' is not a date such as 2026-12-25"))
    })
}

impl CalendarSpec {
    /// A calendar in a zone, excluding nothing yet.
    pub fn new(name: impl Into<String>, tz: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            tz: Some(tz.into()),
            dates: Vec::new(),
            ranges: Vec::new(),
            cron: Vec::new(),
        }
    }

    /// Exclude a day (`YYYY-MM-DD`).
    pub fn date(mut self, day: impl Into<String>) -> Self {
        self.dates.push(day.into());
        self
    }

    /// Exclude the days `from` to `to`, both included.
    pub fn range(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        self.ranges.push(DateRange {
            from: from.into(),
            to: to.into(),
        });
        self
    }

    /// Exclude the instants a cron expression matches.
    pub fn cron(mut self, expr: impl Into<String>) -> Self {
        self.cron.push(expr.into());
        self
    }

    /// Check every field; the error names the first bad one (`dates[1]`, `ranges[0].to`, …).
    pub fn validate(self) -> Result<Calendar, ValidationError> {
        validate_id(&self.name).map_err(|e| ValidationError::new("name", e.message))?;
        let tz = parse_tz(self.tz.as_deref().unwrap_or("UTC"))
            .map_err(|m| ValidationError::new("tz", m))?;
        let entries = self.dates.len() + self.ranges.len() + self.cron.len();
        if entries > MAX_CALENDAR_ENTRIES {
            return Err(ValidationError::new(
                "dates",
                format!(
                    "a calendar holds at most {MAX_CALENDAR_ENTRIES} dates, ranges and expressions; got {entries}"
                ),
            ));
        }
        let mut days = Vec::with_capacity(self.dates.len() + self.ranges.len());
        for (i, d) in self.dates.iter().enumerate() {
            let day = parse_day(&format!("dates[{i}]"), d)?;
            days.push((day, day));
        }
        for (i, r) in self.ranges.iter().enumerate() {
            let from = parse_day(&format!("ranges[{i}].from"), &r.from)?;
            let to = parse_day(&format!("ranges[{i}].to"), &r.to)?;
            if to < from {
                return Err(ValidationError::new(
                    format!("ranges[{i}].to"),
                    format!("{} is before from ({})", r.to, r.from),
                ));
            }
            days.push((from, to));
        }
        let mut crons = Vec::with_capacity(self.cron.len());
        for (i, expr) in self.cron.iter().enumerate() {
            if expr.trim_start().starts_with('@') {
                return Err(ValidationError::new(
                    format!("cron[{i}]"),
                    "give fields (such as * * 2-3 * * SUN), not a macro: a macro matches one instant",
                ));
            }
            crons
                .push(parse_cron(expr).map_err(|m| ValidationError::new(format!("cron[{i}]"), m))?);
        }
        Ok(Calendar {
            spec: self,
            tz,
            days,
            crons,
        })
    }
}

impl Calendar {
    /// The calendar's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Whether the instant `ms` is excluded: its day (in the calendar's zone) is one of its
    /// dates or ranges, or one of its expressions matches it (to the second).
    pub fn excludes(&self, ms: i64) -> bool {
        let Some(local) = self.tz.timestamp_millis_opt(ms).single() else {
            return false;
        };
        let day = local.date_naive();
        if self
            .days
            .iter()
            .any(|(from, to)| (*from..=*to).contains(&day))
        {
            return true;
        }
        self.crons
            .iter()
            .any(|c| c.is_time_matching(&local).unwrap_or(false))
    }
}

/// Check a job's `exclude`: calendar names, each once. Whether they exist is the writer's
/// check (it needs the store).
pub(super) fn validate_exclude(names: &[String]) -> Result<(), ValidationError> {
    for (i, name) in names.iter().enumerate() {
        validate_id(name).map_err(|e| ValidationError::new(format!("exclude[{i}]"), e.message))?;
        if names[..i].contains(name) {
            return Err(ValidationError::new(
                format!("exclude[{i}]"),
                format!("'{name}' is named twice"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn utc(s: &str) -> i64 {
        s.parse::<chrono::DateTime<Utc>>()
            .unwrap()
            .timestamp_millis()
    }

    #[test]
    fn days_are_read_in_the_calendars_zone() {
        let c = CalendarSpec::new("de", "Europe/Berlin")
            .date("2026-03-29")
            .validate()
            .unwrap();
        // 2026-03-29 in Berlin runs from 2026-03-28T23:00Z to 2026-03-29T22:00Z (23 hours).
        assert!(!c.excludes(utc("2026-03-28T22:59:59Z")));
        assert!(c.excludes(utc("2026-03-28T23:00:00Z")));
        assert!(c.excludes(utc("2026-03-29T21:59:59Z")));
        assert!(!c.excludes(utc("2026-03-29T22:00:00Z")));
    }

    #[test]
    fn ranges_and_expressions_exclude_too() {
        let c = CalendarSpec::new("ops", "UTC")
            .range("2026-12-24", "2026-12-26")
            .cron("* * 2-3 * * SUN")
            .validate()
            .unwrap();
        assert!(c.excludes(utc("2026-12-24T00:00:00Z")));
        assert!(c.excludes(utc("2026-12-26T23:59:59Z")));
        assert!(!c.excludes(utc("2026-12-27T01:59:59Z")));
        // 2026-12-27 is a Sunday.
        assert!(c.excludes(utc("2026-12-27T02:00:00Z")));
        assert!(c.excludes(utc("2026-12-27T03:59:59Z")));
        assert!(!c.excludes(utc("2026-12-27T04:00:00Z")));
    }

    #[test]
    fn bad_fields_are_named() {
        let field = |c: CalendarSpec| c.validate().unwrap_err().field;
        assert_eq!(field(CalendarSpec::new("a b", "UTC")), "name");
        assert_eq!(field(CalendarSpec::new("a", "Mars/Base")), "tz");
        assert_eq!(
            field(CalendarSpec::new("a", "UTC").date("2026-13-01")),
            "dates[0]"
        );
        assert_eq!(
            field(CalendarSpec::new("a", "UTC").range("2026-01-02", "2026-01-01")),
            "ranges[0].to"
        );
        assert_eq!(
            field(
                CalendarSpec::new("a", "UTC")
                    .cron("* * * * *")
                    .cron("61 * * * *")
            ),
            "cron[1]"
        );
        assert_eq!(
            field(CalendarSpec::new("a", "UTC").cron("@daily")),
            "cron[0]"
        );
        assert_eq!(
            validate_exclude(&["a".into(), "a".into()])
                .unwrap_err()
                .field,
            "exclude[1]"
        );
    }
}
