//! Hooks: parts a node runs beside its handlers, riding its expiry events, change channel,
//! membership and clock. The delay queue's topic promotion is one (see `crate::queue`).
//!
//! The engine knows nothing of what a hook does: it starts it with a view of the node, hands
//! it the expired keys and change messages it does not recognise itself, and stops it with the
//! node.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

/// What a hook may ask of the node it runs in.
pub trait NodeView: Send + Sync + 'static {
    /// The node's id.
    fn node_id(&self) -> &str;
    /// Whether this node owns `name` (rendezvous hash over the live nodes, as for firings):
    /// the owner acts at once, the others only after [`NodeView::grace`].
    fn owns(&self, name: &str) -> bool;
    /// Redis's clock now (ms), as this node estimates it.
    fn redis_now_ms(&self) -> i64;
    /// How often the node sweeps.
    fn sweep_interval(&self) -> Duration;
    /// How long after its instant work is left to its owner before any node takes it.
    fn grace(&self) -> Duration;
    /// How far ahead the owner arms precision timers.
    fn timer_horizon(&self) -> Duration;
}

/// A part a node runs beside its handlers.
pub trait NodeHook: Send + Sync + 'static {
    /// Run until `stop` is cancelled; started once the node has joined the live set.
    fn run(
        self: Arc<Self>,
        node: Arc<dyn NodeView>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, ()>;

    /// An `expired` event for a key the scheduler does not know. Returns whether the key was
    /// this hook's; must return at once (spawn any work).
    fn on_expired(&self, key: &str) -> bool;

    /// A change-channel message the scheduler does not know: `op`, `id` and instant `at`.
    fn on_message(&self, op: &str, id: &str, at: Option<i64>);
}
