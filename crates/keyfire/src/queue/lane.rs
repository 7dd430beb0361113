//! Where a topic's tasks live: its *lanes*.
//!
//! A lane is one set of a topic's keys (delayed, ready, reserved, dead, notify, stats, sentinel)
//! and the records of its tasks, all under one hash tag, so that every script touches one slot:
//!
//! - **partition `p`** of a topic with `n` partitions (`n` is 1 unless the topic is declared
//!   with more), on shard [`Shards::of_partition`]: partition 0 on the topic's own shard (hash
//!   of its name, as for a job), the others spread evenly round the shard ring;
//! - **legacy**: the topic's keys under the meta tag `{prefix}`, where earlier releases kept
//!   every topic. With one shard the meta tag *is* the shard's, and the legacy lane and
//!   partition 0 are the same keys.
//!
//! Which of them a node writes to is the queue's *layout* (the meta key `q:layout`), read with
//! the partition counts into a [`Topology`] that each [`Queue`] keeps for [`TOPOLOGY_TTL`], so
//! that no meta-key read rides on an add or a pop. Before the switch (`Layout::Meta`) every
//! topic is its legacy lane, as in earlier releases; after it (`Layout::Sharded`) tasks go to
//! the partitions, and what is left in a legacy lane is moved to its partitions by the sweep.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::Queue;
use crate::error::Result;
use crate::store::{Keys, Shards, stable_hash};

/// How long a queue trusts what it read of the layout and the partition counts. The layout
/// only ever switches once (meta to sharded) and a partition count is fixed once set, so a
/// stale read sends a task to partition 0 or the legacy lane, both of which are served: it
/// delays nothing but the spread.
pub(super) const TOPOLOGY_TTL: Duration = Duration::from_secs(5);

/// Most partitions a topic may have.
pub const MAX_PARTITIONS: usize = 64;

/// Marks a reservation token given by a pop of a partition (hex digit 12: a pop of the legacy
/// lane gives a UUID v4, whose digit 12 is always `4`).
const PART_MARK: u8 = b'0';

/// One lane of a topic (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Lane {
    pub(super) topic: String,
    /// The partition, None for the legacy lane.
    pub(super) part: Option<usize>,
    /// The shard its keys are on, None for the meta tag.
    shard: Option<usize>,
}

impl Lane {
    /// The topic's lane under the meta tag.
    pub(super) fn legacy(topic: &str) -> Self {
        Self {
            topic: topic.to_string(),
            part: None,
            shard: None,
        }
    }

    /// Partition `p` of `topic` with `n` partitions.
    pub(super) fn part(shards: &Shards, topic: &str, p: usize, n: usize) -> Self {
        Self {
            topic: topic.to_string(),
            part: Some(p),
            shard: (shards.len() > 1).then(|| shards.of_partition(topic, p, n)),
        }
    }

    /// A lane standing for a hash tag only (the meta tag or a shard's), to read task records
    /// by id there: a record's key depends on the tag alone.
    pub(super) fn on_shard(shard: Option<usize>) -> Self {
        Self {
            topic: String::new(),
            part: shard.map(|_| 0),
            shard,
        }
    }

    /// The name the lane's keys carry in place of the topic (see [`Keys::qpart`]).
    pub(super) fn name(&self) -> String {
        Keys::qpart(&self.topic, self.part.unwrap_or(0))
    }

    /// The keys of the hash tag the lane lives under.
    pub(super) fn keys<'a>(&self, shards: &'a Shards) -> &'a Keys {
        match self.shard {
            Some(s) => shards.keys(s),
            None => shards.meta(),
        }
    }

    /// The shard the lane is on (None: the meta tag), to group reads by slot.
    pub(super) fn slot_group(&self) -> Option<usize> {
        self.shard
    }

    /// What names the lane in the promotion's work, its ownership and `wake` messages: the
    /// topic for the legacy lane (as earlier releases announce it), `<topic>:<p>` for a
    /// partition.
    pub(super) fn id(&self) -> String {
        match self.part {
            None => self.topic.clone(),
            Some(p) => format!("{}:{p}", self.topic),
        }
    }
}

/// A lane id ([`Lane::id`]) split into topic and partition.
pub(super) fn parse_lane_id(id: &str) -> Option<(&str, Option<usize>)> {
    match id.split_once(':') {
        None => Some((id, None)),
        Some((topic, p)) => {
            let p: usize = p.parse().ok()?;
            (p < MAX_PARTITIONS).then_some((topic, Some(p)))
        }
    }
}

/// The partition a task id goes to among `n`.
pub(super) fn partition_of(id: &str, n: usize) -> usize {
    if n <= 1 {
        return 0;
    }
    (stable_hash(&["qpart", id]) % n as u64) as usize
}

