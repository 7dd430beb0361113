//! Bad input is refused with the field named, and nothing is written (G7).

use chrono::Utc;
use keyfire::{Error, JobSpec};
use serde_json::json;

use crate::support::World;

async fn keys_under(w: &World) -> Vec<String> {
    let mut c = w.conn().await;
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{{{}}}*", w.settings.redis.prefix))
        .query_async(&mut c)
        .await
        .unwrap();
    keys.sort();
    keys
}

/// Every kind of bad input is refused with the field it concerns, and writes nothing.
#[tokio::test]
async fn each_validation_error_is_named_and_writes_nothing() {
    let mut w = World::new().await;
    w.settings.limits.max_params_bytes = 1_024;
    let client = w.client().await;
    let before = keys_under(&w).await;
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
        assert_eq!(
            keys_under(&w).await,
            before,
            "{field}: something was written"
        );
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
