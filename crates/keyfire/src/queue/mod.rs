//! Delay queue with topics: tasks handed to consumers in any language, after a delay.
//!
//! A producer [`Queue::add`]s a task (a JSON payload) to a topic, due after a delay or at an
//! instant. When it is due it becomes *ready*; a consumer [`Queue::pop`]s it (long-polling up to a
//! wait) and holds a *reservation* for the task's time-to-run (ttr), then [`Queue::finish`]es it.
//! A reservation not finished in time goes back to ready for another consumer, counted as a
//! redelivery; a task delivered `max_deliveries` times without a finish goes to the topic's dead
//! letters instead.
//!
//! ```text
//!   add ──► delayed ──(its keyfire job fires)──► ready ──pop──► reserved ──finish──► done
//!             │ (due now: ready at once)           ▲              │ ttr passed
//!             │                                    └──────────────┤ (deliveries < max)
//!             │                                                   └──► dead (deliveries = max)
//!   delete: any state ──► deleted
//! ```
//!
//! **Delays ride the scheduler.** A delayed task is a one-shot keyfire job (id `q.<task id>`,
//! handler [`TOPIC_HANDLER`], params `{topic, task}`), enqueued through [`Client::enqueue`] after
//! the task's record is written. So a task becomes ready through the same due ZSET, sentinel keys,
//! precision timers and sweeper as any firing: exactly once per delay (the claim's
//! compare-and-set, G1), never lost when expiry events are (the sweeper, G2), on time by Redis's
//! clock (G3). The `topic` handler runs `q_ready.lua`, which acts only on a task still `delayed`,
//! so an at-least-once re-run of the firing (a node died mid-run, G5) cannot make it ready twice.
//! The same handler lets a recurring job feed a topic: with params `{topic, payload}` (and
//! optionally `ttr`, `max_deliveries`) each firing adds a ready task whose id is derived from the
//! firing, so a re-run adds nothing.
//!
//! **Reservations are fenced.** Every pop gives the reservation a fresh token; `finish` and
//! `touch` must show it. When a reservation expired and the task went back to ready (and maybe to
//! another consumer), the late consumer's finish is refused with [`Error::ReservationLost`], so
//! work is never acknowledged twice.
//!
//! **Redis layout** (names in [`crate::store::Keys`], one Lua script per change in
//! `src/store/lua/q_*.lua`): a hash per task; per topic a `delayed` ZSET (by due instant), a
//! `ready` ZSET (by due instant, so the earliest due is popped first; a redelivery by the time it
//! came back), a `reserved` ZSET (by deadline, Redis time), a `dead` ZSET, a notify list that wakes
//! blocked pops, and a counters hash; a SET of topic names. Done and deleted tasks keep a small
//! record without their payload for a retention (10 minutes by default), dead ones for the
//! dead-letter retention (7 days): memory is bounded by rate times retention.

mod check;
mod reply;
mod scripts;
mod task;
mod wait;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use redis::{FromRedisValue, Value};
use serde::Deserialize;
use serde_json::json;

use crate::client::Client;
use crate::config::{Limits, Settings};
use crate::error::{Error, Result};
use crate::handler::{Firing, HandlerError, HandlerResult};
use crate::job::{JobSpec, RetrySpec, ValidationError};
use crate::store::Store;
use check::{Checked, add_args, check, check_max_deliveries, check_payload, check_ttr};
pub use check::{check_task_id, check_topic};
use reply::{AddReply, PopReply, RequeueReply, code, fenced, text};
use scripts::{Q_ADD, Q_DELETE, Q_FINISH, Q_POP, Q_READY, Q_REQUEUE, Q_TOUCH};
use task::decode_task;
pub use task::{NewTask, Requeued, Reserved, TaskInfo, TaskState, TopicCounts, When};
use wait::{Backoff, Waiter};

