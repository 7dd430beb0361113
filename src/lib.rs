//! keyfire: a distributed job scheduler on Redis.
//!
//! The layers, from the outside in:
//!
//! - [`config`]: node settings, loaded from defaults, a TOML file and `KEYFIRE__…` env vars.
//! - [`job`]: the job model: schedules (cron in an IANA zone, fixed rate, one-shot),
//!   the validity window, and validation that names the bad field.
//! - [`store`]: the only code that talks to Redis. Key names are built in one place
//!   ([`store::Keys`]); every atomic change is one Lua script.
//! - [`engine`]: the [`Node`]: expiry-event listener, precision timers, claims, the
//!   sweeper, membership and the bounded executor.
//! - [`handler`]: the [`Handler`] registry that maps a job's handler name to code.
//! - [`queue`]: the delay queue: tasks in topics that consumers pop, with time-to-run
//!   redelivery; delays ride the scheduler's own firings (the `topic` handler).
//! - [`api`]: the REST API (axum, OpenAPI via utoipa) a node serves over a [`Client`].
//! - [`client`]: the [`Client`] that creates and manages jobs without running a node.
//! - [`clock`]: wall clocks (real or skewed for tests) and the offset to Redis time.
//! - [`doctor`]: the checks behind `keyfire doctor` (Redis settings, clock, key layout).
//! - [`bench`]: the benchmark harness behind `keyfire bench` (scenarios, metrics, plots).
//! - [`chaos`]: the fault-injection suite behind `keyfire chaos` and its history checker.
//!
//! Every due decision is taken by Redis's clock inside a script (G3); a firing is claimed
//! at most once because the claim compare-and-sets the job's entry in the due ZSET (G1);
//! the sweeper claims whatever the expiry events missed (G2).

pub mod api;
pub mod bench;
pub mod chaos;
pub mod cli;
pub mod client;
pub mod clock;
pub mod config;
pub mod dev;
pub mod doctor;
pub mod engine;
pub mod error;
pub mod handler;
pub mod job;
pub mod metrics;
pub mod queue;
pub mod store;

pub use client::Client;
pub use config::Settings;
pub use engine::Node;
pub use error::{Error, Result};
pub use handler::{Firing, Handler, HandlerError, HandlerResult, Registry};
pub use job::{JobSpec, ValidationError};
