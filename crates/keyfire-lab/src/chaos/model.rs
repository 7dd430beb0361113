//! What a chaos round records, as the checker reads it: the workload (every call the
//! harness made, with Redis time around it), the faults it injected, and the history (what
//! the handlers saw, plus keyfire's own run records and dead letters).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::record::RunEvent;
use keyfire::job::JobSpec;
use keyfire::store::{DeadLetter, JobStatus, RunRecord};

/// Bounds the checker holds keyfire to, derived from the node settings of the round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bounds {
    /// Longest a firing may wait for its first claim when Redis is reachable: when its owner
    /// is dead or cut off, the others take it `claim_grace` (plus `node_ttl`, as the sweeper
    /// waits for a live owner that is behind) after its instant, at their next sweep
    /// (`sweep_interval`); plus slack for a loaded host.
    pub late_ms: i64,
    /// After Redis comes back (restart, `CLIENT PAUSE` over), how long nodes may take to
    /// reconnect and sweep what came due meanwhile.
    pub recovery_ms: i64,
    /// How much acknowledged writing a Redis SIGKILL can lose with `appendfsync everysec`:
    /// the fsync runs every second, and Redis delays writes up to 2 s more when an fsync is
    /// slow; so up to ~2 s before the kill.
    pub aof_loss_ms: i64,
}

impl Bounds {
    /// The bounds for node settings with this claim grace, node TTL and sweep interval.
    pub fn for_settings(claim_grace_ms: i64, node_ttl_ms: i64, sweep_ms: i64) -> Self {
        Self {
            late_ms: claim_grace_ms + node_ttl_ms + 2 * sweep_ms + 1_000,
            recovery_ms: 4_000,
            aof_loss_ms: 2_500,
        }
    }
}

/// One call the harness made through [`keyfire::Client`], with Redis time read just before the
/// call and just after it returned: the change took effect somewhere in between.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Op {
    /// The job it is about.
    pub job: String,
    /// Redis time before the call (ms).
    pub call_ms: i64,
    /// Redis time after it returned (ms).
    pub ret_ms: i64,
    /// What it was and what keyfire answered.
    pub kind: OpKind,
}

/// A call and its answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum OpKind {
    /// `upsert` (create or update); the stored record it returned.
    Upsert {
        /// The spec as stored (after validation: `after` resolved).
        spec: JobSpec,
        /// The workload's version of the job (its `v` param).
        v: u64,
        /// Status after the write.
        status: JobStatus,
        /// The next firing keyfire scheduled (exact, from the record).
        next_ms: Option<i64>,
        /// Creation instant (the phase of an `every` job without `start_at`).
        created_ms: i64,
    },
    /// `enqueue_many`: a one-shot task with its instant (`at`).
    Enqueue {
        /// The task's spec (`at` set).
        spec: JobSpec,
        /// Its `v` param.
        v: u64,
    },
    /// `pause`.
    Pause,
    /// `resume`; the next firing it scheduled.
    Resume {
        /// Status after it.
        status: JobStatus,
        /// The next firing (the first one after the pause began).
        next_ms: Option<i64>,
    },
    /// `delete`; the job's run history and dead letters read just before (the delete drops
    /// them).
    Delete {
        /// Run records before the delete.
        runs: Vec<RunRecord>,
        /// Dead letters before the delete.
        dead: Vec<DeadLetter>,
    },
    /// `trigger`; the firing id it returned, `None` if the call failed (a firing may exist).
    Trigger {
        /// The new firing.
        firing: Option<String>,
    },
    /// A call Redis refused because it was full (`keyfire::Error::is_redis_full`, during a
    /// `redis_full` fault): nothing of it was written (a script refused for memory writes
    /// nothing), so whatever it would have created is not expected to run. One op per job,
    /// task or delay-queue task it named.
    Refused {
        /// What the call was: `upsert`, `enqueue`, `queue_add`, `pause`, `resume`, `delete`,
        /// `trigger`.
        call: String,
        /// The workload's version it would have written (`upsert`), else 0.
        #[serde(default)]
        v: u64,
        /// Redis's answer.
        error: String,
    },
    /// `Queue::add_many`: a delay-queue task (the op's `job` is the task id), due at an instant.
    QueueAdd {
        /// Its topic.
        topic: String,
        /// When it is due (ms, Redis time).
        due_ms: i64,
        /// Its time-to-run (ms): a reservation is not taken back before it ran out (0: not
        /// recorded, not checked).
        #[serde(default)]
        ttr_ms: i64,
    },
}

/// What a delay-queue consumer of the harness did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueEv {
    /// Popped the task (reserved it).
    Pop,
    /// Finished it, accepted.
    FinishOk,
    /// Finished it, refused: the reservation was lost.
    FinishLost,
    /// Finishing failed with an error (outcome unknown).
    FinishErr,
    /// Dropped it on purpose without finishing (a consumer crash): it must come back.
    Abandon,
}

