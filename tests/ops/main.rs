//! Operations, all but `/metrics`: `keyfire doctor` against real
//! redis-servers, the dashboard (its files, the overview route, and a real headless Chromium
//! driving it), the node's JSON logs, and how `serve` and `dev` start, or fail with an exit
//! code, in a wrong environment; the OpenTelemetry traces a node exports; the README's quick
//! start. One test binary made of modules, so it links once.

#[path = "../support/mod.rs"]
mod support;

mod browser;
mod dashboard;
mod data_loss;
mod docs;
mod doctor;
mod image;
mod logs;
mod managed;
mod otel;
mod quickstart;
mod startup;
