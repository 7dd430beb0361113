//! The only code that talks to Redis: key names ([`Keys`]), the scripts, typed replies.

mod conn;
mod keys;
pub mod notify;
mod ops;
mod scripts;

use std::collections::HashMap;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use redis::{AsyncCommands, FromRedisValue, ParsingError, Value};
use serde::{Deserialize, Serialize};

pub use conn::{Conn, Mode, client_addr, data_client, redact_url, sentinel_client};
pub use keys::{CLUSTER_SLOTS, Keys, Shards, firing_id, parse_firing_id, slot_of, stable_hash};
pub use ops::{LiveNode, Totals, parse_info, redis_time_ms, time_reply_ms};
use scripts::{
    CLAIM, CLAIM_RETRY, COMPLETE, DEAD, DELETE, HEARTBEAT, INSERT, PAUSE, PROMOTE, RECOVER, RENEW,
    TRIGGER, UPSERT,
};

use crate::error::{Error, Result};
use crate::job::JobSpec;

/// Jobs per `insert.lua` call in [`Store::insert_many`], and calls in flight at once.
const INSERT_BATCH: usize = 500;
const INSERT_IN_FLIGHT: usize = 4;

/// How long a shard stops waiting for its replicas after they fell short (see
/// `Store::replicate`).
pub const WAIT_BACKOFF: std::time::Duration = std::time::Duration::from_secs(5);

/// Default sentinel horizon: firings due within a minute hold a sentinel key.
pub const DEFAULT_SENTINEL_HORIZON_MS: i64 = 60_000;

/// The key-layout version this build writes for sharded data (more than one shard). Layout 1
/// (one shard under the meta tag) is the same as layout 2 with one shard, so data of one
/// shard keeps layout 1 and nodes of older builds can still run against it during an
/// upgrade.
pub const LAYOUT_VERSION: i64 = 2;

/// The key-layout versions this build understands.
pub const LAYOUTS_UNDERSTOOD: [i64; 2] = [1, 2];

/// A job's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Scheduled: it has a pending firing.
    Active,
    /// Kept, but fires nothing until resumed.
    Paused,
    /// No firing left (a one-shot that ran, or past its window's end).
    Finished,
}

impl JobStatus {
    fn parse(s: &str) -> Result<Self> {
        match s {
            "active" => Ok(Self::Active),
            "paused" => Ok(Self::Paused),
            "finished" => Ok(Self::Finished),
            other => Err(Error::Corrupt(format!("unknown job status '{other}'"))),
        }
    }

    /// The status as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Paused => "paused",
            Self::Finished => "finished",
        }
    }
}

/// A job as stored: its spec and its state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// The job as declared (with `after` resolved).
    pub spec: JobSpec,
    /// Bumped by every upsert.
    pub version: u64,
    /// Lifecycle state.
    pub status: JobStatus,
    /// Next pending firing (ms, Redis time).
    pub next_ms: Option<i64>,
    /// Instant of the last claimed firing.
    pub last_ms: Option<i64>,
    /// Creation instant (ms, Redis time).
    pub created_ms: i64,
    /// Last change (ms, Redis time).
    pub updated_ms: i64,
    /// Runs completed.
    pub runs: u64,
    /// Runs that failed.
    pub failures: u64,
    /// Firings skipped under the misfire policy.
    pub missed: u64,
    /// Firings skipped because the previous run still ran (overlap `forbid`).
    pub skipped: u64,
    /// Firings that ended in the dead letters.
    pub dead: u64,
    /// Manual triggers.
    pub triggered: u64,
    /// The firing whose run is in progress (the latest one claimed), if any.
    pub active: Option<String>,
    /// When the job was last paused (ms, Redis time).
    pub paused_ms: Option<i64>,
}

/// The fields of a job hash that [`Store::job_state`] reads before a change.
#[derive(Debug, Clone, Default)]
pub struct JobState {
    /// 0 when the job does not exist.
    pub version: u64,
    /// Next firing, if pending.
    pub next_ms: Option<i64>,
    /// Creation instant, if it exists.
    pub created_ms: Option<i64>,
    /// Status, if it exists.
    pub status: Option<JobStatus>,
}

/// What a heartbeat says of its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beat {
    /// Alive and in the live set.
    Alive,
    /// Out of the live set (it owns no firings) but alive: it drains its runs, which are
    /// not to be taken from it.
    Draining,
    /// Gone: nothing of it is left to take over.
    Gone,
}

/// A run in progress, from its lease: the running ZSET's entry (lease expiry) and the lease
/// record in the attempts hash, `<attempt>:<claimed ms>:<node>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The job.
    pub job_id: String,
    /// The firing's scheduled instant (ms).
    pub at_ms: i64,
    /// When the lease expires unless renewed (ms, Redis time).
    pub expiry_ms: i64,
    /// The attempt that runs (0 when the record does not say: an earlier layout's).
    pub attempt: u32,
    /// When it was claimed (ms, Redis time; 0 when the record does not say).
    pub claimed_ms: i64,
    /// The node that holds it (None when the record does not say).
    pub node: Option<String>,
}

/// A lease record, `<attempt>:<claimed ms>:<node>`, as (attempt, claimed ms, node); None
/// for a queued attempt's record (a bare attempt number).
pub fn parse_lease_record(record: &str) -> Option<(u32, i64, &str)> {
    let mut parts = record.splitn(3, ':');
    let attempt = parts.next()?.parse().ok()?;
    let claimed = parts.next()?.parse().ok()?;
    Some((attempt, claimed, parts.next()?))
}

