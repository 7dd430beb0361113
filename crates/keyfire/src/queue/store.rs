//! The delay queue's Redis calls: one Lua script per atomic change (`lua/*.lua`, each with a
//! header naming its KEYS, ARGV and reply, loaded once and run by EVALSHA), every key named by
//! [`crate::store::Keys`] and passed in KEYS. All of a topic's keys and its tasks' records live
//! under the meta hash tag, so each script touches one slot (Redis Cluster).

use std::sync::LazyLock;

use std::collections::HashMap;

use redis::{AsyncCommands, FromRedisValue, Script, Value};

use super::check::{Checked, add_args};
use super::reply::{AddReply, FinishReply, PopReply, PromoteReply, RequeueReply};
use super::{DEFAULT_MAX_DELIVERIES, DEFAULT_TTR, NOTIFY_CAP, PROMOTE_BATCH, Queue, duration_ms};
use crate::error::Result;

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub(super) static $name: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!(concat!("lua/", $file))));
    };
}

script!(ADD, "add.lua");
script!(PROMOTE, "promote.lua");
script!(POP, "pop.lua");
script!(FINISH, "finish.lua");
script!(REQUEUE, "requeue.lua");
script!(TOUCH, "touch.lua");
script!(DELETE, "delete.lua");
script!(READY, "ready.lua");

impl Queue {
    /// `add.lua` over tasks of one topic.
    pub(super) fn add_invocation(
        &self,
        topic: &str,
        tasks: &[&Checked],
        traceparent: Option<&str>,
    ) -> redis::Cmd {
        let k = self.store.keys();
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(ADD.get_hash())
            .arg(7 + tasks.len())
            .arg(k.qdelayed(topic))
            .arg(k.qready(topic))
            .arg(k.qnotify(topic))
            .arg(k.qtopics())
            .arg(k.qstats(topic))
            .arg(k.qwake(topic))
            .arg(k.changes());
        for t in tasks {
            cmd.arg(k.qtask(&t.id));
        }
        cmd.arg(topic).arg(NOTIFY_CAP);
        for t in tasks {
            cmd.arg(&add_args(t)[..])
                .arg(traceparent.unwrap_or_default());
        }
        cmd
    }

    /// Run `add.lua` commands in one pipeline (the script loaded first: EVALSHA is not retried
    /// on NOSCRIPT inside a pipeline).
    pub(super) async fn run_adds(&self, cmds: Vec<redis::Cmd>) -> Result<Vec<AddReply>> {
        let mut conn = self.store.connection();
        ADD.load_async(&mut conn).await?;
        let mut pipe = redis::pipe();
        for c in cmds {
            pipe.add_command(c);
        }
        Ok(pipe.query_async(&mut conn).await?)
    }

    /// One run of `promote.lua`: moves up to [`PROMOTE_BATCH`] due tasks of `topic` to ready.
    pub(super) async fn promote_once(&self, topic: &str) -> Result<PromoteReply> {
        let k = self.store.keys();
        Ok(PROMOTE
            .key(k.qdelayed(topic))
            .key(k.qready(topic))
            .key(k.qnotify(topic))
            .key(k.qwake(topic))
            .arg(PROMOTE_BATCH)
            .arg(NOTIFY_CAP)
            .invoke_async(&mut self.store.connection())
            .await?)
    }

    /// `pop.lua`: reserve up to `max` of the candidates, each under its own token.
    pub(super) async fn pop_script(
        &self,
        topic: &str,
        max: usize,
        candidates: &[String],
    ) -> Result<PopReply> {
        let k = self.store.keys();
        let mut inv = POP.prepare_invoke();
        inv.key(k.qready(topic))
            .key(k.qreserved(topic))
            .key(k.qnotify(topic))
            .key(k.qstats(topic));
        for id in candidates {
            inv.key(k.qtask(id));
        }
        inv.arg(max)
            .arg(DEFAULT_MAX_DELIVERIES)
            .arg(duration_ms(DEFAULT_TTR));
        for id in candidates {
            // The topic rides in the token, so finish and touch need not read it first.
            inv.arg(id)
                .arg(format!("{}.{topic}", uuid::Uuid::new_v4().simple()));
        }
        Ok(inv.invoke_async(&mut self.store.connection()).await?)
    }

