//! A topic's dead letters and its pause over REST, through the real router: dead letters
//! listed (why, when, deliveries), replayed (by id and all) then popped, purged; bad input
//! refused naming the field and writing nothing; a paused topic pops nothing, a pop waiting
//! across the pause gets nothing until the resume, adds go on, and a reservation handed out
//! before the pause is finished.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::json;

use crate::common::Api;
use crate::support::wait;

/// Add `n` tasks delivered once each with a short ttr, pop them and let the reservations
/// lapse: `n` dead letters. Their ids, in the order added.
async fn dead_letters(api: &Api, topic: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let body = json!({"id": format!("{topic}-{i}"), "payload": {"n": i}, "ttr": "200ms", "max_deliveries": 1});
        ids.push(api.add_task(topic, body).await);
    }
    let p = api
        .post(&format!("/v1/topics/{topic}/pop?max={n}&wait=1s"), None)
        .await;
    assert_eq!(p.body["tasks"].as_array().unwrap().len(), n, "{:#}", p.body);
    let q = api.world.queue().await;
    wait::until(
        "the reservations to lapse into dead letters",
        Duration::from_secs(10),
        || async {
            q.requeue_expired(topic).await.unwrap();
            let l = api.get(&format!("/v1/topics/{topic}/dead")).await;
            l.body["dead"].as_array().map(Vec::len) == Some(n)
        },
    )
    .await;
    ids
}

