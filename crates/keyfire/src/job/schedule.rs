//! When a job fires: cron in an IANA zone, a fixed rate, or one instant.

use std::str::FromStr;

use chrono::{TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

/// A validated schedule. All instants are ms since the Unix epoch (UTC).
#[derive(Debug, Clone)]
pub enum Schedule {
    /// A cron expression evaluated in a time zone, with Vixie-cron DST behaviour (croner 4).
    Cron {
        /// The expression as written.
        expr: String,
        /// The parsed expression.
        cron: Box<Cron>,
        /// The zone the expression is read in.
        tz: Tz,
    },
    /// Every `interval_ms`, at `anchor_ms + k * interval_ms`.
    Every {
        /// The period.
        interval_ms: i64,
        /// The phase: `start_at`, or the job's creation instant.
        anchor_ms: i64,
        /// Whether the anchor itself is a firing (true when it is `start_at`).
        fire_at_anchor: bool,
    },
    /// Once, at an instant.
    Once {
        /// The instant.
        at_ms: i64,
    },
}

/// Parse a cron expression: 5 fields, 6 with seconds, or an `@hourly`-style macro.
pub(super) fn parse_cron(expr: &str) -> Result<Cron, String> {
    let fields = expr.split_whitespace().count();
    if !expr.trim_start().starts_with('@') && !(5..=6).contains(&fields) {
        return Err(format!(
            "expected 5 fields (6 with seconds) or a macro like @hourly, got {fields}"
        ));
    }
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| e.to_string())
}

/// Parse an IANA zone name such as `Europe/Berlin`.
pub(super) fn parse_tz(name: &str) -> Result<Tz, String> {
    Tz::from_str(name).map_err(|_| format!("unknown time zone '{name}'"))
}

