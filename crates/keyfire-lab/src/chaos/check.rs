//! The checker: derive every firing the workload asked for from its calls (schedules, windows,
//! pauses, deletions, misfire policies, outages) and hold the recorded history to keyfire's
//! guarantees. Pure code: no Redis, no clock.
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
//! - `early`: claimed before its instant by Redis's clock (`Firing::claimed_at`);
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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use serde::{Deserialize, Serialize};

use super::model::{
    Bounds, FaultEvent, FaultKind, History, NodeLogKind, Op, OpKind, QueueEv, QueueEvent, Workload,
};
use super::record::{Ev, Outcome, RunEvent};
use keyfire::job::{Job, MisfirePolicy, Validation};
use keyfire::store::{RunRecord, firing_id, parse_firing_id};

/// A kind of violation (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    /// A required firing never ran.
    Missed,
    /// A required firing never succeeded.
    Lost,
    /// Two successful completions accepted by keyfire.
    Doubled,
    /// One attempt started twice.
    DoubleClaim,
    /// Claimed before its instant.
    Early,
    /// First claimed after its deadline.
    Late,
    /// Claimed after its job's delete returned.
    RanAfterDelete,
    /// Claimed while its job was paused.
    RanWhilePaused,
    /// Ran with params of the wrong version.
    StaleVersion,
    /// A firing no schedule produced.
    Unexpected,
    /// Ran under `skip` though found later than its tolerance.
    Misfire,
    /// Succeeded but keyfire recorded no outcome.
    Unrecorded,
    /// Still running or queued after the drain.
    Stuck,
    /// A delay-queue task delivered again after a finish was accepted.
    RedeliveredAfterFinish,
    /// A delay-queue task delivered again before its previous reservation's ttr ran out.
    WithinTtr,
    /// A firing run again (a takeover) because its node was paused for less than `node_ttl`.
    RerunAfterPause,
    /// A node fenced itself while Redis was full (its heartbeats must go on).
    FencedWhileFull,
    /// Redis lost its data and no node logged it.
    UnnoticedDataLoss,
    /// A node logged that Redis lost keyfire's data when it had not.
    FalseDataLoss,
}

impl ViolationKind {
    /// Every kind, in report order.
    pub const ALL: [ViolationKind; 19] = [
        ViolationKind::Missed,
        ViolationKind::Lost,
        ViolationKind::Doubled,
        ViolationKind::DoubleClaim,
        ViolationKind::Early,
        ViolationKind::Late,
        ViolationKind::RanAfterDelete,
        ViolationKind::RanWhilePaused,
        ViolationKind::StaleVersion,
        ViolationKind::Unexpected,
        ViolationKind::Misfire,
        ViolationKind::Unrecorded,
        ViolationKind::Stuck,
        ViolationKind::RedeliveredAfterFinish,
        ViolationKind::WithinTtr,
        ViolationKind::RerunAfterPause,
        ViolationKind::FencedWhileFull,
        ViolationKind::UnnoticedDataLoss,
        ViolationKind::FalseDataLoss,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            ViolationKind::Missed => "missed",
            ViolationKind::Lost => "lost",
            ViolationKind::Doubled => "doubled",
            ViolationKind::DoubleClaim => "double_claim",
            ViolationKind::Early => "early",
            ViolationKind::Late => "late",
            ViolationKind::RanAfterDelete => "ran_after_delete",
            ViolationKind::RanWhilePaused => "ran_while_paused",
            ViolationKind::StaleVersion => "stale_version",
            ViolationKind::Unexpected => "unexpected",
            ViolationKind::Misfire => "misfire",
            ViolationKind::Unrecorded => "unrecorded",
            ViolationKind::Stuck => "stuck",
            ViolationKind::RedeliveredAfterFinish => "redelivered_after_finish",
            ViolationKind::WithinTtr => "within_ttr",
            ViolationKind::RerunAfterPause => "rerun_after_pause",
            ViolationKind::FencedWhileFull => "fenced_while_full",
            ViolationKind::UnnoticedDataLoss => "unnoticed_data_loss",
            ViolationKind::FalseDataLoss => "false_data_loss",
        }
    }

    /// Whether a Redis SIGKILL's lost writes can explain it (see the module docs).
    fn aof_explainable(self) -> bool {
        matches!(
            self,
            ViolationKind::Doubled
                | ViolationKind::DoubleClaim
                | ViolationKind::Unrecorded
                | ViolationKind::RedeliveredAfterFinish
                | ViolationKind::WithinTtr
        )
    }

    /// Whether an undone workload call can explain it.
    fn op_explainable(self) -> bool {
        matches!(
            self,
            ViolationKind::Missed
                | ViolationKind::Lost
                | ViolationKind::RanAfterDelete
                | ViolationKind::RanWhilePaused
                | ViolationKind::StaleVersion
                | ViolationKind::Unexpected
                | ViolationKind::Late
        )
    }
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// What.
    pub kind: ViolationKind,
    /// The firing id (or job id for job-level findings).
    pub firing: String,
    /// The evidence.
    pub detail: String,
}

/// Lateness of first claims under one fault kind (or none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lateness {
    /// Firings whose first claim was observed.
    pub firings: usize,
    /// Worst: first claim minus the instant it became due (ms).
    pub worst_ms: i64,
}

/// The checker's verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The seed of the round.
    pub seed: u64,
    /// Firings the schedules produced in the observed span (required and optional).
    pub firings: usize,
    /// Of those, the required ones.
    pub required: usize,
    /// The optional ones, by why they are not required.
    pub optional: BTreeMap<String, usize>,
    /// Handler runs recorded.
    pub runs: usize,
    /// Runs of attempt 2 or later (retries and takeovers).
    pub retries: usize,
    /// Firings whose handler returned `Ok` more than once (at-least-once, allowed).
    pub reruns: usize,
    /// Firings run again because their node was paused for less than `node_ttl` (each a
    /// `rerun_after_pause` violation).
    #[serde(default)]
    pub pause_reruns: usize,
    /// Workload calls Redis refused because it was full (one per job or task they named).
    #[serde(default)]
    pub refused: usize,
    /// Times a node logged that Redis lost keyfire's data.
    #[serde(default)]
    pub data_losses_logged: usize,
    /// Run-log lines torn by a SIGKILL.
    pub torn: usize,
    /// Delay-queue tasks added, and their deliveries to consumers.
    pub queue_tasks: usize,
    /// Deliveries (pops) of delay-queue tasks.
    pub deliveries: usize,
    /// Faults injected, by kind.
    pub faults: BTreeMap<FaultKind, usize>,
    /// Lateness of first claims, by the fault kinds active around each firing (`none`: no
    /// fault).
    pub lateness: BTreeMap<String, Lateness>,
    /// The violations.
    pub violations: Vec<Violation>,
    /// Findings explained by a documented exemption (a Redis SIGKILL's lost writes; a
    /// firing whose every attempt a fault cut off).
    pub exempt: Vec<Violation>,
}

impl Report {
    /// Whether no violation was found.
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }

    /// Violations of one kind.
    pub fn count(&self, kind: ViolationKind) -> usize {
        self.violations.iter().filter(|v| v.kind == kind).count()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "firings checked: {} ({} required); handler runs: {} ({} retries or takeovers); \
             firings re-run after success (at-least-once): {}; torn log lines: {}",
            self.firings, self.required, self.runs, self.retries, self.reruns, self.torn
        )?;
        if self.queue_tasks > 0 {
            writeln!(
                f,
                "delay-queue tasks: {}, delivered {} times",
                self.queue_tasks, self.deliveries
            )?;
        }
        let count = |k: FaultKind| self.faults.get(&k).copied().unwrap_or(0);
        if count(FaultKind::RedisEmpty) > 0 || self.data_losses_logged > 0 {
            writeln!(
                f,
                "Redis lost its data {} times; the nodes logged a data loss {} times",
                count(FaultKind::RedisEmpty),
                self.data_losses_logged
            )?;
        }
        if count(FaultKind::RedisFull) > 0 || self.refused > 0 {
            writeln!(
                f,
                "Redis full {} times; workload calls refused as full: {}",
                count(FaultKind::RedisFull),
                self.refused
            )?;
        }
        if count(FaultKind::NodePause) > 0 {
            writeln!(
                f,
                "short node pauses: {}; re-runs after short pauses: {}",
                count(FaultKind::NodePause),
                self.pause_reruns
            )?;
        }
        let optional: Vec<String> = self
            .optional
            .iter()
            .map(|(why, n)| format!("{n} {why}"))
            .collect();
        if !optional.is_empty() {
            writeln!(f, "optional firings: {}", optional.join(", "))?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "{:<16} {:>8} {:>16} {:>18}",
            "fault", "injected", "firings nearby", "worst lateness ms"
        )?;
        let none = self.lateness.get("none").copied().unwrap_or_default();
        writeln!(
            f,
            "{:<16} {:>8} {:>16} {:>18}",
            "(none)", "-", none.firings, none.worst_ms
        )?;
        if let Some(q) = self.lateness.get("queue") {
            writeln!(
                f,
                "{:<16} {:>8} {:>16} {:>18}",
                "(queue ready)", "-", q.firings, q.worst_ms
            )?;
        }
        for (kind, n) in &self.faults {
            let l = self.lateness.get(kind.name()).copied().unwrap_or_default();
            let (near, worst) = if matches!(kind, FaultKind::HandlerFail | FaultKind::HandlerHang) {
                ("-".to_string(), "-".to_string())
            } else {
                (l.firings.to_string(), l.worst_ms.to_string())
            };
            writeln!(f, "{:<16} {:>8} {:>16} {:>18}", kind.name(), n, near, worst)?;
        }
        writeln!(f)?;
        writeln!(f, "{:<26} {:>6} {:>8}", "violation", "count", "exempt")?;
        for kind in ViolationKind::ALL {
            let exempt = self.exempt.iter().filter(|v| v.kind == kind).count();
            writeln!(
                f,
                "{:<18} {:>6} {:>8}",
                kind.name(),
                self.count(kind),
                exempt
            )?;
        }
        for v in self.violations.iter().take(30) {
            writeln!(f, "  {} {}: {}", v.kind, v.firing, v.detail)?;
        }
        if self.violations.len() > 30 {
            writeln!(f, "  … {} more", self.violations.len() - 30)?;
        }
        for v in self.exempt.iter().take(10) {
            writeln!(f, "  exempt {} {}: {}", v.kind, v.firing, v.detail)?;
        }
        Ok(())
    }
}

