//! The delay queue's acceptance tests, against real redis-server processes and
//! in-process nodes serving the `topic` handler. One test binary made of modules.

#[path = "../support/mod.rs"]
mod support;

mod deletes;
mod delivery;
mod feed;
mod input;
mod redelivery;
mod waiting;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keyfire::queue::{Queue, Reserved};

/// One delivery, as a consumer saw it (instants: Redis time, ms).
#[derive(Debug, Clone)]
pub(crate) struct Delivery {
    pub(crate) id: String,
    pub(crate) consumer: usize,
    pub(crate) deliveries: u32,
    pub(crate) due_ms: i64,
    pub(crate) ready_ms: i64,
    pub(crate) reserved_ms: i64,
    pub(crate) payload: serde_json::Value,
}

impl Delivery {
    fn of(r: &Reserved, consumer: usize) -> Self {
        Self {
            id: r.id.clone(),
            consumer,
            deliveries: r.deliveries,
            due_ms: r.due_at.timestamp_millis(),
            ready_ms: r.ready_at.timestamp_millis(),
            reserved_ms: r.reserved_at.timestamp_millis(),
            payload: r.payload.clone(),
        }
    }
}

/// Consumers that pop and finish until `n` tasks are finished in all (or `limit` passes).
pub(crate) struct Consumers {
    pub(crate) log: Arc<Mutex<Vec<Delivery>>>,
    finished: Arc<AtomicUsize>,
    handles: Vec<tokio::task::JoinHandle<()>>,
}

impl Consumers {
    pub(crate) fn start(queues: Vec<Queue>, topic: &str, n: usize, limit: Duration) -> Self {
        let log = Arc::new(Mutex::new(Vec::new()));
        let finished = Arc::new(AtomicUsize::new(0));
        let handles = queues
            .into_iter()
            .enumerate()
            .map(|(c, q)| {
                let (log, finished, topic) = (log.clone(), finished.clone(), topic.to_string());
                tokio::spawn(async move {
                    let end = tokio::time::Instant::now() + limit;
                    while finished.load(Ordering::Relaxed) < n && tokio::time::Instant::now() < end
                    {
                        let Some(r) = q.pop(&topic, Duration::from_millis(300)).await.unwrap()
                        else {
                            continue;
                        };
                        log.lock().unwrap().push(Delivery::of(&r, c));
                        q.finish(&r.id, &r.token).await.unwrap();
                        finished.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        Self {
            log,
            finished,
            handles,
        }
    }

    pub(crate) async fn join(self) -> Vec<Delivery> {
        for h in self.handles {
            h.await.unwrap();
        }
        let _ = self.finished;
        Arc::try_unwrap(self.log).unwrap().into_inner().unwrap()
    }
}

/// p50 / p99 / max of `values`, as a line.
pub(crate) fn summary(label: &str, mut values: Vec<i64>) -> (i64, i64, i64, String) {
    values.sort();
    let (p50, p99, max) = (
        support::percentile(&values, 50),
        support::percentile(&values, 99),
        *values.last().unwrap_or(&0),
    );
    let line = format!(
        "{label}: n={} p50={p50} p99={p99} max={max} ms",
        values.len()
    );
    (p50, p99, max, line)
}
