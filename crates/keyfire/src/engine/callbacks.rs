//! The callback sender: callbacks queued in each shard's outbox with a firing's outcome
//! (`complete.lua`) are taken under a lease by any node whose registry has a sender, and sent
//! with bounded retries. A node that dies mid-send leaves them to the next taker after the
//! lease; the receiver sees the same `webhook-id` on every attempt. Their fate never changes
//! the firing's.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use tokio::sync::Notify;

use super::context::{NodeCore, ms};
use crate::handler::{Callback, CallbackCall, CallbackSender, HandlerError, Reported};
use crate::metrics::name;
use crate::store::{CallbackFate, RunRecord, TakenCallback};

/// Delays between a callback's attempts: five attempts over about 15 s, then it is given up.
pub(crate) const CALLBACK_BACKOFF: [Duration; 4] = [
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
];
/// Callbacks taken from a shard's outbox at once (sent concurrently).
const TAKE_MAX: usize = 32;
/// How often a node looks at the outboxes when nothing woke it.
const POLL: Duration = Duration::from_secs(1);

/// A callback as the outbox keeps it.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct OutboxEntry {
    job_id: String,
    firing_id: String,
    attempts: u32,
    url: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    secrets: Vec<String>,
    payload: Value,
}

/// The callback a run's report asks for, given how the attempt ended (`ok`, or a failure
/// with no attempt left), as the outbox keeps it; `None` when it asks for none.
pub(super) fn entry_for(
    reported: Reported,
    record: &RunRecord,
    job_id: &str,
    final_failure: bool,
    now_ms: impl FnOnce() -> i64,
) -> Option<String> {
    let ok = record.outcome == "ok";
    let (target, kind): (Option<Callback>, _) = if ok {
        (reported.on_success, "succeeded")
    } else if final_failure {
        (reported.on_failure, "failed")
    } else {
        (None, "")
    };
    let target = target?;
    let ms = |ms: i64| {
        chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
            .unwrap_or_default()
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    };
    let entry = OutboxEntry {
        job_id: job_id.to_string(),
        firing_id: record.firing_id.clone(),
        attempts: record.attempt,
        url: target.url,
        secrets: target.secrets,
        payload: json!({
            "type": format!("keyfire.firing.{kind}"),
            "timestamp": ms(now_ms()),
            "data": {
                "job_id": job_id,
                "firing_id": record.firing_id,
                "scheduled_at": ms(record.scheduled_ms),
                "attempts": record.attempt,
                "status": reported.status,
                "body": reported.body,
                "error": record.error,
            },
        }),
    };
    serde_json::to_string(&entry).ok()
}

/// A callback queued by a script (a batch's completion, see `fanin_lib.lua`) carries its
/// instant as `timestamp_ms`: it is sent as `timestamp` (RFC 3339), as every callback's is.
fn stamp(payload: &mut Value) {
    let Some(obj) = payload.as_object_mut() else {
        return;
    };
    if let Some(ms) = obj.remove("timestamp_ms").and_then(|v| v.as_i64()) {
        let at = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
            .unwrap_or_default()
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        obj.insert("timestamp".into(), Value::String(at));
    }
}

/// The callback sender: one loop per shard, each woken when a completion of this node
/// queued a callback there.
pub(super) struct Callbacks {
    core: Arc<NodeCore>,
    /// The registry's sender; none: the callbacks are left for the nodes that have one.
    sender: Option<Arc<dyn CallbackSender>>,
    /// Per shard: a completion of this node queued a callback there.
    wake: Vec<Notify>,
}

impl Callbacks {
    pub(super) fn new(core: Arc<NodeCore>, sender: Option<Arc<dyn CallbackSender>>) -> Self {
        let shards = core.store.shards().len();
        Self {
            core,
            sender,
            wake: (0..shards).map(|_| Notify::new()).collect(),
        }
    }

    /// A completion queued a callback in `shard`'s outbox: its sender takes it at once.
    pub(super) fn wake(&self, shard: usize) {
        self.wake[shard].notify_one();
    }

