//! The checker's verdict: the kinds of violation, each finding, the lateness figures, and the
//! report that holds them and prints them.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::chaos::model::FaultKind;

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
    pub(super) fn aof_explainable(self) -> bool {
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
    pub(super) fn op_explainable(self) -> bool {
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
