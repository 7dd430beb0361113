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

/// A round of `seed` for `secs` seconds on `nodes` node processes, each fault printed as it
/// is injected, its files in a temporary directory (kept when it fails).
fn round(seed: u64, secs: u64, nodes: usize, cluster: bool) -> Config {
    Config {
        seed,
        duration: Duration::from_secs(secs),
        nodes,
        node_bin: node_bin(),
        dir: None,
        verbose: true,
        cluster,
    }
}

/// Every fault kind of `kinds` was injected at least once.
fn assert_injected(out: &Outcome, kinds: impl IntoIterator<Item = FaultKind>) {
    let r = &out.report;
    for kind in kinds {
        assert!(
            r.faults.get(&kind).copied().unwrap_or(0) >= 1,
            "no {kind} fault was injected: {r}"
        );
    }
}

/// The checker found no violation.
fn assert_no_violation(seed: u64, out: &Outcome) {
    let r = &out.report;
    assert!(
        r.ok(),
        "{} violations (seed {seed}; files in {}):\n{r}",
        r.violations.len(),
        out.dir.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minute_of_every_fault_loses_and_doubles_nothing() {
    let out = keyfire_lab::chaos::run(round(SEED, 60, 4, false))
        .await
        .expect("the round ran");
    let r = &out.report;
    print_round("chaos round", SEED, &out);
    assert_injected(
        &out,
        FaultKind::SCHEDULED
            .into_iter()
            .chain([FaultKind::HandlerFail, FaultKind::HandlerHang]),
    );
    assert!(r.required > 200, "too few firings to mean much: {r}");
    assert!(
        r.refused > 0,
        "Redis full refused no call of the workload: {r}"
    );
    assert_no_violation(SEED, &out);
}

/// The seed of the delay-queue round `cargo test` runs.
const QUEUE_SEED: u64 = 14;

/// A delay-queue round of 30 s: consumer processes SIGKILLed while they hold reservations, the
/// node that promotes a burst of 3,000 tasks SIGKILLed mid-promotion, expired key events lost,
/// Redis killed and restarted from its AOF. No task lost, none delivered twice within its ttr,
/// none early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_faults_lose_no_task_and_deliver_none_twice_or_early() {
    let out = keyfire_lab::chaos::run_queue(round(QUEUE_SEED, 30, 3, false))
        .await
        .expect("the round ran");
    let r = &out.report;
    print_round("queue chaos round", QUEUE_SEED, &out);
    assert_injected(&out, FaultKind::QUEUE_SCHEDULED);
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
    assert_no_violation(QUEUE_SEED, &out);
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
    let out = keyfire_lab::chaos::run(round(CLUSTER_SEED, 90, 4, true))
        .await
        .expect("the round ran");
    let r = &out.report;
    print_round("cluster chaos round", CLUSTER_SEED, &out);
    assert_injected(&out, FaultKind::CLUSTER_SCHEDULED);
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
    assert_no_violation(CLUSTER_SEED, &out);
}
