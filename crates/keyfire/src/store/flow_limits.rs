//! Flow control: per-key limits shared by the whole cluster (at most `rate` firings started
//! per second, at most `in_flight` running at once), enforced by one script on the limit
//! key's own hash tag, and the hold of a denied firing on its job's shard.

use std::collections::HashSet;

use redis::{AsyncCommands, FromRedisValue, Value};
use serde::{Deserialize, Serialize};

use super::*;
use crate::error::{Error, Result};
use crate::job::FlowLimitSpec;

script!(ACQUIRE, "limit_acquire.lua");
script!(RELEASE, "limit_release.lua");
script!(RENEW_SLOT, "limit_renew.lua");
script!(HOLD, "task_lib.lua" + "limit_hold.lua");

/// Waiters are scored by their scheduled instant less this (see `limit_acquire.lua`).
const WAITER_EPOCH_MS: i64 = 1_600_000_000_000;

/// A limit key's answer to a firing that asks to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    /// Run now: the firing holds a slot until it is released (or its lease runs out).
    Granted {
        /// Slots held now, this one included.
        in_flight: u64,
        /// Firings held back, waiting in line.
        held: u64,
    },
    /// Not now: hold the firing back and ask again after `wait_ms`.
    Denied {
        /// When its turn should come, from now.
        wait_ms: i64,
        /// Slots held now.
        in_flight: u64,
        /// Firings held back, this one included.
        held: u64,
        /// Which bound held it back: `rate` or `in_flight`.
        reason: String,
    },
    /// The key has no limit (it was deleted): run, nothing is tracked.
    Unlimited,
}

impl Acquired {
    /// One firing's five values of a `limit_acquire.lua` reply.
    fn parse(v: &[Value]) -> Result<Self> {
        let int = |i: usize| -> Result<i64> {
            Ok(i64::from_redis_value_ref(&v[i]).map_err(redis::RedisError::from)?)
        };
        Ok(match int(0)? {
            1 => Acquired::Granted {
                in_flight: int(1)? as u64,
                held: int(2)? as u64,
            },
            2 => Acquired::Unlimited,
            0 => Acquired::Denied {
                wait_ms: int(1)?,
                in_flight: int(2)? as u64,
                held: int(3)? as u64,
                reason: String::from_redis_value_ref(&v[4]).map_err(redis::RedisError::from)?,
            },
            other => return Err(Error::Corrupt(format!("limit_acquire code {other}"))),
        })
    }
}

/// A claimed firing to hold back (see [`Store::hold`]).
#[derive(Debug, Clone, Copy)]
pub struct Hold<'a> {
    /// Its job.
    pub job_id: &'a str,
    /// Its scheduled instant.
    pub at_ms: i64,
    /// The attempt this node claimed (queued again as it is).
    pub attempt: u32,
    /// When this node claimed it (Redis time): with the attempt and node, its lease.
    pub claimed_ms: i64,
    /// When its turn should come, from now.
    pub wait_ms: i64,
}

/// A limit key's limit and what is happening under it now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
// The REST API's schema keeps its name.
#[cfg_attr(feature = "openapi", schema(as = LimitStatus))]
pub struct FlowLimitStatus {
    /// The limit key.
    pub key: String,
    /// Most firings started per second, if bounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<u32>,
    /// Most firings started at once before the pacing applies, if set (default a tenth of
    /// `rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// Most firings running at once, if bounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<u32>,
    /// Firings running now under this key.
    pub running: u64,
    /// Firings started within the last second.
    pub started_last_second: u64,
    /// Firings held back by this limit, waiting in line.
    pub held: u64,
}

impl FlowLimitStatus {
    /// The limit as declared.
    pub fn spec(&self) -> FlowLimitSpec {
        FlowLimitSpec {
            burst: self.burst,
            ..FlowLimitSpec::new(self.key.clone(), self.rate, self.in_flight)
        }
    }
}