/// One consumer event of a delay-queue task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueEvent {
    /// What.
    pub ev: QueueEv,
    /// The task id.
    pub task: String,
    /// The consumer.
    pub consumer: String,
    /// The delivery number the pop returned (1 for the first).
    pub deliveries: u32,
    /// The task's due instant, as the pop returned it (ms).
    pub due_ms: i64,
    /// When it became ready, as the pop returned it (ms, Redis time).
    pub ready_ms: i64,
    /// When this reservation was made (ms, Redis time).
    pub reserved_ms: i64,
    /// Host (= Redis) clock at the event (ms).
    pub at_ms: i64,
}

/// The kinds of fault the harness injects (and two that handlers inject themselves).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// SIGKILL of a node process, restarted later.
    NodeKill,
    /// SIGSTOP of a node process for longer than a lease, then SIGCONT.
    NodeStop,
    /// SIGSTOP of a node process while it runs firings, for 0.3 to 0.7 × `node_ttl` (shorter
    /// than its lease and than its time in the live set), then SIGCONT: it must keep its runs.
    NodePause,
    /// A node restarted with its wall clock skewed by minutes.
    ClockSkew,
    /// A node cut off from Redis: its proxy closes and refuses connections.
    CutDrop,
    /// A node cut off from Redis: its proxy holds every byte (commands hang in flight).
    CutStall,
    /// `CLIENT KILL TYPE pubsub`: every subscriber connection dropped.
    PubsubKill,
    /// `CLIENT PAUSE <ms> ALL`.
    ClientPause,
    /// Redis stopped with SIGTERM (AOF flushed) and restarted.
    RedisTerm,
    /// Redis killed with SIGKILL and restarted from its AOF.
    RedisKill,
    /// Redis restarted empty (killed, its data directory wiped, started again) or emptied by
    /// `FLUSHALL`: everything keyfire held is gone. The fault ends once every running node
    /// logged the loss (it heals by writing back what it owns), at most 5 s after Redis is back.
    RedisEmpty,
    /// Redis full: `maxmemory` just above `used_memory` with `noeviction` for a few seconds,
    /// so what adds data is refused with Redis's OOM error; then restored.
    RedisFull,
    /// A handler failing on purpose (counted from the run log).
    HandlerFail,
    /// A handler hanging past its timeout (counted from the run log).
    HandlerHang,
    /// SIGKILL of a delay-queue consumer process while it holds reservations, restarted later.
    ConsumerKill,
    /// SIGKILL of the node that owns a topic while it promotes a burst of tasks due at one
    /// instant, restarted later.
    PromoteKill,
    /// Expired key events lost: `notify-keyspace-events` emptied for a while.
    EventsLost,
    /// Redis Cluster: SIGKILL of a master; one of its replicas takes its slots over (the
    /// fault ends when every node agrees), then the old master comes back as a replica.
    MasterKill,
    /// Redis Cluster: SIGKILL of a replica, restarted later and back in sync.
    ReplicaKill,
    /// Redis Cluster: a shard's slot moved with its keys (`MIGRATE`) to another master while
    /// everything runs.
    SlotMigration,
    /// Redis Cluster: a master cut off from every client (and its replica) by its proxy,
    /// then healed.
    MasterPartition,
}

impl FaultKind {
    /// Every kind the harness schedules.
    pub const SCHEDULED: [FaultKind; 12] = [
        FaultKind::NodeKill,
        FaultKind::NodeStop,
        FaultKind::NodePause,
        FaultKind::ClockSkew,
        FaultKind::CutDrop,
        FaultKind::CutStall,
        FaultKind::PubsubKill,
        FaultKind::ClientPause,
        FaultKind::RedisTerm,
        FaultKind::RedisKill,
        FaultKind::RedisEmpty,
        FaultKind::RedisFull,
    ];

    /// Every kind the harness schedules in a delay-queue round.
    pub const QUEUE_SCHEDULED: [FaultKind; 6] = [
        FaultKind::ConsumerKill,
        FaultKind::PromoteKill,
        FaultKind::EventsLost,
        FaultKind::PubsubKill,
        FaultKind::RedisTerm,
        FaultKind::RedisKill,
    ];

