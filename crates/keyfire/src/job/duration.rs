//! Durations as users write them (`30s`, `1.5h`, `1h 30m`): one grammar for the REST API, the
//! CLI and the configuration file, stated as [`DURATION_PATTERN`] in the OpenAPI document and
//! parsed by [`parse_duration`], which accepts exactly the strings the pattern matches (only a
//! value past [`Duration::MAX`] is refused besides, as too large).

use std::time::Duration;

/// The units, each with its length in nanoseconds (a month is 30.44 days, a year 365.25 days).
const UNITS: &[(&[&str], u128)] = &[
    (&["nanos", "nsec", "ns"], 1),
    (&["usec", "us", "µs"], 1_000),
    (&["millis", "msec", "ms"], 1_000_000),
    (&["seconds", "second", "secs", "sec", "s"], NS_PER_S),
    (&["minutes", "minute", "mins", "min", "m"], 60 * NS_PER_S),
    (&["hours", "hour", "hrs", "hr", "h"], 3_600 * NS_PER_S),
    (&["days", "day", "d"], 86_400 * NS_PER_S),
    (&["weeks", "week", "wks", "wk", "w"], 604_800 * NS_PER_S),
    (&["months", "month", "M"], 2_630_016 * NS_PER_S),
    (&["years", "year", "yrs", "yr", "y"], 31_557_600 * NS_PER_S),
];

const NS_PER_S: u128 = 1_000_000_000;

/// The duration syntax, as a regular expression (ECMA-262, as JSON Schema reads it; the same in
/// Rust's and Python's dialects): `0`, or numbers (a fraction allowed) each followed by a unit,
/// such as `30s`, `1.5h`, `1h30m` or `1h 30m`. Plain spaces (U+0020) may stand before and after
/// the whole, between a number and its unit and between the parts; no other whitespace.
pub const DURATION_PATTERN: &str = "^ *(0 *|([0-9]+(\\.[0-9]+)? *(nanos|nsec|ns|usec|us|µs|millis|msec|ms|seconds|second|secs|sec|s|minutes|minute|mins|min|m|hours|hour|hrs|hr|h|days|day|d|weeks|week|wks|wk|w|months|month|M|years|year|yrs|yr|y) *)+)$";

/// Parse a duration written as [`DURATION_PATTERN`] says (`30s`, `250ms`, `1.5h`, `1h 30m`).
///
/// Fractions are exact to the nanosecond (`1.001h` is 3,603.6 s; what falls below a
/// nanosecond is dropped). The error says what is wrong in words a user can act on.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let not = |why: &str| format!("'{text}' is not a duration such as 30s, 1.5h or 1h 30m ({why})");
    let s = text.trim_matches(' ');
    if s.is_empty() {
        return Err(not("it is empty"));
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = s;
    let mut total: u128 = 0;
    let too_large = || format!("'{text}' is too large a duration");
    while !rest.is_empty() {
        let (whole, after) = split_digits(rest);
        if whole.is_empty() {
            return Err(not(&format!(
                "a number must come first, not {:?}",
                first_char(rest)
            )));
        }
        let mut fraction = "";
        rest = after;
        if let Some(r) = rest.strip_prefix('.') {
            (fraction, rest) = split_digits(r);
            if fraction.is_empty() {
                return Err(not("a '.' must be followed by digits"));
            }
        }
        rest = rest.trim_start_matches(' ');
        let end = rest
            .find(|c: char| !(c.is_ascii_alphabetic() || c == 'µ'))
            .unwrap_or(rest.len());
        let (unit, after) = rest.split_at(end);
        let Some(ns) = unit_ns(unit) else {
            return Err(if unit.is_empty() {
                not(&format!(
                    "a unit must follow {whole}, as in {whole}s or {whole}ms"
                ))
            } else {
                not(&format!(
                    "unknown unit '{unit}': use ns, us, ms, s, m, h, d, w, M or y (or their \
                     longer names)"
                ))
            });
        };
        let part = whole_ns(whole, ns)
            .and_then(|w| w.checked_add(fraction_ns(fraction, ns)))
            .ok_or_else(too_large)?;
        total = total.checked_add(part).ok_or_else(too_large)?;
        rest = after.trim_start_matches(' ');
        if let Some(c) = rest.chars().next()
            && !c.is_ascii_digit()
        {
            return Err(not(&format!("{c:?} cannot follow a unit")));
        }
    }
    let secs = u64::try_from(total / NS_PER_S).map_err(|_| too_large())?;
    Ok(Duration::new(secs, (total % NS_PER_S) as u32))
}

