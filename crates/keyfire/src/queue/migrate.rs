//! Moving what a topic holds under the meta tag (the layout of earlier releases) to its
//! partitions, once the queue has switched to the sharded layout.
//!
//! The sweep's owner of a topic's meta-tag lane does it: [`Queue::migrate`] takes up to
//! [`MOVE_BATCH`] delayed and ready tasks out of the meta-tag sets (`take.lua`: into the
//! topic's `moving` set, so that a pop of an earlier release can no longer take them), copies
//! each into its partition (`adopt.lua`, idempotent by id: record, and due instant or ready
//! instant) and forgets it under the meta tag. A mover that stops half way leaves the entries in
//! `moving`; a later one copies them again (the copy adds nothing when it is there) after
//! [`MOVING_GRACE`]. Reserved tasks stay where they are until their consumer finishes them (its
//! token names the meta-tag lane) or their reservation expires (they go back to the meta-tag
//! ready set, and move then). Dead letters stay and are read where they are.
//!
//! So every task is delivered once: it is in one ready set at a time, and the copy is made at
//! most once per id.

use std::collections::HashMap;
use std::time::Duration;

use super::Queue;
use super::lane::{Layout, partition_of};
use crate::error::Result;
use crate::store::Shards;

/// Tasks one [`Queue::migrate`] call moves at most, per set.
pub(super) const MOVE_BATCH: usize = 500;
/// How old an entry of the `moving` set must be before another mover copies it again.
pub(super) const MOVING_GRACE: Duration = Duration::from_secs(30);

impl Queue {
    /// Move up to 500 (`MOVE_BATCH`) delayed and ready tasks of `topic`'s meta-tag lane to its
    /// partitions (see the module docs). Does nothing before the switch to the sharded layout,
    /// or with one shard (the meta-tag lane is partition 0). Returns how many moved.
    pub async fn migrate(&self, topic: &str) -> Result<u64> {
        let (layout, n) = self.topology(topic, false).await?;
        if layout != Layout::Sharded || self.store.shards().len() == 1 {
            return Ok(0);
        }
        let now = self.store.time_ms().await?;
        let before = now - MOVING_GRACE.as_millis() as i64;
        let (stuck, delayed, ready) = self.read_legacy_heads(topic, before, MOVE_BATCH).await?;
        let mut moved = 0;
        if !stuck.is_empty() {
            // A mover stopped half way: copy again (idempotent), then forget.
            let records = self.read_legacy_records(&stuck).await?;
            let mut done = Vec::new();
            for (id, record) in stuck.iter().zip(records) {
                if !record.is_empty() {
                    let kind = if record.get("state").map(String::as_str) == Some("ready") {
                        "r"
                    } else {
                        "d"
                    };
                    let score = score_of(&record, kind, now);
                    let fields: Vec<(String, String)> = record.into_iter().collect();
                    let lane = self.part_lane(topic, id, n);
                    moved += u64::from(self.adopt_script(&lane, id, kind, score, &fields).await?);
                }
                done.push(id.clone());
            }
            self.forget_moved(topic, &done).await?;
        }
        let candidates: Vec<String> = delayed.into_iter().chain(ready).collect();
        if candidates.is_empty() {
            return Ok(moved);
        }
        let taken = self.take_script(topic, &candidates).await?;
        let mut done = Vec::new();
        for (id, (kind, score, record)) in candidates.iter().zip(taken) {
            if kind.is_empty() {
                continue;
            }
            if !record.is_empty() {
                let lane = self.part_lane(topic, id, n);
                moved += u64::from(self.adopt_script(&lane, id, &kind, score, &record).await?);
            }
            done.push(id.clone());
        }
        self.forget_moved(topic, &done).await?;
        Ok(moved)
    }

    fn part_lane(&self, topic: &str, id: &str, n: usize) -> super::Lane {
        let shards: &Shards = self.store.shards();
        super::Lane::part(shards, topic, partition_of(id, n), n)
    }
}

/// The score a record left in `moving` goes back with: its due instant when delayed, when it
/// became ready when ready (or now).
fn score_of(record: &HashMap<String, String>, kind: &str, now: i64) -> f64 {
    let field = if kind == "d" { "due" } else { "ready_at" };
    record
        .get(field)
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(now as f64)
}
