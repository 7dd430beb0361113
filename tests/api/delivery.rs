//! HTTP delivery that services can trust, run by a real node against real receivers:
//! Standard Webhooks signatures verified by the spec's own Python library, the delivery
//! headers, the guard against server-side request forgery, callbacks, and secrets that are
//! checked on the way in and never shown back.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::any;
use keyfire::handler::webhook::{self, SigningSecret, WebhookHeaders};
use keyfire::store::RunRecord;
use keyfire::{Client, Error, JobSpec, Node, Registry};
use keyfire_server::settings::ServerSettings;
use serde_json::{Value, json};

use crate::common::Api;
use crate::support::{World, json_of, wait};

const NO_MATCH: &str = "No matching signature found";
const TOO_OLD: &str = "Message timestamp too old";
const TOO_NEW: &str = "Message timestamp too new";
const INSTALL: &str = "python3 -m pip install --user 'standardwebhooks==1.1.0'";

/// A `whsec_` secret of 32 bytes of `b`.
fn secret(b: u8) -> String {
    SigningSecret::from_key(vec![b; 32]).expose()
}

/// A node of `w` (its `http` handler as `keyfire serve` builds it) after `change`, and a client
/// that checks writes against the same settings.
async fn node_with(
    w: &World,
    change: impl FnOnce(&mut ServerSettings),
) -> (keyfire::engine::NodeHandle, Client) {
    let mut settings = w.settings.clone();
    settings.node.id = "deliver".into();
    change(&mut settings);
    let settings = settings.library();
    let registry = Registry::for_node(&settings).unwrap();
    let names = registry.names();
    let node = Node::new(settings.clone(), registry).start().await.unwrap();
    let client = Client::connect(&settings)
        .await
        .unwrap()
        .allow_handlers(names);
    (node, client)
}

/// A one-shot `http` job due now, with `attempts` attempts 100 ms apart.
async fn deliver(client: &Client, id: &str, params: Value, attempts: u32) {
    let spec = JobSpec::after(id, "0s", "http")
        .params(params)
        .retry(keyfire::job::RetrySpec {
            max_attempts: Some(attempts),
            interval: Some("100ms".into()),
            backoff: Some("fixed".into()),
            ..Default::default()
        });
    client.upsert(spec).await.unwrap();
}

/// Wait for `n` run records of `id`; oldest first.
async fn runs(client: &Client, id: &str, n: usize) -> Vec<RunRecord> {
    let mut runs = wait::until(
        &format!("{n} runs of {id}"),
        Duration::from_secs(20),
        || async {
            let r = client.runs(id, 10).await.unwrap();
            (r.len() >= n).then_some(r)
        },
    )
    .await;
    runs.sort_by_key(|r| r.attempt);
    runs
}

fn http_client() -> reqwest::Client {
    crate::support::install_tls_provider();
    reqwest::Client::new()
}

/// The Standard Webhooks receiver in Python, or `None` (the test skips) when python3 or the
/// `standardwebhooks` package is missing; under `CI=true` a missing library fails the test.
fn standard_webhooks_python() -> Option<()> {
    let found = Command::new("python3")
        .args(["-c", "import standardwebhooks.webhooks"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return Some(());
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "python3 with the `standardwebhooks` package is required under CI; install it with: {INSTALL}"
        );
    }
    eprintln!("skipping: python3 with `standardwebhooks` is missing ({INSTALL})");
    None
}

/// The Python receiver process, killed on drop.
struct PyReceiver {
    child: Child,
    base: String,
}

impl PyReceiver {
    fn start(secrets: &[&str]) -> Self {
        use std::io::BufRead;
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/api/standard_webhooks_receiver.py"
        );
        let mut child = Command::new("python3")
            .arg(script)
            .arg(serde_json::to_string(secrets).unwrap())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start python3");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line.trim().parse().expect("the receiver prints its port");
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    async fn log(&self) -> Vec<Value> {
        json_of(http_client().get(format!("{}/log", self.base))).await
    }
}

