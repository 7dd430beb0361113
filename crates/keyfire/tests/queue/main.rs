//! The delay queue's acceptance tests, against real redis-server processes and
//! in-process nodes serving the `topic` handler. One test binary made of modules.

mod batch;
mod completion;
mod counts;
mod dead;
mod debounce;
mod deletes;
mod delivery;
mod feed;
mod idle;
mod input;
mod partitions;
mod pause;
mod priority;
mod recovery;
mod redelivery;
mod upgrade;
mod waiting;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keyfire::queue::{Finished, Queue, Reserved, When};

/// `topic`'s counters, as the topic list gives them.
pub(crate) async fn counts(q: &Queue, topic: &str) -> keyfire::queue::TopicCounts {
    q.topics()
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.topic == topic)
        .expect("topic listed")
}

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
        Self::start_batched(queues, topic, n, limit, 1)
    }

    /// Consumers that pop up to `max` tasks at a time and finish them in one batch finish
    /// (`max` 1: one pop and one finish per task).
    pub(crate) fn start_batched(
        queues: Vec<Queue>,
        topic: &str,
        n: usize,
        limit: Duration,
        max: usize,
    ) -> Self {
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
                        if max == 1 {
                            let Some(r) = q.pop(&topic, Duration::from_millis(300)).await.unwrap()
                            else {
                                continue;
                            };
                            log.lock().unwrap().push(Delivery::of(&r, c));
                            q.finish(&r.id, &r.token).await.unwrap();
                            finished.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        let popped = q
                            .pop_many(&topic, max, Duration::from_millis(300))
                            .await
                            .unwrap();
                        assert!(popped.len() <= max);
                        if popped.is_empty() {
                            continue;
                        }
                        log.lock()
                            .unwrap()
                            .extend(popped.iter().map(|r| Delivery::of(r, c)));
                        let pairs: Vec<(String, String)> = popped
                            .iter()
                            .map(|r| (r.id.clone(), r.token.clone()))
                            .collect();
                        let outcomes = q.finish_many(&pairs).await.unwrap();
                        assert!(
                            outcomes.iter().all(|o| *o == Finished::Done),
                            "{outcomes:?}"
                        );
                        finished.fetch_add(popped.len(), Ordering::Relaxed);
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

/// Add a task to topic `t` with payload `1`, ready at once, reserved for `ttr` per delivery
/// and delivered at most `max_deliveries` times (`Queue::add`, its arguments in order); its id.
pub(crate) async fn add_ready(q: &Queue, ttr: Duration, max_deliveries: u32) -> String {
    q.add(
        "t",
        serde_json::json!(1),
        When::Delay(Duration::ZERO),
        ttr,
        max_deliveries,
    )
    .await
    .unwrap()
}

/// Redis's clock just past the deadlines of `reserved` (ms): their reservations have run out.
pub(crate) fn past_deadlines(reserved: &[Reserved]) -> i64 {
    reserved
        .iter()
        .map(|r| r.deadline.timestamp_millis())
        .max()
        .expect("a reservation")
        + 1
}

/// p50 / p99 / max of `values`, as a line.
pub(crate) fn summary(label: &str, mut values: Vec<i64>) -> (i64, i64, i64, String) {
    values.sort();
    let (p50, p99, max) = (
        keyfire_testkit::world::percentile(&values, 50),
        keyfire_testkit::world::percentile(&values, 99),
        *values.last().unwrap_or(&0),
    );
    let line = format!(
        "{label}: n={} p50={p50} p99={p99} max={max} ms",
        values.len()
    );
    (p50, p99, max, line)
}
