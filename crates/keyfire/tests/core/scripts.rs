//! Shared by the tests that drive the store's scripts one step at a time: history limits no
//! step here reaches, a claim's arguments and a run's record.

use keyfire::store::{ClaimArgs, HistoryLimits, RunRecord, Store, firing_id};

/// Ten runs and ten dead letters, kept an hour.
pub(crate) const LIMITS: HistoryLimits = HistoryLimits {
    history: 10,
    history_max_age_ms: 3_600_000,
    dead: 10,
};

/// A claim by node `n1` of `id`'s firing at `at_ms` with the job's stored version and
/// generation: one run, a 30 s lease, an hour's misfire tolerance, overlap allowed.
pub(crate) async fn claim_args<'a>(
    store: &Store,
    id: &'a str,
    at_ms: i64,
    next_ms: Option<i64>,
) -> ClaimArgs<'a> {
    let stored = store.job_spec(id).await.unwrap().unwrap();
    ClaimArgs {
        job_id: id,
        at_ms,
        version: stored.version,
        generation: stored.generation,
        next_ms,
        node: "n1",
        lease_ms: 30_000,
        ahead_ms: 0,
        tolerance_ms: 3_600_000,
        misfire_applied: false,
        run: true,
        missed: 0,
        overlap: "allow",
        announce_ms: 0,
        arms_next: false,
        compact: stored.compact,
        dropped: None,
        max_runs: None,
        jitter_ms: 0,
    }
}

/// The record of attempt `attempt` of `id`'s firing at `at_ms`, claimed and started at
/// `claimed_ms` by `node`, with `outcome` (anything but `ok` failed with "boom").
pub(crate) fn run_record(
    id: &str,
    at_ms: i64,
    attempt: u32,
    claimed_ms: i64,
    node: &str,
    outcome: &str,
) -> RunRecord {
    RunRecord {
        firing_id: firing_id(id, at_ms),
        scheduled_ms: at_ms,
        attempt,
        node: node.into(),
        claimed_ms,
        started_ms: claimed_ms,
        outcome: outcome.into(),
        error: (outcome != "ok").then(|| "boom".to_string()),
        finished_ms: None,
        fate: None,
        retry_at_ms: None,
    }
}
