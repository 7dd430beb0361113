use crate::chaos::check::fixtures::*;
use crate::chaos::check::{ViolationKind, check};
use crate::chaos::model::{FaultEvent, FaultKind, Op, OpKind};
use crate::chaos::record::Outcome;
use keyfire::store::{DeadLetter, firing_id};
use std::collections::BTreeSet;

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

/// A run claimed ahead (the claim lead) and started at its instant is on time; one claimed
/// ahead that started before its instant, or claimed more than the lead ahead, is
/// early.
#[test]
fn a_run_claimed_ahead_is_early_only_if_it_started_early() {
    let mut h = clean();
    let held = firing_id("j", T0 + 4_000);
    let started_early = firing_id("j", T0 + 6_000);
    let too_far = firing_id("j", T0 + 8_000);
    for (fid, claimed, start) in [
        (&held, T0 + 3_950, T0 + 4_000),
        (&started_early, T0 + 5_950, T0 + 5_990),
        (&too_far, T0 + 6_500, T0 + 8_000),
    ] {
        h.runs.retain(|e| &e.firing != fid);
        let records = h.keyfire_runs.get_mut("j").unwrap();
        records.retain(|r| &r.firing_id != fid);
        let mut evs = ev(fid, 1, claimed, "n1", Some(Outcome::Ok));
        evs[0].at_ms = start;
        evs[1].at_ms = start + 5;
        h.runs.extend(evs);
        h.keyfire_runs
            .get_mut("j")
            .unwrap()
            .push(record(fid, 1, "n1", "ok", claimed));
    }
    let r = check(&workload(vec![every_second("j")]), &h, &[]);
    let early: BTreeSet<String> = r
        .violations
        .iter()
        .filter(|v| v.kind == ViolationKind::Early)
        .map(|v| v.firing.clone())
        .collect();
    assert_eq!(
        early,
        BTreeSet::from([started_early.clone(), too_far.clone()]),
        "{r}"
    );
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

/// A firing claimed ahead (the nodes' claim lead) just before its job was deleted runs as
/// it was claimed: not a violation. One claimed after the delete returned is.
#[test]
fn a_firing_claimed_ahead_of_a_delete_may_still_run() {
    let lead = super::super::claim_lead_ms();
    let delete = Op {
        job: "j".into(),
        call_ms: T0 + 4_990 - lead / 2,
        ret_ms: T0 + 4_995 - lead / 2,
        kind: OpKind::Delete {
            runs: vec![],
            dead: vec![],
        },
    };
    let mut h = clean();
    h.keyfire_runs.clear();
    h.runs.retain(|e| e.scheduled_ms <= T0 + 4_000);
    let held = firing_id("j", T0 + 5_000);
    let mut evs = ev(&held, 1, T0 + 5_000 - lead, "n1", Some(Outcome::Ok));
    evs[0].at_ms = T0 + 5_000;
    evs[1].at_ms = T0 + 5_005;
    h.runs.extend(evs);
    let r = check(&workload(vec![every_second("j"), delete.clone()]), &h, &[]);
    assert!(r.ok(), "{r}");

    let late = firing_id("j", T0 + 6_000);
    h.runs
        .extend(ev(&late, 1, T0 + 6_000, "n1", Some(Outcome::Ok)));
    let r = check(&workload(vec![every_second("j"), delete]), &h, &[]);
    assert!(!r.ok(), "{r}");
    assert!(r.violations.iter().all(|v| v.firing == late), "{r}");
}
