//! Delay queue with topics: tasks handed to consumers in any language, after a delay.
//!
//! A producer [`Queue::add`]s a task (a JSON payload) to a topic, due after a delay or at an
//! instant. When it is due it becomes *ready*; a consumer [`Queue::pop_many`]s up to `max` ready
//! tasks in one call (long-polling up to a wait) and holds a *reservation* on each for the task's
//! time-to-run (ttr), then [`Queue::finish_many`]es them. A reservation not finished in time
//! goes back to ready for another consumer, counted as a redelivery; a task delivered
//! `max_deliveries` times without a finish goes to the topic's dead letters instead.
//!
//! ```text
//!   add ──► delayed ──(its topic is promoted)──► ready ──pop──► reserved ──finish──► done
//!             │ (due now: ready at once)           ▲              │ ttr passed
//!             │                                    └──────────────┤ (deliveries < max)
//!             │                                                   └──► dead (deliveries = max)
//!   delete: any state ──► deleted
//! ```
//!
//! **The unit of firing is the topic's lane** (a partition, see below). Each has a delayed ZSET (by due instant) and a
//! ready ZSET (by the instant each task became ready). One script (`lua/promote.lua`) moves every
//! due task of a topic, by Redis's clock, from delayed to ready in a batch; the move itself is
//! the claim, so a task becomes ready exactly once however many nodes promote the topic at
//! once, and never before its instant (G1, G3). What triggers the promotion is keyfire's firing
//! shape at topic granularity ([`TopicPromoter`], a hook every node built by
//! [`crate::Registry::for_node`] runs): a sentinel key per hash tag expiring at the earliest due
//! instant of the tag's topics (brought forward by the adds, set by each promotion), its
//! `expired` event on every node, the
//! owner's precision timer (armed from the add's `wake` message and from each promotion's next
//! due instant), and every node's sweep as the fallback: the owner promotes an overdue topic
//! at once, any node after the grace period, so a lost event or a dead owner loses nothing
//! (G2). The same sweep takes back expired reservations of topics nobody pops, bounded per
//! sweep. The sweep finds both through a *due index* per hash tag (lane → its earliest work)
//! that the scripts keep, so what an idle node asks of Redis does not grow with topics.
//!
//! **Reservations are fenced.** Every reserved task gets a fresh token of its own; `finish` and
//! `touch` must show it. When a reservation expired and the task went back to ready (and maybe
//! to another consumer), the late consumer's finish is refused ([`Error::ReservationLost`], or
//! [`Finished::Lost`] in a batch), so work is never acknowledged twice.
//!
//! **Tasks queued by an earlier version** were one-shot keyfire jobs (`q.<task id>`, handler
//! [`TOPIC_HANDLER`]) beside an entry in the topic's delayed set. Both paths are served: the
//! topic's promotion moves such a task when it is due, and when its job fires, the `topic`
//! handler ([`TopicHandler`]) makes it ready only if it takes it out of the delayed set itself,
//! so whichever comes first wins and the other does nothing. Deleting such a task deletes its
//! job too.
//!
//! **Where a topic lives** (`lane.rs`, `docs/queue.md`). A topic's keys and its tasks' records
//! live under the hash tag of one shard (`redis.shards`): the shard of its name, as for a job.
//! A topic declared with `partitions = N` ([`Queue::set_partitions`], 1 to [`MAX_PARTITIONS`])
//! has N full sets of keys, partition `p` on shard `base + p·shards/N`, so its tasks, memory
//! and pops spread over N shards (and the masters holding them). A task goes to the partition
//! a stable hash of its id names; its reservation token names its partition, so finish and
//! touch read nothing first; routes under a topic look in the topic's partitions, and lookups
//! by id alone ask every shard. The count is set once, before the topic's first task, and
//! never changed (the placement depends on it; a queue that has not read it yet uses
//! partition 0, which is where it is whatever the count). Pops visit the partitions in turn from a start that moves on with
//! each pop, and a blocking pop waits on every partition's notify list: within a partition
//! tasks come out in the order they became ready, across partitions only about so.
//!
//! **What stays on the meta tag** grows with topics, never with tasks or pops: the topic
//! set, the partition counts, the layout marker. Each [`Queue`] reads the layout and the counts
//! at most every 5 s, and registers a topic in the set once.
//!
//! **The upgrade from the meta-tag layout** of earlier releases (every topic under `{prefix}`):
//! until every live node serves the sharded layout, all nodes keep that layout, so old and new
//! nodes and consumers share it; then a sweep switches it (once), adds go to the shards, and
//! the sweep moves what is left under the meta tag to the partitions (`migrate.rs`).
//!
//! **Redis layout** (names in the store's `Keys`, one Lua script per change in `lua/`, the
//! calls and the blocking waits in `store.rs`): a hash per task; per lane a `delayed` ZSET, a
//! `ready` ZSET, a `reserved` ZSET (by deadline, Redis time), a `dead` ZSET, a notify list that
//! wakes blocked pops and a counters hash; per hash tag the due index and its sentinel key; a
//! SET of topic names. A task's
//! record is not written when it is promoted (a record that says `delayed` is ready while its
//! id is in the ready set), which keeps a task to about ten Redis commands end to end. Done and
//! deleted tasks keep a small record without their payload for a retention (10 minutes by
//! default), dead ones for the dead-letter retention (7 days): memory is bounded by rate times
//! retention.
//!
//! **Dead letters and pauses.** A topic's dead letters keep their record (deliveries, when
//! they died, and why: `error`) for the dead-letter retention; [`Queue::replay_dead`] makes
//! them ready again (deliveries reset to 0) and [`Queue::purge_dead`] deletes them, all or by
//! id, one script call per lane and batch (`dead.rs`). [`Queue::pause`] stops a topic's pops
//! from reserving anything until [`Queue::resume`]: a flag in each lane's stats hash, which
//! `pop.lua` reads in the same call (`pause.rs`).
//!
//! **Batches with a completion callback** ([`Queue::add_batch`], `batch.rs`): the tasks of one
//! batch go to one lane, with the batch's record under its tag; the scripts that end a task
//! (finish, requeue to the dead letters, delete) count it there, and the last one queues the
//! callback in that shard's outbox, as for batches of one-shot tasks.
//!
//! **Where the code is**: adds, lookups, deletes and the topic list here; pops, finishes and
//! touches in `consume.rs`; dead letters in `dead.rs`; pauses in `pause.rs`; promotion and the reclaim of lapsed reservations in `due.rs`, and
//! what triggers them on the nodes in `promoter.rs`; where a topic's keys live in `lane.rs`;
//! the script calls and their replies in `store.rs` and `reply.rs`; input checks in
//! `check.rs`; the upgrade's moves in `migrate.rs`.

