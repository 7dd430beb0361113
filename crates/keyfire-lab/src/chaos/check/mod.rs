//! The checker: derive every firing the workload asked for from its calls (schedules, windows,
//! pauses, deletions, misfire policies, outages) and hold the recorded history to keyfire's
//! guarantees. Pure code: no Redis, no clock.
//!
//! # Where it is
//!
//! [`check()`] (here) derives what the workload expected, groups the evidence, runs every
//! check over it and sorts the findings into violations and exemptions:
//!
//! - `report`: the verdict: [`Report`], [`Violation`], [`ViolationKind`] (and which kinds a
//!   fault may explain), [`Lateness`], and how a report prints;
//! - `expect`: the expectations: every firing the workload's calls asked for, required or
//!   optional and why, with its deadline (pushed past outages), and per job the spans when it
//!   was paused or deleted and the calls a Redis SIGKILL or data loss may have undone;
//! - `judge`: the evidence (the handler's runs and keyfire's records and dead letters by
//!   firing), the findings so far, the checks of runs, of expected firings and of accepted
//!   outcomes, and the sorting of findings into violations and exemptions;
//! - `queue`: the delay-queue tasks, one check per kind of finding;
//! - `nodes`: what the nodes did through faults: runs taken over after a short pause, and
//!   their logs (data loss noticed, none imagined, no fencing while Redis was full).
//!
//! Each has its unit tests next to it (`<file>/tests.rs`, on the histories of `fixtures`).
//!
//! # What counts as a violation
//!
//! keyfire's execution is at-least-once per attempt with leases (G5): a firing may *start*
//! more than once (a run taken over after its lease expired, while the old run goes on
//! somewhere), and a handler's side effect may happen more than once; keyfire then refuses the
//! stale run's outcome (fencing by attempt in `complete.lua`). So two handler runs that both
//! return `Ok` are **not** a violation: they are counted as re-runs. The violations are:
//!
//! - `doubled`: two successful completions *accepted by keyfire* (two `ok` records in the
//!   job's run history) for one firing id;
//! - `double_claim`: one attempt of one firing started twice (each attempt is granted once);
//! - `missed`: a required firing with no run at all and no record in keyfire;
//! - `lost`: a required firing that never succeeded (no handler run returned `Ok`), that was
//!   neither meant to die (its handler fails on every attempt) nor dropped by a later pause
//!   or delete of its job; or a firing meant to die that is not in the dead letters;
//! - `unrecorded`: a handler returned `Ok` but keyfire holds neither an `ok` record nor a
//!   dead letter for the firing once everything settled;
//! - `early`: a handler started before its instant by Redis's clock, or a claim more than the
//!   nodes' claim lead before it (`Firing::claimed_at`);
//! - `late`: first claimed after its deadline: the instant (or the call that made it due)
//!   plus [`Bounds::late_ms`], pushed past any Redis outage that overlaps it by
//!   [`Bounds::recovery_ms`];
//! - `ran_after_delete`: a run of a firing of a deleted job claimed after `delete` returned,
//!   or of a firing from before Redis lost its data claimed after the loss;
//! - `ran_while_paused`: a run claimed after `pause` returned and before `resume` was called;
//! - `stale_version`: a scheduled firing run with params of another version than the one it
//!   was scheduled under, or any run (retry, takeover, trigger) with params older than the
//!   version its firing belongs to;
//! - `unexpected`: a run of a firing the workload never asked for;
//! - `misfire`: a job with `misfire = "skip"` ran a firing claimed later than its tolerance;
//! - `stuck`: a firing due before the cutoff still running or queued after the drain;
//! - `rerun_after_pause`: a run in flight on a node paused for less than `node_ttl` got a next
//!   attempt, though its handler did not fail (nor was meant to fail or hang on that attempt)
//!   and no other fault that takes runs away came between its claim and the next attempt's;
//! - `fenced_while_full`: a node logged that it fenced itself while Redis was full (or within
//!   2 s of it), with no other fault holding it or Redis;
//! - `unnoticed_data_loss`: Redis lost its data and no node logged it (its ERROR line) within
//!   10 s of the fault's end; `false_data_loss`: a node logged a data loss with no
//!   `redis_empty` fault in the 10 s before.
//!
//! Delay-queue tasks (each named `queue:<task id>`) are held to the queue's promises with the
//! same kinds where they mean the same: `early` (made ready or reserved before its instant),
//! `late` (first made ready after its deadline), `double_claim` (one delivery number given
//! twice), `doubled` (two finishes accepted), `missed` (a required task never delivered),
//! `lost` (delivered, never finished, neither done nor dead at the end); and two of their own:
//! `within_ttr` (delivered again before the previous reservation's ttr ran out) and
//! `redelivered_after_finish` (delivered again after a finish was accepted). A delivery of a
//! task no accepted add produced (its add refused because Redis was full) is `unexpected`; a
//! delivery after Redis lost its data of a task added before, `ran_after_delete`.
//!
//! # What is required
//!
//! A firing is required when its deadline passed before anything could legitimately drop it
//! (the next update, pause or delete of its job; the end of the observation), and it is not a
//! misfire candidate (under `fire_once` or `skip`, a firing whose deadline is later than its
//! misfire tolerance may be skipped and counted as missed). Other firings the schedules
//! produce are optional: they may run (once), they need not.
//!
//! # The one exemption: a Redis SIGKILL
//!
//! With the shipped `redis.conf` (`appendfsync everysec`) a Redis crash loses the writes of
//! up to [`Bounds::aof_loss_ms`] before it. A claim in that window may be undone, so the
//! firing is claimed again (same attempt) and may complete twice; an outcome may be undone
//! and the firing re-run. So for a firing with a claim, an end or its instant within
//! `aof_loss_ms` before a Redis SIGKILL, `doubled`, `double_claim` and `unrecorded` are
//! reported as exempt (counted, not violations). A call of the workload that returned in
//! that window may be undone too: the harness makes none there, and if one did, the
//! call-dependent checks of its job are exempt. A SIGTERM restart loses nothing.
//!
//! On a Redis Cluster a master's SIGKILL is treated the same way: replication is
//! asynchronous, so the replica that takes over may miss the master's last writes (the
//! nodes run with `redis.wait_replicas = 1`, which waits for a claim and an outcome to
//! reach the replica, but not for every other write). The harness makes no workload call
//! in the second before it kills a master.
//!
//! # Redis losing its data, Redis full
//!
//! A `redis_empty` fault (Redis restarted empty, or `FLUSHALL`) takes everything keyfire held,
//! by design: for the checker, every job, task and delay-queue task created before it is
//! deleted at the fault's start, its history and dead letters with it. So their firings
//! (and queued retries) whose deadline comes after the start are optional (`deadline after
//! Redis lost its data`), their firings after the start are not expected at all, their
//! outcomes need no record, and their delay-queue tasks need not be delivered or finished;
//! but a firing due and late before the loss is still `missed`, and nothing from before may
//! run after it. What the workload creates once the fault is over (the harness holds its calls
//! until every node logged the loss and healed, at most 5 s after Redis answers) is judged as
//! usual: the driver creates its static jobs again under a new version, so a node that runs
//! them with the spec it cached before the loss is caught as `stale_version`.
//!
//! A `redis_full` fault refuses what adds data. The workload's calls Redis refused (`Refused`
//! ops) wrote nothing and are not expected to run (a run of one is `unexpected`); everything
//! that existed is held to the usual bounds (a full Redis is no outage), and no node may fence
//! itself meanwhile.
//!
//! # The other exemption: attempts used up by faults
//!
//! A run cut off by a fault (its node killed, stopped or cut off; Redis paused or restarted,
//! which makes every node fence itself; on a cluster, a master killed, cut off or moving a
//! slot) is taken over as the next attempt (G5). A firing
//! whose every attempt was cut off that way, until its attempts were used up and it went to
//! the dead letters, is reported as exempt from `lost` (counted, not a violation). A run that
//! returned `Ok` or failed on its own is never cut off.
//!
//! [`Bounds::late_ms`]: super::model::Bounds::late_ms
//! [`Bounds::recovery_ms`]: super::model::Bounds::recovery_ms
//! [`Bounds::aof_loss_ms`]: super::model::Bounds::aof_loss_ms

