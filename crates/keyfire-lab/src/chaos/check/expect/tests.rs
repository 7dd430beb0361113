use crate::chaos::check::fixtures::*;
use crate::chaos::check::{ViolationKind, check};
use crate::chaos::model::{FaultEvent, FaultKind, NodeLogKind};
use crate::chaos::record::Outcome;
use keyfire::store::firing_id;

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
