//! The delay queue's Redis calls, and the only code of the queue that talks to Redis: one Lua
//! script per atomic change (`lua/*.lua`, each with a header naming its KEYS, ARGV and reply,
//! loaded once and run by EVALSHA through the store's `script!` macro), every key named by
//! [`crate::store::Keys`] and passed in KEYS, and the blocking waits of pops ([`BlockingPool`]).
//! A script works on one lane of a topic ([`Lane`]: a partition on its shard, or the topic's
//! keys under the meta tag) and the records of that lane's tasks, so it touches one slot
//! (Redis Cluster). Reads are pipelined per slot.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, AsyncConnectionConfig, FromRedisValue, Value};

use super::check::{Checked, add_args};
use super::lane::{Lane, token_hex};
use super::reply::{AddReply, FinishReply, PopReply, PromoteReply, RequeueReply};
use super::{DEFAULT_MAX_DELIVERIES, DEFAULT_TTR, NOTIFY_CAP, PROMOTE_BATCH, Queue, duration_ms};
use crate::error::{Error, Result};
use crate::store::{DueFrom, script};

script!(ADD, "text_lib.lua" + "add.lua");
script!(PROMOTE, "promote.lua");
script!(POP, "text_lib.lua" + "pop.lua");
script!(FINISH, "../../store/lua/fanin_lib.lua" + "finish.lua");
script!(REQUEUE, "../../store/lua/fanin_lib.lua" + "requeue.lua");
script!(TOUCH, "touch.lua");
script!(DELETE, "../../store/lua/fanin_lib.lua" + "delete.lua");
script!(READY, "ready.lua");
script!(TAKE, "take.lua");
script!(ADOPT, "adopt.lua");
script!(SWITCH, "switch.lua");
script!(DECLARE, "declare.lua");
script!(INDEX, "index.lua");

impl Queue {
    /// `add.lua` over tasks of one lane.
    pub(super) fn add_invocation(
        &self,
        lane: &Lane,
        tasks: &[&Checked],
        traceparent: Option<&str>,
        dedup: Option<(&str, i64, &str)>,
    ) -> redis::Cmd {
        let k = lane.keys(self.store.shards());
        let n = lane.name();
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(ADD.get_hash())
            .arg(6 + tasks.len() + usize::from(dedup.is_some()))
            .arg(k.qdelayed(&n))
            .arg(k.qready(&n))
            .arg(k.qnotify(&n))
            .arg(k.qstats(&n))
            .arg(k.qnext())
            .arg(k.qdue());
        for t in tasks {
            cmd.arg(k.qtask(&t.id));
        }
        if let Some((key, _, _)) = dedup {
            cmd.arg(key);
        }
        cmd.arg(&lane.topic)
            .arg(NOTIFY_CAP)
            .arg(k.changes())
            .arg(lane.id());
        for t in tasks {
            cmd.arg(&add_args(t)[..])
                .arg(traceparent.unwrap_or_default());
        }
        if let Some((_, window_ms, stale)) = dedup {
            cmd.arg(window_ms).arg(stale);
        }
        cmd
    }

    /// `add.lua` over one task with a dedup key (the key, its window in ms, and the id of a
    /// task the key named that is gone, or ''): its raw reply.
    pub(super) async fn add_one_deduped(
        &self,
        lane: &Lane,
        task: &Checked,
        traceparent: Option<&str>,
        dedup: (&str, i64, &str),
    ) -> Result<Vec<Value>> {
        ADD.load_async(&mut self.store.connection()).await?;
        let cmd = self.add_invocation(lane, &[task], traceparent, Some(dedup));
        Ok(cmd.query_async(&mut self.store.connection()).await?)
    }

