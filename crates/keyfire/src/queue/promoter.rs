//! The topic promotion: what makes a topic's due tasks ready, on every node that serves topics.
//!
//! The unit is a topic's *lane* (a partition, or the topic's keys under the meta tag; see
//! `lane.rs`), named by its id (`<topic>:<partition>`, or the topic) in the work below, its
//! ownership and the `wake` messages. keyfire's firing shape, at lane granularity:
//! - the topic's sentinel key (`Keys::qwake`) expires at its earliest due instant; its `expired`
//!   event reaches every node, and the topic's owner (rendezvous hash over the live nodes)
//!   promotes the topic at once;
//! - the owner's precision timer: armed from the add's `wake` message (a new earliest instant)
//!   and from each promotion's answer (the next due instant), it promotes right after the
//!   instant, by the node's estimate of Redis's clock; the script decides by Redis's own, so a
//!   timer that fires early moves nothing and is armed again;
//! - the sweep, every sweep interval on every node, reads the head of each topic's delayed and
//!   reserved sets: the owner promotes an overdue topic at once and arms timers for those due
//!   within the horizon; any node promotes a topic overdue by the grace period (its owner is
//!   gone or behind). The same sweep takes back expired reservations of every topic (at most
//!   [`RECOVER_BUDGET`] per topic and sweep), so a topic nobody pops still redelivers and dead-
//!   letters, and its counts stay current.
//!
//! The promotion script's move is the claim, so all of these may race: a task becomes ready
//! once, never early.
//!
//! The sweep also runs the queue's upgrade: until the switch to the sharded layout, each node
//! says it serves it and switches it once every live node does (`switch.lua`); after it, the
//! owner of a topic's meta-tag lane moves what is left there to the partitions
//! ([`Queue::migrate`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Queue;
use super::lane::Layout;
use crate::config::RedisSettings;
use crate::handler::{NodeHook, NodeView};
use crate::store::{Shards, Store};

/// Nodes whose heartbeat is this recent count as live for the switch to the sharded layout.
const SWITCH_WINDOW: Duration = Duration::from_secs(30);

/// Expired reservations one sweep takes back per topic.
const RECOVER_BUDGET: usize = 1_000;
/// Topics whose heads one pipelined read covers.
const HEADS_PER_READ: usize = 500;

/// The hook that promotes topics (see the module docs). Register it with
/// [`super::serve_topics`].
pub struct TopicPromoter {
    redis: RedisSettings,
    shards: Shards,
    /// The runs of this hook (one per node started with it): where events go.
    runs: Mutex<Vec<Run>>,
}

#[derive(Clone)]
struct Run {
    view: Arc<dyn NodeView>,
    tx: mpsc::UnboundedSender<Work>,
}

enum Work {
    /// Promote the topic now.
    Promote(String),
    /// Arm the timer for the topic's instant (ms, Redis time).
    Arm(String, i64),
    /// A promotion of the topic ended.
    Done(String),
}

impl TopicPromoter {
    /// A promotion that connects to the Redis of `redis` when its node starts.
    pub fn connect_lazily(redis: &RedisSettings) -> Self {
        Self {
            shards: Shards::new(&redis.prefix, redis.shards as usize),
            redis: redis.clone(),
            runs: Mutex::new(Vec::new()),
        }
    }

    fn runs(&self) -> Vec<Run> {
        self.runs.lock().expect("runs lock").clone()
    }
}

