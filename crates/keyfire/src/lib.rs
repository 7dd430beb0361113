//! keyfire: a distributed job scheduler on Redis.
//!
//! A service embeds keyfire to schedule cron, fixed-rate and one-shot jobs whose every
//! firing happens exactly once across a cluster of nodes, and to hand delayed work to
//! consumers through a delay queue. Build a [`Node`] from [`Settings`] and a handler
//! [`Registry`] and run it; use a [`Client`] to create and manage jobs without running one.
//!
//! The layers, each looking only down:
//!
//! - [`job`]: the job model: schedules (cron in an IANA zone, fixed rate, one-shot),
//!   the validity window, policies, and validation that names the bad field.
//! - `store` (internal): the only code that talks to Redis. Key names are built in one
//!   place; every atomic change is one Lua script.
//! - `engine` (internal): the [`Node`], built from components that each hold only what they
//!   use: membership, the expiry-event listener, precision timers, the sweeper, the claimer,
//!   the runner (the bounded executor), the flow limiter, the completer and the callbacks.
//! - [`handler`]: the handler contract ([`Handler`], [`Firing`], [`Registry`]), the node
//!   hooks contract ([`handler::NodeHook`]) and the built-in handlers.
//! - [`queue`]: the delay queue: tasks in topics that consumers pop in batches, with
//!   time-to-run redelivery; its topic promotion is a node hook, and its `topic` handler
//!   lives with it ([`Registry::for_node`] registers both).
//! - [`client`]: the [`Client`] that creates and manages jobs without running a node, and
//!   reads what a cluster is doing (totals, live nodes, job counters, Redis's clock and health);
//!   the queue builds on it ([`Client::queue`] is defined beside the queue).
//! - [`inspect`]: read-only diagnostics of the Redis keyfire uses (one server's `INFO`,
//!   settings and clock, a deployment's masters, the data's layout), for tools like a doctor.
//! - [`clock`]: wall clocks (real or skewed for tests) and the offset to Redis time.
//! - [`config`]: the library's settings (`redis`, `node`, `limits`, `handlers`): plain serde
//!   data with defaults, which the service fills or deserializes from its own configuration;
//!   it checks webhook secrets with the signing primitives below it (re-exported as
//!   [`handler::webhook`]), so the handlers can read their settings from it.
//! - [`metrics`]: the names of the metrics the engine records through the `metrics` facade
//!   (keyfire never installs a recorder).
//! - [`trace`]: W3C trace context, and the [`trace::Tracer`] a process installs to export the
//!   engine's and the queue's `tracing` spans as traces (keyfire installs none).
//!
//! Features: `http` (default: the built-in `http` handler), `cluster`, `sentinel` and `tls`
//! (Redis Cluster, Redis Sentinel, TLS to Redis; settings asking for one this build leaves out
//! are refused, naming the feature), `openapi` (OpenAPI schemas on the REST API's types).
//! keyfire installs no `tracing` subscriber, `metrics` recorder or rustls crypto provider:
//! the `http` handler takes the process's default provider when one is installed, else uses
//! ring for its own connections ([`handler::http::HttpHandler::with_provider`] picks another).
//!
//! Every due decision is taken by Redis's clock inside a script (G3); a firing is claimed
//! at most once because the claim compare-and-sets the job's entry in the due ZSET (G1);
//! the sweeper claims whatever the expiry events missed (G2).

pub mod backfill;
pub mod bulk;
pub mod client;
pub mod clock;
pub mod config;
pub mod error;
mod flow_limits;
pub mod handler;
pub mod inspect;
pub mod job;
pub mod metrics;
pub mod queue;
pub mod trace;
mod webhook;

// The engine's and the store's insides are crate-private. keyfire's own crates (the server,
// the lab, the tests), which drive scripts and step the engine directly, turn on the
// `internals` feature to reach them; it is not part of the API a service embeds and may
// change in any release. What an embedder needs is re-exported below.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod engine;
#[cfg(not(feature = "internals"))]
#[allow(unreachable_pub, dead_code)]
pub(crate) mod engine;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod store;
#[cfg(not(feature = "internals"))]
#[allow(unreachable_pub, dead_code)]
pub(crate) mod store;

pub use client::Client;
pub use config::Settings;
pub use engine::Stats;
pub use engine::{DATA_LOSS_SHOWN, Node, NodeHandle};
pub use error::{Error, RedisError, Result};
pub use handler::{Firing, Handler, HandlerError, HandlerResult, Registry};
pub use job::{CalendarSpec, FlowLimitSpec, JobSpec, ValidationError};
pub use queue::Queue;

/// The README's Rust snippet, compiled as a doctest so it cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
pub use store::{
    BatchStatus, DataLoss, DeadLetter, Fate, FlowLimitStatus, JobRecord, JobStatus, RunRecord,
    RunningLease, SkipReason, SkipRecord,
};
