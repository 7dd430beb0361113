//! Fan-in: batches of tasks with a completion callback, and tasks that run after another
//! (`after_task`). Both live on one shard with what they wait for, so the script that ends a
//! task settles them in the same step (see `lua/fanin_lib.lua`).

use serde::{Deserialize, Serialize};

use super::Store;
use crate::error::{Error, Result};
use crate::job::JobSpec;

script!(AFTER, "fanin_lib.lua" + "after.lua");

/// How a task created with `after_task` stands (after.lua's answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterReply {
    /// Its id is taken: nothing was written.
    Exists,
    /// The task it names does not exist (or its record is gone after its retention).
    Missing,
    /// The task it names is a recurring job, not a one-shot task.
    Recurring,
    /// It waits for that task's end.
    Waiting,
    /// That task had succeeded already: it is due at this instant (ms).
    Due(i64),
    /// That task had ended otherwise: it went to its dead letters at once.
    Dead,
}

/// A batch as Redis keeps it (`{tag}:batch:<id>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchStatus {
    /// The batch's id.
    pub id: String,
    /// Tasks in the batch.
    pub total: u64,
    /// Tasks that succeeded.
    pub succeeded: u64,
    /// Tasks that went to their dead letters.
    pub died: u64,
    /// Tasks cancelled or deleted before they ended.
    pub cancelled: u64,
    /// Tasks not ended yet.
    pub pending: u64,
    /// When it was created (ms).
    pub created_ms: i64,
    /// When its last task ended and its callback was queued (ms); none while tasks are pending.
    pub completed_ms: Option<i64>,
}

impl Store {
    /// Create a task that runs after task `awaited` succeeded (see after.lua); `delay_ms` is
    /// its delay after that success.
    pub async fn insert_after(
        &self,
        spec: &JobSpec,
        awaited: &str,
        delay_ms: i64,
        created_ms: i64,
    ) -> Result<AfterReply> {
        let k = self.shards.for_job(&spec.id);
        let reply: Vec<redis::Value> = AFTER
            .key(k.job(&spec.id))
            .key(k.due())
            .key(k.jobs())
            .key(k.generation())
            .key(k.job(awaited))
            .key(k.task_bucket(awaited))
            .key(k.runs(awaited))
            .key(k.task_bucket(&spec.id))
            .arg(&spec.id)
            .arg(serde_json::to_string(spec)?)
            .arg(created_ms)
            .arg(awaited)
            .arg(delay_ms)
            .arg(k.changes())
            .invoke_async(&mut self.conn.clone())
            .await?;
        self.replicate(k).await;
        let text = |v: &redis::Value| redis::from_redis_value_ref::<String>(v).unwrap_or_default();
        Ok(match reply.first().map(text).as_deref() {
            Some("exists") => AfterReply::Exists,
            Some("missing") => AfterReply::Missing,
            Some("recurring") => AfterReply::Recurring,
            Some("waiting") => AfterReply::Waiting,
            Some("dead") => AfterReply::Dead,
            Some("due") => AfterReply::Due(
                reply
                    .get(1)
                    .map(text)
                    .and_then(|t| t.parse().ok())
                    .unwrap_or_default(),
            ),
            other => return Err(Error::Corrupt(format!("after reply {other:?}"))),
        })
    }

    /// Create the tasks of a batch with a completion callback, all on one shard, and the
    /// batch's record, in one `insert.lua` call: the record's `total` is what was created.
    /// `callback` is the outbox entry (JSON) queued when the last task ends.
    pub async fn insert_batch(
        &self,
        batch_id: &str,
        jobs: &[(JobSpec, Option<i64>)],
        callback: &str,
        retention_ms: i64,
        created_ms: i64,
    ) -> Result<usize> {
        let k = self.shards.for_job(batch_id);
        debug_assert!(
            jobs.iter()
                .all(|(s, _)| self.shards.of(&s.id) == self.shards.of(batch_id))
        );
        let mut inv = self.insert_call(k, jobs, created_ms)?;
        inv.arg(batch_id).arg(callback).arg(retention_ms);
        let created: Vec<String> = inv.invoke_async(&mut self.conn.clone()).await?;
        self.replicate(k).await;
        Ok(created.len())
    }

    /// A batch's counts; None when there is no such batch (or it expired after its
    /// retention).
    pub async fn get_batch(&self, id: &str) -> Result<Option<BatchStatus>> {
        let k = self.shards.for_job(id);
        let f: Vec<Option<i64>> = redis::cmd("HMGET")
            .arg(k.batch(id))
            .arg(&["total", "ok", "dead", "cancelled", "created", "done_ms"])
            .query_async(&mut self.conn.clone())
            .await?;
        let Some(total) = f[0] else {
            return Ok(None);
        };
        let n = |i: usize| f[i].unwrap_or(0).max(0) as u64;
        let total = total.max(0) as u64;
        Ok(Some(BatchStatus {
            id: id.to_string(),
            total,
            succeeded: n(1),
            died: n(2),
            cancelled: n(3),
            pending: total.saturating_sub(n(1) + n(2) + n(3)),
            created_ms: f[4].unwrap_or(0),
            completed_ms: f[5],
        }))
    }
}
