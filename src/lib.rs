//! The `keyfire` binary's library: what the server adds around the [`keyfire`] library.
//!
//! - [`api`]: the REST API (axum, OpenAPI via utoipa) and the dashboard a node serves.
//! - [`cli`]: the subcommands: `serve`, `dev`, the remote `job`/`task`/`topics`/… commands.
//! - [`doctor`]: the checks behind `keyfire doctor` (Redis settings, clock, key layout).
//! - [`metrics`]: the Prometheus exporter behind `/metrics`.
//! - [`settings`]: the server's settings (the library's sections and the server's own), loaded
//!   from defaults, a TOML file and `KEYFIRE__` environment variables.
//! - [`telemetry`]: the OpenTelemetry traces of `[telemetry]` (OTLP export, log correlation).
//!
//! The benchmark and chaos suites live in `keyfire-lab`; the `redis-server` fixtures that
//! `keyfire dev` and the tests start live in `keyfire-testkit`.

pub mod api;
pub mod cli;
pub mod doctor;
pub mod metrics;
pub mod settings;
pub mod telemetry;