fn first_char(s: &str) -> char {
    s.chars().next().unwrap_or(' ')
}

/// The leading ASCII digits of `s`, and what follows.
fn split_digits(s: &str) -> (&str, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s.split_at(end)
}

fn unit_ns(unit: &str) -> Option<u128> {
    UNITS
        .iter()
        .find(|(names, _)| names.contains(&unit))
        .map(|(_, ns)| *ns)
}

/// `digits` of the unit `ns` long, in nanoseconds; None past u128.
fn whole_ns(digits: &str, ns: u128) -> Option<u128> {
    let mut n: u128 = 0;
    for d in digits.bytes() {
        n = n.checked_mul(10)?.checked_add(u128::from(d - b'0'))?;
    }
    n.checked_mul(ns)
}

/// The fraction `0.<digits>` of the unit `ns` long, in whole nanoseconds (rounded down). Digits
/// past the 20th are worth less than a nanosecond of any unit (a year is 3.2e16 ns) and are
/// dropped; 20 digits times a year's nanoseconds fits u128.
fn fraction_ns(digits: &str, ns: u128) -> u128 {
    let digits = &digits[..digits.len().min(20)];
    let mut numerator: u128 = 0;
    let mut denominator: u128 = 1;
    for d in digits.bytes() {
        numerator = numerator * 10 + u128::from(d - b'0');
        denominator *= 10;
    }
    numerator * ns / denominator
}

