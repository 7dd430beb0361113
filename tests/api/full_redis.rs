//! A full Redis: `maxmemory` reached under `maxmemory-policy noeviction`. What is refused and
//! how that is said (507 `redis_full` with `Retry-After`, the CLI's exit code 6, the library's
//! `Error::is_redis_full`, `/readyz`, the memory metric), what keeps working, and that new
//! writes go through again once memory is freed.
//!
//! Redis refuses a command that may grow memory (`SET`, `HSET`, `ZADD`, …) once `used_memory`
//! is past `maxmemory`, and a script at its first such write. The scripts that do not grow
//! memory in steady state, or only by a bounded, trimmed amount, are flagged
//! `#!lua flags=allow-oom`, and Redis runs them at the limit: heartbeats (no node fences itself
//! because Redis is full), claims and outcomes of the firings already pending, one-shot and
//! recurring alike, retries, renewals, takeovers, the delay queue's pop, touch, finish and
//! promotion, deletes. What adds work (creating a job or a task, adding to a topic) is not
//! flagged: refused, 507.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use keyfire::queue::{NewTask, Queue, TaskState};
use keyfire::{Firing, HandlerError, Node, Registry};
use keyfire_server::api::{ApiState, router};
use keyfire_testkit::RedisOptions;
use serde_json::{Value, json};

use crate::common::{Answer, Api};
use crate::support::World;
use crate::support::wait;

const BIN: &str = env!("CARGO_BIN_EXE_keyfire");

/// A run the `mem` handler saw: its job id, attempt, and when it started.
type Fired = Arc<Mutex<Vec<(String, u32, tokio::time::Instant)>>>;

/// The job ids of the runs in `fired`, sorted.
fn fired_ids(fired: &Fired) -> Vec<String> {
    let mut ids: Vec<String> = fired.lock().unwrap().iter().map(|r| r.0.clone()).collect();
    ids.sort();
    ids
}

