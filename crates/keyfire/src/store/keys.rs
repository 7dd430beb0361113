//! Every Redis key name keyfire uses, built in this one place.
//!
//! Jobs are spread over shards ([`Shards`]); each shard's keys share one hash tag, so every
//! script touches one slot (Redis Cluster). What belongs to no job (membership, handlers,
//! the change channel, the layout version, the delay queue) lives under the meta tag
//! `{prefix}`. With one shard, the shard is the meta tag: the layout of a single Redis is
//! the same as before sharding. Job ids cannot hold `:` (see `job::validate_id`), so a
//! sentinel key's name can be split back into job id and instant: the `expired` event
//! carries only the name.

use std::collections::HashMap;

/// Slots of a Redis Cluster.
pub const CLUSTER_SLOTS: u16 = 16_384;

/// The cluster slot of a key (CRC16 of its hash tag, as Redis computes it).
pub fn slot_of(key: &str) -> u16 {
    let b = key.as_bytes();
    let tagged = b.iter().position(|&c| c == b'{').and_then(|open| {
        let rest = &b[open + 1..];
        rest.iter()
            .position(|&c| c == b'}')
            .filter(|&close| close > 0)
            .map(|close| &rest[..close])
    });
    crc16::State::<crc16::XMODEM>::calculate(tagged.unwrap_or(b)) % CLUSTER_SLOTS
}

