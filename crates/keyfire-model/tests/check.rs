//! The model checks: exhaustive for 2 nodes, 2 firings and 2 queue tasks, bounded in depth for 3
//! nodes. Each prints its state count and time (`-- --nocapture`); a property that fails
//! prints its counterexample as a trace. Where a fault breaks a property by design (Redis
//! losing acknowledged writes), the check asserts exactly which properties fail: those are the
//! documented limits (docs/architecture.md, "The protocol, model-checked").

use keyfire_model::queue::{self, Queue};
use keyfire_model::sched::{Mutation, RedisFaults, Sched};
use keyfire_model::{Report, check_bounded, check_exhaustive};

const G1: &str = "G1: a firing is claimed at most once";
const ONE_OK: &str = "at most one ok per firing";
const FENCED: &str = "no outcome recorded by a fenced attempt";

fn show(what: &str, r: &Report) {
    println!(
        "{what}: {} states, depth {}, {:.1?}",
        r.states, r.depth, r.took
    );
    for (name, trace) in &r.failed {
        println!("  FAILS: {name}\n{trace}");
    }
}

fn failed(r: &Report) -> Vec<&'static str> {
    r.failed.iter().map(|(n, _)| *n).collect()
}

/// Two nodes, two firings; two node faults at any point of the first ticks: a node crashes
/// (and restarts under its id) or freezes for any length, both nodes at once or one twice.
/// Every property holds.
#[test]
fn scheduler_two_nodes_two_firings() {
    let r = check_exhaustive(Sched::new(2));
    show("scheduler, 2 nodes, 2 firings, 2 node faults", &r);
    assert!(r.failed.is_empty(), "{:?}", failed(&r));
}

/// Three nodes, two firings, two faults: every behaviour up to 14 steps (or the first 2
/// million states, breadth first).
#[test]
fn scheduler_three_nodes_bounded() {
    let r = check_bounded(Sched::new(3), 14, 2_000_000);
    show(
        "scheduler, 3 nodes, 2 firings, 2 node faults (depth 14)",
        &r,
    );
    assert!(r.failed.is_empty(), "{:?}", failed(&r));
}

#[test]
fn scheduler_redis_restart_from_the_aof() {
    let mut m = Sched::new(2);
    m.firings = 1;
    m.redis = RedisFaults::AofRestart;
    let r = check_exhaustive(m);
    show(
        "scheduler, 2 nodes, 1 firing, a Redis restart from the AOF",
        &r,
    );
    assert_eq!(failed(&r), [G1, ONE_OK, FENCED]);
}

/// A failover to a replica that lacks the last writes, with `wait_replicas = 0`: a claim lost
/// runs again (a documented limit).
#[test]
fn scheduler_failover_without_waiting_for_replicas() {
    let mut m = Sched::new(2);
    m.node_faults = false;
    m.faults = 1;
    m.firings = 1;
    m.redis = RedisFaults::Failover { wait_replicas: 0 };
    let r = check_exhaustive(m);
    show(
        "scheduler, 2 nodes, 1 firing, failover, wait_replicas 0",
        &r,
    );
    assert_eq!(failed(&r), [G1, ONE_OK]);
}

/// With `wait_replicas = 1`: nothing the replica acknowledged runs again. But a claim whose
/// `WAIT` fails with the master (the master fails right after the claim) still runs
/// (availability first), and runs again after the failover: G1 does not hold there either.
#[test]
fn scheduler_failover_waiting_for_a_replica() {
    let mut m = Sched::new(2);
    m.node_faults = false;
    m.faults = 1;
    m.firings = 1;
    m.redis = RedisFaults::Failover { wait_replicas: 1 };
    let r = check_exhaustive(m);
    show(
        "scheduler, 2 nodes, 1 firing, failover, wait_replicas 1",
        &r,
    );
    assert_eq!(failed(&r), [G1, ONE_OK]);
}

/// The mutation check, model side: an outcome recorded without the lease fence is found.
#[test]
fn an_unfenced_complete_is_a_counterexample() {
    let mut m = Sched::new(2);
    m.firings = 1;
    m.faults = 1;
    m.mutation = Mutation::UnfencedComplete;
    let r = check_exhaustive(m);
    show("scheduler, complete.lua without its fence", &r);
    assert!(failed(&r).contains(&FENCED), "{:?}", failed(&r));
}

/// The delay queue: two consumers, two tasks, consumer crashes and pauses.
#[test]
fn queue_two_consumers_two_tasks() {
    let r = check_exhaustive(Queue::new(2));
    show("queue, 2 consumers, 2 tasks, 2 consumer faults", &r);
    assert!(r.failed.is_empty(), "{:?}", failed(&r));
}

/// The delay queue across a Redis restart from the AOF: a finish lost is made again by the
/// task's next delivery (at least once: a documented limit).
#[test]
fn queue_redis_restart_from_the_aof() {
    let mut m = Queue::new(2);
    m.aof = true;
    m.faults = 1;
    let r = check_exhaustive(m);
    show(
        "queue, 2 consumers, 2 tasks, a Redis restart from the AOF (1 fault)",
        &r,
    );
    assert_eq!(failed(&r), ["a reserved task is finished at most once"]);
}

/// The queue's mutation check, model side: a finish that accepts a stale token is found.
#[test]
fn a_finish_of_any_token_is_a_counterexample() {
    let mut m = Queue::new(2);
    m.mutation = queue::Mutation::AnyToken;
    let r = check_exhaustive(m);
    show("queue, finish.lua without its token check", &r);
    assert!(!r.failed.is_empty());
}
