//! The chaos suite: run keyfire the way production breaks it, then prove from a recorded
//! history that no firing was lost, doubled, early, late, or run after its job was deleted or
//! paused.
//!
//! - [`harness`]: a round: Redis with the shipped `redis.conf` and AOF on, 3–5 node processes
//!   (the `chaos_node` example) each behind a [`proxy`], a workload (cron with seconds, fixed
//!   rate, one-shot tasks with retries, hangs and failures, jobs created, updated, paused,
//!   resumed, triggered and deleted while running), and faults on a schedule planned from a
//!   seed ([`plan`]): SIGKILL and SIGSTOP of nodes (past a lease, and short pauses while they
//!   run firings), clock skew, a node cut off from Redis, `CLIENT KILL TYPE pubsub`,
//!   `CLIENT PAUSE`, Redis SIGTERM and SIGKILL with AOF recovery, Redis restarted empty, and
//!   Redis full (`maxmemory` reached, `noeviction`).
//! - [`record`]: what handlers write, outside keyfire, one JSON line per event per node;
//!   [`nodelog`]: the lines of the nodes' own logs the checker judges (data loss, fencing).
//! - [`check()`]: the checker, pure code over the workload, the history and the faults; its
//!   docs say exactly what counts as a violation and what is exempt.
//!
//! - [`queue_round`]: a delay-queue round: consumer processes ([`consumer`]) SIGKILLed while
//!   they hold reservations, the node promoting a burst SIGKILLed mid-promotion, expired key
//!   events lost, Redis restarted from its AOF; checked by the same checker.
//!
//! - On a Redis Cluster ([`Config::cluster`]): the same workload on 3 masters with a replica
//!   each, every Redis node behind a proxy it announces; the cluster's faults: a master
//!   SIGKILLed and failed over, a replica SIGKILLed, a shard's slot migrated with its keys, a
//!   master partitioned away (see [`plan::Plan::cluster`]).
//!
//! `keyfire chaos --minutes 10 --seed N` runs a long round (`--queue` a queue round,
//! `--redis-mode cluster` one on a Redis Cluster); `cargo test` runs short ones
//! (`tests/chaos`).

pub mod check;
pub mod consumer;
pub mod harness;
pub mod model;
pub mod nodelog;
pub mod plan;
pub mod proxy;
pub mod queue_round;
pub mod record;

pub use check::{Report, Violation, ViolationKind, check};
pub use harness::{Config, Outcome, node_bin_near, recheck, run};
pub use model::{
    Bounds, FaultEvent, FaultKind, History, NodeLogEvent, NodeLogKind, Op, OpKind, Workload,
};
pub use queue_round::run_queue;
