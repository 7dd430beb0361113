//! A topic's dead letters: list them, replay them (back to ready) or purge them, all of them or
//! by id. Each change is one `lua/dead.lua` call per lane and batch, so a dead letter is
//! replayed or purged once however many callers act at once.

use redis::AsyncCommands;

use super::lane::Lane;
use super::reply::text;
use super::task::decode_task;
use super::{MAX_POP, NOTIFY_CAP, Queue, TaskInfo, check_task_id, check_topic, duration_ms};
use crate::error::{Error, Result};
use crate::job::ValidationError;
use crate::store::script;

script!(DEAD, "dead.lua");

/// Dead letters one `dead.lua` call acts on.
const DEAD_BATCH: usize = 1_000;
/// Calls per lane of one replay or purge of all the dead letters: a larger backlog (more than a
/// million) is left to the next call.
const DEAD_ROUNDS: usize = 1_000;

/// What a replay or purge does with each dead letter it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    Replay,
    Purge,
}

impl Act {
    fn as_str(self) -> &'static str {
        match self {
            Act::Replay => "replay",
            Act::Purge => "purge",
        }
    }
}

/// Check the ids a replay or purge names: 1 to [`MAX_POP`] task ids, each naming itself
/// (`ids[2]`) when it is not one.
pub fn check_dead_ids(ids: &[String]) -> Result<()> {
    if ids.is_empty() || ids.len() > MAX_POP {
        return Err(Error::Invalid(ValidationError::new(
            "ids",
            format!("give 1 to {MAX_POP} task ids, not {}", ids.len()),
        )));
    }
    for (i, id) in ids.iter().enumerate() {
        check_task_id(id).map_err(|e| {
            let message = match e {
                Error::Invalid(v) => v.message,
                other => other.to_string(),
            };
            Error::Invalid(ValidationError::new(format!("ids[{i}]"), message))
        })?;
    }
    Ok(())
}

impl Queue {
    /// The dead letters of `topic`, the most recent first (at most `limit`): each with its
    /// deliveries, when it died ([`TaskInfo::finished_at`]) and why ([`TaskInfo::last_error`]).
    pub async fn dead_letters(&self, topic: &str, limit: usize) -> Result<Vec<TaskInfo>> {
        check_topic(topic)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut all = Vec::new();
        for lane in self.lanes(topic, true).await? {
            all.extend(self.read_dead(&lane, limit).await?);
        }
        all.sort_by(|a, b| b.1.total_cmp(&a.1));
        all.into_iter()
            .filter(|(_, _, m)| m.get("state").map(String::as_str) == Some("dead"))
            .take(limit)
            .map(|(id, _, m)| decode_task(&id, &m))
            .collect()
    }

    /// Make dead letters of `topic` ready again: those of `ids` (1 to [`MAX_POP`]; ids that are
    /// not dead letters of the topic are passed over), or all of them (`None`). Each goes to the
    /// tail of the ready set with its delivery count reset to 0, so it gets its
    /// `max_deliveries` again, and waiting consumers are woken. Returns how many were made
    /// ready. Bad ids are refused naming them (`ids[2]`), and nothing changes.
    pub async fn replay_dead(&self, topic: &str, ids: Option<&[String]>) -> Result<u64> {
        self.act_on_dead(topic, ids, Act::Replay).await
    }

    /// Delete dead letters of `topic` for good: those of `ids` or all of them, as
    /// [`Queue::replay_dead`] picks them. Each keeps a `deleted` record without its payload for
    /// the retention, as [`Queue::delete`] leaves. Returns how many were deleted.
    pub async fn purge_dead(&self, topic: &str, ids: Option<&[String]>) -> Result<u64> {
        self.act_on_dead(topic, ids, Act::Purge).await
    }

    /// Whether `topic` is known: it had a task, or it was declared.
    pub async fn has_topic(&self, topic: &str) -> Result<bool> {
        check_topic(topic)?;
        let k = self.store.keys();
        let (member, declared): (bool, bool) = redis::pipe()
            .sismember(k.qtopics(), topic)
            .hexists(k.qpartitions(), topic)
            .query_async(&mut self.store.connection())
            .await?;
        Ok(member || declared)
    }

    async fn act_on_dead(&self, topic: &str, ids: Option<&[String]>, act: Act) -> Result<u64> {
        check_topic(topic)?;
        if let Some(ids) = ids {
            check_dead_ids(ids)?;
        }
        let mut n = 0;
        for lane in self.lanes(topic, true).await? {
            match ids {
                // The script passes over the ids not in this lane's dead set.
                Some(ids) => n += self.dead_script(&lane, ids, act).await? as u64,
                None => {
                    for _ in 0..DEAD_ROUNDS {
                        let head: Vec<String> = self
                            .store
                            .connection()
                            .zrange(
                                lane.keys(self.store.shards()).qdead(&lane.name()),
                                0,
                                DEAD_BATCH as isize - 1,
                            )
                            .await?;
                        if head.is_empty() {
                            break;
                        }
                        // Every id read leaves the dead set (acted on, or gone stale), so
                        // each round makes progress.
                        n += self.dead_script(&lane, &head, act).await? as u64;
                    }
                }
            }
        }
        Ok(n)
    }

    /// `dead.lua` over these ids of a lane: how many it acted on.
    async fn dead_script(&self, lane: &Lane, ids: &[String], act: Act) -> Result<usize> {
        let k = lane.keys(self.store.shards());
        let n = lane.name();
        let mut acted = 0;
        for chunk in ids.chunks(DEAD_BATCH) {
            let mut inv = DEAD.prepare_invoke();
            inv.key(k.qdead(&n))
                .key(k.qready(&n))
                .key(k.qnotify(&n))
                .key(k.qstats(&n));
            for id in chunk {
                inv.key(k.qtask(id));
            }
            inv.arg(act.as_str())
                .arg(NOTIFY_CAP)
                .arg(duration_ms(self.retention));
            for id in chunk {
                inv.arg(id);
            }
            let reply: Vec<redis::Value> = inv.invoke_async(&mut self.store.connection()).await?;
            if reply.is_empty() {
                return Err(Error::Corrupt("dead: empty reply".into()));
            }
            for v in &reply[1..] {
                text(v)?;
            }
            acted += reply.len() - 1;
        }
        Ok(acted)
    }
}
