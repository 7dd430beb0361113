//! A delay-queue round (`keyfire chaos --queue`, `tests/chaos`): the queue's own ways to break,
//! checked by the same checker.
//!
//! Redis with the shipped `redis.conf` and the AOF on, node processes behind proxies (as in a
//! job round) that promote topics, and consumer processes (the `chaos_node` example as
//! [`consumer`](super::consumer)s) popping batches and finishing them. A producer adds tasks
//! due 0.2 to 3.5 s ahead all along (ttr 2 s). The faults, from a seeded plan in two lanes:
//!
//! - `consumer_kill`: a consumer SIGKILLed while its log shows it holding reservations,
//!   restarted later; what it held must come back after the ttr, to another consumer;
//! - `promote_kill`: a burst of 3,000 tasks due at one instant on one topic, and the node that
//!   owns the topic SIGKILLed as soon as the topic's delayed set starts shrinking (its
//!   promotion runs in batches of 1,000), restarted later; the rest must be promoted by the
//!   others;
//! - `events_lost`: `notify-keyspace-events` emptied for 2 to 5 s, so the sentinel keys'
//!   expiry reaches no node; timers and sweeps must promote;
//! - `pubsub_kill`, `redis_term`, `redis_kill` (SIGKILL, restarted from the AOF).
//!
//! Then everything drains and the checker holds every task to: delivered, never early, never
//! twice within its ttr, one delivery number per pop, finished once and never delivered after.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::json;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::consumer::{holding, read_queue_events};
use super::harness::{
    Config, GRACE_MS, NODE_TTL_MS, NodeProc, Outcome, Round, SWEEP_MS, finish_round, redis_ms,
    retrying, setup, start_nodes,
};
use super::model::{Bounds, FaultEvent, FaultKind, History, Op, OpKind, Workload};
use super::plan::{Plan, PlannedFault};
use super::proxy::Mode;
use super::record::host_ms;
use keyfire::error::Error;
use keyfire::queue::{NewTask, Queue, When};

/// The topic the producer feeds all along.
const SPREAD: &str = "spread";
/// The topics bursts go to, in turn (their owners differ).
const BURSTS: [&str; 3] = ["burst-a", "burst-b", "burst-c"];
/// Tasks of one burst, due at one instant.
const BURST: usize = 3_000;
/// How far ahead a burst is due.
const BURST_LEAD_MS: i64 = 1_500;
/// Every task's time-to-run.
const TTR: Duration = Duration::from_secs(2);
/// How long the drain may take before what is left counts as lost.
const DRAIN_LIMIT: Duration = Duration::from_secs(60);

/// A running queue round: the job round's Redis and nodes, plus consumers and the adds.
struct QueueRound<'a> {
    round: &'a Round,
    consumers: Mutex<Vec<NodeProc>>,
    queue: Queue,
    ops: std::sync::Mutex<Vec<Op>>,
    next_task: AtomicUsize,
    bursts: AtomicUsize,
}

