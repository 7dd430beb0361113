//! The delay queue's figures for metrics, read from what Redis holds already: each topic's
//! sets (`ZCARD`), the head of its ready set (the oldest ready task) and the counters its
//! scripts keep in the topic's stats hash (`HINCRBY` in the same call as each change; tasks
//! added are derived from the others, see [`tasks_added`]). No script writes anything for
//! them.
//!
//! [`TopicSampler`] bounds the cost and the series: the first `max_topics` topics by name are
//! read on every call, each with series of its own; the others are read `max_topics` (at least
//! 1,000) at a time in turn and summed into one [`OTHER`] row, so one call reads at
//! most about twice `max_topics` topics however many there are.

use std::collections::{HashMap, HashSet};

use super::Queue;
use crate::error::Result;

/// The `topic` label of the topics past `metrics.max_topics`, summed.
pub const OTHER: &str = "_other";

/// Fewest topics past the cap read per call (so `max_topics = 0` still goes round).
const MIN_CHUNK: usize = 1_000;

/// Lanes per pipeline: 6 commands each.
const PIPELINE: usize = 500;

/// One topic's figures (or [`OTHER`]'s: sums, and the oldest of the oldest).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicStats {
    /// The topic, or [`OTHER`].
    pub topic: String,
    /// Tasks waiting for their instant.
    pub delayed: u64,
    /// Tasks waiting for a consumer.
    pub ready: u64,
    /// Tasks held by consumers.
    pub reserved: u64,
    /// Dead letters kept (within the dead-letter retention).
    pub dead: u64,
    /// How long the oldest ready task has waited for a consumer, ms by Redis's clock; None
    /// when none is ready. In a topic with priorities: the task next to be popped (the oldest
    /// of the highest level ready).
    pub oldest_ready_ms: Option<i64>,
    /// Tasks added, in all.
    pub added: u64,
    /// Deliveries (a pop that reserved a task), in all; redeliveries included.
    pub delivered: u64,
    /// Reservations that expired and went back to ready, in all.
    pub redelivered: u64,
    /// Tasks finished, in all.
    pub finished: u64,
    /// Tasks that used up their deliveries and went to the dead letters, in all.
    pub dead_total: u64,
    /// Paused topics: 1 for a paused topic, 0 otherwise; for [`OTHER`], how many of its
    /// topics are paused.
    pub paused: u64,
}

impl TopicStats {
    /// Add `o`'s figures to these (the oldest ready task is the older of the two).
    fn absorb(&mut self, o: &TopicStats) {
        self.delayed += o.delayed;
        self.ready += o.ready;
        self.reserved += o.reserved;
        self.dead += o.dead;
        self.oldest_ready_ms = self.oldest_ready_ms.max(o.oldest_ready_ms);
        self.added += o.added;
        self.delivered += o.delivered;
        self.redelivered += o.redelivered;
        self.finished += o.finished;
        self.dead_total += o.dead_total;
        self.paused += o.paused;
    }
}

/// What one [`TopicSampler::read`] found.
#[derive(Debug, Clone, Default)]
pub struct QueueSample {
    /// Topics in all.
    pub topics: usize,
    /// The first `max_topics` topics by name, read now.
    pub named: Vec<TopicStats>,
    /// The other topics summed ([`OTHER`]), each as last read; None when there are none.
    pub other: Option<TopicStats>,
    /// Topics that had series of their own at the previous read and no longer do (another
    /// topic sorts before them now): their gauges should be zeroed.
    pub dropped: Vec<String>,
}

/// Reads the queue's figures with a bounded cost per call (see the module's docs). Keep one
/// and call [`TopicSampler::read`] at each refresh: it remembers where it is in the topics
/// past the cap, and their last figures.
#[derive(Debug, Default)]
pub struct TopicSampler {
    max_topics: usize,
    /// Every topic, sorted, as read at the start of the current pass.
    names: Vec<String>,
    /// Where the next chunk of the topics past the cap starts (0: a new pass).
    cursor: usize,
    /// The last figures of each topic past the cap (their `topic` left empty: it is the key).
    rest: HashMap<String, TopicStats>,
    /// The topics that had series of their own at the last read.
    named: Vec<String>,
}

impl TopicSampler {
    /// A sampler giving the first `max_topics` topics series of their own.
    pub fn new(max_topics: usize) -> Self {
        Self {
            max_topics,
            ..Self::default()
        }
    }

    /// Read the named topics, and the next chunk of the others. The list of topics is read
    /// again at the start of each pass over the others (every call while there are no more
    /// than `max_topics`), so a new topic shows within one pass.
    pub async fn read(&mut self, queue: &Queue) -> Result<QueueSample> {
        if self.cursor == 0 {
            self.names = queue.topic_names().await?;
            let past: HashSet<&String> = self.names.iter().skip(self.max_topics).collect();
            self.rest.retain(|t, _| past.contains(t));
        }
        let cap = self.max_topics.min(self.names.len());
        let named = queue.topic_stats(&self.names[..cap]).await?;
        let rest = &self.names[cap..];
        if !rest.is_empty() {
            let from = self.cursor.min(rest.len());
            let to = (from + self.max_topics.max(MIN_CHUNK)).min(rest.len());
            for mut s in queue.topic_stats(&rest[from..to]).await? {
                // The name lives in the key only: 100,000 topics past the cap are kept here.
                self.rest.insert(std::mem::take(&mut s.topic), s);
            }
            self.cursor = if to >= rest.len() { 0 } else { to };
        }
        let other = (!rest.is_empty()).then(|| {
            let mut sum = TopicStats {
                topic: OTHER.to_string(),
                ..TopicStats::default()
            };
            for s in self.rest.values() {
                sum.absorb(s);
            }
            sum
        });
        let now: Vec<String> = named.iter().map(|s| s.topic.clone()).collect();
        let kept: HashSet<&String> = now.iter().collect();
        let dropped = self
            .named
            .iter()
            .filter(|t| !kept.contains(t))
            .cloned()
            .collect();
        self.named = now;
        Ok(QueueSample {
            topics: self.names.len(),
            named,
            other,
            dropped,
        })
    }
}

