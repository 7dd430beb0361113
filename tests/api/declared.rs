//! Declared `[[jobs]]`: upserted at start, and with `prune = true` undeclared recurring jobs
//! are deleted while tasks are kept.

use keyfire::{JobSpec, Registry};

use crate::support::World;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_deletes_undeclared_recurring_jobs_only() {
    let mut w = World::new().await;
    let client = w.client().await;
    client
        .upsert(JobSpec::every("old-cron", "1h", "log"))
        .await
        .unwrap();
    client
        .upsert(JobSpec::after("a-task", "1h", "log"))
        .await
        .unwrap();
    client
        .upsert(JobSpec::every("keep", "2h", "log"))
        .await
        .unwrap();
    w.settings.api.enabled = false;
    w.settings.jobs = vec![
        JobSpec::every("keep", "1h", "log"),
        JobSpec::after("declared-once", "1h", "log"),
    ];

    // Without prune nothing is deleted; the differing job is updated.
    let served = keyfire_server::cli::serve::start(w.settings.clone(), Registry::with_builtins())
        .await
        .unwrap();
    served.shutdown().await;
    assert!(client.get("old-cron").await.is_ok());
    assert_eq!(
        client.get("keep").await.unwrap().spec.every.as_deref(),
        Some("1h")
    );
    let once = client.get("declared-once").await.unwrap();

    w.settings.prune = true;
    let served = keyfire_server::cli::serve::start(w.settings.clone(), Registry::with_builtins())
        .await
        .unwrap();
    served.shutdown().await;
    assert!(
        client.get("old-cron").await.is_err(),
        "undeclared recurring job survived"
    );
    assert!(client.get("a-task").await.is_ok(), "a task was pruned");
    assert!(client.get("keep").await.is_ok());
    // A declared `after` is resolved once, not again at every start.
    assert_eq!(client.get("declared-once").await.unwrap(), once);
}

/// A declared job with `dedup` stops the start, naming the job and the field: a declared job
/// is upserted by its id at every start, so its id already makes the declaration idempotent,
/// and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_job_with_dedup_is_refused() {
    let mut w = World::new().await;
    w.settings.api.enabled = false;
    w.settings.jobs = vec![
        JobSpec::every("fine", "1h", "log"),
        JobSpec::after("once", "1h", "log").dedup(keyfire::job::DedupSpec::key("k", "10m")),
    ];
    let err = keyfire_server::cli::serve::start(w.settings.clone(), Registry::with_builtins())
        .await
        .err()
        .expect("a declared job with dedup is refused");
    let text = format!("{err:#}");
    assert!(text.contains("'once'") && text.contains("dedup"), "{text}");
    assert!(
        crate::common::snapshot(&w).await.is_empty(),
        "something was written"
    );
}

/// Run limits in TOML are read as declared; a bad one stops the start, naming the job and the
/// field, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_run_limits_are_read_and_checked() {
    let spec: JobSpec = toml::from_str(
        "id = \"warm\"\nevery = \"1m\"\nhandler = \"log\"\nmax_runs = 10\npause_after_failures = 5\n",
    )
    .unwrap();
    assert_eq!(
        (spec.max_runs, spec.pause_after_failures),
        (Some(10), Some(5))
    );
    let mut w = World::new().await;
    w.settings.api.enabled = false;
    let mut bad = spec.clone();
    bad.id = "bad".into();
    bad.pause_after_failures = Some(0);
    w.settings.jobs = vec![spec, bad];
    let err = keyfire_server::cli::serve::start(w.settings.clone(), Registry::with_builtins())
        .await
        .err()
        .expect("a declared job with pause_after_failures = 0 is refused");
    let text = format!("{err:#}");
    assert!(
        text.contains("'bad'") && text.contains("pause_after_failures"),
        "{text}"
    );
    assert!(
        crate::common::snapshot(&w).await.is_empty(),
        "something was written"
    );
}
