//! The callback outbox: callbacks that `complete.lua` queued with a firing's outcome, taken
//! by any node under a lease and settled when sent or given up.

use redis::Value;

use super::*;
use crate::error::{Error, Result};

script!(OUTBOX_TAKE, "outbox_take.lua");
script!(OUTBOX_SETTLE, "outbox_settle.lua");

/// A callback taken from the outbox.
#[derive(Debug, Clone, PartialEq)]
pub struct TakenCallback {
    /// `<firing id>:succeeded` or `<firing id>:failed`.
    pub id: String,
    /// 1 for its first attempt.
    pub attempt: u32,
    /// What `complete.lua` was given (JSON).
    pub entry: String,
}

/// What became of a callback taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallbackFate {
    /// Sent, or given up: remove it.
    Settled,
    /// Try again after this many ms.
    RetryIn(i64),
}

impl Store {
    /// Take up to `max` due callbacks of `shard`, each for `lease_ms`; Redis time (ms) and
    /// the callbacks.
    pub async fn take_callbacks(
        &self,
        shard: usize,
        max: usize,
        lease_ms: i64,
    ) -> Result<(i64, Vec<TakenCallback>)> {
        let k = self.shards.keys(shard);
        let flat: Vec<Value> = OUTBOX_TAKE
            .key(k.outbox())
            .key(k.outbox_data())
            .arg(max)
            .arg(lease_ms)
            .invoke_async(&mut self.conn.clone())
            .await?;
        let corrupt = || Error::Corrupt("outbox take reply".into());
        let mut it = flat.into_iter();
        let now: i64 = it
            .next()
            .and_then(|v| redis::from_redis_value(v).ok())
            .ok_or_else(corrupt)?;
        let rest: Vec<Value> = it.collect();
        let taken = rest
            .chunks(3)
            .map(|c| match c {
                [id, attempt, entry] => Ok(TakenCallback {
                    id: redis::from_redis_value(id.clone()).map_err(|_| corrupt())?,
                    attempt: redis::from_redis_value(attempt.clone()).map_err(|_| corrupt())?,
                    entry: redis::from_redis_value(entry.clone()).map_err(|_| corrupt())?,
                }),
                _ => Err(corrupt()),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((now, taken))
    }

    /// Settle callbacks of `shard` taken by [`Store::take_callbacks`]; how many were still
    /// this taker's to settle.
    pub async fn settle_callbacks(
        &self,
        shard: usize,
        settled: &[(&TakenCallback, CallbackFate)],
    ) -> Result<usize> {
        if settled.is_empty() {
            return Ok(0);
        }
        let k = self.shards.keys(shard);
        let mut inv = OUTBOX_SETTLE.prepare_invoke();
        inv.key(k.outbox()).key(k.outbox_data());
        for (t, fate) in settled {
            inv.arg(&t.id).arg(t.attempt).arg(match fate {
                CallbackFate::Settled => String::new(),
                CallbackFate::RetryIn(ms) => (*ms).max(0).to_string(),
            });
        }
        Ok(inv.invoke_async(&mut self.conn.clone()).await?)
    }

    /// Callbacks waiting in the outbox, over every shard (queued, or being sent).
    pub async fn pending_callbacks(&self) -> Result<u64> {
        let mut n = 0;
        for k in self.shards.iter() {
            let c: u64 = redis::cmd("ZCARD")
                .arg(k.outbox())
                .query_async(&mut self.conn.clone())
                .await?;
            n += c;
        }
        Ok(n)
    }
}