/// A fresh reservation token's random part (32 hex digits) for a pop of `part`: a UUID v4
/// for the legacy lane; for a partition, digit 12 is [`PART_MARK`] and the last four name the
/// partition, so finish and touch find the lane without reading anything.
pub(super) fn token_hex(part: Option<usize>) -> String {
    let mut hex = uuid::Uuid::new_v4().simple().to_string().into_bytes();
    if let Some(p) = part {
        hex[12] = PART_MARK;
        hex[28..].copy_from_slice(format!("{:04x}", p & 0xffff).as_bytes());
    }
    String::from_utf8(hex).expect("hex digits")
}

/// The partition a token names (None: a token of the legacy lane).
pub(super) fn token_part(token: &str) -> Option<usize> {
    let b = token.as_bytes();
    if b.len() < 33 || b[12] != PART_MARK {
        return None;
    }
    usize::from_str_radix(token.get(28..32)?, 16)
        .ok()
        .filter(|&p| p < MAX_PARTITIONS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_partitioned_tokens_name_a_partition() {
        for p in [0, 1, 7, MAX_PARTITIONS - 1] {
            let hex = token_hex(Some(p));
            assert_eq!(hex.len(), 32);
            assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()));
            assert_eq!(token_part(&format!("{hex}.orders")), Some(p));
        }
        for _ in 0..100 {
            let hex = token_hex(None);
            assert_eq!(token_part(&format!("{hex}.orders")), None);
        }
        assert_eq!(token_part("short.t"), None);
        assert_eq!(
            token_part(&format!("{}0{}ffff.t", "a".repeat(12), "b".repeat(15))),
            None
        );
    }

    #[test]
    fn lane_ids_parse_back_refusing_bad_partitions() {
        assert_eq!(parse_lane_id("orders"), Some(("orders", None)));
        assert_eq!(parse_lane_id("orders:3"), Some(("orders", Some(3))));
        assert_eq!(parse_lane_id("orders:x"), None);
        assert_eq!(parse_lane_id("orders:99999999999999999999"), None);
        assert_eq!(parse_lane_id(&format!("orders:{MAX_PARTITIONS}")), None);
    }

    #[test]
    fn partitions_of_a_topic_spread_evenly_over_distinct_shards() {
        let shards = Shards::new("kf", 12);
        for n in [2usize, 3, 4, 6, 12] {
            let taken: std::collections::HashSet<usize> =
                (0..n).map(|p| shards.of_partition("hot", p, n)).collect();
            assert_eq!(taken.len(), n, "n={n}");
        }
        // Three partitions over 12 shards: a third of the ring apart (one per master of a
        // cluster of three with equal slot ranges).
        let s: Vec<usize> = (0..3).map(|p| shards.of_partition("hot", p, 3)).collect();
        assert_eq!(s[0], shards.of("hot"));
        assert_eq!((s[1] + 12 - s[0]) % 12, 4);
        assert_eq!((s[2] + 12 - s[0]) % 12, 8);
        let mut ids = [0usize; 4];
        for i in 0..40_000 {
            ids[partition_of(&format!("t{i}"), 4)] += 1;
        }
        assert!(ids.iter().all(|&c| (9_000..11_000).contains(&c)), "{ids:?}");
    }
}

/// What a queue knows of the layout and the partition counts (see the module docs).
#[derive(Debug, Default)]
pub(super) struct Topology {
    read_at: Option<Instant>,
    /// Topics live on the shards (the switch happened).
    pub(super) sharded: bool,
    /// Partition counts of the topics declared with more than one.
    pub(super) partitions: HashMap<String, usize>,
    /// Topics this queue put into the topic set already (sharded adds do it once per topic).
    pub(super) registered: HashSet<String>,
    /// Topics known to hold tasks with a priority (the meta set, and what this queue added
    /// or popped): pops across their partitions go by the partitions' heads.
    pub(super) prioritized: HashSet<String>,
    /// Topics this queue put into the meta set of those already.
    pub(super) prio_registered: HashSet<String>,
}

/// How topics are laid out, as one queue sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Layout {
    /// Every topic under the meta tag (earlier releases' layout).
    Meta,
    /// Topics over the shards.
    Sharded,
}

