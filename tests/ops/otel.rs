//! OpenTelemetry traces: `keyfire serve` with `[telemetry]` on exports its spans over
//! OTLP/HTTP to a collector the test runs (a real HTTP server decoding the protobuf requests
//! with the OpenTelemetry proto types), and the ids it exports are the ones the webhook
//! receiver saw in `traceparent`. Off, it sends nothing; a collector that never answers does
//! not make firings late; bad settings stop the node naming the setting.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use keyfire_testkit::RedisServer;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode as OtlpStatus;
use prost::Message;
use serde_json::{Value, json};

use crate::support::{json_of, wait};
use keyfire_testkit::free_port;

/// The trace of the request that creates the traced job.
const CREATOR: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
/// The trace of the request that adds a task to a topic.
const ADDER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// A collector: every span of every `POST /v1/traces`, and how many requests came.
#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Span>>>,
    requests: Arc<AtomicUsize>,
}

async fn collect(State(c): State<Collector>, body: Bytes) -> StatusCode {
    c.requests.fetch_add(1, Ordering::SeqCst);
    let Ok(req) = ExportTraceServiceRequest::decode(body) else {
        return StatusCode::BAD_REQUEST;
    };
    let mut spans = c.spans.lock().unwrap();
    for rs in req.resource_spans {
        for ss in rs.scope_spans {
            spans.extend(ss.spans);
        }
    }
    StatusCode::OK
}

async fn start_collector() -> (SocketAddr, Collector) {
    let c = Collector::default();
    let app = Router::new()
        .route("/v1/traces", post(collect))
        .with_state(c.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, c)
}

/// One delivery the webhook receiver got.
#[derive(Debug, Clone)]
struct Delivery {
    path: &'static str,
    traceparent: String,
    attempt: String,
    scheduled_at: String,
    at: chrono::DateTime<chrono::Utc>,
}

/// A webhook receiver: `/ok` answers 200, `/flaky` 500 on its first call and 200 after.
#[derive(Clone, Default)]
struct Receiver {
    seen: Arc<Mutex<Vec<Delivery>>>,
}

impl Receiver {
    fn record(&self, path: &'static str, h: &HeaderMap) -> usize {
        let text = |name: &str| {
            h.get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        let mut seen = self.seen.lock().unwrap();
        seen.push(Delivery {
            path,
            traceparent: text("traceparent"),
            attempt: text("keyfire-attempt"),
            scheduled_at: text("keyfire-scheduled-at"),
            at: chrono::Utc::now(),
        });
        seen.iter().filter(|d| d.path == path).count()
    }

    fn of(&self, path: &str) -> Vec<Delivery> {
        let seen = self.seen.lock().unwrap();
        seen.iter().filter(|d| d.path == path).cloned().collect()
    }
}

async fn start_receiver() -> (SocketAddr, Receiver) {
    let r = Receiver::default();
    let app = Router::new()
        .route(
            "/ok",
            get(|State(r): State<Receiver>, h: HeaderMap| async move {
                r.record("/ok", &h);
                StatusCode::OK
            }),
        )
        .route(
            "/flaky",
            get(|State(r): State<Receiver>, h: HeaderMap| async move {
                if r.record("/flaky", &h) == 1 {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::OK
                }
            }),
        )
        .with_state(r.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, r)
}

/// A running `keyfire serve` and its stdout lines.
struct Node {
    child: Child,
    api: String,
    lines: Arc<Mutex<Vec<String>>>,
    /// Reads stdout into `lines` until it closes (the process exited).
    reader: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Node {
    /// `keyfire serve` on `redis`, its API on a free port, with `extra` TOML appended.
    fn start(redis: &RedisServer, name: &str, extra: &str) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let config = dir.path().join("keyfire.toml");
        std::fs::write(
            &config,
            format!(
                r#"
[redis]
url = "{url}"
prefix = "otel-{name}"

[node]
id = "{name}"

[api]
listen = "127.0.0.1:{port}"

[log]
format = "json"
level = "info"
{extra}
"#,
                url = redis.url()
            ),
        )
        .unwrap();
        let mut child = serve(&config).stdout(Stdio::piped()).spawn().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().unwrap();
        let sink = lines.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        Node {
            child,
            api: format!("http://127.0.0.1:{port}"),
            lines,
            reader: Some(reader),
            _dir: dir,
        }
    }

    /// `start` with `[telemetry]` exporting every span to `endpoint` (`enabled` or not), then
    /// ready; with a client to call it.
    async fn traced(
        redis: &RedisServer,
        name: &str,
        endpoint: impl std::fmt::Display,
        enabled: bool,
    ) -> (Node, reqwest::Client) {
        let enabled = if enabled { "enabled = true\n" } else { "" };
        let node = Node::start(
            redis,
            name,
            &format!(
                "[telemetry]\n{enabled}endpoint = \"http://{endpoint}\"\nsampling_ratio = 1.0\n"
            ),
        );
        let http = client();
        node.ready(&http).await;
        (node, http)
    }