/// A stable 64-bit hash (FNV-1a with a SplitMix64 finish). Every node must compute the same
/// owner, whatever its Rust version, so std's `DefaultHasher` (unspecified) will not do.
pub fn stable_hash(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.bytes().chain(std::iter::once(0xff)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// Compact task buckets per shard ([`Keys::tasks`]). A bucket of up to 128 tasks is one
/// listpack in Redis (`hash-max-listpack-entries`), so 8,192 buckets keep a million pending
/// tasks per shard in listpacks. Part of the key layout: every node must agree on it.
pub const TASK_BUCKETS: u32 = 8_192;

/// The compact bucket of a task id: [`stable_hash`] of it, salted so that the bucket does
/// not follow the shard.
pub fn task_bucket(id: &str) -> u32 {
    (stable_hash(&["task", id]) % u64::from(TASK_BUCKETS)) as u32
}

/// The key sets of every shard, plus the meta keys.
#[derive(Debug, Clone)]
pub struct Shards {
    meta: Keys,
    shards: Vec<Keys>,
    /// Hash tag (with braces) → shard, to route an `expired` event by its key's name.
    by_tag: HashMap<String, usize>,
}

impl Shards {
    /// `n` shards under `prefix` (n ≥ 1). Shard `s` of `n > 1` takes the tag `{prefix:s}`,
    /// or `{prefix:s:k}` with the smallest `k` whose slot falls in the `s`-th of `n` equal
    /// slot ranges: a cluster whose masters hold equal ranges (as `redis-cli --cluster
    /// create` makes them) then holds equal numbers of shards when `n` is a multiple of
    /// the number of masters.
    pub fn new(prefix: &str, n: usize) -> Self {
        let meta = Keys::new(prefix);
        let shards: Vec<Keys> = if n <= 1 {
            vec![meta.clone()]
        } else {
            let n = n.min(CLUSTER_SLOTS as usize);
            (0..n)
                .map(|s| {
                    let lo = (s * CLUSTER_SLOTS as usize / n) as u16;
                    let hi = ((s + 1) * CLUSTER_SLOTS as usize / n) as u16;
                    (0u32..)
                        .map(|k| match k {
                            0 => format!("{prefix}:{s}"),
                            k => format!("{prefix}:{s}:{k}"),
                        })
                        .map(|inner| Keys::new(&inner))
                        .find(|keys| (lo..hi).contains(&slot_of(&keys.tag)))
                        .expect("every slot range is hit by some suffix")
                })
                .collect()
        };
        let by_tag = shards
            .iter()
            .enumerate()
            .map(|(i, k)| (k.tag.clone(), i))
            .collect();
        Self {
            meta,
            shards,
            by_tag,
        }
    }

    /// The keys that belong to no job (membership, handlers, changes, layout, queue).
    pub fn meta(&self) -> &Keys {
        &self.meta
    }

    /// Number of shards.
    pub fn len(&self) -> usize {
        self.shards.len()
    }

    /// Never true: there is at least one shard.
    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }

    /// The keys of shard `i`.
    pub fn keys(&self, i: usize) -> &Keys {
        &self.shards[i]
    }

    /// Every shard's keys, in shard order.
    pub fn iter(&self) -> impl Iterator<Item = &Keys> {
        self.shards.iter()
    }

    /// The shard a job lives on: [`stable_hash`] of its id, modulo the number of shards
    /// (the same on every node, build and version).
    pub fn of(&self, job_id: &str) -> usize {
        if self.shards.len() == 1 {
            return 0;
        }
        (stable_hash(&[job_id]) % self.shards.len() as u64) as usize
    }

    /// The keys of the shard a job lives on.
    pub fn for_job(&self, job_id: &str) -> &Keys {
        &self.shards[self.of(job_id)]
    }

    /// The shard partition `p` of a topic with `n` partitions lives on: the topic's own shard
    /// ([`Shards::of`] of its name, as for a job) for partition 0, and the others spread evenly
    /// round the shard ring from there (`base + p·shards/n`), so that up to `shards` partitions
    /// of one topic take distinct shards, and on a cluster whose masters hold equal slot ranges
    /// they spread over the masters too.
    pub fn of_partition(&self, topic: &str, p: usize, n: usize) -> usize {
        let len = self.shards.len();
        let n = n.max(1);
        (self.of(topic) + p * len / n) % len
    }

    /// The keys and the shard index of a hash tag (`{prefix}` is the meta tag: None).
    pub fn shard_of_tag(&self, tag: &str) -> Option<Option<usize>> {
        if tag == self.meta.tag && self.shards.len() > 1 {
            return Some(None);
        }
        self.by_tag.get(tag).map(|&s| Some(s))
    }

    /// Split a sentinel key's name into shard, job id and instant; None for keys of other
    /// prefixes or kinds.
    pub fn parse_fire(&self, key: &str) -> Option<(usize, String, i64)> {
        let close = key.find('}')?;
        let shard = *self.by_tag.get(&key[..=close])?;
        let (id, at) = self.shards[shard].parse_fire(key)?;
        Some((shard, id, at))
    }
}

/// Key names under one prefix.
#[derive(Debug, Clone)]
pub struct Keys {
    tag: String,
}

impl Keys {
    /// Keys under `{prefix}`.
    pub fn new(prefix: &str) -> Self {
        Self {
            tag: format!("{{{prefix}}}"),
        }
    }

    /// `<tag><kind><id>`, such as `{prefix}:job:<id>`.
    fn named(&self, kind: &str, id: &str) -> String {
        concat(&self.parts(kind, id))
    }

    /// The parts of `<tag><kind><id>` ([`JOB`], [`RUNS`]): a script call on the firing path
    /// writes them into its command, building no string per key.
    pub(crate) fn parts<'a>(&'a self, kind: &'a str, id: &'a str) -> [&'a str; 3] {
        [&self.tag, kind, id]
    }

    /// The parts of [`Keys::task_bucket`], its number written into `n`.
    pub(crate) fn task_bucket_parts<'a>(
        &'a self,
        id: &str,
        n: &'a mut itoa::Buffer,
    ) -> [&'a str; 3] {
        [&self.tag, TASKS, n.format(task_bucket(id))]
    }

    /// `<tag><suffix>`, such as `{prefix}:due`.
    fn sub(&self, suffix: &str) -> String {
        concat(&[&self.tag, suffix])
    }

    /// The prefix these keys are under (the hash tag without its braces).
    pub fn prefix(&self) -> &str {
        &self.tag[1..self.tag.len() - 1]
    }

    /// Hash with a job's spec, version, status, next firing and counters.
    pub fn job(&self, id: &str) -> String {
        self.named(JOB, id)
    }

    /// HASH of compact one-shot tasks: task id → `<generation>|<created ms>|<spec JSON
    /// without its id>`, one of [`TASK_BUCKETS`] per shard ([`task_bucket`] of the id). A
    /// task lives here from its creation until it is deleted, changed, or its run fails or
    /// is taken over: then it becomes a job hash ([`Keys::job`]) with an entry in
    /// [`Keys::jobs`]. Its instant is its entry in [`Keys::due`] until its firing is claimed;
    /// then its lease in [`Keys::running`], then its history ([`Keys::runs`]), say where
    /// its firing is.
    pub fn tasks(&self, bucket: u32) -> String {
        self.named(TASKS, itoa::Buffer::new().format(bucket))
    }

    /// The compact bucket ([`Keys::tasks`]) a task id lives in.
    pub fn task_bucket(&self, id: &str) -> String {
        self.tasks(task_bucket(id))
    }

    /// A batch of tasks with a completion callback (hash: `total`, the counts `ok`, `dead`,
    /// `cancelled`, `cb` the callback, `created`, `retention_ms`, `done_ms` once complete; see
    /// `lua/fanin_lib.lua`). Its tasks live on the shard of its id. The shard's `after` hash
    /// (task id → the ids of the tasks waiting for it) is named by the scripts from the tag.
    pub fn batch(&self, id: &str) -> String {
        format!("{}:batch:{id}", self.tag)
    }

    /// Counter of the compact tasks of this shard (they have no [`Keys::jobs`] entry).
    pub fn task_count(&self) -> String {
        self.sub(":tasks:count")
    }

    /// ZSET of every job id (score 0: ordered by id, for paging). Compact tasks
    /// ([`Keys::tasks`]) are not in it.
    pub fn jobs(&self) -> String {
        self.sub(":jobs")
    }

    /// ZSET job id → next firing instant (ms). The source of truth for what is due.
    pub fn due(&self) -> String {
        self.sub(":due")
    }

    /// Sentinel key of one pending firing; it expires at the firing's instant.
    pub fn fire(&self, id: &str, at_ms: i64) -> String {
        concat(&[
            &self.tag,
            ":fire:",
            id,
            ":",
            itoa::Buffer::new().format(at_ms),
        ])
    }

    /// This key set's hash tag, braces included.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The prefix every sentinel key starts with.
    pub fn fire_prefix(&self) -> String {
        self.sub(":fire:")
    }

    /// Split a sentinel key's name into job id and instant.
    pub fn parse_fire(&self, key: &str) -> Option<(String, i64)> {
        let rest = key.strip_prefix(&self.fire_prefix())?;
        let (id, at) = rest.rsplit_once(':')?;
        Some((id.to_string(), at.parse().ok()?))
    }

    /// A dedup key (`name` is [`crate::job::Dedup::name`]): it names the task enqueued with it
    /// and expires with its window. Tasks that name it live on the shard [`Shards::of`] gives
    /// for `name`, so the key and the task share a slot.
    pub fn dedup(&self, name: &str) -> String {
        self.named(":dedup:", name)
    }

    /// Watermark (ms): pending firings up to here have been given their sentinel keys.
    pub fn promoted(&self) -> String {
        self.sub(":promoted")
    }

    /// Counter of job generations: each job created (again) takes the next one.
    pub fn generation(&self) -> String {
        self.sub(":generation")
    }

    /// Lock of one firing's run (`SET NX PX`), written by nodes of an earlier layout only:
    /// a run's lease in [`Keys::running`] is its lock now. Read by a takeover of such a run
    /// during a rolling upgrade, to name its node.
    pub fn lock(&self, id: &str, at_ms: i64) -> String {
        concat(&[
            &self.tag,
            ":lock:",
            id,
            ":",
            itoa::Buffer::new().format(at_ms),
        ])
    }

    /// ZSET of runs in progress: the lease `<firing id>|<attempt>|<claimed ms>|<node>` → its
    /// expiry (ms). The member is the run's fence: renewals and the outcome must name it.
    /// (A run claimed by a node of the earlier layout: the bare firing id.)
    pub fn running(&self) -> String {
        self.sub(":running")
    }

    /// ZSET firing id → when its next attempt is due: retries, lease takeovers, manual triggers
    /// and dead-letter replays.
    pub fn retry(&self) -> String {
        self.sub(":retry")
    }

    /// HASH firing id → the attempt granted to a queued attempt (a bare number; the claim
    /// turns it into the run's lease in [`Keys::running`]). A run claimed by a node of the
    /// earlier layout has its lease record `<attempt>:<claimed ms>:<node>` here.
    pub fn attempts(&self) -> String {
        self.sub(":attempts")
    }

    /// HASH firing id → the lease it stops: running firings a cancel request flagged
    /// (cancel.lua). Their outcome, or a takeover of their run, records them `cancelled` and
    /// queues no further attempt.
    pub fn cancels(&self) -> String {
        self.sub(":cancels")
    }

    /// LIST of a job's dead letters (firings that exhausted their attempts), newest first.
    pub fn dead(&self, id: &str) -> String {
        self.named(":dead:", id)
    }

    /// ZSET one-shot job id → when it finished successfully (cleaned up after a retention).
    pub fn done(&self) -> String {
        self.sub(":done")
    }

    /// ZSET callback id (`<firing id>:succeeded` or `:failed`) → when its next attempt is
    /// due (ms, Redis time); a callback being sent is pushed a lease ahead.
    pub fn outbox(&self) -> String {
        self.sub(":outbox")
    }

    /// HASH callback id → the callback (JSON: job, target, payload), and `<id>|tries` → the
    /// attempts taken so far.
    pub fn outbox_data(&self) -> String {
        self.sub(":outbox:data")
    }

    /// LIST of a job's run records, newest first.
    pub fn runs(&self, id: &str) -> String {
        self.named(RUNS, id)
    }

    /// LIST of a job's skip records (the ledger of instants that did not run), newest first.
    pub fn skips(&self, id: &str) -> String {
        self.named(":skips:", id)
    }

    /// ZSET of the instants backfills queued for a job: `<generation>:<instant ms>` → when
    /// (ms); expires with the run history's maximum age.
    pub fn backfill(&self, id: &str) -> String {
        self.named(":backfill:", id)
    }

    /// ZSET node id → last heartbeat (ms, Redis time).
    pub fn nodes(&self) -> String {
        self.sub(":nodes")
    }

    /// Hash describing one node (version, handlers, load).
    pub fn node(&self, id: &str) -> String {
        self.named(":node:", id)
    }

    /// STRING: the data marker, a random id written once when keyfire first finds none under
    /// this tag (the meta tag's by the heartbeat, each shard's beside it). A node that reads
    /// another id than the one it knows learns that Redis lost or replaced the data.
    pub fn data_marker(&self) -> String {
        self.sub(":data")
    }

    /// HASH: the last data loss a node noticed (`at` ms, `node`, `detail`), kept for an hour
    /// (meta key): `/readyz` and `keyfire doctor` show it.
    pub fn data_loss(&self) -> String {
        self.sub(":data_loss")
    }

    /// SET of handler names registered by any node.
    pub fn handlers(&self) -> String {
        self.sub(":handlers")
    }

    /// Pub/sub channel on which every job change is announced (G4).
    pub fn changes(&self) -> String {
        self.sub(":changes")
    }

    /// The key-layout version this data was written with.
    pub fn layout(&self) -> String {
        self.sub(":layout")
    }

    /// The number of shards the data is spread over (meta key, next to [`Keys::layout`]).
    pub fn shard_count(&self) -> String {
        self.sub(":shards")
    }

    // Delay queue (`crate::queue`). Topic names and task ids cannot hold `:` (they are
    // checked like job ids), so these names cannot collide.

    /// Hash of one delay-queue task: state, topic, payload, ttr, deliveries, instants, token.
    pub fn qtask(&self, id: &str) -> String {
        self.named(":q:task:", id)
    }

    /// ZSET task id → due instant (ms): a topic's tasks waiting for their delay.
    pub fn qdelayed(&self, topic: &str) -> String {
        self.named(":q:delayed:", topic)
    }

    /// ZSET task id → when it became ready (ms): a topic's ready tasks, oldest first.
    pub fn qready(&self, topic: &str) -> String {
        self.named(":q:ready:", topic)
    }

    /// ZSET task id → reservation deadline (ms, Redis time): a topic's reserved tasks.
    pub fn qreserved(&self, topic: &str) -> String {
        self.named(":q:reserved:", topic)
    }

    /// ZSET task id → when it died (ms): a topic's dead letters (tasks past max deliveries).
    pub fn qdead(&self, topic: &str) -> String {
        self.named(":q:dead:", topic)
    }

    /// LIST of wake-up tokens: blocked `pop`s wait on it (`BLPOP`) for a task to become ready.
    pub fn qnotify(&self, topic: &str) -> String {
        self.named(":q:notify:", topic)
    }

    /// Hash of a topic's counters (added, delivered, redelivered, done, dead, deleted).
    pub fn qstats(&self, topic: &str) -> String {
        self.named(":q:stats:", topic)
    }

    /// A topic task's dedup key in a lane (`name` is [`crate::job::Dedup::name`]): it names
    /// the task added with it and expires with its window.
    pub fn qdedup(&self, lane: &str, name: &str) -> String {
        format!("{}:q:dedup:{lane}:{name}", self.tag)
    }

    /// SET of every topic name that ever had a task.
    pub fn qtopics(&self) -> String {
        self.sub(":q:topics")
    }

    /// ZSET lane id → when the lane's earliest work is due (ms, Redis time): its first delayed
    /// task or its first reservation deadline, whichever comes first. The delay queue's due
    /// index of the lanes under this tag: the scripts that add work lower an entry (`ZADD LT`),
    /// a promotion sets it to the lane's next instant or removes it, so an entry is never later
    /// than the lane's work (it may be earlier: a visit then finds nothing and corrects it).
    /// The promotion's sweep reads its head instead of every topic.
    pub fn qdue(&self) -> String {
        self.sub(":q:due")
    }

    /// The due index is complete (meta key, `1:<ms>`): written once every live node kept it
    /// and a walk over every topic filled in what earlier releases had queued. Until then the
    /// sweep walks every topic.
    pub fn qindexed(&self) -> String {
        self.sub(":q:indexed")
    }

    /// SET of the ids of nodes that keep the due index (meta key).
    pub fn qindexers(&self) -> String {
        self.sub(":q:indexers")
    }

    /// The delay queue's sentinel key of this tag: it expires at the due index's head (the
    /// scripts that lower the head bring it forward, a promotion sets it to the new head), and
    /// its `expired` event asks every node for the lanes due under the tag.
    pub fn qnext(&self) -> String {
        self.sub(":q:next")
    }

    /// A topic's sentinel key, as earlier releases set it (this one sets [`Keys::qnext`] per
    /// tag instead; the events of keys left by them are still served): it expires at the topic's earliest due instant, and its
    /// `expired` event (the name carries the topic) asks for the topic's promotion.
    pub fn qwake(&self, topic: &str) -> String {
        format!("{}{topic}", self.qwake_prefix())
    }

    /// The topic named by a sentinel key of [`Keys::qwake`], if `key` is one.
    pub fn parse_qwake<'a>(&self, key: &'a str) -> Option<&'a str> {
        key.strip_prefix(&self.qwake_prefix())
    }

    fn qwake_prefix(&self) -> String {
        self.sub(":q:wake:")
    }

    /// HASH topic → its number of partitions (growable, never shrunk), for topics declared
    /// with more than one; a topic not in it has one (meta key: it grows with topics).
    pub fn qpartitions(&self) -> String {
        self.sub(":q:partitions")
    }

    /// SET of the topics that were given a task with a priority (meta key: it grows with
    /// topics): a pop across such a topic's partitions reads every partition's head first.
    pub fn qprio(&self) -> String {
        self.sub(":q:prio")
    }

    /// The delay queue's layout (meta key): absent while topics live under the meta tag (the
    /// layout of earlier releases), `2:<ms>` once they are spread over the shards (and when).
    pub fn qlayout(&self) -> String {
        self.sub(":q:layout")
    }

    /// SET of the ids of nodes that serve the sharded queue layout (meta key): the layout is
    /// switched once every live node is in it.
    pub fn qupgraded(&self) -> String {
        self.sub(":q:upgraded")
    }

    /// ZSET task id → when it was taken out of a topic's meta-tag sets to move to its
    /// partition (meta key, a legacy topic's): what a mover that stopped half way left.
    pub fn qmoving(&self, topic: &str) -> String {
        self.named(":q:moving:", topic)
    }

    /// The name a partition's keys carry in place of the topic name: the topic for partition
    /// 0, `<topic>:<p>` for the others (topic names hold no `:`). Pass it to the queue's key
    /// functions ([`Keys::qready`] …) of the partition's shard ([`Shards::of_partition`]).
    pub fn qpart(topic: &str, p: usize) -> String {
        if p == 0 {
            topic.to_string()
        } else {
            format!("{topic}:{p}")
        }
    }

    // Calendars (`store::calendars`).

    /// HASH of every calendar: name -> its spec as JSON.
    pub fn calendars(&self) -> String {
        self.sub(":calendars")
    }

    /// SET of the jobs that named a calendar in `exclude` when written (a superset: a job
    /// changed or deleted since is dropped from it when the calendar's deletion checks it).
    pub fn calendar_users(&self, name: &str) -> String {
        self.named(":calendar-users:", name)
    }

    // Flow control (`store::flow_limits`).

    /// SET of every limit key that has a limit (meta key: nodes read it to know which keys
    /// are limited, so unlimited firings cost nothing extra).
    pub fn limits(&self) -> String {
        self.sub(":limits")
    }

    /// The keys of one limit key's limiter, under a hash tag of their own (`{prefix:limit:<key>}`),
    /// so each limit key's script touches one slot of a Redis Cluster.
    pub fn limit(&self, key: &str) -> LimitKeys {
        let inner = self.tag.trim_matches(['{', '}']);
        LimitKeys {
            tag: format!("{{{inner}:limit:{key}}}"),
        }
    }
}

