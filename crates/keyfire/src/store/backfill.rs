//! Backfill: queue past instants of a job's schedule as firings of their own (`backfill.lua`).

use redis::{FromRedisValue, Value};

use super::*;
use crate::error::{Error, Result};

script!(BACKFILL, "backfill.lua");

/// Instants per `backfill.lua` call: each call holds Redis for a few milliseconds at most.
const CHUNK: usize = 1_000;

/// What [`Store::backfill`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackfillReply {
    /// `queued` instants queued, due from `first_ms` to `last_ms` (0 when none); `skipped`
    /// ran already (or run, or wait, or are the schedule's to run).
    Queued {
        /// Instants queued.
        queued: u64,
        /// Instants skipped as already run.
        skipped: u64,
        /// When the first queued runs (ms, Redis time; 0: none queued).
        first_ms: i64,
        /// When the last queued runs (ms, Redis time; 0: none queued).
        last_ms: i64,
    },
    /// No such job.
    Missing,
    /// The job is at another generation or version than the instants were computed with.
    Changed,
    /// The job is paused.
    Paused,
}

impl Store {
    /// Queue `instants` (ascending) of job `id` at `(generation, version)`, one every
    /// `interval_ms`, in calls of [`CHUNK`] instants: each call is atomic. A call that finds
    /// the job changed, paused or gone stops there (what earlier calls queued stays queued).
    pub async fn backfill(
        &self,
        id: &str,
        version: (u64, u64),
        instants: &[i64],
        interval_ms: i64,
    ) -> Result<BackfillReply> {
        let k = self.job_keys(id);
        let (mut queued, mut skipped, mut first_ms, mut last_ms) = (0, 0, 0, 0);
        for chunk in instants.chunks(CHUNK) {
            let mut inv = BACKFILL.prepare_invoke();
            inv.key(k.job(id))
                .key(k.retry())
                .key(k.attempts())
                .key(k.running())
                .key(k.runs(id))
                .key(k.dead(id))
                .key(k.skips(id))
                .key(k.backfill(id))
                .arg(id)
                .arg(format!("{}.{}", version.0, version.1))
                .arg(interval_ms)
                .arg(k.changes())
                .arg(self.ledger.max_age_ms.max(1));
            for at in chunk {
                inv.arg(*at);
            }
            let reply: Vec<Value> = inv.invoke_async(&mut self.conn.clone()).await?;
            let text = |v: &Value| String::from_redis_value_ref(v).map_err(redis::RedisError::from);
            let num = |v: &Value| i64::from_redis_value_ref(v).map_err(redis::RedisError::from);
            match reply.as_slice() {
                [code, q, s, f, l] if text(code)? == "ok" => {
                    queued += num(q)? as u64;
                    skipped += num(s)? as u64;
                    let f = num(f)?;
                    if first_ms == 0 {
                        first_ms = f;
                    }
                    let l = num(l)?;
                    if l > 0 {
                        last_ms = l;
                    }
                }
                [code] => {
                    return Ok(match text(code)?.as_str() {
                        "missing" => BackfillReply::Missing,
                        "changed" => BackfillReply::Changed,
                        "paused" => BackfillReply::Paused,
                        other => return Err(Error::Corrupt(format!("backfill reply {other}"))),
                    });
                }
                _ => return Err(Error::Corrupt(format!("backfill reply {reply:?}"))),
            }
        }
        Ok(BackfillReply::Queued {
            queued,
            skipped,
            first_ms,
            last_ms,
        })
    }
}
