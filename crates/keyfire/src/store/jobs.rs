//! Jobs: create, change, pause, delete, trigger, read.

use std::collections::HashMap;

use futures::{StreamExt, TryStreamExt};
use redis::{AsyncCommands, FromRedisValue, Value};

use super::tasks::Compact;
use super::*;
use crate::error::{Error, Result};
use crate::job::{Dedup, JobSpec};

script!(UPSERT, "task_lib.lua" + "ledger_lib.lua" + "upsert.lua");
script!(INSERT, "insert.lua");
script!(DEBOUNCE, "task_lib.lua" + "debounce.lua");
script!(DELETE, "ledger_lib.lua" + "fanin_lib.lua" + "delete.lua");
script!(PAUSE, "ledger_lib.lua" + "pause.lua");
script!(TRIGGER, "trigger.lua");

/// Jobs per `insert.lua` call in [`Store::insert_many`], and calls in flight at once.
const INSERT_BATCH: usize = 500;
const INSERT_IN_FLIGHT: usize = 4;

impl Store {
    /// Read what a change needs: version, next firing, creation time, status, plus Redis time.
    /// A compact task reads as version 1, active with its due entry its next firing, or
    /// finished once its firing was claimed.
    pub async fn job_state(&self, id: &str) -> Result<(JobState, i64)> {
        let k = self.job_keys(id);
        let mut pipe = redis::pipe();
        pipe.cmd("HMGET")
            .arg(k.job(id))
            .arg(&["version", "next", "created", "status"])
            .hget(k.task_bucket(id), id)
            .zscore(k.due(), id)
            .cmd("TIME");
        type Fields = (Option<u64>, Option<String>, Option<i64>, Option<String>);
        type Reply = (Fields, Option<String>, Option<i64>, (i64, i64));
        let ((version, next, created, status), compact, due, time): Reply =
            pipe.query_async(&mut self.conn.clone()).await?;
        let state = match (version, compact) {
            // Claimed when its due entry is gone (see task_lib.lua).
            (None, Some(record)) => JobState {
                version: 1,
                next_ms: due,
                created_ms: Some(Compact::decode(id, &record)?.created_ms),
                status: Some(if due.is_some() {
                    JobStatus::Active
                } else {
                    JobStatus::Finished
                }),
            },
            _ => JobState {
                version: version.unwrap_or(0),
                next_ms: next.as_deref().and_then(opt_ms),
                created_ms: created,
                status: status.as_deref().map(JobStatus::parse).transpose()?,
            },
        };
        Ok((state, time_reply_ms(time)))
    }

    /// Create or replace a job if its version is still `expected`. `created_ms` is the creation
    /// instant the schedule was computed with (ignored when the job exists).
    pub async fn upsert(
        &self,
        spec: &JobSpec,
        expected: &JobState,
        next_ms: Option<i64>,
        created_ms: i64,
    ) -> Result<UpsertReply> {
        let reply = self
            .upsert_call(spec, expected, next_ms, created_ms, None)
            .await?;
        match reply_code(&reply)? {
            Some(-1) => Ok(UpsertReply::Conflict),
            _ => written(&reply),
        }
    }

    /// Create a task that names a dedup key (`spec.id` must be new and on the shard that
    /// [`Shards::of`] gives for `dedup.name`), unless the key names a task enqueued within its
    /// window: one script decides, so concurrent enqueues on any nodes create one task.
    /// `stale` is the id of a task the key named that was found deleted: the key is then
    /// taken over.
    pub async fn create_deduped(
        &self,
        spec: &JobSpec,
        next_ms: Option<i64>,
        created_ms: i64,
        dedup: &Dedup,
        stale: Option<&str>,
    ) -> Result<Deduped> {
        // The key lives under the task's shard tag: a task elsewhere would read another key.
        if self.shards.of(&spec.id) != self.shards.of(&dedup.name) {
            return Err(Error::Invalid(crate::job::ValidationError::new(
                "id",
                "a task with a dedup key must live on the key's shard",
            )));
        }
        let reply = self
            .upsert_call(
                spec,
                &JobState::default(),
                next_ms,
                created_ms,
                Some((dedup, stale.unwrap_or(""))),
            )
            .await?;
        match (reply_code(&reply)?, reply.as_slice()) {
            (Some(-2), [_, holder]) => Ok(Deduped::Duplicate(
                String::from_redis_value_ref(holder).map_err(redis::RedisError::from)?,
            )),
            (Some(-1), _) => Ok(Deduped::IdTaken),
            _ => written(&reply).map(|_| Deduped::Created),
        }
    }

