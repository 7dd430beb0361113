//! Handlers: the code a job runs, registered by name.

mod builtin;
mod command;
mod hook;
#[cfg(feature = "http")]
pub mod http;
mod template;
pub mod webhook;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use hook::{NodeHook, NodeView};

/// One run of one firing, as a handler sees it.
#[derive(Debug, Clone)]
pub struct Firing {
    /// The job's id.
    pub job_id: String,
    /// `<job id>:<instant ms>`: the same for every attempt of this firing, so a handler can
    /// make its effect idempotent.
    pub firing_id: String,
    /// The instant the firing was scheduled for.
    pub scheduled_at: DateTime<Utc>,
    /// When this node claimed it, by Redis's clock: `claimed_at - scheduled_at` is the lateness.
    pub claimed_at: DateTime<Utc>,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// The job's params.
    pub params: Value,
    /// The node running it.
    pub node_id: String,
    /// Cancelled when the run must stop: the node is shutting down past its drain timeout,
    /// or the run's lease was lost.
    pub cancel: CancellationToken,
}

/// Why a run did not succeed. Retry decisions are data, not strings.
#[derive(Debug)]
pub enum HandlerError {
    /// Failed; retry under the job's policy (or after `after`, when given).
    Retry {
        /// A delay the handler asks for.
        after: Option<Duration>,
        /// What went wrong.
        message: String,
    },
    /// Failed; do not retry.
    Abort(String),
}

impl HandlerError {
    /// A failure to retry under the job's policy.
    pub fn retry(message: impl Into<String>) -> Self {
        HandlerError::Retry {
            after: None,
            message: message.into(),
        }
    }

    /// A failure not to retry.
    pub fn abort(message: impl Into<String>) -> Self {
        HandlerError::Abort(message.into())
    }

    /// The message.
    pub fn message(&self) -> &str {
        match self {
            HandlerError::Retry { message, .. } | HandlerError::Abort(message) => message,
        }
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

/// Any error (`?` on an `anyhow::Error`, `std::io::Error`, …) is a failure to retry.
impl<E: Into<anyhow::Error>> From<E> for HandlerError {
    fn from(e: E) -> Self {
        HandlerError::retry(format!("{:#}", e.into()))
    }
}

/// What a handler returns.
pub type HandlerResult = Result<(), HandlerError>;

/// Code a job runs. Implemented for every `Fn(Firing) -> impl Future<Output = HandlerResult>`.
pub trait Handler: Send + Sync + 'static {
    /// Run one firing.
    fn run(&self, firing: Firing) -> BoxFuture<'static, HandlerResult>;
}

impl<F, Fut> Handler for F
where
    F: Fn(Firing) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandlerResult> + Send + 'static,
{
    fn run(&self, firing: Firing) -> BoxFuture<'static, HandlerResult> {
        Box::pin(self(firing))
    }
}

/// Handlers by name.
#[derive(Clone, Default)]
pub struct Registry {
    handlers: HashMap<String, Arc<dyn Handler>>,
    hooks: Vec<Arc<dyn NodeHook>>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.handlers.keys()).finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry holding the built-in handlers with default settings: `log`, `noop` and
    /// `http` (any host); `command` is off by default.
    pub fn with_builtins() -> Self {
        Self::with_builtins_from(&crate::config::HandlerSettings::default())
    }

    /// A registry holding the built-in handlers configured by `settings`: `log`, `noop`,
    /// `http`, and `command` when `settings.command.enabled`.
    pub fn with_builtins_from(settings: &crate::config::HandlerSettings) -> Self {
        let mut r = Self::new();
        builtin::register_all(&mut r, settings);
        r
    }

    /// Register `handler` under `name`, replacing any handler of that name.
    pub fn register(&mut self, name: impl Into<String>, handler: impl Handler) -> &mut Self {
        self.handlers.insert(name.into(), Arc::new(handler));
        self
    }

    /// The handler registered under `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Handler>> {
        self.handlers.get(name).cloned()
    }

    /// Whether `name` is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.handlers.contains_key(name)
    }

    /// Run `hook` on the nodes built with this registry.
    pub fn add_hook(&mut self, hook: Arc<dyn NodeHook>) -> &mut Self {
        self.hooks.push(hook);
        self
    }

    /// The hooks added.
    pub fn hooks(&self) -> &[Arc<dyn NodeHook>] {
        &self.hooks
    }

    /// Every registered name, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.handlers.keys().cloned().collect();
        names.sort();
        names
    }
}