impl Queue {
    /// The layout and `topic`'s partition count, read again when older than [`TOPOLOGY_TTL`]
    /// (or when `fresh`).
    pub(super) async fn topology(&self, topic: &str, fresh: bool) -> Result<(Layout, usize)> {
        let stale = {
            let t = self.topo.lock().expect("topology lock");
            fresh || t.read_at.is_none_or(|at| at.elapsed() > TOPOLOGY_TTL)
        };
        if stale {
            let (layout, partitions, prioritized) = self.read_topology().await?;
            let was_sharded = self.topo.lock().expect("topology lock").sharded;
            if layout.is_none() && was_sharded {
                // The switch is never undone, so the layout key is gone with the data (Redis
                // lost it) or this read came from a replica behind it: write it back where it
                // is missing (a no-op where it is there).
                self.restore_layout().await?;
            }
            let mut t = self.topo.lock().expect("topology lock");
            t.sharded |= layout.is_some();
            t.partitions = partitions;
            t.prioritized.extend(prioritized);
            t.read_at = Some(Instant::now());
            // Register topics again at their next add: the topic set may have been lost with
            // the data, and the promotion's sweep walks it (one SADD per topic and read).
            t.registered.clear();
        }
        let t = self.topo.lock().expect("topology lock");
        let layout = if t.sharded {
            Layout::Sharded
        } else {
            Layout::Meta
        };
        Ok((layout, t.partitions.get(topic).copied().unwrap_or(1)))
    }

    /// The layout, as last read (again when older than [`TOPOLOGY_TTL`]).
    pub(super) async fn layout(&self) -> Result<Layout> {
        Ok(self.topology("", false).await?.0)
    }

    /// The layout, read now.
    pub(super) async fn layout_fresh(&self) -> Result<Layout> {
        Ok(self.topology("", true).await?.0)
    }

    /// Whether topics are spread over the shards now (read now): nodes switch the queue to
    /// that layout once every live node serves it (see the module docs of [`crate::queue`]).
    pub async fn is_sharded(&self) -> Result<bool> {
        Ok(self.layout_fresh().await? == Layout::Sharded)
    }

    /// The lane a new task `id` of `topic` goes to.
    pub(super) async fn write_lane(&self, topic: &str, id: &str) -> Result<Lane> {
        Ok(match self.topology(topic, false).await? {
            (Layout::Meta, _) => Lane::legacy(topic),
            (Layout::Sharded, n) => Lane::part(self.store.shards(), topic, partition_of(id, n), n),
        })
    }

    /// Every lane of `topic` that may hold tasks, partitions first: before the switch its
    /// legacy lane; after it its partitions, and (with more than one shard) its legacy lane
    /// when `legacy` is asked for (reads of single tasks and counts; pops leave it to the
    /// sweep, which moves its tasks to the partitions).
    pub(super) async fn lanes(&self, topic: &str, legacy: bool) -> Result<Vec<Lane>> {
        let (layout, n) = self.topology(topic, false).await?;
        Ok(self.lanes_of(topic, layout, n, legacy))
    }

    pub(super) fn lanes_of(
        &self,
        topic: &str,
        layout: Layout,
        n: usize,
        legacy: bool,
    ) -> Vec<Lane> {
        let shards = self.store.shards();
        match layout {
            Layout::Meta => vec![Lane::legacy(topic)],
            Layout::Sharded => {
                let mut lanes: Vec<Lane> =
                    (0..n).map(|p| Lane::part(shards, topic, p, n)).collect();
                if legacy && shards.len() > 1 {
                    lanes.push(Lane::legacy(topic));
                }
                lanes
            }
        }
    }

    /// The lane a reservation token of `topic` was given in.
    pub(super) async fn token_lane(&self, topic: &str, token: &str) -> Result<Lane> {
        let Some(p) = token_part(token) else {
            return Ok(Lane::legacy(topic));
        };
        let (_, mut n) = self.topology(topic, false).await?;
        if p >= n {
            // A partition this queue has not heard of yet: read the counts again.
            n = self.topology(topic, true).await?.1;
        }
        Ok(Lane::part(self.store.shards(), topic, p, n.max(p + 1)))
    }

    /// The tag (None: the meta tag) whose sentinel key ([`Keys::qnext`]) `key` is, if it is one.
    pub(super) fn next_tag(shards: &Shards, key: &str) -> Option<Option<usize>> {
        let close = key.find('}')?;
        let group = shards.shard_of_tag(&key[..=close])?;
        (&key[close + 1..] == ":q:next").then_some(group)
    }

    /// The lane a sentinel key of an earlier release names (its `expired` event), if it is one.
    pub(super) fn wake_lane(shards: &Shards, key: &str) -> Option<String> {
        let close = key.find('}')?;
        let group = shards.shard_of_tag(&key[..=close])?;
        let name = key[close + 1..].strip_prefix(":q:wake:")?;
        let (topic, p) = match name.split_once(':') {
            None => (name, 0),
            Some((t, p)) => (t, p.parse::<usize>().ok().filter(|&p| p < MAX_PARTITIONS)?),
        };
        Some(match group {
            None => topic.to_string(),
            Some(_) => format!("{topic}:{p}"),
        })
    }
}
