//! Bad input is refused with the field named, and nothing is written (G7).

use chrono::Utc;
use keyfire::{Error, JobSpec};
use keyfire_testkit::world::World;
use serde_json::json;

/// Every kind of bad input is refused with the field it concerns, and writes nothing.
#[tokio::test]
async fn each_kind_of_bad_input_is_refused_by_name_before_any_write() {
    let mut w = World::new().await;
    w.settings.limits.max_params_bytes = 1_024;
    let client = w.client().await;
    let before = w.keys().await;
    let now = Utc::now();
    let cases = [
        (JobSpec::cron("j", "61 * * * *", "rec"), "cron"),
        (JobSpec::cron("j", "* * *", "rec"), "cron"),
        (
            JobSpec::cron("j", "0 9 * * *", "rec").tz("Europe/Atlantis"),
            "tz",
        ),
        (
            JobSpec::every("j", "1s", "rec")
                .window(Some(now), Some(now - chrono::Duration::seconds(1))),
            "end_at",
        ),
        (JobSpec::every("j", "0s", "rec"), "every"),
        (JobSpec::every("j", "1s", "no-such-handler"), "handler"),
        (
            JobSpec::every("j", "1s", "rec").params(json!({"blob": "x".repeat(2_000)})),
            "params",
        ),
        (JobSpec::every("j k", "1s", "rec"), "id"),
        (JobSpec::after("j", "-5s", "rec"), "after"),
    ];
    for (spec, field) in cases {
        match client.upsert(spec.clone()).await {
            Err(Error::Invalid(e)) => {
                assert_eq!(e.field, field, "{spec:?} → {e}");
                assert!(!e.message.is_empty());
            }
            other => panic!("{spec:?} was not refused on {field}: {other:?}"),
        }
        assert_eq!(w.keys().await, before, "{field}: something was written");
    }
    // Updating an existing job with a bad spec leaves the stored one as it was.
    let good = client
        .upsert(JobSpec::every("j", "1h", "rec"))
        .await
        .unwrap();
    let err = client
        .upsert(JobSpec::cron("j", "bad", "rec"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Invalid(ref e) if e.field == "cron"),
        "{err}"
    );
    assert_eq!(client.get("j").await.unwrap(), good);
}

/// Bad dedup declarations are refused naming the field, on enqueue and bulk enqueue, and
/// write nothing: a window of 0 or longer than a day, an empty or oversized key, a key and
/// content at once, an id given with dedup, dedup on a recurring job or on an upsert.
#[tokio::test]
async fn bad_dedup_input_is_refused_by_name_before_any_write() {
    use keyfire::job::DedupSpec;
    let w = World::new().await;
    let client = w.client().await;
    let before = w.keys().await;
    let task = |d: DedupSpec| JobSpec::after("", "1h", "rec").dedup(d);
    let mut both = DedupSpec::key("k", "1m");
    both.content = true;
    let mut no_window = DedupSpec::key("k", "1m");
    no_window.window = None;
    let cases = [
        (task(DedupSpec::key("k", "0s")), "dedup.window"),
        (task(DedupSpec::key("k", "0ms")), "dedup.window"),
        (task(DedupSpec::key("k", "24h 1s")), "dedup.window"),
        (task(DedupSpec::content("25h")), "dedup.window"),
        (task(DedupSpec::key("k", "-1s")), "dedup.window"),
        (task(no_window), "dedup.window"),
        (task(DedupSpec::key("", "1m")), "dedup.key"),
        (task(DedupSpec::key("k".repeat(257), "1m")), "dedup.key"),
        (task(both), "dedup.content"),
        (
            JobSpec::after("mine", "1h", "rec").dedup(DedupSpec::key("k", "1m")),
            "id",
        ),
    ];
    for (spec, field) in cases {
        for bulk in [false, true] {
            let got = if bulk {
                client.enqueue_many(vec![spec.clone()]).await.map(|_| ())
            } else {
                client.enqueue(spec.clone()).await.map(|_| ())
            };
            let want = if bulk {
                format!("tasks[0].{field}")
            } else {
                field.to_string()
            };
            match got {
                Err(Error::Invalid(e)) => assert_eq!(e.field, want, "{spec:?} → {e}"),
                other => panic!("{spec:?} was not refused on {want}: {other:?}"),
            }
            assert_eq!(w.keys().await, before, "{want}: something was written");
        }
    }
    // A job written by id is idempotent by its id: dedup is refused there, named.
    for spec in [
        JobSpec::every("r", "1m", "rec").dedup(DedupSpec::key("k", "1m")),
        JobSpec::after("t", "1m", "rec").dedup(DedupSpec::key("k", "1m")),
    ] {
        match client.upsert(spec.clone()).await {
            Err(Error::Invalid(e)) => assert_eq!(e.field, "dedup", "{e}"),
            other => panic!("{spec:?}: {other:?}"),
        }
        assert!(matches!(
            client.validate(&spec).await,
            Err(Error::Invalid(ref e)) if e.field == "dedup"
        ));
    }
    assert_eq!(w.keys().await, before, "something was written");
    // The edges are accepted: a window of 1 ms and of exactly a day, a key of 256 characters.
    for d in [
        DedupSpec::key("k", "1ms"),
        DedupSpec::key("k".repeat(256), "24h"),
    ] {
        client.enqueue(task(d)).await.unwrap();
    }
}