impl Drop for PyReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standard_webhooks_library_verifies_real_deliveries_and_rotation() {
    let Some(()) = standard_webhooks_python() else {
        return;
    };
    let (old, new, host, other) = (secret(1), secret(2), secret(3), secret(4));
    let rx = PyReceiver::start(&[&old, &new, &host, &other]);
    let w = World::new().await;
    let (node, client) = node_with(&w, |s| {
        s.handlers
            .http
            .signing_secrets
            .insert("127.0.0.1".into(), vec![host.clone()]);
    })
    .await;

    let hook = format!("{}/hook", rx.base);
    // A JSON body signed by the job's secret.
    deliver(
        &client,
        "json-old",
        json!({"url": hook, "body": {"order": 42, "note": "grüße", "firing": "{{firing_id}}"},
               "signing_secrets": [old]}),
        1,
    )
    .await;
    // A rotation: the job carries the new and the old secret; both sign.
    deliver(
        &client,
        "text-rotating",
        json!({"url": hook, "method": "PUT", "body": "plain {{firing_id}}",
               "signing_secrets": [new, old]}),
        1,
    )
    .await;
    // No body, no job secret: the secret configured for the target host signs.
    deliver(&client, "get-host", json!({"url": hook}), 1).await;

    let mut firing_ids = std::collections::HashMap::new();
    for id in ["json-old", "text-rotating", "get-host"] {
        let run = runs(&client, id, 1).await.remove(0);
        assert_eq!(run.outcome, "ok", "the receiver accepted {id}: {run:?}");
        firing_ids.insert(id, run.firing_id);
    }

    let log = rx.log().await;
    assert_eq!(log.len(), 3, "{log:#?}");
    for entry in &log {
        let job = entry["headers"]["keyfire-job-id"].as_str().unwrap();
        let verdicts =
            |key: &str| -> Vec<String> { serde_json::from_value(entry[key].clone()).unwrap() };
        let expected = match job {
            "json-old" => ["ok", NO_MATCH, NO_MATCH, NO_MATCH],
            "text-rotating" => ["ok", "ok", NO_MATCH, NO_MATCH],
            "get-host" => [NO_MATCH, NO_MATCH, "ok", NO_MATCH],
            other => panic!("unexpected delivery of {other}"),
        };
        assert_eq!(verdicts("as_received"), expected, "{job}: {entry:#}");
        assert_eq!(
            verdicts("one_byte_changed"),
            [NO_MATCH; 4],
            "{job}: a body changed by one byte must not verify"
        );
        assert_eq!(
            verdicts("replayed_later"),
            [TOO_OLD; 4],
            "{job}: a replay past the tolerance must not verify"
        );
        assert_eq!(entry["headers"]["webhook-id"], firing_ids[job].as_str());
        let signatures = entry["headers"]["webhook-signature"].as_str().unwrap();
        let n = if job == "text-rotating" { 2 } else { 1 };
        assert_eq!(signatures.split(' ').count(), n, "{signatures}");
    }
    let rotating = log
        .iter()
        .find(|e| e["headers"]["keyfire-job-id"] == "text-rotating")
        .unwrap();
    assert_eq!(rotating["method"], "PUT");
    assert_eq!(
        rotating["body"],
        format!("plain {}", firing_ids["text-rotating"])
    );

    // A request signed correctly but stamped outside the receiver's tolerance is refused for
    // its timestamp; the same signed now is accepted (keyfire's signing agrees with the spec).
    let key = SigningSecret::parse(&old).unwrap();
    let now = chrono::Utc::now().timestamp();
    for (offset, expect_status, verdict) in
        [(-600, 401, TOO_OLD), (600, 401, TOO_NEW), (0, 200, "ok")]
    {
        let ts = now + offset;
        let body = br#"{"probe":true}"#;
        let resp = http_client()
            .post(&hook)
            .header("webhook-id", "probe")
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", key.sign("probe", ts, body))
            .body(body.to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), expect_status);
        let verdicts: Vec<String> = resp.json().await.unwrap();
        assert_eq!(verdicts[0], verdict, "offset {offset}");
    }
    node.shutdown().await;
}

type Seen = Arc<Mutex<Vec<(String, HeaderMap, Vec<u8>)>>>;