/// A firing the workload asked for.
#[derive(Debug, Clone)]
struct Expect {
    job: String,
    instant: i64,
    /// Versions (`v`) of the schedules that produce it.
    versions: BTreeSet<u64>,
    required: bool,
    /// Why it is not required (when it is not).
    why_optional: &'static str,
    /// When it became due (the instant, or the call that made it due if later).
    ready: i64,
    deadline: i64,
    trigger: bool,
    /// Its handler fails on every attempt: it must end in the dead letters.
    doomed: bool,
    /// `Some(tolerance)` under `misfire = "skip"`.
    skip_tolerance: Option<i64>,
}

/// An active schedule of a job, from the call that made it until the next one.
struct Segment {
    job: Job,
    v: u64,
    first: Option<i64>,
    not_before: i64,
}

/// How long after a `redis_empty` fault began its loss may take effect: `FLUSHALL` runs a
/// moment after the harness read the clock (a SIGKILL lands at once).
const WIPE_SLACK_MS: i64 = 100;
/// How soon a node notices a fault that holds it (resuming from SIGSTOP, reconnecting).
const NOTICED_WITHIN_MS: i64 = 2_000;
/// How late after a `redis_empty` fault a node may still log the loss: a node frozen by a
/// node fault meanwhile logs it when it wakes (a stop lasts up to 5 s).
const LOSS_LOGGED_WITHIN_MS: i64 = 10_000;

struct Checker<'a> {
    w: &'a Workload,
    b: Bounds,
    outages: Vec<(i64, i64)>,
    aof_windows: Vec<(i64, i64)>,
    /// `redis_empty` faults: their start and end. Everything created before a start is gone
    /// from `start + WIPE_SLACK_MS` on.
    wipes: Vec<(i64, i64)>,
    /// The params of each version of each job (`v`), as the workload wrote them.
    params: HashMap<(String, u64), serde_json::Value>,
    expects: BTreeMap<String, Expect>,
    /// Per job: paused spans (pause returned, resume called).
    paused: HashMap<String, Vec<(i64, i64)>>,
    /// Per job: the times deletes returned.
    deleted: HashMap<String, Vec<(i64, i64)>>,
    /// Per job: windows of trigger calls that failed (a firing may exist).
    uncertain: HashMap<String, Vec<(i64, i64)>>,
    /// Jobs with a call that may have been undone by a Redis SIGKILL.
    undone: BTreeSet<String>,
    /// Per job: call times of pauses and deletes (they drop unfinished firings).
    drops: HashMap<String, Vec<i64>>,
}

fn validate(spec: &keyfire::JobSpec, created_ms: i64) -> Option<Job> {
    spec.clone()
        .validate(&Validation {
            now_ms: created_ms,
            created_ms,
            known_handler: None,
            max_params_bytes: usize::MAX,
        })
        .ok()
}

fn doomed(job: &Job) -> bool {
    let p = &job.spec.params;
    let n = |k: &str| p[k].as_u64().unwrap_or(0);
    let max = u64::from(job.retry.max_attempts);
    n("fail") >= max || n("hang") >= max
}

impl<'a> Checker<'a> {
    fn new(w: &'a Workload, faults: &[FaultEvent]) -> Self {
        let mut outages: Vec<(i64, i64)> = faults
            .iter()
            .filter(|f| f.kind.is_outage())
            .map(|f| (f.start_ms, f.end_ms))
            .collect();
        outages.sort();
        let aof_windows = faults
            .iter()
            // A cluster master's SIGKILL loses what it had not yet sent its replica (async
            // replication, a shorter window than the AOF's).
            .filter(|f| matches!(f.kind, FaultKind::RedisKill | FaultKind::MasterKill))
            .map(|f| (f.start_ms - w.bounds.aof_loss_ms, f.start_ms))
            .collect();
        let mut wipes: Vec<(i64, i64)> = faults
            .iter()
            .filter(|f| f.kind == FaultKind::RedisEmpty)
            .map(|f| (f.start_ms, f.end_ms))
            .collect();
        wipes.sort();
        let mut params = HashMap::new();
        for op in &w.ops {
            match &op.kind {
                OpKind::Upsert { spec, v, .. } | OpKind::Enqueue { spec, v } => {
                    params.insert((op.job.clone(), *v), spec.params.clone());
                }
                _ => {}
            }
        }
        Self {
            w,
            b: w.bounds,
            outages,
            aof_windows,
            wipes,
            params,
            expects: BTreeMap::new(),
            paused: HashMap::new(),
            deleted: HashMap::new(),
            uncertain: HashMap::new(),
            undone: BTreeSet::new(),
            drops: HashMap::new(),
        }
    }

    fn in_aof_window(&self, t: i64) -> bool {
        self.aof_windows.iter().any(|(a, b)| t >= *a && t <= *b)
    }

    /// The first `redis_empty` fault that took what existed at `t` (a firing's instant, a
    /// task's add): its start.
    fn wiped_after(&self, t: i64) -> Option<i64> {
        self.wipes
            .iter()
            .map(|(start, _)| *start)
            .find(|start| t <= start + WIPE_SLACK_MS)
    }

    /// Whether the handler of `job` at version `v` fails or hangs on `attempt` by design (so
    /// another attempt follows it).
    fn fails_on(&self, job: &str, v: u64, attempt: u32) -> bool {
        self.params.get(&(job.to_string(), v)).is_some_and(|p| {
            let n = |k: &str| p[k].as_u64().unwrap_or(0);
            u64::from(attempt) <= n("fail").max(n("hang"))
        })
    }

    /// The latest a firing that became due at `ready` may be first claimed.
    fn deadline(&self, ready: i64) -> i64 {
        let mut d = ready + self.b.late_ms;
        loop {
            let mut moved = false;
            for &(a, e) in &self.outages {
                let until = e + self.b.recovery_ms;
                if a <= d && until > d && until > ready {
                    d = until;
                    moved = true;
                }
            }
            if !moved {
                return d;
            }
        }
    }

    fn add(&mut self, e: Expect) {
        let fid = firing_id(&e.job, e.instant);
        match self.expects.get_mut(&fid) {
            Some(old) => {
                old.versions.extend(e.versions);
                old.required |= e.required;
                if old.required {
                    old.why_optional = "";
                }
                old.deadline = old.deadline.max(e.deadline);
                old.ready = old.ready.max(e.ready);
                old.trigger |= e.trigger;
            }
            None => {
                self.expects.insert(fid, e);
            }
        }
    }

    /// The firings of `seg` up to `close_ret`; those whose deadline passed before `close_call`
    /// (and before the observation ended) are required; the others are optional, `why`.
    fn close(
        &mut self,
        name: &str,
        seg: Segment,
        (close_call, close_ret): (i64, i64),
        why: &'static str,
    ) {
        let job = &seg.job;
        let tolerance = job.misfire_tolerance_ms;
        let doomed = doomed(job);
        let skip = (job.misfire == MisfirePolicy::Skip).then_some(tolerance);
        let mut next = seg.first;
        let mut n = 0;
        let mut found = Vec::new();
        while let Some(t) = next {
            if t > close_ret || n >= 1_000_000 {
                break;
            }
            n += 1;
            let ready = t.max(seg.not_before);
            let deadline = self.deadline(ready);
            let misfire_candidate =
                job.misfire != MisfirePolicy::CatchUp && deadline - t > tolerance;
            let why_optional = if t > self.w.cutoff_ms {
                "after the cutoff"
            } else if misfire_candidate {
                "misfire candidate"
            } else if deadline >= close_call {
                why
            } else if deadline >= self.w.end_ms {
                "deadline after the end"
            } else {
                ""
            };
            let required = why_optional.is_empty();
            found.push(Expect {
                job: name.to_string(),
                instant: t,
                versions: BTreeSet::from([seg.v]),
                required,
                why_optional,
                ready,
                deadline,
                trigger: false,
                doomed,
                skip_tolerance: skip,
            });
            next = job.next_after(t);
        }
        for e in found {
            self.add(e);
        }
    }