    /// Run `add.lua` commands, one pipeline per slot, concurrently (the script loaded first:
    /// EVALSHA is not retried on NOSCRIPT inside a pipeline). Answers in the order given.
    pub(super) async fn run_adds(&self, cmds: Vec<(Lane, redis::Cmd)>) -> Result<Vec<AddReply>> {
        ADD.load_async(&mut self.store.connection()).await?;
        let mut groups: Vec<(Option<usize>, Vec<usize>)> = Vec::new();
        for (i, (lane, _)) in cmds.iter().enumerate() {
            match groups.iter_mut().find(|(g, _)| *g == lane.slot_group()) {
                Some((_, idx)) => idx.push(i),
                None => groups.push((lane.slot_group(), vec![i])),
            }
        }
        let calls = groups.iter().map(|(_, idx)| {
            let mut pipe = redis::pipe();
            for &i in idx {
                pipe.add_command(cmds[i].1.clone());
            }
            async move {
                let mut conn = self.store.connection();
                let replies: Vec<AddReply> = pipe.query_async(&mut conn).await?;
                Ok::<_, Error>(replies)
            }
        });
        let answered = futures::future::try_join_all(calls).await?;
        let mut out: Vec<Option<AddReply>> = (0..cmds.len()).map(|_| None).collect();
        for ((_, idx), replies) in groups.iter().zip(answered) {
            if replies.len() != idx.len() {
                return Err(Error::Corrupt("add: replies missing".into()));
            }
            for (&i, r) in idx.iter().zip(replies) {
                out[i] = Some(r);
            }
        }
        Ok(out
            .into_iter()
            .map(|r| r.expect("every add answered"))
            .collect())
    }

    /// Put `topic` into the set of topics (once per queue: the set grows with topics).
    pub(super) async fn register(&self, topic: &str) -> Result<()> {
        if self
            .topo
            .lock()
            .expect("topology lock")
            .registered
            .contains(topic)
        {
            return Ok(());
        }
        let _: i64 = self
            .store
            .connection()
            .sadd(self.store.keys().qtopics(), topic)
            .await?;
        self.topo
            .lock()
            .expect("topology lock")
            .registered
            .insert(topic.to_string());
        Ok(())
    }

    /// One run of `promote.lua`: moves up to [`PROMOTE_BATCH`] due tasks of a lane to ready.
    pub(super) async fn promote_once(&self, lane: &Lane) -> Result<PromoteReply> {
        let k = lane.keys(self.store.shards());
        let n = lane.name();
        Ok(PROMOTE
            .key(k.qdelayed(&n))
            .key(k.qready(&n))
            .key(k.qnotify(&n))
            .key(k.qnext())
            .key(k.qreserved(&n))
            .key(k.qdue())
            .key(k.qstats(&n))
            .arg(PROMOTE_BATCH)
            .arg(NOTIFY_CAP)
            .arg(lane.id())
            .invoke_async(&mut self.store.connection())
            .await?)
    }

    /// `pop.lua`: reserve up to `max` of a lane's candidates, each under its own token, none
    /// of a priority below `floor`.
    pub(super) async fn pop_script(
        &self,
        lane: &Lane,
        max: usize,
        floor: u8,
        candidates: &[String],
    ) -> Result<PopReply> {
        let k = lane.keys(self.store.shards());
        let n = lane.name();
        let mut inv = POP.prepare_invoke();
        inv.key(k.qready(&n))
            .key(k.qreserved(&n))
            .key(k.qnotify(&n))
            .key(k.qstats(&n))
            .key(k.qdue());
        for id in candidates {
            inv.key(k.qtask(id));
        }
        inv.arg(max)
            .arg(DEFAULT_MAX_DELIVERIES)
            .arg(duration_ms(DEFAULT_TTR))
            .arg(lane.id())
            .arg(floor);
        for id in candidates {
            // The topic (and the partition) ride in the token, so finish and touch need not
            // read them first.
            inv.arg(id)
                .arg(format!("{}.{}", token_hex(lane.part), lane.topic));
        }
        Ok(inv.invoke_async(&mut self.store.connection()).await?)
    }

    /// `finish.lua` over `(id, token)` pairs of one lane.
    pub(super) async fn finish_script(
        &self,
        lane: &Lane,
        items: &[(&str, &str)],
    ) -> Result<FinishReply> {
        let k = lane.keys(self.store.shards());
        let mut inv = FINISH.prepare_invoke();
        inv.key(k.qreserved(&lane.name()))
            .key(k.qstats(&lane.name()));
        for (id, _) in items {
            inv.key(k.qtask(id));
        }
        inv.arg(duration_ms(self.retention));
        for (id, token) in items {
            inv.arg(*id).arg(*token);
        }
        Ok(inv.invoke_async(&mut self.store.connection()).await?)
    }