    /// Send the callbacks of `shard`'s outbox until the node stops claiming: when a
    /// completion of this node queued one, and every [`POLL`] for the rest (those of nodes
    /// that died, and retries).
    pub(super) async fn run(self: Arc<Self>, shard: usize) {
        if self.sender.is_none() {
            // Left for the nodes that can send them.
            return;
        }
        loop {
            let taken = self.run_once(shard).await;
            if self.core.claiming.is_cancelled() {
                return;
            }
            if taken == TAKE_MAX {
                continue;
            }
            tokio::select! {
                () = self.wake[shard].notified() => {}
                () = tokio::time::sleep(POLL) => {}
                () = self.core.claiming.cancelled() => return,
            }
        }
    }

    /// The sender's step: take up to [`TAKE_MAX`] callbacks from `shard`'s outbox under a
    /// lease, send them, and settle them; how many it took. Those taken when the node stops
    /// claiming are left to their lease (another node sends them).
    pub(super) async fn run_once(&self, shard: usize) -> usize {
        let Some(sender) = &self.sender else {
            return 0;
        };
        let lease_ms = ms(self.core.settings.lease);
        match self
            .core
            .store
            .take_callbacks(shard, TAKE_MAX, lease_ms)
            .await
        {
            Ok((now, taken)) if !taken.is_empty() => {
                let sends = taken.iter().map(|t| self.send_callback(sender, t, now));
                let fates = tokio::select! {
                    f = futures::future::join_all(sends) => f,
                    // Left to their lease: another node sends them.
                    () = self.core.claiming.cancelled() => return 0,
                };
                let settled: Vec<_> = taken.iter().zip(fates).collect();
                if let Err(e) = self.core.store.settle_callbacks(shard, &settled).await {
                    tracing::warn!(error = %e, "could not settle callbacks; their lease hands them on");
                }
                taken.len()
            }
            Ok(_) => 0,
            Err(e) => {
                tracing::warn!(error = %e, shard, "could not read the callback outbox");
                0
            }
        }
    }

    /// One attempt at a callback taken from the outbox; what to do with it next.
    async fn send_callback(
        &self,
        sender: &Arc<dyn CallbackSender>,
        taken: &TakenCallback,
        now_ms: i64,
    ) -> CallbackFate {
        let mut entry: OutboxEntry = match serde_json::from_str(&taken.entry) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(callback = %taken.id, error = %e, "unreadable callback dropped");
                self.count_callback("given_up");
                return CallbackFate::Settled;
            }
        };
        stamp(&mut entry.payload);
        let call = CallbackCall {
            id: taken.id.clone(),
            job_id: entry.job_id.clone(),
            firing_id: entry.firing_id,
            attempts: entry.attempts,
            target: Callback {
                url: entry.url,
                secrets: entry.secrets,
            },
            payload: entry.payload.to_string(),
            attempt: taken.attempt,
            now_ms,
        };
        let job = entry.job_id;
        let last = taken.attempt as usize > CALLBACK_BACKOFF.len();
        match sender.send(call).await {
            Ok(()) => {
                tracing::debug!(%job, callback = %taken.id, attempt = taken.attempt, "callback delivered");
                self.count_callback("delivered");
                CallbackFate::Settled
            }
            Err(HandlerError::Abort(m)) => {
                tracing::warn!(%job, callback = %taken.id, "callback not sent: {m}");
                self.count_callback("given_up");
                CallbackFate::Settled
            }
            Err(HandlerError::Retry { message, .. }) if last => {
                tracing::warn!(%job, callback = %taken.id, attempt = taken.attempt, "callback given up: {message}");
                self.count_callback("given_up");
                CallbackFate::Settled
            }
            Err(HandlerError::Retry { message, .. }) => {
                tracing::warn!(%job, callback = %taken.id, attempt = taken.attempt, "callback failed: {message}");
                self.count_callback("failed");
                let delay = CALLBACK_BACKOFF[taken.attempt.max(1) as usize - 1];
                CallbackFate::RetryIn(ms(delay))
            }
        }
    }

    fn count_callback(&self, result: &'static str) {
        metrics::counter!(name::CALLBACKS, "node" => self.core.id.clone(), "result" => result)
            .increment(1);
    }
}
