//! Operational reads for the API and the dashboard: the live nodes and what they announced,
//! health, and counts across shards. Read-only; one pipeline per shard (in a cluster, a
//! pipeline stays in one slot).

use std::collections::HashMap;

use redis::AsyncCommands;

use super::Store;
use crate::error::Result;

/// Counts over every shard at one instant: see [`crate::Client::totals`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Jobs in the jobs index.
    pub jobs: u64,
    /// Jobs whose next firing is due (at or before the instant).
    pub due: u64,
    /// Runs holding a lease.
    pub running: u64,
    /// Firings waiting for their next attempt.
    pub retrying: u64,
}

/// A live node: its id, its last heartbeat (ms, Redis time) and the fields of its hash
/// (`info` holds the JSON it announced).
pub type LiveNode = (String, i64, HashMap<String, String>);

impl Store {
    /// The nodes whose heartbeat is within `node_ttl_ms` of Redis's clock, with their hashes.
    pub async fn live_nodes(&self, node_ttl_ms: i64) -> Result<Vec<LiveNode>> {
        let keys = self.keys();
        let now = self.time_ms().await?;
        let mut conn = self.connection();
        let live: Vec<(String, i64)> = conn
            .zrangebyscore_withscores(keys.nodes(), now - node_ttl_ms, "+inf")
            .await?;
        if live.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for (id, _) in &live {
            pipe.hgetall(keys.node(id));
        }
        let infos: Vec<HashMap<String, String>> = pipe.query_async(&mut conn).await?;
        Ok(live
            .into_iter()
            .zip(infos)
            .map(|((id, seen), info)| (id, seen, info))
            .collect())
    }

    /// Redis answers `PING`.
    pub async fn ping(&self) -> Result<()> {
        let _: String = redis::cmd("PING")
            .query_async(&mut self.connection())
            .await?;
        Ok(())
    }

    /// The `notify-keyspace-events` setting of the server behind the store's connection;
    /// `None` where `CONFIG` is not available (a managed service: the node checked the events
    /// by a probe at start, see [`super::notify`]).
    pub async fn notify_flags(&self) -> Result<Option<String>> {
        let reply: redis::RedisResult<Vec<String>> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("notify-keyspace-events")
            .query_async(&mut self.connection())
            .await;
        match reply {
            Ok(reply) => Ok(Some(reply.get(1).cloned().unwrap_or_default())),
            Err(e) if super::notify::is_command_unavailable(&e) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Jobs (compact tasks included), due firings (by `now_ms`), leases and queued
    /// retries, summed over the shards.
    pub async fn totals(&self, now_ms: i64) -> Result<Totals> {
        let mut conn = self.connection();
        let mut t = Totals::default();
        for keys in self.shards().iter() {
            let (jobs, compact, due, running, retrying): (u64, Option<i64>, u64, u64, u64) =
                redis::pipe()
                    .zcard(keys.jobs())
                    .get(keys.task_count())
                    .zcount(keys.due(), "-inf", now_ms)
                    .zcard(keys.running())
                    .zcard(keys.retry())
                    .query_async(&mut conn)
                    .await?;
            t.jobs += jobs + compact.unwrap_or(0).max(0) as u64;
            t.due += due;
            t.running += running;
            t.retrying += retrying;
        }
        Ok(t)
    }

    /// For each job id, in order: the given fields of its record and the length of its
    /// dead-letter list. A compact task reads as its job hash would: `version` 1, `status`
    /// active while its firing is due, then finished with `runs` 1 (see task_lib.lua).
    pub async fn job_fields(
        &self,
        ids: &[String],
        fields: &[&str],
    ) -> Result<(Vec<Vec<Option<String>>>, Vec<u64>)> {
        let shards = self.shards();
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); shards.len()];
        for (i, id) in ids.iter().enumerate() {
            groups[shards.of(id)].push(i);
        }
        let mut hashes = vec![Vec::new(); ids.len()];
        let mut lens = vec![0u64; ids.len()];
        for (shard, group) in groups.iter().enumerate().filter(|(_, g)| !g.is_empty()) {
            let keys = shards.keys(shard);
            let mut pipe = redis::pipe();
            for &i in group {
                pipe.cmd("HMGET").arg(keys.job(&ids[i])).arg(fields);
                pipe.llen(keys.dead(&ids[i]));
                pipe.hexists(keys.task_bucket(&ids[i]), &ids[i]);
                pipe.zscore(keys.due(), &ids[i]);
            }
            let replies: Vec<(Vec<Option<String>>, u64)> = {
                let flat: Vec<redis::Value> = pipe.query_async(&mut self.connection()).await?;
                flat.chunks(4)
                    .map(|row| {
                        let mut hash: Vec<Option<String>> =
                            redis::from_redis_value(row[0].clone())?;
                        let compact: bool = redis::from_redis_value(row[2].clone())?;
                        let pending = !matches!(row[3], redis::Value::Nil);
                        if compact && hash.iter().all(Option::is_none) {
                            for (value, name) in hash.iter_mut().zip(fields) {
                                *value = match (*name, pending) {
                                    ("status", true) => Some("active".to_string()),
                                    ("status", false) => Some("finished".to_string()),
                                    ("runs", false) => Some("1".to_string()),
                                    ("version", _) => Some("1".to_string()),
                                    _ => None,
                                };
                            }
                        }
                        Ok((hash, redis::from_redis_value(row[1].clone())?))
                    })
                    .collect::<std::result::Result<_, redis::ParsingError>>()
                    .map_err(redis::RedisError::from)?
            };
            for (&i, (hash, len)) in group.iter().zip(replies) {
                hashes[i] = hash;
                lens[i] = len;
            }
        }
        Ok((hashes, lens))
    }
}

/// Parse an `INFO` reply into its `name:value` fields (section headers and blank lines
/// dropped).
pub fn parse_info(text: &str) -> std::collections::BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.trim_end().split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Redis's clock in ms from a `TIME` reply (seconds, microseconds).
pub fn time_reply_ms((s, us): (i64, i64)) -> i64 {
    s * 1000 + us / 1000
}

/// Redis's clock in ms, read with `TIME` on any connection.
pub async fn redis_time_ms<C: redis::aio::ConnectionLike + Send>(conn: &mut C) -> Result<i64> {
    let reply: (i64, i64) = redis::cmd("TIME").query_async(conn).await?;
    Ok(time_reply_ms(reply))
}