    /// `requeue.lua` over these reserved ids of a lane (those not yet expired are left alone).
    pub(super) async fn requeue(&self, lane: &Lane, ids: &[String]) -> Result<RequeueReply> {
        let k = lane.keys(self.store.shards());
        let n = lane.name();
        let mut inv = REQUEUE.prepare_invoke();
        inv.key(k.qready(&n))
            .key(k.qreserved(&n))
            .key(k.qdead(&n))
            .key(k.qnotify(&n))
            .key(k.qstats(&n));
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
        lane: &Lane,
        id: &str,
        token: &str,
        ttr_ms: Option<i64>,
    ) -> Result<Vec<Value>> {
        let k = lane.keys(self.store.shards());
        Ok(TOUCH
            .key(k.qtask(id))
            .key(k.qreserved(&lane.name()))
            .arg(id)
            .arg(token)
            .arg(ttr_ms.map(|t| t.to_string()).unwrap_or_default())
            .invoke_async(&mut self.store.connection())
            .await?)
    }

    /// `delete.lua`.
    pub(super) async fn delete_script(&self, lane: &Lane, id: &str) -> Result<Vec<Value>> {
        let k = lane.keys(self.store.shards());
        let n = lane.name();
        Ok(DELETE
            .key(k.qtask(id))
            .key(k.qdelayed(&n))
            .key(k.qready(&n))
            .key(k.qreserved(&n))
            .key(k.qdead(&n))
            .key(k.qstats(&n))
            .arg(id)
            .arg(duration_ms(self.retention))
            .invoke_async(&mut self.store.connection())
            .await?)
    }

    /// `ready.lua`, for the `topic` handler: `promote` a task queued by an earlier version,
    /// or `create` a ready one (`extra`: its payload, ttr ms, max deliveries and due instant).
    pub(super) async fn ready_script(
        &self,
        lane: &Lane,
        id: &str,
        mode: &str,
        extra: Option<(String, i64, u32, i64)>,
    ) -> Result<Vec<Value>> {
        let k = lane.keys(self.store.shards());
        let n = lane.name();
        let mut inv = READY.prepare_invoke();
        inv.key(k.qtask(id))
            .key(k.qdelayed(&n))
            .key(k.qready(&n))
            .key(k.qnotify(&n))
            .key(k.qstats(&n))
            .arg(id)
            .arg(mode)
            .arg(&lane.topic)
            .arg(NOTIFY_CAP);
        if let Some((payload, ttr, max, due)) = extra {
            inv.arg(payload).arg(ttr).arg(max).arg(due);
        }
        Ok(inv.invoke_async(&mut self.store.connection()).await?)
    }

    /// `take.lua`: take these candidates out of a topic's meta-tag lane, into its `moving` set.
    /// Answers per candidate: kind (`d`, `r` or empty: not taken), score, record.
    pub(super) async fn take_script(
        &self,
        topic: &str,
        ids: &[String],
    ) -> Result<Vec<(String, f64, Vec<(String, String)>)>> {
        let k = self.store.keys();
        let mut inv = TAKE.prepare_invoke();
        inv.key(k.qdelayed(topic))
            .key(k.qready(topic))
            .key(k.qmoving(topic));
        for id in ids {
            inv.key(k.qtask(id));
            inv.arg(id);
        }
        let mut reply: Vec<Value> = inv.invoke_async(&mut self.store.connection()).await?;
        if reply.len() != 1 + 3 * ids.len() {
            return Err(Error::Corrupt(format!("take answered {reply:?}")));
        }
        reply.remove(0);
        reply
            .chunks(3)
            .map(|c| {
                <(String, f64, Vec<(String, String)>)>::from_redis_value(Value::Array(c.to_vec()))
                    .map_err(|e| redis::RedisError::from(e).into())
            })
            .collect()
    }