impl Schedule {
    /// The first instant strictly after `after_ms`, if any.
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        match self {
            Schedule::Cron { cron, tz, .. } => {
                let start = tz.timestamp_millis_opt(after_ms).single()?;
                let next = cron.find_next_occurrence(&start, false).ok()?;
                let ms = next.with_timezone(&Utc).timestamp_millis();
                // croner works in whole seconds; a sub-second `after` must still be strictly before.
                if ms > after_ms {
                    Some(ms)
                } else {
                    let bumped = tz.timestamp_millis_opt(ms).single()?;
                    let next = cron.find_next_occurrence(&bumped, false).ok()?;
                    Some(next.with_timezone(&Utc).timestamp_millis())
                }
            }
            Schedule::Every {
                interval_ms,
                anchor_ms,
                fire_at_anchor,
            } => {
                if after_ms < *anchor_ms {
                    return Some(if *fire_at_anchor {
                        *anchor_ms
                    } else {
                        anchor_ms + interval_ms
                    });
                }
                let k = (after_ms - anchor_ms) / interval_ms + 1;
                Some(anchor_ms + k * interval_ms)
            }
            Schedule::Once { at_ms } => (*at_ms > after_ms).then_some(*at_ms),
        }
    }

    /// Whether this schedule fires once only.
    pub fn is_once(&self) -> bool {
        matches!(self, Schedule::Once { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn cron(expr: &str, tz: &str) -> Schedule {
        Schedule::Cron {
            expr: expr.into(),
            cron: Box::new(parse_cron(expr).unwrap()),
            tz: parse_tz(tz).unwrap(),
        }
    }

    fn local(tz: &str, y: i32, mo: u32, d: u32, h: u32, mi: u32) -> i64 {
        let tz = parse_tz(tz).unwrap();
        let naive = NaiveDate::from_ymd_opt(y, mo, d)
            .unwrap()
            .and_hms_opt(h, mi, 0)
            .unwrap();
        tz.from_local_datetime(&naive)
            .earliest()
            .unwrap()
            .timestamp_millis()
    }

    fn firings(s: &Schedule, from: i64, until: i64) -> Vec<i64> {
        let mut out = vec![];
        let mut t = from;
        while let Some(n) = s.next_after(t) {
            if n > until {
                break;
            }
            out.push(n);
            t = n;
        }
        out
    }

    fn utc(ms: i64) -> String {
        Utc.timestamp_millis_opt(ms)
            .unwrap()
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    }

    #[test]
    fn accepts_five_six_fields_and_macros() {
        for ok in [
            "* * * * *",
            "*/5 * * * * *",
            "@hourly",
            "@daily",
            "0 0 L * *",
            "0 9 * * 1#2",
        ] {
            parse_cron(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in ["", "* * * *", "61 * * * *", "* * * * * * *", "nonsense"] {
            assert!(parse_cron(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn seconds_field_fires_every_second_strictly_after() {
        let s = cron("* * * * * *", "UTC");
        assert_eq!(s.next_after(1_000), Some(2_000));
        assert_eq!(s.next_after(1_500), Some(2_000));
        assert_eq!(s.next_after(1_999), Some(2_000));
    }

    // DESIGN.md's measured cases for croner 4, America/New_York 2026: the gap day and the repeat.
    #[test]
    fn new_york_spring_forward_fires_fixed_time_once_after_the_gap() {
        let s = cron("30 2 * * *", "America/New_York");
        let day = firings(
            &s,
            local("America/New_York", 2026, 3, 7, 12, 0),
            local("America/New_York", 2026, 3, 9, 12, 0),
        );
        // 03-07 02:30 EST = 07:30Z; 03-08 has no 02:30: fires at 03:00 EDT = 07:00Z; 03-09 02:30 EDT.
        let got: Vec<_> = day.iter().map(|&t| utc(t)).collect();
        assert_eq!(
            got,
            ["2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"],
            "gap-day firing"
        );
    }

    #[test]
    fn new_york_fall_back_fires_fixed_time_once_and_hourly_at_each_real_hour() {
        let s = cron("30 1 * * *", "America/New_York");
        let got: Vec<_> = firings(
            &s,
            local("America/New_York", 2026, 10, 31, 12, 0),
            local("America/New_York", 2026, 11, 1, 12, 0),
        )
        .into_iter()
        .map(utc)
        .collect();
        assert_eq!(got, ["2026-11-01T05:30:00Z"], "01:30 once, in EDT");

        let hourly = cron("0 * * * *", "America/New_York");
        let got = firings(
            &hourly,
            local("America/New_York", 2026, 11, 1, 0, 0),
            local("America/New_York", 2026, 11, 1, 3, 0),
        );
        // 01:00 EDT (05Z), 01:00 EST (06Z), 02:00 EST (07Z), 03:00 EST (08Z): each real hour once.
        let got: Vec<_> = got.into_iter().map(utc).collect();
        assert_eq!(
            got,
            [
                "2026-11-01T05:00:00Z",
                "2026-11-01T06:00:00Z",
                "2026-11-01T07:00:00Z",
                "2026-11-01T08:00:00Z"
            ]
        );
    }

    /// The documented DST behaviour (README "Daylight saving time"), in three zones, one with
    /// a 30-minute shift: a fixed-time job in the spring-forward gap fires once, at the first
    /// valid instant after it; a fixed-time job in the fall-back repeat fires once, at the
    /// first occurrence; a wildcard-hour job fires at each real instant that matches.
    #[test]
    fn dst_gap_and_repeat_in_berlin_and_lord_howe() {
        type Case<'a> = (&'a str, &'a str, (i32, u32, u32), &'a [&'a str]);
        let cases: &[Case] = &[
            // Berlin, 2026-03-29: 02:00 CET -> 03:00 CEST.
            (
                "Europe/Berlin",
                "30 2 * * *",
                (2026, 3, 29),
                &["2026-03-29T01:00:00Z"],
            ),
            (
                "Europe/Berlin",
                "0 * * * *",
                (2026, 3, 29),
                // 01:00 CET, then 03:00 CEST: 02:00 does not exist that day.
                &["2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z"],
            ),
            // Berlin, 2026-10-25: 03:00 CEST -> 02:00 CET; 02:00-02:59 happens twice.
            (
                "Europe/Berlin",
                "30 2 * * *",
                (2026, 10, 25),
                &["2026-10-25T00:30:00Z"],
            ),
            (
                "Europe/Berlin",
                "0 * * * *",
                (2026, 10, 25),
                &[
                    "2026-10-24T23:00:00Z",
                    "2026-10-25T00:00:00Z",
                    "2026-10-25T01:00:00Z",
                    "2026-10-25T02:00:00Z",
                ],
            ),
            // Lord Howe, 2026-10-04: 02:00 +10:30 -> 02:30 +11:00 (a 30-minute gap).
            (
                "Australia/Lord_Howe",
                "15 2 * * *",
                (2026, 10, 4),
                &["2026-10-03T15:30:00Z"],
            ),
            (
                "Australia/Lord_Howe",
                "30 2 * * *",
                (2026, 10, 4),
                &["2026-10-03T15:30:00Z"],
            ),
            (
                "Australia/Lord_Howe",
                "0 * * * *",
                (2026, 10, 4),
                &["2026-10-03T14:30:00Z", "2026-10-03T16:00:00Z"],
            ),
            // Lord Howe, 2026-04-05: 02:00 +11:00 -> 01:30 +10:30; 01:30-01:59 happens twice.
            (
                "Australia/Lord_Howe",
                "30 1 * * *",
                (2026, 4, 5),
                &["2026-04-04T14:30:00Z"],
            ),
            (
                "Australia/Lord_Howe",
                "30 2 * * *",
                (2026, 4, 5),
                &["2026-04-04T16:00:00Z"],
            ),
            (
                "Australia/Lord_Howe",
                "0 * * * *",
                (2026, 4, 5),
                &[
                    "2026-04-04T14:00:00Z",
                    "2026-04-04T15:30:00Z",
                    "2026-04-04T16:30:00Z",
                ],
            ),
        ];
        for (tz, expr, (y, m, d), want) in cases {
            // Local 00:30 to 03:30 of the change day covers each change and its hour around.
            let from = local(tz, *y, *m, *d, 0, 30);
            let to = local(tz, *y, *m, *d, 3, 30);
            let got: Vec<String> = firings(&cron(expr, tz), from, to)
                .into_iter()
                .map(utc)
                .collect();
            assert_eq!(&got, want, "{tz} {expr} on {y}-{m}-{d}");
        }
    }

    #[test]
    fn every_keeps_its_phase() {
        let s = Schedule::Every {
            interval_ms: 1_000,
            anchor_ms: 10_500,
            fire_at_anchor: false,
        };
        assert_eq!(s.next_after(0), Some(11_500));
        assert_eq!(s.next_after(11_500), Some(12_500));
        assert_eq!(s.next_after(99_999), Some(100_500));
        let s = Schedule::Every {
            interval_ms: 1_000,
            anchor_ms: 10_500,
            fire_at_anchor: true,
        };
        assert_eq!(s.next_after(0), Some(10_500));
    }

    #[test]
    fn once_fires_only_after() {
        let s = Schedule::Once { at_ms: 5 };
        assert_eq!(s.next_after(4), Some(5));
        assert_eq!(s.next_after(5), None);
    }
}
