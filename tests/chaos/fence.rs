//! Self-fencing: a node cut off from Redis stops its runs before the others may take them
//! over, so two attempts of one firing never overlap when `node_ttl` ≥ 2.75 s (the bound
//! docs/architecture.md states: `max(0, 1.1 s − 2/5 × node_ttl)`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keyfire::{Client, Firing, JobSpec, Node, Registry, Settings};
use keyfire_lab::chaos::proxy::{Mode, Proxy};
use keyfire_testkit::RedisServer;

/// (node, attempt, "start" | "stop", when).
type Events = Arc<Mutex<Vec<(String, u32, &'static str, Instant)>>>;

fn settings(url: &str, id: &str) -> Settings {
    let mut s = Settings::default();
    s.redis.url = url.into();
    s.redis.prefix = "fence".into();
    let n = &mut s.node;
    n.id = id.into();
    n.heartbeat_interval = Duration::from_millis(200);
    n.node_ttl = Duration::from_secs(3);
    n.sweep_interval = Duration::from_millis(300);
    n.claim_grace = Duration::from_millis(500);
    n.lease = Duration::from_secs(30);
    n.drain_timeout = Duration::from_millis(500);
    s
}

/// `long`: runs a minute unless cancelled; records when each attempt starts and stops.
fn registry(events: &Events) -> Registry {
    let mut r = Registry::new();
    let events = events.clone();
    r.register("long", move |f: Firing| {
        let events = events.clone();
        async move {
            let note = |what| {
                events
                    .lock()
                    .unwrap()
                    .push((f.node_id.clone(), f.attempt, what, Instant::now()))
            };
            note("start");
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(60)) => {}
                _ = f.cancel.cancelled() => {}
            }
            note("stop");
            Err(keyfire::HandlerError::retry("stopped"))
        }
    });
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_from_redis_stops_its_runs_before_the_takeover() {
    let redis = RedisServer::start().expect("start redis-server");
    let proxy = Proxy::start(format!("127.0.0.1:{}", redis.port()))
        .await
        .unwrap();
    let events: Events = Arc::default();
    // `a` reaches Redis through the proxy; `b` directly.
    let a = Node::new(settings(&proxy.url(), "a"), registry(&events))
        .start()
        .await
        .unwrap();
    let client = Client::connect(&settings(&redis.url(), "client"))
        .await
        .unwrap()
        .allow_handlers(["long"]);
    let ids: Vec<String> = (0..5).map(|i| format!("t{i}")).collect();
    for id in &ids {
        client
            .enqueue(JobSpec::after(id, "0s", "long"))
            .await
            .unwrap();
    }
    let started = |node: &str, attempt: u32| {
        events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.0 == node && e.1 == attempt && e.2 == "start")
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while started("a", 1) < ids.len() {
        assert!(Instant::now() < deadline, "a did not start its runs");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let b = Node::new(settings(&redis.url(), "b"), registry(&events))
        .start()
        .await
        .unwrap();

    // `a` is cut off: every byte held, connections open (its commands hang).
    let cut = Instant::now();
    proxy.set(Mode::Stall);
    let deadline = cut + Duration::from_secs(15);
    while started("b", 2) < ids.len() {
        assert!(
            Instant::now() < deadline,
            "b took over {} of {} runs within 15 s of the cut",
            started("b", 2),
            ids.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ev = events.lock().unwrap().clone();
    let stops: Vec<Instant> = ev
        .iter()
        .filter(|e| e.0 == "a" && e.2 == "stop")
        .map(|e| e.3)
        .collect();
    let takeovers: Vec<Instant> = ev
        .iter()
        .filter(|e| e.0 == "b" && e.2 == "start")
        .map(|e| e.3)
        .collect();
    assert_eq!(stops.len(), ids.len(), "a did not stop every run: {ev:?}");
    let last_stop = *stops.iter().max().unwrap();
    let first_takeover = *takeovers.iter().min().unwrap();
    println!(
        "runs stopped by {:?} after the cut; first takeover started {:?} after it",
        last_stop - cut,
        first_takeover - cut
    );
    // node_ttl 3 s: the bound is max(0, 1.1 s - 1.2 s) = 0, no overlap at all.
    assert!(
        last_stop < first_takeover,
        "a's runs stopped {:?} after the cut, b's first attempt started {:?} after it",
        last_stop - cut,
        first_takeover - cut
    );
    // a fenced itself (3/5 node_ttl after its last good heartbeat) before the window opened.
    assert!(
        last_stop - cut < Duration::from_secs(3),
        "a stopped its runs {:?} after the cut",
        last_stop - cut
    );
    // No attempt of these firings ran twice at once, and no attempt 3 came.
    assert!(ev.iter().all(|e| e.1 <= 2), "{ev:?}");
    b.shutdown().await;
    drop(proxy);
    drop(a);
}