    /// Apply a duplicate to the pending task `holder` its dedup key names (`debounce.lua`):
    /// `spec` and `next_ms` are the duplicate's (its own id and first firing), `held_next` the
    /// holder's next firing as read (its sentinel key goes when the instant moves). Answers
    /// `moved`, `gone`, or what it did (`kept`, `replaced`, `extended`, `replaced_extended`).
    pub async fn debounce_task(
        &self,
        holder: &str,
        held_next: Option<i64>,
        spec: &JobSpec,
        next_ms: i64,
        dedup: &Dedup,
        mode: &str,
    ) -> Result<String> {
        let k = self.job_keys(holder);
        let (what,): (String,) = DEBOUNCE
            .key(k.dedup(&dedup.name))
            .key(k.job(holder))
            .key(k.task_bucket(holder))
            .key(k.due())
            .key(k.running())
            .key(k.runs(holder))
            .key(k.jobs())
            .key(k.task_count())
            .key(k.fire(holder, held_next.unwrap_or(-1)))
            .key(k.fire(holder, next_ms))
            .arg(holder)
            .arg(mode)
            .arg(dedup.window_ms)
            .arg(serde_json::to_string(spec)?)
            .arg(next_ms)
            .arg(k.changes())
            .arg(self.horizon_ms)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(what)
    }

    async fn upsert_call(
        &self,
        spec: &JobSpec,
        expected: &JobState,
        next_ms: Option<i64>,
        created_ms: i64,
        dedup: Option<(&Dedup, &str)>,
    ) -> Result<Vec<Value>> {
        // A validated spec of a one-shot job holds `at` (`after` is resolved).
        let once = spec.at.is_some() || spec.after.is_some();
        let id = spec.id.as_str();
        let k = self.job_keys(id);
        let old_sentinel = expected
            .next_ms
            .map_or_else(|| k.fire(id, -1), |n| k.fire(id, n));
        let new_sentinel = next_ms.map_or_else(|| k.fire(id, -1), |n| k.fire(id, n));
        let mut inv = UPSERT.prepare_invoke();
        inv.key(k.job(id))
            .key(k.due())
            .key(k.jobs())
            .key(old_sentinel)
            .key(new_sentinel)
            .key(k.generation())
            .key(k.task_bucket(id))
            .key(k.task_count())
            .key(k.running())
            .key(k.runs(id))
            .key(k.skips(id))
            .arg(id)
            .arg(serde_json::to_string(spec)?)
            .arg(expected.version)
            .arg(next_ms.map(|n| n.to_string()).unwrap_or_default())
            .arg(k.changes())
            .arg(created_ms)
            .arg(if once { "1" } else { "0" })
            .arg(self.horizon_ms)
            .arg(self.ledger.opts());
        if let Some((dedup, stale)) = dedup {
            inv.key(k.dedup(&dedup.name))
                .arg(dedup.window_ms)
                .arg(stale);
        }
        Ok(inv.invoke_async(&mut self.conn.clone()).await?)
    }