/// The name of the built-in handler that makes delayed tasks ready and feeds topics.
pub const TOPIC_HANDLER: &str = "topic";
/// Prefix of the keyfire job that makes a delayed task ready: `q.<task id>`.
pub const JOB_PREFIX: &str = "q.";
/// Longest topic name, in bytes.
pub const MAX_TOPIC_LEN: usize = 128;
/// Longest task id, in bytes (ids of tasks fed by a recurring job are `<job id>.<instant ms>`).
pub const MAX_TASK_ID_LEN: usize = 160;
/// Longest id a caller may give [`NewTask::id`], in bytes: its job id `q.<id>` must be a valid
/// job id (at most 128 bytes).
pub const MAX_NEW_ID_LEN: usize = 128 - JOB_PREFIX.len();
/// Longest time-to-run.
pub const MAX_TTR: Duration = Duration::from_secs(24 * 3600);
/// Most deliveries a task may be given.
pub const MAX_DELIVERIES_LIMIT: u32 = 1_000;
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
/// Tasks at the head of a set read before a pop or a requeue: concurrent pops of the same topic
/// that read the same head each take a different one of these.
const CANDIDATES: usize = 16;
/// Wake-up tokens kept in a topic's notify list (each wakes one blocked pop; a pop that takes a
/// task while more are ready passes a token on).
const NOTIFY_CAP: usize = 64;
/// A delayed task whose keyfire job is gone this long after its instant is made ready by
/// [`Queue::requeue_expired`] (an add that crashed between its two writes, or a job deleted by
/// hand). Far longer than an add takes, so it never races one.
pub const DEFAULT_ORPHAN_GRACE: Duration = Duration::from_secs(5 * 60);
/// Tasks per pipelined batch in [`Queue::add_many`]: small enough that a batch answers well
/// within the store connection's 500 ms response timeout on a busy Redis.
const BATCH: usize = 200;
/// How long the next ready ids named by a pop's reply may stand in for reading the head.
const HINT_TTL: Duration = Duration::from_millis(100);

/// Delay-queue operations over one keyfire prefix. Cheap to clone.
///
/// Get one with [`Client::queue`] (waits by short polls), [`Queue::connect`] (waits by blocking
/// `BLPOP`, preferred for consumers) or [`Queue::new`] over a store. Delayed tasks become ready
/// only while a keyfire node that registered the [`TOPIC_HANDLER`] runs (see
/// [`crate::Registry::for_node`]); tasks due at once need no node.
#[derive(Clone)]
pub struct Queue {
    store: Store,
    jobs: Arc<Client>,
    waiter: Arc<Waiter>,
    max_payload_bytes: usize,
    retention: Duration,
    dead_retention: Duration,
    orphan_grace: Duration,
    /// Per topic, the next ready ids the last pop's reply named (saves reading the head).
    hints: Arc<Mutex<HashMap<String, Hint>>>,
}

/// The next ready ids of a topic, as a pop's reply named them.
struct Hint {
    ids: Vec<String>,
    /// Until then neither the hint is stale nor a reservation of the topic expired.
    until: tokio::time::Instant,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("store", &self.store)
            .field("blocking", &self.waiter.is_blocking())
            .finish()
    }
}