/// A local receiver: `/ok` answers "fine", `/fail` 500, `/flaky` 500 the first time then 200,
/// `/broken` 500 always; every request is recorded with its path.
async fn recorder(bind: &str) -> (SocketAddr, Seen) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let app = Router::new().route(
        "/{*path}",
        any(
            move |uri: axum::http::Uri, headers: HeaderMap, body: axum::body::Bytes| {
                let s = s.clone();
                async move {
                    let path = uri.path().to_string();
                    let earlier = {
                        let mut seen = s.lock().unwrap();
                        let earlier = seen.iter().filter(|(p, _, _)| *p == path).count();
                        seen.push((path.clone(), headers, body.to_vec()));
                        earlier
                    };
                    match path.as_str() {
                        "/fail" | "/broken" => (StatusCode::INTERNAL_SERVER_ERROR, "nope"),
                        "/flaky" if earlier == 0 => (StatusCode::INTERNAL_SERVER_ERROR, "once"),
                        "/hang" if earlier == 0 => {
                            // The first request never gets an answer (its sender dies first).
                            tokio::time::sleep(Duration::from_secs(120)).await;
                            (StatusCode::OK, "late")
                        }
                        _ => (StatusCode::OK, "fine"),
                    }
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind(bind).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, seen)
}

fn seen_at(seen: &Seen, path: &str) -> Vec<(HeaderMap, Vec<u8>)> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|(p, _, _)| p == path)
        .map(|(_, h, b)| (h.clone(), b.clone()))
        .collect()
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> &'a str {
    h.get(name)
        .unwrap_or_else(|| panic!("header {name} missing: {h:?}"))
        .to_str()
        .unwrap()
}