/// One run of a firing, as kept in the job's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// `<job id>:<instant ms>`.
    pub firing_id: String,
    /// The scheduled instant (ms).
    pub scheduled_ms: i64,
    /// 1 for the first run of a firing.
    pub attempt: u32,
    /// The node that ran it.
    pub node: String,
    /// When the claim succeeded (ms, Redis time).
    #[serde(default)]
    pub claimed_ms: i64,
    /// When the handler started (ms, Redis time as the node estimates it).
    #[serde(default)]
    pub started_ms: i64,
    /// `ok`, `failed`, `timeout`, `cancelled` (overlap `replace`) or `lost` (lease expired).
    pub outcome: String,
    /// The handler's error, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When the run ended (ms, Redis time); filled in by Redis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<i64>,
    /// What became of the firing: `done`, `retry` or `dead`; filled in by Redis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fate: Option<String>,
    /// When the next attempt is due, if one was scheduled; filled in by Redis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at_ms: Option<i64>,
}

/// A firing that used up its attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// `<job id>:<instant ms>`.
    pub firing_id: String,
    /// The job.
    pub job_id: String,
    /// The scheduled instant (ms).
    #[serde(default)]
    pub scheduled_ms: i64,
    /// Attempts made.
    pub attempts: u32,
    /// The last error.
    #[serde(default)]
    pub error: Option<String>,
    /// When it was moved here (ms, Redis time); filled in by Redis.
    #[serde(default)]
    pub failed_ms: i64,
}

/// What became of a firing after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Finished (success, or cancelled by a replacing run).
    Done,
    /// The next attempt is scheduled.
    Retry,
    /// Attempts used up: in the dead letters.
    Dead,
    /// A newer attempt of this firing exists; this outcome was not recorded.
    Fenced,
    /// The job was deleted while the attempt ran; nothing was recorded.
    Gone,
}

/// The reply of the claim script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimReply {
    /// This node holds the firing; `now_ms` is Redis time at the claim.
    Claimed {
        /// Redis time of the claim.
        now_ms: i64,
        /// The attempt granted.
        attempt: u32,
    },
    /// Claimed already, or the job changed, was paused or deleted: nothing to do.
    Stale,
    /// The instant is still `wait_ms` away by Redis's clock.
    Early {
        /// How long until it is due.
        wait_ms: i64,
    },
    /// The job changed to this version; recompute the next firing with its spec.
    VersionChanged {
        /// The stored version.
        version: u64,
    },
    /// The computed next firing is older than the misfire tolerance; recompute from `now_ms`.
    Misfire {
        /// Redis time.
        now_ms: i64,
    },
    /// A run of this firing holds its lock.
    Locked,
    /// Skipped under the misfire policy (recorded as missed).
    Missed,
    /// Skipped: the job's previous run still runs (overlap `forbid`).
    Overlapped,
    /// Dropped: the job is paused or gone.
    Dropped,
}

fn parse_err(what: &str, v: &Value) -> ParsingError {
    ParsingError::from(format!("unexpected {what} reply: {v:?}"))
}

impl FromRedisValue for ClaimReply {
    fn from_redis_value(v: Value) -> std::result::Result<Self, ParsingError> {
        let items: Vec<Value> = Vec::from_redis_value(v.clone())?;
        let (code, arg) = match items.as_slice() {
            [code, arg, ..] => (i64::from_redis_value_ref(code)?, arg),
            _ => return Err(parse_err("claim", &v)),
        };
        let num = || i64::from_redis_value_ref(arg);
        Ok(match code {
            1 => ClaimReply::Claimed {
                now_ms: num()?,
                attempt: match items.get(2) {
                    Some(a) => u32::from_redis_value_ref(a)?,
                    None => 1,
                },
            },
            0 => ClaimReply::Stale,
            2 => ClaimReply::Early { wait_ms: num()? },
            3 => ClaimReply::VersionChanged {
                version: u64::from_redis_value_ref(arg)?,
            },
            4 => ClaimReply::Misfire { now_ms: num()? },
            5 => ClaimReply::Locked,
            6 => ClaimReply::Missed,
            7 => ClaimReply::Overlapped,
            8 => ClaimReply::Dropped,
            _ => return Err(parse_err("claim", &v)),
        })
    }
}

/// What the upsert script did.
#[derive(Debug, Clone)]
pub enum UpsertReply {
    /// Written with this version and state.
    Written {
        /// New version.
        version: u64,
        /// Status after the write.
        status: JobStatus,
        /// Next firing.
        next_ms: Option<i64>,
    },
    /// The job's version was not the expected one.
    Conflict,
}

fn opt_ms(s: &str) -> Option<i64> {
    s.parse().ok()
}

/// One attempt's end, for [`Store::complete_many`].
#[derive(Debug, Clone, Copy)]
pub struct Completion<'a> {
    /// The job.
    pub job_id: &'a str,
    /// The run record (its `finished_ms`, `fate` and `retry_at_ms` are filled in by Redis).
    pub run: &'a RunRecord,
    /// Schedule the next attempt after this long; None: no further attempt.
    pub retry_delay_ms: Option<i64>,
}

/// A job's spec as a claimer needs it.
#[derive(Debug, Clone)]
pub struct StoredSpec {
    /// Bumped by every upsert.
    pub version: u64,
    /// Taken when the job is created; a job created again after a delete has a new one.
    pub generation: u64,
    /// The spec.
    pub spec: JobSpec,
    /// Creation instant (ms).
    pub created_ms: i64,
}

/// How much history to keep.
#[derive(Debug, Clone, Copy)]
pub struct HistoryLimits {
    /// Run records per job.
    pub history: usize,
    /// Oldest run record kept, in ms.
    pub history_max_age_ms: i64,
    /// Dead letters per job.
    pub dead: usize,
}

/// A claim request: one firing and what the claimer computed for it.
#[derive(Debug, Clone)]
pub struct ClaimArgs<'a> {
    /// The job.
    pub job_id: &'a str,
    /// The firing's instant.
    pub at_ms: i64,
    /// The job version `next_ms` was computed with.
    pub version: u64,
    /// The job's generation (a job created again after a delete has a new one).
    pub generation: u64,
    /// The job's next firing after this one.
    pub next_ms: Option<i64>,
    /// The claiming node.
    pub node: &'a str,
    /// Lease / lock lifetime.
    pub lease_ms: i64,
    /// Misfire tolerance of the job.
    pub tolerance_ms: i64,
    /// The caller applied the misfire policy: `next_ms`, `run` and `missed` stand as given.
    pub misfire_applied: bool,
    /// Run this firing (false: skip it under the misfire policy).
    pub run: bool,
    /// Firings to count as missed.
    pub missed: u64,
    /// The job's overlap policy.
    pub overlap: &'a str,
    /// Announce the next firing on the change channel when it is due within this many ms of
    /// Redis's now (or already due), so that its owner arms a timer: the node's timer
    /// horizon. One message per script call; the batch's first value counts.
    pub announce_ms: i64,
}