    /// `finish.lua` over `(id, token)` pairs of one topic.
    pub(super) async fn finish_script(
        &self,
        topic: &str,
        items: &[(&str, &str)],
    ) -> Result<FinishReply> {
        let k = self.store.keys();
        let mut inv = FINISH.prepare_invoke();
        inv.key(k.qreserved(topic)).key(k.qstats(topic));
        for (id, _) in items {
            inv.key(k.qtask(id));
        }
        inv.arg(duration_ms(self.retention));
        for (id, token) in items {
            inv.arg(*id).arg(*token);
        }
        Ok(inv.invoke_async(&mut self.store.connection()).await?)
    }

    /// `requeue.lua` over these reserved ids (those not yet expired are left alone).
    pub(super) async fn requeue(&self, topic: &str, ids: &[String]) -> Result<RequeueReply> {
        let k = self.store.keys();
        let mut inv = REQUEUE.prepare_invoke();
        inv.key(k.qready(topic))
            .key(k.qreserved(topic))
            .key(k.qdead(topic))
            .key(k.qnotify(topic))
            .key(k.qstats(topic));
        for id in ids {
            inv.key(k.qtask(id));
        }
        inv.arg(duration_ms(self.dead_retention).max(1))
            .arg(NOTIFY_CAP)
            .arg(DEFAULT_MAX_DELIVERIES);
        for id in ids {
            inv.arg(id);
        }
        Ok(inv.invoke_async(&mut self.store.connection()).await?)
    }

    /// `touch.lua`.
    pub(super) async fn touch_script(
        &self,
        topic: &str,
        id: &str,
        token: &str,
        ttr_ms: Option<i64>,
    ) -> Result<Vec<Value>> {
        let k = self.store.keys();
        Ok(TOUCH
            .key(k.qtask(id))
            .key(k.qreserved(topic))
            .arg(id)
            .arg(token)
            .arg(ttr_ms.map(|t| t.to_string()).unwrap_or_default())
            .invoke_async(&mut self.store.connection())
            .await?)
    }

    /// `delete.lua`.
    pub(super) async fn delete_script(&self, topic: &str, id: &str) -> Result<Vec<Value>> {
        let k = self.store.keys();
        Ok(DELETE
            .key(k.qtask(id))
            .key(k.qdelayed(topic))
            .key(k.qready(topic))
            .key(k.qreserved(topic))
            .key(k.qdead(topic))
            .key(k.qstats(topic))
            .arg(id)
            .arg(duration_ms(self.retention))
            .invoke_async(&mut self.store.connection())
            .await?)
    }

    /// `ready.lua`, for the `topic` handler: `promote` a task queued by an earlier version,
    /// or `create` a ready one (with its payload, ttr, max deliveries and due instant).
    pub(super) fn ready_invocation(
        &self,
        id: &str,
        topic: &str,
        mode: &str,
    ) -> redis::ScriptInvocation<'static> {
        let k = self.store.keys();
        let mut inv = READY.prepare_invoke();
        inv.key(k.qtask(id))
            .key(k.qdelayed(topic))
            .key(k.qready(topic))
            .key(k.qnotify(topic))
            .key(k.qtopics())
            .key(k.qstats(topic))
            .arg(id)
            .arg(mode)
            .arg(topic)
            .arg(NOTIFY_CAP);
        inv
    }
}

/// A topic's counts as read: delayed, ready, reserved, dead, and its counters.
pub(super) type TopicRow = (u64, u64, u64, u64, HashMap<String, i64>);

/// The queue's reads (no script: what they read may change right after, and every change
/// goes through a script that checks again).
impl Queue {
    /// The first `ready` ids of the ready set, the first `reserved` reservations (id, deadline)
    /// and Redis's time (ms), in one round trip.
    pub(super) async fn read_heads(
        &self,
        topic: &str,
        ready: usize,
        reserved: usize,
    ) -> Result<(Vec<String>, Vec<(String, f64)>, i64)> {
        let k = self.store.keys();
        type Heads = (Vec<String>, Vec<(String, f64)>, (i64, i64));
        let (head, reserved, time): Heads = redis::pipe()
            .zrange(k.qready(topic), 0, ready as isize - 1)
            .zrange_withscores(k.qreserved(topic), 0, reserved as isize - 1)
            .cmd("TIME")
            .query_async(&mut self.store.connection())
            .await?;
        Ok((head, reserved, crate::store::time_reply_ms(time)))
    }

