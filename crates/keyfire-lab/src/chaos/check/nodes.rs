//! What the nodes did through faults: a run in flight on a node paused for less than
//! `node_ttl` taken over anyway (`rerun_after_pause`), and what the nodes logged: every data
//! loss noticed, none imagined, no node fenced while Redis was full.

use std::collections::BTreeSet;

use super::judge::{Evidence, Findings};
use super::report::ViolationKind;
use super::{LOSS_LOGGED_WITHIN_MS, NOTICED_WITHIN_MS};
use crate::chaos::model::{FaultEvent, FaultKind, NodeLogKind};
use crate::chaos::record::Outcome;

impl Evidence<'_> {
    /// `rerun_after_pause`: a node paused for less than `node_ttl` keeps its runs. A run in
    /// flight on it during the pause must get no next attempt unless its handler failed (or
    /// was meant to fail or hang on that attempt), or another fault that takes runs away (its
    /// node killed, stopped, cut off or restarted; Redis paused, restarted or emptied) came
    /// between its claim and the next attempt's.
    pub(super) fn check_pauses(&self, f: &mut Findings) {
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
                    || self.expected.fails_on(&e.job, e.v, e.attempt)
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
    pub(super) fn check_node_logs(&self, f: &mut Findings) {
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
}

#[cfg(test)]
mod tests;
