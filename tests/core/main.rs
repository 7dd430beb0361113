//! The core's acceptance tests, against real redis-server processes. One test
//! binary made of modules, so it links once.

#[path = "../support/mod.rs"]
mod support;

mod batching;
mod changes;
mod compact;
mod crash;
mod cutoff;
mod dedup;
mod faults;
mod firing;
mod flow_control;
mod input;
mod lifecycle;
mod limits;
mod policies;
mod precision;
mod quickstart;
mod retries;
mod scaleout;
mod upgrade;
