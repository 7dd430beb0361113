//! A keyfire node as a separate process, for the chaos suite (`keyfire chaos`, `tests/chaos`).
//!
//! Settings come from `KEYFIRE__…` environment variables (the harness sets the Redis URL,
//! which may point at a proxy it controls, the node id and short leases). Two more:
//! - `KEYFIRE_CHAOS_LOG`: the append-only file its handler records every run to (one JSON
//!   line per start and end, see `keyfire_lab::chaos::record`), outside keyfire;
//! - `KEYFIRE_CHAOS_SKEW_MS`: how wrong this node's wall clock is (keyfire must not care:
//!   every due decision is taken by Redis's clock).
//!
//! With `KEYFIRE_CHAOS_CONSUMER=<name>` it is no node but a delay-queue consumer of the topics
//! in `KEYFIRE_CHAOS_TOPICS` (comma-separated), logging to `<name>.qlog` next to
//! `KEYFIRE_CHAOS_LOG` (see `keyfire_lab::chaos::consumer`), seeded by `KEYFIRE_CHAOS_SEED`.
//!
//! It also runs the `topic` handler, which makes delayed delay-queue tasks ready. Its `chaos`
//! handler reads its params: `v` (the workload's version of the job, recorded),
//! `fail` (fail attempts 1..=fail), `hang` (on attempts 1..=hang, never return: the job's
//! timeout must cut it off), `sleep_ms` (take this long; a cancel request ends it early).

use std::sync::Arc;
use std::time::Duration;

use std::path::Path;

use keyfire::clock::SkewedClock;
use keyfire::{Firing, HandlerError, HandlerResult, Node, Queue, Registry, Settings};
use keyfire_lab::chaos::consumer;
use keyfire_lab::chaos::record::{Ev, Outcome, RunEvent, RunLog, host_ms};
use keyfire_server::settings::ServerSettings;

/// Writes the end event when dropped, so a run that keyfire drops (a hang past its timeout)
/// still leaves its end in the log.
struct Run {
    log: Arc<RunLog>,
    event: RunEvent,
    done: bool,
}

impl Run {
    fn start(log: Arc<RunLog>, f: &Firing) -> Self {
        let event = RunEvent {
            ev: Ev::Start,
            run: log.next_run(),
            node: f.node_id.clone(),
            job: f.job_id.clone(),
            firing: f.firing_id.clone(),
            scheduled_ms: f.scheduled_at.timestamp_millis(),
            claimed_ms: f.claimed_at.timestamp_millis(),
            attempt: f.attempt,
            v: f.params["v"].as_u64().unwrap_or(0),
            at_ms: host_ms(),
            outcome: None,
        };
        write(&log, &event);
        Self {
            log,
            event,
            done: false,
        }
    }

    fn end(&mut self, outcome: Outcome) {
        self.done = true;
        let event = RunEvent {
            ev: Ev::End,
            at_ms: host_ms(),
            outcome: Some(outcome),
            ..self.event.clone()
        };
        write(&self.log, &event);
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if !self.done {
            self.end(Outcome::Dropped);
        }
    }
}

fn write(log: &RunLog, event: &RunEvent) {
    if let Err(e) = log.write(event) {
        // The record is the evidence: without it the checker would report a miss.
        eprintln!("chaos_node: cannot write the run log: {e}");
        std::process::abort();
    }
}

async fn chaos(log: Arc<RunLog>, f: Firing) -> HandlerResult {
    let mut run = Run::start(log, &f);
    let p = &f.params;
    let n = |k: &str| p[k].as_u64().unwrap_or(0);
    let attempt = u64::from(f.attempt);
    if attempt <= n("hang") {
        // Hang, ignoring cancellation: keyfire's timeout has to drop this future.
        std::future::pending::<()>().await;
    }
    let sleep = n("sleep_ms");
    if sleep > 0 {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(sleep)) => {}
            _ = f.cancel.cancelled() => {
                run.end(Outcome::Cancelled);
                return Err(HandlerError::abort("cancelled"));
            }
        }
    }
    if attempt <= n("fail") {
        run.end(Outcome::Failed);
        return Err(HandlerError::retry(format!("planned failure {attempt}")));
    }
    run.end(Outcome::Ok);
    Ok(())
}

/// The consumer mode: pop, hold and finish until SIGTERM.
async fn consumer(settings: Settings, name: String, run_log: &Path) -> anyhow::Result<()> {
    let topics: Vec<String> = std::env::var("KEYFIRE_CHAOS_TOPICS")?
        .split(',')
        .map(str::to_string)
        .collect();
    let seed: u64 = std::env::var("KEYFIRE_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let log = run_log.with_file_name(format!("{name}.{}", consumer::LOG_EXT));
    // Done records stay through the round, so the end state of every task is known.
    let queue = Queue::connect(&settings)
        .await?
        .with_retention(Duration::from_secs(24 * 3600));
    let stop = tokio_util::sync::CancellationToken::new();
    let on_signal = stop.clone();
    tokio::spawn(async move {
        keyfire_server::cli::shutdown_signal().await;
        on_signal.cancel();
    });
    let cfg = consumer::ConsumerConfig {
        name,
        topics,
        seed,
        log,
    };
    consumer::consume(queue, cfg, stop).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = ServerSettings::load(None)?;
    keyfire_server::cli::init_logging(&server.log);
    let settings = server.library();
    let path = std::env::var("KEYFIRE_CHAOS_LOG")
        .map_err(|_| anyhow::anyhow!("KEYFIRE_CHAOS_LOG is not set"))?;
    let skew_ms: i64 = match std::env::var("KEYFIRE_CHAOS_SKEW_MS") {
        Ok(s) => s.parse()?,
        Err(_) => 0,
    };
    if let Ok(name) = std::env::var("KEYFIRE_CHAOS_CONSUMER") {
        return consumer(settings, name, path.as_ref()).await;
    }
    let log = Arc::new(RunLog::open(path.as_ref(), &settings.node.id)?);
    // The built-ins plus `topic`, which makes delayed delay-queue tasks ready.
    let mut registry = Registry::for_node(&settings)?;
    registry.register("chaos", move |f: Firing| chaos(log.clone(), f));
    let mut node = Node::new(settings, registry);
    if skew_ms != 0 {
        node = node.with_clock(Arc::new(SkewedClock { skew_ms }));
    }
    node.run(keyfire_server::cli::shutdown_signal()).await?;
    Ok(())
}
