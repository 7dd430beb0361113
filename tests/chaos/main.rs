//! A 60-second chaos round with a fixed seed and at least one fault of every kind (Redis
//! restarted empty, Redis full and a short node pause among them), a 30-second delay-queue
//! round, and a 90-second one on a Redis Cluster; the checker must find no violation. (The
//! checker's own tests, with a planted double, miss and early run, a firing lost with Redis's
//! data, a create refused as full and a re-run after a short pause, are unit tests in
//! `crates/keyfire-lab/src/chaos/check/`, next to the code they test.)
//!
//! The node processes are keyfire-lab's `chaos_node` example, which `cargo test` builds next to
//! this test binary. Longer rounds: `cargo run --release -- chaos --minutes 10 --seed N`.

mod repro;

use std::path::PathBuf;
use std::time::Duration;

use keyfire_lab::chaos::{Config, FaultKind, Outcome, node_bin_near};

/// The seed of the round `cargo test` runs (any seed plans every fault kind in a minute).
const SEED: u64 = 9;

fn node_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    node_bin_near(&exe).unwrap_or_else(|| {
        panic!(
            "examples/chaos_node is missing near {}: `cargo test` builds it; \
             with a filter, run `cargo build --examples` first",
            exe.display()
        )
    })
}

/// What a round found, its faults and the harness's incidents, on stderr (shown when the
/// test fails).
fn print_round(name: &str, seed: u64, out: &Outcome) {
    eprintln!(
        "{name} (seed {seed}), files in {}:\n{}",
        out.dir.display(),
        out.report
    );
    for f in &out.faults {
        eprintln!(
            "  {} {}: {}",
            f.kind,
            f.node.as_deref().unwrap_or("-"),
            f.detail
        );
    }
    for i in &out.incidents {
        eprintln!("  harness incident: {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minute_of_every_fault_loses_and_doubles_nothing() {
    let out = keyfire_lab::chaos::run(Config {
        seed: SEED,
        duration: Duration::from_secs(60),
        nodes: 4,
        node_bin: node_bin(),
        dir: None,
        verbose: true,
        cluster: false,
    })
    .await
    .expect("the round ran");
    let r = &out.report;
    print_round("chaos round", SEED, &out);
    for kind in FaultKind::SCHEDULED
        .into_iter()
        .chain([FaultKind::HandlerFail, FaultKind::HandlerHang])
    {
        assert!(
            r.faults.get(&kind).copied().unwrap_or(0) >= 1,
            "no {kind} fault was injected: {r}"
        );
    }
    assert!(r.required > 200, "too few firings to mean much: {r}");
    assert!(
        r.refused > 0,
        "Redis full refused no call of the workload: {r}"
    );
    assert!(
        r.ok(),
        "{} violations (seed {SEED}; files in {}):\n{r}",
        r.violations.len(),
        out.dir.display()
    );
}

/// The seed of the delay-queue round `cargo test` runs.
const QUEUE_SEED: u64 = 14;

/// A delay-queue round of 30 s: consumer processes SIGKILLed while they hold reservations, the
/// node that promotes a burst of 3,000 tasks SIGKILLed mid-promotion, expired key events lost,
/// Redis killed and restarted from its AOF. No task lost, none delivered twice within its ttr,
/// none early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_faults_lose_no_task_and_deliver_none_twice_or_early() {
    let out = keyfire_lab::chaos::run_queue(Config {
        seed: QUEUE_SEED,
        duration: Duration::from_secs(30),
        nodes: 3,
        node_bin: node_bin(),
        dir: None,
        verbose: true,
        cluster: false,
    })
    .await
    .expect("the round ran");
    let r = &out.report;
    eprintln!(
        "queue chaos round (seed {QUEUE_SEED}), files in {}:\n{r}",
        out.dir.display()
    );
    for f in &out.faults {
        eprintln!(
            "  {} {}: {}",
            f.kind,
            f.node.as_deref().unwrap_or("-"),
            f.detail
        );
    }
    for kind in FaultKind::QUEUE_SCHEDULED {
        assert!(
            r.faults.get(&kind).copied().unwrap_or(0) >= 1,
            "no {kind} fault was injected: {r}"
        );
    }
    assert!(
        out.faults
            .iter()
            .any(|f| f.kind == FaultKind::ConsumerKill && !f.detail.starts_with("holding 0 ")),
        "no consumer was killed while holding reservations"
    );
    assert!(r.queue_tasks > 2_000, "too few tasks to mean much: {r}");
    assert!(
        r.deliveries > r.queue_tasks,
        "no task was delivered again (killed consumers, expired reservations): {r}"
    );
    assert!(
        r.ok(),
        "{} violations (seed {QUEUE_SEED}; files in {}):\n{r}",
        r.violations.len(),
        out.dir.display()
    );
}

/// The seed of the Redis Cluster round `cargo test` runs.
const CLUSTER_SEED: u64 = 5;

/// 90 s on a Redis Cluster (3 masters, a replica each, 6 shards): a master SIGKILLed and failed
/// over (then back as a replica), a replica SIGKILLed, a shard's slot migrated with its keys,
/// a master partitioned away by its proxy, subscribers killed and clients paused on every
/// node, nodes killed, stopped and skewed; the delay queue beside the jobs. The checker finds
/// nothing lost, doubled, early or late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_round_of_failovers_migrations_and_partitions_loses_and_doubles_nothing() {
    let out = keyfire_lab::chaos::run(Config {
        seed: CLUSTER_SEED,
        duration: Duration::from_secs(90),
        nodes: 4,
        node_bin: node_bin(),
        dir: None,
        verbose: true,
        cluster: true,
    })
    .await
    .expect("the round ran");
    let r = &out.report;
    print_round("cluster chaos round", CLUSTER_SEED, &out);
    for kind in FaultKind::CLUSTER_SCHEDULED {
        assert!(
            r.faults.get(&kind).copied().unwrap_or(0) >= 1,
            "no {kind} fault was injected: {r}"
        );
    }
    // The fault log says each cluster fault did what it says.
    let detail = |kind: FaultKind, has: &str| {
        out.faults
            .iter()
            .any(|f| f.kind == kind && f.detail.contains(has))
    };
    assert!(
        detail(FaultKind::MasterKill, "took over"),
        "no master was failed over"
    );
    assert!(
        out.faults
            .iter()
            .any(|f| f.kind == FaultKind::SlotMigration && !f.detail.ends_with(" 0 keys")),
        "no slot moved with keys"
    );
    assert!(detail(FaultKind::ReplicaKill, "back in sync"));
    assert!(detail(FaultKind::MasterPartition, "cut off"));
    assert!(r.required > 200, "too few firings to mean much: {r}");
    assert!(r.queue_tasks > 50, "too few delay-queue tasks: {r}");
    assert!(
        r.ok(),
        "{} violations (seed {CLUSTER_SEED}; files in {}):\n{r}",
        r.violations.len(),
        out.dir.display()
    );
}