impl QueueRound<'_> {
    /// Add tasks (under the op lock: none returns in the window a Redis SIGKILL can undo)
    /// and record the adds.
    async fn add(&self, topic: &str, due_ms: &[i64]) -> anyhow::Result<()> {
        let _held = self.round.op_lock.lock().await;
        let tasks: Vec<NewTask> = due_ms
            .iter()
            .map(|&due| {
                let n = self.next_task.fetch_add(1, Ordering::Relaxed) + 1;
                NewTask {
                    id: Some(format!("qt-{n}")),
                    topic: topic.into(),
                    payload: json!({"n": n}),
                    when: When::At(chrono::DateTime::from_timestamp_millis(due).expect("instant")),
                    ttr: TTR,
                    max_deliveries: 50,
                    priority: 0,
                    dedup: None,
                }
            })
            .collect();
        let mut conn = self.round.admin.clone();
        let queue = &self.queue;
        let (call, ret, ids) = retrying(&mut conn, self.round, "queue add", || {
            queue.add_many(tasks.clone())
        })
        .await;
        anyhow::ensure!(ids.done().is_some(), "queue add kept failing");
        let mut ops = self.ops.lock().expect("ops lock");
        for (t, due) in tasks.into_iter().zip(due_ms) {
            ops.push(Op {
                job: t.id.unwrap_or_default(),
                call_ms: call,
                ret_ms: ret,
                kind: OpKind::QueueAdd {
                    topic: t.topic,
                    due_ms: *due,
                    ttr_ms: TTR.as_millis() as i64,
                },
            });
        }
        Ok(())
    }

    /// The producer: 2 to 6 tasks due 0.2 to 3.5 s ahead, every 250 to 600 ms.
    async fn produce(&self, seed: u64, until: Instant) -> anyhow::Result<()> {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x9e3e_0001);
        while Instant::now() < until {
            let now = redis_ms(&mut self.round.admin.clone()).await;
            let due: Vec<i64> = (0..rng.random_range(2..=6))
                .map(|_| now + rng.random_range(200..=3_500))
                .collect();
            self.add(SPREAD, &due).await?;
            tokio::time::sleep(Duration::from_millis(rng.random_range(250..=600))).await;
        }
        Ok(())
    }

    async fn run_lane(&self, lane: &[PlannedFault], start: Instant) -> anyhow::Result<()> {
        for f in lane {
            tokio::time::sleep_until(start + f.at).await;
            match f.kind {
                FaultKind::ConsumerKill => self.kill_consumer(f).await,
                FaultKind::PromoteKill => self.kill_promoting(f).await,
                FaultKind::EventsLost => self.lose_events(f).await,
                _ => self.round.inject(f).await,
            }
            .with_context(|| format!("inject {}", f.kind))?;
        }
        Ok(())
    }

    /// SIGKILL a consumer once its log shows it holding reservations; restart it after the hold.
    async fn kill_consumer(&self, f: &PlannedFault) -> anyhow::Result<()> {
        let t0 = host_ms();
        let mut consumers = self.consumers.lock().await;
        let i = f.node.unwrap_or(0) % consumers.len();
        let log = consumers[i].queue_log();
        let give_up = Instant::now() + Duration::from_secs(3);
        let mut held = 0;
        while Instant::now() < give_up {
            held = holding(&log);
            if held > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        consumers[i].kill().await;
        let id = consumers[i].id.clone();
        tokio::time::sleep(f.hold).await;
        consumers[i].spawn()?;
        drop(consumers);
        self.round.record(
            f.kind,
            Some(&id),
            t0,
            format!("holding {held} reservations; down {:?}", f.hold),
        );
        Ok(())
    }

    /// Add a burst due at one instant to a topic, SIGKILL the topic's owner as soon as its
    /// promotion has begun, restart it after the hold.
    async fn kill_promoting(&self, f: &PlannedFault) -> anyhow::Result<()> {
        let t0 = host_ms();
        let topic = BURSTS[self.bursts.fetch_add(1, Ordering::Relaxed) % BURSTS.len()];
        let mut conn = self.round.admin.clone();
        let due = redis_ms(&mut conn).await + BURST_LEAD_MS;
        self.add(topic, &vec![due; BURST]).await?;
        let delayed_key = self.round.keys.qdelayed(topic);
        let card = |mut conn: keyfire::store::Conn| {
            let key = delayed_key.clone();
            async move {
                redis::cmd("ZCARD")
                    .arg(key)
                    .query_async::<usize>(&mut conn)
                    .await
                    .ok()
            }
        };
        let before = card(conn.clone()).await.unwrap_or(BURST);
        // The owner by the live set as the nodes see it.
        let now = redis_ms(&mut conn).await;
        let live: Vec<String> = redis::cmd("ZRANGE")
            .arg(self.round.keys.nodes())
            .arg(now - NODE_TTL_MS)
            .arg("+inf")
            .arg("BYSCORE")
            .query_async(&mut conn)
            .await
            .unwrap_or_default();
        let owner = keyfire::engine::membership::owner(&live, topic)
            .unwrap_or("n1")
            .to_string();
        let wait = (due - host_ms() - 20).max(0) as u64;
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let give_up = Instant::now() + Duration::from_secs(4);
        while Instant::now() < give_up {
            // As fast as Redis answers: a batch of the promotion takes a few ms.
            if card(conn.clone()).await.is_some_and(|n| n < before) {
                break;
            }
            tokio::task::yield_now().await;
        }
        let mut nodes = self.round.nodes.lock().await;
        let i = nodes.iter().position(|n| n.id == owner).unwrap_or(0);
        nodes[i].kill().await;
        drop(nodes);
        let left = card(conn.clone()).await;
        tokio::time::sleep(f.hold).await;
        let back = host_ms();
        self.round.nodes.lock().await[i].spawn()?;
        self.round
            .wait_heartbeat(&owner, back, Duration::from_secs(15))
            .await;
        self.round.record(
            f.kind,
            Some(&owner),
            t0,
            format!(
                "owner of {topic} killed with {} of {before} burst tasks not yet promoted; down {:?}",
                left.map_or("?".into(), |n| n.to_string()),
                f.hold
            ),
        );
        Ok(())
    }

    /// Empty `notify-keyspace-events` for the hold, then set it back.
    async fn lose_events(&self, f: &PlannedFault) -> anyhow::Result<()> {
        let t0 = host_ms();
        let mut conn = self.round.admin.clone();
        let flags: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("notify-keyspace-events")
            .query_async(&mut conn)
            .await
            .unwrap_or_default();
        let flags = flags.get(1).cloned().unwrap_or_else(|| "Ex".into());
        let off: redis::RedisResult<()> = redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg("")
            .query_async(&mut conn)
            .await;
        tokio::time::sleep(f.hold).await;
        // A Redis restart meanwhile set them back from redis.conf already; this is harmless.
        for _ in 0..50 {
            let on: redis::RedisResult<()> = redis::cmd("CONFIG")
                .arg("SET")
                .arg("notify-keyspace-events")
                .arg(&flags)
                .query_async(&mut conn)
                .await;
            if on.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        self.round.record(
            f.kind,
            None,
            t0,
            format!(
                "expired events off for {:?}{}",
                f.hold,
                if off.is_err() { " (not applied)" } else { "" }
            ),
        );
        Ok(())
    }

    /// Tasks delayed, ready or reserved in every topic of the round (`None`: Redis did not
    /// answer).
    async fn unsettled(&self) -> Option<u64> {
        let topics = self.queue.topics().await.ok()?;
        Some(
            topics
                .iter()
                .map(|c| c.delayed + c.ready + c.reserved)
                .sum(),
        )
    }
}

/// Run one delay-queue round and check it.
pub async fn run_queue(cfg: Config) -> anyhow::Result<Outcome> {
    cfg.check()?;
    anyhow::ensure!(
        !cfg.cluster,
        "the delay-queue round runs on one Redis; a round on a Redis Cluster checks the \
         delay queue with its jobs"
    );
    let (dir, temp) = super::harness::round_dir(&cfg)?;
    let plan = Plan::queue(cfg.seed, cfg.duration, cfg.nodes);
    let round = setup(&cfg, &dir, &plan).await?;
    let settings = round.settings();
    let topics = std::iter::once(SPREAD)
        .chain(BURSTS)
        .collect::<Vec<_>>()
        .join(",");
    let consumers = (0..cfg.nodes)
        .map(|i| NodeProc {
            id: format!("c{}", i + 1),
            child: None,
            skew_ms: 0,
            redis_env: vec![("KEYFIRE__REDIS__URL".into(), settings.redis.url.clone())],
            dir: dir.clone(),
            bin: cfg.node_bin.clone(),
            consumer_of: Some(topics.clone()),
            frozen: false,
            started_ms: 0,
        })
        .collect();
    let q = QueueRound {
        round: &round,
        consumers: Mutex::new(consumers),
        queue: Queue::connect(&settings).await?,
        ops: std::sync::Mutex::new(Vec::new()),
        next_task: AtomicUsize::new(0),
        bursts: AtomicUsize::new(0),
    };
    let result = drive(&q, &plan).await;
    for c in q.consumers.lock().await.iter_mut() {
        c.stop().await;
    }
    for n in round.nodes.lock().await.iter_mut() {
        n.stop().await;
    }
    let (workload, faults, mut history) = result?;
    let (events, torn) = read_queue_events(&dir)?;
    history.queue = events;
    history.torn = torn;
    finish_round(&dir, temp, workload, faults, history)
}

async fn drive(
    q: &QueueRound<'_>,
    plan: &Plan,
) -> anyhow::Result<(Workload, Vec<FaultEvent>, History)> {
    let round = q.round;
    let mut conn = round.admin.clone();
    start_nodes(round).await?;
    for c in q.consumers.lock().await.iter_mut() {
        c.spawn()?;
    }
    round.note(format!("queue round; plan: {plan:?}"));
    let start_ms = redis_ms(&mut conn).await;
    let round_start = Instant::now();
    let until = round_start + plan.duration;
    let (w, a, b) = tokio::join!(
        q.produce(plan.seed, until),
        q.run_lane(&plan.node_lane, round_start),
        q.run_lane(&plan.redis_lane, round_start),
    );
    w?;
    a?;
    b?;
    let cutoff_ms = redis_ms(&mut conn).await;
    round.note("cutoff: faults over; draining");
    for p in &round.proxies {
        p.set(Mode::Pass);
    }
    for n in round.nodes.lock().await.iter_mut() {
        n.freeze(false);
        if n.child.is_none() {
            n.spawn()?;
        }
    }
    for c in q.consumers.lock().await.iter_mut() {
        if c.child.is_none() {
            c.spawn()?;
        }
    }
    let deadline = Instant::now() + DRAIN_LIMIT;
    while Instant::now() < deadline && q.unsettled().await != Some(0) {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Consumers finish what they hold and leave; then the nodes.
    for c in q.consumers.lock().await.iter_mut() {
        c.stop().await;
    }
    for n in round.nodes.lock().await.iter_mut() {
        n.stop().await;
    }
    let end_ms = redis_ms(&mut conn).await;
    let ops = std::mem::take(&mut *q.ops.lock().expect("ops lock"));
    let mut history = History::default();
    for chunk in ops.chunks(200) {
        let states = futures::future::join_all(chunk.iter().map(|op| q.queue.get(&op.job))).await;
        for (op, state) in chunk.iter().zip(states) {
            let state = match state {
                Ok(info) => info.state.as_str().to_string(),
                Err(Error::TaskNotFound(_)) => "gone".into(),
                Err(e) => return Err(e.into()),
            };
            history.queue_states.insert(op.job.clone(), state);
        }
    }
    let workload = Workload {
        seed: plan.seed,
        start_ms,
        cutoff_ms,
        end_ms,
        bounds: Bounds::for_settings(GRACE_MS, NODE_TTL_MS, SWEEP_MS),
        ops,
    };
    let faults = round.faults();
    Ok((workload, faults, history))
}