    /// An `insert.lua` call creating `jobs` (all of shard `k`), each with its first firing.
    pub(super) fn insert_call<'a>(
        &self,
        k: &Keys,
        jobs: impl IntoIterator<Item = &'a (JobSpec, Option<i64>)>,
        created_ms: i64,
    ) -> Result<redis::ScriptInvocation<'static>> {
        let mut inv = INSERT.prepare_invoke();
        inv.key(k.due())
            .key(k.jobs())
            .key(k.generation())
            .key(k.task_count())
            .arg(k.changes())
            .arg(created_ms)
            .arg(self.horizon_ms);
        for (spec, next) in jobs {
            let id = spec.id.as_str();
            inv.key(k.job(id))
                .key(k.fire(id, next.unwrap_or(-1)))
                .key(k.task_bucket(id))
                .arg(id)
                .arg(serde_json::to_string(spec)?)
                .arg(next.map(|n| n.to_string()).unwrap_or_default())
                .arg(if spec.at.is_some() { "1" } else { "0" });
        }
        Ok(inv)
    }

    /// Create many new jobs (validated specs with their first firing): per shard, batches of
    /// up to [`INSERT_BATCH`] in one `insert.lua` call each, a few calls in flight. A job whose
    /// id exists already is left as it is. Returns how many were created.
    pub async fn insert_many(
        &self,
        jobs: &[(JobSpec, Option<i64>)],
        created_ms: i64,
    ) -> Result<usize> {
        // One call touches one shard's slot.
        let mut groups: Vec<Vec<&(JobSpec, Option<i64>)>> = vec![Vec::new(); self.shards.len()];
        for job in jobs {
            groups[self.shards.of(&job.0.id)].push(job);
        }
        let mut calls = Vec::new();
        for (shard, group) in groups.iter().enumerate() {
            let k = self.shards.keys(shard);
            for chunk in group.chunks(INSERT_BATCH) {
                calls.push(self.insert_call(k, chunk.iter().copied(), created_ms)?);
            }
        }
        let created: Vec<Vec<String>> = futures::stream::iter(calls.iter().map(|inv| {
            let mut conn = self.conn.clone();
            async move { inv.invoke_async::<Vec<String>>(&mut conn).await }
        }))
        .buffer_unordered(INSERT_IN_FLIGHT)
        .try_collect()
        .await?;
        Ok(created.iter().map(Vec::len).sum())
    }

    /// Delete a job; `next_ms` is the pending firing read just before (its sentinel goes too).
    pub async fn delete(&self, id: &str, next_ms: Option<i64>) -> Result<bool> {
        self.delete_if(id, next_ms, false).await
    }

    /// Delete a job only if it is finished (retention cleanup of one-shot tasks).
    pub async fn delete_finished(&self, id: &str) -> Result<bool> {
        self.delete_if(id, None, true).await
    }

    async fn delete_if(
        &self,
        id: &str,
        next_ms: Option<i64>,
        only_if_finished: bool,
    ) -> Result<bool> {
        let k = self.job_keys(id);
        let n: i64 = DELETE
            .key(k.job(id))
            .key(k.due())
            .key(k.jobs())
            .key(k.fire(id, next_ms.unwrap_or(-1)))
            .key(k.runs(id))
            .key(k.dead(id))
            .key(k.done())
            .key(k.retry())
            .key(k.running())
            .key(k.attempts())
            .key(k.task_bucket(id))
            .key(k.task_count())
            .key(k.skips(id))
            .arg(id)
            .arg(k.changes())
            .arg(if only_if_finished { "1" } else { "0" })
            .arg(self.ledger.opts())
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(n == 1)
    }

    /// Pause (`resume_next` None) or resume a job. Returns (changed, status after, next).
    pub async fn pause_resume(
        &self,
        id: &str,
        resume: bool,
        sentinel_ms: Option<i64>,
    ) -> Result<(bool, Option<JobStatus>, Option<i64>)> {
        self.expand(id).await?;
        let k = self.job_keys(id);
        let (changed, status, next): (i64, String, String) = PAUSE
            .key(k.job(id))
            .key(k.due())
            .key(k.fire(id, sentinel_ms.unwrap_or(-1)))
            .key(k.skips(id))
            .arg(id)
            .arg(if resume { "resume" } else { "pause" })
            .arg(
                sentinel_ms
                    .filter(|_| resume)
                    .map(|n| n.to_string())
                    .unwrap_or_default(),
            )
            .arg(k.changes())
            .arg(self.horizon_ms)
            .arg(self.ledger.opts())
            .invoke_async(&mut self.conn.clone())
            .await?;
        let status = match status.as_str() {
            "missing" => None,
            s => Some(JobStatus::parse(s)?),
        };
        Ok((changed == 1, status, opt_ms(&next)))
    }

    /// Queue a run of the job now (attempt 1), without moving its schedule. Returns the
    /// firing id, or None when there is no such job.
    pub async fn trigger(&self, job_id: &str) -> Result<Option<String>> {
        self.expand(job_id).await?;
        let k = self.job_keys(job_id);
        Ok(TRIGGER
            .key(k.job(job_id))
            .key(k.retry())
            .key(k.attempts())
            .key(k.due())
            .arg(job_id)
            .arg(k.changes())
            .invoke_async(&mut self.conn.clone())
            .await?)
    }

    /// Read one job (a compact task too).
    pub async fn get_job(&self, id: &str) -> Result<Option<JobRecord>> {
        Ok(self.read_jobs(&[id]).await?.pop().flatten())
    }

    /// The version, spec and creation instant of a job (what a claimer needs), or None when it is gone.
    pub async fn job_spec(&self, id: &str) -> Result<Option<StoredSpec>> {
        let mut specs = self.job_specs(&[id]).await?;
        Ok(specs.pop().flatten())
    }

    /// [`Store::job_spec`] of several jobs in one round trip, in order (two when some are
    /// job hashes: compact tasks, the common case of a firing's claim, are read first).
    pub async fn job_specs(&self, ids: &[&str]) -> Result<Vec<Option<StoredSpec>>> {
        self.per_shard(ids, |id| id, |shard, part| self.shard_specs(shard, part))
            .await
    }

    async fn shard_specs(&self, shard: usize, ids: Vec<&&str>) -> Result<Vec<Option<StoredSpec>>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let k = self.shards.keys(shard);
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.hget(k.task_bucket(id), **id);
        }
        let records: Vec<Option<String>> = pipe.query_async(&mut self.conn.clone()).await?;
        let mut out: Vec<Option<StoredSpec>> = Vec::with_capacity(ids.len());
        let mut hashes = redis::pipe();
        for (id, record) in ids.iter().zip(&records) {
            match record {
                Some(r) => {
                    let c = Compact::decode(id, r)?;
                    out.push(Some(StoredSpec {
                        version: 1,
                        generation: c.generation,
                        spec: c.spec,
                        created_ms: c.created_ms,
                        compact: true,
                    }));
                }
                None => {
                    hashes
                        .cmd("HMGET")
                        .arg(k.job(id))
                        .arg(&["version", "spec", "created", "gen"]);
                    out.push(None);
                }
            }
        }
        if records.iter().all(Option::is_some) {
            return Ok(out);
        }
        type Fields = (Option<u64>, Option<String>, Option<i64>, Option<u64>);
        let rows: Vec<Fields> = hashes.query_async(&mut self.conn.clone()).await?;
        let mut rows = rows.into_iter();
        for (slot, record) in out.iter_mut().zip(&records) {
            if record.is_some() {
                continue;
            }
            let Some((version, spec, created, generation)) = rows.next() else {
                break;
            };
            if let (Some(version), Some(s)) = (version, spec) {
                *slot = Some(StoredSpec {
                    version,
                    generation: generation.unwrap_or(0),
                    spec: serde_json::from_str(&s)?,
                    created_ms: created.unwrap_or(0),
                    compact: false,
                });
            }
        }
        Ok(out)
    }

    /// Job ids in listing order after `cursor` (exclusive: the last id of the previous page),
    /// at most `limit`. Jobs come first, in id order (the first `limit` of each shard,
    /// merged); then the compact tasks, bucket by bucket (see [`Keys::tasks`]). A cursor that
    /// is a compact task continues in its bucket. A compact task stays in its bucket through
    /// its run; one that is changed (or whose run failed) between two pages moves from the
    /// second part to the first.
    pub async fn list_ids(&self, after: Option<&str>, limit: usize) -> Result<Vec<String>> {
        if let Some(a) = after
            && self.is_compact(a).await?
        {
            return self.compact_ids(Some(a), limit).await;
        }
        let mut ids = self.index_ids(after, limit).await?;
        if ids.len() < limit {
            ids.extend(self.compact_ids(None, limit - ids.len()).await?);
        }
        Ok(ids)
    }

    /// Ids of the jobs index after `after`, in id order, at most `limit`.
    async fn index_ids(&self, after: Option<&str>, limit: usize) -> Result<Vec<String>> {
        let min = match after {
            Some(a) => format!("({a}"),
            None => "-".to_string(),
        };
        let pages = futures::future::try_join_all(self.shards.iter().map(|k| {
            let mut conn = self.conn.clone();
            let (key, min) = (k.jobs(), min.clone());
            async move {
                conn.zrangebylex_limit::<_, _, _, Vec<String>>(key, min, "+", 0, limit as isize)
                    .await
            }
        }))
        .await?;
        let mut ids: Vec<String> = pages.into_iter().flatten().collect();
        ids.sort_unstable();
        ids.truncate(limit);
        Ok(ids)
    }

    /// Read many jobs in one round trip (missing ones are skipped).
    pub async fn get_jobs(&self, ids: &[String]) -> Result<Vec<JobRecord>> {
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        Ok(self.read_jobs(&ids).await?.into_iter().flatten().collect())
    }

    /// Read many jobs in one round trip per shard, in order: a job hash, or a compact task
    /// (its record and due entry), or None.
    async fn read_jobs(&self, ids: &[&str]) -> Result<Vec<Option<JobRecord>>> {
        self.per_shard(
            ids,
            |id| id,
            |shard, part| async move {
                if part.is_empty() {
                    return Ok(Vec::new());
                }
                let k = self.shards.keys(shard);
                let mut pipe = redis::pipe();
                for id in &part {
                    pipe.hgetall(k.job(id))
                        .hget(k.task_bucket(id), **id)
                        .zscore(k.due(), **id)
                        .lindex(k.runs(id), 0);
                }
                type Row = (
                    HashMap<String, String>,
                    Option<String>,
                    Option<i64>,
                    Option<String>,
                );
                let rows: Vec<Row> = pipe.query_async(&mut self.conn.clone()).await?;
                // A compact task whose firing was claimed and has no history yet runs: its
                // lease names the firing (read only when there is one such task).
                let running = rows.iter().any(|(map, compact, due, last)| {
                    map.is_empty() && compact.is_some() && due.is_none() && last.is_none()
                });
                let leases: Vec<String> = if running {
                    self.conn.clone().zrange(k.running(), 0, -1).await?
                } else {
                    Vec::new()
                };
                part.iter()
                    .zip(rows)
                    .map(|(id, (map, compact, due, last))| match compact {
                        _ if !map.is_empty() => decode_job(&map).map(Some),
                        Some(r) => {
                            let claimed = match &last {
                                Some(run) => {
                                    Some(serde_json::from_str::<RunRecord>(run)?.firing_id)
                                }
                                None => leases
                                    .iter()
                                    .map(|m| parse_lease_member(m).0)
                                    .find(|f| f.rsplit_once(':').is_some_and(|(j, _)| j == **id))
                                    .map(str::to_string),
                            };
                            let c = Compact::decode(id, &r)?;
                            Ok(Some(c.into_record(due, claimed.as_deref())))
                        }
                        None => Ok(None),
                    })
                    .collect()
            },
        )
        .await
    }

    /// Add handler names to the set of known handlers (only those missing: a full Redis
    /// refuses even an SADD of members it has, and a node must start there).
    pub async fn register_handlers(&self, names: &[String]) -> Result<()> {
        if names.is_empty() {
            return Ok(());
        }
        let key = self.keys().handlers();
        let known: Vec<bool> = redis::cmd("SMISMEMBER")
            .arg(&key)
            .arg(names)
            .query_async(&mut self.conn.clone())
            .await?;
        let missing: Vec<&String> = names
            .iter()
            .zip(known)
            .filter(|(_, k)| !k)
            .map(|(n, _)| n)
            .collect();
        if !missing.is_empty() {
            let _: i64 = self.conn.clone().sadd(key, missing).await?;
        }
        Ok(())
    }

    /// Handler names registered by any node.
    pub async fn handlers(&self) -> Result<Vec<String>> {
        Ok(self.conn.clone().smembers(self.keys().handlers()).await?)
    }
}

