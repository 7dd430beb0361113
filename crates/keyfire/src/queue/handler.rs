//! The `topic` built-in handler, and what a node needs to serve topics.
//!
//! Params (JSON):
//!
//! | field | meaning |
//! | --- | --- |
//! | `topic` | required; the topic to feed |
//! | `task` | the id of a delayed task queued by an earlier version (its job `q.<id>`) |
//! | `payload` | without `task`: the payload of the task each firing adds (any JSON) |
//! | `ttr` | without `task`: time-to-run of those tasks, such as `"30s"` (default 60 s) |
//! | `max_deliveries` | without `task`: deliveries before the dead letters (default 5) |
//!
//! So a recurring job feeds a topic with `handler = "topic"` and
//! `params = { topic = "reports", payload = { kind = "daily" } }`: each firing adds one ready
//! task (id `<job id>.<instant ms>`, so a re-run of the firing adds nothing).
//! See [`Queue::handle_firing`].

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::OnceCell;

use super::{Queue, TOPIC_HANDLER, TopicPromoter};
use crate::config::{RedisSettings, Settings};
use crate::handler::{Firing, Handler, HandlerError, HandlerResult, Registry};
use crate::store::Store;

/// The `topic` handler. It needs the Redis of the node it runs on: give it a [`Queue`], or the
/// Redis settings to connect with on its first run.
#[derive(Clone)]
pub struct TopicHandler {
    inner: Arc<Inner>,
}

struct Inner {
    queue: OnceCell<Queue>,
    redis: Option<RedisSettings>,
}

impl TopicHandler {
    /// A handler working through `queue`.
    pub fn new(queue: Queue) -> Self {
        Self {
            inner: Arc::new(Inner {
                queue: OnceCell::new_with(Some(queue)),
                redis: None,
            }),
        }
    }

    /// A handler that connects to the Redis of `redis` (its URL and prefix) on its first run.
    pub fn connect_lazily(redis: &RedisSettings) -> Self {
        Self {
            inner: Arc::new(Inner {
                queue: OnceCell::new(),
                redis: Some(redis.clone()),
            }),
        }
    }
}

impl Inner {
    async fn queue(&self) -> Result<&Queue, HandlerError> {
        self.queue
            .get_or_try_init(|| async {
                let redis = self
                    .redis
                    .as_ref()
                    .ok_or_else(|| HandlerError::abort("topic handler without a queue"))?;
                let store = Store::open(redis)
                    .await
                    .map_err(|e| HandlerError::retry(format!("topic handler: {e}")))?;
                Ok(Queue::new(store))
            })
            .await
    }
}

impl Handler for TopicHandler {
    fn run(&self, firing: Firing) -> BoxFuture<'static, HandlerResult> {
        let inner = self.inner.clone();
        Box::pin(async move { inner.queue().await?.handle_firing(&firing).await })
    }
}

/// Make the nodes built with `registry` serve the delay queue in the Redis of `redis`: the
/// `topic` handler, and the topic promotion ([`TopicPromoter`]) that makes delayed tasks ready.
pub fn serve_topics(registry: &mut Registry, redis: &RedisSettings) {
    registry.register(TOPIC_HANDLER, TopicHandler::connect_lazily(redis));
    registry.add_hook(Arc::new(TopicPromoter::connect_lazily(redis)));
}

impl Registry {
    /// What a node of `settings` runs: the built-ins of `settings.handlers`, plus the delay
    /// queue ([`serve_topics`]) in the Redis of `settings.redis`. Without a node serving topics,
    /// delayed tasks never become ready. Fails, naming the setting, when the `http` handler
    /// cannot be built (a TLS file it names cannot be read or used).
    pub fn for_node(settings: &Settings) -> crate::error::Result<Self> {
        let mut r = Self::with_builtins_from(&settings.handlers)?;
        // The node's `http`: it also refuses the node's own API (and sends the callbacks).
        #[cfg(feature = "http")]
        {
            let http = crate::handler::http::HttpHandler::for_node(settings)?;
            r.set_callback_sender(Arc::new(http.clone()));
            r.register("http", http);
        }
        serve_topics(&mut r, &settings.redis);
        Ok(r)
    }
}
