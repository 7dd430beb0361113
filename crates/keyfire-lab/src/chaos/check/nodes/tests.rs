use crate::chaos::check::fixtures::*;
use crate::chaos::check::{ViolationKind, check};
use crate::chaos::model::{FaultEvent, FaultKind, NodeLogKind, Op, OpKind};
use crate::chaos::record::Outcome;
use keyfire::job::JobSpec;
use keyfire::store::firing_id;

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
