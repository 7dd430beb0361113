//! Cluster-wide figures for metrics and readiness: the oldest firing no node has claimed yet,
//! and each master's memory against its `maxmemory`. Reads only, one command per shard or
//! master; the caller decides how often (`/metrics` caches them for `metrics.min_interval`).

use redis::Value;

use super::{Store, parse_info};
use crate::error::{Error, Result};

/// One master's memory, from `INFO memory`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerMemory {
    /// `host:port` of the master.
    pub server: String,
    /// `used_memory`, bytes.
    pub used: u64,
    /// `maxmemory`, bytes; 0 when no limit is set.
    pub max: u64,
    /// `maxmemory_policy`, as `INFO` reports it (empty when it does not).
    pub policy: String,
}

impl ServerMemory {
    /// `used / max`; 0 when no `maxmemory` is set (Redis never refuses for memory then).
    pub fn ratio(&self) -> f64 {
        if self.max == 0 {
            0.0
        } else {
            self.used as f64 / self.max as f64
        }
    }
}

impl Store {
    /// Redis's clock (ms) and, per shard in order, the instant (ms) of the earliest firing in
    /// its due set: the next firing no node has claimed (a claim moves a job's entry on to its
    /// next firing). `now - instant` is how overdue it is; None: the shard has no firing.
    pub async fn due_heads(&self) -> Result<(i64, Vec<Option<i64>>)> {
        let now = self.time_ms().await?;
        // One command per shard, all at once: in a cluster the shards live on different
        // masters, and a pipeline must keep to one slot.
        let heads = futures::future::try_join_all(self.shards().iter().map(|keys| {
            let mut conn = self.connection();
            let key = keys.due();
            async move {
                let head: Vec<(String, f64)> = redis::cmd("ZRANGE")
                    .arg(key)
                    .arg(0)
                    .arg(0)
                    .arg("WITHSCORES")
                    .query_async(&mut conn)
                    .await?;
                Ok::<_, Error>(head.first().map(|(_, at)| *at as i64))
            }
        }))
        .await?;
        Ok((now, heads))
    }

    /// Each master's memory (`INFO memory`: one command, sent to every master in a cluster).
    pub async fn memory(&self) -> Result<Vec<ServerMemory>> {
        let conn = self.connection();
        let reply: Value = redis::cmd("INFO")
            .arg("memory")
            .query_async(&mut conn.clone())
            .await?;
        let one = |server: String, v: &Value| -> Result<ServerMemory> {
            let text: String = redis::from_redis_value_ref(v).map_err(redis::RedisError::from)?;
            let info = parse_info(&text);
            let num = |f: &str| info.get(f).and_then(|v| v.trim().parse::<u64>().ok());
            Ok(ServerMemory {
                used: num("used_memory").ok_or_else(|| {
                    Error::Corrupt(format!("INFO memory of {server} has no used_memory"))
                })?,
                max: num("maxmemory").unwrap_or(0),
                policy: info.get("maxmemory_policy").cloned().unwrap_or_default(),
                server,
            })
        };
        match &reply {
            // A cluster answers per master, keyed by its address.
            Value::Map(per_master) => {
                let mut out = Vec::with_capacity(per_master.len());
                for (addr, v) in per_master {
                    // A master that could not answer is left out; the others still count.
                    if matches!(v, Value::ServerError(_)) {
                        continue;
                    }
                    let addr: String =
                        redis::from_redis_value_ref(addr).map_err(redis::RedisError::from)?;
                    out.push(one(addr, v)?);
                }
                out.sort_by(|a, b| a.server.cmp(&b.server));
                Ok(out)
            }
            v => Ok(vec![one(conn.server().unwrap_or_default(), v)?]),
        }
    }
}
