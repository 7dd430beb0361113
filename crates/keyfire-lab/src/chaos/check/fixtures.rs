//! The unit tests' workloads, histories and faults: job `j` every second from `T0` + 1 s, a
//! clean history of it, and the pieces tests plant into it.

use crate::chaos::check::{Report, ViolationKind};
use crate::chaos::model::{
    Bounds, FaultEvent, FaultKind, History, NodeLogEvent, NodeLogKind, Op, OpKind, QueueEv,
    QueueEvent, Workload,
};
use crate::chaos::record::{Ev, Outcome, RunEvent};
use keyfire::job::JobSpec;
use keyfire::store::{JobStatus, RunRecord, firing_id, parse_firing_id};

pub(super) const T0: i64 = 1_700_000_000_000;

pub(super) fn workload(ops: Vec<Op>) -> Workload {
    Workload {
        seed: 7,
        start_ms: T0,
        cutoff_ms: T0 + 10_000,
        end_ms: T0 + 20_000,
        bounds: Bounds::for_settings(1_000, 1_000, 500),
        ops,
    }
}

pub(super) fn every_second(id: &str) -> Op {
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

pub(super) fn ev(
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

pub(super) fn record(
    firing: &str,
    attempt: u32,
    node: &str,
    outcome: &str,
    claimed: i64,
) -> RunRecord {
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
pub(super) fn clean() -> History {
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

pub(super) fn qadd(id: &str, due: i64) -> Op {
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

pub(super) fn qev(ev: QueueEv, task: &str, n: u32, due: i64, reserved: i64, at: i64) -> QueueEvent {
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

pub(super) fn fault(kind: FaultKind, node: Option<&str>, start: i64, end: i64) -> FaultEvent {
    FaultEvent {
        kind,
        node: node.map(String::from),
        start_ms: T0 + start,
        end_ms: T0 + end,
        detail: String::new(),
    }
}

pub(super) fn logged(node: &str, at: i64, what: NodeLogKind) -> NodeLogEvent {
    NodeLogEvent {
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
pub(super) fn emptied() -> (Workload, History, Vec<FaultEvent>) {
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

/// The firings of the report's violations of `kind`, in the report's order.
pub(super) fn firings_of(r: &Report, kind: ViolationKind) -> Vec<String> {
    r.violations
        .iter()
        .filter(|v| v.kind == kind)
        .map(|v| v.firing.clone())
        .collect()
}