mod batch;
mod check;
mod consume;
mod dead;
mod debounce;
mod due;
mod handler;
mod lane;
mod migrate;
mod pause;
mod priority;
mod promoter;
mod reply;
mod stats;
mod store;
mod task;
mod traced;
mod wait;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use redis::Value;
use serde::Deserialize;

use crate::client::Client;
use crate::config::{InputLimits, Settings};
use crate::error::{Error, Result};
use crate::handler::{Firing, HandlerError, HandlerResult};
use crate::job::ValidationError;
use crate::store::Store;
use check::{Checked, check, check_max_deliveries, check_payload, check_ttr};
pub use check::{check_max, check_priority, check_task_id, check_topic, check_wait, token_topic};
pub use dead::check_dead_ids;
pub use due::Promotion;
pub use handler::{TopicHandler, serve_topics};
pub use lane::MAX_PARTITIONS;
use lane::{Lane, Topology, partition_of};
pub use priority::MAX_PRIORITY;
pub use promoter::TopicPromoter;
use reply::{code, text};
pub use stats::{OTHER, QueueSample, TopicSampler, TopicStats};
use task::decode_task;
pub use task::{
    Finished, NewTask, Requeued, Reserved, TaskAdded, TaskInfo, TaskState, TopicCounts, When,
};
use wait::Waiter;

