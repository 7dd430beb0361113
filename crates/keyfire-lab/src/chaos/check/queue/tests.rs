use crate::chaos::check::fixtures::*;
use crate::chaos::check::{ViolationKind, check};
use crate::chaos::model::{FaultKind, History, Op, OpKind, QueueEv};

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
    let of = |k| firings_of(&r, k);
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
    let of = |k| firings_of(&r, k);
    assert_eq!(of(ViolationKind::RanAfterDelete), ["queue:c"], "{r}");
    assert_eq!(of(ViolationKind::Unexpected), ["queue:d"], "{r}");
    assert_eq!(r.violations.len(), 2, "{r}");
}
