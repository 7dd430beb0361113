//! Judging a round: the evidence it left (the handler's runs and keyfire's records and dead
//! letters, by firing), the findings so far, the checks of each run, of each expected firing
//! and of keyfire's accepted outcomes, and the sorting of findings into violations and
//! exemptions.

use std::collections::{BTreeMap, BTreeSet};

use super::NOTICED_WITHIN_MS;
use super::WIPE_SLACK_MS;
use super::expect::Expectations;
use super::report::{Report, Violation, ViolationKind};
use crate::chaos::model::{FaultEvent, FaultKind, History, OpKind, Workload};
use crate::chaos::record::{Ev, Outcome, RunEvent};
use keyfire::store::{RunRecord, parse_firing_id};

/// A handler run: its start and, if written, its end.
pub(super) struct Run<'a> {
    pub(super) ev: &'a RunEvent,
    pub(super) end: Option<&'a RunEvent>,
}

impl Run<'_> {
    pub(super) fn ok(&self) -> bool {
        self.end.and_then(|e| e.outcome) == Some(Outcome::Ok)
    }
}

/// The handler's runs, by run id: a start and, if written, its end.
pub(super) fn group_runs(history: &History) -> BTreeMap<&str, Run<'_>> {
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
/// of evidence and records what it finds in [`Findings`] (the delay-queue checks are in
/// `queue`, the checks of what the nodes did through faults in `nodes`).
pub(super) struct Evidence<'a> {
    pub(super) expected: &'a Expectations<'a>,
    pub(super) workload: &'a Workload,
    pub(super) history: &'a History,
    pub(super) faults: &'a [FaultEvent],
    pub(super) runs: &'a BTreeMap<&'a str, Run<'a>>,
    pub(super) by_firing: BTreeMap<&'a str, Vec<&'a Run<'a>>>,
    /// keyfire's run records by firing: what is left at the end, plus what deletes dropped.
    pub(super) keyfire_records: BTreeMap<&'a str, Vec<&'a RunRecord>>,
    /// Firings in the dead letters (at the end, or dropped by a delete).
    pub(super) dead: BTreeSet<&'a str>,
}

/// The report being built and the violations found so far.
pub(super) struct Findings {
    pub(super) report: Report,
    found: Vec<Violation>,
    /// Queue tasks with an event inside a window an AOF loss may have undone.
    pub(super) queue_touched: BTreeSet<String>,
    /// Firings whose every attempt a fault cut off (see `Evidence::cut_by_a_fault`).
    attempts_used_by_faults: BTreeSet<String>,
}

impl Findings {
    pub(super) fn new(workload: &Workload, history: &History, faults: &[FaultEvent]) -> Self {
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

    pub(super) fn flag(&mut self, kind: ViolationKind, firing: &str, detail: String) {
        self.found.push(Violation {
            kind,
            firing: firing.to_string(),
            detail,
        });
    }
}

impl<'a> Evidence<'a> {
    pub(super) fn new(
        expected: &'a Expectations<'a>,
        workload: &'a Workload,
        history: &'a History,
        faults: &'a [FaultEvent],
        runs: &'a BTreeMap<&'a str, Run<'a>>,
    ) -> Self {
        let mut by_firing: BTreeMap<&str, Vec<&Run>> = BTreeMap::new();
        for r in runs.values() {
            by_firing.entry(r.ev.firing.as_str()).or_default().push(r);
        }
        let mut keyfire_records: BTreeMap<&str, Vec<&RunRecord>> = BTreeMap::new();
        let mut dead: BTreeSet<&str> = BTreeSet::new();
        for records in history.keyfire_runs.values() {
            for r in records {
                keyfire_records
                    .entry(r.firing_id.as_str())
                    .or_default()
                    .push(r);
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
                    keyfire_records
                        .entry(r.firing_id.as_str())
                        .or_default()
                        .push(r);
                }
                for d in letters {
                    dead.insert(d.firing_id.as_str());
                }
            }
        }
        Self {
            expected,
            workload,
            history,
            faults,
            runs,
            by_firing,
            keyfire_records,
            dead,
        }
    }

    /// Each handler run: early, unexpected, of a stale version, past a `skip` tolerance, while
    /// paused, after a delete; and attempts started twice.
    pub(super) fn check_runs(&self, f: &mut Findings) {
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
            // A node may claim up to its claim lead ahead and hold the run until the instant:
            // the handler must not start before it (host = Redis clock), and the claim must
            // not come more than the lead before it.
            if e.at_ms < instant {
                f.flag(
                    ViolationKind::Early,
                    &e.firing,
                    format!(
                        "started {} ms before its instant: {what}",
                        instant - e.at_ms
                    ),
                );
            } else if e.claimed_ms < instant - super::claim_lead_ms() {
                f.flag(
                    ViolationKind::Early,
                    &e.firing,
                    format!(
                        "claimed {} ms before its instant: {what}",
                        instant - e.claimed_ms
                    ),
                );
            }
            match self.expected.firings.get(&e.firing) {
                None => {
                    let maybe = self
                        .expected
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
            if let Some(spans) = self.expected.paused.get(&e.job) {
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
            if let Some(dels) = self.expected.deleted.get(&e.job) {
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
            if let Some(lost) = self.expected.wiped_after(instant)
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
    pub(super) fn check_expected_firings(&self, f: &mut Findings) {
        // Per expected firing.
        f.report.firings = self.expected.firings.len();
        for (fid, x) in &self.expected.firings {
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
            let records: &[&RunRecord] = self
                .keyfire_records
                .get(fid.as_str())
                .map_or(&[], |v| v.as_slice());
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
                .expected
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
                && !self.expected.deleted.contains_key(&x.job)
                // Redis lost the records of what it lost.
                && self.expected.wiped_after(x.instant).is_none();
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
    pub(super) fn check_accepted_outcomes(&self, f: &mut Findings) {
        // Two successful completions accepted by keyfire.
        for (fid, records) in &self.keyfire_records {
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

    /// Runs or queued attempts still there after the drain.
    pub(super) fn check_leftovers(&self, f: &mut Findings) {
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
    pub(super) fn sort(&self, f: Findings) -> Report {
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
                instant.is_some_and(|t| self.expected.in_aof_window(t))
                    || self.by_firing.get(v.firing.as_str()).is_some_and(|rs| {
                        rs.iter().any(|r| {
                            self.expected.in_aof_window(r.ev.claimed_ms)
                                || r.end.is_some_and(|e| self.expected.in_aof_window(e.at_ms))
                        })
                    })
                    || self
                        .keyfire_records
                        .get(v.firing.as_str())
                        .is_some_and(|rs| {
                            rs.iter().any(|r| {
                                self.expected.in_aof_window(r.claimed_ms)
                                    || r.finished_ms
                                        .is_some_and(|t| self.expected.in_aof_window(t))
                            })
                        })
            };
            let exempt = (v.kind.aof_explainable()
                && (touched() || queue_touched.contains(&v.firing)))
                || (v.kind.op_explainable() && self.expected.undone.contains(job))
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
mod tests;