/// Malformed JSON and unknown fields in a spec are refused by name.
#[test]
fn unknown_and_malformed_fields_are_refused() {
    let e = serde_json::from_value::<JobSpec>(
        json!({"id": "a", "handler": "log", "every": "1s", "evry": 1}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("evry"), "{e}");
    serde_json::from_value::<JobSpec>(json!({"id": "a", "handler": "log", "at": "tomorrow"}))
        .expect_err("`at` must be an RFC 3339 instant");
    serde_json::from_str::<JobSpec>(r#"{"id": "a", "handler": "log", "every": "1s""#)
        .expect_err("truncated JSON");
}

/// Fuzzing, bounded so it runs in CI: cron expressions and zones, job specs as JSON, and
/// settings files. Nothing may panic; every refusal names its field; what is accepted is
/// usable. Whatever this finds becomes a case of `fuzz_regressions` below.
mod fuzz {
    use keyfire::job::{JobSpec, Validation};
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    use serde_json::{Value, json};

    fn runner(cases: u32) -> TestRunner {
        TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        })
    }

    const NOW: i64 = 1_790_000_000_000;

    fn validation() -> Validation<'static> {
        Validation {
            now_ms: NOW,
            created_ms: NOW,
            known_handler: Some(&|_: &str| true),
            max_params_bytes: 64 * 1024,
        }
    }

    /// One cron field: well-formed and malformed pieces mixed.
    fn cron_field() -> impl Strategy<Value = String> {
        let atoms = prop::sample::select(vec![
            "*",
            "?",
            "L",
            "LW",
            "15W",
            "31W",
            "5L",
            "MON#2",
            "1#6",
            "1-5",
            "5-2",
            "*/7",
            "*/0",
            "0",
            "7",
            "23",
            "29",
            "30",
            "31",
            "59",
            "60",
            "32",
            "13",
            "JAN",
            "FEB",
            "foo",
            "1,2",
            "-",
            "/",
            ",",
            "2/3",
            "SUN-SAT",
            "99999999999999999999",
            "L-3",
            "#",
            "W",
        ]);
        prop::collection::vec(atoms, 1..3).prop_map(|v| v.join(","))
    }

    fn cron_expr() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::collection::vec(cron_field(), 5..=6).prop_map(|v| v.join(" ")),
            "[ -~]{0,30}",
            prop::sample::select(vec!["@hourly", "@daily", "@yearly", "@never", "@"])
                .prop_map(str::to_string),
        ]
    }

    fn zone() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "UTC",
                "Europe/Berlin",
                "America/New_York",
                "Australia/Lord_Howe",
                "Asia/Kolkata",
                "Pacific/Chatham",
            ])
            .prop_map(str::to_string),
            "[ -~]{0,20}",
        ]
    }

    #[test]
    fn cron_and_zone_parsing() {
        runner(512)
            .run(&(cron_expr(), zone()), |(expr, tz)| {
                match JobSpec::cron("f", &expr, "h")
                    .tz(&tz)
                    .validate(&validation())
                {
                    Ok(job) => {
                        if let Some(next) = job.next_after(NOW) {
                            prop_assert!(next > NOW, "{expr} in {tz}: {next}");
                        }
                    }
                    Err(e) => {
                        prop_assert!(["cron", "tz"].contains(&e.field.as_str()), "{e}");
                        prop_assert!(!e.message.is_empty());
                        prop_assert!(!e.message.contains("Component error"), "{expr}: {e}");
                    }
                }
                Ok(())
            })
            .unwrap();
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>().prop_map(|n| json!(n)),
            "[ -~]{0,12}".prop_map(Value::String),
            prop::sample::select(vec![
                "1h",
                "0s",
                "-5s",
                "30s",
                "2026-01-01T00:00:00Z",
                "fixed",
                "exponential",
                "skip",
                "catch_up",
                "forbid",
                "* * * * *",
                "0 0 31 2 *",
                "Europe/Berlin",
            ])
            .prop_map(|s| Value::String(s.into())),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// A job spec: JobSpec's own fields with random values, sometimes an unknown one.
    fn spec_json() -> impl Strategy<Value = Value> {
        let fields = prop::sample::subsequence(
            vec![
                "id",
                "cron",
                "tz",
                "every",
                "at",
                "after",
                "start_at",
                "end_at",
                "handler",
                "params",
                "misfire_tolerance",
                "misfire",
                "catch_up_limit",
                "overlap",
                "timeout",
                "retry",
                "dedup",
                "bogus",
            ],
            0..10,
        );
        (fields, prop::collection::vec(json_value(), 10)).prop_map(|(names, values)| {
            let mut map = serde_json::Map::new();
            map.insert("id".into(), json!("j"));
            map.insert("handler".into(), json!("h"));
            for (name, value) in names.into_iter().zip(values) {
                map.insert(name.to_string(), value);
            }
            Value::Object(map)
        })
    }

    #[test]
    fn job_spec_json() {
        runner(512)
            .run(&spec_json(), |body| {
                let Ok(spec) = serde_json::from_value::<JobSpec>(body.clone()) else {
                    return Ok(());
                };
                match spec.validate(&validation()) {
                    Ok(job) => {
                        prop_assert!(
                            job.spec.params.is_null() || job.spec.params.is_object(),
                            "{body}"
                        );
                        let _ = job.next_after(NOW);
                        let _ = job.first_firing(NOW);
                    }
                    Err(e) => prop_assert!(!e.field.is_empty(), "{body}: {e}"),
                }
                Ok(())
            })
            .unwrap();
    }
}

#[test]
fn fuzz_regressions() {
    let v = keyfire::job::Validation {
        now_ms: 1_790_000_000_000,
        created_ms: 1_790_000_000_000,
        known_handler: Some(&|_: &str| true),
        max_params_bytes: 1024,
    };
    for (expr, field) in [
        ("0 0 99999999999999999999 * *", "cron"),
        ("0 0 L-3 * *", "cron"),
        ("0 0 * * #", "cron"),
        ("0 0 W * *", "cron"),
        ("@", "cron"),
    ] {
        let e = JobSpec::cron("f", expr, "h").validate(&v).unwrap_err();
        assert_eq!(e.field, field, "{expr}: {e}");
    }
}
