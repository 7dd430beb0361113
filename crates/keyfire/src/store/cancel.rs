//! Cancel: stop a job's running firings, and cancel its firings not yet run.

use redis::{FromRedisValue, Value};

use super::*;
use crate::error::{Error, Result};

script!(CANCEL, "task_lib.lua" + "cancel.lua");

/// What a cancel request found (cancel.lua).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelReply {
    /// No such job.
    Missing,
    /// The job has nothing running, no queued attempt and no pending one-shot instant.
    Nothing,
    /// Firings told to stop (their runs record `cancelled` when they return), and firings
    /// cancelled before they ran (recorded `cancelled` already).
    Cancelled {
        /// Running firings, flagged and announced to the nodes running them.
        stopping: Vec<String>,
        /// Queued attempts and a one-shot job's pending instant, removed.
        cancelled: Vec<String>,
    },
}

impl Store {
    /// Cancel what job `id` has in progress (see cancel.lua), in one script.
    pub async fn cancel(&self, id: &str) -> Result<CancelReply> {
        let k = self.job_keys(id);
        let reply: Vec<Value> = CANCEL
            .key(k.job(id))
            .key(k.task_bucket(id))
            .key(k.due())
            .key(k.jobs())
            .key(k.task_count())
            .key(k.running())
            .key(k.runs(id))
            .key(k.retry())
            .key(k.attempts())
            .key(k.cancels())
            .arg(id)
            .arg(k.changes())
            .invoke_async(&mut self.conn.clone())
            .await?;
        self.replicate(k).await;
        let text = |v: &Value| String::from_redis_value_ref(v).ok();
        let list = |v: &Value| Vec::<String>::from_redis_value_ref(v).unwrap_or_default();
        match reply.as_slice() {
            [tag] if text(tag).as_deref() == Some("missing") => Ok(CancelReply::Missing),
            [tag] if text(tag).as_deref() == Some("none") => Ok(CancelReply::Nothing),
            [tag, stopping, cancelled] if text(tag).as_deref() == Some("ok") => {
                Ok(CancelReply::Cancelled {
                    stopping: list(stopping),
                    cancelled: list(cancelled),
                })
            }
            other => Err(Error::Corrupt(format!("cancel reply {other:?}"))),
        }
    }
}
