//! Topic tasks with a dedup key: the add of one, and what a duplicate does to the pending task
//! the key names (see [`crate::job::DedupSpec`]).
//!
//! The key lives in the lane of the task it names (`q:dedup:<lane>:<name>`, with the key's
//! window as its TTL), and the task's id is picked on the key's partition, so the add (which
//! sets the key when it creates the task, in `add.lua`) and the duplicate's change
//! (`debounce.lua`, which checks that the key still names the task and that the task is
//! pending, and changes it) each touch one slot.

use super::check::{Checked, add_args};
use super::lane::partition_of;
use super::{Queue, TaskAdded};
use crate::error::{Error, Result};
use crate::job::{Deduplicated, OnDuplicate};
use crate::store::script;
use redis::FromRedisValue;

script!(DEBOUNCE, "debounce.lua");

/// Rounds of add and change before giving up ([`Error::Conflict`]): each round that does not
/// decide saw the key move to another task, or its task leave the pending states, meanwhile.
const MAX_TRIES: usize = 16;

impl Queue {
    /// Add a task with a dedup key, or apply the duplicate to the task the key names.
    pub(super) async fn add_deduped(
        &self,
        mut t: Checked,
        traceparent: Option<&str>,
    ) -> Result<TaskAdded> {
        let (dedup, on) = t.dedup.clone().expect("a deduped task has its dedup");
        // The key decides the lane; the task's id is picked on it.
        let lane = self.write_lane(&t.topic, &dedup.name).await?;
        if let Some(p) = lane.part {
            let n = self.topology(&t.topic, false).await?.1;
            while partition_of(&t.id, n) != p {
                t.id = uuid::Uuid::new_v4().simple().to_string();
            }
        }
        self.register(&lane.topic).await?;
        let k = lane.keys(self.store.shards());
        let n = lane.name();
        let key = k.qdedup(&n, &dedup.name);
        let args = add_args(&t);
        let mut stale = String::new();
        for _ in 0..MAX_TRIES {
            let reply = self
                .add_one_deduped(&lane, &t, traceparent, (&key, dedup.window_ms, &stale))
                .await?;
            let code = reply.get(1).map(i64::from_redis_value_ref).transpose();
            let code = code.map_err(redis::RedisError::from)?;
            if code != Some(-2) {
                return Ok(TaskAdded {
                    id: t.id,
                    deduplicated: None,
                });
            }
            let holder =
                String::from_redis_value_ref(&reply[2]).map_err(redis::RedisError::from)?;
            let (what, _due): (String, i64) = DEBOUNCE
                .key(&key)
                .key(k.qtask(&holder))
                .key(k.qdelayed(&n))
                .key(k.qready(&n))
                .key(k.qstats(&n))
                .key(k.qnext())
                .key(k.qdue())
                .arg(&holder)
                .arg(on.as_str())
                .arg(dedup.window_ms)
                .arg(&args[1])
                .arg(&args[2])
                .arg(&args[3])
                .arg(&args[6])
                .arg(&args[4])
                .arg(&args[5])
                .arg(k.changes())
                .arg(lane.id())
                .invoke_async(&mut self.store.connection())
                .await?;
            let done = match what.as_str() {
                "moved" => {
                    stale.clear();
                    continue;
                }
                "gone" => {
                    stale = holder;
                    continue;
                }
                "kept" => Deduplicated::Kept,
                "replaced" => Deduplicated::Replaced,
                "extended" => Deduplicated::Extended,
                "replaced_extended" => Deduplicated::ReplacedExtended,
                other => return Err(Error::Corrupt(format!("debounce answered '{other}'"))),
            };
            debug_assert!(on != OnDuplicate::Keep || done == Deduplicated::Kept);
            return Ok(TaskAdded {
                id: holder,
                deduplicated: Some(done),
            });
        }
        Err(Error::Conflict(t.id))
    }
}
