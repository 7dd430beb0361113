//! The delay-queue tasks of a round, held to the queue's promises: each task the workload
//! added with what the consumers did with it ([`QueueTask`]), and one check per kind of
//! finding (early, late, a delivery number given twice, delivered again within the ttr,
//! finished twice, delivered after a finish or after Redis lost its data, missed, lost), plus
//! deliveries of tasks no accepted add produced.

use std::collections::{BTreeMap, BTreeSet};

use super::WIPE_SLACK_MS;
use super::judge::{Evidence, Findings};
use super::report::ViolationKind;
use crate::chaos::model::{OpKind, QueueEv, QueueEvent};

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

impl<'a> Evidence<'a> {
    /// Delay-queue tasks, one method per kind of finding over the same evidence
    /// ([`QueueTask`]): delivered only once due and in time, each delivery number given once,
    /// never again within a reservation's ttr, finished once and never delivered after, and
    /// none lost.
    pub(super) fn check_queue(&self, f: &mut Findings) {
        let tasks = self.queue_tasks();
        f.report.queue_tasks += tasks.len();
        for t in &tasks {
            f.report.deliveries += t.pops.len();
            if t.events.iter().any(|e| {
                self.expected.in_aof_window(e.at_ms) || self.expected.in_aof_window(e.reserved_ms)
            }) || self.expected.in_aof_window(t.due)
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
            let deadline = self.expected.deadline(ready);
            // Lost with Redis's data unless it was due (and late) before the loss.
            let wiped = self.expected.wiped_after(op.call_ms);
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
}

#[cfg(test)]
mod tests;
