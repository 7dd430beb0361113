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
    let cron = CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| {
            // The parser's words ("Component error: Number out of bounds.") name neither the
            // field nor the value: say which, when the fields can be read.
            diagnose(expr).unwrap_or_else(|| {
                let words = e.to_string();
                let words = words
                    .strip_prefix("Component error: ")
                    .unwrap_or(&words)
                    .trim_end_matches('.');
                format!("'{expr}' is not a cron expression: {words}")
            })
        })?;
    if let Some(why) = never_fires(expr) {
        return Err(why);
    }
    Ok(cron)
}

/// A cron field: its name, its bounds, and the names it takes for its values.
struct Field {
    name: &'static str,
    lo: u64,
    hi: u64,
    /// Names for `lo`, `lo + 1`, … (month and day-of-week), with what to call them.
    names: &'static [&'static str],
    names_are: &'static str,
}

const MONTHS: &[&str] = &[
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAYS: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

const SECOND: Field = Field {
    name: "second",
    lo: 0,
    hi: 59,
    names: &[],
    names_are: "",
};
const MINUTE: Field = Field {
    name: "minute",
    ..SECOND
};
const HOUR: Field = Field {
    name: "hour",
    hi: 23,
    ..SECOND
};
const DAY_OF_MONTH: Field = Field {
    name: "day-of-month",
    lo: 1,
    hi: 31,
    ..SECOND
};
const MONTH: Field = Field {
    name: "month",
    lo: 1,
    hi: 12,
    names: MONTHS,
    names_are: " or a month name (JAN-DEC)",
};
const DAY_OF_WEEK: Field = Field {
    name: "day-of-week",
    lo: 0,
    hi: 7,
    names: DAYS,
    names_are: " or a day name (SUN-SAT)",
};

/// The fields of a 5- or 6-field expression, each with its text; `None` for a macro.
fn fields(expr: &str) -> Option<Vec<(&'static Field, &str)>> {
    let parts: Vec<&str> = expr.split_whitespace().collect();
    let layout: &[&'static Field] = match parts.len() {
        5 => &[&MINUTE, &HOUR, &DAY_OF_MONTH, &MONTH, &DAY_OF_WEEK],
        6 => &[&SECOND, &MINUTE, &HOUR, &DAY_OF_MONTH, &MONTH, &DAY_OF_WEEK],
        _ => return None,
    };
    Some(layout.iter().copied().zip(parts).collect())
}

impl Field {
    /// One value: a number within bounds, or a name.
    fn value(&self, token: &str) -> Result<u64, String> {
        if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
            let n = token.parse::<u64>().unwrap_or(u64::MAX);
            if n < self.lo || n > self.hi {
                return Err(format!(
                    "{}: {token} is outside {}\u{2013}{}",
                    self.name, self.lo, self.hi
                ));
            }
            return Ok(n);
        }
        if let Some(i) = self
            .names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(token))
        {
            return Ok(self.lo + i as u64);
        }
        Err(format!(
            "{}: '{token}' is not a number{}",
            self.name, self.names_are
        ))
    }

    /// The values a field's text selects, `Ok(None)` when it uses `L`, `W`, `#` or `?` (whose
    /// days depend on the month), or what is wrong with it.
    fn values(&self, text: &str) -> Result<Option<Vec<u64>>, String> {
        let mut out = Vec::new();
        let mut exact = true;
        for part in text.split(',').filter(|p| !p.is_empty()) {
            let (body, step) = match part.split_once('/') {
                Some((b, s)) => {
                    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(format!("{}: step '{s}' is not a number", self.name));
                    }
                    let step = s.parse::<u64>().unwrap_or(u64::MAX);
                    if step == 0 {
                        return Err(format!("{}: step 0 must be at least 1", self.name));
                    }
                    (b, Some(step))
                }
                None => (part, None),
            };
            let upper = body.to_ascii_uppercase();
            let (from, to) = if body == "*" || body == "?" {
                exact &= body == "*";
                (self.lo, self.hi)
            } else if self.name == "day-of-month"
                && (upper == "L" || upper == "LW" || upper.ends_with('W'))
            {
                exact = false;
                if let Some(day) = upper.strip_suffix('W').filter(|d| *d != "L") {
                    self.value(day)?;
                }
                continue;
            } else if self.name == "day-of-week" && (upper.contains('#') || upper.ends_with('L')) {
                exact = false;
                let (day, nth) = match upper.split_once('#') {
                    Some((d, n)) => (d, Some(n)),
                    None => (upper.trim_end_matches('L'), None),
                };
                if !day.is_empty() {
                    self.value(day)?;
                }
                if let Some(n) = nth
                    && n != "L"
                    && !matches!(n.parse::<u8>(), Ok(1..=5))
                {
                    return Err(format!("{}: #{n} is outside #1\u{2013}#5", self.name));
                }
                continue;
            } else {
                let ends: Vec<&str> = body.split('-').collect();
                match ends.as_slice() {
                    [one] => {
                        let v = self.value(one)?;
                        (v, if step.is_some() { self.hi } else { v })
                    }
                    [a, b] => {
                        let (from, to) = (self.value(a)?, self.value(b)?);
                        if from > to {
                            return Err(format!(
                                "{}: range {a}-{b} runs backwards (write it as two ranges, such as {a}-{},{}-{b})",
                                self.name, self.hi, self.lo
                            ));
                        }
                        (from, to)
                    }
                    _ => {
                        return Err(format!(
                            "{}: '{body}' is not a value or a range such as 1-5",
                            self.name
                        ));
                    }
                }
            };
            out.extend((from..=to).step_by(step.unwrap_or(1) as usize));
        }
        Ok(exact.then_some(out))
    }
}

