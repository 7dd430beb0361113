//! The `topic` built-in handler: the bridge from the scheduler to the delay queue.
//!
//! Params (JSON):
//!
//! | field | meaning |
//! | --- | --- |
//! | `topic` | required; the topic to feed |
//! | `task` | the id of a delayed task to make ready (set by [`Queue::add`] on the job `q.<id>`) |
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

use super::{Firing, Handler, HandlerError, HandlerResult};
use crate::config::RedisSettings;
use crate::queue::Queue;
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