impl NodeHook for TopicPromoter {
    fn run(
        self: Arc<Self>,
        node: Arc<dyn NodeView>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let (tx, rx) = mpsc::unbounded_channel();
            let run = Run {
                view: node.clone(),
                tx: tx.clone(),
            };
            self.runs.lock().expect("runs lock").push(run);
            let Some(queue) = connect(&self.redis, &stop).await else {
                return;
            };
            Loop {
                queue,
                view: node.clone(),
                tx,
                timers: HashMap::new(),
                promoting: HashSet::new(),
                again: HashSet::new(),
                upgraded: false,
            }
            .run(rx, stop)
            .await;
            self.runs
                .lock()
                .expect("runs lock")
                .retain(|r| !Arc::ptr_eq(&r.view, &node));
        })
    }

    fn on_expired(&self, key: &str) -> bool {
        let Some(topic) = Queue::wake_lane(&self.shards, key) else {
            return false;
        };
        let topic = topic.as_str();
        for run in self.runs() {
            // Only the owner promotes at once; the others leave it to their sweep.
            if run.view.owns(topic) {
                let _ = run.tx.send(Work::Promote(topic.to_string()));
            }
        }
        true
    }

    fn on_message(&self, op: &str, id: &str, at: Option<i64>) {
        if op != "wake" {
            return;
        }
        let Some(at) = at else { return };
        for run in self.runs() {
            if run.view.owns(id) {
                let _ = run.tx.send(Work::Arm(id.to_string(), at));
            }
        }
    }
}