/// The keys of one limit key's limiter, all under its own hash tag.
#[derive(Debug, Clone)]
pub struct LimitKeys {
    tag: String,
}

impl LimitKeys {
    /// `<tag><suffix>`.
    fn sub(&self, suffix: &str) -> String {
        concat(&[&self.tag, suffix])
    }

    /// HASH: `rate`, `burst`, `in_flight` (the limit), `tat` (when the pacing allows the next
    /// grant) and `avg` (moving average of run ms).
    pub fn conf(&self) -> String {
        self.sub(":conf")
    }

    /// ZSET firing id → slot expiry (ms, Redis time): the runs holding a slot.
    pub fn in_flight(&self) -> String {
        self.sub(":inflight")
    }

    /// ZSET `<ms>:<firing id>` → grant instant (ms): grants of the last second.
    pub fn log(&self) -> String {
        self.sub(":log")
    }

    /// ZSET firing id → scheduled instant (ms): the firings held back, in line.
    pub fn waiters(&self) -> String {
        self.sub(":waiters")
    }

    /// ZSET firing id → a held firing's turn (ms, Redis time): from then a free slot is
    /// its own; it keeps its place in line until a grace past it.
    pub fn turns(&self) -> String {
        self.sub(":turns")
    }
}

/// The firing id handed to handlers: `<job id>:<instant ms>`. Stable across attempts.
pub fn firing_id(job_id: &str, at_ms: i64) -> String {
    concat(&[job_id, ":", itoa::Buffer::new().format(at_ms)])
}

