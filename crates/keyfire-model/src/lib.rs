//! A model of keyfire's protocol, for the Stateright model checker, and what the conformance
//! walks need to hold the real Lua scripts to it.
//!
//! Redis is one atomic state machine whose steps are the scripts, each named after its `.lua`
//! file ([`sched::Step`], [`queue::Step`]); the nodes are actors with their own state (runs,
//! fence, last good heartbeat) whose steps call those scripts; faults are steps too. Time is a
//! few ticks of Redis's clock (a tick stands for about a second: `node_ttl` is 3 ticks, a
//! lease 3, a task's `ttr` 2). [`sched::Sched`] is the scheduler (claim, renew, heartbeat,
//! complete, recover, claim_retry), [`queue::Queue`] the delay queue (add, promote, pop,
//! touch, finish, requeue). Each states its properties as the docs state the guarantees
//! (docs/architecture.md, "The protocol, model-checked").
//!
//! The tests of this crate run the checks (exhaustive for 2 nodes, bounded in depth for 3) and the conformance walks on a real `redis-server`.

pub mod queue;
pub mod sched;
pub mod walk;

use stateright::{Checker, Model};

/// A counterexample as a readable trace: each step, then what it changed, one per line.
pub fn trace<M>(model: &M, path: stateright::Path<M::State, M::Action>) -> String
where
    M: Model,
    M::State: std::fmt::Debug + Summary,
    M::Action: std::fmt::Debug,
{
    let mut out = String::new();
    let steps = path.into_vec();
    if let Some((first, _)) = steps.first() {
        out.push_str(&format!("   start: {}\n", first.summary()));
    }
    for (i, (_, action)) in steps.iter().enumerate() {
        if let Some(action) = action
            && let Some((next, _)) = steps.get(i + 1)
        {
            out.push_str(&format!(
                "{:>3}. {}\n     => {}\n",
                i + 1,
                model.format_action(action),
                next.summary()
            ));
        }
    }
    out
}

/// A one-line summary of a state, for traces.
pub trait Summary {
    /// The state in one line: Redis's data, then each node.
    fn summary(&self) -> String;
}

/// The outcome of one check, for the tests to assert on and print.
#[derive(Debug)]
pub struct Report {
    /// Unique states the checker visited.
    pub states: usize,
    /// The deepest path it explored.
    pub depth: usize,
    /// How long the check took.
    pub took: std::time::Duration,
    /// Each property that failed, with its counterexample as a trace.
    pub failed: Vec<(&'static str, String)>,
}

/// Check `model` exhaustively (breadth first), on up to two threads.
pub fn check_exhaustive<M>(model: M) -> Report
where
    M: Model + Send + Sync + Clone + 'static,
    M::State:
        Clone + std::fmt::Debug + std::hash::Hash + PartialEq + Send + Sync + Summary + 'static,
    M::Action: Clone + std::fmt::Debug + PartialEq + Send + Sync + 'static,
{
    let started = std::time::Instant::now();
    let checker = model.clone().checker().threads(2).spawn_bfs().join();
    report(&model, &checker, started)
}

/// Check `model` breadth first up to `depth` steps, or until `states` states were visited
/// (a bounded check, for models too large to check whole).
pub fn check_bounded<M>(model: M, depth: usize, states: usize) -> Report
where
    M: Model + Send + Sync + Clone + 'static,
    M::State:
        Clone + std::fmt::Debug + std::hash::Hash + PartialEq + Send + Sync + Summary + 'static,
    M::Action: Clone + std::fmt::Debug + PartialEq + Send + Sync + 'static,
{
    let started = std::time::Instant::now();
    let checker = model
        .clone()
        .checker()
        .threads(2)
        .target_max_depth(depth)
        .target_state_count(states)
        .spawn_bfs()
        .join();
    report(&model, &checker, started)
}

fn report<M, C>(model: &M, checker: &C, started: std::time::Instant) -> Report
where
    M: Model,
    C: Checker<M>,
    M::State: Clone + std::fmt::Debug + std::hash::Hash + PartialEq + Summary,
    M::Action: Clone + std::fmt::Debug + PartialEq,
{
    let mut failed: Vec<(&'static str, String)> = checker
        .discoveries()
        .into_iter()
        .filter(|(name, _)| {
            model
                .properties()
                .iter()
                .any(|p| p.name == *name && p.expectation != stateright::Expectation::Sometimes)
        })
        .map(|(name, path)| (name, trace(model, path)))
        .collect();
    failed.sort_by_key(|(name, _)| *name);
    Report {
        states: checker.unique_state_count(),
        depth: checker.max_depth(),
        took: started.elapsed(),
        failed,
    }
}