/// The name of the built-in handler that feeds topics from recurring jobs and delivers the
/// delayed tasks an earlier version queued as one-shot jobs.
pub const TOPIC_HANDLER: &str = "topic";
/// Prefix of the keyfire job of a task queued by an earlier version: `q.<task id>`.
pub const JOB_PREFIX: &str = "q.";
/// What topic names and task ids may hold, as a regular expression (the rule of job ids; the
/// REST API's OpenAPI document states it, and a test checks it against the checks).
pub const NAME_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9_.-]*$";
/// A reservation token as a pop gives it, `<32 hex digits>.<topic>`, as a regular expression.
pub const TOKEN_PATTERN: &str = "^[0-9A-Fa-f]{32}\\.[A-Za-z0-9][A-Za-z0-9_.-]*$";
/// Longest topic name, in bytes.
pub const MAX_TOPIC_LEN: usize = 128;
/// Longest task id, in bytes (ids of tasks fed by a recurring job are `<job id>.<instant ms>`).
pub const MAX_TASK_ID_LEN: usize = 160;
/// Longest id a caller may give [`NewTask::id`], in bytes.
pub const MAX_NEW_ID_LEN: usize = 128 - JOB_PREFIX.len();
/// Longest time-to-run.
pub const MAX_TTR: Duration = Duration::from_secs(24 * 3600);
/// Most deliveries a task may be given.
pub const MAX_DELIVERIES_LIMIT: u32 = 1_000;
/// Most tasks one pop may take, and one batch finish acknowledge.
pub const MAX_POP: usize = 1_000;
/// Longest a pop may wait.
pub const MAX_WAIT: Duration = Duration::from_secs(60);
/// Time-to-run of a task when none is given (a topic fed by a recurring job).
pub const DEFAULT_TTR: Duration = Duration::from_secs(60);
/// Deliveries of a task when none are given (a topic fed by a recurring job).
pub const DEFAULT_MAX_DELIVERIES: u32 = 5;
/// How long the record of a done or deleted task is kept (without its payload).
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(600);
/// How long a dead letter is kept.
pub const DEFAULT_DEAD_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
/// Longest delay, so an instant stays a valid timestamp (about 100 years).
const MAX_DELAY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
/// Reservations at the head of the reserved set read before a pop or a requeue.
const CANDIDATES: usize = 16;
/// Wake-up tokens kept in a topic's notify list (each wakes one blocked pop; a pop that takes
/// tasks while more are ready passes a token on).
const NOTIFY_CAP: usize = 64;
/// Tasks per `add.lua` call in [`Queue::add_many`]: small enough that a call answers well
/// within the store connection's 500 ms response timeout on a busy Redis.
const BATCH: usize = 500;
/// Tasks one `promote.lua` call moves (it runs again while more are due).
const PROMOTE_BATCH: usize = 1_000;
/// Calls of `promote.lua` in one [`Queue::promote`]: a larger backlog is left to the next
/// trigger (the promotion sets the sentinel key only once nothing due is left).
const PROMOTE_ROUNDS: usize = 100;

/// Delay-queue operations over one keyfire prefix. Cheap to clone.
///
/// Get one with [`Client::queue`] (waits by short polls) or [`Queue::connect`] (waits by blocking
/// `BLPOP` on a standalone Redis, preferred for consumers). Delayed tasks become ready
/// only while a keyfire node runs the topic promotion (see [`crate::Registry::for_node`]);
/// tasks due at once need no node.
#[derive(Clone)]
pub struct Queue {
    store: Store,
    jobs: Arc<Client>,
    waiter: Arc<Waiter>,
    max_payload_bytes: usize,
    retention: Duration,
    dead_retention: Duration,
    /// Set once a node serving topics was seen registered (it stays registered).
    served: Arc<AtomicBool>,
    /// What this queue knows of the layout and the partition counts (see `lane.rs`).
    topo: Arc<Mutex<Topology>>,
    /// Where the next pop starts its round of a topic's partitions.
    next_lane: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("store", &self.store)
            .field("blocking", &self.waiter.is_blocking())
            .finish()
    }
}

impl Client {
    /// The delay queue over this client's Redis and prefix, with its payload limit
    /// (`limits.max_params_bytes`). Its pops wait by short polls; [`Queue::connect`] gives one
    /// whose pops block, which suits consumers better.
    pub fn queue(&self) -> Queue {
        let mut queue =
            Queue::new(self.store().clone()).with_max_payload_bytes(self.max_params_bytes());
        // This client's settings: the host rules that check a batch's `on_complete`.
        queue.jobs = Arc::new(self.clone());
        queue
    }
}

impl Queue {
    /// A queue over `store` (keyfire's own crates: the lab and the tests; an embedder gets one
    /// from [`Queue::connect`] or [`Client::queue`]). Its pops wait by short polls. The
    /// payload limit is the default `limits.max_params_bytes`.
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn new(store: Store) -> Self {
        Self::over(store)
    }

    /// A queue over `store`; its pops wait by short polls.
    #[cfg(not(feature = "internals"))]
    pub(crate) fn new(store: Store) -> Self {
        Self::over(store)
    }

