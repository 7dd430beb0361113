//! A full Redis: `maxmemory` reached under `maxmemory-policy noeviction`. What is refused and
//! how that is said (507 `redis_full` with `Retry-After`, the CLI's exit code 6, the library's
//! `Error::is_redis_full`, `/readyz`, the memory metric), what still works, and that all of it
//! comes back once memory is freed.
//!
//! Redis refuses a command that may grow memory (`SET`, `HSET`, `ZADD`, …) once `used_memory`
//! is past `maxmemory`. A script is refused at its first such write, unless it wrote with a
//! command that cannot grow memory first (`ZREM`, `DEL`, …): from then on Redis lets it finish.
//! So what keyfire can still do at the limit follows from each script's first write.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use keyfire::queue::{NewTask, Queue};
use keyfire::{Firing, Node, Registry};
use keyfire_server::api::{ApiState, router};
use keyfire_server::settings::ServerSettings;
use keyfire_testkit::RedisOptions;
use serde_json::{Value, json};

use crate::common::{Answer, Api, eventually};
use crate::support::World;

const BIN: &str = env!("CARGO_BIN_EXE_keyfire");

/// A world on a Redis of 3 MB with noeviction, an API over it with figures read every
/// 100 ms, and a registry whose `mem` handler records firing ids in memory (a recorder that
/// writes to Redis would be refused with everything else).
async fn full_world(
    node: impl FnOnce(&mut ServerSettings),
) -> (Api, Registry, Arc<Mutex<Vec<String>>>) {
    let options = RedisOptions {
        extra: vec![
            ("maxmemory".into(), "3mb".into()),
            ("maxmemory-policy".into(), "noeviction".into()),
        ],
        ..RedisOptions::default()
    };
    let mut world = World::with(options).await;
    world.settings.metrics.min_interval = Duration::from_millis(100);
    node(&mut world.settings);
    let fired: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut registry = Registry::with_builtins();
    let f = fired.clone();
    registry.register("mem", move |firing: Firing| {
        let f = f.clone();
        async move {
            f.lock().unwrap().push(firing.job_id.clone());
            Ok(())
        }
    });
    let client = keyfire::Client::connect(&world.settings.library())
        .await
        .unwrap()
        .allow_handlers(registry.names());
    let api = Api {
        router: router(ApiState::new(client, &world.settings)),
        world,
        token: None,
    };
    (api, registry, fired)
}

/// `INFO memory`'s `used_memory`.
async fn used_memory(api: &Api) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut api.world.conn().await)
        .await
        .unwrap();
    keyfire::store::parse_info(&info)["used_memory"]
        .parse()
        .unwrap()
}

/// Set `maxmemory` (by the fixture's name for CONFIG: a managed-like server renames it).
async fn set_maxmemory(api: &Api, bytes: u64) {
    let _: () = api
        .world
        .redis
        .admin("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(bytes)
        .query_async(&mut api.world.conn().await)
        .await
        .unwrap();
}

/// Add 8 KB tasks through the API until Redis refuses one; then put `maxmemory` below what
/// Redis uses. (Its use wavers around the limit with client buffers, so a small write can
/// slip through at the edge; below it, every growing write is refused.) Returns the refusal
/// and how many tasks went in.
async fn fill(api: &Api) -> (Answer, usize) {
    let payload = "x".repeat(8 * 1024);
    let mut added = 0;
    let refused = loop {
        let r = api
            .post(
                "/v1/topics/fill/tasks",
                Some(json!({"payload": {"p": payload}})),
            )
            .await;
        if r.status != StatusCode::CREATED {
            break r;
        }
        added += 1;
        assert!(added < 2_000, "3 MB took over 2,000 tasks of 8 KB");
    };
    let used = used_memory(api).await;
    set_maxmemory(api, used - 256 * 1024).await;
    (refused, added)
}

/// Assert the answer of a write Redis refused for memory.
fn assert_redis_full(a: &Answer, what: &str) {
    a.assert_error(507, "redis_full");
    let message = a.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("maxmemory") && message.contains("Free memory (delete"),
        "{what}: {message}"
    );
    assert_eq!(
        a.headers.get("retry-after").and_then(|v| v.to_str().ok()),
        Some("30"),
        "{what}: {:?}",
        a.headers
    );
}

/// The one `keyfire_redis_memory_used_ratio` sample of this world's server.
fn memory_ratio(metrics: &str, port: u16) -> f64 {
    let series = format!("keyfire_redis_memory_used_ratio{{server=\"127.0.0.1:{port}\"}}");
    let line = metrics
        .lines()
        .find(|l| l.starts_with(&series))
        .unwrap_or_else(|| panic!("no {series} in:\n{metrics}"));
    line.rsplit_once(' ').unwrap().1.parse().unwrap()
}

