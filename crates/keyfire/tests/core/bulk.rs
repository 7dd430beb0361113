//! Pausing and resuming many jobs at once, by handler or by id prefix
//! (`Client::pause_matching`, `Client::resume_matching`).

use chrono::DateTime;
use keyfire::bulk::{BulkOutcome, JobSelector};
use keyfire::store::JobStatus;
use keyfire::{Error, JobSpec};
use keyfire_testkit::world::World;

fn outcome(matched: u64, changed: u64) -> BulkOutcome {
    BulkOutcome { matched, changed }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_paused_and_resumed_by_id_prefix_and_by_handler() {
    let w = World::new().await;
    let client = w.client().await;
    for (id, handler) in [
        ("billing-a", "rec"),
        ("billing-b", "slow"),
        ("billing", "rec"),
        ("bill", "rec"),
        ("other", "rec"),
    ] {
        client
            .upsert(JobSpec::every(id, "1h", handler))
            .await
            .unwrap();
    }
    // A one-shot task stored compact (outside the jobs index) is picked too.
    let at = DateTime::from_timestamp_millis(w.redis_ms().await + 3_600_000).unwrap();
    client
        .enqueue(JobSpec::at("billing-task", at, "rec"))
        .await
        .unwrap();
    client.pause("billing-b").await.unwrap();
    let status = |id: &'static str| {
        let client = client.clone();
        async move { client.get(id).await.unwrap().status }
    };

    let prefix = JobSelector::IdPrefix("billing-".into());
    // billing-b was paused already: matched, not changed.
    assert_eq!(client.pause_matching(&prefix).await.unwrap(), outcome(3, 2));
    for id in ["billing-a", "billing-b", "billing-task"] {
        assert_eq!(status(id).await, JobStatus::Paused, "{id}");
    }
    for id in ["billing", "bill", "other"] {
        assert_eq!(
            status(id).await,
            JobStatus::Active,
            "{id} is not under billing-"
        );
    }
    // Again: nothing left to pause.
    assert_eq!(client.pause_matching(&prefix).await.unwrap(), outcome(3, 0));

    // By handler: `rec` picks billing-a (paused), billing, bill, other, billing-task (paused).
    let rec = JobSelector::Handler("rec".into());
    assert_eq!(client.resume_matching(&rec).await.unwrap(), outcome(5, 2));
    for id in ["billing-a", "billing-task"] {
        assert_eq!(status(id).await, JobStatus::Active, "{id}");
    }
    assert_eq!(
        status("billing-b").await,
        JobStatus::Paused,
        "billing-b's handler is mail"
    );
    assert_eq!(client.pause_matching(&rec).await.unwrap(), outcome(5, 5));
    assert_eq!(
        client
            .resume_matching(&JobSelector::Handler("nobody".into()))
            .await
            .unwrap(),
        outcome(0, 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_pause_reads_every_page_of_the_index() {
    let w = World::new().await;
    let client = w.client().await;
    let at = DateTime::from_timestamp_millis(w.redis_ms().await + 3_600_000).unwrap();
    // More than a page (500) of jobs, most of them compact tasks, after another handler's.
    for i in 0..30 {
        client
            .upsert(JobSpec::every(format!("job-{i:03}"), "1h", "rec"))
            .await
            .unwrap();
    }
    let tasks: Vec<JobSpec> = (0..1_100)
        .map(|i| JobSpec::at(format!("task-{i:04}"), at, "slow"))
        .collect();
    client.enqueue_many(tasks).await.unwrap();
    let slow = JobSelector::Handler("slow".into());
    assert_eq!(
        client.pause_matching(&slow).await.unwrap(),
        outcome(1_100, 1_100)
    );
    for id in ["task-0000", "task-0550", "task-1099"] {
        assert_eq!(
            client.get(id).await.unwrap().status,
            JobStatus::Paused,
            "{id}"
        );
    }
    assert_eq!(
        client.get("job-000").await.unwrap().status,
        JobStatus::Active
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_that_picks_nothing_or_everything_is_refused_by_field() {
    let w = World::new().await;
    let client = w.client().await;
    client
        .upsert(JobSpec::every("a", "1h", "rec"))
        .await
        .unwrap();
    for (selector, field) in [
        (JobSelector::IdPrefix(String::new()), "id_prefix"),
        (JobSelector::IdPrefix("a:b".into()), "id_prefix"),
        (JobSelector::IdPrefix("-a".into()), "id_prefix"),
        (JobSelector::Handler(String::new()), "handler"),
        (JobSelector::Handler("a\nb".into()), "handler"),
    ] {
        match client.pause_matching(&selector).await {
            Err(Error::Invalid(v)) => assert_eq!(v.field, field, "{selector:?}"),
            other => panic!("{selector:?}: {other:?}"),
        }
    }
    // Nothing changed.
    assert_eq!(client.get("a").await.unwrap().status, JobStatus::Active);
}