    /// Every kind the harness schedules in a round on a Redis Cluster: today's node faults
    /// but the network cut-offs (one proxy per Redis node, not per keyfire node), the
    /// subscribers killed and clients paused on every node, and the cluster's own.
    pub const CLUSTER_SCHEDULED: [FaultKind; 9] = [
        FaultKind::NodeKill,
        FaultKind::NodeStop,
        FaultKind::ClockSkew,
        FaultKind::PubsubKill,
        FaultKind::ClientPause,
        FaultKind::MasterKill,
        FaultKind::ReplicaKill,
        FaultKind::SlotMigration,
        FaultKind::MasterPartition,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::NodeKill => "node_kill",
            FaultKind::NodeStop => "node_stop",
            FaultKind::NodePause => "node_pause",
            FaultKind::ClockSkew => "clock_skew",
            FaultKind::CutDrop => "cut_drop",
            FaultKind::CutStall => "cut_stall",
            FaultKind::PubsubKill => "pubsub_kill",
            FaultKind::ClientPause => "client_pause",
            FaultKind::RedisTerm => "redis_term",
            FaultKind::RedisKill => "redis_kill",
            FaultKind::RedisEmpty => "redis_empty",
            FaultKind::RedisFull => "redis_full",
            FaultKind::HandlerFail => "handler_fail",
            FaultKind::HandlerHang => "handler_hang",
            FaultKind::ConsumerKill => "consumer_kill",
            FaultKind::PromoteKill => "promote_kill",
            FaultKind::EventsLost => "events_lost",
            FaultKind::MasterKill => "master_kill",
            FaultKind::ReplicaKill => "replica_kill",
            FaultKind::SlotMigration => "slot_migration",
            FaultKind::MasterPartition => "master_partition",
        }
    }

    /// Whether no node can reach Redis, or some of its data, while it lasts. On a cluster a
    /// master down, cut off or moving a slot holds back only its own shards, but the meta keys
    /// (membership, the queue) live on one of the masters too: the checker counts each as an
    /// outage of all. A full Redis is none: everything but new data goes on.
    pub fn is_outage(self) -> bool {
        matches!(
            self,
            FaultKind::ClientPause
                | FaultKind::RedisTerm
                | FaultKind::RedisKill
                | FaultKind::RedisEmpty
                | FaultKind::MasterKill
                | FaultKind::SlotMigration
                | FaultKind::MasterPartition
        )
    }

    /// Whether it acts on Redis (one at a time) rather than on one node.
    pub fn is_redis(self) -> bool {
        matches!(
            self,
            FaultKind::PubsubKill
                | FaultKind::ClientPause
                | FaultKind::RedisTerm
                | FaultKind::RedisKill
                | FaultKind::RedisEmpty
                | FaultKind::RedisFull
                | FaultKind::EventsLost
                | FaultKind::MasterKill
                | FaultKind::ReplicaKill
                | FaultKind::SlotMigration
                | FaultKind::MasterPartition
        )
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One injected fault, by the host (= Redis) clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultEvent {
    /// What.
    pub kind: FaultKind,
    /// The node it hit, if it hit one.
    pub node: Option<String>,
    /// When it began (ms).
    pub start_ms: i64,
    /// When it was over: the node back and heartbeating, Redis answering again (ms).
    pub end_ms: i64,
    /// Free text (skew, pause length).
    pub detail: String,
}

/// The workload of a round: its calls in order, and the round's time frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// The seed the round was planned from.
    pub seed: u64,
    /// Redis time when the workload began (ms).
    pub start_ms: i64,
    /// Redis time when the faults and calls stopped (ms): firings after it are not required.
    pub cutoff_ms: i64,
    /// Redis time when the history was read, after the drain (ms).
    pub end_ms: i64,
    /// The bounds held to.
    pub bounds: Bounds,
    /// Every call, in the order made.
    pub ops: Vec<Op>,
}

/// What happened, as recorded outside keyfire and inside it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct History {
    /// Every handler event of every node process.
    pub runs: Vec<RunEvent>,
    /// Run-log lines that did not parse (torn by a SIGKILL).
    pub torn: usize,
    /// keyfire's run records of every job still existing at the end, by job.
    pub keyfire_runs: BTreeMap<String, Vec<RunRecord>>,
    /// keyfire's dead letters of every job still existing at the end, by job.
    pub dead: BTreeMap<String, Vec<DeadLetter>>,
    /// Firings (due at or before the cutoff) still running or queued for an attempt after
    /// the drain: stuck.
    pub leftovers: Vec<String>,
    /// What the delay-queue consumers did.
    #[serde(default)]
    pub queue: Vec<QueueEvent>,
    /// Delay-queue tasks by their state at the end (`done`, `dead`, `ready`, …).
    #[serde(default)]
    pub queue_states: BTreeMap<String, String>,
    /// What the nodes logged that the checker judges (see [`NodeLogEvent`]).
    #[serde(default)]
    pub node_log: Vec<NodeLogEvent>,
}

/// A line of a node's log the checker judges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeLogEvent {
    /// The node.
    pub node: String,
    /// When it was logged, by the host (= Redis) clock (ms).
    pub at_ms: i64,
    /// What it said.
    pub what: NodeLogKind,
}

/// The node log lines the checker judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeLogKind {
    /// The node found that Redis lost keyfire's data (its ERROR line), and healed.
    DataLoss,
    /// The node fenced itself: no heartbeat succeeded for 3/5 of `node_ttl`.
    Fenced,
}
