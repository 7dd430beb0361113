//! Nodes: heartbeats and when each node was last seen.

use redis::{AsyncCommands, FromRedisValue, Value};

use super::*;
use crate::error::{Error, Result};

script!(HEARTBEAT, "heartbeat.lua");
script!(DATA_MARKER, "data_marker.lua");

/// What a heartbeat answers.
#[derive(Debug, Clone)]
pub struct Heartbeat {
    /// Redis time (ms).
    pub now: i64,
    /// The live node ids.
    pub live: Vec<String>,
    /// The beat found the node's live-set entry missing or older than node_ttl: others may
    /// have taken its runs over (always false when leaving).
    pub lapsed: bool,
    /// The data marker under the meta tag (see [`Keys::data_marker`]).
    pub data: String,
}

impl Store {
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

    /// Heartbeat (or leave): Redis time, the live node ids, whether the node's entry had
    /// lapsed, and the data marker.
    pub async fn heartbeat(
        &self,
        node: &str,
        ttl_ms: i64,
        info: &str,
        beat: Beat,
    ) -> Result<Heartbeat> {
        let k = self.keys();
        let mut reply: Vec<Value> = HEARTBEAT
            .key(k.nodes())
            .key(k.node(node))
            .key(k.data_marker())
            .arg(node)
            .arg(ttl_ms)
            .arg(info)
            .arg(match beat {
                Beat::Alive => "0",
                Beat::Draining => "1",
                Beat::Gone => "2",
            })
            .arg(k.changes())
            .arg(uuid::Uuid::new_v4().to_string())
            .invoke_async(&mut self.conn.clone())
            .await?;
        if reply.len() < 3 {
            return Err(Error::Corrupt("short heartbeat reply".into()));
        }
        let mut head = reply.drain(..3);
        let mut next = || head.next().expect("three values");
        let now = i64::from_redis_value(next()).map_err(redis::RedisError::from)?;
        let lapsed = i64::from_redis_value(next()).map_err(redis::RedisError::from)? == 1;
        let data = String::from_redis_value(next()).map_err(redis::RedisError::from)?;
        drop(head);
        let live = reply
            .into_iter()
            .map(String::from_redis_value)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(redis::RedisError::from)?;
        Ok(Heartbeat {
            now,
            live,
            lapsed,
            data,
        })
    }

    /// Each shard's data marker, in shard order (written where it is missing). With one
    /// shard the shard is the meta tag, whose marker the heartbeat reads: none here.
    pub async fn shard_markers(&self) -> Result<Vec<String>> {
        if self.shards().len() == 1 {
            return Ok(Vec::new());
        }
        let calls = self.shards().iter().map(|k| {
            let mut conn = self.conn.clone();
            let key = k.data_marker();
            async move {
                let id: String = DATA_MARKER
                    .key(key)
                    .arg(uuid::Uuid::new_v4().to_string())
                    .invoke_async(&mut conn)
                    .await?;
                Ok::<_, Error>(id)
            }
        });
        futures::future::try_join_all(calls).await
    }

    /// Record that Redis lost keyfire's data, as `node` noticed it, for `keep` (meta key).
    pub async fn record_data_loss(
        &self,
        node: &str,
        detail: &str,
        keep: std::time::Duration,
    ) -> Result<()> {
        let at = self.time_ms().await?;
        let key = self.keys().data_loss();
        let _: () = redis::pipe()
            .hset_multiple(
                &key,
                &[
                    ("at", at.to_string()),
                    ("node", node.to_string()),
                    ("detail", detail.to_string()),
                ],
            )
            .ignore()
            .pexpire(&key, keep.as_millis() as i64)
            .ignore()
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(())
    }

    /// The last data loss a node noticed within the hour it is kept, if any.
    pub async fn data_loss(&self) -> Result<Option<DataLoss>> {
        let fields: std::collections::HashMap<String, String> =
            self.conn.clone().hgetall(self.keys().data_loss()).await?;
        Ok(fields
            .get("at")
            .and_then(|at| at.parse().ok())
            .map(|at_ms| DataLoss {
                at_ms,
                node: fields.get("node").cloned().unwrap_or_default(),
                detail: fields.get("detail").cloned().unwrap_or_default(),
            }))
    }

    /// Forget the recorded data loss (an operator acknowledged it). Whether there was one.
    pub async fn ack_data_loss(&self) -> Result<bool> {
        let n: i64 = self.conn.clone().del(self.keys().data_loss()).await?;
        Ok(n > 0)
    }

    /// Seed each shard's job-generation counter from Redis's time (ms) where it is missing
    /// (gone with the data): jobs created from now on take generations no node has seen.
    pub async fn seed_generations(&self) -> Result<()> {
        let now = self.time_ms().await?;
        for k in self.shards().iter() {
            let _: Option<String> = redis::cmd("SET")
                .arg(k.generation())
                .arg(now)
                .arg("NX")
                .query_async(&mut self.conn.clone())
                .await?;
        }
        Ok(())
    }
}

/// A data loss a node noticed (see [`Client::data_loss`](crate::Client::data_loss)).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DataLoss {
    /// When it was noticed (Redis time, ms).
    pub at_ms: i64,
    /// The node that noticed it.
    pub node: String,
    /// What was lost, and what the node did.
    pub detail: String,
}