impl Queue {
    /// A queue over `store`. Its pops wait by short polls; give it a Redis client with
    /// [`Queue::with_blocking_pops`] to block instead. The payload limit is the default
    /// `limits.max_params_bytes`.
    pub fn new(store: Store) -> Self {
        let limits = Limits::default();
        Self {
            max_payload_bytes: limits.max_params_bytes,
            jobs: Arc::new(Client::new(store.clone(), limits)),
            store,
            waiter: Arc::new(Waiter::Poll),
            retention: DEFAULT_RETENTION,
            dead_retention: DEFAULT_DEAD_RETENTION,
            orphan_grace: DEFAULT_ORPHAN_GRACE,
            hints: Arc::default(),
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
        let queue = Self::new(store).with_max_payload_bytes(settings.limits.max_params_bytes);
        Ok(match server {
            Some(client) if standalone => queue.with_blocking_pops(client),
            _ => queue,
        })
    }

    /// Wait in [`Queue::pop`] by blocking on connections opened with `client` (the same Redis as
    /// the store): a pop then returns within about a millisecond of a task becoming ready,
    /// where polling may take up to 50 ms.
    pub fn with_blocking_pops(mut self, client: redis::Client) -> Self {
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

    /// Make a delayed task whose keyfire job is gone ready this long after its instant (in
    /// [`Queue::requeue_expired`]); keep it far longer than an add takes.
    pub fn with_orphan_grace(mut self, grace: Duration) -> Self {
        self.orphan_grace = grace;
        self
    }

    /// The store this queue works through.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Add a task to `topic`, ready after a delay or at an instant, held by each consumer for
    /// up to `ttr`, delivered at most `max_deliveries` times. Returns its id.
    ///
    /// Refused, naming the field: a bad topic name, a zero or over-long ttr, `max_deliveries`
    /// 0 or over 1,000, a payload over the limit. A delayed task needs a node serving the
    /// [`TOPIC_HANDLER`]: without one registered in Redis the add is refused
    /// ([`Error::Setup`]) and nothing is left behind.
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
        })
        .await
    }

    /// Add one task (see [`Queue::add`]); an id that exists is left as it is. Returns its id.
    pub async fn add_task(&self, task: NewTask) -> Result<String> {
        let t = check(&task, self.max_payload_bytes)?;
        let reply: AddReply = self
            .add_invocation(&t)
            .invoke_async(&mut self.store.connection())
            .await?;
        if reply.added && reply.state == TaskState::Delayed {
            let spec = job_spec(&t.id, &t.topic, reply.due_ms)?;
            if let Err(e) = self.jobs.enqueue(spec).await {
                self.undo_add(&t.id, &t.topic).await;
                return Err(no_topic_handler(e));
            }
        }
        Ok(t.id)
    }

    /// Add many tasks, in pipelined batches. All are checked first: if one is bad nothing is
    /// written and the error names it (`tasks[3].ttr`). Ids that exist are left as they are.
    /// Returns the ids, in order.
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
        let mut conn = self.store.connection();
        // EVALSHA is not retried on NOSCRIPT inside a pipeline: load the script first.
        Q_ADD.load_async(&mut conn).await?;
        for chunk in checked.chunks(BATCH) {
            let mut pipe = redis::pipe();
            for t in chunk {
                let keys = self.add_keys(t);
                let args = add_args(t);
                pipe.cmd("EVALSHA")
                    .arg(Q_ADD.get_hash())
                    .arg(keys.len())
                    .arg(&keys[..])
                    .arg(&args[..]);
            }
            let replies: Vec<AddReply> = pipe.query_async(&mut conn).await?;
            let mut specs = Vec::new();
            let mut added = Vec::new();
            for (t, r) in chunk.iter().zip(&replies) {
                if r.added && r.state == TaskState::Delayed {
                    specs.push(job_spec(&t.id, &t.topic, r.due_ms)?);
                    added.push(t);
                }
            }
            if !specs.is_empty()
                && let Err(e) = self.jobs.enqueue_many(specs).await
            {
                for t in added {
                    self.undo_add(&t.id, &t.topic).await;
                }
                return Err(no_topic_handler(e));
            }
        }
        Ok(checked.into_iter().map(|t| t.id).collect())
    }

    fn add_keys(&self, t: &Checked) -> Vec<String> {
        let k = self.store.keys();
        vec![
            k.qtask(&t.id),
            k.qdelayed(&t.topic),
            k.qready(&t.topic),
            k.qnotify(&t.topic),
            k.qtopics(),
            k.qstats(&t.topic),
        ]
    }

    fn add_invocation(&self, t: &Checked) -> redis::ScriptInvocation<'static> {
        let mut inv = Q_ADD.prepare_invoke();
        for key in self.add_keys(t) {
            inv.key(key);
        }
        for arg in add_args(t) {
            inv.arg(arg);
        }
        inv
    }

    /// Remove the record of an add whose keyfire job could not be enqueued (best effort: if
    /// this fails too, [`Queue::requeue_expired`] makes the task ready after its instant).
    async fn undo_add(&self, id: &str, topic: &str) {
        let reply: Result<Vec<Value>> = self
            .delete_invocation(id, topic, Duration::ZERO, true)
            .invoke_async(&mut self.store.connection())
            .await
            .map_err(Error::from);
        if let Err(e) = reply {
            tracing::warn!(task = id, error = %e, "could not undo a failed add");
        }
    }

    /// Pop the oldest ready task of `topic` (the earliest due; a redelivery by the time it came
    /// back) and reserve it for its ttr. Waits up to `wait` for one (long poll); `None` when none
    /// came. Reservations of the topic past their deadline are taken back first (to ready, or to
    /// the dead letters), and a pop waiting for a task wakes when one expires.
    pub async fn pop(&self, topic: &str, wait: Duration) -> Result<Option<Reserved>> {
        check_topic(topic)?;
        let end = tokio::time::Instant::now() + wait;
        let notify = self.store.keys().qnotify(topic);
        let mut backoff = Backoff::new();
        loop {
            match self.try_pop(topic).await? {
                Attempt::Reserved(r) => return Ok(Some(*r)),
                Attempt::Contended => continue,
                Attempt::Empty { until_expiry } => {
                    let left = end.saturating_duration_since(tokio::time::Instant::now());
                    if left.is_zero() {
                        return Ok(None);
                    }
                    let limit = until_expiry.map_or(left, |e| e.min(left));
                    self.waiter.wait(&notify, limit, &mut backoff).await?;
                }
            }
        }
    }

    /// One pop attempt: read the heads of the ready and reserved sets (or take the ids the last
    /// pop's reply named, while no reservation can have expired), take back expired
    /// reservations, then reserve the first candidate still ready.
    async fn try_pop(&self, topic: &str) -> Result<Attempt> {
        let k = self.store.keys();
        let mut conn = self.store.connection();
        let candidates = match self.take_hint(topic) {
            Some(ids) => ids,
            None => self.read_candidates(topic).await?,
        };
        // The topic rides in the token, so finish and touch need not read it first.
        let token = format!("{}.{topic}", uuid::Uuid::new_v4().simple());
        let mut inv = Q_POP.prepare_invoke();
        inv.key(k.qready(topic))
            .key(k.qreserved(topic))
            .key(k.qnotify(topic))
            .key(k.qstats(topic));
        for id in &candidates {
            inv.key(k.qtask(id));
        }
        inv.arg(&token).arg(CANDIDATES);
        for id in &candidates {
            inv.arg(id);
        }
        let reply: PopReply = inv.invoke_async(&mut conn).await?;
        Ok(match reply {
            PopReply::Reserved {
                id,
                payload,
                deliveries,
                ttr_ms,
                due_ms,
                ready_ms,
                now_ms,
                deadline_ms,
                earliest_deadline,
                next,
            } => {
                self.put_hint(topic, next, earliest_deadline.map(|d| d - now_ms));
                Attempt::Reserved(Box::new(Reserved {
                    id,
                    topic: topic.to_string(),
                    payload: serde_json::from_str(&payload)?,
                    deliveries,
                    token,
                    ttr: ms_duration(ttr_ms),
                    due_at: instant(due_ms),
                    ready_at: instant(ready_ms),
                    reserved_at: instant(now_ms),
                    deadline: instant(deadline_ms),
                }))
            }
            PopReply::Empty { ready, .. } if ready > 0 => Attempt::Contended,
            PopReply::Empty {
                earliest_deadline,
                now_ms,
                ..
            } => Attempt::Empty {
                until_expiry: earliest_deadline.map(|d| ms_duration((d - now_ms).max(0) + 1)),
            },
        })
    }

    /// The head of the ready set, after taking back the expired reservations at the head of the
    /// reserved set (those made ready are candidates too).
    async fn read_candidates(&self, topic: &str) -> Result<Vec<String>> {
        let k = self.store.keys();
        type Heads = (Vec<String>, Vec<(String, f64)>, (i64, i64));
        let (mut candidates, reserved, (s, us)): Heads = redis::pipe()
            .zrange(k.qready(topic), 0, CANDIDATES as isize - 1)
            .zrange_withscores(k.qreserved(topic), 0, CANDIDATES as isize - 1)
            .cmd("TIME")
            .query_async(&mut self.store.connection())
            .await?;
        let now = s * 1000 + us / 1000;
        let expired: Vec<String> = reserved
            .into_iter()
            .filter(|(_, deadline)| *deadline as i64 <= now)
            .map(|(id, _)| id)
            .collect();
        if !expired.is_empty() {
            let back = self.requeue(topic, &expired).await?;
            candidates.extend(back.ids);
        }
        Ok(candidates)
    }

    fn take_hint(&self, topic: &str) -> Option<Vec<String>> {
        let hint = self.hints.lock().expect("hints lock").remove(topic)?;
        (tokio::time::Instant::now() < hint.until).then_some(hint.ids)
    }

    /// Keep the next ready ids a reply named, valid for [`HINT_TTL`] or until the earliest
    /// reservation of the topic expires (in `expires_in_ms`), whichever comes first.
    fn put_hint(&self, topic: &str, ids: Vec<String>, expires_in_ms: Option<i64>) {
        if ids.is_empty() {
            return;
        }
        let ttl = expires_in_ms.map_or(HINT_TTL, |ms| HINT_TTL.min(ms_duration(ms)));
        let until = tokio::time::Instant::now() + ttl;
        self.hints
            .lock()
            .expect("hints lock")
            .insert(topic.to_string(), Hint { ids, until });
    }

    /// Run `q_requeue.lua` over these reserved ids (those not yet expired are left alone).
    async fn requeue(&self, topic: &str, ids: &[String]) -> Result<RequeueReply> {
        let k = self.store.keys();
        let mut inv = Q_REQUEUE.prepare_invoke();
        inv.key(k.qready(topic))
            .key(k.qreserved(topic))
            .key(k.qdead(topic))
            .key(k.qnotify(topic))
            .key(k.qstats(topic));
        for id in ids {
            inv.key(k.qtask(id));
        }
        inv.arg(duration_ms(self.dead_retention).max(1))
            .arg(NOTIFY_CAP);
        for id in ids {
            inv.arg(id);
        }
        Ok(inv.invoke_async(&mut self.store.connection()).await?)
    }

    /// Take back every reservation of `topic` past its deadline (to ready, or to the dead letters
    /// when its deliveries are used up), and make ready the delayed tasks whose keyfire job is
    /// gone [`DEFAULT_ORPHAN_GRACE`] after their instant. [`Queue::pop`] does the first part itself; call this
    /// periodically so the counts and dead letters of a topic nobody pops stay current.
    pub async fn requeue_expired(&self, topic: &str) -> Result<Requeued> {
        check_topic(topic)?;
        let k = self.store.keys();
        let mut done = Requeued::default();
        loop {
            let (reserved, (s, us)): (Vec<(String, f64)>, (i64, i64)) = redis::pipe()
                .zrange_withscores(k.qreserved(topic), 0, CANDIDATES as isize - 1)
                .cmd("TIME")
                .query_async(&mut self.store.connection())
                .await?;
            let now = s * 1000 + us / 1000;
            let expired: Vec<String> = reserved
                .iter()
                .filter(|(_, deadline)| *deadline as i64 <= now)
                .map(|(id, _)| id.clone())
                .collect();
            if expired.is_empty() {
                break;
            }
            let r = self.requeue(topic, &expired).await?;
            done.requeued += r.requeued;
            done.dead += r.dead;
            if expired.len() < CANDIDATES {
                break;
            }
        }
        done.orphans = self.ready_orphans(topic).await?;
        Ok(done)
    }

    /// [`Queue::requeue_expired`] for every topic.
    pub async fn requeue_all_expired(&self) -> Result<Requeued> {
        let mut all = Requeued::default();
        for topic in self.topic_names().await? {
            let r = self.requeue_expired(&topic).await?;
            all.requeued += r.requeued;
            all.dead += r.dead;
            all.orphans += r.orphans;
        }
        Ok(all)
    }

    /// Make ready the delayed tasks of `topic` that are overdue by the orphan grace and whose
    /// keyfire job does not exist.
    async fn ready_orphans(&self, topic: &str) -> Result<u64> {
        let k = self.store.keys();
        let (delayed, (s, us)): (Vec<(String, f64)>, (i64, i64)) = redis::pipe()
            .zrange_withscores(k.qdelayed(topic), 0, CANDIDATES as isize - 1)
            .cmd("TIME")
            .query_async(&mut self.store.connection())
            .await?;
        let before = s * 1000 + us / 1000 - duration_ms(self.orphan_grace);
        let mut made = 0;
        for (id, _) in delayed.iter().filter(|(_, due)| (*due as i64) <= before) {
            // The job lives on its shard (another slot in a cluster): asked apart. A job
            // deleted after this answer is caught by the next maintenance.
            let jid = job_id(id);
            let exists: bool = redis::cmd("EXISTS")
                .arg(self.store.job_keys(&jid).job(&jid))
                .query_async(&mut self.store.connection())
                .await?;
            let reply: Vec<Value> = self
                .ready_invocation(id, topic, "orphan")
                .arg(before)
                .arg(if exists { "1" } else { "0" })
                .invoke_async(&mut self.store.connection())
                .await?;
            if code(&reply)? == 1 {
                tracing::warn!(task = %id, topic, "delayed task without its keyfire job: made it ready");
                made += 1;
            }
        }
        Ok(made)
    }

    fn ready_invocation(
        &self,
        id: &str,
        topic: &str,
        mode: &str,
    ) -> redis::ScriptInvocation<'static> {
        let k = self.store.keys();
        let mut inv = Q_READY.prepare_invoke();
        inv.key(k.qtask(id))
            .key(k.qdelayed(topic))
            .key(k.qready(topic))
            .key(k.qnotify(topic))
            .key(k.qtopics())
            .key(k.qstats(topic))
            .arg(id)
            .arg(mode)
            .arg(topic)
            .arg(NOTIFY_CAP);
        inv
    }

    /// Acknowledge a reserved task with the token its pop returned: it is done. Refused with
    /// [`Error::ReservationLost`] when the reservation is no longer this token's (it expired and
    /// the task went back to ready or to another consumer, went to the dead letters, or the
    /// token is wrong); [`Error::TaskNotFound`] when there is no such task (or it was deleted).
    /// Finishing again with the token that finished it succeeds (a retried request).
    pub async fn finish(&self, id: &str, token: &str) -> Result<()> {
        let topic = self.topic_for(id, token).await?;
        let k = self.store.keys();
        let reply: Vec<Value> = Q_FINISH
            .key(k.qtask(id))
            .key(k.qreserved(&topic))
            .key(k.qstats(&topic))
            .arg(id)
            .arg(token)
            .arg(duration_ms(self.retention))
            .invoke_async(&mut self.store.connection())
            .await?;
        fenced(id, &reply).map(|_| ())
    }

    /// Extend a reservation: its deadline becomes now plus `ttr` (or the task's own ttr).
    /// Returns the new deadline. Refused like [`Queue::finish`].
    pub async fn touch(
        &self,
        id: &str,
        token: &str,
        ttr: Option<Duration>,
    ) -> Result<DateTime<Utc>> {
        if let Some(t) = ttr {
            check_ttr(t)?;
        }
        let topic = self.topic_for(id, token).await?;
        let k = self.store.keys();
        let reply: Vec<Value> = Q_TOUCH
            .key(k.qtask(id))
            .key(k.qreserved(&topic))
            .arg(id)
            .arg(token)
            .arg(ttr.map(|t| duration_ms(t).to_string()).unwrap_or_default())
            .invoke_async(&mut self.store.connection())
            .await?;
        fenced(id, &reply).map(instant)
    }

    /// Delete a task, whatever its state, for good: it is never delivered (again). A delayed
    /// task's keyfire job is deleted too. Its record stays as `deleted`, without its payload,
    /// for the retention. [`Error::TaskNotFound`] when there is no such task or it was deleted.
    pub async fn delete(&self, id: &str) -> Result<()> {
        let topic = self.topic_of(id).await?;
        let reply: Vec<Value> = self
            .delete_invocation(id, &topic, self.retention, false)
            .invoke_async(&mut self.store.connection())
            .await?;
        if code(&reply)? != 1 {
            return Err(Error::TaskNotFound(id.to_string()));
        }
        // The record says 'deleted' now, so a firing of the job that runs anyway changes
        // nothing; deleting the job keeps it from firing at all.
        let prev = reply.get(1).map(text).transpose()?.unwrap_or_default();
        let job = reply.get(2).map(text).transpose()?.unwrap_or_default();
        if prev == "delayed" && !job.is_empty() {
            match self.jobs.delete(&job).await {
                Ok(()) | Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn delete_invocation(
        &self,
        id: &str,
        topic: &str,
        retention: Duration,
        undo: bool,
    ) -> redis::ScriptInvocation<'static> {
        let k = self.store.keys();
        let mut inv = Q_DELETE.prepare_invoke();
        inv.key(k.qtask(id))
            .key(k.qdelayed(topic))
            .key(k.qready(topic))
            .key(k.qreserved(topic))
            .key(k.qdead(topic))
            .key(k.qstats(topic))
            .arg(id)
            .arg(duration_ms(retention))
            .arg(if undo { "1" } else { "0" });
        inv
    }

    /// A task's state, deliveries, topic and instants. [`Error::TaskNotFound`] when there is no
    /// such task (a done or deleted one is shown for the retention, then forgotten).
    pub async fn get(&self, id: &str) -> Result<TaskInfo> {
        check_task_id(id)?;
        let map: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(self.store.keys().qtask(id))
            .query_async(&mut self.store.connection())
            .await?;
        if map.is_empty() {
            return Err(Error::TaskNotFound(id.to_string()));
        }
        decode_task(id, &map)
    }

    /// The dead letters of `topic`, the most recent first.
    pub async fn dead_letters(&self, topic: &str, limit: usize) -> Result<Vec<TaskInfo>> {
        check_topic(topic)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let k = self.store.keys();
        let mut conn = self.store.connection();
        let ids: Vec<String> = redis::cmd("ZRANGE")
            .arg(k.qdead(topic))
            .arg(0)
            .arg(limit - 1)
            .arg("REV")
            .query_async(&mut conn)
            .await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.cmd("HGETALL").arg(k.qtask(id));
        }
        let maps: Vec<HashMap<String, String>> = pipe.query_async(&mut conn).await?;
        ids.iter()
            .zip(&maps)
            .filter(|(_, m)| m.get("state").map(String::as_str) == Some("dead"))
            .map(|(id, m)| decode_task(id, m))
            .collect()
    }

    /// Every topic that ever had a task, by name, with its tasks by state and its counters.
    pub async fn topics(&self) -> Result<Vec<TopicCounts>> {
        let names = self.topic_names().await?;
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let k = self.store.keys();
        let mut pipe = redis::pipe();
        for t in &names {
            pipe.zcard(k.qdelayed(t))
                .zcard(k.qready(t))
                .zcard(k.qreserved(t))
                .zcard(k.qdead(t))
                .hgetall(k.qstats(t));
        }
        type Row = (u64, u64, u64, u64, HashMap<String, i64>);
        let values: Vec<Value> = pipe.query_async(&mut self.store.connection()).await?;
        let mut out = Vec::with_capacity(names.len());
        for (topic, chunk) in names.into_iter().zip(values.chunks(5)) {
            let (delayed, ready, reserved, dead, stats) =
                Row::from_redis_value(Value::Array(chunk.to_vec()))
                    .map_err(redis::RedisError::from)?;
            let n = |f: &str| stats.get(f).copied().unwrap_or(0).max(0) as u64;
            out.push(TopicCounts {
                delayed,
                ready,
                reserved,
                dead,
                added: n("added"),
                delivered: n("delivered"),
                redelivered: n("redelivered"),
                done: n("done"),
                deleted: n("deleted"),
                topic,
            });
        }
        Ok(out)
    }

    async fn topic_names(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = redis::cmd("SMEMBERS")
            .arg(self.store.keys().qtopics())
            .query_async(&mut self.store.connection())
            .await?;
        names.sort();
        Ok(names)
    }

    /// The topic named by a reservation token (`<32 hex>.<topic>`, see [`Queue::pop`]), or else
    /// the task's own. A token naming another topic than the task's cannot match the task's
    /// token, so the scripts refuse it whatever keys it led to.
    async fn topic_for(&self, id: &str, token: &str) -> Result<String> {
        check_task_id(id)?;
        match token.split_at_checked(32) {
            Some((hex, rest)) if hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                match rest.strip_prefix('.') {
                    Some(topic) if check_topic(topic).is_ok() => Ok(topic.to_string()),
                    _ => self.topic_of(id).await,
                }
            }
            _ => self.topic_of(id).await,
        }
    }

    /// The topic a task belongs to (its record's), checking the id first.
    async fn topic_of(&self, id: &str) -> Result<String> {
        check_task_id(id)?;
        let topic: Option<String> = redis::cmd("HGET")
            .arg(self.store.keys().qtask(id))
            .arg("topic")
            .query_async(&mut self.store.connection())
            .await?;
        topic.ok_or_else(|| Error::TaskNotFound(id.to_string()))
    }

    /// What the [`TOPIC_HANDLER`] does with a firing (see [`crate::handler::TopicHandler`]):
    ///
    /// - params `{topic, task}` (the job of a delayed task, `q.<task>`): make the task ready if
    ///   it is still delayed, then delete the job, which has done its work;
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
                self.ready_invocation(task, &p.topic, "promote")
                    .invoke_async(&mut self.store.connection())
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
                self.ready_invocation(&id, &p.topic, "create")
                    .arg(payload)
                    .arg(duration_ms(ttr))
                    .arg(max)
                    .arg(at_ms)
                    .invoke_async(&mut self.store.connection())
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