/// `#[serde(with = "keyfire::job::duration_serde")]`: a [`Duration`] read by
/// [`parse_duration`] and written as `humantime` formats it (`1h 30m`), which reads back.
pub mod duration_serde {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Write `d` as `1h 30m 5s`.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&humantime::format_duration(*d))
    }

    /// Read a duration string.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        super::parse_duration(&text).map_err(serde::de::Error::custom)
    }

    /// The same for an `Option<Duration>` (`null` or absent is `None`, with `#[serde(default)]`).
    pub mod option {
        use std::time::Duration;

        use serde::{Deserialize, Deserializer, Serializer};

        /// Write `Some(d)` as `1h 30m`, `None` as null.
        pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => s.collect_str(&humantime::format_duration(*d)),
                None => s.serialize_none(),
            }
        }

        /// Read an optional duration string.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            Option::<String>::deserialize(d)?
                .map(|t| super::super::parse_duration(&t).map_err(serde::de::Error::custom))
                .transpose()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Duration {
        parse_duration(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    #[test]
    fn reads_the_documented_forms() {
        let s = Duration::from_secs;
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok(" 0 "), Duration::ZERO);
        assert_eq!(ok("30s"), s(30));
        assert_eq!(ok("1h 30m"), s(5_400));
        assert_eq!(ok("1h30m"), s(5_400));
        assert_eq!(ok("1.5h"), s(5_400));
        assert_eq!(ok("10 ms"), Duration::from_millis(10));
        assert_eq!(ok("  5m  "), s(300));
        assert_eq!(ok("2days"), s(172_800));
        assert_eq!(ok("1µs"), Duration::from_micros(1));
        assert_eq!(ok("1M"), s(2_630_016));
        assert_eq!(ok("1y"), s(31_557_600));
        assert_eq!(ok("0s"), Duration::ZERO);
        assert_eq!(ok("007s"), s(7));
        assert_eq!(ok("1hour 12min 5s"), s(4_325));
    }

    #[test]
    fn fractions_are_exact_to_the_nanosecond() {
        // humantime refused each of these (a fraction not a whole number of its unit's
        // smallest step), though the pattern matches them.
        assert_eq!(ok("1.001h"), Duration::from_millis(3_603_600));
        assert_eq!(ok("1.5ns"), Duration::from_nanos(1));
        assert_eq!(ok("0.0001us"), Duration::ZERO);
        assert_eq!(ok("1.0000000001s"), Duration::from_secs(1));
        assert_eq!(
            ok("0.123456789012345678901234567890s"),
            Duration::from_nanos(123_456_789)
        );
        assert_eq!(ok("2.50m"), Duration::from_secs(150));
    }

    #[test]
    fn refuses_what_the_pattern_refuses() {
        // Whitespace other than plain spaces, and spaces inside a number: humantime took
        // these, the pattern does not.
        for bad in [
            "1 0s",
            "1. 5h",
            "1 .5h",
            "\t30s",
            "30s\n",
            "30s\u{1c}",
            "30s\u{a0}",
            "\u{feff}30s",
            "1h\t30m",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        for bad in [
            "",
            " ",
            "s",
            "5",
            "1.s",
            ".5s",
            "-1s",
            "+1s",
            "1h,2m",
            "5 parsecs",
            "soon",
            "0x10s",
            "1e3s",
            "00",
            "0 0",
            "1..5s",
            "1.5.5s",
            "1hh",
            "1 h m",
            "30S",
            "1μs",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn too_large_is_said() {
        let e = parse_duration("99999999999999999999999999999999999999999s").unwrap_err();
        assert!(e.contains("too large"), "{e}");
        let e = parse_duration("18446744073709551616s").unwrap_err();
        assert!(e.contains("too large"), "{e}");
        assert_eq!(ok("18446744073709551615s"), Duration::from_secs(u64::MAX));
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let e = parse_duration("5").unwrap_err();
        assert!(e.contains("a unit must follow 5"), "{e}");
        let e = parse_duration("5 parsecs").unwrap_err();
        assert!(e.contains("unknown unit 'parsecs'"), "{e}");
        let e = parse_duration("1 0s").unwrap_err();
        assert!(e.contains("a unit must follow 1"), "{e}");
    }

    #[test]
    fn settings_read_the_same_grammar() {
        // The configuration file's and the environment's durations go through the same parser
        // as the REST API's and the CLI's.
        #[derive(serde::Deserialize, serde::Serialize)]
        struct Settings {
            #[serde(with = "duration_serde")]
            every: Duration,
            #[serde(default, with = "duration_serde::option")]
            ttr: Option<Duration>,
        }
        let read = |v: serde_json::Value| serde_json::from_value::<Settings>(v);
        let s = read(serde_json::json!({"every": "1.001h", "ttr": "90s"})).unwrap();
        assert_eq!(s.every, Duration::from_millis(3_603_600));
        assert_eq!(s.ttr, Some(Duration::from_secs(90)));
        assert_eq!(read(serde_json::json!({"every": "0"})).unwrap().ttr, None);
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            serde_json::json!({"every": "1h 3s 600ms", "ttr": "1m 30s"})
        );
        for bad in ["1 0s", "\t30s", "5"] {
            let e = read(serde_json::json!({"every": bad})).err().unwrap();
            assert!(e.to_string().contains("is not a duration"), "{e}");
            assert!(read(serde_json::json!({"every": "1s", "ttr": bad})).is_err());
        }
    }

    #[test]
    fn what_humantime_writes_reads_back() {
        for d in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_millis(1_500),
            Duration::from_secs(5_400),
            Duration::new(31_557_600 * 3 + 2_630_016 + 86_400 * 2 + 61, 1_001_001),
            Duration::MAX,
        ] {
            let text = humantime::format_duration(d).to_string();
            assert_eq!(ok(&text), d, "{text}");
        }
    }
}