/// Redis access for keyfire: a cheap-to-clone handle over one multiplexed connection.
#[derive(Clone)]
pub struct Store {
    conn: Conn,
    shards: Arc<Shards>,
    /// `redis.wait_replicas` and `redis.wait_timeout` (ms), when set.
    wait: Option<(u32, u64)>,
    /// Per shard tag: do not `WAIT` before this instant (the replicas fell short lately).
    wait_off: Arc<std::sync::Mutex<HashMap<String, std::time::Instant>>>,
    /// Only firings due within this many ms hold a sentinel key (see [`Store::promote`]).
    horizon_ms: i64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("meta", self.shards.meta())
            .field("shards", &self.shards.len())
            .finish()
    }
}

impl Store {
    /// Connect as `redis` says (mode, addresses, TLS, ACL) and spread jobs over its shards.
    pub async fn open(redis: &crate::config::RedisSettings) -> Result<Self> {
        Ok(Self {
            conn: Conn::connect(redis).await?,
            shards: Arc::new(Shards::new(&redis.prefix, redis.shards as usize)),
            wait: (redis.wait_replicas > 0)
                .then_some((redis.wait_replicas, redis.wait_timeout.as_millis() as u64)),
            wait_off: Arc::default(),
            horizon_ms: DEFAULT_SENTINEL_HORIZON_MS,
        }
        .with_sentinel_horizon(redis.sentinel_horizon))
    }

    /// Connect to the standalone server at `url` and use keys under `prefix`, in one shard.
    pub async fn connect(url: &str, prefix: &str) -> Result<Self> {
        let redis = crate::config::RedisSettings {
            url: url.to_string(),
            prefix: prefix.to_string(),
            ..Default::default()
        };
        Self::open(&redis).await
    }

    /// Give only firings due within `horizon` a sentinel key; later ones live in the due ZSET
    /// alone until [`Store::promote`] gives them one.
    pub fn with_sentinel_horizon(mut self, horizon: std::time::Duration) -> Self {
        self.horizon_ms = (horizon.as_millis() as i64).max(1);
        self
    }

    /// Spread jobs over `n` shards (see [`Shards`]).
    pub fn with_shards(mut self, n: usize) -> Self {
        let prefix = self
            .shards
            .meta()
            .tag()
            .trim_matches(['{', '}'])
            .to_string();
        self.shards = Arc::new(Shards::new(&prefix, n));
        self
    }

    /// The meta key names (what belongs to no job: membership, handlers, changes, queue).
    pub fn keys(&self) -> &Keys {
        self.shards.meta()
    }

    /// The shards and their key names.
    pub fn shards(&self) -> &Shards {
        &self.shards
    }

    /// The key names of the shard a job lives on.
    pub fn job_keys(&self, job_id: &str) -> &Keys {
        self.shards.for_job(job_id)
    }

    /// A connection for commands this module has no method for (tests, tools).
    pub fn connection(&self) -> Conn {
        self.conn.clone()
    }

    /// The servers that hold data now: expired events are subscribed to on each.
    pub async fn masters(&self) -> Result<Vec<redis::Client>> {
        self.conn.masters().await
    }

    /// Redis's clock, in ms.
    pub async fn time_ms(&self) -> Result<i64> {
        redis_time_ms(&mut self.conn.clone()).await
    }

    /// Check (and on first use, write) the key-layout version; refuse a layout this build
    /// does not understand.
    ///
    /// One shard writes layout 1 (the layout of builds before sharding, so they can still
    /// join during an upgrade); more shards write layout 2 and the shard count next to it.
    /// A node configured with another shard count than the data's is refused: jobs would be
    /// looked for on the wrong shards.
    pub async fn check_layout(&self) -> Result<()> {
        let k = self.shards.meta();
        let n = self.shards.len() as i64;
        let mut c = self.conn.clone();
        let mine = if n == 1 { 1 } else { LAYOUT_VERSION };
        let mut pipe = redis::pipe();
        pipe.set_nx(k.layout(), mine).ignore();
        if n > 1 {
            // Layout 1 has no shard count: one shard.
            pipe.set_nx(k.shard_count(), n).ignore();
        }
        let (stored, shards): (i64, Option<i64>) = pipe
            .get(k.layout())
            .get(k.shard_count())
            .query_async(&mut c)
            .await?;
        if !LAYOUTS_UNDERSTOOD.contains(&stored) {
            return Err(Error::Setup(format!(
                "the data under this prefix uses key layout {stored}; this keyfire understands {LAYOUTS_UNDERSTOOD:?}: upgrade keyfire"
            )));
        }
        let shards = shards.unwrap_or(1);
        if shards != n {
            return Err(Error::Setup(format!(
                "redis.shards is {n} but the data under this prefix is spread over {shards} shards; set redis.shards = {shards}"
            )));
        }
        Ok(())
    }