    fn derive(&mut self) {
        const CHANGED: &str = "deadline after a change of its job";
        const LOST: &str = "deadline after Redis lost its data";
        let mut by_job: BTreeMap<&str, Vec<Step>> = BTreeMap::new();
        for op in &self.w.ops {
            by_job
                .entry(op.job.as_str())
                .or_default()
                .push(Step::Op(op));
            if self.in_aof_window(op.ret_ms) {
                self.undone.insert(op.job.clone());
            }
        }
        for (name, steps) in &mut by_job {
            // Redis's data loss is a step of every job that had a call before it. A call it
            // cut through (the harness makes none) may or may not have been undone.
            let first = steps.iter().map(Step::at).min().unwrap_or(i64::MAX);
            for &(start, _) in &self.wipes {
                if first < start {
                    steps.push(Step::Wipe(start));
                }
                if steps.iter().any(|s| match s {
                    Step::Op(op) => op.call_ms <= start + WIPE_SLACK_MS && op.ret_ms >= start,
                    Step::Wipe(_) => false,
                }) {
                    self.undone.insert(name.to_string());
                }
            }
            steps.sort_by_key(Step::at);
        }
        for (name, steps) in by_job {
            let mut cur: Option<Segment> = None;
            let mut spec: Option<(Job, u64)> = None;
            let mut paused_at: Option<i64> = None;
            let mut triggers: Vec<Expect> = Vec::new();
            for step in steps {
                let op = match step {
                    Step::Op(op) => op,
                    Step::Wipe(start) => {
                        // Gone: as if deleted at once, with its history and dead letters.
                        if let Some(seg) = cur.take() {
                            self.close(name, seg, (start, start + WIPE_SLACK_MS), LOST);
                        }
                        self.settle_triggers(&mut triggers, start, LOST);
                        self.drops.entry(name.into()).or_default().push(start);
                        if let Some(p) = paused_at.take() {
                            self.paused.entry(name.into()).or_default().push((p, start));
                        }
                        spec = None;
                        continue;
                    }
                };
                match &op.kind {
                    OpKind::Upsert {
                        spec: s,
                        v,
                        status,
                        next_ms,
                        created_ms,
                    } => {
                        if let Some(seg) = cur.take() {
                            self.close(name, seg, (op.call_ms, op.ret_ms), CHANGED);
                        }
                        let Some(job) = validate(s, *created_ms) else {
                            continue;
                        };
                        spec = Some((job.clone(), *v));
                        if *status == keyfire::store::JobStatus::Active {
                            cur = Some(Segment {
                                job,
                                v: *v,
                                first: *next_ms,
                                not_before: op.ret_ms,
                            });
                        }
                    }
                    OpKind::Enqueue { spec: s, v } => {
                        if let Some(seg) = cur.take() {
                            self.close(name, seg, (op.call_ms, op.ret_ms), CHANGED);
                        }
                        let Some(job) = validate(s, op.call_ms) else {
                            continue;
                        };
                        let first = job.first_firing(op.call_ms);
                        spec = Some((job.clone(), *v));
                        cur = Some(Segment {
                            job,
                            v: *v,
                            first,
                            not_before: op.ret_ms,
                        });
                    }
                    OpKind::Pause => {
                        if let Some(seg) = cur.take() {
                            self.close(name, seg, (op.call_ms, op.ret_ms), CHANGED);
                        }
                        self.settle_triggers(&mut triggers, op.call_ms, CHANGED);
                        self.drops.entry(name.into()).or_default().push(op.call_ms);
                        if paused_at.is_none() {
                            paused_at = Some(op.ret_ms);
                        }
                    }
                    OpKind::Resume { status, next_ms } => {
                        if let Some(p) = paused_at.take() {
                            self.paused
                                .entry(name.into())
                                .or_default()
                                .push((p, op.call_ms));
                        }
                        if *status == keyfire::store::JobStatus::Active
                            && let Some((job, v)) = &spec
                        {
                            cur = Some(Segment {
                                job: job.clone(),
                                v: *v,
                                first: *next_ms,
                                not_before: op.ret_ms,
                            });
                        }
                    }
                    OpKind::Delete { .. } => {
                        if let Some(seg) = cur.take() {
                            self.close(name, seg, (op.call_ms, op.ret_ms), CHANGED);
                        }
                        self.settle_triggers(&mut triggers, op.call_ms, CHANGED);
                        self.drops.entry(name.into()).or_default().push(op.call_ms);
                        if let Some(p) = paused_at.take() {
                            self.paused
                                .entry(name.into())
                                .or_default()
                                .push((p, op.call_ms));
                        }
                        self.deleted
                            .entry(name.into())
                            .or_default()
                            .push((op.call_ms, op.ret_ms));
                        spec = None;
                    }
                    // Nothing of a refused call was written.
                    OpKind::QueueAdd { .. } | OpKind::Refused { .. } => {}
                    OpKind::Trigger { firing } => match firing.as_deref().and_then(parse_firing_id)
                    {
                        Some((_, at)) => {
                            let (v, doomed_job, skip) = match &spec {
                                Some((job, v)) => (*v, doomed(job), None),
                                None => (0, false, None),
                            };
                            triggers.push(Expect {
                                job: name.to_string(),
                                instant: at,
                                versions: BTreeSet::from([v]),
                                required: false,
                                why_optional: "",
                                ready: at,
                                deadline: self.deadline(at),
                                trigger: true,
                                doomed: doomed_job,
                                skip_tolerance: skip,
                            });
                        }
                        None => self
                            .uncertain
                            .entry(name.into())
                            .or_default()
                            .push((op.call_ms, op.ret_ms)),
                    },
                }
            }
            if let Some(seg) = cur.take() {
                self.close(name, seg, (self.w.end_ms, self.w.end_ms), CHANGED);
            }
            if let Some(p) = paused_at.take() {
                self.paused
                    .entry(name.into())
                    .or_default()
                    .push((p, i64::MAX));
            }
            self.settle_triggers(&mut triggers, self.w.end_ms, CHANGED);
        }
    }

    /// Triggered firings are required when their deadline passed before `until` (a pause or
    /// delete drops a queued trigger, and so does Redis losing its data); else optional, `why`.
    fn settle_triggers(&mut self, triggers: &mut Vec<Expect>, until: i64, why: &'static str) {
        for mut e in triggers.drain(..) {
            e.why_optional = if e.instant > self.w.cutoff_ms {
                "after the cutoff"
            } else if e.deadline >= until {
                why
            } else if e.deadline >= self.w.end_ms {
                "deadline after the end"
            } else {
                ""
            };
            e.required = e.why_optional.is_empty();
            self.add(e);
        }
    }
}

/// One step of a job's life: a call of the workload, or Redis losing its data (at the start
/// of a `redis_empty` fault).
enum Step<'a> {
    Op(&'a Op),
    Wipe(i64),
}

impl Step<'_> {
    fn at(&self) -> i64 {
        match self {
            Step::Op(op) => op.call_ms,
            Step::Wipe(start) => *start,
        }
    }
}

/// A handler run: its start and, if written, its end.
struct Run<'a> {
    ev: &'a RunEvent,
    end: Option<&'a RunEvent>,
}

impl Run<'_> {
    fn ok(&self) -> bool {
        self.end.and_then(|e| e.outcome) == Some(Outcome::Ok)
    }
}

/// Check a round's history against its workload and faults.
pub fn check(workload: &Workload, history: &History, faults: &[FaultEvent]) -> Report {
    let mut c = Checker::new(workload, faults);
    c.derive();
    let runs = group_runs(history);
    let evidence = Evidence::new(&c, workload, history, faults, &runs);
    let mut f = Findings::new(workload, history, faults);
    evidence.check_runs(&mut f);
    evidence.check_expected_firings(&mut f);
    evidence.check_accepted_outcomes(&mut f);
    evidence.check_queue(&mut f);
    evidence.check_pauses(&mut f);
    evidence.check_node_logs(&mut f);
    evidence.check_leftovers(&mut f);
    evidence.sort(f)
}

/// The handler's runs, by run id: a start and, if written, its end.
fn group_runs(history: &History) -> BTreeMap<&str, Run<'_>> {
    let mut runs: BTreeMap<&str, Run> = BTreeMap::new();
    for e in &history.runs {
        match e.ev {
            Ev::Start => {
                runs.entry(e.run.as_str())
                    .and_modify(|r| r.ev = e)
                    .or_insert(Run { ev: e, end: None });
            }
            Ev::End => {
                runs.entry(e.run.as_str())
                    .and_modify(|r| r.end = Some(e))
                    .or_insert(Run {
                        ev: e,
                        end: Some(e),
                    });
            }
        }
    }
    runs
}

/// What a round left to judge, grouped for the checks: the handler's runs and keyfire's
/// records by firing, and what the workload expected. Each `check_*` method looks at one kind
/// of evidence and records what it finds in [`Findings`].
struct Evidence<'a> {
    c: &'a Checker<'a>,
    workload: &'a Workload,
    history: &'a History,
    faults: &'a [FaultEvent],
    runs: &'a BTreeMap<&'a str, Run<'a>>,
    by_firing: BTreeMap<&'a str, Vec<&'a Run<'a>>>,
    /// keyfire's run records by firing: what is left at the end, plus what deletes dropped.
    kf: BTreeMap<&'a str, Vec<&'a RunRecord>>,
    /// Firings in the dead letters (at the end, or dropped by a delete).
    dead: BTreeSet<&'a str>,
}

/// The report being built and the violations found so far.
struct Findings {
    report: Report,
    found: Vec<Violation>,
    /// Queue tasks with an event inside a window an AOF loss may have undone.
    queue_touched: BTreeSet<String>,
    /// Firings whose every attempt a fault cut off (see `Evidence::cut_by_a_fault`).
    attempts_used_by_faults: BTreeSet<String>,
}

/// One delay-queue task as the checker judges it: its add and the consumers' events.
struct QueueTask<'a> {
    /// `queue:<task id>`, as findings name it.
    key: String,
    due: i64,
    /// When it became due: its instant, or the add's return if later.
    ready: i64,
    /// The latest it may first become ready.
    deadline: i64,
    ttr_ms: i64,
    required: bool,
    /// Added before Redis lost its data: the start of that `redis_empty` fault.
    wiped: Option<i64>,
    /// Its state at the end.
    state: Option<&'a str>,
    /// Every consumer event, by reservation instant.
    events: Vec<&'a QueueEvent>,
    pops: Vec<&'a QueueEvent>,
    /// Accepted finishes.
    finishes: Vec<&'a QueueEvent>,
}

impl Findings {
    fn new(workload: &Workload, history: &History, faults: &[FaultEvent]) -> Self {
        let mut report = Report {
            seed: workload.seed,
            torn: history.torn,
            ..Report::default()
        };
        for f in faults {
            *report.faults.entry(f.kind).or_default() += 1;
        }
        report.refused = workload
            .ops
            .iter()
            .filter(|op| matches!(op.kind, OpKind::Refused { .. }))
            .count();
        Self {
            report,
            found: Vec::new(),
            queue_touched: BTreeSet::new(),
            attempts_used_by_faults: BTreeSet::new(),
        }
    }

    fn flag(&mut self, kind: ViolationKind, firing: &str, detail: String) {
        self.found.push(Violation {
            kind,
            firing: firing.to_string(),
            detail,
        });
    }
}

impl<'a> Evidence<'a> {
    fn new(
        c: &'a Checker<'a>,
        workload: &'a Workload,
        history: &'a History,
        faults: &'a [FaultEvent],
        runs: &'a BTreeMap<&'a str, Run<'a>>,
    ) -> Self {
        let mut by_firing: BTreeMap<&str, Vec<&Run>> = BTreeMap::new();
        for r in runs.values() {
            by_firing.entry(r.ev.firing.as_str()).or_default().push(r);
        }
        let mut kf: BTreeMap<&str, Vec<&RunRecord>> = BTreeMap::new();
        let mut dead: BTreeSet<&str> = BTreeSet::new();
        for records in history.keyfire_runs.values() {
            for r in records {
                kf.entry(r.firing_id.as_str()).or_default().push(r);
            }
        }
        for letters in history.dead.values() {
            for d in letters {
                dead.insert(d.firing_id.as_str());
            }
        }
        for op in &workload.ops {
            if let OpKind::Delete {
                runs,
                dead: letters,
            } = &op.kind
            {
                for r in runs {
                    kf.entry(r.firing_id.as_str()).or_default().push(r);
                }
                for d in letters {
                    dead.insert(d.firing_id.as_str());
                }
            }
        }
        Self {
            c,
            workload,
            history,
            faults,
            runs,
            by_firing,
            kf,
            dead,
        }
    }