fn verified(key: &SigningSecret, h: &HeaderMap, body: &[u8]) -> Result<(), webhook::VerifyError> {
    webhook::verify(
        key,
        WebhookHeaders {
            id: header(h, "webhook-id"),
            timestamp: header(h, "webhook-timestamp"),
            signature: header(h, "webhook-signature"),
        },
        body,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_carry_attempt_schedule_and_trace() {
    let w = World::new().await;
    let (addr, seen) = recorder("127.0.0.1:0").await;
    let (node, client) = node_with(&w, |_| {}).await;
    let s = secret(9);
    let key = SigningSecret::parse(&s).unwrap();
    deliver(
        &client,
        "flaky",
        json!({"url": format!("http://{addr}/flaky"), "body": {"n": 1}, "signing_secrets": [s]}),
        3,
    )
    .await;
    let given = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    deliver(
        &client,
        "traced",
        json!({"url": format!("http://{addr}/ok"), "headers": {"traceparent": given}}),
        1,
    )
    .await;
    let r = runs(&client, "flaky", 2).await;
    assert_eq!(
        (r[0].outcome.as_str(), r[1].outcome.as_str()),
        ("failed", "ok")
    );
    let got = seen_at(&seen, "/flaky");
    assert_eq!(got.len(), 2);
    let scheduled = chrono::DateTime::from_timestamp_millis(r[0].scheduled_ms)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let mut traces = Vec::new();
    for (i, (h, body)) in got.iter().enumerate() {
        assert_eq!(header(h, "keyfire-attempt"), (i + 1).to_string());
        // The fencing token: this attempt and its claim instant, as the run's record has them.
        assert_eq!(
            header(h, "keyfire-fence"),
            format!("{}:{}", i + 1, r[i].claimed_ms),
            "attempt {}",
            i + 1
        );
        assert_eq!(header(h, "keyfire-job-id"), "flaky");
        assert_eq!(header(h, "keyfire-scheduled-at"), scheduled);
        // The firing id on every attempt: the receiver's idempotency key.
        assert_eq!(header(h, "webhook-id"), r[0].firing_id);
        verified(&key, h, body).unwrap();
        let mut changed = body.clone();
        changed[0] ^= 1;
        assert!(verified(&key, h, &changed).is_err());
        let tp: Vec<String> = header(h, "traceparent")
            .split('-')
            .map(String::from)
            .collect();
        assert_eq!(tp.len(), 4, "{tp:?}");
        assert_eq!(
            (tp[0].as_str(), tp[1].len(), tp[2].len(), tp[3].as_str()),
            ("00", 32, 16, "01")
        );
        traces.push(tp);
    }
    assert_eq!(traces[0][1], traces[1][1], "one trace per firing");
    assert_ne!(traces[0][2], traces[1][2], "one span per attempt");

    runs(&client, "traced", 1).await;
    let (h, _) = seen_at(&seen, "/ok").remove(0);
    assert_eq!(
        header(&h, "traceparent"),
        given,
        "a job's own traceparent is kept"
    );
    assert!(
        h.get("webhook-signature").is_none(),
        "no secret, no signature"
    );
    assert!(h.get("webhook-id").is_some() && h.get("webhook-timestamp").is_some());
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_link_local_and_the_nodes_own_api_are_refused() {
    // The "API" of the node: a recorder at the address the node's api.listen names.
    let (own, own_seen) = recorder("127.0.0.1:0").await;
    let (other, other_seen) = recorder("127.0.0.1:0").await;
    let w = World::new().await;
    let (node, client) = node_with(&w, |s| s.api.listen = own.to_string()).await;

    // IP literals in blocked networks are refused when the job is written, naming the field.
    for (params, field) in [
        (
            json!({"url": "http://169.254.169.254/latest/meta-data/"}),
            "params.url",
        ),
        (json!({"url": "http://[fd00:ec2::254]/"}), "params.url"),
        (
            json!({"url": "http://[::ffff:169.254.169.254]/"}),
            "params.url",
        ),
        (json!({"url": "http://100.100.100.200/"}), "params.url"),
        (
            json!({"url": format!("http://{other}/ok"), "callbacks": {"failure": "http://[fe80::1]/"}}),
            "params.callbacks.failure",
        ),
    ] {
        let err = client
            .upsert(JobSpec::after("meta", "0s", "http").params(params.clone()))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Invalid(e) if e.field == field && e.message.contains("blocked_networks")),
            "{params}: {err}"
        );
    }
    assert!(matches!(client.get("meta").await, Err(Error::NotFound(_))));

    // The node's own API, by address, by name and through 0.0.0.0: refused at run time, and
    // not retried.
    for (id, url) in [
        ("own-ip", format!("http://127.0.0.1:{}/v1/jobs", own.port())),
        (
            "own-name",
            format!("http://localhost:{}/v1/jobs", own.port()),
        ),
        ("own-any", format!("http://0.0.0.0:{}/v1/jobs", own.port())),
    ] {
        deliver(&client, id, json!({"url": url}), 3).await;
        let run = runs(&client, id, 1).await.remove(0);
        assert_eq!(run.outcome, "failed");
        assert!(
            run.error.as_deref().unwrap().contains("block_own_api"),
            "{id}: {run:?}"
        );
    }
    // Another port on the same address is an ordinary local receiver.
    deliver(
        &client,
        "neighbour",
        json!({"url": format!("http://localhost:{}/ok", other.port())}),
        1,
    )
    .await;
    assert_eq!(runs(&client, "neighbour", 1).await[0].outcome, "ok");
    // Time passing on purpose: a retry would have run by now (nothing signals one that
    // never comes).
    tokio::time::sleep(Duration::from_millis(500)).await;
    for id in ["own-ip", "own-name", "own-any"] {
        assert_eq!(
            client.runs(id, 10).await.unwrap().len(),
            1,
            "{id} is not retried"
        );
    }
    assert!(
        own_seen.lock().unwrap().is_empty(),
        "the node's API was called"
    );
    assert_eq!(other_seen.lock().unwrap().len(), 1);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_and_redirects_are_judged_on_the_resolved_address() {
    // 127.0.0.1 and ::1 blocked: `localhost` resolves only to blocked addresses. The first
    // hop is allowed (127.0.0.2); its redirects are not.
    let (target, target_seen) = recorder("127.0.0.1:0").await;
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let to_localhost = format!("http://localhost:{}/ok", target.port());
    let app = Router::new()
        .route(
            "/to-localhost",
            any(move || {
                h.fetch_add(1, Ordering::SeqCst);
                let to = to_localhost.clone();
                async move { (StatusCode::FOUND, [("location", to)]) }
            }),
        )
        .route(
            "/to-metadata",
            any(|| async {
                (
                    StatusCode::TEMPORARY_REDIRECT,
                    [("location", "http://169.254.169.254/latest/meta-data/")],
                )
            }),
        )
        .route(
            "/to-elsewhere",
            any(|| async { (StatusCode::FOUND, [("location", "http://example.invalid/")]) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let redirector = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let w = World::new().await;
    let (node, client) = node_with(&w, |s| {
        let http = &mut s.handlers.http;
        http.blocked_networks.push("127.0.0.1/32".into());
        http.blocked_networks.push("::1".into());
        http.allowed_hosts = vec![
            "127.0.0.2".into(),
            "localhost".into(),
            "169.254.169.254".into(),
        ];
    })
    .await;
    for (id, url, expect) in [
        (
            "by-name",
            format!("http://localhost:{}/ok", target.port()),
            "blocked_networks",
        ),
        (
            "redirect-name",
            format!("http://{redirector}/to-localhost"),
            "blocked_networks",
        ),
        (
            "redirect-meta",
            format!("http://{redirector}/to-metadata"),
            "169.254.0.0/16",
        ),
        (
            "redirect-host",
            format!("http://{redirector}/to-elsewhere"),
            "allowed_hosts",
        ),
    ] {
        deliver(&client, id, json!({"url": url, "body": "x"}), 1).await;
        let run = runs(&client, id, 1).await.remove(0);
        assert_eq!(run.outcome, "failed", "{id}");
        let err = run.error.unwrap();
        assert!(err.contains(expect), "{id}: {err}");
    }
    assert_eq!(hits.load(Ordering::SeqCst), 1, "the first hop was made");
    assert!(
        target_seen.lock().unwrap().is_empty(),
        "a blocked address was called"
    );
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_fire_once_per_outcome_signed_without_changing_it() {
    let w = World::new().await;
    let (addr, seen) = recorder("127.0.0.1:0").await;
    let (node, client) = node_with(&w, |_| {}).await;
    let s = secret(5);
    let key = SigningSecret::parse(&s).unwrap();
    let url = |p: &str| format!("http://{addr}{p}");
    let callbacks = json!({"success": url("/cb"), "failure": url("/cb")});
    deliver(
        &client,
        "cb-ok",
        json!({"url": url("/ok"), "signing_secrets": [s], "callbacks": callbacks}),
        1,
    )
    .await;
    deliver(
        &client,
        "cb-fail",
        json!({"url": url("/fail"), "signing_secrets": [s], "callbacks": callbacks}),
        2,
    )
    .await;
    deliver(
        &client,
        "cb-broken",
        json!({"url": url("/ok"), "callbacks": {"success": url("/broken")}}),
        1,
    )
    .await;

    let ok = runs(&client, "cb-ok", 1).await.remove(0);
    let failed = runs(&client, "cb-fail", 2).await;
    assert_eq!(ok.outcome, "ok");
    assert_eq!(
        (failed[0].outcome.as_str(), failed[1].outcome.as_str()),
        ("failed", "failed")
    );
    let cbs = wait::until("two callbacks", Duration::from_secs(10), || async {
        let cbs = seen_at(&seen, "/cb");
        (cbs.len() >= 2).then_some(cbs)
    })
    .await;
    // One more second: no further callback arrives (one per outcome, not per attempt).
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(seen_at(&seen, "/cb").len(), 2);
    for (h, body) in &cbs {
        verified(&key, h, body).unwrap();
        let v: Value = serde_json::from_slice(body).unwrap();
        let d = &v["data"];
        match v["type"].as_str().unwrap() {
            "keyfire.firing.succeeded" => {
                assert_eq!(
                    header(h, "webhook-id"),
                    format!("{}:succeeded", ok.firing_id)
                );
                assert_eq!(d["firing_id"], ok.firing_id.as_str());
                assert_eq!(
                    (d["attempts"].as_u64(), d["status"].as_u64()),
                    (Some(1), Some(200))
                );
                assert_eq!(d["body"], "fine");
                assert!(d["error"].is_null());
            }
            "keyfire.firing.failed" => {
                assert_eq!(
                    header(h, "webhook-id"),
                    format!("{}:failed", failed[0].firing_id)
                );
                assert_eq!(
                    (d["attempts"].as_u64(), d["status"].as_u64()),
                    (Some(2), Some(500))
                );
                assert!(d["error"].as_str().unwrap().contains("500"), "{d}");
            }
            other => panic!("unexpected callback {other}"),
        }
    }
    let dead = client.dead_letters("cb-fail", 10).await.unwrap();
    assert_eq!(dead.len(), 1, "the failed firing is in the dead letters");

    // A callback endpoint that always fails: retried on its own, bounded (5 attempts over
    // about 15 s), and the run stays a success.
    assert_eq!(runs(&client, "cb-broken", 1).await[0].outcome, "ok");
    wait::until(
        "five callback attempts",
        Duration::from_secs(30),
        || async { (seen_at(&seen, "/broken").len() >= 5).then_some(()) },
    )
    .await;
    // Three more seconds on purpose: no sixth attempt arrives.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        seen_at(&seen, "/broken").len(),
        5,
        "callback retries are bounded"
    );
    let runs_after = client.runs("cb-broken", 10).await.unwrap();
    assert_eq!(runs_after.len(), 1);
    assert_eq!(runs_after[0].outcome, "ok");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_whose_node_dies_mid_send_is_sent_by_another_node() {
    let w = World::new().await;
    let (addr, seen) = recorder("127.0.0.1:0").await;
    let (a, client) = node_with(&w, |s| s.node.id = "a".into()).await;
    let s = secret(6);
    let key = SigningSecret::parse(&s).unwrap();
    let params = json!({
        "url": format!("http://{addr}/ok"),
        "signing_secrets": [s],
        "callbacks": {"success": format!("http://{addr}/hang")},
    });
    deliver(&client, "cb-crash", params, 1).await;
    let run = runs(&client, "cb-crash", 1).await.remove(0);
    assert_eq!(run.outcome, "ok");
    // Node a sends the callback and hangs on it; it dies before an answer comes.
    wait::until(
        "the first callback attempt",
        Duration::from_secs(10),
        || async { (!seen_at(&seen, "/hang").is_empty()).then_some(()) },
    )
    .await;
    a.abort();
    let store = keyfire::store::Store::open(&w.settings.redis)
        .await
        .unwrap();
    assert_eq!(
        store.pending_callbacks().await.unwrap(),
        1,
        "the callback stays in Redis"
    );
    // Node b takes it once its lease (node.lease) is over, and sends it again: the same
    // webhook-id, signed, its second attempt.
    let (b, _) = node_with(&w, |s| s.node.id = "b".into()).await;
    let cbs = wait::until(
        "the callback sent again",
        Duration::from_secs(30),
        || async {
            let cbs = seen_at(&seen, "/hang");
            (cbs.len() >= 2).then_some(cbs)
        },
    )
    .await;
    let id = format!("{}:succeeded", run.firing_id);
    for (h, body) in &cbs {
        assert_eq!(header(h, "webhook-id"), id);
        verified(&key, h, body).unwrap();
    }
    assert_eq!(header(&cbs[1].0, "keyfire-attempt"), "2");
    let v: Value = serde_json::from_slice(&cbs[1].1).unwrap();
    assert_eq!(v["type"], "keyfire.firing.succeeded");
    assert_eq!(
        (v["data"]["status"].as_u64(), v["data"]["body"].as_str()),
        (Some(200), Some("fine"))
    );
    wait::until("the outbox emptied", Duration::from_secs(10), || async {
        (store.pending_callbacks().await.unwrap() == 0).then_some(())
    })
    .await;
    // Sent, and settled: not sent a third time.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(seen_at(&seen, "/hang").len(), 2);
    assert_eq!(client.runs("cb-crash", 10).await.unwrap().len(), 1);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outcome_refused_by_the_fence_queues_no_callback() {
    let w = World::new().await;
    let client = Client::connect(&w.settings.library())
        .await
        .unwrap()
        .allow_handlers(vec!["noop".to_string()]);
    client
        .upsert(JobSpec::after("fenced", "1h", "noop"))
        .await
        .unwrap();
    let store = keyfire::store::Store::open(&w.settings.redis)
        .await
        .unwrap();
    // As a job hash, so that an outcome without a lease reads as fenced, not gone.
    assert!(store.expand("fenced").await.unwrap());
    let at_ms = store.time_ms().await.unwrap() + 3_600_000;
    // The outcome of a run that holds no lease (taken over, or never claimed): refused,
    // and its callback with it.
    let record = RunRecord {
        firing_id: format!("fenced:{at_ms}"),
        scheduled_ms: at_ms,
        attempt: 1,
        node: "ghost".into(),
        claimed_ms: at_ms,
        started_ms: at_ms,
        outcome: "ok".into(),
        error: None,
        finished_ms: None,
        fate: None,
        retry_at_ms: None,
    };
    let entry = json!({"job_id": "fenced", "firing_id": record.firing_id, "attempts": 1,
        "url": "http://127.0.0.1:9/cb", "payload": {}})
    .to_string();
    let limits = keyfire::store::HistoryLimits {
        history: 10,
        history_max_age_ms: 3_600_000,
        dead: 10,
    };
    let fates = store
        .complete_many(
            &[keyfire::store::Completion {
                job_id: "fenced",
                run: &record,
                retry_delay_ms: None,
                once: Some(true),
                callback: Some(&entry),
                limits: Default::default(),
                batch: None,
            }],
            &limits,
        )
        .await
        .unwrap();
    assert_eq!(fates[0].0, keyfire::Fate::Fenced);
    assert_eq!(store.pending_callbacks().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_secrets_and_delivery_params_are_refused_naming_the_field() {
    let api = Api::new().await;
    let before = api.snapshot().await;
    let good = secret(7);
    for (params, field) in [
        (
            json!({"url": "http://127.0.0.1:9/", "signing_secrets": ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}),
            "params.signing_secrets[0]",
        ),
        (
            json!({"url": "http://127.0.0.1:9/", "signing_secrets": [good, "whsec_%%%"]}),
            "params.signing_secrets[1]",
        ),
        (
            json!({"url": "http://127.0.0.1:9/", "signing_secrets": ["whsec_c2hvcnQ="]}),
            "params.signing_secrets[0]",
        ),
        (
            json!({"url": "http://127.0.0.1:9/", "signing_secrets": [good, good, good]}),
            "params.signing_secrets",
        ),
        (
            json!({"url": "http://127.0.0.1:9/", "headers": {"webhook-signature": "v1,x"}}),
            "params.headers.webhook-signature",
        ),
        (
            json!({"url": "http://127.0.0.1:9/", "callbacks": {"success": "ftp://x/"}}),
            "params.callbacks.success",
        ),
        (
            json!({"url": "http://127.0.0.1:9/", "callbacks": {"sucess": "http://x/"}}),
            "params",
        ),
    ] {
        let a = api
            .put(
                "/v1/jobs/signed",
                json!({"after": "1h", "handler": "http", "params": params}),
            )
            .await;
        a.assert_error(422, "invalid");
        assert_eq!(a.field(), field, "{params}: {:#}", a.body);
    }
    assert_eq!(
        api.snapshot().await,
        before,
        "a refused write changed nothing"
    );
}

/// A job's signing secrets are never shown back (get, list), and writing back what was shown
/// is refused rather than stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_never_shown_back() {
    let api = Api::new().await;
    let good = secret(7);
    let a = api
        .put(
            "/v1/jobs/signed",
            json!({"after": "1h", "handler": "http",
                   "params": {"url": "http://127.0.0.1:9/", "signing_secrets": [good]}}),
        )
        .await;
    assert!(a.status.is_success(), "{:#}", a.body);
    let shown = api.get("/v1/jobs/signed").await;
    let text = shown.body.to_string();
    let b64 = good.trim_start_matches("whsec_");
    assert!(!text.contains(b64), "the secret is shown back: {text}");
    let redacted = shown.body["spec"]["params"]["signing_secrets"][0]
        .as_str()
        .unwrap();
    assert_eq!(redacted, SigningSecret::parse(&good).unwrap().redacted());
    let listed = api.get("/v1/jobs").await.body.to_string();
    assert!(!listed.contains(b64), "the secret is listed: {listed}");

    // Writing back what was shown is refused, naming the field, rather than storing it.
    let mut spec = shown.body["spec"].clone();
    spec.as_object_mut().unwrap().remove("id");
    let a = api.put("/v1/jobs/signed", spec).await;
    a.assert_error(422, "invalid");
    assert_eq!(a.field(), "params.signing_secrets[0]");
    assert!(
        a.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("redacted")
    );
}
