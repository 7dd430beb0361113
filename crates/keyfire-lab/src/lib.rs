//! keyfire's lab: the benchmark harness behind `keyfire bench` and the fault-injection suite
//! behind `keyfire chaos`. Not published; the `keyfire` binary runs both.

pub mod bench;
pub mod chaos;
pub mod cli;
