//! The REST API (through the router and over a socket), its
//! OpenAPI document, the CLI client against a served API, declarative jobs, and the `http`
//! and `command` built-in handlers; and the delay queue's REST routes. One test
//! binary made of modules, so it links once.

#[path = "../support/mod.rs"]
mod support;

mod bulk;
mod calendars;
mod cancel;
mod cli;
mod common;
mod contract;
mod debounce;
mod declared;
mod dedup;
mod delivery;
mod fanin;
mod full_redis;
mod fuzz;
mod handlers;
mod limits;
mod openapi;
mod promises;
mod routes;
mod run_limits;
mod schema_exact;
mod scopes;
mod socket;
mod tls;
mod topic_batch;
mod topic_dead;
mod topic_partitions;
mod topic_why;
mod topics;
mod why;