    /// `adopt.lua`: copy a taken task into its partition. Whether it was copied (not there).
    pub(super) async fn adopt_script(
        &self,
        lane: &Lane,
        id: &str,
        kind: &str,
        score: f64,
        record: &[(String, String)],
    ) -> Result<bool> {
        let k = lane.keys(self.store.shards());
        let n = lane.name();
        let mut inv = ADOPT.prepare_invoke();
        inv.key(k.qtask(id))
            .key(k.qdelayed(&n))
            .key(k.qready(&n))
            .key(k.qnotify(&n))
            .key(k.qnext())
            .key(k.qdue())
            .arg(id)
            .arg(kind)
            .arg(score as i64)
            .arg(NOTIFY_CAP)
            .arg(lane.id());
        for (f, v) in record {
            inv.arg(f).arg(v);
        }
        let copied: i64 = inv.invoke_async(&mut self.store.connection()).await?;
        Ok(copied == 1)
    }

    /// Forget moved tasks in a topic's meta-tag lane: their `moving` entries and records.
    pub(super) async fn forget_moved(&self, topic: &str, ids: &[String]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let k = self.store.keys();
        let mut pipe = redis::pipe();
        pipe.zrem(k.qmoving(topic), ids).ignore();
        for id in ids {
            pipe.del(k.qtask(id)).ignore();
        }
        let () = pipe.query_async(&mut self.store.connection()).await?;
        Ok(())
    }

    /// The entries of a topic's `moving` set older than `before_ms` (Redis time), and the
    /// heads (up to `n`) of its meta-tag delayed and ready sets.
    pub(super) async fn read_legacy_heads(
        &self,
        topic: &str,
        before_ms: i64,
        n: usize,
    ) -> Result<(Vec<String>, Vec<String>, Vec<String>)> {
        let k = self.store.keys();
        Ok(redis::pipe()
            .zrangebyscore_limit(k.qmoving(topic), "-inf", before_ms, 0, n as isize)
            .zrange(k.qdelayed(topic), 0, n as isize - 1)
            .zrange(k.qready(topic), 0, n as isize - 1)
            .query_async(&mut self.store.connection())
            .await?)
    }

    /// The records of tasks left in a topic's `moving` set.
    pub(super) async fn read_legacy_records(
        &self,
        ids: &[String],
    ) -> Result<Vec<HashMap<String, String>>> {
        let k = self.store.keys();
        let mut pipe = redis::pipe();
        for id in ids {
            pipe.hgetall(k.qtask(id));
        }
        Ok(pipe.query_async(&mut self.store.connection()).await?)
    }

    /// `index.lua`: `join` the nodes that keep the due index, or `mark` it complete after a
    /// walk. Whether every node seen within `window` keeps it (and, for `mark`, it is marked).
    pub(super) async fn index_script(
        &self,
        mode: &str,
        node: &str,
        window: Duration,
    ) -> Result<bool> {
        let k = self.store.keys();
        let done: i64 = INDEX
            .key(k.qindexed())
            .key(k.qindexers())
            .key(k.nodes())
            .arg(mode)
            .arg(node)
            .arg(duration_ms(window))
            .invoke_async(&mut self.store.connection())
            .await?;
        Ok(done == 1)
    }

    /// Whether the due index is marked complete.
    pub(super) async fn index_marked(&self) -> Result<bool> {
        Ok(self
            .store
            .connection()
            .exists(self.store.keys().qindexed())
            .await?)
    }

    /// Lower the due-index entries of these lanes to these instants (`ZADD LT`: never raised),
    /// pipelined per slot: what a walk over every topic found.
    pub(super) async fn write_index(&self, entries: &[(Lane, i64)]) -> Result<()> {
        let shards = self.store.shards();
        let lanes: Vec<Lane> = entries.iter().map(|(l, _)| l.clone()).collect();
        let at: HashMap<String, i64> = entries.iter().map(|(l, a)| (l.id(), *a)).collect();
        self.per_slot(&lanes, 1, |pipe, lane| {
            pipe.cmd("ZADD")
                .arg(lane.keys(shards).qdue())
                .arg("LT")
                .arg(at[&lane.id()])
                .arg(lane.id());
        })
        .await?;
        Ok(())
    }

