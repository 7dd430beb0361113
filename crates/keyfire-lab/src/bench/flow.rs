//! The `flow` scenario: `n` `http` tasks due at one instant, all to one host limited to
//! `rate` deliveries a second and `in_flight` at once, delivered by the nodes to a local
//! HTTP receiver that takes `work` ms per request. The receiver (not keyfire) records each
//! delivery, so the figures are what the target service saw: deliveries in each whole
//! second, the most open at once, each delivered once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use super::harness::Harness;
use super::metrics::{Delta, round2};
use super::{BenchRun, Report};
use keyfire::FlowLimitSpec;
use keyfire::job::JobSpec;

/// Default limit of the scenario: deliveries a second, and at once.
pub(super) const DEFAULT_RATE: u32 = 1_000;
/// Default in-flight limit.
pub(super) const DEFAULT_IN_FLIGHT: u32 = 50;
/// How long the receiver takes per request: with 50 in flight, about 1,400 a second, so
/// at the start of each second the in-flight bound holds the line back, then the rate.
const WORK: Duration = Duration::from_millis(30);

/// What the receiver saw.
#[derive(Default)]
struct Seen {
    /// (ms since the receiver started, webhook-id) per delivery.
    hits: Mutex<Vec<(u64, String)>>,
    open: AtomicUsize,
    max_open: AtomicUsize,
}

/// A minimal HTTP/1.1 receiver (keep-alive, Content-Length bodies): no framework between
/// keyfire and the figures, and no dependency for the lab.
async fn serve(listener: TcpListener, seen: Arc<Seen>, t0: Instant) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let seen = seen.clone();
        tokio::spawn(async move {
            let _ = connection(stream, seen, t0).await;
        });
    }
}

async fn connection(stream: TcpStream, seen: Arc<Seen>, t0: Instant) -> std::io::Result<()> {
    let (r, mut w) = stream.into_split();
    let mut r = BufReader::new(r);
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let (mut id, mut len) = (String::new(), 0usize);
        loop {
            line.clear();
            if r.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                } else if k.eq_ignore_ascii_case("webhook-id") {
                    id = v.trim().to_string();
                }
            }
        }
        let mut body = vec![0u8; len];
        r.read_exact(&mut body).await?;
        let n = seen.open.fetch_add(1, Ordering::SeqCst) + 1;
        seen.max_open.fetch_max(n, Ordering::SeqCst);
        seen.hits
            .lock()
            .expect("hits lock")
            .push((t0.elapsed().as_millis() as u64, id));
        tokio::time::sleep(WORK).await;
        let wrote = w
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            .await;
        seen.open.fetch_sub(1, Ordering::SeqCst);
        wrote?;
    }
}

/// The most deliveries within any window of 1,000 ms (times sorted).
fn max_in_any_second(times: &[u64]) -> usize {
    let (mut best, mut lo) = (0, 0);
    for hi in 0..times.len() {
        while times[hi] - times[lo] >= 1_000 {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best
}

/// Run the scenario; `blank` is the report to fill, `apply` adds the CPU and command
/// figures of the measured phase.
pub(super) async fn run(
    h: &mut Harness,
    mut report: Report,
    rate: u32,
    in_flight: u32,
    apply: impl Fn(&mut Report, &Delta),
) -> anyhow::Result<BenchRun> {
    let n = report.n;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let seen = Arc::new(Seen::default());
    let t0 = Instant::now();
    let server = tokio::spawn(serve(listener, seen.clone(), t0));
    let key = "host:127.0.0.1";
    h.client
        .put_limit(FlowLimitSpec::new(key, Some(rate), Some(in_flight)))
        .await?;
    // Let every node hear of the limit (change message) before anything is due.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let lead = h.lead_ms(n).await?;
    let at_ms = h.redis_ms().await? + lead;
    let at = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(at_ms).expect("in range");
    let url = format!("http://{addr}/hook");
    let specs: Vec<JobSpec> = (0..n)
        .map(|i| JobSpec::at(format!("f{i}"), at, "http").params(serde_json::json!({"url": url})))
        .collect();
    h.load(specs, "flow").await?;
    h.sleep_until_redis(at_ms - 100).await;
    let snap0 = h.snapshot().await;

    // Every task should be out after n / rate seconds; give it three times that, and 30 s.
    let limit = Duration::from_millis(30_000 + 3_000 * n as u64 / rate.max(1) as u64);
    let started = Instant::now();
    let distinct = || {
        let hits = seen.hits.lock().expect("hits lock");
        hits.iter()
            .map(|(_, id)| id.as_str())
            .collect::<std::collections::HashSet<_>>()
            .len()
    };
    let pb = h.progress.bar(n as u64, "deliveries");
    loop {
        let d = distinct();
        pb.set_position(d as u64);
        if d >= n || started.elapsed() > limit {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    pb.finish_and_clear();
    let snap1 = h.snapshot().await;
    tokio::time::sleep(h.doubles_window()).await;
    server.abort();

    let hits = seen.hits.lock().expect("hits lock").clone();
    let mut per_firing: HashMap<&str, usize> = HashMap::new();
    for (_, id) in &hits {
        *per_firing.entry(id.as_str()).or_default() += 1;
    }
    let mut times: Vec<u64> = hits.iter().map(|(t, _)| *t).collect();
    times.sort_unstable();
    let first = times.first().copied().unwrap_or(0);
    let last = times.last().copied().unwrap_or(0);
    // Whole seconds from the first delivery; the last, partial second is left out.
    let whole = ((last - first) / 1_000) as usize;
    let mut per_second = vec![0usize; whole];
    for t in &times {
        let k = ((t - first) / 1_000) as usize;
        if k < whole {
            per_second[k] += 1;
        }
    }

    report.firings = n;
    report.missed = n.saturating_sub(per_firing.len());
    report.doubled = per_firing.values().filter(|&&c| c > 1).count();
    report.firings_per_s = Some(round2(
        hits.len() as f64 / ((last - first).max(1) as f64 / 1000.0),
    ));
    let mut d = Delta::between(&snap0, &snap1);
    // The receiver, not the bench handler, counts these firings.
    d.recorded = per_firing.len();
    apply(&mut report, &d);
    report.limit_rate = Some(rate);
    report.limit_in_flight = Some(in_flight);
    report.max_in_flight = Some(seen.max_open.load(Ordering::SeqCst));
    report.max_in_any_second = Some(max_in_any_second(&times));
    h.progress.note(format!(
        "{} deliveries in {:.1} s; per whole second {:?}; at most {} at once; redis commands per firing: {}",
        hits.len(),
        (last - first) as f64 / 1000.0,
        per_second,
        seen.max_open.load(Ordering::SeqCst),
        d.mix(n)
    ));
    report.per_second = Some(per_second);
    Ok(BenchRun {
        report,
        lateness_ms: Vec::new(),
    })
}
