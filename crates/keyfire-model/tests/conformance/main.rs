//! Conformance: the real scripts on a real `redis-server`, driven through seeded random walks
//! of the model's steps. Each script call a step makes (the model logs them, with the reply it
//! expects) runs the real script with the walk's clock; after each step Redis's data, read back
//! and mapped to the model's terms, must equal the model's. A script change the model does not
//! follow fails here; so does a mutant (a copy of a script with one rule weakened), which the
//! mutation tests show.

mod queue;
mod sched;
mod scripts;

use keyfire_testkit::RedisServer;

/// Walks per test and steps per walk.
pub(crate) const WALKS: u64 = 8;
/// Steps per walk.
pub(crate) const STEPS: usize = 400;
/// Redis time of tick 0 (ms), and a tick's length.
pub(crate) const BASE: i64 = 1_800_000_000_000;
/// A tick, in ms.
pub(crate) const TICK: i64 = 1_000;

/// The ms of a tick.
pub(crate) fn ms(tick: u8) -> i64 {
    BASE + i64::from(tick) * TICK
}

/// The tick of a ms value (it must be a whole tick).
pub(crate) fn tick(ms: i64) -> Result<u8, String> {
    if (ms - BASE) % TICK != 0 || ms < BASE {
        return Err(format!("{ms} is not a whole tick"));
    }
    Ok(((ms - BASE) / TICK) as u8)
}

/// A connection to a fresh Redis of its own.
pub(crate) fn redis() -> (RedisServer, redis::Connection) {
    let server = RedisServer::start().expect("start redis-server");
    let con = redis::Client::open(server.url())
        .expect("redis url")
        .get_connection()
        .expect("connect to redis");
    (server, con)
}

/// Set the walk's clock.
pub(crate) fn set_clock(con: &mut redis::Connection, tick: u8) {
    redis::cmd("SET")
        .arg("kfm:clock")
        .arg(ms(tick))
        .query::<()>(con)
        .expect("set the clock");
}

/// How often the walks exercised each outcome of each script.
#[derive(Default, Debug)]
pub(crate) struct Coverage(std::collections::BTreeMap<&'static str, usize>);

impl Coverage {
    fn count(&mut self, what: &'static str) {
        *self.0.entry(what).or_default() += 1;
    }

    /// Every outcome named was met.
    fn assert_met(&self, outcomes: &[&str]) {
        println!("{:#?}", self.0);
        for o in outcomes {
            assert!(self.0.contains_key(o), "the walks never met: {o}");
        }
    }
}

#[test]
fn scheduler_scripts_follow_the_model() {
    let (_server, mut con) = redis();
    let scripts = sched::Scripts::real();
    let mut seen = Coverage::default();
    for seed in 0..WALKS {
        if let Err(e) = sched::walk(&mut con, &scripts, seed, STEPS, &mut seen) {
            panic!("seed {seed}: {e}");
        }
    }
    seen.assert_met(&[
        "heartbeat.lua finds an entry lapsed",
        "claim.lua claims",
        "claim.lua refuses",
        "claim_retry.lua claims",
        "claim_retry.lua refuses",
        // Never "renew.lua refuses": by the fence rule a live node's lease is not taken
        // while it runs (the model finds none either), short of Redis losing data.
        "renew.lua renews",
        "complete.lua refuses a fenced outcome",
        "complete.lua records ok",
        "complete.lua records a failure",
        "recover.lua refuses",
        "recover.lua takes an expired lease",
        "recover.lua takes a named holder's run",
    ]);
}

#[test]
fn queue_scripts_follow_the_model() {
    let (_server, mut con) = redis();
    let scripts = queue::Scripts::real();
    let mut seen = Coverage::default();
    // Twice as many walks: a task dies only after two deliveries expire unfinished.
    for seed in 0..WALKS * 2 {
        if let Err(e) = queue::walk(&mut con, &scripts, seed, STEPS, &mut seen) {
            panic!("seed {seed}: {e}");
        }
    }
    seen.assert_met(&[
        "pop.lua reserves",
        "touch.lua refuses a stale token",
        "touch.lua extends",
        "finish.lua refuses a stale token",
        "finish.lua finishes",
        "requeue.lua: dead",
        "requeue.lua: ready again",
        "promote.lua promotes",
    ]);
}

/// The mutation check, script side: `complete.lua` without its fence (an outcome recorded
/// whether or not the run still holds its lease) must fail a walk.
#[test]
fn a_complete_without_its_fence_fails_conformance() {
    let (_server, mut con) = redis();
    let scripts = sched::Scripts::with_complete(&scripts::mutate(
        scripts::COMPLETE,
        "      return 'fenced'\n",
        "      -- mutant: recorded though the run no longer holds its lease\n",
    ));
    some_walk_fails(|seed| sched::walk(&mut con, &scripts, seed, STEPS, &mut Coverage::default()));
}

/// The queue's mutation check, script side: `finish.lua` accepting any token of a reserved
/// task must fail a walk.
#[test]
fn a_finish_without_its_token_check_fails_conformance() {
    let (_server, mut con) = redis();
    let scripts = queue::Scripts::with_finish(&scripts::mutate(
        scripts::FINISH,
        "  elseif f[2] ~= token then\n",
        "  elseif f[2] ~= token and f[1] ~= 'reserved' then\n",
    ));
    some_walk_fails(|seed| queue::walk(&mut con, &scripts, seed, STEPS, &mut Coverage::default()));
}

/// A mutant must be noticed: of `WALKS * 4` walks (seeds 0, 1, …), at least one fails; how
/// many, and the first failure, are printed.
fn some_walk_fails(mut walk: impl FnMut(u64) -> Result<(), String>) {
    let failures: Vec<String> = (0..WALKS * 4).filter_map(|seed| walk(seed).err()).collect();
    println!(
        "{} of {} walks failed; the first:\n{}",
        failures.len(),
        WALKS * 4,
        failures.first().map_or("", |s| s)
    );
    assert!(!failures.is_empty(), "no walk noticed the mutant");
}
