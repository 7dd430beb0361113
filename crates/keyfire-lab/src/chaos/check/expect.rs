//! What the workload expected: every firing its calls asked for (schedules, windows, pauses,
//! deletions, misfire policies, Redis losing its data), required or optional and why, with
//! its deadline pushed past outages; and per job the spans when it was paused or deleted,
//! the trigger calls that failed (a firing may exist), and the calls a Redis SIGKILL or data
//! loss may have undone.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::WIPE_SLACK_MS;
use crate::chaos::model::{Bounds, FaultEvent, FaultKind, Op, OpKind, Workload};
use keyfire::job::{Job, MisfirePolicy, Validation};
use keyfire::store::{firing_id, parse_firing_id};

/// A firing the workload asked for.
#[derive(Debug, Clone)]
pub(super) struct ExpectedFiring {
    pub(super) job: String,
    pub(super) instant: i64,
    /// Versions (`v`) of the schedules that produce it.
    pub(super) versions: BTreeSet<u64>,
    pub(super) required: bool,
    /// Why it is not required (when it is not).
    pub(super) why_optional: &'static str,
    /// When it became due (the instant, or the call that made it due if later).
    pub(super) ready: i64,
    pub(super) deadline: i64,
    pub(super) trigger: bool,
    /// Its handler fails on every attempt: it must end in the dead letters.
    pub(super) doomed: bool,
    /// `Some(tolerance)` under `misfire = "skip"`.
    pub(super) skip_tolerance: Option<i64>,
}

/// An active schedule of a job, from the call that made it until the next one.
struct Segment {
    job: Job,
    v: u64,
    first: Option<i64>,
    not_before: i64,
}

/// What the workload expected, derived from its calls and the faults: every firing it asked
/// for, and per job the spans and calls that drop, forbid or excuse runs.
pub(super) struct Expectations<'a> {
    workload: &'a Workload,
    bounds: Bounds,
    outages: Vec<(i64, i64)>,
    aof_windows: Vec<(i64, i64)>,
    /// `redis_empty` faults: their start and end. Everything created before a start is gone
    /// from `start + WIPE_SLACK_MS` on.
    wipes: Vec<(i64, i64)>,
    /// The params of each version of each job (`v`), as the workload wrote them.
    params: HashMap<(String, u64), serde_json::Value>,
    /// Every firing the workload asked for, by firing id.
    pub(super) firings: BTreeMap<String, ExpectedFiring>,
    /// Per job: paused spans (pause returned, resume called).
    pub(super) paused: HashMap<String, Vec<(i64, i64)>>,
    /// Per job: the times deletes returned.
    pub(super) deleted: HashMap<String, Vec<(i64, i64)>>,
    /// Per job: windows of trigger calls that failed (a firing may exist).
    pub(super) uncertain: HashMap<String, Vec<(i64, i64)>>,
    /// Jobs with a call that may have been undone by a Redis SIGKILL.
    pub(super) undone: BTreeSet<String>,
    /// Per job: call times of pauses and deletes (they drop unfinished firings).
    pub(super) drops: HashMap<String, Vec<i64>>,
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

impl<'a> Expectations<'a> {
    /// Every firing the workload's calls asked for, with the faults taken into account.
    pub(super) fn derive(workload: &'a Workload, faults: &[FaultEvent]) -> Self {
        let mut expected = Self::new(workload, faults);
        expected.derive_from_calls();
        expected
    }

    fn new(workload: &'a Workload, faults: &[FaultEvent]) -> Self {
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
            .map(|f| (f.start_ms - workload.bounds.aof_loss_ms, f.start_ms))
            .collect();
        let mut wipes: Vec<(i64, i64)> = faults
            .iter()
            .filter(|f| f.kind == FaultKind::RedisEmpty)
            .map(|f| (f.start_ms, f.end_ms))
            .collect();
        wipes.sort();
        let mut params = HashMap::new();
        for op in &workload.ops {
            match &op.kind {
                OpKind::Upsert { spec, v, .. } | OpKind::Enqueue { spec, v } => {
                    params.insert((op.job.clone(), *v), spec.params.clone());
                }
                _ => {}
            }
        }
        Self {
            workload,
            bounds: workload.bounds,
            outages,
            aof_windows,
            wipes,
            params,
            firings: BTreeMap::new(),
            paused: HashMap::new(),
            deleted: HashMap::new(),
            uncertain: HashMap::new(),
            undone: BTreeSet::new(),
            drops: HashMap::new(),
        }
    }

