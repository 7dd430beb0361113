//! The delay queue's task types: what is added, popped, read and counted.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{DEFAULT_MAX_DELIVERIES, DEFAULT_TTR, instant, ms_duration};
use crate::error::{Error, Result};

/// When a task becomes ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// This long after the add, by Redis's clock (zero: ready at once).
    Delay(Duration),
    /// At this instant, by Redis's clock (past: ready at once).
    At(DateTime<Utc>),
}

/// A task to add: see [`Queue::add_task`](crate::Queue::add_task) and [`Queue::add_many`](crate::Queue::add_many).
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    /// Its id; `None` picks a fresh one (32 hex digits). An id that exists (in any state, also
    /// done or deleted within the retention) is left as it is, so a retried add adds nothing.
    pub id: Option<String>,
    /// The topic: letters, digits, `_`, `.`, `-`, starting with a letter or digit, at most 128
    /// bytes.
    pub topic: String,
    /// Any JSON, handed to the consumer; at most the payload limit when serialized.
    pub payload: serde_json::Value,
    /// When it becomes ready.
    pub when: When,
    /// How long a consumer may hold it before it goes to another.
    pub ttr: Duration,
    /// Deliveries before it goes to the dead letters (1: never redelivered).
    pub max_deliveries: u32,
    /// Its priority, 0 (the default) to [`MAX_PRIORITY`](crate::queue::MAX_PRIORITY): pops
    /// take the highest ready first, in the order they became ready within a level.
    pub priority: u8,
    /// Deduplication by a key, and what a duplicate does to the pending task the key names
    /// (see [`DedupSpec`](crate::job::DedupSpec); `content: true` derives the key from the
    /// topic and the payload). The id is then picked by keyfire: leave [`NewTask::id`] out.
    pub dedup: Option<crate::job::DedupSpec>,
}

impl NewTask {
    /// A task ready at once, with [`DEFAULT_TTR`] and [`DEFAULT_MAX_DELIVERIES`].
    pub fn new(topic: impl Into<String>, payload: serde_json::Value) -> Self {
        Self {
            id: None,
            topic: topic.into(),
            payload,
            when: When::Delay(Duration::ZERO),
            ttr: DEFAULT_TTR,
            max_deliveries: DEFAULT_MAX_DELIVERIES,
            priority: 0,
            dedup: None,
        }
    }

    /// Its priority, 0 to [`MAX_PRIORITY`](crate::queue::MAX_PRIORITY) (higher first).
    pub fn priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    /// Deduplicate by a key (see [`NewTask::dedup`]).
    pub fn dedup(mut self, dedup: crate::job::DedupSpec) -> Self {
        self.dedup = Some(dedup);
        self
    }

    /// Ready after `delay`.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.when = When::Delay(delay);
        self
    }

    /// Ready at `at`.
    pub fn at(mut self, at: DateTime<Utc>) -> Self {
        self.when = When::At(at);
        self
    }

    /// Time-to-run of each reservation.
    pub fn ttr(mut self, ttr: Duration) -> Self {
        self.ttr = ttr;
        self
    }

    /// Deliveries before the dead letters.
    pub fn max_deliveries(mut self, n: u32) -> Self {
        self.max_deliveries = n;
        self
    }

    /// Use this id (idempotent add).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
}

/// What an add did with one task: see [`Queue::add_task_outcome`](crate::Queue::add_task_outcome).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskAdded {
    /// The task's id: the new task's, or that of the task its dedup key names.
    pub id: String,
    /// `None` when the task was added (or its id existed); for a duplicate of a task with a
    /// dedup key, what it did to that task.
    pub deduplicated: Option<crate::job::Deduplicated>,
}

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Waiting for its instant.
    Delayed,
    /// Due: waiting for a consumer.
    Ready,
    /// Held by a consumer until its deadline.
    Reserved,
    /// Finished by a consumer (kept for the retention, without its payload).
    Done,
    /// Delivered `max_deliveries` times without a finish: a dead letter.
    Dead,
    /// Deleted (kept for the retention, without its payload).
    Deleted,
}

impl TaskState {
    pub(super) fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "delayed" => Self::Delayed,
            "ready" => Self::Ready,
            "reserved" => Self::Reserved,
            "done" => Self::Done,
            "dead" => Self::Dead,
            "deleted" => Self::Deleted,
            other => return Err(Error::Corrupt(format!("unknown task state '{other}'"))),
        })
    }

    /// The state as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delayed => "delayed",
            Self::Ready => "ready",
            Self::Reserved => "reserved",
            Self::Done => "done",
            Self::Dead => "dead",
            Self::Deleted => "deleted",
        }
    }
}

/// A task popped from a topic, with its reservation. All instants are Redis time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reserved {
    /// The task's id.
    pub id: String,
    /// Its topic.
    pub topic: String,
    /// Its payload.
    pub payload: serde_json::Value,
    /// Deliveries so far, this one included (1 the first time).
    pub deliveries: u32,
    /// The reservation token (opaque): [`Queue::finish`](crate::Queue::finish) and [`Queue::touch`](crate::Queue::touch) need it.
    pub token: String,
    /// The time-to-run of this reservation.
    #[serde(with = "humantime_serde")]
    pub ttr: Duration,
    /// The instant the task was due.
    pub due_at: DateTime<Utc>,
    /// When it (last) became ready.
    pub ready_at: DateTime<Utc>,
    /// Its priority (0 to 9, higher first).
    #[serde(default)]
    pub priority: u8,
    /// When this pop reserved it.
    pub reserved_at: DateTime<Utc>,
    /// When the reservation expires unless finished or touched.
    pub deadline: DateTime<Utc>,
}