/// The keyfire job id of a delayed task.
pub fn job_id(task_id: &str) -> String {
    format!("{JOB_PREFIX}{task_id}")
}

/// The one-shot job that makes a delayed task ready at `due_ms`. Its handler is idempotent, so
/// it retries freely (a Redis hiccup must not strand a task in `delayed`).
fn job_spec(id: &str, topic: &str, due_ms: i64) -> Result<JobSpec> {
    let at = DateTime::<Utc>::from_timestamp_millis(due_ms)
        .ok_or_else(|| Error::Invalid(ValidationError::new("at", "out of range")))?;
    let mut spec =
        JobSpec::at(job_id(id), at, TOPIC_HANDLER).params(json!({"topic": topic, "task": id}));
    spec.timeout = Some("30s".into());
    spec.retry = Some(RetrySpec {
        max_attempts: Some(20),
        backoff: Some("exponential".into()),
        interval: Some("100ms".into()),
        max_interval: Some("10s".into()),
        jitter: Some(true),
    });
    Ok(spec)
}

/// An unknown `topic` handler means no node could ever make the task ready: say so.
fn no_topic_handler(e: Error) -> Error {
    match e {
        Error::Invalid(v) if v.field.ends_with("handler") => Error::Setup(format!(
            "no keyfire node has registered the `{TOPIC_HANDLER}` handler, so a delayed task would \
             never become ready; run a node whose registry has it (Registry::for_node)"
        )),
        other => other,
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

/// One pop attempt's result.
enum Attempt {
    Reserved(Box<Reserved>),
    /// Tasks are ready but others took the candidates read: read the head again.
    Contended,
    /// Nothing ready; the earliest reservation expires in this long.
    Empty {
        until_expiry: Option<Duration>,
    },
}
