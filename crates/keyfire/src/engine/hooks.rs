//! The node's side of [`NodeHook`]s (the delay queue's topic promotion is one): a view of the
//! node for them, and the expired keys and change messages the scheduler hands on to them.

use std::sync::Arc;
use std::time::Duration;

use super::Inner;
use super::membership::owner;
use crate::handler::{NodeHook, NodeView};

impl NodeView for Inner {
    fn node_id(&self) -> &str {
        &self.id
    }

    fn owns(&self, name: &str) -> bool {
        let live = self.live.read().expect("live set lock");
        if !live.iter().any(|n| n == &self.id) {
            return true;
        }
        owner(&live, name) == Some(self.id.as_str())
    }

    fn redis_now_ms(&self) -> i64 {
        self.clock.redis_now_ms()
    }

    fn sweep_interval(&self) -> Duration {
        self.settings.sweep_interval
    }

    fn grace(&self) -> Duration {
        self.settings.claim_grace + self.settings.node_ttl
    }

    fn timer_horizon(&self) -> Duration {
        self.settings.timer_horizon
    }
}

impl Inner {
    /// Start every hook, each stopping with the node's claiming.
    pub(super) fn start_hooks(self: &Arc<Self>, tasks: &mut tokio::task::JoinSet<()>) {
        for hook in self.hooks.iter().cloned() {
            let view: Arc<dyn NodeView> = self.clone();
            tasks.spawn(NodeHook::run(hook, view, self.claiming.child_token()));
        }
    }

    /// An expired key that is no firing's: the first hook that knows it takes it.
    pub(super) fn expired_for_hooks(&self, key: &str) {
        for hook in &self.hooks {
            if hook.on_expired(key) {
                Inner::bump(&self.stats.events);
                return;
            }
        }
    }

    /// A change message for hooks.
    pub(super) fn message_for_hooks(&self, op: &str, id: &str, at: Option<i64>) {
        for hook in &self.hooks {
            hook.on_message(op, id, at);
        }
    }
}
