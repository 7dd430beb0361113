//! The topic promotion: what makes a topic's due tasks ready, on every node that serves topics.
//!
//! The unit is a topic's *lane* (a partition, or the topic's keys under the meta tag; see
//! `lane.rs`), named by its id (`<topic>:<partition>`, or the topic) in the work below, its
//! ownership and the `wake` messages. keyfire's firing shape, at lane granularity:
//! - each hash tag's sentinel key (`Keys::qnext`) expires at the head of the tag's due index
//!   (below); its `expired` event reaches every node, and each reads the lanes due now and
//!   visits those it owns (rendezvous hash over the live nodes) at once. One key per tag, not
//!   per topic: a topic holds no key of its own for it. (Sentinel keys per lane that earlier
//!   releases set, `Keys::qwake`, are served the same way until they are gone.)
//! - the owner's precision timer: armed from the add's `wake` message (a new earliest instant)
//!   and from each promotion's answer (the next due instant), it promotes right after the
//!   instant, by the node's estimate of Redis's clock; the script decides by Redis's own, so a
//!   timer that fires early moves nothing and is armed again;
//! - the sweep, every sweep interval on every node, reads the *due index* of each hash tag
//!   (`Keys::qdue`: lane → its earliest work, a delayed task's instant or a reservation's
//!   deadline, kept by the queue's scripts), up to the timer horizon: the owner visits a lane
//!   whose work is due at once and arms timers for those due within the horizon; any node
//!   visits a lane overdue by the grace period (its owner is gone or behind). A visit takes back
//!   the lane's expired reservations (at most [`RECOVER_BUDGET`]) and promotes it, and the
//!   promotion sets the lane's entry to its next work or removes it. So a topic nobody pops
//!   still redelivers and dead-letters, and an idle node asks Redis for one read per tag and
//!   sweep, whatever the number of topics and tasks it holds.
//! - until the index is complete (a marker, `Keys::qindexed`, written once every live node
//!   keeps the index and a walk filled in what earlier releases had queued), the sweep walks
//!   the heads of every topic's lanes instead, as earlier releases did, and lowers their index
//!   entries as it goes.
//!
//! The promotion script's move is the claim, so all of these may race: a task becomes ready
//! once, never early.
//!
//! The sweep also runs the queue's upgrade: until the switch to the sharded layout, each node
//! says it serves it and switches it once every live node does (`switch.lua`); after it, the
//! owner of a topic's meta-tag lane moves what is left there to the partitions
//! ([`Queue::migrate`]). The switch deletes the due index's marker, so that the sweeps walk
//! every topic (and find those lanes) until nothing is left under the meta tag.

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
use crate::store::{DueFrom, Shards, Store};

/// Nodes whose heartbeat is this recent count as live for the switch to the sharded layout.
const SWITCH_WINDOW: Duration = Duration::from_secs(30);