    /// A page of a tag's due index (`None`: the meta tag's), as [`crate::store::Store::zset_page`].
    pub(super) async fn index_page(
        &self,
        shard: Option<usize>,
        from: &DueFrom,
        max_ms: i64,
        limit: usize,
    ) -> Result<Vec<(String, i64)>> {
        let keys = Lane::on_shard(shard).keys(self.store.shards());
        self.store.zset_page(keys.qdue(), from, max_ms, limit).await
    }

    /// Whether any of these topics still holds tasks in its lane under the meta tag (delayed,
    /// ready, reserved, or being moved): one `EXISTS` per topic.
    pub(super) async fn legacy_left(&self, topics: &[String]) -> Result<bool> {
        let k = self.store.keys();
        for chunk in topics.chunks(500) {
            let mut pipe = redis::pipe();
            for t in chunk {
                pipe.cmd("EXISTS")
                    .arg(k.qdelayed(t))
                    .arg(k.qready(t))
                    .arg(k.qreserved(t))
                    .arg(k.qmoving(t));
            }
            let found: Vec<i64> = pipe.query_async(&mut self.store.connection()).await?;
            if found.iter().any(|&n| n > 0) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// `switch.lua`: switch to the sharded layout if every node seen within `window` is in
    /// the upgraded set. Whether the layout is sharded now.
    pub(super) async fn switch_script(&self, window: Duration) -> Result<bool> {
        let k = self.store.keys();
        let done: i64 = SWITCH
            .key(k.qlayout())
            .key(k.qupgraded())
            .key(k.nodes())
            .key(k.qindexed())
            .arg(duration_ms(window))
            .invoke_async(&mut self.store.connection())
            .await?;
        Ok(done == 1)
    }

    /// Write the sharded layout back where its key is missing (Redis lost it).
    pub(super) async fn restore_layout(&self) -> Result<()> {
        let now = self.store.time_ms().await?;
        let written: bool = redis::cmd("SET")
            .arg(self.store.keys().qlayout())
            .arg(format!("2:{now}"))
            .arg("NX")
            .query_async::<Option<String>>(&mut self.store.connection())
            .await?
            .is_some();
        if written {
            tracing::warn!("the delay queue's layout key was missing: written back (sharded)");
        }
        Ok(())
    }

    /// Put a node into the set of nodes that serve the sharded layout.
    pub(super) async fn mark_upgraded(&self, node: &str) -> Result<()> {
        let _: i64 = self
            .store
            .connection()
            .sadd(self.store.keys().qupgraded(), node)
            .await?;
        Ok(())
    }

    /// `declare.lua`: set a topic's partition count. `Ok(None)` when set, `Ok(Some(current))`
    /// when refused (the count is fixed).
    pub(super) async fn declare_script(&self, topic: &str, n: usize) -> Result<Option<usize>> {
        let k = self.store.keys();
        let (ok, cur): (i64, usize) = DECLARE
            .key(k.qpartitions())
            .key(k.qtopics())
            .key(k.qlayout())
            .arg(topic)
            .arg(n)
            .invoke_async(&mut self.store.connection())
            .await?;
        Ok((ok != 1).then_some(cur))
    }

    /// The layout key, the partition counts and the topics that hold priorities, in one
    /// round trip.
    pub(super) async fn read_topology(
        &self,
    ) -> Result<(Option<String>, HashMap<String, usize>, Vec<String>)> {
        let k = self.store.keys();
        Ok(redis::pipe()
            .get(k.qlayout())
            .hgetall(k.qpartitions())
            .smembers(k.qprio())
            .query_async(&mut self.store.connection())
            .await?)
    }
}

/// A topic's counts as read: delayed, ready, reserved, dead, and its counters.
pub(super) type TopicRow = (u64, u64, u64, u64, HashMap<String, i64>);

/// A lane's figures for metrics: delayed, ready, reserved, dead, the head of its ready set,
/// its counters.
pub(super) type LaneStats = (u64, u64, u64, u64, Vec<(String, f64)>, Vec<Option<i64>>);

/// What [`Queue::read_heads`] read of a lane.
pub(super) struct Heads {
    /// Ids of its ready set, from where the read started.
    pub(super) ready: Vec<String>,
    /// Its first reservations: id, deadline.
    pub(super) reserved: Vec<(String, f64)>,
    /// Redis's time, ms.
    pub(super) now: i64,
    /// A read that skipped: the head of its ready set is of a priority.
    pub(super) prioritized: bool,
}

/// The queue's reads (no script: what they read may change right after, and every change
/// goes through a script that checks again).
impl Queue {
    /// `ready` ids of a lane's ready set from `skip` places behind its head, its first
    /// `reserved` reservations (id, deadline) and Redis's time (ms), in one round trip; with
    /// `skip`, also whether the ready set's head is of a priority (then a pop must not skip).
    pub(super) async fn read_heads(
        &self,
        lane: &Lane,
        skip: usize,
        ready: usize,
        reserved: usize,
    ) -> Result<Heads> {
        let k = lane.keys(self.store.shards());
        let n = lane.name();
        let mut pipe = redis::pipe();
        pipe.zrange(k.qready(&n), skip as isize, (skip + ready) as isize - 1)
            .zrange_withscores(k.qreserved(&n), 0, reserved as isize - 1)
            .cmd("TIME");
        type Read = (Vec<String>, Vec<(String, f64)>, (i64, i64));
        let ((ready, reserved, time), first): (Read, Vec<(String, f64)>) = if skip > 0 {
            let (ready, reserved, time, first) = pipe
                .zrange_withscores(k.qready(&n), 0, 0)
                .query_async(&mut self.store.connection())
                .await?;
            ((ready, reserved, time), first)
        } else {
            (
                pipe.query_async(&mut self.store.connection()).await?,
                Vec::new(),
            )
        };
        Ok(Heads {
            ready,
            reserved,
            now: crate::store::time_reply_ms(time),
            prioritized: first.first().is_some_and(|(_, score)| *score < 0.0),
        })
    }

    /// The first `n` reservations (id, deadline) of a lane and Redis's time (ms).
    pub(super) async fn read_reserved_head(
        &self,
        lane: &Lane,
        n: usize,
    ) -> Result<(Vec<(String, f64)>, i64)> {
        let k = lane.keys(self.store.shards());
        let (reserved, time): (Vec<(String, f64)>, (i64, i64)) = redis::pipe()
            .zrange_withscores(k.qreserved(&lane.name()), 0, n as isize - 1)
            .cmd("TIME")
            .query_async(&mut self.store.connection())
            .await?;
        Ok((reserved, crate::store::time_reply_ms(time)))
    }

    /// The first `n` ids of a lane's ready set.
    pub(super) async fn read_ready_head(&self, lane: &Lane, n: usize) -> Result<Vec<String>> {
        let k = lane.keys(self.store.shards());
        Ok(self
            .store
            .connection()
            .zrange(k.qready(&lane.name()), 0, n as isize - 1)
            .await?)
    }

    /// A task's record in a lane (empty when there is none), and its score in the lane's ready
    /// set, in one round trip.
    pub(super) async fn read_record(
        &self,
        lane: &Lane,
        id: &str,
    ) -> Result<(HashMap<String, String>, Option<f64>)> {
        let k = lane.keys(self.store.shards());
        Ok(redis::pipe()
            .hgetall(k.qtask(id))
            .zscore(k.qready(&lane.name()), id)
            .query_async(&mut self.store.connection())
            .await?)
    }

    /// The topic a task's record in a lane's hash tag names (the lane's topic is ignored:
    /// this finds a task by id alone).
    pub(super) async fn read_task_topic(&self, lane: &Lane, id: &str) -> Result<Option<String>> {
        let k = lane.keys(self.store.shards());
        Ok(self.store.connection().hget(k.qtask(id), "topic").await?)
    }

    /// The newest `limit` dead letters of a lane: ids, when they died, and their records.
    pub(super) async fn read_dead(
        &self,
        lane: &Lane,
        limit: usize,
    ) -> Result<Vec<(String, f64, HashMap<String, String>)>> {
        let k = lane.keys(self.store.shards());
        let mut conn = self.store.connection();
        let ids: Vec<(String, f64)> = conn
            .zrevrange_withscores(k.qdead(&lane.name()), 0, limit as isize - 1)
            .await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for (id, _) in &ids {
            pipe.hgetall(k.qtask(id));
        }
        let maps: Vec<HashMap<String, String>> = pipe.query_async(&mut conn).await?;
        Ok(ids
            .into_iter()
            .zip(maps)
            .map(|((id, at), m)| (id, at, m))
            .collect())
    }

    /// Every topic's name, unsorted.
    pub(super) async fn read_topic_set(&self) -> Result<Vec<String>> {
        Ok(self
            .store
            .connection()
            .smembers(self.store.keys().qtopics())
            .await?)
    }

    /// Run `build` for each lane (in order) into one pipeline per slot, concurrently, with
    /// `per` replies per lane; answers per lane, in the order given.
    pub(super) async fn per_slot(
        &self,
        lanes: &[Lane],
        per: usize,
        build: impl Fn(&mut redis::Pipeline, &Lane),
    ) -> Result<Vec<Vec<Value>>> {
        let mut groups: Vec<(Option<usize>, Vec<usize>)> = Vec::new();
        for (i, lane) in lanes.iter().enumerate() {
            match groups.iter_mut().find(|(g, _)| *g == lane.slot_group()) {
                Some((_, idx)) => idx.push(i),
                None => groups.push((lane.slot_group(), vec![i])),
            }
        }
        let calls = groups.iter().map(|(_, idx)| {
            let mut pipe = redis::pipe();
            for &i in idx {
                build(&mut pipe, &lanes[i]);
            }
            async move {
                let values: Vec<Value> = pipe.query_async(&mut self.store.connection()).await?;
                Ok::<_, Error>(values)
            }
        });
        let answered = futures::future::try_join_all(calls).await?;
        let mut out: Vec<Vec<Value>> = vec![Vec::new(); lanes.len()];
        for ((_, idx), values) in groups.iter().zip(answered) {
            if values.len() != idx.len() * per {
                return Err(Error::Corrupt("a pipelined read lost replies".into()));
            }
            for (&i, chunk) in idx.iter().zip(values.chunks(per)) {
                out[i] = chunk.to_vec();
            }
        }
        Ok(out)
    }

    /// Each lane's counts, in the order given.
    pub(super) async fn read_lane_rows(&self, lanes: &[Lane]) -> Result<Vec<TopicRow>> {
        let shards = self.store.shards();
        let rows = self
            .per_slot(lanes, 5, |pipe, lane| {
                let (k, n) = (lane.keys(shards), lane.name());
                pipe.zcard(k.qdelayed(&n))
                    .zcard(k.qready(&n))
                    .zcard(k.qreserved(&n))
                    .zcard(k.qdead(&n))
                    .hgetall(k.qstats(&n));
            })
            .await?;
        rows.into_iter()
            .map(|chunk| {
                TopicRow::from_redis_value(Value::Array(chunk))
                    .map_err(|e| redis::RedisError::from(e).into())
            })
            .collect()
    }

    /// Each lane's figures for metrics, in the order given: `ZCARD` of its four sets, the head
    /// of its ready set (id, when it became ready), its counters (added by earlier releases,
    /// delivered, redelivered, done, dead), its paused flag (when it was paused, if it is),
    /// and the counters tasks added are derived with (deleted, replayed).
    pub(super) async fn read_lane_stats(&self, lanes: &[Lane]) -> Result<Vec<LaneStats>> {
        let shards = self.store.shards();
        let rows = self
            .per_slot(lanes, 6, |pipe, lane| {
                let (k, t) = (lane.keys(shards), lane.name());
                pipe.zcard(k.qdelayed(&t))
                    .zcard(k.qready(&t))
                    .zcard(k.qreserved(&t))
                    .zcard(k.qdead(&t))
                    .zrange_withscores(k.qready(&t), 0, 0)
                    .cmd("HMGET")
                    .arg(k.qstats(&t))
                    .arg(&[
                        "added",
                        "delivered",
                        "redelivered",
                        "done",
                        "dead",
                        "paused",
                        "deleted",
                        "replayed",
                    ]);
            })
            .await?;
        rows.into_iter()
            .map(|row| {
                LaneStats::from_redis_value(Value::Array(row))
                    .map_err(|e| redis::RedisError::from(e).into())
            })
            .collect()
    }

    /// The earliest delayed task and the earliest reservation (with their scores) of each
    /// lane, in the order given.
    pub(super) async fn read_first_due(
        &self,
        lanes: &[Lane],
    ) -> Result<Vec<(Option<f64>, Option<f64>)>> {
        let shards = self.store.shards();
        let rows = self
            .per_slot(lanes, 2, |pipe, lane| {
                let (k, n) = (lane.keys(shards), lane.name());
                pipe.zrange_withscores(k.qdelayed(&n), 0, 0)
                    .zrange_withscores(k.qreserved(&n), 0, 0);
            })
            .await?;
        rows.into_iter()
            .map(|pair| {
                let heads = <Vec<Vec<(String, f64)>>>::from_redis_value(Value::Array(pair))
                    .map_err(redis::RedisError::from)?;
                Ok((
                    heads.first().and_then(|h| h.first()).map(|(_, s)| *s),
                    heads.get(1).and_then(|h| h.first()).map(|(_, s)| *s),
                ))
            })
            .collect()
    }
}

/// How long a `BLPOP` may take beyond its own timeout before its connection is given up.
const BLOCK_SLACK: Duration = Duration::from_secs(2);
/// Idle blocking connections kept for reuse.
const POOL_MAX: usize = 64;

/// Connections for blocking pops (`BLPOP` on the notify lists of a topic's lanes). A blocking
/// command stalls every other command queued on its connection, and the store's multiplexed
/// connection times responses out after 500 ms, so each waiting pop takes a connection of its
/// own (no response timeout) from this small pool. Standalone Redis only: there every lane's
/// list is on the one server, so one `BLPOP` waits on all of them.
pub(super) struct BlockingPool {
    // Boxed: a client with TLS settings is large.
    client: Box<redis::Client>,
    idle: Mutex<Vec<MultiplexedConnection>>,
}

impl BlockingPool {
    pub(super) fn new(client: redis::Client) -> Self {
        Self {
            client: Box::new(client),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// `BLPOP` on the notify lists of `lanes` for up to `limit`: returns when a wake-up token
    /// arrives on any or the time is up.
    pub(super) async fn wait(&self, queue: &Queue, lanes: &[Lane], limit: Duration) -> Result<()> {
        let pooled = self.idle.lock().expect("blocking pool lock").pop();
        let mut conn = match pooled {
            Some(c) => c,
            None => {
                let config = AsyncConnectionConfig::new().set_response_timeout(None);
                self.client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?
            }
        };
        let shards = queue.store.shards();
        let mut cmd = redis::cmd("BLPOP");
        for lane in lanes {
            cmd.arg(lane.keys(shards).qnotify(&lane.name()));
        }
        // BLPOP takes seconds as a float (Redis >= 6); 0 would mean "forever".
        cmd.arg(limit.as_secs_f64().max(0.001));
        let blpop = cmd.query_async::<Value>(&mut conn);
        match tokio::time::timeout(limit + BLOCK_SLACK, blpop).await {
            Ok(Ok(_)) => {
                let mut pool = self.idle.lock().expect("blocking pool lock");
                if pool.len() < POOL_MAX {
                    pool.push(conn);
                }
                Ok(())
            }
            // The connection failed: drop it (a fresh one is opened next time).
            Ok(Err(e)) => Err(e.into()),
            // No answer in time: the connection may still hold the BLPOP; drop it, which
            // closes it and lets Redis forget the blocked client.
            Err(_) => Ok(()),
        }
    }
}