    fn over(store: Store) -> Self {
        let limits = InputLimits::default();
        Self {
            max_payload_bytes: limits.max_params_bytes,
            jobs: Arc::new(Client::new(store.clone(), limits)),
            store,
            waiter: Arc::new(Waiter::Poll),
            retention: DEFAULT_RETENTION,
            dead_retention: DEFAULT_DEAD_RETENTION,
            served: Arc::default(),
            topo: Arc::default(),
            next_lane: Arc::default(),
        }
    }

    /// Connect with the Redis settings of `settings`; the payload limit is
    /// `limits.max_params_bytes`. On a standalone Redis, pops block (`BLPOP` on connections
    /// of their own); with Sentinel or Cluster they poll, since the server holding the queue
    /// can change under a blocked connection.
    pub async fn connect(settings: &Settings) -> Result<Self> {
        let store = Store::open(&settings.redis).await?;
        store.check_layout().await?;
        let standalone = store.connection().mode() == crate::store::Mode::Standalone;
        let server = store.masters().await?.into_iter().next();
        let mut queue = Self::new(store).with_max_payload_bytes(settings.limits.max_params_bytes);
        queue.jobs = Arc::new(
            Client::new(queue.store.clone(), settings.limits.clone())
                .with_http(settings.handlers.http.clone()),
        );
        Ok(match server {
            Some(client) if standalone => queue.with_blocking_pops(client),
            _ => queue,
        })
    }

    /// Wait in pops by blocking on connections opened with `client` (the same Redis as the
    /// store): a pop then returns within about a millisecond of a task becoming ready, where
    /// polling may take up to 50 ms. [`Queue::connect`] does this on a standalone Redis.
    fn with_blocking_pops(mut self, client: redis::Client) -> Self {
        self.waiter = Arc::new(Waiter::blocking(client));
        self
    }

    /// Refuse payloads larger than `bytes` when serialized.
    pub fn with_max_payload_bytes(mut self, bytes: usize) -> Self {
        self.max_payload_bytes = bytes;
        self
    }

    /// Keep the record of a done or deleted task this long (zero: remove it at once).
    pub fn with_retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// Keep dead letters this long (at least 1 ms).
    pub fn with_dead_retention(mut self, retention: Duration) -> Self {
        self.dead_retention = retention.max(Duration::from_millis(1));
        self
    }

    /// The store this queue works through (keyfire's own crates: the lab and the tests).
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Add a task to `topic`, ready after a delay or at an instant, held by each consumer for
    /// up to `ttr`, delivered at most `max_deliveries` times. Returns its id.
    ///
    /// Refused, naming the field: a bad topic name, a zero or over-long ttr, `max_deliveries`
    /// 0 or over 1,000, a payload over the limit. A delayed task needs a node serving topics:
    /// without one registered in Redis the add is refused ([`Error::Setup`]) and nothing is
    /// written.
    pub async fn add(
        &self,
        topic: &str,
        payload: serde_json::Value,
        when: When,
        ttr: Duration,
        max_deliveries: u32,
    ) -> Result<String> {
        self.add_task(NewTask {
            id: None,
            topic: topic.to_string(),
            payload,
            when,
            ttr,
            max_deliveries,
            priority: 0,
            dedup: None,
        })
        .await
    }

    /// Add one task (see [`Queue::add`]); an id that exists is left as it is. Returns its id
    /// (with [`NewTask::dedup`], that of the task the key names when it is a duplicate).
    pub async fn add_task(&self, task: NewTask) -> Result<String> {
        Ok(self.add_task_outcome(task, None).await?.id)
    }

    /// [`Queue::add_task`] (under the caller's `traceparent`, see
    /// [`Queue::add_task_traced`]), telling what a duplicate did: [`TaskAdded::deduplicated`].
    pub async fn add_task_outcome(
        &self,
        task: NewTask,
        traceparent: Option<&str>,
    ) -> Result<TaskAdded> {
        let checked = check(&task, self.max_payload_bytes)?;
        let mut added = traced::add(self, vec![checked], traceparent).await?;
        added
            .pop()
            .ok_or_else(|| Error::Corrupt("add: no answer".into()))
    }

    /// [`Queue::add_task`] made under the caller's trace: `traceparent` (a W3C header value;
    /// an invalid one is ignored) is the parent of the add's span where traces are exported,
    /// and the pop that delivers the task links to the add.
    pub async fn add_task_traced(
        &self,
        task: NewTask,
        traceparent: Option<&str>,
    ) -> Result<String> {
        Ok(self.add_task_outcome(task, traceparent).await?.id)
    }

