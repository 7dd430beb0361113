//! Cancel: stop a job's running firings, and cancel its firings not yet run.

use redis::{FromRedisValue, Value};

use super::*;
use crate::error::{Error, Result};

script!(CANCEL, "task_lib.lua" + "fanin_lib.lua" + "cancel.lua");
// The renewal of a running attempt that also reads its cancel flag (renew.lua, with the
// cancels hash).
script!(RENEW_RUN, "renew.lua");

/// What a running attempt's renewal found ([`Store::renew_run`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// Renewed.
    Renewed,
    /// Renewed, and a cancel request flagged the firing: stop it.
    Cancelled,
    /// The lease is no longer this attempt's (expired and taken over).
    Lost,
}

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
    /// Extend a running attempt's lease, as [`Store::renew`] does (`claimed_ms` names it),
    /// and say whether a cancel request flagged its firing: a node that missed the request's
    /// announcement stops the run at its next renewal.
    pub async fn renew_run(
        &self,
        job_id: &str,
        at_ms: i64,
        attempt: u32,
        claimed_ms: i64,
        node: &str,
        lease_ms: i64,
    ) -> Result<Renewal> {
        let k = self.job_keys(job_id);
        let n: i64 = RENEW_RUN
            .key(k.running())
            .key(k.attempts())
            .key(k.job(job_id))
            .key(k.cancels())
            .arg(node)
            .arg(firing_id(job_id, at_ms))
            .arg(lease_ms)
            .arg(attempt)
            .arg(claimed_ms)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(match n {
            0 => Renewal::Lost,
            2 => Renewal::Cancelled,
            _ => Renewal::Renewed,
        })
    }

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
