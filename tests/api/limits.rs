//! `/v1/limits` over REST: set, read, list and lift a limit; bad input (a bound of 0, a
//! negative bound, a bad key, a key that does not match the path) refused with 422 naming
//! the field, and nothing written.

use axum::http::StatusCode;
use serde_json::json;

use crate::common::Api;

/// Every key of the world's prefix, flow-control keys (under their own hash tags) included.
async fn keys(api: &Api) -> Vec<String> {
    let mut c = api.world.conn().await;
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{{{}*", api.world.settings.redis.prefix))
        .query_async(&mut c)
        .await
        .unwrap();
    keys.retain(|k| !k.contains(":node") && !k.ends_with(":layout") && !k.ends_with(":handlers"));
    keys.sort();
    keys
}

#[tokio::test]
async fn set_read_list_and_lift_a_limit() {
    let api = Api::new().await;
    let a = api
        .put(
            "/v1/limits/host:api.example.com",
            json!({"rate": 100, "in_flight": 10}),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{:#}", a.body);
    assert_eq!(a.body["key"], "host:api.example.com");
    assert_eq!(
        (a.body["rate"].as_u64(), a.body["in_flight"].as_u64()),
        (Some(100), Some(10))
    );
    assert_eq!(
        (a.body["running"].as_u64(), a.body["held"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(a.body["held_firings"], json!([]));

    // Replaced: the rate bound lifted, in flight kept.
    let a = api
        .put(
            "/v1/limits/host:api.example.com",
            json!({"key": "host:api.example.com", "in_flight": 3}),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{:#}", a.body);
    assert_eq!(a.body.get("rate"), None, "{:#}", a.body);
    assert_eq!(a.body["in_flight"], 3);
    api.put("/v1/limits/mail", json!({"rate": 5})).await;

    let l = api.get("/v1/limits").await;
    assert_eq!(l.status, StatusCode::OK);
    let listed: Vec<&str> = l.body["limits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["key"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["host:api.example.com", "mail"]);

    let g = api.get("/v1/limits/mail").await;
    assert_eq!(
        (g.status, g.body["rate"].as_u64()),
        (StatusCode::OK, Some(5))
    );

    assert_eq!(
        api.delete("/v1/limits/mail").await.status,
        StatusCode::NO_CONTENT
    );
    api.get("/v1/limits/mail")
        .await
        .assert_error(404, "not_found");
    api.delete("/v1/limits/mail")
        .await
        .assert_error(404, "not_found");
    assert_eq!(
        api.get("/v1/limits").await.body["limits"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn bad_limits_are_refused_by_field_before_any_change() {
    let api = Api::new().await;
    api.put("/v1/limits/k", json!({"rate": 10})).await;
    let before = keys(&api).await;
    for (path, body, field) in [
        ("/v1/limits/k", json!({"rate": 0}), "rate"),
        ("/v1/limits/k", json!({"in_flight": 0}), "in_flight"),
        ("/v1/limits/k", json!({"rate": 5, "burst": 0}), "burst"),
        ("/v1/limits/k", json!({"rate": 5, "burst": 6}), "burst"),
        (
            "/v1/limits/k",
            json!({"rate": 5, "in_flight": 0}),
            "in_flight",
        ),
        ("/v1/limits/k", json!({"rate": -1}), "rate"),
        ("/v1/limits/k", json!({"rate": "fast"}), "rate"),
        ("/v1/limits/k", json!({}), "rate"),
        ("/v1/limits/k", json!({"rate": 1, "bursts": 2}), "bursts"),
        ("/v1/limits/k", json!({"key": "other", "rate": 1}), "key"),
        ("/v1/limits/a%7Bb%7D", json!({"rate": 1}), "key"),
    ] {
        let a = api.put(path, body.clone()).await;
        a.assert_error(422, "invalid");
        assert_eq!(a.field(), field, "{body}: {:#}", a.body);
    }
    assert_eq!(keys(&api).await, before, "a refused write changed Redis");
    let g = api.get("/v1/limits/k").await;
    assert_eq!(g.body["rate"], 10);

    // A job's limit_key is checked like a limit's key.
    let j = api
        .put(
            "/v1/jobs/j",
            json!({"every": "1m", "handler": "noop", "limit_key": "no spaces"}),
        )
        .await;
    j.assert_error(422, "invalid");
    assert_eq!(j.field(), "limit_key");
}