    async fn ready(&self, http: &reqwest::Client) {
        wait::until(
            "the node to be ready",
            Duration::from_secs(30),
            async || match http.get(format!("{}/readyz", self.api)).send().await {
                Ok(r) if r.status().is_success() => Ok(()),
                Ok(r) => Err(format!("/readyz: {}", r.status())),
                Err(e) => Err(e.to_string()),
            },
        )
        .await;
    }

    async fn create(&self, http: &reqwest::Client, job: Value, traceparent: Option<&str>) {
        let mut req = http.post(format!("{}/v1/jobs", self.api)).json(&job);
        if let Some(tp) = traceparent {
            req = req.header("traceparent", tp);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 201, "{}", resp.text().await.unwrap());
    }

    /// SIGTERM, then the exit status must be a success (traces flushed on the way out).
    fn stop(mut self) -> Vec<String> {
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
        let status = self.child.wait().unwrap();
        assert!(status.success(), "keyfire serve exited with {status}");
        // Every line it wrote: its stdout read to the end.
        self.reader.take().unwrap().join().unwrap();
        self.lines.lock().unwrap().clone()
    }
}

fn serve(config: &std::path::Path) -> Command {
    let mut cmd = crate::support::keyfire_serve(config);
    for (k, _) in std::env::vars() {
        if k.starts_with("OTEL_") {
            cmd.env_remove(k);
        }
    }
    cmd.stderr(Stdio::inherit());
    cmd
}

fn client() -> reqwest::Client {
    crate::support::install_tls_provider();
    reqwest::Client::new()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A span's attributes, as text (strings as they are, integers in decimal).
fn attrs(span: &Span) -> HashMap<String, String> {
    span.attributes
        .iter()
        .filter_map(|kv| {
            let v = match kv.value.as_ref()?.value.as_ref()? {
                any_value::Value::StringValue(s) => s.clone(),
                any_value::Value::IntValue(i) => i.to_string(),
                any_value::Value::BoolValue(b) => b.to_string(),
                other => format!("{other:?}"),
            };
            Some((kv.key.clone(), v))
        })
        .collect()
}

/// `(trace id, parent id)` of a `traceparent` header.
fn ids(traceparent: &str) -> (String, String) {
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "not a traceparent: {traceparent}");
    (parts[1].to_string(), parts[2].to_string())
}

fn by_id<'a>(spans: &'a [Span], id: &[u8]) -> &'a Span {
    spans
        .iter()
        .find(|s| s.span_id == id)
        .unwrap_or_else(|| panic!("no span {}", hex(id)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_are_exported_with_the_ids_the_receiver_saw() {
    let redis = RedisServer::start().expect("redis-server");
    let (collector_addr, collector) = start_collector().await;
    let (receiver_addr, receiver) = start_receiver().await;
    let (node, http) = Node::traced(&redis, "traced", collector_addr, true).await;
    node.create(
        &http,
        json!({"id": "traced-ok", "after": "1s", "handler": "http",
               "params": {"url": format!("http://{receiver_addr}/ok")}}),
        Some(CREATOR),
    )
    .await;
    node.create(
        &http,
        json!({"id": "traced-flaky", "after": "1s", "handler": "http",
               "params": {"url": format!("http://{receiver_addr}/flaky")},
               "retry": {"max_attempts": 2, "interval": "1s", "jitter": false}}),
        None,
    )
    .await;
    wait::until("the deliveries", Duration::from_secs(30), async || {
        receiver.of("/ok").len() == 1 && receiver.of("/flaky").len() == 2
    })
    .await;
    // A task through the delay queue: added under ADDER, popped, finished.
    let added: Value = json_of(
        http.post(format!("{}/v1/topics/work/tasks", node.api))
            .header("traceparent", ADDER)
            .json(&json!({"payload": {"n": 1}})),
    )
    .await;
    let task_id = added["id"].as_str().unwrap().to_string();
    let popped: Value =
        json_of(http.post(format!("{}/v1/topics/work/pop?wait=5s", node.api))).await;
    assert_eq!(popped["id"], task_id.as_str());
    let finished = http
        .post(format!("{}/v1/tasks/{task_id}/finish", node.api))
        .json(&json!({"token": popped["token"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(finished.status(), 204);
    // Three attempts: a run span each, with its handler and http children; the queue's three.
    wait::until("the spans", Duration::from_secs(30), async || {
        let spans = collector.spans.lock().unwrap();
        spans.iter().filter(|s| s.name == "run").count() >= 3
            && spans.iter().filter(|s| s.name == "GET").count() >= 3
            && ["queue.add", "queue.pop", "queue.finish"]
                .iter()
                .all(|n| spans.iter().any(|s| s.name == *n))
    })
    .await;
    let lines = node.stop();
    let spans = collector.spans.lock().unwrap().clone();

    // The delivery: its span has the ids the receiver got, under the handler, under the run.
    let ok = &receiver.of("/ok")[0];
    let (trace, parent) = ids(&ok.traceparent);
    assert!(
        ok.traceparent.ends_with("-01"),
        "sampled: {}",
        ok.traceparent
    );
    let delivery = by_id(&spans, &hex_bytes(&parent));
    assert_eq!(delivery.name, "GET");
    assert_eq!(hex(&delivery.trace_id), trace);
    assert_eq!(delivery.kind, 3, "a client span");
    let d = attrs(delivery);
    assert_eq!(d["http.request.method"], "GET");
    assert_eq!(d["http.response.status_code"], "200");
    assert_eq!(d["url.full"], format!("http://{receiver_addr}/ok"));
    let handler = by_id(&spans, &delivery.parent_span_id);
    assert_eq!(handler.name, "handler");
    assert_eq!(attrs(handler)["keyfire.handler"], "http");
    let run = by_id(&spans, &handler.parent_span_id);
    assert_eq!(run.name, "run");
    assert!(
        run.parent_span_id.is_empty(),
        "the attempt's span is a root"
    );
    assert_eq!(hex(&run.trace_id), trace);
    let a = attrs(run);
    assert_eq!(a["keyfire.job.id"], "traced-ok");
    assert!(a["keyfire.firing.id"].starts_with("traced-ok:"), "{a:?}");
    assert_eq!(a["keyfire.attempt"], "1");
    assert_eq!(a["keyfire.outcome"], "ok");
    assert_eq!(a["keyfire.fate"], "done");
    assert_eq!(a["keyfire.scheduled_at"], ok.scheduled_at);
    let lateness: i64 = a["keyfire.lateness_ms"].parse().unwrap();
    assert!((0..5_000).contains(&lateness), "lateness {lateness}");
    assert_ne!(
        run.status.as_ref().map(|s| s.code),
        Some(OtlpStatus::Error as i32)
    );
    // The job was created under CREATOR: its firing links to that trace.
    let (creator_trace, creator_span) = ids(CREATOR);
    assert_eq!(run.links.len(), 1, "{:?}", run.links);
    assert_eq!(hex(&run.links[0].trace_id), creator_trace);
    assert_eq!(hex(&run.links[0].span_id), creator_span);

    // The flaky job: two attempts in one trace, the first an error with its message.
    let flaky = receiver.of("/flaky");
    let (t1, p1) = ids(&flaky[0].traceparent);
    let (t2, p2) = ids(&flaky[1].traceparent);
    assert_eq!(t1, t2, "every attempt of a firing is one trace");
    assert_ne!(p1, p2);
    assert_eq!(
        (flaky[0].attempt.as_str(), flaky[1].attempt.as_str()),
        ("1", "2")
    );
    let runs: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "run" && hex(&s.trace_id) == t1)
        .collect();
    assert_eq!(runs.len(), 2, "one run span per attempt");
    for (n, p) in [(1, &p1), (2, &p2)] {
        let delivery = by_id(&spans, &hex_bytes(p));
        let run = by_id(
            &spans,
            &by_id(&spans, &delivery.parent_span_id).parent_span_id,
        );
        let a = attrs(run);
        assert_eq!(a["keyfire.attempt"], n.to_string());
        assert!(run.links.is_empty(), "created without a traceparent");
        let status = run.status.clone().unwrap_or_default();
        if n == 1 {
            assert_eq!(a["keyfire.outcome"], "failed");
            assert_eq!(a["keyfire.fate"], "retry");
            assert_eq!(status.code, OtlpStatus::Error as i32);
            assert!(status.message.contains("status 500"), "{}", status.message);
            let ds = delivery.status.clone().unwrap_or_default();
            assert_eq!(ds.code, OtlpStatus::Error as i32);
            assert_eq!(attrs(delivery)["http.response.status_code"], "500");
        } else {
            assert_eq!(a["keyfire.outcome"], "ok");
            assert_ne!(status.code, OtlpStatus::Error as i32);
        }
    }

    // The queue: the add continues ADDER's trace, the pop links to the add, the finish names
    // the task.
    let named = |name: &str| spans.iter().find(|s| s.name == name).unwrap();
    let (adder_trace, adder_span) = ids(ADDER);
    let add = named("queue.add");
    assert_eq!(hex(&add.trace_id), adder_trace);
    assert_eq!(hex(&add.parent_span_id), adder_span);
    assert_eq!(add.kind, 4, "a producer span");
    assert_eq!(attrs(add)["messaging.destination.name"], "work");
    let pop = named("queue.pop");
    assert_eq!(pop.kind, 5, "a consumer span");
    assert_eq!(attrs(pop)["messaging.batch.message_count"], "1");
    assert_eq!(pop.links.len(), 1, "{:?}", pop.links);
    assert_eq!(pop.links[0].trace_id, add.trace_id);
    assert_eq!(pop.links[0].span_id, add.span_id);
    let finish = named("queue.finish");
    assert_eq!(attrs(finish)["messaging.message.id"], task_id);
    assert_ne!(
        finish.status.as_ref().map(|s| s.code),
        Some(OtlpStatus::Error as i32)
    );

    // The JSON log line of the failed attempt carries its trace and span.
    let failed_run = runs
        .iter()
        .find(|r| attrs(r)["keyfire.attempt"] == "1")
        .unwrap();
    let line = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| {
            l["fields"]["message"] == "run did not succeed" && l["span"]["job"] == "traced-flaky"
        })
        .unwrap_or_else(|| panic!("no failed-run line:\n{}", lines.join("\n")));
    assert_eq!(line["trace_id"], t1);
    assert_eq!(line["span_id"], hex(&failed_run.span_id));
}

fn hex_bytes(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_off_sends_nothing() {
    let redis = RedisServer::start().expect("redis-server");
    let (collector_addr, collector) = start_collector().await;
    let (receiver_addr, receiver) = start_receiver().await;
    // Everything but `enabled`.
    let (node, http) = Node::traced(&redis, "untraced", collector_addr, false).await;
    node.create(
        &http,
        json!({"id": "untraced", "after": "1s", "handler": "http",
               "params": {"url": format!("http://{receiver_addr}/ok")}}),
        Some(CREATOR),
    )
    .await;
    wait::until("the delivery", Duration::from_secs(30), async || {
        receiver.of("/ok").len() == 1
    })
    .await;
    // Time passing on purpose, to show nothing is sent: longer than the batch processor's
    // delay, then the shutdown that would flush it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let lines = node.stop();
    assert_eq!(collector.requests.load(Ordering::SeqCst), 0);
    // The header is still sent, derived from the firing as always.
    assert!(receiver.of("/ok")[0].traceparent.starts_with("00-"));
    assert!(
        lines.iter().all(|l| !l.contains("\"trace_id\"")),
        "no trace ids in the logs without traces"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_never_answers_does_not_delay_firings() {
    let redis = RedisServer::start().expect("redis-server");
    // A blackhole: accepts connections and never answers.
    let blackhole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hole = blackhole.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in blackhole.incoming() {
            count.fetch_add(1, Ordering::SeqCst);
            held.push(conn);
        }
    });
    let (receiver_addr, receiver) = start_receiver().await;
    let (node, http) = Node::traced(&redis, "blackholed", hole, true).await;
    node.create(
        &http,
        json!({"id": "beat", "every": "1s", "handler": "http",
               "params": {"url": format!("http://{receiver_addr}/ok")}}),
        None,
    )
    .await;
    wait::until("six beats", Duration::from_secs(30), async || {
        receiver.of("/ok").len() >= 6
    })
    .await;
    // The exporter is stuck on the blackhole all along (its timeout is 10 s)...
    assert!(accepted.load(Ordering::SeqCst) >= 1, "the export was tried");
    // ...and every beat was delivered on time all the same.
    for d in receiver.of("/ok") {
        let due = chrono::DateTime::parse_from_rfc3339(&d.scheduled_at).unwrap();
        let late = d.at.signed_duration_since(due).num_milliseconds();
        assert!(late < 1_500, "a beat {late} ms late: {d:?}");
    }
    let started = Instant::now();
    node.stop();
    // The shutdown's flush is bounded too.
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn bad_telemetry_settings_stop_the_node_naming_the_setting() {
    for (toml, setting) in [
        (
            "enabled = true\nsampling_ratio = 1.5",
            "telemetry.sampling_ratio",
        ),
        (
            "enabled = true\nendpoint = \"127.0.0.1:4318\"",
            "telemetry.endpoint",
        ),
        (
            "enabled = true\nendpoint = \"http://127.0.0.1:port\"",
            "telemetry.endpoint",
        ),
        ("protocol = \"grpc\"", "telemetry.protocol"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("keyfire.toml");
        std::fs::write(
            &config,
            format!("[api]\nenabled = false\n\n[telemetry]\n{toml}\n"),
        )
        .unwrap();
        let out = serve(&config)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{toml}: {err}");
        assert!(err.contains(setting), "{toml}: {err}");
    }
}