/// What [`Store::create_deduped`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deduped {
    /// The task was created and the dedup key names it for its window.
    Created,
    /// The dedup key names this task, enqueued within the window: nothing was written.
    Duplicate(String),
    /// A job with the new task's id exists already: nothing was written.
    IdTaken,
}

fn reply_code(reply: &[Value]) -> Result<Option<i64>> {
    Ok(reply
        .first()
        .map(i64::from_redis_value_ref)
        .transpose()
        .map_err(redis::RedisError::from)?)
}

fn written(reply: &[Value]) -> Result<UpsertReply> {
    match (reply_code(reply)?, reply) {
        (Some(v), [_, status, next, _]) if v > 0 => Ok(UpsertReply::Written {
            version: v as u64,
            status: JobStatus::parse(
                &String::from_redis_value_ref(status).map_err(redis::RedisError::from)?,
            )?,
            next_ms: opt_ms(&String::from_redis_value_ref(next).map_err(redis::RedisError::from)?),
        }),
        _ => Err(Error::Corrupt(format!("upsert reply {reply:?}"))),
    }
}

fn decode_job(map: &HashMap<String, String>) -> Result<JobRecord> {
    let field = |name: &str| {
        map.get(name)
            .ok_or_else(|| Error::Corrupt(format!("job hash lacks '{name}'")))
    };
    let num = |name: &str| {
        map.get(name)
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0)
    };
    Ok(JobRecord {
        spec: serde_json::from_str(field("spec")?)?,
        version: num("version") as u64,
        status: JobStatus::parse(field("status")?)?,
        next_ms: map.get("next").and_then(|s| opt_ms(s)),
        last_ms: map.get("last").and_then(|s| opt_ms(s)),
        created_ms: num("created"),
        updated_ms: num("updated"),
        runs: num("runs") as u64,
        failures: num("failures") as u64,
        missed: num("missed") as u64,
        skipped: num("skipped") as u64,
        dead: num("dead") as u64,
        triggered: num("triggered") as u64,
        active: map
            .get("active")
            .map(|a| parse_lease_member(a).0.to_string()),
        paused_ms: map.get("paused_at").and_then(|s| opt_ms(s)),
        run_limits: RunLimitState {
            stopped: map.get("stopped").filter(|s| !s.is_empty()).cloned(),
            succeeded: num("succeeded") as u64,
            failure_streak: num("streak") as u64,
        },
    })
}