impl Queue {
    /// The figures of these topics, in the order given: per lane of each topic (its partitions,
    /// and its keys under the meta tag) `ZCARD` of its four sets, the head of its ready set and
    /// its counters, summed per topic, in one pipeline per slot and 500 lanes.
    pub async fn topic_stats(&self, topics: &[String]) -> Result<Vec<TopicStats>> {
        let mut lanes = Vec::new();
        let mut of = Vec::new();
        for (i, t) in topics.iter().enumerate() {
            for lane in self.lanes(t, true).await? {
                lanes.push(lane);
                of.push(i);
            }
        }
        let mut out: Vec<TopicStats> = topics
            .iter()
            .map(|t| TopicStats {
                topic: t.clone(),
                ..TopicStats::default()
            })
            .collect();
        let now = self.store.time_ms().await?;
        // Per topic: the `added` counters of earlier releases, tasks deleted while live, and
        // dead letters replayed.
        let mut legacy = vec![(0u64, 0u64, 0u64); topics.len()];
        for (lanes, of) in lanes.chunks(PIPELINE).zip(of.chunks(PIPELINE)) {
            let rows = self.read_lane_stats(lanes).await?;
            for (&i, (delayed, ready, reserved, dead, head, counters)) in of.iter().zip(rows) {
                let n = |i: usize| counters.get(i).copied().flatten().unwrap_or(0).max(0) as u64;
                out[i].absorb(&TopicStats {
                    topic: String::new(),
                    delayed,
                    ready,
                    reserved,
                    dead,
                    // The head is the highest level's oldest (see priority.rs): the age
                    // of the task next to be popped.
                    oldest_ready_ms: head
                        .first()
                        .map(|(_, s)| (now - super::priority::decode_ready(*s).1).max(0)),
                    added: 0,
                    delivered: n(1),
                    redelivered: n(2),
                    finished: n(3),
                    dead_total: n(4),
                    paused: u64::from(counters.get(5).copied().flatten().is_some()),
                });
                legacy[i].0 += n(0);
                legacy[i].1 += n(6);
                legacy[i].2 += n(7);
            }
        }
        for (s, (added, deleted, replayed)) in out.iter_mut().zip(legacy) {
            // A topic is paused on each of its lanes: count it once.
            s.paused = s.paused.min(1);
            let live = s.delayed + s.ready + s.reserved;
            s.added = tasks_added(live, s.finished, s.dead_total, deleted, replayed, added);
        }
        Ok(out)
    }
}

/// A topic's count of tasks added, in all. No script counts an add, so a topic holding only
/// delayed tasks needs no stats hash (about 130 bytes a topic): every task added is live
/// (delayed, ready or reserved), finished, dead, or deleted while live, and the script that
/// moves it out of the live sets counts it; a dead letter replayed is live again, so the
/// replays are taken off. Lanes written by earlier releases hold an `added` counter of their
/// own (`legacy`, summed over the topic's lanes): the larger of the two is taken, so the count
/// does not go back across an upgrade.
pub(super) fn tasks_added(
    live: u64,
    done: u64,
    dead: u64,
    deleted: u64,
    replayed: u64,
    legacy: u64,
) -> u64 {
    (live + done + dead + deleted)
        .saturating_sub(replayed)
        .max(legacy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_added_are_derived_and_never_below_an_earlier_count() {
        assert_eq!(tasks_added(2, 3, 1, 1, 0, 0), 7);
        // A dead letter replayed is live (or done) again: it was added once.
        assert_eq!(tasks_added(3, 3, 1, 1, 1, 0), 7);
        // An earlier release counted 10 adds; 3 of them are gone from what is counted now.
        assert_eq!(tasks_added(2, 3, 1, 1, 0, 10), 10);
        // After the upgrade, new adds raise the derived count past the earlier one.
        assert_eq!(tasks_added(9, 3, 1, 1, 0, 10), 14);
    }

    #[test]
    fn other_sums_counts_keeping_the_oldest() {
        let mut sum = TopicStats::default();
        let a = TopicStats {
            ready: 2,
            oldest_ready_ms: Some(5),
            finished: 7,
            ..TopicStats::default()
        };
        let b = TopicStats {
            ready: 3,
            oldest_ready_ms: None,
            finished: 1,
            ..TopicStats::default()
        };
        sum.absorb(&a);
        sum.absorb(&b);
        assert_eq!(
            (sum.ready, sum.finished, sum.oldest_ready_ms),
            (5, 8, Some(5))
        );
    }
}
