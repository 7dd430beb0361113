//! A delay-queue consumer as a process of its own, for the queue round (the `chaos_node`
//! example with `KEYFIRE_CHAOS_CONSUMER` set), so the harness can SIGKILL it while it holds
//! reservations.
//!
//! It pops batches (`max` 1 to 50) from each topic in turn, holds them a while and finishes
//! them in one call. Now and then it drops a batch without finishing it (a crash the process
//! survives), or holds one past its ttr (its finish must be refused: the tasks went back to
//! ready and maybe to another consumer). It appends what it saw to its log, one JSON
//! [`QueueEvent`] per line, each batch in one `write` (a SIGKILL loses whole batches, never
//! half of one): the pops as soon as the pop returned, before anything else.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio_util::sync::CancellationToken;

use super::model::{QueueEv, QueueEvent};
use super::record::host_ms;
use keyfire::queue::{Finished, Queue, Reserved};

/// Extension of a consumer's log in the round's directory.
pub const LOG_EXT: &str = "qlog";

/// How a consumer process runs.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// Its name (in its events).
    pub name: String,
    /// The topics it pops, in turn.
    pub topics: Vec<String>,
    /// Seed of its decisions.
    pub seed: u64,
    /// Its append-only log.
    pub log: PathBuf,
}

struct Log {
    file: std::fs::File,
    name: String,
}

impl Log {
    /// Append one event per task, in one `write`.
    fn write(&mut self, tasks: &[(&Reserved, QueueEv)]) -> std::io::Result<()> {
        let mut buf = Vec::new();
        for (r, ev) in tasks {
            let event = QueueEvent {
                ev: *ev,
                task: r.id.clone(),
                consumer: self.name.clone(),
                deliveries: r.deliveries,
                due_ms: r.due_at.timestamp_millis(),
                ready_ms: r.ready_at.timestamp_millis(),
                reserved_ms: r.reserved_at.timestamp_millis(),
                at_ms: host_ms(),
            };
            serde_json::to_writer(&mut buf, &event).map_err(std::io::Error::other)?;
            buf.push(b'\n');
        }
        self.file.write_all(&buf)
    }
}

/// Pop, hold and finish until `stop` is cancelled (then it finishes what it holds and
/// returns). An error only when its log cannot be written: without it the checker would see
/// tasks lost.
pub async fn consume(
    queue: Queue,
    cfg: ConsumerConfig,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&cfg.log)?;
    let mut log = Log {
        file,
        name: cfg.name.clone(),
    };
    let mut rng = StdRng::seed_from_u64(cfg.seed ^ u64::from(std::process::id()));
    let mut turn = 0usize;
    while !stop.is_cancelled() {
        let topic = &cfg.topics[turn % cfg.topics.len()];
        let max = rng.random_range(1..=50);
        let popped = match queue.pop_many(topic, max, Duration::from_millis(200)).await {
            Ok(p) => p,
            Err(_) => {
                // Redis is restarting.
                tokio::time::sleep(Duration::from_millis(200)).await;
                turn += 1;
                continue;
            }
        };
        if popped.len() < max {
            // Drained this topic for now: the next one.
            turn += 1;
        }
        if popped.is_empty() {
            continue;
        }
        let pops: Vec<(&Reserved, QueueEv)> = popped.iter().map(|r| (r, QueueEv::Pop)).collect();
        log.write(&pops)?;
        let ttr = popped.iter().map(|r| r.ttr).min().unwrap_or_default();
        let roll = rng.random_range(0..100);
        if roll < 6 && !stop.is_cancelled() {
            let dropped: Vec<(&Reserved, QueueEv)> =
                popped.iter().map(|r| (r, QueueEv::Abandon)).collect();
            log.write(&dropped)?;
            continue;
        }
        let hold = if roll < 11 {
            // Past the ttr; a late finish may come after another consumer took the tasks.
            ttr + Duration::from_millis(rng.random_range(200..=2_500))
        } else {
            Duration::from_millis(rng.random_range(10..=150))
        };
        tokio::time::sleep(hold).await;
        let pairs: Vec<(String, String)> = popped
            .iter()
            .map(|r| (r.id.clone(), r.token.clone()))
            .collect();
        let mut answers = None;
        for _ in 0..50 {
            match queue.finish_many(&pairs).await {
                Ok(a) => {
                    answers = Some(a);
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        let ends: Vec<(&Reserved, QueueEv)> = popped
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let ev = match answers.as_ref().map(|a| a[i]) {
                    Some(Finished::Done) => QueueEv::FinishOk,
                    Some(Finished::Lost | Finished::NotFound) => QueueEv::FinishLost,
                    None => QueueEv::FinishErr,
                };
                (r, ev)
            })
            .collect();
        log.write(&ends)?;
    }
    Ok(())
}

/// Every consumer event in the `*.qlog` files of `dir`, and the lines that did not parse.
pub fn read_queue_events(dir: &Path) -> std::io::Result<(Vec<QueueEvent>, usize)> {
    super::record::read_lines_of(dir, LOG_EXT)
}

/// Reservations the consumer whose log is `path` holds now, by its log: the pops after its
/// last finish or drop (a batch is logged whole, so trailing pop lines are one batch).
pub fn holding(path: &Path) -> usize {
    let Ok(text) = std::fs::read_to_string(path) else {
        return 0;
    };
    text.lines()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .map_while(|l| {
            serde_json::from_str::<QueueEvent>(l)
                .ok()
                .filter(|e| e.ev == QueueEv::Pop)
        })
        .count()
}