/// A world on a Redis of 3 MB with noeviction, an API over it with figures read every
/// 100 ms, and a registry whose `mem` handler records its runs in memory (a recorder that
/// writes to Redis would be refused with everything else); with params `{"fail_first": true}`
/// its first attempt fails.
async fn full_world() -> (Api, Registry, Fired) {
    let options = RedisOptions {
        extra: vec![
            ("maxmemory".into(), "3mb".into()),
            ("maxmemory-policy".into(), "noeviction".into()),
        ],
        ..RedisOptions::default()
    };
    let mut world = World::with(options).await;
    world.settings.metrics.min_interval = Duration::from_millis(100);
    let fired: Fired = Arc::default();
    let mut registry = Registry::with_builtins();
    let f = fired.clone();
    registry.register("mem", move |firing: Firing| {
        let f = f.clone();
        async move {
            f.lock().unwrap().push((
                firing.job_id.clone(),
                firing.attempt,
                tokio::time::Instant::now(),
            ));
            if firing.attempt == 1 && firing.params["fail_first"] == json!(true) {
                return Err(HandlerError::retry("the first attempt fails"));
            }
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
pub(crate) async fn used_memory(api: &Api) -> u64 {
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
pub(crate) async fn set_maxmemory(api: &Api, bytes: u64) {
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
async fn writes_refused_plainly_by_a_full_redis_come_back_when_memory_is_freed() {
    let (api, registry, fired) = full_world().await;
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
    assert!(
        tokio::time::Instant::now() < later_due,
        "filling took past the one-shot firings' instant"
    );
    // The add goes as a script in a pipeline: the refusal is found inside the pipeline's error.
    assert_redis_full(&refused, "the add that filled Redis");

    // Every write that adds work is refused the same way: adds, creates, enqueues.
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
    // The library says the same.
    let e = queue
        .add_task(NewTask::new("fill", json!({"n": 1})))
        .await
        .unwrap_err();
    assert!(e.is_redis_full(), "{e:?}");

    // Consumers drain the queue: a pop (it moves a task to the reserved set and writes its
    // token), a finish (it drops the payload), a delete (it drops the task).
    let popped = api.post("/v1/topics/fill/pop", None).await;
    assert_eq!(popped.status, StatusCode::OK, "{}", popped.body);
    let finished = api
        .post(
            &format!("/v1/topics/work/tasks/{}/finish", held[0].id),
            Some(json!({"token": held[0].token})),
        )
        .await;
    assert_eq!(finished.status, StatusCode::NO_CONTENT, "{}", finished.body);
    queue
        .finish(
            popped.body["id"].as_str().unwrap(),
            popped.body["token"].as_str().unwrap(),
        )
        .await
        .unwrap();
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

    // The node's heartbeat runs at the limit: it stays in the live set, claims the firings
    // that come due, and their runs are recorded, all while Redis is full.
    let nodes = api.get("/v1/nodes").await;
    assert_eq!(nodes.status, StatusCode::OK, "{}", nodes.body);
    assert!(nodes.body.to_string().contains("full-1"), "{}", nodes.body);
    wait::until(
        "the firings due once Redis was full",
        Duration::from_secs(8) + later_due.saturating_duration_since(tokio::time::Instant::now()),
        || async { (fired_ids(&fired) == ["later0", "later1", "later2"]).then_some(()) },
    )
    .await;
    let runs: Value = wait::until("their run records", Duration::from_secs(5), || async {
        let r = api.get("/v1/jobs/later2/runs").await;
        (r.body["runs"][0]["outcome"] == "ok").then_some(r.body)
    })
    .await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
    assert_redis_full(
        &api.post("/v1/topics/fill/tasks", Some(task.clone())).await,
        "still full",
    );

    // Memory freed (here: a higher limit): writes go through, /readyz says ready.
    set_maxmemory(&api, 64 * 1024 * 1024).await;
    let added = api.post("/v1/topics/fill/tasks", Some(task)).await;
    assert_eq!(added.status, StatusCode::CREATED, "{}", added.body);
    let ready: Value = wait::until("ready again", Duration::from_secs(5), || async {
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

/// Fill Redis with junk keys outside keyfire's prefix (16 KB each) until it refuses one, then
/// put `maxmemory` below what Redis uses (as [`fill`] does). Returns the junk keys.
async fn fill_with_junk(api: &Api) -> Vec<String> {
    let mut c = api.world.conn().await;
    let value = "j".repeat(16 * 1024);
    let mut keys = Vec::new();
    loop {
        let key = format!("junk:{}", keys.len());
        match redis::cmd("SET")
            .arg(&key)
            .arg(&value)
            .query_async::<()>(&mut c)
            .await
        {
            Ok(()) => keys.push(key),
            Err(e) => {
                assert!(e.to_string().contains("OOM"), "{e}");
                break;
            }
        }
        assert!(keys.len() < 1_000, "3 MB took over 1,000 keys of 16 KB");
    }
    let used = used_memory(api).await;
    set_maxmemory(api, used - 256 * 1024).await;
    keys
}

/// Whether Redis refuses a junk key for memory.
async fn refuses_junk(api: &Api) -> bool {
    redis::cmd("SET")
        .arg("junk:probe")
        .arg("x")
        .query_async::<()>(&mut api.world.conn().await)
        .await
        .is_err_and(|e| e.to_string().contains("OOM"))
}

/// Creating a job, enqueuing a one-shot task and adding a topic task: each answered 507.
async fn assert_new_work_refused(api: &Api, when: &str) {
    assert_redis_full(
        &api.put("/v1/jobs/new", json!({"every": "1s", "handler": "mem"}))
            .await,
        &format!("create a job, {when}"),
    );
    assert_redis_full(
        &api.post("/v1/tasks", Some(json!({"handler": "mem", "after": "1s"})))
            .await,
        &format!("enqueue a one-shot task, {when}"),
    );
    assert_redis_full(
        &api.post("/v1/topics/work/tasks", Some(json!({"payload": 1})))
            .await,
        &format!("add a topic task, {when}"),
    );
}

/// The warnings and errors logged on a test's own runtime (its node, its API, its clients):
/// each thread of that runtime logs here, and no other thread does.
#[derive(Clone, Default)]
struct Logged(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logged {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logged {
    fn lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .map(String::from)
            .collect()
    }

    /// Run `test` on a runtime of 4 worker threads whose warnings and errors go here.
    fn run(&self, test: impl std::future::Future<Output = ()>) {
        let writer = self.clone();
        let dispatch = tracing::Dispatch::new(
            tracing_subscriber::fmt()
                .with_max_level(tracing::Level::WARN)
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .finish(),
        );
        let each = dispatch.clone();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            // The thread's default for its whole life (the guard is never dropped).
            .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&each)))
            .build()
            .unwrap();
        tracing::dispatcher::with_default(&dispatch, || runtime.block_on(test));
    }
}

/// How long the test keeps Redis full.
const FULL_FOR: Duration = Duration::from_secs(60);

/// A minute at `maxmemory`, Redis filled with keys that are not keyfire's: the work already
/// there runs (one-shot tasks, a retry, a cron job every second, a consumer draining a topic),
/// the node never fences itself, and new work is refused with 507 until the junk is deleted.
#[test]
fn a_minute_at_maxmemory_refuses_only_new_work() {
    let logged = Logged::default();
    logged.run(a_minute_at_maxmemory(logged.clone()));
}

async fn a_minute_at_maxmemory(logged: Logged) {
    let (api, mut registry, fired) = full_world().await;
    // The node promotes the delay queue's topics.
    keyfire::queue::serve_topics(&mut registry, &api.world.settings.redis);
    let mut s = api.world.settings.clone();
    s.node.id = "full-minute".into();
    let node = Node::new(s.library(), registry).start().await.unwrap();
    let node_id = node.id().to_string();

    // Before Redis is full: one-shot tasks due during the full minute (filling takes well
    // under a second), one that fails its first attempt, a cron job every second, and four
    // topic tasks, two ready and two due in 15 s.
    let start = tokio::time::Instant::now();
    let mut once = Vec::new();
    for after in [5, 20, 35, 50] {
        let r = api
            .post(
                "/v1/tasks",
                Some(json!({"handler": "mem", "after": format!("{after}s")})),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let id = r.body["id"].as_str().unwrap().to_string();
        once.push((id, start + Duration::from_secs(after)));
    }
    let r = api
        .post(
            "/v1/tasks",
            Some(
                json!({"handler": "mem", "after": "10s", "params": {"fail_first": true},
                "retry": {"max_attempts": 3, "backoff": "fixed", "interval": "1s"}}),
            ),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let flaky = r.body["id"].as_str().unwrap().to_string();
    let r = api
        .put(
            "/v1/jobs/tick",
            json!({"cron": "* * * * * *", "handler": "mem"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let queue = Queue::connect(&api.world.settings.library()).await.unwrap();
    let mut topic_tasks = Vec::new();
    for i in 0..4 {
        let task = NewTask::new("work", json!({"n": i}));
        let task = if i < 2 {
            task
        } else {
            task.delay(Duration::from_secs(15))
        };
        topic_tasks.push(queue.add_task(task).await.unwrap());
    }

    let junk = fill_with_junk(&api).await;
    let full_at = tokio::time::Instant::now();
    assert!(
        full_at < start + Duration::from_secs(5),
        "filling took past the first one-shot firing's instant"
    );
    assert_new_work_refused(&api, "once full").await;

    // A consumer drains the topic: it pops the ready tasks, touches one, finishes both, then
    // pops and finishes the delayed ones once the node's promotion made them ready.
    let consumer = {
        let queue = queue.clone();
        tokio::spawn(async move {
            let mut done = queue.pop_many("work", 2, Duration::ZERO).await.unwrap();
            assert_eq!(done.len(), 2, "the ready tasks");
            queue
                .touch(&done[0].id, &done[0].token, Some(Duration::from_secs(60)))
                .await
                .unwrap();
            while done.len() < 4 {
                let got = queue
                    .pop_many("work", 2, Duration::from_secs(25))
                    .await
                    .unwrap();
                assert!(!got.is_empty(), "the delayed tasks did not become ready");
                done.extend(got);
            }
            for t in &done {
                queue.finish(&t.id, &t.token).await.unwrap();
            }
            done.into_iter().map(|t| t.id).collect::<Vec<_>>()
        })
    };

    // The full minute: the node stays in the live set (as Redis says, and as it saw it at its
    // last heartbeat); new work is refused half way too.
    let mut used_half_way = None;
    while full_at.elapsed() < FULL_FOR {
        let nodes = api.get("/v1/nodes").await;
        assert_eq!(nodes.status, StatusCode::OK, "{}", nodes.body);
        assert_eq!(
            nodes.body["nodes"][0]["id"],
            node_id.as_str(),
            "{}",
            nodes.body
        );
        assert!(node.live_nodes().contains(&node_id));
        if used_half_way.is_none() && full_at.elapsed() >= FULL_FOR / 2 {
            assert_new_work_refused(&api, "half way").await;
            used_half_way = Some(used_memory(&api).await);
        }
        // Paces the looks over the full minute: what is checked must hold all along, so
        // there is nothing to wait for.
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let end = tokio::time::Instant::now();
    // The second half minute added little (run records, trimmed to their cap; the first also
    // loaded scripts and reserved tasks), and Redis stayed full.
    let (half_way, used_at_end) = (used_half_way.unwrap(), used_memory(&api).await);
    assert!(
        used_at_end < half_way + 128 * 1024,
        "{half_way} bytes used half way, {used_at_end} at the end"
    );
    assert!(refuses_junk(&api).await, "Redis was no longer full");
    assert_new_work_refused(&api, "after a minute").await;

    // No node fenced itself: every heartbeat went through.
    let lines = logged.lines();
    let fenced: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("fencing this node") || l.contains("heartbeat failed"))
        .collect();
    assert!(fenced.is_empty(), "{fenced:#?}");
    // Nor did any outcome fail to be recorded.
    let unrecorded: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("could not record runs"))
        .collect();
    assert!(unrecorded.is_empty(), "{unrecorded:#?}");

    // The cron job fired every second all minute long, and its runs were recorded.
    let during: Vec<tokio::time::Instant> = fired
        .lock()
        .unwrap()
        .iter()
        .filter(|(id, _, at)| id == "tick" && *at >= full_at && *at < end)
        .map(|r| r.2)
        .collect();
    let mut gaps = vec![during.first().map_or(FULL_FOR, |t| *t - full_at)];
    gaps.extend(during.windows(2).map(|w| w[1] - w[0]));
    gaps.push(during.last().map_or(FULL_FOR, |t| end - *t));
    let longest = gaps.iter().max().unwrap();
    assert!(
        during.len() >= 55 && *longest < Duration::from_secs(3),
        "{} ticks in the full minute, the longest gap {longest:?}",
        during.len()
    );
    let now_ms = api.world.redis_ms().await;
    let runs: Value = wait::until("the tick's latest run", Duration::from_secs(3), || async {
        let r = api.get("/v1/jobs/tick/runs").await;
        let finished =
            chrono::DateTime::parse_from_rfc3339(r.body["runs"][0]["finished_at"].as_str()?)
                .ok()?;
        (finished.timestamp_millis() >= now_ms - 2_000).then_some(r.body)
    })
    .await;
    assert_eq!(runs["runs"][0]["outcome"], "ok", "{runs}");

    // The one-shot tasks fired on time, and their runs were recorded; the one that fails its
    // first attempt was retried and succeeded.
    let seen = fired.lock().unwrap().clone();
    for (id, due) in &once {
        let at = seen.iter().find(|r| &r.0 == id).map(|r| r.2);
        assert!(
            at.is_some_and(|at| at < *due + Duration::from_secs(2)),
            "{id} due {:?} after the start fired at {:?}",
            *due - start,
            at.map(|at| at - start)
        );
        let runs = api.get(&format!("/v1/jobs/{id}/runs")).await;
        assert_eq!(runs.body["runs"][0]["outcome"], "ok", "{}", runs.body);
    }
    let attempts: Vec<u32> = seen.iter().filter(|r| r.0 == flaky).map(|r| r.1).collect();
    assert_eq!(attempts, [1, 2], "{seen:?}");
    let runs = api.get(&format!("/v1/jobs/{flaky}/runs")).await;
    let fates: Vec<&Value> = runs.body["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["fate"])
        .collect();
    assert_eq!(fates, [&json!("done"), &json!("retry")], "{}", runs.body);

    // The consumer popped and finished the four topic tasks.
    let mut drained = consumer.await.unwrap();
    drained.sort();
    topic_tasks.sort();
    assert_eq!(drained, topic_tasks);
    for id in &topic_tasks {
        assert_eq!(queue.get(id).await.unwrap().state, TaskState::Done, "{id}");
    }

    // Memory freed (the junk deleted): new work goes in and runs.
    let _: () = redis::cmd("DEL")
        .arg(&junk)
        .query_async(&mut api.world.conn().await)
        .await
        .unwrap();
    assert!(!refuses_junk(&api).await);
    let r = api
        .put("/v1/jobs/after", json!({"after": "1s", "handler": "mem"}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = api
        .post("/v1/tasks", Some(json!({"handler": "mem", "after": "1s"})))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let task = r.body["id"].as_str().unwrap().to_string();
    let r = api
        .post("/v1/topics/work/tasks", Some(json!({"payload": 1})))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    wait::until("the new work to fire", Duration::from_secs(10), || async {
        let f = fired_ids(&fired);
        (f.contains(&"after".to_string()) && f.contains(&task)).then_some(())
    })
    .await;
    node.shutdown().await;
}