    pub(super) fn in_aof_window(&self, t: i64) -> bool {
        self.aof_windows.iter().any(|(a, b)| t >= *a && t <= *b)
    }

    /// The first `redis_empty` fault that took what existed at `t` (a firing's instant, a
    /// task's add): its start.
    pub(super) fn wiped_after(&self, t: i64) -> Option<i64> {
        self.wipes
            .iter()
            .map(|(start, _)| *start)
            .find(|start| t <= start + WIPE_SLACK_MS)
    }

    /// Whether the handler of `job` at version `v` fails or hangs on `attempt` by design (so
    /// another attempt follows it).
    pub(super) fn fails_on(&self, job: &str, v: u64, attempt: u32) -> bool {
        self.params.get(&(job.to_string(), v)).is_some_and(|p| {
            let n = |k: &str| p[k].as_u64().unwrap_or(0);
            u64::from(attempt) <= n("fail").max(n("hang"))
        })
    }

    /// The latest a firing that became due at `ready` may be first claimed.
    pub(super) fn deadline(&self, ready: i64) -> i64 {
        let mut d = ready + self.bounds.late_ms;
        loop {
            let mut moved = false;
            for &(a, e) in &self.outages {
                let until = e + self.bounds.recovery_ms;
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

    fn add(&mut self, e: ExpectedFiring) {
        let fid = firing_id(&e.job, e.instant);
        match self.firings.get_mut(&fid) {
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
                self.firings.insert(fid, e);
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
        // A firing due up to the claim lead after the change returned may have been claimed
        // before it, and runs as claimed (optional: its deadline is past the change's call).
        let last = close_ret + super::claim_lead_ms();
        while let Some(t) = next {
            if t > last || n >= 1_000_000 {
                break;
            }
            n += 1;
            let ready = t.max(seg.not_before);
            let deadline = self.deadline(ready);
            let misfire_candidate =
                job.misfire != MisfirePolicy::CatchUp && deadline - t > tolerance;
            let why_optional = if t > self.workload.cutoff_ms {
                "after the cutoff"
            } else if misfire_candidate {
                "misfire candidate"
            } else if deadline >= close_call {
                why
            } else if deadline >= self.workload.end_ms {
                "deadline after the end"
            } else {
                ""
            };
            let required = why_optional.is_empty();
            found.push(ExpectedFiring {
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

    fn derive_from_calls(&mut self) {
        const CHANGED: &str = "deadline after a change of its job";
        const LOST: &str = "deadline after Redis lost its data";
        let mut by_job: BTreeMap<&str, Vec<Step>> = BTreeMap::new();
        for op in &self.workload.ops {
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
            let mut triggers: Vec<ExpectedFiring> = Vec::new();
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
                            triggers.push(ExpectedFiring {
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
                self.close(
                    name,
                    seg,
                    (self.workload.end_ms, self.workload.end_ms),
                    CHANGED,
                );
            }
            if let Some(p) = paused_at.take() {
                self.paused
                    .entry(name.into())
                    .or_default()
                    .push((p, i64::MAX));
            }
            self.settle_triggers(&mut triggers, self.workload.end_ms, CHANGED);
        }
    }

    /// Triggered firings are required when their deadline passed before `until` (a pause or
    /// delete drops a queued trigger, and so does Redis losing its data); else optional, `why`.
    fn settle_triggers(
        &mut self,
        triggers: &mut Vec<ExpectedFiring>,
        until: i64,
        why: &'static str,
    ) {
        for mut e in triggers.drain(..) {
            e.why_optional = if e.instant > self.workload.cutoff_ms {
                "after the cutoff"
            } else if e.deadline >= until {
                why
            } else if e.deadline >= self.workload.end_ms {
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

#[cfg(test)]
mod tests;
