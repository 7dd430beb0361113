//! Priorities within a topic: how a ready set orders tasks of several levels.
//!
//! A lane's ready set is scored by the instant each task became ready, so its head is the
//! longest ready (FIFO). A task of priority `p` (1 to [`MAX_PRIORITY`]) is scored `p` steps of
//! [`STEP`] (2^44 ms, about 557 years) below its instant: every task of a higher level sorts
//! before every task of a lower one, and within a level the order stays that of the instants.
//! The scores stay integers well within a double's 53 bits, and a task of priority 0 (the
//! default) is scored as it always was, so a topic without priorities costs nothing more.
//! Both the level and the instant are read back from the score alone.
//!
//! A delayed task of priority `p` is scored `due + p/16` in the delayed set (exact in a
//! double at today's instants): the due order is the same, and the promotion (which reads
//! the scores only in lanes that ever held a delayed task with a priority: a flag in the
//! lane's stats hash) places it at its level. The record keeps it too (`pri`), for a
//! redelivery and a replay.

/// The highest priority; 0 is the default and the lowest.
pub const MAX_PRIORITY: u8 = 9;

/// The distance between two levels in a ready set's scores, in ms (2^44).
pub(super) const STEP: f64 = 17_592_186_044_416.0;

/// The level and the ready instant (ms) a ready set's score holds.
pub(super) fn decode_ready(score: f64) -> (u8, i64) {
    if score >= 0.0 {
        return (0, score as i64);
    }
    let level = (-score / STEP).ceil().clamp(0.0, f64::from(MAX_PRIORITY));
    (level as u8, (score + level * STEP) as i64)
}

impl super::Queue {
    /// Whether `topic` is known to hold tasks with a priority.
    pub(super) fn is_prioritized(&self, topic: &str) -> bool {
        self.topo
            .lock()
            .expect("topology lock")
            .prioritized
            .contains(topic)
    }

    /// Note that `topic` holds tasks with a priority (a pop took one).
    pub(super) fn mark_prioritized(&self, topic: &str) {
        let mut t = self.topo.lock().expect("topology lock");
        if !t.prioritized.contains(topic) {
            t.prioritized.insert(topic.to_string());
        }
    }

    /// Put `topic` into the meta set of topics that hold priorities (once per queue), so that
    /// every queue's pops across its partitions go by their heads (they read the set with the
    /// partition counts, every 5 s at most).
    pub(super) async fn register_priority(&self, topic: &str) -> crate::error::Result<()> {
        if self
            .topo
            .lock()
            .expect("topology lock")
            .prio_registered
            .contains(topic)
        {
            return Ok(());
        }
        let _: i64 = redis::AsyncCommands::sadd(
            &mut self.store.connection(),
            self.store.keys().qprio(),
            topic,
        )
        .await?;
        let mut t = self.topo.lock().expect("topology lock");
        t.prio_registered.insert(topic.to_string());
        t.prioritized.insert(topic.to_string());
        Ok(())
    }

    /// The level of the head of each lane's ready set (`None`: nothing ready), in one
    /// pipeline per slot.
    pub(super) async fn read_head_levels(
        &self,
        lanes: &[super::Lane],
    ) -> crate::error::Result<Vec<Option<u8>>> {
        use redis::FromRedisValue;
        let shards = self.store.shards();
        let rows = self
            .per_slot(lanes, 1, |pipe, lane| {
                pipe.zrange_withscores(lane.keys(shards).qready(&lane.name()), 0, 0);
            })
            .await?;
        rows.into_iter()
            .map(|row| {
                let head = row
                    .first()
                    .map(<Vec<(String, f64)>>::from_redis_value_ref)
                    .transpose()
                    .map_err(redis::RedisError::from)?;
                Ok(head
                    .and_then(|h| h.first().map(|(_, s)| *s))
                    .map(|s| decode_ready(s).0))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_give_back_their_level_and_instant() {
        for level in 0..=MAX_PRIORITY {
            for at in [0i64, 1, 1_765_000_000_123, (STEP as i64) - 1] {
                let score = at as f64 - f64::from(level) * STEP;
                assert_eq!(decode_ready(score), (level, at), "{level} {at}");
            }
        }
        // A higher level sorts first whatever the instants.
        let hi = 1_800_000_000_000f64 - 2.0 * STEP;
        let lo = 1_000f64 - STEP;
        assert!(hi < lo);
    }
}
