//! Pausing a topic: its pops reserve nothing until it is resumed, while adds, promotions,
//! redeliveries, finishes and touches go on.
//!
//! The flag is the field `paused` of each lane's stats hash (`lua/pause.lua`), a key `pop.lua`
//! has in every call already: a pop checks it atomically with the reservation, a topic that is
//! not paused pays one `HEXISTS` inside the script and no round trip, and nothing polls it (an
//! idle node's cost does not grow with paused topics). A pop of a paused lane takes nothing and
//! clears its notify list, so a waiting pop waits on (a task added meanwhile wakes it once;
//! it finds the lane paused and waits again); the resume pushes a wake-up token per ready task
//! (capped), as an add does, so waiting consumers take the ready tasks in order.

use super::lane::{Lane, Layout};
use super::{NOTIFY_CAP, Queue, check_topic};
use crate::error::Result;
use crate::store::script;

script!(PAUSE, "pause.lua");

impl Queue {
    /// Pause `topic`: pops reserve none of its tasks until [`Queue::resume`] (a waiting pop
    /// waits on, or returns nothing at the end of its wait). Adds are accepted, delayed tasks
    /// still become ready, and reservations already handed out can still be finished and
    /// touched (one that expires goes back to ready, or to the dead letters, as ever). Whether
    /// it changed anything (false: it was paused already).
    pub async fn pause(&self, topic: &str) -> Result<bool> {
        self.set_paused(topic, "pause").await
    }

    /// Resume a paused `topic`: its ready tasks are delivered again, in order, and waiting
    /// consumers are woken. Whether it changed anything (false: it was not paused).
    pub async fn resume(&self, topic: &str) -> Result<bool> {
        self.set_paused(topic, "resume").await
    }

    /// Whether `topic` is paused (read now).
    pub async fn is_paused(&self, topic: &str) -> Result<bool> {
        check_topic(topic)?;
        let lane = self.lanes(topic, false).await?.remove(0);
        let k = lane.keys(self.store.shards());
        let paused: bool = redis::cmd("HEXISTS")
            .arg(k.qstats(&lane.name()))
            .arg("paused")
            .query_async(&mut self.store.connection())
            .await?;
        Ok(paused)
    }

    /// Every lane of `topic` that may hold its tasks now or after the switch to the sharded
    /// layout: its partitions (by its count as read now) and its keys under the meta tag, so
    /// the flag holds across the switch and the move of tasks that follows it.
    async fn pause_lanes(&self, topic: &str) -> Result<Vec<Lane>> {
        let (_, n) = self.topology(topic, true).await?;
        let mut lanes = self.lanes_of(topic, Layout::Sharded, n, true);
        let shards = self.store.shards();
        let legacy = Lane::legacy(topic);
        let meta_keys = legacy.keys(shards).qstats(&legacy.name());
        if !lanes
            .iter()
            .any(|l| l.keys(shards).qstats(&l.name()) == meta_keys)
        {
            lanes.push(legacy);
        }
        Ok(lanes)
    }

    async fn set_paused(&self, topic: &str, mode: &str) -> Result<bool> {
        check_topic(topic)?;
        let mut changed = false;
        for lane in self.pause_lanes(topic).await? {
            let k = lane.keys(self.store.shards());
            let n = lane.name();
            let (done, _now): (i64, i64) = PAUSE
                .key(k.qstats(&n))
                .key(k.qready(&n))
                .key(k.qnotify(&n))
                .arg(mode)
                .arg(NOTIFY_CAP)
                .invoke_async(&mut self.store.connection())
                .await?;
            changed |= done == 1;
        }
        Ok(changed)
    }
}
