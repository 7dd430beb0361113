//! The document's rules accept exactly what the server accepts. Each mismatch the contract
//! tests found (Schemathesis with other seeds and more examples, see docs/api.md) is pinned
//! here both ways, and the duration pattern is checked against the parser on generated
//! strings: what the pattern matches the parser takes, and what it does not the parser
//! refuses.

use axum::http::StatusCode;
use proptest::prelude::*;
use regex::Regex;
use serde_json::json;

use crate::common::Api;
use crate::openapi::{doc, field, fits, path_param};
use keyfire::job::{DURATION_PATTERN, parse_duration};

fn duration_re() -> Regex {
    Regex::new(DURATION_PATTERN).unwrap()
}

/// Taken by the parser, or refused only as too large (a bound, like every field's own).
fn parses(s: &str) -> bool {
    match parse_duration(s) {
        Ok(_) => true,
        Err(e) => e.contains("too large"),
    }
}

/// The pattern matched these (`\s` is wider in ECMA's and Python's dialects than what the
/// parser trimmed), or the parser took them (spaces inside a number): both refuse them now.
const REFUSED: &[&str] = &[
    "\t30s",
    "30s\n",
    "\u{b}0",
    "0\r",
    "\u{c}1h",
    "1h\t30m",
    "30s\u{a0}",
    "\u{feff}30s",
    "30s\u{1c}",
    "1 0s",
    "1. 5h",
    "1 .5h",
    "0 0",
    "\n0\n",
];

/// The pattern matched these and the parser refused them (a fraction that is not a whole
/// number of nanoseconds, or of seconds from hours up): both take them now.
const TAKEN: &[&str] = &[
    "1.001h",
    "1.5ns",
    "0.0001us",
    "2.70601 years",
    "1.0000000001s",
    "17.547000947255616828ms",
    "44.80873years",
    "0",
    "  0  ",
    "1h 30m",
    "10 ms",
];

#[test]
fn pinned_durations_agree_with_the_parser() {
    let doc = doc();
    let re = duration_re();
    assert_eq!(
        field(&doc, "AddTask", "ttr")["pattern"],
        DURATION_PATTERN,
        "the document states the parser's pattern"
    );
    for s in REFUSED {
        assert!(!re.is_match(s), "the pattern takes {s:?}");
        assert!(parse_duration(s).is_err(), "the parser takes {s:?}");
    }
    for s in TAKEN {
        assert!(re.is_match(s), "the pattern refuses {s:?}");
        assert!(parse_duration(s).is_ok(), "the parser refuses {s:?}");
    }
    // A value past the largest duration matches the pattern and is refused as too large: the
    // bound, said as such.
    let huge = "99999999999999999999999y";
    assert!(re.is_match(huge));
    let e = parse_duration(huge).unwrap_err();
    assert!(e.contains("too large"), "{e}");
}

/// Pieces that make durations and near misses: numbers, fractions, units, plain spaces and
/// other whitespace, and characters no duration holds.
const PIECES: &[&str] = &[
    "0", "1", "7", "12", "00", ".", ".5", "5", " ", "  ", "\t", "\n", "s", "ms", "m", "h", "M",
    "y", "d", "w", "µs", "us", "ns", "sec", "mins", "hours", "x", "-", "+", ",", "S", "μs",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn the_parser_takes_exactly_what_the_pattern_matches(
        parts in prop::collection::vec(prop::sample::select(PIECES), 0..7)
    ) {
        let s = parts.concat();
        prop_assert_eq!(duration_re().is_match(&s), parses(&s), "{:?}", s);
    }

    #[test]
    fn what_the_pattern_generates_the_parser_takes(
        s in proptest::string::string_regex(
            DURATION_PATTERN.trim_start_matches('^').trim_end_matches('$')
        ).unwrap()
    ) {
        prop_assert!(parses(&s), "{:?}: {:?}", s, parse_duration(&s));
    }
}