    /// Each handler run: early, unexpected, of a stale version, past a `skip` tolerance, while
    /// paused, after a delete; and attempts started twice.
    fn check_runs(&self, f: &mut Findings) {
        // Per run.
        f.report.runs = self.runs.len();
        let mut per_attempt: BTreeMap<(&str, u32), usize> = BTreeMap::new();
        for r in self.runs.values() {
            let e = r.ev;
            if e.attempt > 1 {
                f.report.retries += 1;
            }
            match r.end.and_then(|e| e.outcome) {
                Some(Outcome::Failed) => {
                    *f.report.faults.entry(FaultKind::HandlerFail).or_default() += 1
                }
                Some(Outcome::Dropped) => {
                    *f.report.faults.entry(FaultKind::HandlerHang).or_default() += 1
                }
                _ => {}
            }
            *per_attempt
                .entry((e.firing.as_str(), e.attempt))
                .or_default() += 1;
            let Some((_, instant)) = parse_firing_id(&e.firing) else {
                f.flag(
                    ViolationKind::Unexpected,
                    &e.firing,
                    "not a firing id".into(),
                );
                continue;
            };
            let what = format!(
                "node {} attempt {} v{} claimed {} (instant {instant})",
                e.node, e.attempt, e.v, e.claimed_ms
            );
            if e.claimed_ms < instant {
                f.flag(
                    ViolationKind::Early,
                    &e.firing,
                    format!(
                        "claimed {} ms before its instant: {what}",
                        instant - e.claimed_ms
                    ),
                );
            }
            match self.c.expects.get(&e.firing) {
                None => {
                    let maybe = self
                        .c
                        .uncertain
                        .get(&e.job)
                        .is_some_and(|w| w.iter().any(|(a, z)| instant >= *a && instant <= *z));
                    if !maybe {
                        f.flag(
                            ViolationKind::Unexpected,
                            &e.firing,
                            format!("no schedule of the workload produces it: {what}"),
                        );
                    }
                }
                Some(x) => {
                    let stale = if e.attempt == 1 && !x.trigger {
                        !x.versions.contains(&e.v)
                    } else {
                        x.versions.first().is_some_and(|min| e.v < *min)
                    };
                    if stale {
                        f.flag(
                            ViolationKind::StaleVersion,
                            &e.firing,
                            format!("scheduled under v{:?}, ran with {what}", x.versions),
                        );
                    }
                    if let Some(tol) = x.skip_tolerance
                        && e.attempt == 1
                        && !x.trigger
                        && e.claimed_ms - instant > tol
                    {
                        f.flag(
                            ViolationKind::Misfire,
                            &e.firing,
                            format!(
                                "misfire = skip, tolerance {tol} ms, yet claimed {} ms late: {what}",
                                e.claimed_ms - instant
                            ),
                        );
                    }
                }
            }
            if let Some(spans) = self.c.paused.get(&e.job) {
                for (p, r) in spans {
                    if e.claimed_ms > *p && e.claimed_ms < *r {
                        f.flag(
                            ViolationKind::RanWhilePaused,
                            &e.firing,
                            format!("paused at {p} (returned), resumed at {r}: {what}"),
                        );
                    }
                }
            }
            if let Some(dels) = self.c.deleted.get(&e.job) {
                for (_, ret) in dels {
                    if instant <= *ret && e.claimed_ms > *ret {
                        f.flag(
                            ViolationKind::RanAfterDelete,
                            &e.firing,
                            format!("delete returned at {ret}: {what}"),
                        );
                    }
                }
            }
            // A firing of what Redis lost claimed after the loss: nothing of it was left.
            if let Some(lost) = self.c.wiped_after(instant)
                && e.claimed_ms > lost + WIPE_SLACK_MS
            {
                f.flag(
                    ViolationKind::RanAfterDelete,
                    &e.firing,
                    format!("Redis lost its data at {lost}: {what}"),
                );
            }
        }
        for ((firing, attempt), n) in &per_attempt {
            if *n > 1 {
                f.flag(
                    ViolationKind::DoubleClaim,
                    firing,
                    format!("attempt {attempt} started {n} times"),
                );
            }
        }
    }

    /// Each firing the workload expected: late, missed, lost, or succeeded without keyfire
    /// recording it; and the lateness figures.
    fn check_expected_firings(&self, f: &mut Findings) {
        // Per expected firing.
        f.report.firings = self.c.expects.len();
        for (fid, x) in &self.c.expects {
            if x.required {
                f.report.required += 1;
            } else {
                *f.report
                    .optional
                    .entry(x.why_optional.to_string())
                    .or_default() += 1;
            }
            let rs: &[&Run] = self
                .by_firing
                .get(fid.as_str())
                .map_or(&[], |v| v.as_slice());
            let records: &[&RunRecord] = self.kf.get(fid.as_str()).map_or(&[], |v| v.as_slice());
            let is_dead = self.dead.contains(fid.as_str());
            let oks = rs.iter().filter(|r| r.ok()).count();
            if oks > 1 {
                f.report.reruns += 1;
            }
            // Lateness of the first claim.
            if let Some(first) = rs
                .iter()
                .filter(|r| r.ev.attempt == 1)
                .map(|r| r.ev.claimed_ms)
                .min()
            {
                let late = first - x.ready;
                let mut kinds: BTreeSet<&str> = self
                    .faults
                    .iter()
                    .filter(|f| {
                        f.start_ms <= first
                            && f.end_ms + self.workload.bounds.late_ms >= x.instant - 1_000
                    })
                    .map(|f| f.kind.name())
                    .collect();
                if kinds.is_empty() {
                    kinds.insert("none");
                }
                for k in kinds {
                    let l = f.report.lateness.entry(k.to_string()).or_default();
                    l.firings += 1;
                    l.worst_ms = l.worst_ms.max(late);
                }
                if first > x.deadline {
                    f.flag(
                        ViolationKind::Late,
                        fid,
                        format!(
                            "first claimed at {first}, {late} ms after it was due at {}; deadline {}",
                            x.ready, x.deadline
                        ),
                    );
                }
            }
            let dropped_later = self
                .c
                .drops
                .get(&x.job)
                .is_some_and(|d| d.iter().any(|t| *t > x.instant));
            if x.required && rs.is_empty() && records.is_empty() && !is_dead {
                f.flag(
                    ViolationKind::Missed,
                    fid,
                    format!(
                        "required (due {}, deadline {}), never ran",
                        x.ready, x.deadline
                    ),
                );
            } else if x.required && !dropped_later {
                if x.doomed {
                    if !is_dead {
                        f.flag(
                            ViolationKind::Lost,
                            fid,
                            format!(
                                "fails every attempt, yet not in the dead letters ({} runs)",
                                rs.len()
                            ),
                        );
                    }
                } else if oks == 0 {
                    let why = if is_dead {
                        "ended in the dead letters"
                    } else {
                        "no run succeeded"
                    };
                    if is_dead && !rs.is_empty() && rs.iter().all(|r| self.cut_by_a_fault(r)) {
                        f.attempts_used_by_faults.insert(fid.to_string());
                    }
                    f.flag(
                        ViolationKind::Lost,
                        fid,
                        format!("{why} ({} runs, {} records)", rs.len(), records.len()),
                    );
                }
            }
            // keyfire must have recorded the outcome of a firing that succeeded (history of jobs
            // never deleted: a delete drops the history).
            let known = self.history.keyfire_runs.contains_key(&x.job)
                && !self.c.deleted.contains_key(&x.job)
                // Redis lost the records of what it lost.
                && self.c.wiped_after(x.instant).is_none();
            if known && oks > 0 && x.instant <= self.workload.cutoff_ms {
                let accepted = records.iter().any(|r| r.outcome == "ok");
                if !accepted && !is_dead && !dropped_later {
                    f.flag(
                        ViolationKind::Unrecorded,
                        fid,
                        format!(
                            "the handler succeeded {oks} times; keyfire holds {} records, none ok",
                            records.len()
                        ),
                    );
                }
            }
        }
    }

    /// Two successful outcomes accepted by keyfire for one firing.
    fn check_accepted_outcomes(&self, f: &mut Findings) {
        // Two successful completions accepted by keyfire.
        for (fid, records) in &self.kf {
            let mut seen = BTreeSet::new();
            let oks: Vec<&&RunRecord> = records
                .iter()
                .filter(|r| r.outcome == "ok")
                // A delete snapshot and the final history may hold the same record.
                .filter(|r| seen.insert((r.attempt, r.node.clone(), r.claimed_ms)))
                .collect();
            if oks.len() > 1 {
                let who: Vec<String> = oks
                    .iter()
                    .map(|r| format!("{}#{}", r.node, r.attempt))
                    .collect();
                f.flag(
                    ViolationKind::Doubled,
                    fid,
                    format!(
                        "keyfire accepted {} ok outcomes: {}",
                        oks.len(),
                        who.join(", ")
                    ),
                );
            }
        }
    }

    /// Delay-queue tasks, one method per kind of finding over the same evidence
    /// ([`QueueTask`]): delivered only once due and in time, each delivery number given once,
    /// never again within a reservation's ttr, finished once and never delivered after, and
    /// none lost.
    fn check_queue(&self, f: &mut Findings) {
        let tasks = self.queue_tasks();
        f.report.queue_tasks += tasks.len();
        for t in &tasks {
            f.report.deliveries += t.pops.len();
            if t.events
                .iter()
                .any(|e| self.c.in_aof_window(e.at_ms) || self.c.in_aof_window(e.reserved_ms))
                || self.c.in_aof_window(t.due)
            {
                f.queue_touched.insert(t.key.clone());
            }
            Self::queue_early(t, f);
            Self::queue_late(t, f);
            Self::queue_delivery_given_twice(t, f);
            Self::queue_within_ttr(t, f);
            Self::queue_finished_twice(t, f);
            Self::queue_delivered_after_finish(t, f);
            Self::queue_delivered_after_loss(t, f);
            Self::queue_missed_or_lost(t, f);
        }
        // Deliveries of tasks no accepted add produced (one refused as full must not exist).
        let added: BTreeSet<&str> = self
            .workload
            .ops
            .iter()
            .filter(|op| matches!(op.kind, OpKind::QueueAdd { .. }))
            .map(|op| op.job.as_str())
            .collect();
        let mut unknown: BTreeMap<&str, usize> = BTreeMap::new();
        for e in self.history.queue.iter().filter(|e| e.ev == QueueEv::Pop) {
            if !added.contains(e.task.as_str()) {
                *unknown.entry(e.task.as_str()).or_default() += 1;
            }
        }
        for (task, n) in unknown {
            let refused = self.workload.ops.iter().any(|op| {
                op.job == task
                    && matches!(&op.kind, OpKind::Refused { call, .. } if call == "queue_add")
            });
            f.flag(
                ViolationKind::Unexpected,
                &format!("queue:{task}"),
                format!(
                    "delivered {n} times, yet no accepted add produced it{}",
                    if refused {
                        " (its add was refused: Redis was full)"
                    } else {
                        ""
                    }
                ),
            );
        }
    }