mod expect;
#[cfg(test)]
mod fixtures;
mod judge;
mod nodes;
mod queue;
mod report;

pub use report::{Lateness, Report, Violation, ViolationKind};

use super::model::{FaultEvent, History, Workload};
use expect::Expectations;
use judge::{Evidence, Findings, group_runs};

/// How long after a `redis_empty` fault began its loss may take effect: `FLUSHALL` runs a
/// moment after the harness read the clock (a SIGKILL lands at once).
const WIPE_SLACK_MS: i64 = 100;
/// The round's nodes' claim lead (`node.claim_ahead`, at its default): a firing may be claimed
/// that long before its instant, its handler held until the instant. So a firing claimed
/// just before a change of its job may run as it was claimed, up to the lead after the change.
fn claim_lead_ms() -> i64 {
    keyfire::config::NodeSettings::default()
        .claim_ahead
        .as_millis() as i64
}
/// How soon a node notices a fault that holds it (resuming from SIGSTOP, reconnecting).
const NOTICED_WITHIN_MS: i64 = 2_000;
/// How late after a `redis_empty` fault a node may still log the loss: a node frozen by a
/// node fault meanwhile logs it when it wakes (a stop lasts up to 5 s).
const LOSS_LOGGED_WITHIN_MS: i64 = 10_000;

/// Check a round's history against its workload and faults.
pub fn check(workload: &Workload, history: &History, faults: &[FaultEvent]) -> Report {
    let expected = Expectations::derive(workload, faults);
    let runs = group_runs(history);
    let evidence = Evidence::new(&expected, workload, history, faults, &runs);
    let mut findings = Findings::new(workload, history, faults);
    evidence.check_runs(&mut findings);
    evidence.check_expected_firings(&mut findings);
    evidence.check_accepted_outcomes(&mut findings);
    evidence.check_queue(&mut findings);
    evidence.check_pauses(&mut findings);
    evidence.check_node_logs(&mut findings);
    evidence.check_leftovers(&mut findings);
    evidence.sort(findings)
}
