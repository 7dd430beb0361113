//! The `bench` and `chaos` subcommands of the `keyfire` binary.

pub mod bench;
pub mod chaos;