async fn metrics_text(api: &Api) -> String {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let resp = api
        .router
        .clone()
        .oneshot(
            axum::http::Request::get("/metrics")
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_redis_is_said_plainly_and_everything_comes_back_when_memory_is_freed() {
    let (api, registry, fired) = full_world(|_| {}).await;
    let mut s = api.world.settings.clone();
    s.node.id = "full-1".into();
    let node = Node::new(s.library(), registry).start().await.unwrap();
    // Due after Redis is full (filling takes well under a second; 8 s leaves room).
    let later_due = tokio::time::Instant::now() + Duration::from_secs(8);
    for i in 0..3 {
        let r = api
            .put(
                &format!("/v1/jobs/later{i}"),
                json!({"after": "8s", "handler": "mem"}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    }
    // Reserved before Redis is full: finished and deleted once it is.
    let queue = Queue::connect(&api.world.settings.library()).await.unwrap();
    for _ in 0..2 {
        queue
            .add_task(NewTask::new("work", json!({"w": 1})))
            .await
            .unwrap();
    }
    let held = queue.pop_many("work", 2, Duration::ZERO).await.unwrap();
    assert_eq!(held.len(), 2);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = api.router.clone();
    let served = tokio::spawn(async move { axum::serve(listener, app).await });

    let (refused, added) = fill(&api).await;
    assert!(added > 50, "only {added} tasks of 8 KB went into 3 MB");
    // The add goes as a script in a pipeline: the refusal is found inside the pipeline's error.
    assert_redis_full(&refused, "the add that filled Redis");

    // Every write that would grow memory is refused the same way: adds, creates, pops (a pop
    // writes the reservation), finishes (a finish keeps a record of the task, without its
    // payload, for the retention).
    let task = json!({"payload": {"n": 1}});
    assert_redis_full(
        &api.post("/v1/topics/fill/tasks", Some(task.clone())).await,
        "add",
    );
    assert_redis_full(
        &api.put("/v1/jobs/new", json!({"every": "1s", "handler": "mem"}))
            .await,
        "create a job",
    );
    assert_redis_full(
        &api.post("/v1/tasks", Some(json!({"handler": "mem", "after": "1s"})))
            .await,
        "enqueue a one-shot task",
    );
    assert_redis_full(&api.post("/v1/topics/fill/pop", None).await, "pop");
    assert_redis_full(
        &api.post(
            &format!("/v1/topics/work/tasks/{}/finish", held[0].id),
            Some(json!({"token": held[0].token})),
        )
        .await,
        "finish",
    );
    // The library says the same.
    let e = queue
        .add_task(NewTask::new("fill", json!({"n": 1})))
        .await
        .unwrap_err();
    assert!(e.is_redis_full(), "{e:?}");
    let e = queue.finish(&held[0].id, &held[0].token).await.unwrap_err();
    assert!(e.is_redis_full(), "{e:?}");

    // Deleting frees memory and starts with a removal, which Redis lets through.
    let deleted = api
        .delete(&format!("/v1/topics/work/tasks/{}", held[1].id))
        .await;
    assert!(
        deleted.status.is_success(),
        "{} {}",
        deleted.status,
        deleted.body
    );
    // Reads answer.
    assert_eq!(api.get("/v1/jobs/later0").await.status, StatusCode::OK);
    let topics = api.get("/v1/topics").await;
    assert_eq!(topics.status, StatusCode::OK, "{}", topics.body);

    // Not ready, saying why.
    let ready = api.get("/readyz").await;
    assert_eq!(
        ready.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        ready.body
    );
    assert_eq!(ready.body["status"], "not_ready");
    let why = ready.body["checks"]["memory"].as_str().unwrap();
    assert!(
        why.starts_with("full: ") && why.contains("maxmemory"),
        "{why}"
    );
    assert_eq!(ready.body["checks"]["redis"], "ok");
    let port = api.world.redis.port();
    let ratio = memory_ratio(&metrics_text(&api).await, port);
    assert!(ratio >= 1.0, "{ratio}");

    // The CLI: the API's message and exit code 6.
    let out = tokio::process::Command::new(BIN)
        .args([
            "task",
            "add",
            "--topic",
            "fill",
            "--payload",
            "{}",
            "--url",
            &url,
        ])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("maxmemory"), "{stderr}");

    // The node's heartbeat is refused too (its first write adds to the live set): the node
    // leaves the live set and fences itself, so the firings due meanwhile wait.
    eventually(
        Duration::from_secs(10),
        "the node to leave the live set",
        || async {
            let nodes = api.get("/v1/nodes").await;
            (nodes.status == StatusCode::OK && nodes.body["nodes"] == json!([])).then_some(())
        },
    )
    .await;
    tokio::time::sleep_until(later_due + Duration::from_millis(1_500)).await;
    assert_eq!(
        fired.lock().unwrap().clone(),
        Vec::<String>::new(),
        "nothing fires while the node is fenced"
    );

    // Memory freed (here: a higher limit): the node is back, the waiting firings fire and
    // their runs are recorded, writes go through, /readyz says ready.
    set_maxmemory(&api, 64 * 1024 * 1024).await;
    eventually(
        Duration::from_secs(15),
        "the late firings to fire",
        || async {
            let mut f = fired.lock().unwrap().clone();
            f.sort();
            (f == ["later0", "later1", "later2"]).then_some(())
        },
    )
    .await;
    let runs = api.get("/v1/jobs/later0/runs").await;
    assert_eq!(runs.body["runs"][0]["outcome"], "ok", "{}", runs.body);
    let added = api.post("/v1/topics/fill/tasks", Some(task)).await;
    assert_eq!(added.status, StatusCode::CREATED, "{}", added.body);
    let ready: Value = eventually(Duration::from_secs(5), "ready again", || async {
        let r = api.get("/readyz").await;
        (r.status == StatusCode::OK).then_some(r.body)
    })
    .await;
    assert!(
        ready["checks"]["memory"]
            .as_str()
            .unwrap()
            .starts_with("ok: "),
        "{ready}"
    );
    let ratio = memory_ratio(&metrics_text(&api).await, port);
    assert!(ratio < 0.2, "{ratio}");
    served.abort();
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn while_the_node_is_live_one_shot_firings_run_and_recurring_ones_wait() {
    // A node_ttl long enough that the node does not fence itself during the test (it fences
    // 3/5 of node_ttl after its last heartbeat that succeeded, and a full Redis refuses them).
    let (api, registry, fired) = full_world(|s| s.node.node_ttl = Duration::from_secs(60)).await;
    let mut s = api.world.settings.clone();
    s.node.id = "full-2".into();
    let node = Node::new(s.library(), registry).start().await.unwrap();
    let due = tokio::time::Instant::now() + Duration::from_secs(4);
    let r = api
        .put("/v1/jobs/soon", json!({"after": "4s", "handler": "mem"}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = api
        .put("/v1/jobs/tick", json!({"every": "1s", "handler": "mem"}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    fill(&api).await;
    assert!(
        tokio::time::Instant::now() < due,
        "filling took past the one-shot firing's instant"
    );

    // A one-shot task's claim starts by taking its due entry out, and its outcome by taking
    // its lease out: Redis lets both through, and the run is recorded.
    eventually(Duration::from_secs(10), "the one-shot firing", || async {
        fired
            .lock()
            .unwrap()
            .contains(&"soon".to_string())
            .then_some(())
    })
    .await;
    let runs: Value = eventually(Duration::from_secs(5), "its run record", || async {
        let r = api.get("/v1/jobs/soon/runs").await;
        (r.body["runs"][0]["outcome"] == "ok").then_some(r.body)
    })
    .await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
    // A recurring job's claim starts by writing the job's record (its next firing): refused,
    // so its firings wait, growing overdue, while Redis stays full.
    assert!(
        !fired.lock().unwrap().contains(&"tick".to_string()),
        "a recurring firing ran on a full Redis"
    );
    assert_eq!(api.get("/v1/jobs/tick/runs").await.body["runs"], json!([]));
    let overdue: f64 = eventually(Duration::from_secs(5), "the overdue figure", || async {
        let text = metrics_text(&api).await;
        let line = text
            .lines()
            .find(|l| l.starts_with("keyfire_oldest_overdue_firing_seconds{shard=\"0\"}"))?;
        let v: f64 = line.rsplit_once(' ')?.1.parse().ok()?;
        (v >= 1.0).then_some(v)
    })
    .await;
    assert!(overdue < 60.0, "{overdue}");
    assert_redis_full(
        &api.post("/v1/topics/fill/tasks", Some(json!({"payload": 1})))
            .await,
        "still full",
    );

    // Memory freed: the recurring job's firing is claimed and runs.
    set_maxmemory(&api, 64 * 1024 * 1024).await;
    eventually(Duration::from_secs(10), "the recurring firing", || async {
        fired
            .lock()
            .unwrap()
            .contains(&"tick".to_string())
            .then_some(())
    })
    .await;
    node.shutdown().await;
}
