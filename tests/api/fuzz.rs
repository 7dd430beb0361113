//! Malformed JSON, huge bodies, bad cron strings and unknown zones thrown at the
//! API: never a 5xx, and a refused request writes nothing.

use axum::http::Method;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::json;

use crate::common::Api;

#[test]
fn random_input_gets_a_4xx_before_any_write() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = rt.block_on(Api::with(|s| s.api.max_body_bytes = 4096));
    rt.block_on(api.put("/v1/jobs/base", json!({"every": "1h", "handler": "log"})));
    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });

    // Arbitrary bytes (sometimes past the body limit) as a job or a task.
    let bodies = (
        proptest::collection::vec(any::<u8>(), 0..6000),
        any::<bool>(),
    );
    runner
        .run(&bodies, |(bytes, task)| {
            rt.block_on(async {
                let before = api.snapshot().await;
                let (m, uri) = if task {
                    (Method::POST, "/v1/tasks")
                } else {
                    (Method::PUT, "/v1/jobs/fz")
                };
                let a = api.raw(m, uri, bytes).await;
                prop_assert!(a.status.is_client_error(), "{} {:#}", a.status, a.body);
                prop_assert_eq!(api.snapshot().await, before);
                Ok(())
            })
        })
        .unwrap();

    // Well-formed JSON with random cron expressions and zones: 2xx or 422, never 5xx.
    let specs = ("[ -~]{0,40}", "[ -~]{0,30}");
    runner
        .run(&specs, |(cron, tz)| {
            rt.block_on(async {
                let before = api.snapshot().await;
                let a = api
                    .put(
                        "/v1/jobs/fz",
                        json!({"cron": cron, "tz": tz, "handler": "log"}),
                    )
                    .await;
                prop_assert!(!a.status.is_server_error(), "{} {:#}", a.status, a.body);
                if a.status.is_client_error() {
                    prop_assert_eq!(a.status.as_u16(), 422);
                    prop_assert!(["cron", "tz"].contains(&a.field()), "{:#}", a.body);
                    prop_assert_eq!(api.snapshot().await, before);
                } else {
                    api.delete("/v1/jobs/fz").await;
                }
                Ok(())
            })
        })
        .unwrap();
}

/// The server's settings file, fuzzed: any mix of sections and keys loads or is refused with
/// words, never a panic.
mod settings_files_fuzz {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    fn runner(cases: u32) -> TestRunner {
        TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        })
    }

    fn toml_value() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            any::<bool>().prop_map(|b| b.to_string()),
            "[ -~&&[^\"\\\\]]{0,16}".prop_map(|s| format!("\"{s}\"")),
            prop::sample::select(vec![
                "\"1s\"",
                "\"0s\"",
                "\"myhost:8080\"",
                "\"0.0.0.0:1\"",
                "\"cluster\"",
                "[]",
                "[\"*\"]",
                "{}",
                "\"redis://127.0.0.1:1\"",
                "\"[::1]:8080\"",
            ])
            .prop_map(str::to_string),
        ]
    }

    #[test]
    fn settings_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.toml");
        let section = prop::sample::select(vec![
            "redis",
            "node",
            "api",
            "log",
            "limits",
            "handlers.http",
            "handlers.command",
            "bogus",
        ]);
        let key = prop::sample::select(vec![
            "url",
            "prefix",
            "mode",
            "listen",
            "token",
            "max_body_bytes",
            "enabled",
            "heartbeat_interval",
            "node_ttl",
            "sweep_interval",
            "lease",
            "level",
            "format",
            "allowed_hosts",
            "allowed_programs",
            "timeout",
            "max_concurrent_runs",
            "shards",
            "nodes",
            "x",
        ]);
        let line = (section, key, toml_value());
        runner(256)
            .run(&prop::collection::vec(line, 0..6), |lines| {
                let mut text = String::new();
                for (section, key, value) in lines {
                    text.push_str(&format!("[{section}]\n{key} = {value}\n"));
                }
                std::fs::write(&path, &text).unwrap();
                // Settings load or are refused with words; a repeated section is a TOML error.
                if let Err(e) =
                    keyfire_server::settings::ServerSettings::load_from(Some(&path), Vec::new())
                {
                    prop_assert!(!e.to_string().is_empty(), "{text}");
                }
                Ok(())
            })
            .unwrap();
    }
}
