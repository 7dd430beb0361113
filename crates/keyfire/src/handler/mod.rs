//! Handlers: the code a job runs, registered by name.

mod builtin;
mod command;
mod hook;
#[cfg(feature = "http")]
pub mod http;
mod template;
/// Standard Webhooks (v1) signatures: what the `http` handler puts on every delivery, and
/// [`verify`](webhook::verify) for a Rust receiver (secrets are parsed by the configuration
/// too, so they live below both).
pub mod webhook {
    pub use crate::webhook::*;
}

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
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
    /// Cancelled when the run must stop: its cancel was requested
    /// ([`Client::cancel`](crate::Client::cancel), `POST /v1/jobs/{id}/cancel`), a newer run
    /// replaces it (overlap `replace`), the node is shutting down past its drain timeout, or
    /// the run's lease was lost. The handler then has a second to return before it is
    /// dropped; see [`Firing::cancelled`].
    pub cancel: CancellationToken,
    /// What the handler reports beyond its result: the response it got and the callbacks to
    /// send once the firing's outcome is recorded. `Report::default()` when building a
    /// `Firing` by hand.
    pub report: Report,
}

impl Firing {
    /// Completes when the run must stop (see [`Firing::cancel`]): select on it beside the
    /// work, and return soon after. After a cancel request or under overlap `replace`, an
    /// error is then recorded as `cancelled` and not retried; after a lost lease or a
    /// shutdown, the firing runs again on another node.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    /// Whether the run must stop (see [`Firing::cancel`]).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }
}

/// What a handler reports about its run beyond success or failure. The node reads it when the
/// attempt ends: a callback asked for is written to Redis in the same script that records the
/// outcome (so it is sent once that outcome is final, by whichever node gets to it, even if
/// this one crashes), and the response details go into the callback's summary.
#[derive(Debug, Clone, Default)]
pub struct Report(Arc<Mutex<Reported>>);

/// The contents of a [`Report`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reported {
    /// Sent after a successful run.
    pub on_success: Option<Callback>,
    /// Sent after the firing's last attempt failed (it went to the dead letters, or failed
    /// without retry).
    pub on_failure: Option<Callback>,
    /// The status code of the response the run got, if any.
    pub status: Option<u16>,
    /// The first bytes of the response body, if any.
    pub body: Option<String>,
}

/// Where to POST a firing's outcome: a URL and the `whsec_…` secrets that sign it (empty:
/// the secrets the sender's configuration gives the URL's host).
#[derive(Debug, Clone, PartialEq)]
pub struct Callback {
    /// `http://` or `https://`.
    pub url: String,
    /// One secret, or two while rotating.
    pub secrets: Vec<String>,
}

impl Report {
    /// Ask for callbacks after the outcome: `success` after a successful run, `failure` after
    /// the last attempt failed.
    pub fn callbacks(&self, success: Option<Callback>, failure: Option<Callback>) {
        let mut r = self.0.lock().expect("report lock");
        r.on_success = success;
        r.on_failure = failure;
    }

    /// Note the response the run got (its status code and the first bytes of its body).
    pub fn response(&self, status: u16, body: Option<String>) {
        let mut r = self.0.lock().expect("report lock");
        r.status = Some(status);
        r.body = body;
    }

    /// What was reported so far.
    pub fn get(&self) -> Reported {
        self.0.lock().expect("report lock").clone()
    }
}

/// One callback to send: a signed POST of a firing's outcome.
#[derive(Debug, Clone)]
pub struct CallbackCall {
    /// The `webhook-id`: `<firing id>:succeeded` or `<firing id>:failed`, the same on every
    /// attempt of the callback (the receiver's idempotency key).
    pub id: String,
    /// The job whose firing it reports.
    pub job_id: String,
    /// The firing it reports, and the attempts it took (its trace, for `traceparent`).
    pub firing_id: String,
    /// The attempts the firing took.
    pub attempts: u32,
    /// Where to send it, and the secrets that sign it.
    pub target: Callback,
    /// The JSON body.
    pub payload: String,
    /// 1 for the first attempt of this callback.
    pub attempt: u32,
    /// Now, by Redis's clock (ms): the `webhook-timestamp`.
    pub now_ms: i64,
}

/// Sends callbacks (the `http` handler does). A node with none leaves them in Redis for the
/// nodes that have one.
pub trait CallbackSender: Send + Sync + 'static {
    /// Send one; an error is retried later (bounded), [`HandlerError::Abort`] is not.
    fn send(&self, call: CallbackCall) -> BoxFuture<'static, HandlerResult>;
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
    handlers: foldhash::HashMap<String, Arc<dyn Handler>>,
    hooks: Vec<Arc<dyn NodeHook>>,
    callbacks: Option<Arc<dyn CallbackSender>>,
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
    ///
    /// The default settings name no file, so the `http` handler builds whatever the
    /// environment holds (no system CA store: the bundled roots). Should it fail all the same,
    /// the error is logged and the registry has no `http` (jobs naming it are refused as an
    /// unknown handler): nothing here panics.
    pub fn with_builtins() -> Self {
        let mut r = Self::new();
        if let Err(e) = builtin::register_all(&mut r, &Default::default()) {
            tracing::error!(error = %e, "the built-in http handler is not available");
        }
        r
    }

    /// A registry holding the built-in handlers configured by `settings`: `log`, `noop`,
    /// `http`, and `command` when `settings.command.enabled`. Fails, naming the setting, when
    /// the `http` handler cannot be built (a TLS file it names cannot be read or used).
    pub fn with_builtins_from(
        settings: &crate::config::HandlerSettings,
    ) -> crate::error::Result<Self> {
        let mut r = Self::new();
        builtin::register_all(&mut r, settings)?;
        Ok(r)
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

    /// Send the callbacks handlers ask for with `sender` (the built-in `http` handler is the
    /// default sender).
    pub fn set_callback_sender(&mut self, sender: Arc<dyn CallbackSender>) -> &mut Self {
        self.callbacks = Some(sender);
        self
    }

    /// The callback sender, if any.
    pub fn callback_sender(&self) -> Option<Arc<dyn CallbackSender>> {
        self.callbacks.clone()
    }

    /// Every registered name, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.handlers.keys().cloned().collect();
        names.sort();
        names
    }
}
