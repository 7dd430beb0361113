//! `/v1/calendars`: written, read, listed and deleted through the real router; a job naming
//! an unknown calendar is refused with the field named; a calendar in use is not deleted.

use axum::http::StatusCode;
use serde_json::json;

use crate::common::Api;

#[tokio::test]
async fn calendars_crud_with_jobs_that_name_them() {
    let api = Api::new().await;
    let body = json!({
        "tz": "Europe/Berlin",
        "dates": ["2026-12-25"],
        "ranges": [{"from": "2026-12-31", "to": "2027-01-01"}],
        "cron": ["* * 2-3 * * SUN"],
    });
    let put = api.put("/v1/calendars/de-holidays", body).await;
    assert_eq!(put.status, StatusCode::OK, "{:#}", put.body);
    assert_eq!(put.body["name"], "de-holidays");
    let got = api.get("/v1/calendars/de-holidays").await;
    assert_eq!(got.body["ranges"][0]["to"], "2027-01-01", "{:#}", got.body);
    let list = api.get("/v1/calendars").await;
    assert_eq!(list.body["calendars"].as_array().unwrap().len(), 1);

    // Bad input names the field and writes nothing.
    let bad = api
        .put("/v1/calendars/bad", json!({"dates": ["2026-02-30"]}))
        .await;
    bad.assert_error(422, "invalid");
    assert_eq!(bad.field(), "dates[0]");
    api.get("/v1/calendars/bad")
        .await
        .assert_error(404, "not_found");
    let other = api.put("/v1/calendars/x", json!({"name": "y"})).await;
    assert_eq!(other.field(), "name");

    // A job naming an unknown calendar is refused, naming the field; one naming a known one
    // is written and shown with it.
    let unknown = api
        .put(
            "/v1/jobs/report",
            json!({"cron": "0 * * * *", "handler": "log", "exclude": ["de-holidays", "nope"]}),
        )
        .await;
    unknown.assert_error(422, "invalid");
    assert_eq!(unknown.field(), "exclude[1]");
    api.get("/v1/jobs/report")
        .await
        .assert_error(404, "not_found");
    let job = api
        .put(
            "/v1/jobs/report",
            json!({"cron": "0 * * * *", "handler": "log", "exclude": ["de-holidays"]}),
        )
        .await;
    assert_eq!(job.status, StatusCode::CREATED, "{:#}", job.body);
    assert_eq!(job.body["spec"]["exclude"], json!(["de-holidays"]));

    // In use: the deletion is refused, naming the job.
    let in_use = api.delete("/v1/calendars/de-holidays").await;
    in_use.assert_error(409, "conflict");
    assert!(
        in_use.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("report"),
        "{:#}",
        in_use.body
    );
    // Once the job no longer names it, it goes.
    let plain = api
        .put(
            "/v1/jobs/report",
            json!({"cron": "0 * * * *", "handler": "log"}),
        )
        .await;
    assert_eq!(plain.status, StatusCode::OK, "{:#}", plain.body);
    assert_eq!(
        api.delete("/v1/calendars/de-holidays").await.status,
        StatusCode::NO_CONTENT
    );
    api.delete("/v1/calendars/de-holidays")
        .await
        .assert_error(404, "not_found");

    // The next firings a job shows leave out what its calendars exclude.
    let put = api
        .put(
            "/v1/calendars/mornings",
            json!({"cron": ["* * 0-11 * * *"]}),
        )
        .await;
    assert_eq!(put.status, StatusCode::OK, "{:#}", put.body);
    let job = api
        .put(
            "/v1/jobs/afternoons",
            json!({"cron": "0 * * * *", "handler": "log", "exclude": ["mornings"]}),
        )
        .await;
    let next = job.body["next_firings"].as_array().unwrap();
    assert_eq!(next.len(), 5, "{:#}", job.body);
    for f in next {
        let at = chrono::DateTime::parse_from_rfc3339(f["utc"].as_str().unwrap()).unwrap();
        assert!(chrono::Timelike::hour(&at) >= 12, "{f:#}");
    }
}
