//! Compact one-shot tasks: a task is one field of a bucket hash ([`Keys::tasks`]) plus its due
//! entry, with no job hash and no jobs-index entry, and stays so while its firing runs and
//! after it succeeds (its lease, then its history record, are all its run adds). A change
//! (pause, trigger, update), a failed run or a takeover expands it into a job hash
//! (task_lib.lua).
//! Reads here see both forms; jobs of the earlier layout (every task a job hash) are read,
//! claimed and changed as before.

use redis::AsyncCommands;

use super::*;
use crate::error::{Error, Result};
use crate::job::JobSpec;

script!(EXPAND, "task_lib.lua" + "expand.lua");

/// Buckets read per round trip while listing compact tasks.
const LIST_BUCKETS: u32 = 1_024;

/// A compact task's record (`<generation>|<created ms>|<spec JSON without its id>`), read.
#[derive(Debug, Clone)]
pub(super) struct Compact {
    pub(super) generation: u64,
    pub(super) created_ms: i64,
    pub(super) spec: JobSpec,
}

impl Compact {
    /// Decode the record of task `id`.
    pub(super) fn decode(id: &str, record: &str) -> Result<Self> {
        let corrupt = || Error::Corrupt(format!("compact task '{id}': record '{record}'"));
        let mut parts = record.splitn(3, '|');
        let generation = parts
            .next()
            .and_then(|g| g.parse().ok())
            .ok_or_else(corrupt)?;
        let created_ms = parts
            .next()
            .and_then(|c| c.parse().ok())
            .ok_or_else(corrupt)?;
        let rest = parts
            .next()
            .and_then(|s| s.strip_prefix('{'))
            .ok_or_else(corrupt)?;
        // The id was left out of the spec JSON (it is the field's name): put it back first.
        let json = format!("{{\"id\":{},{rest}", serde_json::to_string(id)?);
        Ok(Self {
            generation,
            created_ms,
            spec: serde_json::from_str(&json)?,
        })
    }

    /// The record a compact task reads as (version 1): pending (`next_ms`: its due entry),
    /// active and nothing run yet; or claimed (`claimed`: the firing of its run, from its
    /// lease or its history), finished with one run. What task_lib.lua expands it into.
    pub(super) fn into_record(self, next_ms: Option<i64>, claimed: Option<&str>) -> JobRecord {
        let last_ms = match next_ms {
            Some(_) => None,
            None => claimed.and_then(|f| f.rsplit_once(':')?.1.parse().ok()),
        };
        JobRecord {
            spec: self.spec,
            version: 1,
            status: if next_ms.is_some() {
                JobStatus::Active
            } else {
                JobStatus::Finished
            },
            next_ms,
            last_ms,
            created_ms: self.created_ms,
            updated_ms: self.created_ms,
            runs: u64::from(last_ms.is_some()),
            failures: 0,
            missed: 0,
            skipped: 0,
            dead: 0,
            triggered: 0,
            active: last_ms.and(claimed).map(str::to_string),
            run_limits: Default::default(),
            paused_ms: None,
        }
    }
}

impl Store {
    /// Expand a compact task into its job hash (nothing to do for a job hash or no
    /// job), so a change that works on job hashes applies to it. Returns whether it did.
    pub async fn expand(&self, id: &str) -> Result<bool> {
        let k = self.job_keys(id);
        let n: i64 = EXPAND
            .key(k.job(id))
            .key(k.task_bucket(id))
            .key(k.due())
            .key(k.jobs())
            .key(k.task_count())
            .key(k.running())
            .key(k.runs(id))
            .arg(id)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(n == 1)
    }

    /// Compact pending tasks, summed over the shards.
    pub async fn compact_task_count(&self) -> Result<u64> {
        let counts = futures::future::try_join_all(self.shards.iter().map(|k| {
            let mut conn = self.conn.clone();
            async move { conn.get::<_, Option<i64>>(k.task_count()).await }
        }))
        .await?;
        Ok(counts.into_iter().flatten().map(|c| c.max(0) as u64).sum())
    }

    /// Whether `id` is a compact task.
    pub(super) async fn is_compact(&self, id: &str) -> Result<bool> {
        let k = self.job_keys(id);
        Ok(self.conn.clone().hexists(k.task_bucket(id), id).await?)
    }

    /// Compact task ids after `after` (exclusive; None: from the first), at most `limit`, in
    /// listing order: by bucket, then by id within a bucket (every shard's bucket of that
    /// number merged).
    pub(super) async fn compact_ids(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>> {
        let mut ids = Vec::new();
        if limit == 0 || self.compact_task_count().await? == 0 {
            return Ok(ids);
        }
        let mut bucket = after.map_or(0, task_bucket);
        while ids.len() < limit && bucket < TASK_BUCKETS {
            let end = (bucket + LIST_BUCKETS).min(TASK_BUCKETS);
            // One pipeline per shard (a pipeline stays within one slot on Redis Cluster).
            let names: Vec<Vec<Vec<String>>> =
                futures::future::try_join_all(self.shards.iter().map(|k| {
                    let mut pipe = redis::pipe();
                    for b in bucket..end {
                        pipe.hkeys(k.tasks(b));
                    }
                    let mut conn = self.conn.clone();
                    async move { pipe.query_async::<Vec<Vec<String>>>(&mut conn).await }
                }))
                .await?;
            let span = (end - bucket) as usize;
            for offset in 0..span {
                let mut here: Vec<String> = names
                    .iter()
                    .filter_map(|shard| shard.get(offset))
                    .flatten()
                    .filter(|id| {
                        after.is_none_or(|a| {
                            task_bucket(a) != bucket + offset as u32 || id.as_str() > a
                        })
                    })
                    .cloned()
                    .collect();
                here.sort_unstable();
                ids.extend(here);
                if ids.len() >= limit {
                    ids.truncate(limit);
                    return Ok(ids);
                }
            }
            bucket = end;
        }
        Ok(ids)
    }
}