    /// Add many tasks: one script call per topic and 500 tasks, in one pipeline. All are
    /// checked first: if one is bad nothing is written and the error names it (`tasks[3].ttr`).
    /// Ids that exist are left as they are. Returns the ids, in order.
    pub async fn add_many(&self, tasks: Vec<NewTask>) -> Result<Vec<String>> {
        let checked = tasks
            .iter()
            .enumerate()
            .map(|(i, task)| {
                check(task, self.max_payload_bytes).map_err(|e| match e {
                    Error::Invalid(v) => Error::Invalid(ValidationError::new(
                        format!("tasks[{i}].{}", v.field),
                        v.message,
                    )),
                    other => other,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        self.add_checked(checked).await
    }

    async fn add_checked(&self, checked: Vec<Checked>) -> Result<Vec<String>> {
        let added = traced::add(self, checked, None).await?;
        Ok(added.into_iter().map(|a| a.id).collect())
    }

    /// Add checked tasks, each storing `traceparent` (its add's trace) when given.
    async fn add_stored(
        &self,
        checked: Vec<Checked>,
        traceparent: Option<&str>,
    ) -> Result<Vec<TaskAdded>> {
        if checked.is_empty() {
            return Ok(Vec::new());
        }
        // Whether a task may be delayed, by this node's clock with a second to spare (Redis's
        // decides): only then is a node that promotes topics needed.
        let soon = Utc::now().timestamp_millis() - 1_000;
        if checked.iter().any(|t| match t.when {
            ("delay", ms) => ms > 0,
            (_, at) => at > soon,
        }) {
            self.ensure_served().await?;
        }
        for t in checked.iter().filter(|t| t.priority > 0) {
            self.register_priority(&t.topic).await?;
        }
        // Tasks with a dedup key are added after the others, one script call each.
        type Numbered = Vec<(usize, Checked)>;
        let (deduped, checked): (Numbered, Numbered) = checked
            .into_iter()
            .enumerate()
            .partition(|(_, t)| t.dedup.is_some());
        let (order, checked): (Vec<usize>, Vec<Checked>) = checked.into_iter().unzip();
        let mut by_lane: Vec<(Lane, Vec<&Checked>)> = Vec::new();
        for t in &checked {
            let lane = self.write_lane(&t.topic, &t.id).await?;
            match by_lane.iter_mut().find(|(l, _)| *l == lane) {
                Some((_, ts)) => ts.push(t),
                None => by_lane.push((lane, vec![t])),
            }
        }
        for (lane, _) in &by_lane {
            self.register(&lane.topic).await?;
        }
        let cmds: Vec<_> = by_lane
            .iter()
            .flat_map(|(lane, ts)| {
                ts.chunks(BATCH).map(|c| {
                    (
                        lane.clone(),
                        self.add_invocation(lane, c, traceparent, None),
                    )
                })
            })
            .collect();
        let replies = if cmds.is_empty() {
            Vec::new()
        } else {
            self.run_adds(cmds).await?
        };
        for r in replies.iter().flat_map(|r| &r.0) {
            if r.added {
                TaskState::parse(&r.state)?;
            }
        }
        let mut out: Vec<Option<TaskAdded>> =
            (0..order.len() + deduped.len()).map(|_| None).collect();
        for (i, t) in order.into_iter().zip(checked) {
            out[i] = Some(TaskAdded {
                id: t.id,
                deduplicated: None,
            });
        }
        for (i, t) in deduped {
            out[i] = Some(self.add_deduped(t, traceparent).await?);
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// A delayed task needs a node that promotes topics: refuse the add when none ever
    /// registered (the `topic` handler is registered with the promotion).
    async fn ensure_served(&self) -> Result<()> {
        if self.served.load(Ordering::Relaxed) {
            return Ok(());
        }
        if self
            .store
            .handlers()
            .await?
            .iter()
            .any(|h| h == TOPIC_HANDLER)
        {
            self.served.store(true, Ordering::Relaxed);
            return Ok(());
        }
        Err(Error::Setup(format!(
            "no keyfire node serves topics (the `{TOPIC_HANDLER}` handler and the topic \
             promotion), so a delayed task would never become ready; run a node whose registry \
             has them (Registry::for_node or queue::serve_topics)"
        )))
    }

    /// Delete a task, whatever its state, for good: it is never delivered (again). Its record
    /// stays as `deleted`, without its payload, for the retention. [`Error::TaskNotFound`] when
    /// there is no such task or it was deleted. Finds the task by its id alone, asking every
    /// shard: [`Queue::delete_in`] asks only its topic's.
    pub async fn delete(&self, id: &str) -> Result<()> {
        let topic = self.topic_of(id).await?;
        self.delete_in(&topic, id).await
    }

    /// [`Queue::delete`] of a task of `topic` ([`Error::TaskNotFound`] when it is not there).
    pub async fn delete_in(&self, topic: &str, id: &str) -> Result<()> {
        check_topic(topic)?;
        check_task_id(id)?;
        let (lane, _, _) = self.locate(topic, id).await?;
        let reply = self.delete_script(&lane, id).await?;
        if code(&reply)? != 1 {
            return Err(Error::TaskNotFound(id.to_string()));
        }
        // A task queued by an earlier version names its one-shot job: delete it, so it never
        // fires (a firing that runs anyway finds the task out of the delayed set).
        let job = reply.get(2).map(text).transpose()?.unwrap_or_default();
        if !job.is_empty() {
            match self.jobs.delete(&job).await {
                Ok(()) | Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// A task's state, deliveries, topic and instants. [`Error::TaskNotFound`] when there is no
    /// such task (a done or deleted one is shown for the retention, then forgotten). Finds the
    /// task by its id alone, asking every shard: [`Queue::get_in`] asks only its topic's.
    pub async fn get(&self, id: &str) -> Result<TaskInfo> {
        let topic = self.topic_of(id).await?;
        self.get_in(&topic, id).await
    }

    /// [`Queue::get`] of a task of `topic` ([`Error::TaskNotFound`] when it is not there).
    pub async fn get_in(&self, topic: &str, id: &str) -> Result<TaskInfo> {
        check_topic(topic)?;
        check_task_id(id)?;
        let (_, map, ready) = self.locate(topic, id).await?;
        let mut info = decode_task(id, &map)?;
        if info.topic != topic {
            return Err(Error::TaskNotFound(id.to_string()));
        }
        if info.state == TaskState::Delayed
            && let Some(at) = ready
        {
            // Promotion leaves the record alone: in the ready set, it is ready.
            info.state = TaskState::Ready;
            let (level, at) = priority::decode_ready(at);
            info.ready_at = Some(instant(at));
            info.priority = level;
        }
        Ok(info)
    }

    /// How many ready tasks of `topic` come before ready task `id` (`None` when it is not
    /// ready): in its own partition, those ahead of it in the ready set (`ZRANK`); in the
    /// topic's other partitions, those whose ready score is lower (a higher priority, or ready
    /// earlier at the same priority: the scores of every partition compare). Consumers take
    /// from every partition, so this is the work ahead of it for the topic's consumers.
    pub async fn ready_ahead_in(&self, topic: &str, id: &str) -> Result<Option<u64>> {
        check_topic(topic)?;
        check_task_id(id)?;
        let (own, _, score) = self.locate(topic, id).await?;
        let shards = self.store.shards();
        let k = own.keys(shards);
        let rank: Option<u64> = redis::cmd("ZRANK")
            .arg(k.qready(&own.name()))
            .arg(id)
            .query_async(&mut self.store.connection())
            .await?;
        let (Some(mut ahead), Some(score)) = (rank, score) else {
            return Ok(rank);
        };
        for lane in self.lanes(topic, true).await? {
            if lane.name() == own.name() && lane.keys(shards).tag() == k.tag() {
                continue;
            }
            let n: u64 = redis::cmd("ZCOUNT")
                .arg(lane.keys(shards).qready(&lane.name()))
                .arg("-inf")
                .arg(format!("({score}"))
                .query_async(&mut self.store.connection())
                .await?;
            ahead += n;
        }
        Ok(Some(ahead))
    }

    /// The lane holding task `id` of `topic`, its record and its score in the lane's ready
    /// set: its own partition first (by its id), then partition 0 (where an add that had not
    /// heard of the partition count yet put it), then the others, then the meta tag's lane.
    async fn locate(
        &self,
        topic: &str,
        id: &str,
    ) -> Result<(Lane, std::collections::HashMap<String, String>, Option<f64>)> {
        let mut lanes = self.lanes(topic, true).await?;
        let own = lanes.iter().position(|l| {
            l.part
                == Some(partition_of(
                    id,
                    lanes.iter().filter(|l| l.part.is_some()).count(),
                ))
        });
        if let Some(i) = own {
            let lane = lanes.remove(i);
            lanes.insert(0, lane);
        }
        let mut tried = std::collections::HashSet::new();
        for lane in lanes {
            // Partitions sharing a shard share its records: one read per shard.
            if !tried.insert(lane.slot_group()) {
                continue;
            }
            let (map, ready) = self.read_record(&lane, id).await?;
            if !map.is_empty() {
                return Ok((lane, map, ready));
            }
        }
        Err(Error::TaskNotFound(id.to_string()))
    }

    /// Declare `topic`'s number of partitions (1 to [`MAX_PARTITIONS`]): its tasks spread over
    /// that many lanes on as many shards (see the module docs). The count is set once, from the
    /// default 1, before the topic's first task (or before the queue's switch to the sharded
    /// layout), and never changed (the placement of the partitions depends on it): another
    /// count is refused naming `partitions`, and nothing is written. The same count again is
    /// accepted.
    pub async fn set_partitions(&self, topic: &str, partitions: usize) -> Result<()> {
        check_topic(topic)?;
        check_partitions(partitions)?;
        if let Some(cur) = self.declare_script(topic, partitions).await? {
            return Err(Error::PartitionsSet {
                topic: topic.to_string(),
                partitions: cur,
            });
        }
        self.topology(topic, true).await?;
        Ok(())
    }

    /// `topic`'s number of partitions (1 unless declared with more), read now.
    pub async fn partitions(&self, topic: &str) -> Result<usize> {
        check_topic(topic)?;
        Ok(self.topology(topic, true).await?.1)
    }

    /// Every topic that ever had a task, by name, with its tasks by state and its counters.
    pub async fn topics(&self) -> Result<Vec<TopicCounts>> {
        let names = self.topic_names().await?;
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let mut lanes = Vec::new();
        let mut of = Vec::new();
        let mut parts = Vec::with_capacity(names.len());
        for (i, topic) in names.iter().enumerate() {
            parts.push(self.topology(topic, false).await?.1);
            for lane in self.lanes(topic, true).await? {
                lanes.push(lane);
                of.push(i);
            }
        }
        let lane_rows = self.read_lane_rows(&lanes).await?;
        let mut rows: Vec<store::TopicRow> = vec![Default::default(); names.len()];
        for (i, (d, r, s, x, stats)) in of.into_iter().zip(lane_rows) {
            let row = &mut rows[i];
            row.0 += d;
            row.1 += r;
            row.2 += s;
            row.3 += x;
            for (f, v) in stats {
                *row.4.entry(f).or_default() += v;
            }
        }
        let mut out = Vec::with_capacity(names.len());
        for ((topic, (delayed, ready, reserved, dead, stats)), partitions) in
            names.into_iter().zip(rows).zip(parts)
        {
            let n = |f: &str| stats.get(f).copied().unwrap_or(0).max(0) as u64;
            let live = delayed + ready + reserved;
            let (done, died, deleted) = (n("done"), n("dead"), n("deleted"));
            let added = stats::tasks_added(live, done, died, deleted, n("replayed"), n("added"));
            out.push(TopicCounts {
                partitions,
                delayed,
                ready,
                reserved,
                dead,
                added,
                delivered: n("delivered"),
                redelivered: n("redelivered"),
                done: n("done"),
                deleted: n("deleted"),
                replayed: n("replayed"),
                paused: stats.contains_key("paused"),
                topic,
            });
        }
        Ok(out)
    }

    /// Every topic name, sorted.
    pub(crate) async fn topic_names(&self) -> Result<Vec<String>> {
        let mut names = self.read_topic_set().await?;
        names.sort();
        Ok(names)
    }

    /// The lane named by a reservation token (its topic, and its partition if it has one), or
    /// else the task's own topic's lane under the meta tag. A token naming another topic than
    /// the task's cannot match the task's token, so the scripts refuse it whatever keys it led
    /// to.
    async fn lane_for(&self, id: &str, token: &str) -> Result<Lane> {
        check_task_id(id)?;
        match token_topic("token", token) {
            Ok(topic) => self.token_lane(topic, token).await,
            Err(_) => {
                let topic = self.topic_of(id).await?;
                Ok(self.locate(&topic, id).await?.0)
            }
        }
    }

    /// The topic a task belongs to (its record's), checking the id first: the record is looked
    /// for under the meta tag and on every shard, in one round trip per shard.
    async fn topic_of(&self, id: &str) -> Result<String> {
        check_task_id(id)?;
        let shards = self.store.shards();
        let mut probes = vec![Lane::on_shard(None)];
        if shards.len() > 1 {
            probes.extend((0..shards.len()).map(|s| Lane::on_shard(Some(s))));
        }
        for lane in &probes {
            if let Some(topic) = self.read_task_topic(lane, id).await? {
                return Ok(topic);
            }
        }
        Err(Error::TaskNotFound(id.to_string()))
    }

    /// What the [`TOPIC_HANDLER`] does with a firing (see [`TopicHandler`]):
    ///
    /// - params `{topic, task}` (the job `q.<task>` of a task queued by an earlier version):
    ///   make the task ready if it is still in the delayed set, then delete the job, which has
    ///   done its work;
    /// - params `{topic, payload, ttr?, max_deliveries?}` (a recurring job feeding a topic):
    ///   add a ready task with id `<job id>.<instant ms>`, once per firing.
    ///
    /// Bad params fail the run without retry; a Redis error fails it for a retry.
    pub async fn handle_firing(&self, firing: &Firing) -> HandlerResult {
        let p: TopicParams = serde_json::from_value(firing.params.clone())
            .map_err(|e| HandlerError::abort(format!("bad params for the topic handler: {e}")))?;
        check_topic(&p.topic).map_err(|e| HandlerError::abort(e.to_string()))?;
        let reply: Vec<Value> = match &p.task {
            Some(task) => {
                check_task_id(task).map_err(|e| HandlerError::abort(e.to_string()))?;
                // Tasks queued as jobs were queued under the meta tag.
                self.ready_script(&Lane::legacy(&p.topic), task, "promote", None)
                    .await?
            }
            None => {
                let ttr = p.ttr.unwrap_or(DEFAULT_TTR);
                let max = p.max_deliveries.unwrap_or(DEFAULT_MAX_DELIVERIES);
                let payload = serde_json::to_string(&p.payload)?;
                check_ttr(ttr)
                    .and_then(|_| check_max_deliveries(max))
                    .and_then(|_| check_payload(&payload, self.max_payload_bytes))
                    .map_err(|e| HandlerError::abort(e.to_string()))?;
                let at_ms = firing.scheduled_at.timestamp_millis();
                let id = format!("{}.{at_ms}", firing.job_id);
                let lane = self.write_lane(&p.topic, &id).await?;
                self.register(&p.topic).await?;
                self.ready_script(
                    &lane,
                    &id,
                    "create",
                    Some((payload, duration_ms(ttr), max, at_ms)),
                )
                .await?
            }
        };
        let made = code(&reply).map_err(|e| HandlerError::retry(e.to_string()))? == 1;
        if let Some(task) = &p.task {
            if !made {
                let state = reply.get(1).map(text).transpose().ok().flatten();
                tracing::debug!(task = %task, state = ?state, "task not delayed: left as it is");
            }
            if firing.job_id == job_id(task) {
                // Its work is done: do not keep a finished one-shot job per task for the
                // task retention. A failure here is harmless (that cleanup removes it later).
                if let Err(e) = self.jobs.delete(&firing.job_id).await
                    && !matches!(e, Error::NotFound(_))
                {
                    tracing::warn!(job = %firing.job_id, error = %e, "could not delete a delayed task's job");
                }
            }
        }
        Ok(())
    }
}

/// The params of the [`TOPIC_HANDLER`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopicParams {
    topic: String,
    #[serde(default)]
    task: Option<String>,
    #[serde(default)]
    payload: serde_json::Value,
    #[serde(default, with = "humantime_serde::option")]
    ttr: Option<Duration>,
    #[serde(default)]
    max_deliveries: Option<u32>,
}

/// The keyfire job id of a task queued by an earlier version.
pub fn job_id(task_id: &str) -> String {
    format!("{JOB_PREFIX}{task_id}")
}

/// Check a partition count (1 to [`MAX_PARTITIONS`]), naming `partitions`.
pub fn check_partitions(partitions: usize) -> Result<()> {
    if (1..=MAX_PARTITIONS).contains(&partitions) {
        Ok(())
    } else {
        Err(Error::Invalid(ValidationError::new(
            "partitions",
            format!("give 1 to {MAX_PARTITIONS} partitions, not {partitions}"),
        )))
    }
}

pub(super) fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

pub(super) fn ms_duration(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

pub(super) fn instant(ms: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_millis(ms).unwrap_or_default()
}
