//! The node's side of [`NodeHook`]s (the delay queue's topic promotion is one): a view of the
//! node for them, and the expired keys and change messages the scheduler hands on to them.

use std::sync::Arc;
use std::time::Duration;

use super::context::{NodeCore, bump};
use super::membership::Live;
use crate::handler::{NodeHook, NodeView};

/// What a hook sees of the node.
struct View {
    core: Arc<NodeCore>,
    live: Arc<Live>,
}

impl NodeView for View {
    fn node_id(&self) -> &str {
        &self.core.id
    }

    fn owns(&self, name: &str) -> bool {
        self.live.owns(name)
    }

    fn redis_now_ms(&self) -> i64 {
        self.core.clock.redis_now_ms()
    }

    fn sweep_interval(&self) -> Duration {
        self.core.settings.sweep_interval
    }

    fn grace(&self) -> Duration {
        self.core.settings.claim_grace + self.core.settings.node_ttl
    }

    fn timer_horizon(&self) -> Duration {
        self.core.settings.timer_horizon
    }
}

/// The registry's hooks (see [`NodeHook`]).
pub(super) struct Hooks {
    pub(super) core: Arc<NodeCore>,
    pub(super) live: Arc<Live>,
    pub(super) hooks: Vec<Arc<dyn NodeHook>>,
}

impl Hooks {
    /// Start every hook, each stopping with the node's claiming.
    pub(super) fn start(&self, tasks: &mut tokio::task::JoinSet<()>) {
        for hook in self.hooks.iter().cloned() {
            let view: Arc<dyn NodeView> = Arc::new(View {
                core: self.core.clone(),
                live: self.live.clone(),
            });
            tasks.spawn(NodeHook::run(hook, view, self.core.claiming.child_token()));
        }
    }

    /// An expired key that is no firing's: the first hook that knows it takes it.
    pub(super) fn expired(&self, key: &str) {
        for hook in &self.hooks {
            if hook.on_expired(key) {
                bump(&self.core.stats.events);
                return;
            }
        }
    }

    /// A change message for hooks.
    pub(super) fn message(&self, op: &str, id: &str, at: Option<i64>) {
        for hook in &self.hooks {
            hook.on_message(op, id, at);
        }
    }
}