    /// Read what a change needs: version, next firing, creation time, status, plus Redis time.
    pub async fn job_state(&self, id: &str) -> Result<(JobState, i64)> {
        let mut pipe = redis::pipe();
        pipe.cmd("HMGET")
            .arg(self.job_keys(id).job(id))
            .arg(&["version", "next", "created", "status"])
            .cmd("TIME");
        type Fields = (Option<u64>, Option<String>, Option<i64>, Option<String>);
        let ((version, next, created, status), time): (Fields, (i64, i64)) =
            pipe.query_async(&mut self.conn.clone()).await?;
        let state = JobState {
            version: version.unwrap_or(0),
            next_ms: next.as_deref().and_then(opt_ms),
            created_ms: created,
            status: status.as_deref().map(JobStatus::parse).transpose()?,
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
        // A validated spec of a one-shot job holds `at` (`after` is resolved).
        let once = spec.at.is_some() || spec.after.is_some();
        let id = spec.id.as_str();
        let k = self.job_keys(id);
        let old_sentinel = expected
            .next_ms
            .map_or_else(|| k.fire(id, -1), |n| k.fire(id, n));
        let new_sentinel = next_ms.map_or_else(|| k.fire(id, -1), |n| k.fire(id, n));
        let reply: Vec<Value> = UPSERT
            .key(k.job(id))
            .key(k.due())
            .key(k.jobs())
            .key(old_sentinel)
            .key(new_sentinel)
            .key(k.generation())
            .arg(id)
            .arg(serde_json::to_string(spec)?)
            .arg(expected.version)
            .arg(next_ms.map(|n| n.to_string()).unwrap_or_default())
            .arg(self.keys().changes())
            .arg(created_ms)
            .arg(if once { "1" } else { "0" })
            .arg(self.horizon_ms)
            .invoke_async(&mut self.conn.clone())
            .await?;
        let code = reply
            .first()
            .map(i64::from_redis_value_ref)
            .transpose()
            .map_err(redis::RedisError::from)?;
        match (code, reply.as_slice()) {
            (Some(-1), _) => Ok(UpsertReply::Conflict),
            (Some(v), [_, status, next, _]) => Ok(UpsertReply::Written {
                version: v as u64,
                status: JobStatus::parse(
                    &String::from_redis_value_ref(status).map_err(redis::RedisError::from)?,
                )?,
                next_ms: opt_ms(
                    &String::from_redis_value_ref(next).map_err(redis::RedisError::from)?,
                ),
            }),
            _ => Err(Error::Corrupt(format!("upsert reply {reply:?}"))),
        }
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
                let mut inv = INSERT.prepare_invoke();
                inv.key(k.due())
                    .key(k.jobs())
                    .key(k.generation())
                    .arg(self.keys().changes())
                    .arg(created_ms)
                    .arg(self.horizon_ms);
                for (spec, next) in chunk.iter().copied() {
                    let id = spec.id.as_str();
                    inv.key(k.job(id))
                        .key(k.fire(id, next.unwrap_or(-1)))
                        .arg(id)
                        .arg(serde_json::to_string(spec)?)
                        .arg(next.map(|n| n.to_string()).unwrap_or_default())
                        .arg(if spec.at.is_some() { "1" } else { "0" });
                }
                calls.push(inv);
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
            .arg(id)
            .arg(self.keys().changes())
            .arg(if only_if_finished { "1" } else { "0" })
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
        let k = self.job_keys(id);
        let (changed, status, next): (i64, String, String) = PAUSE
            .key(k.job(id))
            .key(k.due())
            .key(k.fire(id, sentinel_ms.unwrap_or(-1)))
            .arg(id)
            .arg(if resume { "resume" } else { "pause" })
            .arg(
                sentinel_ms
                    .filter(|_| resume)
                    .map(|n| n.to_string())
                    .unwrap_or_default(),
            )
            .arg(self.keys().changes())
            .arg(self.horizon_ms)
            .invoke_async(&mut self.conn.clone())
            .await?;
        let status = match status.as_str() {
            "missing" => None,
            s => Some(JobStatus::parse(s)?),
        };
        Ok((changed == 1, status, opt_ms(&next)))
    }

    /// Try to claim one firing.
    pub async fn claim(&self, a: &ClaimArgs<'_>) -> Result<ClaimReply> {
        let mut replies = self.claim_many(std::slice::from_ref(a)).await?;
        replies
            .pop()
            .ok_or_else(|| Error::Corrupt("empty claim reply".into()))
    }

    /// Try to claim several firings in one script call; one reply per firing, in order.
    /// All must be from the same node with the same lease.
    /// Firings on different shards go as one call per shard, concurrently.
    pub async fn claim_many(&self, batch: &[ClaimArgs<'_>]) -> Result<Vec<ClaimReply>> {
        self.per_shard(
            batch,
            |a| a.job_id,
            |shard, part| self.claim_shard(shard, part),
        )
        .await
    }

    async fn claim_shard(
        &self,
        shard: usize,
        batch: Vec<&ClaimArgs<'_>>,
    ) -> Result<Vec<ClaimReply>> {
        let Some(first) = batch.first() else {
            return Ok(Vec::new());
        };
        let k = self.shards.keys(shard);
        let mut inv = CLAIM.prepare_invoke();
        inv.key(k.due()).key(k.running()).key(k.attempts());
        inv.arg(first.node)
            .arg(first.lease_ms)
            .arg(self.keys().changes())
            .arg(self.horizon_ms)
            .arg(first.announce_ms);
        for a in &batch {
            inv.key(k.job(a.job_id))
                .key(k.fire(a.job_id, a.at_ms))
                .key(k.fire(a.job_id, a.next_ms.unwrap_or(-1)));
            inv.arg(a.job_id)
                .arg(a.at_ms)
                .arg(format!("{}.{}", a.generation, a.version))
                .arg(a.next_ms.map(|n| n.to_string()).unwrap_or_default())
                .arg(a.tolerance_ms)
                .arg(if a.misfire_applied { "1" } else { "0" })
                .arg(if a.run { "1" } else { "0" })
                .arg(a.missed)
                .arg(a.overlap);
        }
        let flat: Vec<Value> = inv.invoke_async(&mut self.conn.clone()).await?;
        self.replicate(k).await;
        if flat.len() != 2 * batch.len() {
            return Err(Error::Corrupt(format!(
                "claim reply of {} values",
                flat.len()
            )));
        }
        flat.chunks(2)
            .map(|pair| {
                ClaimReply::from_redis_value(Value::Array(pair.to_vec()))
                    .map_err(|e| Error::from(redis::RedisError::from(e)))
            })
            .collect()
    }

    /// Try to claim the next attempt of a firing from the retry ZSET.
    pub async fn claim_retry(
        &self,
        job_id: &str,
        at_ms: i64,
        node: &str,
        lease_ms: i64,
        overlap: &str,
    ) -> Result<ClaimReply> {
        let k = self.job_keys(job_id);
        Ok(CLAIM_RETRY
            .key(k.job(job_id))
            .key(k.retry())
            .key(k.running())
            .key(k.attempts())
            .arg(firing_id(job_id, at_ms))
            .arg(node)
            .arg(lease_ms)
            .arg(overlap)
            .arg(self.keys().changes())
            .arg(job_id)
            .invoke_async(&mut self.conn.clone())
            .await?)
    }

    /// Take over a run whose lease expired. Returns the next attempt when one was queued,
    /// `Some(0)` when the firing went to the dead letters, None when there was nothing to do.
    pub async fn recover(
        &self,
        job_id: &str,
        at_ms: i64,
        max_attempts: u32,
        dead_limit: usize,
        history_limit: usize,
    ) -> Result<Option<u32>> {
        self.take_over(job_id, at_ms, None, max_attempts, dead_limit, history_limit)
            .await
    }

    /// Take over a lost run: once its lease expired (`holder` None), or at once if `holder`
    /// still holds it (the caller found that node gone: no heartbeat for node_ttl). Returns
    /// as [`Store::recover`] does.
    pub async fn take_over(
        &self,
        job_id: &str,
        at_ms: i64,
        holder: Option<&str>,
        max_attempts: u32,
        dead_limit: usize,
        history_limit: usize,
    ) -> Result<Option<u32>> {
        let k = self.job_keys(job_id);
        let fid = firing_id(job_id, at_ms);
        let error = match holder {
            None => "lease expired: the node died, hung or lost Redis mid-run".to_string(),
            Some(node) => format!(
                "node {node} left the live set mid-run (no heartbeat for node_ttl): it died or lost Redis"
            ),
        };
        let dead = DeadLetter {
            firing_id: fid.clone(),
            job_id: job_id.to_string(),
            scheduled_ms: at_ms,
            attempts: 0,
            error: Some(error.clone()),
            failed_ms: 0,
        };
        let reply: Vec<i64> = RECOVER
            .key(k.running())
            .key(k.attempts())
            .key(k.retry())
            .key(k.job(job_id))
            .key(k.dead(job_id))
            .key(k.lock(job_id, at_ms))
            .key(k.runs(job_id))
            .arg(&fid)
            .arg(max_attempts)
            .arg(dead_limit.max(1))
            .arg(serde_json::to_string(&dead)?)
            .arg(history_limit.max(1))
            .arg(at_ms)
            .arg(holder.unwrap_or(""))
            .arg(&error)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(match reply.as_slice() {
            [1, next] => Some(*next as u32),
            [2, _] => Some(0),
            _ => None,
        })
    }

    /// Queue a run of the job now (attempt 1), without moving its schedule. Returns the
    /// firing id, or None when there is no such job.
    pub async fn trigger(&self, job_id: &str) -> Result<Option<String>> {
        let k = self.job_keys(job_id);
        Ok(TRIGGER
            .key(k.job(job_id))
            .key(k.retry())
            .key(k.attempts())
            .key(k.due())
            .arg(job_id)
            .arg(self.keys().changes())
            .invoke_async(&mut self.conn.clone())
            .await?)
    }

    /// A job's dead letters, newest first.
    pub async fn dead_letters(&self, job_id: &str, limit: usize) -> Result<Vec<DeadLetter>> {
        let items: Vec<String> = self
            .conn
            .clone()
            .lrange(self.job_keys(job_id).dead(job_id), 0, limit as isize - 1)
            .await?;
        items
            .iter()
            .map(|s| serde_json::from_str(s).map_err(Error::from))
            .collect()
    }

    /// Replay (queue again as attempt 1) or purge a job's dead letters: one firing, or all.
    /// Returns how many; None when replaying for a job that no longer exists.
    pub async fn dead_op(
        &self,
        job_id: &str,
        replay: bool,
        firing: Option<&str>,
    ) -> Result<Option<u64>> {
        let k = self.job_keys(job_id);
        let n: i64 = DEAD
            .key(k.dead(job_id))
            .key(k.retry())
            .key(k.attempts())
            .key(k.job(job_id))
            .arg(if replay { "replay" } else { "purge" })
            .arg(firing.unwrap_or(""))
            .arg(self.keys().changes())
            .arg(job_id)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok((n >= 0).then_some(n as u64))
    }

    /// Attempts queued in a shard's retry ZSET due at or before `max_ms`: (job id, instant,
    /// due).
    pub async fn retries_until(
        &self,
        shard: usize,
        max_ms: i64,
        limit: usize,
    ) -> Result<Vec<(String, i64, i64)>> {
        self.firings_in(self.shards.keys(shard).retry(), max_ms, limit)
            .await
    }

    /// A shard's runs in progress (up to `limit`), with their lease records: who holds each
    /// and since when, for the sweeper to take over the runs of nodes that left.
    pub async fn leases(&self, shard: usize, limit: usize) -> Result<Vec<Lease>> {
        let k = self.shards.keys(shard);
        let mut conn = self.conn.clone();
        let running: Vec<(String, i64)> = conn
            .zrange_withscores(k.running(), 0, limit as isize - 1)
            .await?;
        if running.is_empty() {
            return Ok(Vec::new());
        }
        let fids: Vec<&str> = running.iter().map(|(f, _)| f.as_str()).collect();
        let records: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(k.attempts())
            .arg(&fids)
            .query_async(&mut conn)
            .await?;
        Ok(running
            .iter()
            .zip(records)
            .filter_map(|((fid, expiry), record)| {
                let (job_id, at_ms) = parse_firing_id(fid)?;
                let (attempt, claimed_ms, node) = record
                    .as_deref()
                    .and_then(parse_lease_record)
                    .map(|(a, c, n)| (a, c, Some(n.to_string())))
                    .unwrap_or((0, 0, None));
                Some(Lease {
                    job_id: job_id.to_string(),
                    at_ms,
                    expiry_ms: *expiry,
                    attempt,
                    claimed_ms,
                    node,
                })
            })
            .collect())
    }

    /// When each node last said it was alive (`seen`, Redis time; None: never, or too long
    /// ago to remember), and Redis's time now.
    pub async fn nodes_seen(&self, ids: &[&str]) -> Result<(i64, Vec<Option<i64>>)> {
        let mut pipe = redis::pipe();
        for id in ids {
            pipe.hget(self.keys().node(id), "seen");
        }
        let seen: Vec<Option<i64>> = if ids.is_empty() {
            Vec::new()
        } else {
            pipe.query_async(&mut self.conn.clone()).await?
        };
        Ok((self.time_ms().await?, seen))
    }

    /// A shard's runs whose lease expired at or before `max_ms`: (job id, instant, lease
    /// expiry).
    pub async fn expired_leases(
        &self,
        shard: usize,
        max_ms: i64,
        limit: usize,
    ) -> Result<Vec<(String, i64, i64)>> {
        self.firings_in(self.shards.keys(shard).running(), max_ms, limit)
            .await
    }

    async fn firings_in(
        &self,
        key: String,
        max_ms: i64,
        limit: usize,
    ) -> Result<Vec<(String, i64, i64)>> {
        let fids: Vec<(String, i64)> = self
            .conn
            .clone()
            .zrangebyscore_limit_withscores(key, "-inf", max_ms, 0, limit as isize)
            .await?;
        Ok(fids
            .iter()
            .filter_map(|(f, score)| {
                parse_firing_id(f).map(|(id, at)| (id.to_string(), at, *score))
            })
            .collect())
    }

    /// A shard's one-shot jobs that succeeded at or before `max_ms` (to clean up).
    pub async fn done_until(&self, shard: usize, max_ms: i64, limit: usize) -> Result<Vec<String>> {
        Ok(self
            .conn
            .clone()
            .zrangebyscore_limit(
                self.shards.keys(shard).done(),
                "-inf",
                max_ms,
                0,
                limit as isize,
            )
            .await?)
    }

    /// Record the end of an attempt. `retry_delay_ms`: schedule the next attempt after this
    /// long; None: no further attempt (a failure goes to the dead letters).
    pub async fn complete(
        &self,
        job_id: &str,
        run: &RunRecord,
        limits: &HistoryLimits,
        retry_delay_ms: Option<i64>,
    ) -> Result<(Fate, i64)> {
        let mut out = self
            .complete_many(
                &[Completion {
                    job_id,
                    run,
                    retry_delay_ms,
                }],
                limits,
            )
            .await?;
        out.pop()
            .ok_or_else(|| Error::Corrupt("empty complete reply".into()))
    }

    /// Record the end of several attempts in one script call; one (fate, Redis time) per
    /// attempt, in order.
    pub async fn complete_many(
        &self,
        batch: &[Completion<'_>],
        limits: &HistoryLimits,
    ) -> Result<Vec<(Fate, i64)>> {
        self.per_shard(
            batch,
            |c| c.job_id,
            |shard, part| self.complete_shard(shard, part, limits),
        )
        .await
    }

    async fn complete_shard(
        &self,
        shard: usize,
        batch: Vec<&Completion<'_>>,
        limits: &HistoryLimits,
    ) -> Result<Vec<(Fate, i64)>> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let k = self.shards.keys(shard);
        let mut inv = COMPLETE.prepare_invoke();
        inv.key(k.running())
            .key(k.attempts())
            .key(k.retry())
            .key(k.done());
        inv.arg(limits.history.max(1))
            .arg(limits.dead.max(1))
            .arg(limits.history_max_age_ms);
        for c in &batch {
            let run = c.run;
            // `failed_ms` is added by the script, in Redis time.
            let dead = serde_json::json!({
                "firing_id": run.firing_id,
                "job_id": c.job_id,
                "scheduled_ms": run.scheduled_ms,
                "attempts": run.attempt,
                "error": run.error,
            });
            inv.key(k.job(c.job_id))
                .key(k.runs(c.job_id))
                .key(k.dead(c.job_id));
            inv.arg(&run.firing_id)
                .arg(&run.node)
                .arg(run.attempt)
                .arg(&run.outcome)
                .arg(serde_json::to_string(run)?)
                .arg(c.retry_delay_ms.map(|d| d.to_string()).unwrap_or_default())
                .arg(c.job_id)
                .arg(dead.to_string());
        }
        let flat: Vec<Value> = inv.invoke_async(&mut self.conn.clone()).await?;
        self.replicate(k).await;
        if flat.len() != 2 * batch.len() {
            return Err(Error::Corrupt(format!(
                "complete reply of {} values",
                flat.len()
            )));
        }
        flat.chunks(2)
            .map(|pair| {
                let fate =
                    String::from_redis_value_ref(&pair[0]).map_err(redis::RedisError::from)?;
                let now = i64::from_redis_value_ref(&pair[1]).map_err(redis::RedisError::from)?;
                let fate = match fate.as_str() {
                    "done" => Fate::Done,
                    "retry" => Fate::Retry,
                    "dead" => Fate::Dead,
                    "fenced" => Fate::Fenced,
                    "gone" => Fate::Gone,
                    other => return Err(Error::Corrupt(format!("complete fate {other}"))),
                };
                Ok((fate, now))
            })
            .collect()
    }

    /// Extend an attempt's lease; false when the lease is no longer this node's.
    pub async fn renew(
        &self,
        job_id: &str,
        at_ms: i64,
        attempt: u32,
        node: &str,
        lease_ms: i64,
    ) -> Result<bool> {
        let k = self.job_keys(job_id);
        let n: i64 = RENEW
            .key(k.running())
            .key(k.attempts())
            .arg(node)
            .arg(firing_id(job_id, at_ms))
            .arg(lease_ms)
            .arg(attempt)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(n == 1)
    }

    /// Heartbeat (or leave): returns Redis time and the live node ids.
    pub async fn heartbeat(
        &self,
        node: &str,
        ttl_ms: i64,
        info: &str,
        beat: Beat,
    ) -> Result<(i64, Vec<String>)> {
        let k = self.keys();
        let mut reply: Vec<Value> = HEARTBEAT
            .key(k.nodes())
            .key(k.node(node))
            .arg(node)
            .arg(ttl_ms)
            .arg(info)
            .arg(match beat {
                Beat::Alive => "0",
                Beat::Draining => "1",
                Beat::Gone => "2",
            })
            .arg(k.changes())
            .invoke_async(&mut self.conn.clone())
            .await?;
        if reply.is_empty() {
            return Err(Error::Corrupt("empty heartbeat reply".into()));
        }
        let now = i64::from_redis_value(reply.remove(0)).map_err(redis::RedisError::from)?;
        let live = reply
            .into_iter()
            .map(String::from_redis_value)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(redis::RedisError::from)?;
        Ok((now, live))
    }

    /// Give the pending firings that came within the sentinel horizon their sentinel keys.
    /// A watermark in Redis (`{prefix}:promoted`) records how far ahead this was done, so
    /// each firing is promoted about once whatever the number of nodes. Returns how many
    /// sentinel keys were set.
    pub async fn promote(&self, shard: usize, limit: usize) -> Result<usize> {
        let k = self.shards.keys(shard);
        let mut conn = self.conn.clone();
        let (wm, time): (Option<i64>, (i64, i64)) = redis::pipe()
            .get(k.promoted())
            .cmd("TIME")
            .query_async(&mut conn)
            .await?;
        let now = time_reply_ms(time);
        let from = wm.unwrap_or(now).max(now);
        let until = now + self.horizon_ms;
        if from >= until {
            return Ok(0);
        }
        let entries: Vec<(String, i64)> = conn
            .zrangebyscore_limit_withscores(k.due(), format!("({from}"), until, 0, limit as isize)
            .await?;
        // Up to where this call covers: all of the window, or, when the batch was full, up
        // to just before the last instant read (entries at that instant are read again).
        let covered = if entries.len() >= limit {
            entries.last().map_or(until, |(_, at)| at - 1)
        } else {
            until
        };
        let mut inv = PROMOTE.prepare_invoke();
        inv.key(k.promoted()).key(k.due());
        for (id, at) in &entries {
            inv.key(k.fire(id, *at));
        }
        inv.arg(covered).arg(self.horizon_ms);
        for (id, at) in &entries {
            inv.arg(id).arg(*at);
        }
        let n: i64 = inv.invoke_async(&mut conn).await?;
        Ok(n as usize)
    }

    /// Jobs with a pending firing, and pending firings within the sentinel horizon (those
    /// hold sentinel keys), in one round trip.
    pub async fn pending_counts(&self) -> Result<(u64, u64)> {
        let mut total = (0, 0);
        for shard in 0..self.shards.len() {
            let (pending, inside) = self.shard_pending_counts(shard).await?;
            total.0 += pending;
            total.1 += inside;
        }
        Ok(total)
    }

    /// [`Store::pending_counts`] of one shard.
    pub async fn shard_pending_counts(&self, shard: usize) -> Result<(u64, u64)> {
        let k = self.shards.keys(shard);
        let now = self.time_ms().await?;
        let (pending, inside): (u64, u64) = redis::pipe()
            .zcard(k.due())
            .zcount(k.due(), format!("({now}"), now + self.horizon_ms)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok((pending, inside))
    }

    /// Sentinel keys alive now (a SCAN; for tests and diagnostics, not for hot paths).
    pub async fn sentinel_count(&self) -> Result<usize> {
        let mut n = 0;
        for k in self.shards.iter() {
            let mut conn = self.conn.clone();
            let pattern = format!("{}*", k.fire_prefix());
            let mut iter: redis::AsyncIter<String> = conn.scan_match(pattern).await?;
            while let Some(item) = futures::StreamExt::next(&mut iter).await {
                item?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// A shard's pending firings due at or before `max_ms`, oldest first: (job id, instant).
    pub async fn due_until(
        &self,
        shard: usize,
        max_ms: i64,
        limit: usize,
    ) -> Result<Vec<(String, i64)>> {
        self.due_page(shard, None, max_ms, 0, limit).await
    }

    /// A page of [`Store::due_until`]: `limit` entries after the first `offset`, only those
    /// due after `after_ms` when given.
    pub async fn due_page(
        &self,
        shard: usize,
        after_ms: Option<i64>,
        max_ms: i64,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<(String, i64)>> {
        let min = after_ms.map_or_else(|| "-inf".to_string(), |a| format!("({a}"));
        let v: Vec<(String, i64)> = self
            .conn
            .clone()
            .zrangebyscore_limit_withscores(
                self.shards.keys(shard).due(),
                min,
                max_ms,
                offset as isize,
                limit as isize,
            )
            .await?;
        Ok(v)
    }

    /// Read one job.
    pub async fn get_job(&self, id: &str) -> Result<Option<JobRecord>> {
        let map: HashMap<String, String> =
            self.conn.clone().hgetall(self.job_keys(id).job(id)).await?;
        if map.is_empty() {
            return Ok(None);
        }
        decode_job(&map).map(Some)
    }

    /// The version, spec and creation instant of a job (what a claimer needs), or None when it is gone.
    pub async fn job_spec(&self, id: &str) -> Result<Option<StoredSpec>> {
        let mut specs = self.job_specs(&[id]).await?;
        Ok(specs.pop().flatten())
    }

    /// [`Store::job_spec`] of several jobs in one round trip, in order.
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
        for id in ids {
            pipe.cmd("HMGET")
                .arg(k.job(id))
                .arg(&["version", "spec", "created", "gen"]);
        }
        type Fields = (Option<u64>, Option<String>, Option<i64>, Option<u64>);
        let rows: Vec<Fields> = pipe.query_async(&mut self.conn.clone()).await?;
        rows.into_iter()
            .map(
                |(version, spec, created, generation)| match (version, spec) {
                    (Some(version), Some(s)) => Ok(Some(StoredSpec {
                        version,
                        generation: generation.unwrap_or(0),
                        spec: serde_json::from_str(&s)?,
                        created_ms: created.unwrap_or(0),
                    })),
                    _ => Ok(None),
                },
            )
            .collect()
    }

    /// Job ids in id order, after `cursor` (exclusive), at most `limit`: the first `limit`
    /// of each shard, merged.
    pub async fn list_ids(&self, after: Option<&str>, limit: usize) -> Result<Vec<String>> {
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
        let maps = self
            .per_shard(
                ids,
                |id| id.as_str(),
                |shard, part| async move {
                    if part.is_empty() {
                        return Ok(Vec::new());
                    }
                    let k = self.shards.keys(shard);
                    let mut pipe = redis::pipe();
                    for id in part {
                        pipe.hgetall(k.job(id));
                    }
                    let maps: Vec<HashMap<String, String>> =
                        pipe.query_async(&mut self.conn.clone()).await?;
                    Ok(maps)
                },
            )
            .await?;
        maps.iter()
            .filter(|m| !m.is_empty())
            .map(decode_job)
            .collect()
    }

    /// Run `f` once per shard on that shard's items (concurrently), and give the answers back
    /// in the order of `items`. `f` answers one value per item, in the order given.
    async fn per_shard<'a, T, R, F, Fut>(
        &self,
        items: &'a [T],
        id: impl Fn(&T) -> &str,
        f: F,
    ) -> Result<Vec<R>>
    where
        F: Fn(usize, Vec<&'a T>) -> Fut,
        Fut: std::future::Future<Output = Result<Vec<R>>>,
    {
        if self.shards.len() == 1 || items.len() <= 1 {
            let shard = items.first().map_or(0, |i| self.shards.of(id(i)));
            return f(shard, items.iter().collect()).await;
        }
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); self.shards.len()];
        for (i, item) in items.iter().enumerate() {
            groups[self.shards.of(id(item))].push(i);
        }
        let calls = groups
            .iter()
            .enumerate()
            .filter(|(_, g)| !g.is_empty())
            .map(|(shard, g)| {
                let call = f(shard, g.iter().map(|&i| &items[i]).collect());
                async move { call.await.map(|answers| (g, answers)) }
            });
        let answered = futures::future::try_join_all(calls).await?;
        let mut out: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
        for (g, answers) in answered {
            if answers.len() != g.len() {
                return Err(Error::Corrupt(format!(
                    "{} answers for {} items",
                    answers.len(),
                    g.len()
                )));
            }
            for (&i, a) in g.iter().zip(answers) {
                out[i] = Some(a);
            }
        }
        Ok(out
            .into_iter()
            .map(|a| a.expect("every item answered"))
            .collect())
    }

    /// With `redis.wait_replicas`, wait until that many replicas of the shard's master
    /// acknowledged the writes just made on its connection (a claim, before its handler
    /// runs), so a failover cannot lose them. Never fails: the write stands either way, and
    /// what was not acknowledged in time is counted.
    ///
    /// `WAIT` blocks the (shared, multiplexed) connection while it waits, so when the
    /// replicas fall short the shard stops waiting for [`WAIT_BACKOFF`] (one slow `WAIT` per
    /// back-off, not one per call): a master that lost its replica, or a new master after a
    /// failover, keeps its throughput, and its writes are counted as unreplicated.
    async fn replicate(&self, k: &Keys) {
        let Some((replicas, timeout_ms)) = self.wait else {
            return;
        };
        let now = std::time::Instant::now();
        let off = self
            .wait_off
            .lock()
            .expect("wait_off lock")
            .get(k.tag())
            .copied();
        if off.is_some_and(|until| now < until) {
            metrics::counter!(crate::metrics::name::UNREPLICATED).increment(1);
            return;
        }
        let short = match self
            .conn
            .wait_replicas(&k.due(), replicas, timeout_ms)
            .await
        {
            Ok(acked) if acked >= replicas => return,
            Ok(acked) => format!("{acked} of {replicas} replicas acknowledged in {timeout_ms} ms"),
            Err(e) => e.to_string(),
        };
        tracing::warn!(shard = %k.tag(), %short, "writes not replicated in time; not waiting for {WAIT_BACKOFF:?}");
        self.wait_off.lock().expect("wait_off lock").insert(
            k.tag().to_string(),
            std::time::Instant::now() + WAIT_BACKOFF,
        );
        metrics::counter!(crate::metrics::name::UNREPLICATED).increment(1);
    }

    /// A job's run history, newest first.
    pub async fn runs(&self, id: &str, limit: usize) -> Result<Vec<RunRecord>> {
        let items: Vec<String> = self
            .conn
            .clone()
            .lrange(self.job_keys(id).runs(id), 0, limit as isize - 1)
            .await?;
        items
            .iter()
            .map(|s| serde_json::from_str(s).map_err(Error::from))
            .collect()
    }

    /// Add handler names to the set of known handlers.
    pub async fn register_handlers(&self, names: &[String]) -> Result<()> {
        if !names.is_empty() {
            let _: i64 = self
                .conn
                .clone()
                .sadd(self.keys().handlers(), names)
                .await?;
        }
        Ok(())
    }

    /// Handler names registered by any node.
    pub async fn handlers(&self) -> Result<Vec<String>> {
        Ok(self.conn.clone().smembers(self.keys().handlers()).await?)
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
        active: map.get("active").cloned(),
        paused_ms: map.get("paused_at").and_then(|s| opt_ms(s)),
    })
}