/// The kind of [`Keys::job`] (see [`Keys::parts`]).
pub(crate) const JOB: &str = ":job:";
/// The kind of [`Keys::runs`] (see [`Keys::parts`]).
pub(crate) const RUNS: &str = ":runs:";
/// The kind of [`Keys::tasks`].
const TASKS: &str = ":tasks:";

/// The parts joined, in one allocation: key names and lease members are built for every
/// firing, and `format!` costs several times as much.
pub(crate) fn concat(parts: &[&str]) -> String {
    let mut s = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        s.push_str(p);
    }
    s
}

/// Split a firing id back into job id and instant.
pub fn parse_firing_id(fid: &str) -> Option<(&str, i64)> {
    let (id, at) = fid.rsplit_once(':')?;
    Some((id, at.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_names_parse_back() {
        let k = Keys::new("kf");
        let key = k.fire("job-1.a_b", 1_700_000_000_123);
        assert_eq!(key, "{kf}:fire:job-1.a_b:1700000000123");
        assert_eq!(
            k.parse_fire(&key),
            Some(("job-1.a_b".to_string(), 1_700_000_000_123))
        );
        assert_eq!(k.parse_fire("{other}:fire:a:1"), None);
        assert_eq!(k.parse_fire("{kf}:fire:a:notanumber"), None);
    }

    #[test]
    fn slots_match_redis() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(slot_of("123456789"), 12_739);
        assert_eq!(slot_of("foo"), 12_182);
        assert_eq!(slot_of("{user1000}.following"), slot_of("user1000"));
        assert_eq!(slot_of("foo{}{bar}"), slot_of("foo{}{bar}"));
        assert_eq!(slot_of("foo{{bar}}zap"), slot_of("{bar"));
    }

    #[test]
    fn one_shard_is_the_meta_tag() {
        let s = Shards::new("kf", 1);
        assert_eq!(s.len(), 1);
        assert_eq!(s.keys(0).tag(), "{kf}");
        assert_eq!(s.of("anything"), 0);
        assert_eq!(s.parse_fire("{kf}:fire:a:5"), Some((0, "a".to_string(), 5)));
    }

    #[test]
    fn jobs_spread_evenly_over_shards_of_equal_slot_ranges() {
        for n in [2usize, 3, 6, 12, 16, 100] {
            let s = Shards::new("kf", n);
            assert_eq!(s.len(), n);
            for (i, k) in s.iter().enumerate() {
                let slot = slot_of(k.tag()) as usize;
                let (lo, hi) = (i * 16_384 / n, (i + 1) * 16_384 / n);
                assert!((lo..hi).contains(&slot), "n={n} shard {i} slot {slot}");
                assert_ne!(k.tag(), s.meta().tag());
                let key = k.fire("job", 7);
                assert_eq!(s.parse_fire(&key), Some((i, "job".to_string(), 7)));
            }
        }
        let s = Shards::new("kf", 12);
        let mut count = [0usize; 12];
        for i in 0..120_000 {
            count[s.of(&format!("task-{i}"))] += 1;
        }
        assert!(
            count.iter().all(|&c| (9_000..11_000).contains(&c)),
            "{count:?}"
        );
        assert_eq!(
            s.parse_fire("{kf}:fire:a:5"),
            None,
            "the meta tag holds no firings"
        );
        assert_eq!(s.parse_fire("{other:1}:fire:a:5"), None);
    }
}