/// A task as stored: see [`Queue::get`](crate::Queue::get). All instants are Redis time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskInfo {
    /// The task's id.
    pub id: String,
    /// Its topic.
    pub topic: String,
    /// Its state.
    pub state: TaskState,
    /// Its payload (`None` once done or deleted).
    pub payload: Option<serde_json::Value>,
    /// Deliveries so far.
    pub deliveries: u32,
    /// Deliveries before the dead letters.
    pub max_deliveries: u32,
    /// Time-to-run of a reservation.
    #[serde(with = "humantime_serde")]
    pub ttr: Duration,
    /// When it was added.
    pub created_at: DateTime<Utc>,
    /// When it is (was) due.
    pub due_at: DateTime<Utc>,
    /// When it last became ready.
    pub ready_at: Option<DateTime<Utc>>,
    /// Its priority (0 to 9, higher first).
    #[serde(default)]
    pub priority: u8,
    /// When it was last reserved.
    pub reserved_at: Option<DateTime<Utc>>,
    /// The deadline of its reservation, while reserved.
    pub deadline: Option<DateTime<Utc>>,
    /// When it was finished, went to the dead letters, or was deleted.
    pub finished_at: Option<DateTime<Utc>>,
    /// Why it went to the dead letters (a dead letter's: which delivery's reservation expired
    /// unfinished); `None` for other tasks and for dead letters of earlier releases.
    #[serde(default)]
    pub last_error: Option<String>,
    /// The batch with a completion callback it was added in
    /// ([`Queue::add_batch`](crate::Queue::add_batch)); `None` for other tasks, and for a dead
    /// letter replayed after its batch counted it.
    #[serde(default)]
    pub batch: Option<String>,
}

/// A topic's tasks by state, and its counters since it was first used: see [`Queue::topics`](crate::Queue::topics).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TopicCounts {
    /// The topic.
    pub topic: String,
    /// Tasks waiting for their instant.
    pub delayed: u64,
    /// Tasks waiting for a consumer.
    pub ready: u64,
    /// Tasks held by consumers.
    pub reserved: u64,
    /// Dead letters (within the dead-letter retention).
    pub dead: u64,
    /// Tasks added, in all.
    pub added: u64,
    /// Pops that returned a task, in all.
    pub delivered: u64,
    /// Reservations that expired and went back to ready, in all.
    pub redelivered: u64,
    /// Tasks finished, in all.
    pub done: u64,
    /// Tasks deleted while delayed, ready or reserved, in all (a dead letter deleted or purged,
    /// or a finished task's record deleted, is not counted again).
    pub deleted: u64,
    /// Dead letters replayed (made ready again), in all.
    #[serde(default)]
    pub replayed: u64,
    /// Paused: pops reserve none of its tasks until it is resumed (adds go on).
    #[serde(default)]
    pub paused: bool,
    /// Its number of partitions (1 unless declared with more).
    #[serde(default = "one")]
    pub partitions: usize,
}

fn one() -> usize {
    1
}

/// What [`Queue::requeue_expired`](crate::Queue::requeue_expired) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Requeued {
    /// Expired reservations put back to ready.
    pub requeued: u64,
    /// Expired reservations that used up their deliveries: now dead letters.
    pub dead: u64,
    /// Delayed tasks found due and made ready (a promotion that events and timers missed).
    pub promoted: u64,
}

/// How [`Queue::finish_many`](crate::Queue::finish_many) answered one `(id, token)` pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Finished {
    /// Done (also when it was done already under this token: a retried finish).
    Done,
    /// Refused: the reservation is no longer this token's (it expired and the task went back
    /// to ready or to another consumer, or to the dead letters).
    Lost,
    /// No such task, or it was deleted.
    NotFound,
}

/// A task as its record (a hash) says; fields a record may leave out have their defaults
/// (see `lua/add.lua`).
pub(super) fn decode_task(id: &str, map: &HashMap<String, String>) -> Result<TaskInfo> {
    let num = |name: &str| map.get(name).and_then(|v| v.parse::<i64>().ok());
    let state = map
        .get("state")
        .ok_or_else(|| Error::Corrupt(format!("task '{id}' has no state")))?;
    let payload = map
        .get("payload")
        .map(|p| serde_json::from_str(p))
        .transpose()?;
    // A record of this version stores its creation as `c`, the due instant minus it (absent:
    // 0); one of an earlier version as `created`.
    let due = num("due").unwrap_or(0);
    let created = num("created").unwrap_or_else(|| due - num("c").unwrap_or(0));
    Ok(TaskInfo {
        id: id.to_string(),
        topic: map.get("topic").cloned().unwrap_or_default(),
        state: TaskState::parse(state)?,
        payload,
        deliveries: num("deliveries").unwrap_or(0).max(0) as u32,
        max_deliveries: num("max").map_or(DEFAULT_MAX_DELIVERIES, |m| m.max(0) as u32),
        ttr: num("ttr").map_or(DEFAULT_TTR, ms_duration),
        created_at: instant(created),
        due_at: instant(due),
        ready_at: num("ready_at").map(instant),
        priority: num("pri").unwrap_or(0).clamp(0, 9) as u8,
        reserved_at: num("reserved_at").map(instant),
        deadline: num("deadline").map(instant),
        finished_at: num("finished_at").map(instant),
        last_error: map.get("error").cloned(),
        batch: map.get("batch").cloned(),
    })
}