/// The routes that read a duration take what the pattern takes and refuse, naming the field,
/// what it refuses.
#[tokio::test]
async fn routes_read_durations_as_the_pattern_says() {
    let api = Api::new().await;
    // Each was refused before although the document allowed it.
    let a = api
        .post(
            "/v1/topics/t/tasks",
            Some(json!({"payload": 1, "ttr": "90.5s"})),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
    let id = a.body["id"].as_str().unwrap();
    let task = api.get(&format!("/v1/topics/t/tasks/{id}")).await;
    assert_eq!(task.body["ttr"], "1m 30s 500ms", "{:#}", task.body);
    let a = api
        .post(
            "/v1/jobs",
            Some(json!({"id": "every-fraction", "every": "1.001h", "handler": "log"})),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
    assert_eq!(a.body["spec"]["every"], "1.001h", "{:#}", a.body);
    let a = api.post("/v1/topics/t/pop?wait=0.5s", None).await;
    assert!(a.status.is_success(), "{:#}", a.body);

    // Each was taken before although the document refused it.
    let a = api
        .post(
            "/v1/topics/t/tasks",
            Some(json!({"payload": 1, "delay": "1 0s"})),
        )
        .await;
    a.assert_error(422, "invalid");
    assert_eq!(a.field(), "delay");
    let a = api
        .post(
            "/v1/jobs",
            Some(json!({"id": "tabbed", "every": "\t1h", "handler": "log"})),
        )
        .await;
    a.assert_error(422, "invalid");
    assert_eq!(a.field(), "every");
    let a = api.post("/v1/topics/t/pop?wait=1%200s", None).await;
    a.assert_error(400, "bad_query");
    assert_eq!(a.field(), "wait");
    // Nothing was added by the refused requests.
    api.get("/v1/jobs/tabbed")
        .await
        .assert_error(404, "not_found");
}

/// A limit key and a dedup key as long as the document allows are taken, one longer is refused,
/// through the routes; a dedup key's bound counts characters, as JSON Schema's `maxLength`
/// does (it counted bytes, so a key of 256 `é` the document allows was refused).
#[tokio::test]
async fn keys_as_long_as_the_document_allows_are_taken() {
    let api = Api::new().await;
    let doc = doc();
    let path_key = path_param(&doc, "/v1/limits/{key}", "put", "key");
    let max = path_key["maxLength"].as_u64().unwrap() as usize;
    assert_eq!(max, keyfire::job::MAX_LIMIT_KEY_LEN);
    for (n, ok) in [(max, true), (max + 1, false)] {
        let key = "k".repeat(n);
        assert_eq!(fits(&path_key, &key), ok);
        let a = api
            .put(&format!("/v1/limits/{key}"), json!({"rate": 5}))
            .await;
        if ok {
            assert_eq!(a.status, StatusCode::OK, "{n}: {:#}", a.body);
        } else {
            a.assert_error(422, "invalid");
        }
        let a = api
            .post(
                "/v1/jobs",
                Some(json!({"id": format!("limited-{n}"), "every": "1h", "handler": "log", "limit_key": key})),
            )
            .await;
        if ok {
            assert_eq!(a.status, StatusCode::CREATED, "{n}: {:#}", a.body);
        } else {
            a.assert_error(422, "invalid");
            assert_eq!(a.field(), "limit_key");
        }
    }

    let dedup = field(&doc, "DedupSpec", "key");
    let max = dedup["maxLength"].as_u64().unwrap() as usize;
    assert_eq!(max, keyfire::job::MAX_DEDUP_KEY_LEN);
    for (key, ok) in [
        ("é".repeat(max), true),
        ("€".repeat(max), true),
        ("a".repeat(max), true),
        ("é".repeat(max + 1), false),
    ] {
        assert_eq!(fits(&dedup, &key), ok);
        let a = api
            .post(
                "/v1/tasks",
                Some(json!({"after": "1h", "handler": "log", "dedup": {"key": key, "window": "1.5h"}})),
            )
            .await;
        if ok {
            assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
        } else {
            a.assert_error(422, "invalid");
            assert_eq!(a.field(), "dedup.key");
        }
    }
}

/// Whether the document's `traceparent` rule (its pattern, and neither id all zeros) takes `s`.
fn traceparent_fits(rule: &serde_json::Value, s: &str) -> bool {
    let re = |p: &serde_json::Value| Regex::new(p.as_str().unwrap()).unwrap();
    re(&rule["pattern"]).is_match(s)
        && rule["allOf"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| !re(&n["not"]["pattern"]).is_match(s))
}

/// The document stated no rule for `traceparent`, which the server checks as W3C gives it:
/// any string was schema-valid and most were refused. The rule it states now and the
/// validator take the same strings.
#[tokio::test]
async fn traceparent_rule_agrees_with_the_validator() {
    let api = Api::new().await;
    let doc = doc();
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let span = "00f067aa0ba902b7";
    let zeros = |n: usize| "0".repeat(n);
    let samples = [
        (format!("00-{trace}-{span}-01"), true),
        (format!("00-{trace}-{span}-00"), true),
        (format!("01-{trace}-{span}-01"), true),
        (format!("01-{trace}-{span}-01-what-comes-later"), true),
        (format!("fe-{trace}-{span}-01-"), true),
        (format!("ff-{trace}-{span}-01"), false),
        (format!("00-{trace}-{span}-01-more"), false),
        (format!("01-{trace}-{span}-01more"), false),
        (format!("01-{trace}-{span}-01- space"), false),
        (format!("00-{}-{span}-01", zeros(32)), false),
        (format!("00-{trace}-{}-01", zeros(16)), false),
        (format!("00-{}-{span}-01", trace.to_uppercase()), false),
        (format!(" 00-{trace}-{span}-01"), false),
        (format!("00-{trace}-{span}-01\n"), false),
        (format!("00-{trace}-{span}-1"), false),
        (String::new(), false),
        ("\u{1e}".to_string(), false),
    ];
    for schema in ["JobSpec", "JobSpecWithoutId", "TaskSpec"] {
        let rule = field(&doc, schema, "traceparent");
        for (s, ok) in &samples {
            assert_eq!(traceparent_fits(&rule, s), *ok, "{schema}: {s:?}");
        }
    }
    for (n, (s, ok)) in samples.iter().enumerate() {
        let a = api
            .post(
                "/v1/jobs",
                Some(json!({"id": format!("traced-{n}"), "every": "1h", "handler": "log", "traceparent": s})),
            )
            .await;
        if *ok {
            assert_eq!(a.status, StatusCode::CREATED, "{s:?}: {:#}", a.body);
        } else {
            a.assert_error(422, "invalid");
            assert_eq!(a.field(), "traceparent", "{s:?}");
        }
    }
}

/// A one-shot task with a `dedup` takes no id (keyfire picks it): the document said nothing
/// of it, so an id beside a dedup was schema-valid and refused. It states it now, as the
/// server has it: an empty or null id is no id.
#[tokio::test]
async fn a_task_id_beside_dedup_is_refused_as_the_document_says() {
    let api = Api::new().await;
    let doc = doc();
    let rules = doc["components"]["schemas"]["TaskSpec"]["allOf"]
        .as_array()
        .unwrap()
        .clone();
    let rule = rules
        .iter()
        .map(|r| &r["not"])
        .find(|n| n["required"] == json!(["id", "dedup"]))
        .expect("TaskSpec states the id/dedup rule");
    assert_eq!(
        rule["properties"]["id"],
        json!({"type": "string", "minLength": 1})
    );
    assert_eq!(rule["properties"]["dedup"], json!({"type": "object"}));
    for (n, (id, ok)) in [
        (json!("given"), false),
        (json!(""), true),
        (json!(null), true),
    ]
    .into_iter()
    .enumerate()
    {
        // The rule refuses a non-empty string id beside an object dedup.
        assert_eq!(id.as_str().is_some_and(|s| !s.is_empty()), !ok);
        let body = json!({"after": "1h", "handler": "log", "id": id, "dedup": {"key": format!("k{n}"), "window": "10m"}});
        let a = api.post("/v1/tasks", Some(body)).await;
        if ok {
            assert_eq!(a.status, StatusCode::CREATED, "{id}: {:#}", a.body);
        } else {
            a.assert_error(422, "invalid");
            assert_eq!(a.field(), "id");
        }
    }
    // Without dedup an id is taken.
    let a = api
        .post(
            "/v1/tasks",
            Some(json!({"after": "1h", "handler": "log", "id": "given"})),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
}

/// A bulk pause's `handler`: the document's pattern admits a character exactly when the
/// server's check does (Schemathesis found a trailing space the pattern admitted and the check
/// refused), over every character of the first planes the check treats apart and the BOM; and
/// the length bound counts characters on both sides.
#[test]
fn a_handler_selector_pattern_and_check_agree_on_every_character() {
    let d = doc();
    let rule = &d["components"]["schemas"]["JobSelection"]["properties"]["handler"];
    let re = Regex::new(rule["pattern"].as_str().unwrap()).unwrap();
    let checks = |s: &str| {
        keyfire::bulk::JobSelector::Handler(s.to_string())
            .check()
            .is_ok()
    };
    let mut differ = Vec::new();
    for c in (0u32..0x3100).chain([0xfeff]).filter_map(char::from_u32) {
        let s = format!("a{c}b");
        if re.is_match(&s) != checks(&s) {
            differ.push(format!("U+{:04X}", c as u32));
        }
    }
    assert!(differ.is_empty(), "pattern and check differ on {differ:?}");
    let max = rule["maxLength"].as_u64().unwrap() as usize;
    assert!(checks(&"é".repeat(max)));
    assert!(!checks(&"é".repeat(max + 1)));
}