/// Expired reservations one sweep takes back per topic.
const RECOVER_BUDGET: usize = 1_000;
/// Topics whose heads one pipelined read covers.
const HEADS_PER_READ: usize = 500;
/// Due-index entries one read covers, and the reads one sweep makes per tag at most (what is
/// left is read by the next sweep; events and timers do not wait for it).
const INDEX_PAGE: usize = 1_000;
const INDEX_PAGES: usize = 10;

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
    /// Take back the lane's expired reservations and promote it.
    Visit(String),
    /// The tag's sentinel key expired: visit its lanes due now that this node owns.
    Tag(Option<usize>),
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
                indexed: None,
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
        if let Some(tag) = Queue::next_tag(&self.shards, key) {
            for run in self.runs() {
                let _ = run.tx.send(Work::Tag(tag));
            }
            return true;
        }
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
    /// The due index was seen complete, under this layout.
    indexed: Option<Layout>,
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
                    Some(Work::Visit(lane)) => self.visit(lane),
                    Some(Work::Tag(tag)) => self.due_in(tag),
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

    /// Read the lanes of a tag due now (its sentinel key expired) and visit those this node
    /// owns; the others are their owners' (or, after the grace period, any node's sweep).
    fn due_in(&self, tag: Option<usize>) {
        let (queue, view, tx) = (self.queue.clone(), self.view.clone(), self.tx.clone());
        tokio::spawn(async move {
            let now = view.redis_now_ms();
            match queue
                .index_page(tag, &DueFrom::Start, now, INDEX_PAGE)
                .await
            {
                Ok(page) => {
                    for (id, _) in page {
                        if view.owns(&id) {
                            let _ = tx.send(Work::Visit(id));
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "reading the due index failed"),
            }
        });
    }

    /// Promote a topic in a task of its own (one at a time per topic; a request that comes
    /// meanwhile runs once the current one ends). Its answer arms the next instant.
    fn promote(&mut self, topic: String) {
        self.start(topic, false);
    }

    /// Take back a lane's expired reservations (at most [`RECOVER_BUDGET`]) and promote it: what
    /// a sweep does for a lane whose index entry (or reserved head) is due.
    fn visit(&mut self, topic: String) {
        self.start(topic, true);
    }

    fn start(&mut self, topic: String, recover: bool) {
        if self.promoting.contains(&topic) {
            self.again.insert(topic);
            return;
        }
        self.promoting.insert(topic.clone());
        let (queue, view, tx) = (self.queue.clone(), self.view.clone(), self.tx.clone());
        tokio::spawn(async move {
            if recover {
                match queue.recover_id(&topic, RECOVER_BUDGET).await {
                    Ok(r) if r.requeued + r.dead + r.promoted > 0 => tracing::debug!(
                        lane = topic,
                        requeued = r.requeued,
                        dead = r.dead,
                        promoted = r.promoted,
                        "lane visited"
                    ),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(lane = topic, error = %e, "recovery failed"),
                }
            } else {
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
            }
            let _ = tx.send(Work::Done(topic));
        });
    }

    /// One sweep: of the due index once it is complete, else a walk over every topic.
    async fn sweep(&mut self) {
        if let Err(e) = self.sweep_once().await {
            tracing::warn!(error = %e, "topic sweep failed");
        }
    }

    async fn sweep_once(&mut self) -> crate::Result<()> {
        self.upgrade().await?;
        if self.indexed().await? {
            self.sweep_index().await
        } else {
            self.walk().await
        }
    }

    /// Whether the due index is complete (read until seen, and again when the layout changed:
    /// the switch to the sharded layout deletes the marker).
    async fn indexed(&mut self) -> crate::Result<bool> {
        let layout = self.queue.layout().await?;
        if self.indexed == Some(layout) {
            return Ok(true);
        }
        if self.queue.index_marked().await? {
            tracing::debug!("the delay queue's due index is complete: sweeps read it alone");
            self.indexed = Some(layout);
            return Ok(true);
        }
        self.indexed = None;
        Ok(false)
    }

    /// The sweep once the due index is complete: read each tag's index up to the horizon (a
    /// page per tag and sweep), visit the lanes whose work is due (the owner at once, any node
    /// after the grace period) and arm the owner's timers for those due within the horizon.
    /// Nothing due: one read per tag, whatever the number of topics and tasks.
    async fn sweep_index(&mut self) -> crate::Result<()> {
        let grace = self.view.grace().as_millis() as i64;
        let horizon = self.view.timer_horizon().as_millis() as i64;
        let now = self.view.redis_now_ms();
        let shards = self.queue.store.shards().len();
        let tags: Vec<Option<usize>> = if shards > 1 {
            std::iter::once(None).chain((0..shards).map(Some)).collect()
        } else {
            vec![None]
        };
        for tag in tags {
            let mut from = DueFrom::Start;
            for _ in 0..INDEX_PAGES {
                let page = self
                    .queue
                    .index_page(tag, &from, now + horizon, INDEX_PAGE)
                    .await?;
                let full = page.len() == INDEX_PAGE;
                for (id, at) in page {
                    let owner = self.view.owns(&id);
                    if at <= now && (owner || at <= now - grace) {
                        self.visit(id.clone());
                    } else if owner && at > now {
                        self.arm(id.clone(), at);
                    }
                    from = DueFrom::Past(at, id);
                }
                if !full {
                    break;
                }
            }
        }
        Ok(())
    }

    /// The sweep until the due index is complete: read the heads of every topic's delayed and
    /// reserved sets (promote the overdue, arm the owner's timers within the horizon, take back
    /// expired reservations, move what is left under the meta tag) and lower each lane's index
    /// entry to what it found. A walk that began with every live node keeping the index, and
    /// found nothing left under the meta tag to move, marks the index complete.
    async fn walk(&mut self) -> crate::Result<()> {
        let node = self.view.node_id().to_string();
        let may_mark = self
            .queue
            .index_script("join", &node, SWITCH_WINDOW)
            .await?;
        let names = self.queue.topic_names().await?;
        let grace = self.view.grace().as_millis() as i64;
        let horizon = self.view.timer_horizon().as_millis() as i64;
        let mut lanes = Vec::new();
        for topic in &names {
            lanes.extend(self.queue.lanes(topic, true).await?);
        }
        let mut legacy = false;
        for chunk in lanes.chunks(HEADS_PER_READ) {
            let heads = self.queue.read_first_due(chunk).await?;
            let now = self.view.redis_now_ms();
            let mut found = Vec::new();
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
                        self.visit(id.clone());
                    }
                }
                let work = match (first_due, first_deadline) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                if let Some(at) = work {
                    found.push((lane.clone(), at as i64));
                }
                if lane.part.is_none() && self.queue.store.shards().len() > 1 {
                    legacy = true;
                    if owner {
                        self.migrate(lane.topic.clone());
                    }
                }
            }
            if may_mark {
                // Only a walk that may mark needs them: before, a node that does not keep the
                // index may add work after it.
                self.queue.write_index(&found).await?;
            }
        }
        if may_mark
            && !(legacy && self.queue.legacy_left(&names).await?)
            && self
                .queue
                .index_script("mark", &node, SWITCH_WINDOW)
                .await?
        {
            tracing::info!(
                topics = names.len(),
                "the delay queue's due index is complete: sweeps read it instead of every topic"
            );
        }
        Ok(())
    }

    /// Move what is left of a topic under the meta tag to its partitions (nothing before the
    /// switch), in a task of its own.
    fn migrate(&self, topic: String) {
        let queue = self.queue.clone();
        tokio::spawn(async move {
            match queue.migrate(&topic).await {
                Ok(0) => {}
                Ok(moved) => tracing::info!(topic, moved, "tasks moved to the topic's partitions"),
                Err(e) => tracing::warn!(topic, error = %e, "moving tasks to partitions failed"),
            }
        });
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