    /// The first `n` reservations (id, deadline) and Redis's time (ms), in one round trip.
    pub(super) async fn read_reserved_head(
        &self,
        topic: &str,
        n: usize,
    ) -> Result<(Vec<(String, f64)>, i64)> {
        let (reserved, time): (Vec<(String, f64)>, (i64, i64)) = redis::pipe()
            .zrange_withscores(self.store.keys().qreserved(topic), 0, n as isize - 1)
            .cmd("TIME")
            .query_async(&mut self.store.connection())
            .await?;
        Ok((reserved, crate::store::time_reply_ms(time)))
    }

    /// The first `n` ids of the ready set.
    pub(super) async fn read_ready_head(&self, topic: &str, n: usize) -> Result<Vec<String>> {
        Ok(self
            .store
            .connection()
            .zrange(self.store.keys().qready(topic), 0, n as isize - 1)
            .await?)
    }

    /// A task's record (empty when there is none).
    pub(super) async fn read_record(&self, id: &str) -> Result<HashMap<String, String>> {
        Ok(self
            .store
            .connection()
            .hgetall(self.store.keys().qtask(id))
            .await?)
    }

    /// A task's score in its topic's ready set, if it is there.
    pub(super) async fn read_ready_score(&self, topic: &str, id: &str) -> Result<Option<f64>> {
        Ok(self
            .store
            .connection()
            .zscore(self.store.keys().qready(topic), id)
            .await?)
    }

    /// The topic a task's record names.
    pub(super) async fn read_task_topic(&self, id: &str) -> Result<Option<String>> {
        Ok(self
            .store
            .connection()
            .hget(self.store.keys().qtask(id), "topic")
            .await?)
    }

    /// The newest `limit` dead letters of a topic: ids and their records.
    pub(super) async fn read_dead(
        &self,
        topic: &str,
        limit: usize,
    ) -> Result<(Vec<String>, Vec<HashMap<String, String>>)> {
        let k = self.store.keys();
        let mut conn = self.store.connection();
        let ids: Vec<String> = conn
            .zrevrange(k.qdead(topic), 0, limit as isize - 1)
            .await?;
        if ids.is_empty() {
            return Ok((ids, Vec::new()));
        }
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.hgetall(k.qtask(id));
        }
        let maps: Vec<HashMap<String, String>> = pipe.query_async(&mut conn).await?;
        Ok((ids, maps))
    }

    /// Every topic's name, unsorted.
    pub(super) async fn read_topic_set(&self) -> Result<Vec<String>> {
        Ok(self
            .store
            .connection()
            .smembers(self.store.keys().qtopics())
            .await?)
    }

    /// Each topic's counts, in the order given, in one round trip.
    pub(super) async fn read_topic_rows(&self, names: &[String]) -> Result<Vec<TopicRow>> {
        let k = self.store.keys();
        let mut pipe = redis::pipe();
        for t in names {
            pipe.zcard(k.qdelayed(t))
                .zcard(k.qready(t))
                .zcard(k.qreserved(t))
                .zcard(k.qdead(t))
                .hgetall(k.qstats(t));
        }
        let values: Vec<Value> = pipe.query_async(&mut self.store.connection()).await?;
        values
            .chunks(5)
            .map(|chunk| {
                TopicRow::from_redis_value(Value::Array(chunk.to_vec()))
                    .map_err(|e| redis::RedisError::from(e).into())
            })
            .collect()
    }

    /// The earliest delayed task and the earliest reservation (with their scores) of each
    /// topic, in the order given, in one round trip.
    pub(super) async fn read_first_due(
        &self,
        names: &[String],
    ) -> Result<Vec<(Option<f64>, Option<f64>)>> {
        let k = self.store.keys();
        let mut pipe = redis::pipe();
        for t in names {
            pipe.zrange_withscores(k.qdelayed(t), 0, 0)
                .zrange_withscores(k.qreserved(t), 0, 0);
        }
        let heads: Vec<Vec<(String, f64)>> = pipe.query_async(&mut self.store.connection()).await?;
        Ok(heads
            .chunks(2)
            .map(|pair| {
                (
                    pair[0].first().map(|(_, s)| *s),
                    pair[1].first().map(|(_, s)| *s),
                )
            })
            .collect())
    }
}

/// `BLPOP notify secs` on a connection of its own (it blocks that connection): returns when a
/// notification arrives or after `secs`.
pub(super) async fn blpop(
    conn: &mut redis::aio::MultiplexedConnection,
    notify: &str,
    secs: f64,
) -> redis::RedisResult<Value> {
    redis::cmd("BLPOP")
        .arg(notify)
        .arg(secs)
        .query_async(conn)
        .await
}
