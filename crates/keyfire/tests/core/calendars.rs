//! Calendars: the instants a job's calendars exclude are skipped and recorded in its ledger
//! as `excluded`; a calendar change applies to every instant not yet claimed; a job naming
//! an unknown calendar, and the deletion of a calendar in use, are refused. The schedule is
//! driven by moving a job's pending firing back in Redis before a node starts (an outage
//! the job catches up), so every instant of three whole days comes due at once.

use std::time::Duration;

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use chrono_tz::Europe::Berlin;
use keyfire::store::Shards;
use keyfire::{CalendarSpec, Client, Error, JobSpec, SkipReason};
use keyfire_testkit::wait;
use keyfire_testkit::world::World;

fn berlin(y: i32, m: u32, d: u32, h: u32) -> i64 {
    Berlin
        .with_ymd_and_hms(y, m, d, h, 0, 0)
        .earliest()
        .unwrap()
        .timestamp_millis()
}

fn day_in_berlin(ms: i64) -> NaiveDate {
    Utc.timestamp_millis_opt(ms)
        .unwrap()
        .with_timezone(&Berlin)
        .date_naive()
}

/// An hourly job in Berlin over 2026-03-28..=03-30 (the middle day is the spring-forward
/// day: 23 hours), every late instant caught up, excluding `calendar`.
fn hourly(id: &str, calendar: &str) -> JobSpec {
    let mut s = JobSpec::cron(id, "0 * * * *", "rec")
        .tz("Europe/Berlin")
        .exclude([calendar]);
    s.start_at = DateTime::from_timestamp_millis(berlin(2026, 3, 28, 0));
    s.end_at = DateTime::from_timestamp_millis(berlin(2026, 3, 30, 23));
    s.misfire = Some("catch_up".into());
    s.catch_up_limit = Some(1_000);
    s.misfire_tolerance = Some("1s".into());
    s
}

/// Make the job's first instant pending again, as if no node had run since.
async fn rewind(w: &World, id: &str, at_ms: i64) {
    let r = &w.settings.redis;
    let shards = Shards::new(&r.prefix, r.shards as usize);
    let k = shards.for_job(id);
    let mut c = w.conn().await;
    let _: () = redis::pipe()
        .hset(k.job(id), "next", at_ms)
        .hset(k.job(id), "status", "active")
        .zadd(k.due(), id, at_ms)
        .query_async(&mut c)
        .await
        .unwrap();
}

/// Wait until the job has run every instant of its window but those excluded: `runs`.
async fn ran_days(w: &World, client: &Client, id: &str, runs: usize) -> Vec<NaiveDate> {
    wait::until("the job's runs", Duration::from_secs(60), async || {
        let n = w.recorder.seen_of(id).len();
        if n >= runs { Ok(()) } else { Err(n) }
    })
    .await;
    wait::until("the job to finish", Duration::from_secs(30), async || {
        let j = client.get(id).await.unwrap();
        if j.next_ms.is_none() {
            Ok(())
        } else {
            Err(format!("{:?}", j.next_ms))
        }
    })
    .await;
    let mut days: Vec<NaiveDate> = w
        .recorder
        .seen_of(id)
        .iter()
        .map(|s| day_in_berlin(s.scheduled_ms))
        .collect();
    days.sort();
    days
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_calendar_excludes_a_dst_day_and_its_change_applies_to_what_is_not_yet_claimed() {
    let w = World::new().await;
    let client = w.client().await;
    let (d28, d29, d30) = (
        NaiveDate::from_ymd_opt(2026, 3, 28).unwrap(),
        NaiveDate::from_ymd_opt(2026, 3, 29).unwrap(),
        NaiveDate::from_ymd_opt(2026, 3, 30).unwrap(),
    );

    // An unknown calendar is refused, naming the field.
    match client.upsert(hourly("a", "de-holidays")).await {
        Err(Error::Invalid(e)) => assert_eq!(e.field, "exclude[0]", "{e}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    client
        .put_calendar(CalendarSpec::new("de-holidays", "Europe/Berlin").date("2026-03-29"))
        .await
        .unwrap();
    client.upsert(hourly("a", "de-holidays")).await.unwrap();
    rewind(&w, "a", berlin(2026, 3, 28, 0)).await;
    let node = w.node("n1").await;

    // 24 + 23 + 24 instants: the 23 of the spring-forward day are excluded.
    let days = ran_days(&w, &client, "a", 48).await;
    assert_eq!(days.iter().filter(|d| **d == d28).count(), 24, "{days:?}");
    assert_eq!(days.iter().filter(|d| **d == d29).count(), 0, "{days:?}");
    assert_eq!(days.iter().filter(|d| **d == d30).count(), 24, "{days:?}");
    let skips = client.skips("a", 100).await.unwrap();
    let excluded: Vec<_> = skips
        .iter()
        .filter(|s| s.reason == SkipReason::Excluded)
        .collect();
    assert_eq!(
        excluded.iter().map(|s| s.count).sum::<u64>(),
        23,
        "{skips:?}"
    );
    assert!(excluded.iter().all(|s| day_in_berlin(s.first_ms) == d29));
    assert!(excluded.iter().all(|s| day_in_berlin(s.last_ms) == d29));

    // Deleting it while job a names it is refused, naming the job.
    match client.delete_calendar("de-holidays").await {
        Err(Error::CalendarInUse { jobs, .. }) => assert_eq!(jobs, ["a"]),
        other => panic!("expected in use, got {other:?}"),
    }

    // The calendar now excludes the 30th instead: a job caught up after the change (the
    // node had the old calendar) runs the 29th and skips the 30th.
    client
        .put_calendar(CalendarSpec::new("de-holidays", "Europe/Berlin").date("2026-03-30"))
        .await
        .unwrap();
    client.upsert(hourly("b", "de-holidays")).await.unwrap();
    rewind(&w, "b", berlin(2026, 3, 28, 0)).await;
    let days = ran_days(&w, &client, "b", 47).await;
    assert_eq!(days.iter().filter(|d| **d == d29).count(), 23, "{days:?}");
    assert_eq!(days.iter().filter(|d| **d == d30).count(), 0, "{days:?}");

    // Once no job names it, it is deleted.
    client.delete("a").await.unwrap();
    client.delete("b").await.unwrap();
    client.delete_calendar("de-holidays").await.unwrap();
    assert!(matches!(
        client.calendar("de-holidays").await,
        Err(Error::CalendarNotFound(_))
    ));
    node.shutdown().await;
}