    /// Each task the workload added, with what the consumers did with it.
    fn queue_tasks(&self) -> Vec<QueueTask<'a>> {
        let mut qev: BTreeMap<&str, Vec<&QueueEvent>> = BTreeMap::new();
        for e in &self.history.queue {
            qev.entry(e.task.as_str()).or_default().push(e);
        }
        let mut out = Vec::new();
        for op in &self.workload.ops {
            let OpKind::QueueAdd { due_ms, ttr_ms, .. } = &op.kind else {
                continue;
            };
            let due = *due_ms;
            let ready = due.max(op.ret_ms);
            let deadline = self.c.deadline(ready);
            // Lost with Redis's data unless it was due (and late) before the loss.
            let wiped = self.c.wiped_after(op.call_ms);
            let mut events = qev.remove(op.job.as_str()).unwrap_or_default();
            events.sort_by_key(|e| (e.reserved_ms, e.at_ms));
            let pops: Vec<&QueueEvent> = events
                .iter()
                .copied()
                .filter(|e| e.ev == QueueEv::Pop)
                .collect();
            let finishes: Vec<&QueueEvent> = events
                .iter()
                .copied()
                .filter(|e| e.ev == QueueEv::FinishOk)
                .collect();
            out.push(QueueTask {
                key: format!("queue:{}", op.job),
                due,
                ready,
                deadline,
                ttr_ms: *ttr_ms,
                required: due <= self.workload.cutoff_ms
                    && deadline < self.workload.end_ms
                    && wiped.is_none_or(|lost| deadline < lost),
                wiped,
                state: self.history.queue_states.get(&op.job).map(String::as_str),
                events,
                pops,
                finishes,
            });
        }
        out
    }

    /// `early`: reserved, or made ready, before its instant (Redis time).
    fn queue_early(t: &QueueTask, f: &mut Findings) {
        for p in &t.pops {
            if p.reserved_ms < t.due || p.ready_ms < t.due {
                f.flag(
                    ViolationKind::Early,
                    &t.key,
                    format!(
                        "due {}, made ready at {} and reserved at {} by {}",
                        t.due, p.ready_ms, p.reserved_ms, p.consumer
                    ),
                );
            }
        }
    }

    /// `late`: first made ready after its deadline. Judged on the first delivery only (a
    /// redelivery's ready instant is when its reservation was taken back); a first delivery
    /// whose record a consumer SIGKILL lost leaves nothing to judge.
    fn queue_late(t: &QueueTask, f: &mut Findings) {
        let Some(first) = t
            .pops
            .iter()
            .filter(|p| p.deliveries == 1)
            .map(|p| p.ready_ms)
            .min()
        else {
            return;
        };
        let late = first - t.ready;
        let l = f.report.lateness.entry("queue".into()).or_default();
        l.firings += 1;
        l.worst_ms = l.worst_ms.max(late);
        if first > t.deadline {
            f.flag(
                ViolationKind::Late,
                &t.key,
                format!(
                    "made ready at {first}, {late} ms after it was due at {}",
                    t.ready
                ),
            );
        }
    }

    /// `double_claim`: one delivery number given to two pops (two reservations at once).
    fn queue_delivery_given_twice(t: &QueueTask, f: &mut Findings) {
        let mut numbers: BTreeMap<u32, usize> = BTreeMap::new();
        for p in &t.pops {
            *numbers.entry(p.deliveries).or_default() += 1;
        }
        for (n, k) in numbers {
            if k > 1 {
                f.flag(
                    ViolationKind::DoubleClaim,
                    &t.key,
                    format!("delivery {n} given {k} times"),
                );
            }
        }
    }

    /// `within_ttr`: delivered again before the previous reservation's ttr ran out (no
    /// consumer of a round extends a reservation, so its deadline is its pop plus the ttr).
    fn queue_within_ttr(t: &QueueTask, f: &mut Findings) {
        if t.ttr_ms <= 0 {
            return;
        }
        for w in t.pops.windows(2) {
            let (a, b) = (w[0], w[1]);
            if b.reserved_ms < a.reserved_ms + t.ttr_ms {
                f.flag(
                    ViolationKind::WithinTtr,
                    &t.key,
                    format!(
                        "delivery {} to {} at {}, delivery {} to {} at {}: {} ms apart, ttr {} ms",
                        a.deliveries,
                        a.consumer,
                        a.reserved_ms,
                        b.deliveries,
                        b.consumer,
                        b.reserved_ms,
                        b.reserved_ms - a.reserved_ms,
                        t.ttr_ms
                    ),
                );
            }
        }
    }

    /// `doubled`: two finishes accepted (fencing lets one reservation's finish through).
    fn queue_finished_twice(t: &QueueTask, f: &mut Findings) {
        if t.finishes.len() > 1 {
            let who: Vec<String> = t
                .finishes
                .iter()
                .map(|e| format!("{}#{}", e.consumer, e.deliveries))
                .collect();
            f.flag(
                ViolationKind::Doubled,
                &t.key,
                format!("{} finishes accepted: {}", t.finishes.len(), who.join(", ")),
            );
        }
    }

    /// `redelivered_after_finish`: popped again after a finish was accepted.
    fn queue_delivered_after_finish(t: &QueueTask, f: &mut Findings) {
        let Some(done) = t.finishes.iter().map(|e| e.at_ms).min() else {
            return;
        };
        for p in t.pops.iter().filter(|p| p.reserved_ms > done) {
            f.flag(
                ViolationKind::RedeliveredAfterFinish,
                &t.key,
                format!(
                    "finished at {done}, delivered again (#{}) at {} to {}",
                    p.deliveries, p.reserved_ms, p.consumer
                ),
            );
        }
    }

    /// `ran_after_delete`: reserved after Redis lost its data (the task went with it).
    fn queue_delivered_after_loss(t: &QueueTask, f: &mut Findings) {
        let Some(lost) = t.wiped else {
            return;
        };
        for p in t
            .pops
            .iter()
            .filter(|p| p.reserved_ms > lost + WIPE_SLACK_MS)
        {
            f.flag(
                ViolationKind::RanAfterDelete,
                &t.key,
                format!(
                    "Redis lost its data at {lost}, yet delivered (#{}) at {} to {}",
                    p.deliveries, p.reserved_ms, p.consumer
                ),
            );
        }
    }

    /// `missed`: a required task never delivered; `lost`: delivered, but neither finished
    /// nor done or dead at the end (not judged for a task Redis lost: a reservation it held
    /// went with it).
    fn queue_missed_or_lost(t: &QueueTask, f: &mut Findings) {
        if !t.required {
            return;
        }
        let (due, deadline, state) = (t.due, t.deadline, t.state);
        if t.pops.is_empty() {
            f.flag(
                ViolationKind::Missed,
                &t.key,
                format!("due {due} (deadline {deadline}), never delivered; state {state:?}"),
            );
        } else if t.finishes.is_empty()
            && !matches!(state, Some("done" | "dead"))
            && t.wiped.is_none()
        {
            f.flag(
                ViolationKind::Lost,
                &t.key,
                format!(
                    "delivered {} times, never finished; state {state:?}",
                    t.pops.len()
                ),
            );
        }
    }

    /// `rerun_after_pause`: a node paused for less than `node_ttl` keeps its runs. A run in
    /// flight on it during the pause must get no next attempt unless its handler failed (or
    /// was meant to fail or hang on that attempt), or another fault that takes runs away (its
    /// node killed, stopped, cut off or restarted; Redis paused, restarted or emptied) came
    /// between its claim and the next attempt's.
    fn check_pauses(&self, f: &mut Findings) {
        let mut flagged: BTreeSet<&str> = BTreeSet::new();
        for p in self
            .faults
            .iter()
            .filter(|p| p.kind == FaultKind::NodePause)
        {
            let Some(node) = p.node.as_deref() else {
                continue;
            };
            for r in self.runs.values() {
                let e = r.ev;
                let in_flight = e.node == node
                    && e.at_ms <= p.end_ms
                    && r.end.is_none_or(|end| end.at_ms >= p.start_ms);
                if !in_flight
                    || flagged.contains(e.firing.as_str())
                    || r.end.and_then(|end| end.outcome) == Some(Outcome::Failed)
                    || self.c.fails_on(&e.job, e.v, e.attempt)
                {
                    continue;
                }
                let Some(next) = self
                    .by_firing
                    .get(e.firing.as_str())
                    .into_iter()
                    .flatten()
                    .filter(|n| n.ev.attempt > e.attempt && n.ev.claimed_ms >= p.start_ms)
                    .min_by_key(|n| n.ev.claimed_ms)
                else {
                    continue;
                };
                let explained = self.faults.iter().any(|o| {
                    let hits = match o.kind {
                        FaultKind::NodeKill
                        | FaultKind::NodeStop
                        | FaultKind::CutDrop
                        | FaultKind::CutStall
                        | FaultKind::ClockSkew => o.node.as_deref() == Some(node),
                        k => k.is_outage(),
                    };
                    hits && o.start_ms <= next.ev.claimed_ms
                        && o.end_ms + NOTICED_WITHIN_MS >= e.claimed_ms
                });
                if explained {
                    continue;
                }
                flagged.insert(e.firing.as_str());
                let ended = match r.end {
                    Some(end) => format!(
                        "{} at {}",
                        end.outcome
                            .map_or("ended".into(), |o| format!("{o:?}").to_lowercase()),
                        end.at_ms
                    ),
                    None => "no end recorded".into(),
                };
                f.flag(
                    ViolationKind::RerunAfterPause,
                    &e.firing,
                    format!(
                        "attempt {} on {node} (claimed {}, {ended}) was running through its \
                         {} ms pause from {}; attempt {} claimed at {} on {}",
                        e.attempt,
                        e.claimed_ms,
                        p.end_ms - p.start_ms,
                        p.start_ms,
                        next.ev.attempt,
                        next.ev.claimed_ms,
                        next.ev.node
                    ),
                );
            }
        }
        f.report.pause_reruns = flagged.len();
    }

    /// What the nodes logged: every `redis_empty` fault noticed by at least one node, no data
    /// loss logged without one (`false_data_loss`), and no node fenced while Redis was full
    /// unless another fault held it or Redis.
    fn check_node_logs(&self, f: &mut Findings) {
        let log = &self.history.node_log;
        let losses: Vec<_> = log
            .iter()
            .filter(|e| e.what == NodeLogKind::DataLoss)
            .collect();
        f.report.data_losses_logged = losses.len();
        let empties: Vec<&FaultEvent> = self
            .faults
            .iter()
            .filter(|x| x.kind == FaultKind::RedisEmpty)
            .collect();
        for w in &empties {
            let noticed = losses
                .iter()
                .filter(|e| e.at_ms >= w.start_ms && e.at_ms <= w.end_ms + LOSS_LOGGED_WITHIN_MS)
                .count();
            if noticed == 0 {
                f.flag(
                    ViolationKind::UnnoticedDataLoss,
                    &format!("redis_empty@{}", w.start_ms),
                    format!(
                        "Redis lost its data at {} ({}); no node logged it by {}",
                        w.start_ms,
                        w.detail,
                        w.end_ms + LOSS_LOGGED_WITHIN_MS
                    ),
                );
            }
        }
        for e in &losses {
            let explained = empties
                .iter()
                .any(|w| e.at_ms >= w.start_ms && e.at_ms <= w.end_ms + LOSS_LOGGED_WITHIN_MS);
            if !explained {
                f.flag(
                    ViolationKind::FalseDataLoss,
                    &format!("node:{}", e.node),
                    format!(
                        "logged at {} that Redis lost keyfire's data; it had not",
                        e.at_ms
                    ),
                );
            }
        }
        for e in log.iter().filter(|e| e.what == NodeLogKind::Fenced) {
            let Some(full) = self.faults.iter().find(|x| {
                x.kind == FaultKind::RedisFull
                    && e.at_ms >= x.start_ms
                    && e.at_ms <= x.end_ms + NOTICED_WITHIN_MS
            }) else {
                continue;
            };
            let explained = self.faults.iter().any(|o| {
                let hits = match o.kind {
                    FaultKind::NodeKill
                    | FaultKind::NodeStop
                    | FaultKind::NodePause
                    | FaultKind::CutDrop
                    | FaultKind::CutStall
                    | FaultKind::ClockSkew => o.node.as_deref() == Some(e.node.as_str()),
                    k => k.is_outage(),
                };
                hits && e.at_ms >= o.start_ms && e.at_ms <= o.end_ms + NOTICED_WITHIN_MS
            });
            if !explained {
                f.flag(
                    ViolationKind::FencedWhileFull,
                    &format!("node:{}", e.node),
                    format!(
                        "fenced itself at {} while Redis was full ({}..{}: {})",
                        e.at_ms, full.start_ms, full.end_ms, full.detail
                    ),
                );
            }
        }
    }

    /// Runs or queued attempts still there after the drain.
    fn check_leftovers(&self, f: &mut Findings) {
        for l in &self.history.leftovers {
            f.flag(
                ViolationKind::Stuck,
                l,
                "still running or queued after the drain".into(),
            );
        }
    }

    /// Whether a fault cut this run off: it did not return by itself (cancelled, dropped, or
    /// no end: its node died) and it ended, or its node stopped, while a fault that takes
    /// runs away held its node (killed, stopped, cut off) or Redis (paused, restarted). A
    /// cut-off run is taken over as the next attempt, so enough of them in a row use up the
    /// attempts and the firing goes to the dead letters, as designed.
    fn cut_by_a_fault(&self, r: &Run) -> bool {
        let outcome = r.end.and_then(|e| e.outcome);
        if matches!(outcome, Some(Outcome::Ok | Outcome::Failed)) {
            return false;
        }
        let ended = r.end.map(|e| e.at_ms);
        self.faults.iter().any(|f| {
            let hits = match f.kind {
                FaultKind::NodeKill
                | FaultKind::NodeStop
                | FaultKind::CutDrop
                | FaultKind::CutStall => f.node.as_deref() == Some(r.ev.node.as_str()),
                k => k.is_outage(),
            };
            hits && f.start_ms >= r.ev.claimed_ms - NOTICED_WITHIN_MS
                && match ended {
                    Some(t) => f.start_ms <= t && t <= f.end_ms + NOTICED_WITHIN_MS,
                    // No end: its node died; a kill or stop of that node after the claim.
                    None => f.node.as_deref() == Some(r.ev.node.as_str()),
                }
        })
    }

    /// Sort the findings into violations and exemptions (a fault that explains them).
    fn sort(&self, f: Findings) -> Report {
        let Findings {
            mut report,
            found,
            queue_touched,
            attempts_used_by_faults,
        } = f;
        // Sort findings into violations and exemptions.
        for v in found {
            let job = parse_firing_id(&v.firing).map_or(v.firing.as_str(), |(j, _)| j);
            let touched = || {
                let instant = parse_firing_id(&v.firing).map(|(_, t)| t);
                instant.is_some_and(|t| self.c.in_aof_window(t))
                    || self.by_firing.get(v.firing.as_str()).is_some_and(|rs| {
                        rs.iter().any(|r| {
                            self.c.in_aof_window(r.ev.claimed_ms)
                                || r.end.is_some_and(|e| self.c.in_aof_window(e.at_ms))
                        })
                    })
                    || self.kf.get(v.firing.as_str()).is_some_and(|rs| {
                        rs.iter().any(|r| {
                            self.c.in_aof_window(r.claimed_ms)
                                || r.finished_ms.is_some_and(|t| self.c.in_aof_window(t))
                        })
                    })
            };
            let exempt = (v.kind.aof_explainable()
                && (touched() || queue_touched.contains(&v.firing)))
                || (v.kind.op_explainable() && self.c.undone.contains(job))
                || (v.kind == ViolationKind::Lost && attempts_used_by_faults.contains(&v.firing));
            if exempt {
                report.exempt.push(v);
            } else {
                report.violations.push(v);
            }
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::model::Op;
    use crate::chaos::record::Outcome;
    use keyfire::job::JobSpec;
    use keyfire::store::{DeadLetter, JobStatus};

    const T0: i64 = 1_700_000_000_000;

    fn workload(ops: Vec<Op>) -> Workload {
        Workload {
            seed: 7,
            start_ms: T0,
            cutoff_ms: T0 + 10_000,
            end_ms: T0 + 20_000,
            bounds: Bounds::for_settings(1_000, 1_000, 500),
            ops,
        }
    }

    fn every_second(id: &str) -> Op {
        let spec = JobSpec::every(id, "1s", "chaos").params(serde_json::json!({"v": 1}));
        Op {
            job: id.into(),
            call_ms: T0,
            ret_ms: T0 + 2,
            kind: OpKind::Upsert {
                spec,
                v: 1,
                status: JobStatus::Active,
                next_ms: Some(T0 + 1_000),
                created_ms: T0,
            },
        }
    }

    fn ev(
        firing: &str,
        attempt: u32,
        claimed: i64,
        node: &str,
        end: Option<Outcome>,
    ) -> Vec<RunEvent> {
        let (job, instant) = parse_firing_id(firing).unwrap();
        let start = RunEvent {
            ev: Ev::Start,
            run: format!("{node}/1/{firing}/{attempt}/{claimed}"),
            node: node.into(),
            job: job.into(),
            firing: firing.into(),
            scheduled_ms: instant,
            claimed_ms: claimed,
            attempt,
            v: 1,
            at_ms: claimed + 1,
            outcome: None,
        };
        let mut out = vec![start.clone()];
        if let Some(o) = end {
            out.push(RunEvent {
                ev: Ev::End,
                at_ms: claimed + 5,
                outcome: Some(o),
                ..start
            });
        }
        out
    }

    fn record(firing: &str, attempt: u32, node: &str, outcome: &str, claimed: i64) -> RunRecord {
        let (_, instant) = parse_firing_id(firing).unwrap();
        RunRecord {
            firing_id: firing.into(),
            scheduled_ms: instant,
            attempt,
            node: node.into(),
            claimed_ms: claimed,
            started_ms: claimed,
            outcome: outcome.into(),
            error: None,
            finished_ms: Some(claimed + 5),
            fate: Some("done".into()),
            retry_at_ms: None,
        }
    }

    /// A clean history of job `j` (every second from T0+1 s): every firing up to the end runs
    /// once, 20 ms late, and keyfire records it.
    fn clean() -> History {
        let mut h = History::default();
        let mut records = Vec::new();
        for k in 1..=20 {
            let at = T0 + k * 1_000;
            let fid = firing_id("j", at);
            h.runs.extend(ev(&fid, 1, at + 20, "n1", Some(Outcome::Ok)));
            records.push(record(&fid, 1, "n1", "ok", at + 20));
        }
        h.keyfire_runs.insert("j".into(), records);
        h
    }

    #[test]
    fn a_clean_history_passes() {
        let r = check(&workload(vec![every_second("j")]), &clean(), &[]);
        assert!(r.ok(), "{r}");
        assert_eq!(r.required, 10, "{r}");
        assert_eq!(r.lateness["none"].worst_ms, 20);
    }

    /// A planted double, a planted miss and an early run are reported as such.
    #[test]
    fn planted_double_miss_and_early_run_are_reported() {
        let mut h = clean();
        let miss = firing_id("j", T0 + 3_000);
        let double = firing_id("j", T0 + 5_000);
        let early = firing_id("j", T0 + 7_000);
        h.runs.retain(|e| e.firing != miss && e.firing != early);
        let records = h.keyfire_runs.get_mut("j").unwrap();
        records.retain(|r| r.firing_id != miss && r.firing_id != early);
        // The double: a second node ran attempt 2 and keyfire accepted both outcomes.
        h.runs
            .extend(ev(&double, 2, T0 + 8_000, "n2", Some(Outcome::Ok)));
        records.push(record(&double, 2, "n2", "ok", T0 + 8_000));
        // The early run: claimed 300 ms before its instant.
        h.runs
            .extend(ev(&early, 1, T0 + 6_700, "n3", Some(Outcome::Ok)));
        records.push(record(&early, 1, "n3", "ok", T0 + 6_700));

        let r = check(&workload(vec![every_second("j")]), &h, &[]);
        assert_eq!(r.count(ViolationKind::Missed), 1, "{r}");
        assert_eq!(r.count(ViolationKind::Doubled), 1, "{r}");
        assert_eq!(r.count(ViolationKind::Early), 1, "{r}");
        assert_eq!(r.violations.len(), 3, "{r}");
        let of = |k| {
            r.violations
                .iter()
                .find(|v| v.kind == k)
                .unwrap()
                .firing
                .clone()
        };
        assert_eq!(of(ViolationKind::Missed), miss);
        assert_eq!(of(ViolationKind::Doubled), double);
        assert_eq!(of(ViolationKind::Early), early);
    }

    /// A takeover whose first run also succeeded (its outcome was fenced) is at-least-once,
    /// not a double; the same attempt started twice is.
    #[test]
    fn a_fenced_rerun_is_allowed_but_a_repeated_attempt_is_not() {
        let mut h = clean();
        let fid = firing_id("j", T0 + 4_000);
        h.runs
            .extend(ev(&fid, 2, T0 + 7_000, "n2", Some(Outcome::Ok)));
        let r = check(&workload(vec![every_second("j")]), &h, &[]);
        assert!(r.ok(), "{r}");
        assert_eq!(r.reruns, 1);
        h.runs
            .extend(ev(&fid, 2, T0 + 7_500, "n3", Some(Outcome::Ok)));
        let r = check(&workload(vec![every_second("j")]), &h, &[]);
        assert_eq!(r.count(ViolationKind::DoubleClaim), 1, "{r}");
    }

    /// Runs claimed after a pause or delete returned are reported; a Redis SIGKILL exempts a
    /// double whose claim fell in the AOF loss window, and nothing else.
    #[test]
    fn pauses_deletes_and_the_aof_exemption() {
        let pause = Op {
            job: "j".into(),
            call_ms: T0 + 4_500,
            ret_ms: T0 + 4_510,
            kind: OpKind::Pause,
        };
        let delete = Op {
            job: "j".into(),
            call_ms: T0 + 6_500,
            ret_ms: T0 + 6_510,
            kind: OpKind::Delete {
                runs: vec![],
                dead: vec![],
            },
        };
        let mut h = clean();
        h.keyfire_runs.clear();
        h.runs.retain(|e| e.scheduled_ms <= T0 + 4_000);
        let paused_run = firing_id("j", T0 + 4_000);
        h.runs
            .extend(ev(&paused_run, 2, T0 + 5_000, "n2", Some(Outcome::Ok)));
        let r = check(&workload(vec![every_second("j"), pause.clone()]), &h, &[]);
        assert_eq!(r.count(ViolationKind::RanWhilePaused), 1, "{r}");
        assert_eq!(r.violations.len(), 1, "{r}");

        h.runs
            .extend(ev(&paused_run, 3, T0 + 7_000, "n3", Some(Outcome::Ok)));
        let r = check(&workload(vec![every_second("j"), pause, delete]), &h, &[]);
        assert_eq!(r.count(ViolationKind::RanAfterDelete), 1, "{r}");

        // A double whose first claim fell within the AOF window of a Redis SIGKILL is exempt.
        let mut h = clean();
        let fid = firing_id("j", T0 + 2_000);
        h.keyfire_runs
            .get_mut("j")
            .unwrap()
            .push(record(&fid, 1, "n2", "ok", T0 + 3_000));
        h.runs
            .extend(ev(&fid, 1, T0 + 3_000, "n2", Some(Outcome::Ok)));
        let kill = FaultEvent {
            kind: FaultKind::RedisKill,
            node: None,
            start_ms: T0 + 2_500,
            end_ms: T0 + 2_900,
            detail: String::new(),
        };
        let r = check(
            &workload(vec![every_second("j")]),
            &h,
            std::slice::from_ref(&kill),
        );
        assert!(r.ok(), "{r}");
        assert_eq!(r.exempt.len(), 2, "double claim and double: {r}");
        // The same double far from the kill is not.
        let far = FaultEvent {
            start_ms: T0 + 9_500,
            end_ms: T0 + 9_900,
            ..kill
        };
        let r = check(&workload(vec![every_second("j")]), &h, &[far]);
        assert_eq!(r.count(ViolationKind::Doubled), 1, "{r}");
    }

    /// A firing whose every attempt a fault cut off, dead-lettered once its attempts were used
    /// up, is exempt from `lost`; the same firing with an attempt no fault explains is not.
    #[test]
    fn attempts_used_up_by_faults_are_exempt_from_lost() {
        let mut h = clean();
        let fid = firing_id("j", T0 + 2_000);
        h.runs.retain(|e| e.firing != fid);
        h.keyfire_runs
            .get_mut("j")
            .unwrap()
            .retain(|r| r.firing_id != fid);
        // Attempt 1 cancelled during a Redis pause, attempt 2 on n2 while n2 was stopped,
        // attempt 3 during a Redis restart.
        h.runs
            .extend(ev(&fid, 1, T0 + 2_010, "n1", Some(Outcome::Cancelled)));
        h.runs
            .extend(ev(&fid, 2, T0 + 5_010, "n2", Some(Outcome::Cancelled)));
        h.runs
            .extend(ev(&fid, 3, T0 + 8_010, "n3", Some(Outcome::Cancelled)));
        h.dead.insert(
            "j".into(),
            vec![DeadLetter {
                firing_id: fid.clone(),
                job_id: "j".into(),
                scheduled_ms: T0 + 2_000,
                attempts: 3,
                error: None,
                failed_ms: T0 + 9_000,
            }],
        );
        let fault = |kind, node: Option<&str>, start: i64| FaultEvent {
            kind,
            node: node.map(String::from),
            start_ms: T0 + start,
            end_ms: T0 + start + 500,
            detail: String::new(),
        };
        let faults = [
            fault(FaultKind::ClientPause, None, 2_012),
            fault(FaultKind::NodeStop, Some("n2"), 5_012),
            fault(FaultKind::RedisTerm, None, 8_012),
        ];
        let w = workload(vec![every_second("j")]);
        let r = check(&w, &h, &faults);
        assert!(r.ok(), "{r}");
        assert_eq!(r.exempt.len(), 1, "{r}");
        assert_eq!(r.exempt[0].kind, ViolationKind::Lost);
        // The stop hit another node: attempt 2 is not explained, so the loss is a violation.
        let r = check(
            &w,
            &h,
            &[
                faults[0].clone(),
                fault(FaultKind::NodeStop, Some("n1"), 5_012),
                faults[2].clone(),
            ],
        );
        assert_eq!(r.count(ViolationKind::Lost), 1, "{r}");
    }

    fn qadd(id: &str, due: i64) -> Op {
        Op {
            job: id.into(),
            call_ms: T0,
            ret_ms: T0 + 2,
            kind: OpKind::QueueAdd {
                topic: "chaos".into(),
                due_ms: due,
                ttr_ms: 2_000,
            },
        }
    }

    fn qev(ev: QueueEv, task: &str, n: u32, due: i64, reserved: i64, at: i64) -> QueueEvent {
        QueueEvent {
            ev,
            task: task.into(),
            consumer: "c1".into(),
            deliveries: n,
            due_ms: due,
            ready_ms: due.min(reserved),
            reserved_ms: reserved,
            at_ms: at,
        }
    }

    /// Delay-queue tasks: a clean one passes; an early delivery, two accepted finishes, a
    /// task never delivered, one delivered after its finish and one delivered again within
    /// its ttr are each reported.
    #[test]
    fn queue_tasks_are_checked() {
        let due = T0 + 2_000;
        let ops = vec![
            qadd("ok", due),
            qadd("early", due),
            qadd("twice", due),
            qadd("never", due),
            qadd("again", due),
            qadd("soon", due),
        ];
        let mut h = History::default();
        for t in ["ok", "early", "twice", "again"] {
            let reserved = if t == "early" { due - 500 } else { due + 10 };
            h.queue
                .push(qev(QueueEv::Pop, t, 1, due, reserved, reserved));
            h.queue
                .push(qev(QueueEv::FinishOk, t, 1, due, reserved, reserved + 50));
            h.queue_states.insert(t.into(), "done".into());
        }
        h.queue
            .push(qev(QueueEv::Pop, "twice", 2, due, due + 2_100, due + 2_100));
        h.queue.push(qev(
            QueueEv::FinishOk,
            "twice",
            2,
            due,
            due + 2_100,
            due + 2_150,
        ));
        h.queue
            .push(qev(QueueEv::Pop, "again", 2, due, due + 3_000, due + 3_000));
        h.queue_states.insert("never".into(), "ready".into());
        // Taken back 1.5 s into a 2 s ttr and given to another consumer.
        h.queue
            .push(qev(QueueEv::Pop, "soon", 1, due, due + 10, due + 10));
        h.queue
            .push(qev(QueueEv::Pop, "soon", 2, due, due + 1_510, due + 1_510));
        h.queue.push(qev(
            QueueEv::FinishOk,
            "soon",
            2,
            due,
            due + 1_510,
            due + 1_600,
        ));
        h.queue_states.insert("soon".into(), "done".into());
        let r = check(&workload(ops), &h, &[]);
        let of = |k| -> Vec<String> {
            r.violations
                .iter()
                .filter(|v| v.kind == k)
                .map(|v| v.firing.clone())
                .collect()
        };
        assert_eq!(of(ViolationKind::Early), ["queue:early"], "{r}");
        assert_eq!(of(ViolationKind::Doubled), ["queue:twice"], "{r}");
        assert_eq!(of(ViolationKind::Missed), ["queue:never"], "{r}");
        assert_eq!(
            of(ViolationKind::RedeliveredAfterFinish),
            ["queue:twice", "queue:again"],
            "{r}"
        );
        assert_eq!(of(ViolationKind::WithinTtr), ["queue:soon"], "{r}");
        assert_eq!(r.violations.len(), 6, "{r}");
        assert_eq!((r.queue_tasks, r.deliveries), (6, 8));
    }

    /// Lateness is held to the bound, extended past a Redis outage.
    #[test]
    fn late_claims_are_bounded_by_outages() {
        let mut h = clean();
        let fid = firing_id("j", T0 + 3_000);
        h.runs.retain(|e| e.firing != fid);
        h.runs
            .extend(ev(&fid, 1, T0 + 7_500, "n1", Some(Outcome::Ok)));
        let r = check(&workload(vec![every_second("j")]), &h, &[]);
        assert_eq!(r.count(ViolationKind::Late), 1, "{r}");
        let outage = FaultEvent {
            kind: FaultKind::RedisTerm,
            node: None,
            start_ms: T0 + 2_900,
            end_ms: T0 + 4_000,
            detail: String::new(),
        };
        let r = check(&workload(vec![every_second("j")]), &h, &[outage]);
        assert!(r.ok(), "{r}");
        assert_eq!(r.lateness["redis_term"].worst_ms, 4_500);
    }

    fn fault(kind: FaultKind, node: Option<&str>, start: i64, end: i64) -> FaultEvent {
        FaultEvent {
            kind,
            node: node.map(String::from),
            start_ms: T0 + start,
            end_ms: T0 + end,
            detail: String::new(),
        }
    }

    fn logged(node: &str, at: i64, what: NodeLogKind) -> crate::chaos::model::NodeLogEvent {
        crate::chaos::model::NodeLogEvent {
            node: node.into(),
            at_ms: T0 + at,
            what,
        }
    }

    /// Job `j` (every second from T0+1 s, v1), Redis emptied from T0+6.5 s to T0+7 s, `j`
    /// created again at T0+7.2 s as v2 (every second from T0+8.2 s); observed until T0+25 s,
    /// cutoff T0+15 s. The history: v1 ran its firings up to T0+6 s (T0+2 s failed once, its
    /// retry lost with the data), v2 all of its own, keyfire holds v2's records only, and a
    /// node logged the loss.
    fn emptied() -> (Workload, History, Vec<FaultEvent>) {
        let mut w = workload(vec![every_second("j")]);
        w.cutoff_ms = T0 + 15_000;
        w.end_ms = T0 + 25_000;
        let again = JobSpec::every("j", "1s", "chaos").params(serde_json::json!({"v": 2}));
        w.ops.push(Op {
            job: "j".into(),
            call_ms: T0 + 7_200,
            ret_ms: T0 + 7_202,
            kind: OpKind::Upsert {
                spec: again,
                v: 2,
                status: JobStatus::Active,
                next_ms: Some(T0 + 8_200),
                created_ms: T0 + 7_200,
            },
        });
        let mut h = History::default();
        for k in 1..=6 {
            let at = T0 + k * 1_000;
            let outcome = if k == 2 { Outcome::Failed } else { Outcome::Ok };
            h.runs
                .extend(ev(&firing_id("j", at), 1, at + 20, "n1", Some(outcome)));
        }
        let mut records = Vec::new();
        for k in 0..17 {
            let at = T0 + 8_200 + k * 1_000;
            let fid = firing_id("j", at);
            h.runs.extend(
                ev(&fid, 1, at + 20, "n2", Some(Outcome::Ok))
                    .into_iter()
                    .map(|e| RunEvent { v: 2, ..e }),
            );
            records.push(record(&fid, 1, "n2", "ok", at + 20));
        }
        h.keyfire_runs.insert("j".into(), records);
        h.node_log.push(logged("n1", 6_900, NodeLogKind::DataLoss));
        let faults = vec![fault(FaultKind::RedisEmpty, None, 6_500, 7_000)];
        (w, h, faults)
    }

    /// What Redis lost may be lost: a retry of a firing from before, the records of what ran
    /// before. What the workload created after it must run; a firing from before may not run
    /// after it; and a node must have logged the loss.
    #[test]
    fn a_firing_lost_with_redis_data_is_allowed_but_not_one_created_after() {
        let (w, h, faults) = emptied();
        let r = check(&w, &h, &faults);
        assert!(r.ok(), "{r}");
        assert_eq!(r.data_losses_logged, 1);
        assert!(r.optional["deadline after Redis lost its data"] > 0, "{r}");
        // The first firings were due (and late) before the loss: still required.
        assert_eq!(r.required, 2 + 7, "{r}");

        // A firing of the job created after the loss never ran.
        let mut h2 = h.clone();
        let gone = firing_id("j", T0 + 10_200);
        h2.runs.retain(|e| e.firing != gone);
        h2.keyfire_runs
            .get_mut("j")
            .unwrap()
            .retain(|r| r.firing_id != gone);
        let r = check(&w, &h2, &faults);
        assert_eq!(r.count(ViolationKind::Missed), 1, "{r}");
        assert_eq!(r.violations.len(), 1, "{r}");

        // A firing of the job as it was before ran again after the loss.
        let mut h3 = h.clone();
        h3.runs.extend(ev(
            &firing_id("j", T0 + 3_000),
            2,
            T0 + 7_500,
            "n3",
            Some(Outcome::Ok),
        ));
        let r = check(&w, &h3, &faults);
        assert_eq!(r.count(ViolationKind::RanAfterDelete), 1, "{r}");
        assert_eq!(r.violations.len(), 1, "{r}");

        // A firing due (and late) before the loss that never ran is missed all the same.
        let mut h4 = h.clone();
        h4.runs.retain(|e| e.firing != firing_id("j", T0 + 1_000));
        let r = check(&w, &h4, &faults);
        assert_eq!(r.count(ViolationKind::Missed), 1, "{r}");

        // No node noticed the loss; and one logged a loss that never was.
        let mut h5 = h.clone();
        h5.node_log = vec![logged("n2", 40_000, NodeLogKind::DataLoss)];
        let r = check(&w, &h5, &faults);
        assert_eq!(r.count(ViolationKind::UnnoticedDataLoss), 1, "{r}");
        assert_eq!(r.count(ViolationKind::FalseDataLoss), 1, "{r}");
        assert_eq!(r.violations.len(), 2, "{r}");

        // Without the loss, the same history breaks every rule it bent.
        let r = check(&w, &h, &[]);
        assert!(r.count(ViolationKind::Lost) >= 1, "{r}");
        assert_eq!(r.count(ViolationKind::FalseDataLoss), 1, "{r}");
    }

    /// Delay-queue tasks added before Redis lost its data may be lost, never delivered after
    /// it; a task whose add Redis refused as full must never be delivered.
    #[test]
    fn queue_tasks_lost_with_redis_data_or_refused_as_full() {
        let (mut w, mut h, mut faults) = emptied();
        for (id, due) in [("a", T0 + 8_000), ("b", T0 + 2_000), ("c", T0 + 8_000)] {
            w.ops.push(qadd(id, due));
        }
        w.ops.push(Op {
            job: "d".into(),
            call_ms: T0 + 9_000,
            ret_ms: T0 + 9_002,
            kind: OpKind::Refused {
                call: "queue_add".into(),
                v: 0,
                error: "OOM command not allowed when used memory > 'maxmemory'.".into(),
            },
        });
        faults.push(fault(FaultKind::RedisFull, None, 8_900, 12_000));
        let due = T0 + 2_000;
        h.queue
            .push(qev(QueueEv::Pop, "b", 1, due, due + 10, due + 10));
        h.queue
            .push(qev(QueueEv::FinishOk, "b", 1, due, due + 10, due + 50));
        h.queue_states.insert("b".into(), "done".into());
        h.queue_states.insert("a".into(), "gone".into());
        let r = check(&w, &h, &faults);
        assert!(r.ok(), "{r}");
        assert_eq!((r.queue_tasks, r.refused), (3, 1), "{r}");

        let due = T0 + 8_000;
        h.queue
            .push(qev(QueueEv::Pop, "c", 1, due, due + 10, due + 10));
        h.queue
            .push(qev(QueueEv::Pop, "d", 1, due, T0 + 9_500, T0 + 9_500));
        let r = check(&w, &h, &faults);
        let of = |k| -> Vec<String> {
            r.violations
                .iter()
                .filter(|v| v.kind == k)
                .map(|v| v.firing.clone())
                .collect()
        };
        assert_eq!(of(ViolationKind::RanAfterDelete), ["queue:c"], "{r}");
        assert_eq!(of(ViolationKind::Unexpected), ["queue:d"], "{r}");
        assert_eq!(r.violations.len(), 2, "{r}");
    }

    /// While Redis is full: a create it refused is not expected (and must not run), the
    /// firings of jobs that existed stay required within the usual bounds, and no node may
    /// fence itself unless another fault held it.
    #[test]
    fn redis_full_refuses_creates_and_fences_no_node() {
        let mut w = workload(vec![every_second("j")]);
        let refused = JobSpec::at(
            "t1",
            chrono::DateTime::from_timestamp_millis(T0 + 4_000).unwrap(),
            "chaos",
        );
        w.ops.push(Op {
            job: refused.id.clone(),
            call_ms: T0 + 3_000,
            ret_ms: T0 + 3_002,
            kind: OpKind::Refused {
                call: "enqueue".into(),
                v: 1,
                error: "OOM command not allowed when used memory > 'maxmemory'.".into(),
            },
        });
        let full = fault(FaultKind::RedisFull, None, 2_500, 6_500);
        let mut h = clean();
        let r = check(&w, &h, std::slice::from_ref(&full));
        assert!(r.ok(), "{r}");
        assert_eq!(r.refused, 1);

        // The refused task ran after all.
        let mut h2 = h.clone();
        h2.runs.extend(ev(
            &firing_id("t1", T0 + 4_000),
            1,
            T0 + 4_010,
            "n1",
            Some(Outcome::Ok),
        ));
        let r = check(&w, &h2, std::slice::from_ref(&full));
        assert_eq!(r.count(ViolationKind::Unexpected), 1, "{r}");
        assert_eq!(r.violations.len(), 1, "{r}");

        // A firing of `j` during the fault claimed 4.5 s late: a full Redis is no outage.
        let mut h3 = h.clone();
        let slow = firing_id("j", T0 + 4_000);
        h3.runs.retain(|e| e.firing != slow);
        h3.runs
            .extend(ev(&slow, 1, T0 + 8_500, "n1", Some(Outcome::Ok)));
        let r = check(&w, &h3, std::slice::from_ref(&full));
        assert_eq!(r.count(ViolationKind::Late), 1, "{r}");

        // A node fenced itself during the fault; the same while it was cut off is explained.
        h.node_log.push(logged("n2", 3_100, NodeLogKind::Fenced));
        let r = check(&w, &h, std::slice::from_ref(&full));
        assert_eq!(r.count(ViolationKind::FencedWhileFull), 1, "{r}");
        assert_eq!(r.violations.len(), 1, "{r}");
        let cut = fault(FaultKind::CutDrop, Some("n2"), 2_000, 5_000);
        let r = check(&w, &h, &[full.clone(), cut]);
        assert!(r.ok(), "{r}");
        // Fenced outside the fault: not this rule's business.
        h.node_log[0].at_ms = T0 + 12_000;
        let r = check(&w, &h, &[full]);
        assert!(r.ok(), "{r}");
    }

    /// A run in flight on a node paused for less than `node_ttl` must get no next attempt:
    /// one that does is a violation, unless its handler failed or another fault took the
    /// run away.
    #[test]
    fn a_rerun_after_a_short_pause_is_a_violation() {
        let w = workload(vec![every_second("j")]);
        let fid = firing_id("j", T0 + 4_000);
        let pause = fault(FaultKind::NodePause, Some("n1"), 4_100, 4_600);
        let with = |first: Outcome| {
            let mut h = clean();
            h.runs.retain(|e| e.firing != fid);
            let mut run = ev(&fid, 1, T0 + 4_002, "n1", Some(first));
            run[1].at_ms = T0 + 4_650;
            h.runs.extend(run);
            h.runs
                .extend(ev(&fid, 2, T0 + 4_700, "n2", Some(Outcome::Ok)));
            h
        };
        let h = with(Outcome::Cancelled);
        let r = check(&w, &h, std::slice::from_ref(&pause));
        assert_eq!(r.count(ViolationKind::RerunAfterPause), 1, "{r}");
        assert_eq!(r.violations.len(), 1, "{r}");
        assert_eq!(r.pause_reruns, 1);
        assert_eq!(r.violations[0].firing, fid);

        // The same run on another node, or a first attempt that failed by itself: no rule
        // broken.
        let elsewhere = FaultEvent {
            node: Some("n3".into()),
            ..pause.clone()
        };
        assert!(check(&w, &h, &[elsewhere]).ok());
        let r = check(&w, &with(Outcome::Failed), std::slice::from_ref(&pause));
        assert!(r.ok(), "{r}");
        // Redis paused meanwhile: every node fences, the takeover is the pause of Redis's.
        let redis = fault(FaultKind::ClientPause, None, 4_200, 4_500);
        let r = check(&w, &h, &[pause, redis]);
        assert!(r.ok(), "{r}");
        assert_eq!(r.pause_reruns, 0);
    }
}