/// Name the field and the value at fault in an expression the parser refused, if that can be
/// found (`day-of-month: 32 is outside 1–31`).
fn diagnose(expr: &str) -> Option<String> {
    fields(expr)?
        .into_iter()
        .find_map(|(field, text)| field.values(text).err())
}

/// Why an expression the parser took can never fire, if it cannot: its days of the month
/// exist in none of its months (`0 0 31 2 *`, `0 0 30 2 *`). A day-of-week other than `*`
/// makes it fire on those weekdays (either field may match), so only `*` is looked at.
fn never_fires(expr: &str) -> Option<String> {
    let fields = fields(expr)?;
    let n = fields.len();
    let (dom, month, dow) = (fields[n - 3].1, fields[n - 2].1, fields[n - 1].1);
    if dow != "*" && dow != "?" {
        return None;
    }
    let days = DAY_OF_MONTH.values(dom).ok()??;
    let months = MONTH.values(month).ok()??;
    let longest = |m: u64| match m {
        2 => 29,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    let first_day = *days.iter().min()?;
    if months.iter().any(|&m| first_day <= longest(m)) {
        return None;
    }
    let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    Some(format!(
        "'{expr}' never fires: day-of-month {} occurs in none of its months ({})",
        list(&days),
        list(&months)
    ))
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
                // The next whole second, when it matches: an every-second job's next firing
                // without croner's search (the firing path computes one per firing). Only
                // where clocks never change: elsewhere croner's daylight-saving rules may
                // skip a matching second (a fixed-time job runs once in a repeated hour).
                if matches!(tz, Tz::UTC | Tz::Etc__UTC) {
                    let second = after_ms.div_euclid(1000) * 1000 + 1000;
                    let at = tz.timestamp_millis_opt(second).single()?;
                    if cron.is_time_matching(&at).unwrap_or(false) {
                        return Some(second);
                    }
                }
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
    fn errors_name_the_field_and_the_value() {
        let err = |e: &str| parse_cron(e).unwrap_err();
        assert_eq!(err("0 0 32 * *"), "day-of-month: 32 is outside 1\u{2013}31");
        assert_eq!(err("61 * * * *"), "minute: 61 is outside 0\u{2013}59");
        assert_eq!(err("0 61 * * * *"), "minute: 61 is outside 0\u{2013}59");
        assert_eq!(err("60 * * * * *"), "second: 60 is outside 0\u{2013}59");
        assert_eq!(err("0 24 * * *"), "hour: 24 is outside 0\u{2013}23");
        assert_eq!(err("0 0 1 13 *"), "month: 13 is outside 1\u{2013}12");
        assert_eq!(err("0 0 0 * *"), "day-of-month: 0 is outside 1\u{2013}31");
        assert_eq!(err("0 0 * * 8"), "day-of-week: 8 is outside 0\u{2013}7");
        assert_eq!(
            err("0 0 * FOO *"),
            "month: 'FOO' is not a number or a month name (JAN-DEC)"
        );
        assert_eq!(err("*/0 * * * *"), "minute: step 0 must be at least 1");
        assert_eq!(
            err("0 0 * * 1#6"),
            "day-of-week: #6 is outside #1\u{2013}#5"
        );
        assert!(err("0 22-2 * * *").starts_with("hour: range 22-2 runs backwards"));
        assert!(err("1-2-3 * * * *").starts_with("minute: '1-2-3'"));
        assert_eq!(
            err("0 0 99999999999999999999 * *"),
            "day-of-month: 99999999999999999999 is outside 1\u{2013}31"
        );
    }

    #[test]
    fn a_cron_that_can_never_fire_is_refused() {
        for never in [
            "0 0 31 2 *",
            "0 0 30 2 *",
            "0 0 30,31 2 ?",
            "0 0 0 31 4,6,9,11 *",
            "0 0 31 FEB *",
        ] {
            let e = parse_cron(never).unwrap_err();
            assert!(e.contains("never fires"), "{never}: {e}");
        }
        // Rare is not never; a day-of-week makes either field match; L and W exist every month.
        for ok in [
            "0 0 29 2 *",
            "0 0 31 * *",
            "0 0 30 2 MON",
            "0 0 L 2 *",
            "0 0 30W 2 *",
            "0 0 31 1-2 *",
        ] {
            parse_cron(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
    }

    #[test]
    fn seconds_field_fires_every_second_strictly_after() {
        let s = cron("* * * * * *", "UTC");
        assert_eq!(s.next_after(1_000), Some(2_000));
        assert_eq!(s.next_after(1_500), Some(2_000));
        assert_eq!(s.next_after(1_999), Some(2_000));
    }

    #[test]
    fn the_next_second_shortcut_agrees_with_the_search() {
        // Instants stepped by uneven amounts (sub-second ones included) across a leap day,
        // month ends and a year end; each answer checked against croner's own search.
        let start = Utc
            .with_ymd_and_hms(2027, 12, 31, 23, 59, 50)
            .unwrap()
            .timestamp_millis();
        for expr in [
            "* * * * * *",
            "*/5 * * * * *",
            "0 * * * * *",
            "30 15 10 * * *",
            "* * * 29 2 *",
            "0 0 0 L * *",
            "* * * * * MON-FRI",
            "*/7 * * * *",
            "59 59 23 31 12 *",
            "* 0 0 1 1 *",
        ] {
            for zone in ["UTC", "Etc/UTC"] {
                let s = cron(expr, zone);
                let Schedule::Cron { cron: c, tz, .. } = &s else {
                    unreachable!()
                };
                let (mut t, mut seed) = (start, 7u64);
                for _ in 0..400 {
                    let from = tz.timestamp_millis_opt(t).single().unwrap();
                    let searched = c.find_next_occurrence(&from, false).unwrap();
                    let next = s.next_after(t).unwrap();
                    assert_eq!(
                        next,
                        searched.timestamp_millis(),
                        "{expr} in {zone} after {t}"
                    );
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    t = match seed >> 62 {
                        0 => next,
                        1 => next + (seed >> 40) as i64 % 1000,
                        2 => t + (seed >> 20) as i64 % 90_000_000,
                        _ => t + (seed >> 30) as i64 % 5_000_000_000,
                    };
                }
            }
        }
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
    fn new_york_fall_back_fires_the_repeated_hour_twice_only_for_hourly_jobs() {
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
