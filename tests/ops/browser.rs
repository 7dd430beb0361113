//! The dashboard in a real browser: a node serving the API (with a token) on a free port,
//! jobs created through the API (one with markup in its params and in its handler's error),
//! then `node tests/browser/dashboard.mjs`, which drives headless Chromium through
//! playwright-core: token, overview, jobs, search, pause with a confirmation, the job's runs,
//! dead letters and a replay, with no console error and no dialog.
//!
//! Needs `node` (>= 20), Chromium at /usr/bin/chromium (or `CHROMIUM`) and
//! `tests/browser/node_modules/playwright-core` (`npm ci` in tests/browser); `.ci/run` installs
//! them. Without them the test says why and passes, unless `KEYFIRE_REQUIRE_BROWSER=1` (set by
//! `.ci/run`) makes that a failure.
//!
//! Screenshots go to `$CARGO_TARGET_TMPDIR/dashboard-screenshots`, or to `docs/screenshots`
//! (the ones the README shows) with `KEYFIRE_UPDATE_SCREENSHOTS=1`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use keyfire::job::RetrySpec;
use keyfire::{Firing, HandlerError, JobSpec, Node};
use serde_json::{Value, json};

use crate::support::World;
use crate::support::wait::{self, at_least};

const TOKEN: &str = "dash-token";
/// Markup in the data: it must show as text, and never run.
const PAYLOAD: &str = "<script>alert(1)</script>";
const IMG: &str = "<img src=x onerror=\"window.__pwned=true;alert(2)\">";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn chromium() -> PathBuf {
    std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"))
}

/// Why the browser test cannot run here, if it cannot.
fn missing() -> Option<String> {
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success());
    let Some(node) = node else {
        return Some("`node` is not on PATH".into());
    };
    let version = String::from_utf8_lossy(&node.stdout).trim().to_string();
    let major: u32 = version
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < 20 {
        return Some(format!(
            "node {version} is older than 20 (playwright-core needs 20)"
        ));
    }
    if !chromium().exists() {
        return Some(format!(
            "{} is missing (apt-get install chromium)",
            chromium().display()
        ));
    }
    let pw = root().join("tests/browser/node_modules/playwright-core");
    if !pw.exists() {
        return Some(format!(
            "{} is missing (cd tests/browser && npm ci)",
            pw.display()
        ));
    }
    None
}

fn screenshot_dir() -> PathBuf {
    if std::env::var("KEYFIRE_UPDATE_SCREENSHOTS").is_ok_and(|v| v == "1") {
        root().join("docs/screenshots")
    } else {
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-screenshots")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_in_headless_chromium() {
    if let Some(why) = missing() {
        if std::env::var("KEYFIRE_REQUIRE_BROWSER").is_ok_and(|v| v == "1") {
            panic!("KEYFIRE_REQUIRE_BROWSER=1 but {why}");
        }
        eprintln!("SKIP dashboard_in_headless_chromium: {why}");
        return;
    }
    let mut w = World::new().await;
    w.settings.api.listen = "127.0.0.1:0".into();
    w.settings.api.token = TOKEN.into();
    // The default run checks that markup from the data shows as text everywhere; the docs'
    // screenshots run the same script over a realistic deployment (`keyfire dev`'s demo jobs
    // and a job whose upstream is down).
    let realistic = std::env::var("KEYFIRE_UPDATE_SCREENSHOTS").is_ok_and(|v| v == "1");
    let (job_id, text, topic) = if realistic {
        (
            "invoice-sync",
            "https://billing.internal/v1/invoices/sync",
            "emails",
        )
    } else {
        ("xss.job", PAYLOAD, "xss.topic")
    };
    let mut registry = w.registry();
    // Fails with its params in the error text, as a careless upstream would.
    registry.register("explode", |f: Firing| async move {
        Err::<(), _>(HandlerError::retry(format!(
            "upstream answered: {} {}",
            f.params["title"].as_str().unwrap_or_default(),
            f.params["html"].as_str().unwrap_or_default()
        )))
    });

    let mut settings = w.settings.clone();
    settings.node.id = "node-a".into();
    let served = keyfire_server::cli::serve::start(settings, registry.clone())
        .await
        .expect("serve");
    let mut settings = w.settings.clone();
    settings.node.id = "node-b".into();
    settings.api.enabled = false;
    let second = Node::new(settings.library(), registry.clone())
        .start()
        .await
        .unwrap();
    let base = format!("http://{}", served.api_addr().unwrap());

    // The jobs, through the API.
    let client = w.client().await.allow_handlers(registry.names());
    let mut xss = if realistic {
        JobSpec::every(job_id, "1s", "explode").params(json!({
            "title": "POST",
            "html": format!("{text}: 503 Service Unavailable"),
            "batch": 500
        }))
    } else {
        JobSpec::every(job_id, "1s", "explode")
            .params(json!({"title": PAYLOAD, "html": IMG, "note": "markup must show as text"}))
    };
    xss.retry = Some(RetrySpec {
        max_attempts: Some(1),
        ..RetrySpec::default()
    });
    crate::support::install_tls_provider();
    let http = reqwest::Client::new();
    for spec in [
        serde_json::to_value(&xss).unwrap(),
        json!({"id": "nightly-report", "cron": "30 2 * * *", "tz": "Europe/Berlin", "handler": "noop",
               "params": {"to": "ops@example.com"}}),
        json!({"id": "demo-cron-5s", "cron": "*/5 * * * * *", "handler": "noop"}),
        json!({"id": "demo-every-3s", "every": "3s", "handler": "noop"}),
        json!({"id": "demo-berlin-9am", "cron": "0 9 * * MON-FRI", "tz": "Europe/Berlin", "handler": "noop"}),
        json!({"id": "new-year", "at": "2027-01-01T00:00:00Z", "handler": "noop"}),
    ] {
        let resp = http
            .post(format!("{base}/v1/jobs"))
            .bearer_auth(TOKEN)
            .json(&spec)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201, "{}", resp.text().await.unwrap());
    }
    // Runs and dead letters to look at (recorded facts, not a sleep).
    wait::until(
        &format!("two dead letters of {job_id}"),
        Duration::from_secs(20),
        async || at_least(client.dead_letters(job_id, 10).await.unwrap().len(), 2),
    )
    .await;

    let shots = screenshot_dir();
    let started = Instant::now();
    let run = tokio::process::Command::new("node")
        .arg(root().join("tests/browser/dashboard.mjs"))
        .arg(&base)
        .arg(TOKEN)
        .arg(&shots)
        .env("CHROMIUM", chromium())
        .env("KF_JOB", job_id)
        .env("KF_TEXT", text)
        .env("KF_TOPIC", topic)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .expect("the browser script took over 3 minutes")
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "browser script: {:?}, {:.1} s\n{stdout}{stderr}",
        out.status,
        started.elapsed().as_secs_f64()
    );
    let report: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON report from the script:\n{stdout}\n{stderr}"));
    assert_eq!(report["failed"], Value::Null, "{report:#}");
    assert_eq!(report["problems"], json!([]), "{report:#}");
    assert!(out.status.success(), "{report:#}");
    for page in ["overview", "jobs", "confirm", "job", "dead"] {
        assert!(shots.join(format!("{page}.png")).exists(), "no {page}.png");
    }

    // What the page did, as Redis has it.
    let job = client.get(job_id).await.unwrap();
    assert_eq!(job.status.as_str(), "paused", "paused from the page");
    assert!(
        client.get("nightly-report").await.is_ok(),
        "the cancelled delete kept it"
    );

    second.shutdown().await;
    served.shutdown().await;
}
