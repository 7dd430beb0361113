//! Nodes: heartbeats and when each node was last seen.

use redis::{FromRedisValue, Value};

use super::*;
use crate::error::{Error, Result};

script!(HEARTBEAT, "heartbeat.lua");

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
}