impl Store {
    /// Set (create or replace) the limit of `spec.key` (validated by the caller) and tell
    /// every node.
    pub async fn put_limit(&self, spec: &FlowLimitSpec) -> Result<()> {
        let k = self.keys().limit(&spec.key);
        let mut conn = self.conn.clone();
        let mut set = Vec::new();
        let mut unset = Vec::new();
        for (field, v) in [
            ("rate", spec.rate),
            ("burst", spec.burst),
            ("in_flight", spec.in_flight),
        ] {
            match v {
                Some(n) => set.push((field, n.to_string())),
                None => unset.push(field),
            }
        }
        let mut pipe = redis::pipe();
        pipe.atomic().hset_multiple(k.conf(), &set).ignore();
        if !unset.is_empty() {
            pipe.hdel(k.conf(), &unset).ignore();
        }
        let () = pipe.query_async(&mut conn).await?;
        let _: i64 = conn.sadd(self.keys().limits(), &spec.key).await?;
        self.announce_limits(&spec.key).await
    }

    /// Lift the limit of `key`; its firings held back run when their turn was due. Returns
    /// whether there was one.
    pub async fn delete_limit(&self, key: &str) -> Result<bool> {
        let k = self.keys().limit(key);
        let mut conn = self.conn.clone();
        let removed: i64 = conn.srem(self.keys().limits(), key).await?;
        let _: i64 = conn
            .del(&[k.conf(), k.in_flight(), k.log(), k.waiters(), k.turns()])
            .await?;
        self.announce_limits(key).await?;
        Ok(removed == 1)
    }

    async fn announce_limits(&self, key: &str) -> Result<()> {
        let msg = serde_json::json!({"op": "limits", "id": key}).to_string();
        let _: i64 = self
            .conn
            .clone()
            .spublish(self.keys().changes(), msg)
            .await?;
        Ok(())
    }

    /// Every key that has a limit.
    pub async fn limit_keys(&self) -> Result<HashSet<String>> {
        Ok(self.conn.clone().smembers(self.keys().limits()).await?)
    }

    /// The limit of `key` and what runs and waits under it; None when it has no limit.
    pub async fn limit_status(&self, key: &str) -> Result<Option<FlowLimitStatus>> {
        let k = self.keys().limit(key);
        let now = self.time_ms().await?;
        let mut pipe = redis::pipe();
        pipe.cmd("HMGET")
            .arg(k.conf())
            .arg(&["rate", "burst", "in_flight"])
            .zcount(k.in_flight(), format!("({now}"), "+inf")
            .zcount(k.log(), format!("({}", now - 1000), "+inf")
            .zcard(k.waiters());
        type Reply = ((Option<u32>, Option<u32>, Option<u32>), u64, u64, u64);
        let ((rate, burst, in_flight), running, started, held): Reply =
            pipe.query_async(&mut self.conn.clone()).await?;
        if rate.is_none() && in_flight.is_none() {
            return Ok(None);
        }
        Ok(Some(FlowLimitStatus {
            key: key.to_string(),
            rate,
            burst,
            in_flight,
            running,
            started_last_second: started,
            held,
        }))
    }

