//! The model checks: exhaustive for 2 nodes, 2 firings and 2 queue tasks, a bounded simulation
//! for 3 nodes. Each prints its state count and time (`-- --nocapture`); a property that fails
//! prints its counterexample as a trace.

use keyfire_model::queue::{self, Queue};
use keyfire_model::sched::{Mutation, RedisFaults, Sched};
use keyfire_model::{Report, check_exhaustive, check_simulation};

fn show(what: &str, r: &Report) {
    println!(
        "{what}: {} states, depth {}, {:.1?}",
        r.states, r.depth, r.took
    );
    for (name, trace) in &r.failed {
        println!("  FAILS: {name}\n{trace}");
    }
}

fn failed(r: &Report) -> Vec<&'static str> {
    r.failed.iter().map(|(n, _)| *n).collect()
}

#[test]
fn scheduler_two_nodes_crashes_and_pauses() {
    let r = check_exhaustive(Sched::new(2));
    show("scheduler, 2 nodes, crashes and pauses", &r);
    assert!(r.failed.is_empty(), "{:?}", failed(&r));
}

#[test]
#[ignore]
fn probe() {
    let faults: u8 = std::env::var("F").unwrap().parse().unwrap();
    let firings: u8 = std::env::var("N").unwrap().parse().unwrap();
    let last: u8 = std::env::var("L").unwrap().parse().unwrap();
    let mut m = Sched::new(2);
    m.faults = faults;
    m.firings = firings;
    m.last_fault = last;
    let r = check_exhaustive(m);
    show("probe", &r);
}