fn listed(a: &crate::common::Answer) -> Vec<String> {
    let mut ids: Vec<String> = a.body["dead"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn dead_letters_are_listed_replayed_and_purged() {
    let api = Api::new().await;
    let ids = dead_letters(&api, "orders", 3).await;

    let l = api.get("/v1/topics/orders/dead?limit=10").await;
    assert_eq!(l.status, StatusCode::OK, "{:#}", l.body);
    assert_eq!(listed(&l), ids);
    for d in l.body["dead"].as_array().unwrap() {
        assert_eq!(d["topic"], "orders");
        assert_eq!(
            (d["deliveries"].as_u64(), d["max_deliveries"].as_u64()),
            (Some(1), Some(1))
        );
        let error = d["error"].as_str().expect("why it died");
        assert!(error.contains("delivery 1 of 1"), "{error}");
        chrono::DateTime::parse_from_rfc3339(d["died_at"].as_str().expect("when it died")).unwrap();
        assert!(d["payload"]["n"].is_u64());
    }
    let l = api.get("/v1/topics/orders/dead?limit=2").await;
    assert_eq!(l.body["dead"].as_array().unwrap().len(), 2, "the limit");
    let t = api.get("/v1/topics").await;
    assert_eq!(t.body["topics"][0]["dead"], 3);

    // Replay one by id: ready again with its deliveries reset, then popped.
    let r = api
        .post(
            &format!("/v1/topics/orders/dead/replay?ids={}", ids[1]),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:#}", r.body);
    assert_eq!(r.body["count"], 1);
    let task = api
        .get(&format!("/v1/topics/orders/tasks/{}", ids[1]))
        .await;
    assert_eq!(
        (
            task.body["state"].as_str(),
            task.body["deliveries"].as_u64()
        ),
        (Some("ready"), Some(0))
    );
    let p = api.post("/v1/topics/orders/pop", None).await;
    assert_eq!(p.status, StatusCode::OK, "{:#}", p.body);
    assert_eq!(
        (p.body["id"].as_str(), p.body["deliveries"].as_u64()),
        (Some(ids[1].as_str()), Some(1))
    );
    assert_eq!(
        listed(&api.get("/v1/topics/orders/dead").await),
        [ids[0].clone(), ids[2].clone()]
    );

    // Purge one by id, then replay all: only the other comes back.
    let d = api
        .delete(&format!("/v1/topics/orders/dead?ids={},nosuch", ids[0]))
        .await;
    assert_eq!(d.status, StatusCode::OK, "{:#}", d.body);
    assert_eq!(d.body["count"], 1);
    let gone = api
        .get(&format!("/v1/topics/orders/tasks/{}", ids[0]))
        .await;
    assert_eq!(gone.body["state"], "deleted");
    let r = api.post("/v1/topics/orders/dead/replay", None).await;
    assert_eq!(r.body["count"], 1, "{:#}", r.body);
    let p = api.post("/v1/topics/orders/pop?max=10", None).await;
    let popped: Vec<&str> = p.body["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(popped, [ids[2].as_str()]);
    assert!(
        api.get("/v1/topics/orders/dead").await.body["dead"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // Purge all.
    let more = dead_letters(&api, "other", 2).await;
    let d = api.delete("/v1/topics/other/dead").await;
    assert_eq!(d.body["count"], 2, "{:#}", d.body);
    for id in more {
        let t = api.get(&format!("/v1/topics/other/tasks/{id}")).await;
        assert_eq!(t.body["state"], "deleted");
    }
    let t = api.get("/v1/topics").await;
    let other = t.body["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["topic"] == "other")
        .unwrap()
        .clone();
    // Purged dead letters count as dead (when they died), not again as deleted.
    assert_eq!(
        (other["dead"].as_u64(), other["deleted"].as_u64()),
        (Some(0), Some(0))
    );
    let orders = t.body["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["topic"] == "orders")
        .unwrap()
        .clone();
    assert_eq!(orders["replayed"], 2);
}

#[tokio::test]
async fn bad_dead_letter_requests_are_refused_naming_the_field_and_change_nothing() {
    let api = Api::new().await;
    let ids = dead_letters(&api, "t", 2).await;
    let before = api.snapshot().await;
    let cases: Vec<(axum::http::Method, String, u16, &str, &str)> = vec![
        (
            axum::http::Method::GET,
            "/v1/topics/t/dead?limit=0".into(),
            400,
            "bad_query",
            "limit",
        ),
        (
            axum::http::Method::GET,
            "/v1/topics/t/dead?limit=1001".into(),
            400,
            "bad_query",
            "limit",
        ),
        (
            axum::http::Method::GET,
            "/v1/topics/t/dead?limit=x".into(),
            400,
            "bad_query",
            "limit",
        ),
        (
            axum::http::Method::GET,
            "/v1/topics/nosuch/dead".into(),
            404,
            "not_found",
            "topic",
        ),
        (
            axum::http::Method::GET,
            "/v1/topics/b%20d/dead".into(),
            422,
            "invalid",
            "topic",
        ),
        (
            axum::http::Method::POST,
            format!("/v1/topics/t/dead/replay?ids={},b%20d", ids[0]),
            400,
            "bad_query",
            "ids[1]",
        ),
        (
            axum::http::Method::POST,
            "/v1/topics/t/dead/replay?ids=".into(),
            400,
            "bad_query",
            "ids",
        ),
        (
            axum::http::Method::POST,
            "/v1/topics/nosuch/dead/replay".into(),
            404,
            "not_found",
            "topic",
        ),
        (
            axum::http::Method::POST,
            "/v1/topics/t/dead/replay?id=x".into(),
            400,
            "bad_query",
            "",
        ),
        (
            axum::http::Method::DELETE,
            format!("/v1/topics/t/dead?ids={},,x", ids[0]),
            400,
            "bad_query",
            "ids[1]",
        ),
        (
            axum::http::Method::DELETE,
            "/v1/topics/nosuch/dead".into(),
            404,
            "not_found",
            "topic",
        ),
        (
            axum::http::Method::POST,
            "/v1/topics/nosuch/pause".into(),
            404,
            "not_found",
            "topic",
        ),
        (
            axum::http::Method::POST,
            "/v1/topics/nosuch/resume".into(),
            404,
            "not_found",
            "topic",
        ),
        (
            axum::http::Method::POST,
            "/v1/topics/b%20d/pause".into(),
            422,
            "invalid",
            "topic",
        ),
    ];
    let many: Vec<String> = (0..1_001).map(|i| format!("x{i}")).collect();
    let too_many = format!("/v1/topics/t/dead?ids={}", many.join(","));
    for (method, uri, status, code, field) in cases.into_iter().chain([(
        axum::http::Method::DELETE,
        too_many,
        400,
        "bad_query",
        "ids",
    )]) {
        let a = api.call(method.clone(), &uri, None).await;
        a.assert_error(status, code);
        if !field.is_empty() {
            assert_eq!(a.field(), field, "{method} {uri}: {:#}", a.body);
        }
    }
    assert!(
        before == api.snapshot().await,
        "a refused request wrote to Redis"
    );
}

#[tokio::test]
async fn a_paused_topic_pops_nothing_then_resumes_in_order() {
    let api = Api::new().await;
    for id in ["a", "b"] {
        api.add_task("p", json!({"id": id, "payload": id})).await;
    }
    let held = api.post("/v1/topics/p/pop", None).await;
    assert_eq!(held.body["id"], "a");
    let token = held.body["token"].as_str().unwrap().to_string();

    let p = api.post("/v1/topics/p/pause", None).await;
    assert_eq!(p.status, StatusCode::OK, "{:#}", p.body);
    assert_eq!(
        p.body,
        json!({"topic": "p", "paused": true, "changed": true})
    );
    assert_eq!(
        api.post("/v1/topics/p/pause", None).await.body["changed"],
        false
    );
    assert_eq!(api.get("/v1/topics/p").await.body["paused"], true);
    assert_eq!(
        api.get("/v1/topics").await.body["topics"][0]["paused"],
        true
    );

    assert_eq!(
        api.post("/v1/topics/p/pop", None).await.status,
        StatusCode::NO_CONTENT
    );
    let m = api.post("/v1/topics/p/pop?max=10&wait=300ms", None).await;
    assert_eq!(m.body["tasks"], json!([]), "a paused topic delivered");

    // A pop waiting across the pause: an add wakes nothing out of it.
    let router_api = &api;
    let waiting = async {
        router_api
            .post("/v1/topics/p/pop?max=10&wait=20s", None)
            .await
    };
    let added_then_resumed = async {
        api.add_task("p", json!({"id": "c", "payload": "c"})).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let c = api.get("/v1/topics/p/tasks/c").await;
        assert_eq!(
            c.body["state"], "ready",
            "the add while paused was accepted"
        );
        // The reservation handed out before the pause is still the consumer's.
        let f = api
            .post("/v1/topics/p/tasks/a/finish", Some(json!({"token": token})))
            .await;
        assert_eq!(f.status, StatusCode::NO_CONTENT, "{:#}", f.body);
        let r = api.post("/v1/topics/p/resume", None).await;
        assert_eq!(
            r.body,
            json!({"topic": "p", "paused": false, "changed": true})
        );
        std::time::Instant::now()
    };
    let (got, resumed_at) = tokio::join!(waiting, added_then_resumed);
    let order: Vec<&str> = got.body["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        order,
        ["b", "c"],
        "delivered in order after the resume: {:#}",
        got.body
    );
    assert!(resumed_at.elapsed() < Duration::from_secs(10));
    assert_eq!(api.get("/v1/topics/p").await.body["paused"], false);
    assert_eq!(
        api.post("/v1/topics/p/resume", None).await.body["changed"],
        false
    );
}

/// `keyfire topics dead list|replay|purge` and `keyfire topics pause|resume` against the
/// router served on a socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_lists_replays_purges_and_pauses() {
    use crate::support::{keyfire_cli, printed, printed_json};
    let api = Api::new().await;
    let ids = dead_letters(&api, "cli", 3).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = api.router.clone();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let token = api.token.clone();
    let cli = move |args: &[&str]| keyfire_cli(&url, token.as_deref(), args);
    tokio::task::block_in_place(|| {
        let l = cli(&["topics", "dead", "list", "cli"]);
        assert_eq!(l.status.code(), Some(0), "{}", printed(&l));
        let out = printed(&l);
        assert!(out.contains("DIED (UTC)") && out.contains("1/1"), "{out}");
        for id in &ids {
            assert!(out.contains(id.as_str()), "{out}");
        }
        let j = printed_json(&cli(&[
            "topics", "dead", "ls", "cli", "--limit", "2", "--json",
        ]));
        assert_eq!(j["dead"].as_array().unwrap().len(), 2);

        let r = cli(&[
            "topics", "dead", "replay", "cli", "--id", &ids[0], "--id", &ids[1],
        ]);
        assert!(
            printed(&r).contains("replayed 2 dead letter(s) of topic cli"),
            "{}",
            printed(&r)
        );
        let p = printed_json(&cli(&["topics", "dead", "purge", "cli", "--json"]));
        assert_eq!(p["count"], 1);
        let bad = cli(&["topics", "dead", "list", "cli", "--limit", "0"]);
        assert_ne!(bad.status.code(), Some(0));
        assert!(printed(&bad).contains("limit"), "{}", printed(&bad));

        let paused = cli(&["topics", "pause", "cli"]);
        assert!(
            printed(&paused).contains("topic cli paused"),
            "{}",
            printed(&paused)
        );
        let list = printed(&cli(&["topics"]));
        assert!(list.contains("PAUSED") && list.contains("yes"), "{list}");
        let g = printed_json(&cli(&["topics", "get", "cli", "--json"]));
        assert_eq!(g["paused"], true);
        let r = printed_json(&cli(&["topics", "resume", "cli", "--json"]));
        assert_eq!(
            (r["paused"].as_bool(), r["changed"].as_bool()),
            (Some(false), Some(true))
        );
        let unknown = cli(&["topics", "pause", "nosuch"]);
        assert_ne!(unknown.status.code(), Some(0));
        assert!(
            printed(&unknown).contains("no topic 'nosuch'"),
            "{}",
            printed(&unknown)
        );
    });
    // The replayed two are ready, the purged one deleted.
    let c = api.get("/v1/topics").await;
    assert_eq!(
        (
            c.body["topics"][0]["ready"].as_u64(),
            c.body["topics"][0]["dead"].as_u64()
        ),
        (Some(2), Some(0))
    );
}