    /// Every limit, by key.
    pub async fn limits(&self) -> Result<Vec<FlowLimitStatus>> {
        let mut keys: Vec<String> = self.limit_keys().await?.into_iter().collect();
        keys.sort();
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(s) = self.limit_status(&key).await? {
                out.push(s);
            }
        }
        Ok(out)
    }

    /// The firings held back under `key`, first in line first: (firing id, scheduled ms).
    pub async fn held_firings(&self, key: &str, limit: usize) -> Result<Vec<(String, i64)>> {
        let k = self.keys().limit(key);
        // The score is the scheduled instant less 1.6e12 ms, plus a fraction of a ms (when
        // it joined): see limit_acquire.lua.
        let v: Vec<(String, f64)> = self
            .conn
            .clone()
            .zrange_withscores(k.waiters(), 0, limit as isize - 1)
            .await?;
        Ok(v.into_iter()
            .map(|(f, s)| (f, s.floor() as i64 + WAITER_EPOCH_MS))
            .collect())
    }

    /// Ask `key` for a slot for firing `fid`, scheduled at `scheduled_ms`. A granted slot
    /// lasts `lease_ms` unless renewed ([`Store::renew_limit_slot`]) or released
    /// ([`Store::release_limit_slots`]); a denied firing keeps its place in line for
    /// `grace_ms` past its suggested turn.
    pub async fn acquire_limit(
        &self,
        key: &str,
        fid: &str,
        scheduled_ms: i64,
        lease_ms: i64,
        grace_ms: i64,
    ) -> Result<Acquired> {
        let mut replies = self
            .acquire_limits(key, &[(fid, scheduled_ms)], lease_ms, grace_ms)
            .await?;
        replies
            .pop()
            .ok_or_else(|| Error::Corrupt("empty limit_acquire reply".into()))
    }

    /// [`Store::acquire_limit`] for several firings of one key in one script call, in the
    /// order given (the line decides between them); one answer per firing, in order.
    pub async fn acquire_limits(
        &self,
        key: &str,
        firings: &[(&str, i64)],
        lease_ms: i64,
        grace_ms: i64,
    ) -> Result<Vec<Acquired>> {
        if firings.is_empty() {
            return Ok(Vec::new());
        }
        let k = self.keys().limit(key);
        let mut inv = ACQUIRE.prepare_invoke();
        inv.key(k.conf())
            .key(k.in_flight())
            .key(k.log())
            .key(k.waiters())
            .key(k.turns())
            .arg(lease_ms)
            .arg(grace_ms);
        for (fid, at) in firings {
            inv.arg(*fid).arg(*at);
        }
        let flat: Vec<Value> = inv.invoke_async(&mut self.conn.clone()).await?;
        if flat.len() != 5 * firings.len() {
            return Err(Error::Corrupt(format!(
                "limit_acquire reply of {} values for {} firings",
                flat.len(),
                firings.len()
            )));
        }
        flat.chunks(5).map(Acquired::parse).collect()
    }

    /// Give back the slots of `runs` (firing id, run ms if known) under `key`. Returns how
    /// many were held.
    pub async fn release_limit_slots(
        &self,
        key: &str,
        runs: &[(&str, Option<i64>)],
    ) -> Result<u64> {
        if runs.is_empty() {
            return Ok(0);
        }
        let k = self.keys().limit(key);
        let mut inv = RELEASE.prepare_invoke();
        inv.key(k.conf()).key(k.in_flight());
        for (fid, ms) in runs {
            inv.arg(*fid)
                .arg(ms.map(|m| m.to_string()).unwrap_or_default());
        }
        Ok(inv.invoke_async(&mut self.conn.clone()).await?)
    }

    /// Extend the slot `fid` holds under `key`; false when it holds none.
    pub async fn renew_limit_slot(&self, key: &str, fid: &str, lease_ms: i64) -> Result<bool> {
        let k = self.keys().limit(key);
        let n: i64 = RENEW_SLOT
            .key(k.in_flight())
            .arg(fid)
            .arg(lease_ms)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(n == 1)
    }

    /// Hold back an attempt of a firing this node claimed and its limit denied: queue the
    /// same attempt again, due in `wait_ms`, without recording a run. Returns the instant it
    /// is due, or None when the run is no longer this node's (fenced).
    pub async fn hold(&self, node: &str, hold: Hold<'_>) -> Result<Option<i64>> {
        let mut out = self.hold_many(node, &[hold]).await?;
        out.pop()
            .ok_or_else(|| Error::Corrupt("empty limit_hold reply".into()))
    }

    /// [`Store::hold`] for several firings in one script call per shard; one answer per
    /// firing, in order.
    pub async fn hold_many(&self, node: &str, holds: &[Hold<'_>]) -> Result<Vec<Option<i64>>> {
        self.per_shard(
            holds,
            |h| h.job_id,
            |shard, part| self.hold_shard(shard, node, part),
        )
        .await
    }

    async fn hold_shard(
        &self,
        shard: usize,
        node: &str,
        part: Vec<&Hold<'_>>,
    ) -> Result<Vec<Option<i64>>> {
        if part.is_empty() {
            return Ok(Vec::new());
        }
        let k = self.shards.keys(shard);
        let mut inv = HOLD.prepare_invoke();
        inv.key(k.running())
            .key(k.attempts())
            .key(k.retry())
            .key(k.due())
            .key(k.jobs())
            .key(k.task_count())
            .arg(node);
        for h in &part {
            inv.key(k.job(h.job_id))
                .key(k.task_bucket(h.job_id))
                .key(k.runs(h.job_id))
                .arg(h.job_id)
                .arg(firing_id(h.job_id, h.at_ms))
                .arg(h.attempt)
                .arg(h.claimed_ms)
                .arg(h.wait_ms);
        }
        let due: Vec<i64> = inv.invoke_async(&mut self.conn.clone()).await?;
        if due.len() != part.len() {
            return Err(Error::Corrupt(format!(
                "limit_hold reply of {} values for {} firings",
                due.len(),
                part.len()
            )));
        }
        Ok(due.into_iter().map(|d| (d > 0).then_some(d)).collect())
    }
}