async fn connect(redis: &RedisSettings, stop: &CancellationToken) -> Option<Queue> {
    let mut backoff = Duration::from_millis(50);
    loop {
        match Store::open(redis).await {
            Ok(store) => return Some(Queue::new(store)),
            Err(e) => tracing::warn!(error = %e, "topic promotion cannot connect; retrying"),
        }
        tokio::select! {
            _ = stop.cancelled() => return None,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

/// One node's promotion loop.
struct Loop {
    queue: Queue,
    view: Arc<dyn NodeView>,
    tx: mpsc::UnboundedSender<Work>,
    /// Precision timers: topic → instant (ms, Redis time).
    timers: HashMap<String, i64>,
    /// Topics whose promotion runs now, and those to promote again when it ends.
    promoting: HashSet<String>,
    again: HashSet<String>,
    /// This node said it serves the sharded layout.
    upgraded: bool,
}

impl Loop {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Work>, stop: CancellationToken) {
        let mut tick = tokio::time::interval(self.view.sweep_interval());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let next = self.timers.values().min().copied();
            let sleep = match next {
                // One ms past the instant: Redis promotes only what is due by its clock.
                Some(at) => ms((at - self.view.redis_now_ms()).max(0) + 1),
                None => Duration::from_secs(3600),
            };
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => self.sweep().await,
                _ = tokio::time::sleep(sleep), if next.is_some() => self.fire_timers(),
                work = rx.recv() => match work {
                    None => return,
                    Some(Work::Promote(topic)) => self.promote(topic),
                    Some(Work::Arm(topic, at)) => self.arm(topic, at),
                    Some(Work::Done(topic)) => {
                        self.promoting.remove(&topic);
                        if self.again.remove(&topic) {
                            self.promote(topic);
                        }
                    }
                },
            }
        }
    }

    fn fire_timers(&mut self) {
        let now = self.view.redis_now_ms();
        let due: Vec<String> = self
            .timers
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(t, _)| t.clone())
            .collect();
        for topic in due {
            self.timers.remove(&topic);
            self.promote(topic);
        }
    }

    /// Arm the timer of a topic this node owns, due within the horizon.
    fn arm(&mut self, topic: String, at: i64) {
        let now = self.view.redis_now_ms();
        if at <= now {
            return self.promote(topic);
        }
        if at > now + self.view.timer_horizon().as_millis() as i64 {
            return; // the sweep arms it when it comes within the horizon
        }
        let slot = self.timers.entry(topic).or_insert(at);
        *slot = (*slot).min(at);
    }

    /// Promote a topic in a task of its own (one at a time per topic; a request that comes
    /// meanwhile runs once the current one ends). Its answer arms the next instant.
    fn promote(&mut self, topic: String) {
        if self.promoting.contains(&topic) {
            self.again.insert(topic);
            return;
        }
        self.promoting.insert(topic.clone());
        let (queue, view, tx) = (self.queue.clone(), self.view.clone(), self.tx.clone());
        tokio::spawn(async move {
            match queue.promote_id(&topic).await {
                Ok(p) => {
                    if p.moved > 0 {
                        tracing::debug!(topic, moved = p.moved, "topic promoted");
                    }
                    if let Some(next) = p.next_due_ms
                        && view.owns(&topic)
                    {
                        let _ = tx.send(Work::Arm(topic.clone(), next.max(p.now_ms)));
                    }
                }
                Err(e) => tracing::warn!(topic, error = %e, "topic promotion failed"),
            }
            let _ = tx.send(Work::Done(topic));
        });
    }

    /// Read the heads of every topic's delayed and reserved sets: promote the overdue topics
    /// (the owner's at once, any after the grace period), arm the owner's timers within the
    /// horizon, take back expired reservations.
    async fn sweep(&mut self) {
        if let Err(e) = self.sweep_once().await {
            tracing::warn!(error = %e, "topic sweep failed");
        }
    }

    async fn sweep_once(&mut self) -> crate::Result<()> {
        self.upgrade().await?;
        let names = self.queue.topic_names().await?;
        let grace = self.view.grace().as_millis() as i64;
        let horizon = self.view.timer_horizon().as_millis() as i64;
        let mut lanes = Vec::new();
        for topic in &names {
            lanes.extend(self.queue.lanes(topic, true).await?);
        }
        for chunk in lanes.chunks(HEADS_PER_READ) {
            let heads = self.queue.read_first_due(chunk).await?;
            let now = self.view.redis_now_ms();
            for (lane, (first_due, first_deadline)) in chunk.iter().zip(heads) {
                let id = lane.id();
                let owner = self.view.owns(&id);
                if let Some(due) = first_due {
                    let due = due as i64;
                    if due <= now && (owner || due <= now - grace) {
                        self.promote(id.clone());
                    } else if owner && due <= now + horizon {
                        self.arm(id.clone(), due);
                    }
                }
                if let Some(deadline) = first_deadline {
                    let deadline = deadline as i64;
                    if deadline <= now && (owner || deadline <= now - grace) {
                        let (queue, id) = (self.queue.clone(), id.clone());
                        tokio::spawn(async move {
                            match queue.recover_id(&id, RECOVER_BUDGET).await {
                                Ok(r) if r.requeued + r.dead > 0 => tracing::debug!(
                                    lane = id,
                                    requeued = r.requeued,
                                    dead = r.dead,
                                    "expired reservations taken back"
                                ),
                                Ok(_) => {}
                                Err(e) => tracing::warn!(lane = id, error = %e, "recovery failed"),
                            }
                        });
                    }
                }
                if lane.part.is_none() && owner {
                    // Move what is left under the meta tag to the partitions (nothing before
                    // the switch).
                    let (queue, topic) = (self.queue.clone(), lane.topic.clone());
                    tokio::spawn(async move {
                        match queue.migrate(&topic).await {
                            Ok(0) => {}
                            Ok(moved) => tracing::info!(
                                topic,
                                moved,
                                "tasks moved to the topic's partitions"
                            ),
                            Err(e) => {
                                tracing::warn!(topic, error = %e, "moving tasks to partitions failed")
                            }
                        }
                    });
                }
            }
        }
        Ok(())
    }

    /// Until the queue has switched to the sharded layout: say this node serves it, and switch
    /// when every live node does.
    async fn upgrade(&mut self) -> crate::Result<()> {
        if self.queue.layout().await? == Layout::Sharded {
            return Ok(());
        }
        if !self.upgraded {
            self.queue.mark_upgraded(self.view.node_id()).await?;
            self.upgraded = true;
        }
        if self.queue.switch_script(SWITCH_WINDOW).await? {
            tracing::info!("the delay queue's topics are spread over the shards from now on");
            self.queue.layout_fresh().await?;
        }
        Ok(())
    }
}

fn ms(n: i64) -> Duration {
    Duration::from_millis(n.max(0) as u64)
}
