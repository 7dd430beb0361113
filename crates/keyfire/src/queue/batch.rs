//! Batches of topic tasks with a completion callback, as one-shot tasks have them
//! ([`Client::enqueue_batch`](crate::Client::enqueue_batch), `docs/jobs.md`, "Fan-in").
//!
//! Every task of a batch goes to one lane of its topic (one partition), so the tasks' records,
//! the batch's record `{tag}:batch:<id>` and the outbox the callback is queued in share the
//! lane's hash tag: `add.lua` writes the tasks (each with `batch`, the batch's id) and the
//! record in one step, and the script that ends a task (`finish.lua` ok, `requeue.lua` dead,
//! `delete.lua` cancelled) counts it there with `batch_count` of `fanin_lib.lua`; the last one
//! queues the callback in the same step. The lane's tag is a scheduler shard's, whose outbox
//! the nodes' callback senders read. The batch's id is picked on that shard
//! ([`crate::store::Shards::of`] of the id), so [`Client::get_batch`](crate::Client::get_batch)
//! finds topic batches as it finds one-shot ones.

use chrono::Utc;

use super::check::{Checked, check};
use super::lane::{Lane, Layout, partition_of};
use super::{NewTask, Queue, TaskState, check_topic};
use crate::client::{BATCH_RETENTION_MS, BatchEnqueued, MAX_BATCH_TASKS, OnComplete};
use crate::error::{Error, Result};
use crate::job::ValidationError;

impl Queue {
    /// Add tasks to `topic` as a batch whose completion sends one callback: once every task
    /// has ended — finished, gone to the topic's dead letters, or deleted before it ended —
    /// `on_complete` is queued (with the counts) in the same script step that ended the last
    /// one, so it is sent once whatever crashes when. A dead letter replayed later leaves the
    /// batch (which counted it dead).
    ///
    /// 1 to [`MAX_BATCH_TASKS`] tasks, each of `topic`; keyfire picks their ids, all on one
    /// partition of the topic (a task names no `id` or `dedup`). Everything is checked before
    /// anything is written; errors name `tasks[i].field` or `on_complete.url`. A delayed task
    /// needs a node serving topics ([`Error::Setup`] otherwise), and so does a queue spread over
    /// several shards that has not switched to the sharded layout yet (its nodes are being
    /// upgraded).
    pub async fn add_batch(
        &self,
        topic: &str,
        tasks: Vec<NewTask>,
        on_complete: OnComplete,
    ) -> Result<BatchEnqueued> {
        check_topic(topic)?;
        if tasks.is_empty() || tasks.len() > MAX_BATCH_TASKS {
            return Err(invalid(
                "tasks".into(),
                format!(
                    "a batch with on_complete holds 1 to {MAX_BATCH_TASKS} tasks, got {}",
                    tasks.len()
                ),
            ));
        }
        let mut checked = Vec::with_capacity(tasks.len());
        for (i, task) in tasks.iter().enumerate() {
            let field = |f: &str| format!("tasks[{i}].{f}");
            if task.topic != topic {
                return Err(invalid(
                    field("topic"),
                    format!(
                        "every task of the batch goes to topic '{topic}', not '{}'",
                        task.topic
                    ),
                ));
            }
            for (given, name) in [(task.id.is_some(), "id"), (task.dedup.is_some(), "dedup")] {
                if given {
                    return Err(invalid(
                        field(name),
                        "not in a batch with on_complete: keyfire picks the tasks' ids, on one \
                         partition of the topic",
                    ));
                }
            }
            checked.push(check(task, self.max_payload_bytes).map_err(|e| match e {
                Error::Invalid(v) => invalid(field(&v.field), v.message),
                other => other,
            })?);
        }
        self.jobs.check_on_complete(&on_complete)?;
        let (batch_id, lane, part, n) = self.batch_lane(topic).await?;
        for t in &mut checked {
            t.id = loop {
                let id = uuid::Uuid::new_v4().simple().to_string();
                if part.is_none_or(|p| partition_of(&id, n) == p) {
                    break id;
                }
            };
        }
        // As `add_stored`: a node that promotes topics is needed only for a delayed task.
        let soon = Utc::now().timestamp_millis() - 1_000;
        if checked.iter().any(|t| match t.when {
            ("delay", ms) => ms > 0,
            (_, at) => at > soon,
        }) {
            self.ensure_served().await?;
        }
        if checked.iter().any(|t| t.priority > 0) {
            self.register_priority(topic).await?;
        }
        self.register(topic).await?;
        let refs: Vec<&Checked> = checked.iter().collect();
        let mut cmd = self.add_invocation(&lane, &refs, None, None);
        cmd.arg(&batch_id)
            .arg(crate::client::batch_callback(&batch_id, &on_complete))
            .arg(BATCH_RETENTION_MS);
        let replies = self.run_adds(vec![(lane, cmd)]).await?;
        let added: Vec<_> = replies.into_iter().flat_map(|r| r.0).collect();
        if added.len() != checked.len() || added.iter().any(|a| !a.added) {
            return Err(Error::Corrupt(format!(
                "add of batch {batch_id}: {} of {} tasks created",
                added.iter().filter(|a| a.added).count(),
                checked.len()
            )));
        }
        for a in &added {
            TaskState::parse(&a.state)?;
        }
        Ok(BatchEnqueued {
            batch_id,
            ids: checked.into_iter().map(|t| t.id).collect(),
        })
    }

    /// A fresh batch id and the lane of `topic` its tasks go to (with its partition and the
    /// topic's partition count): a partition whose shard is the one the id names
    /// ([`crate::store::Shards::of`]), so that the batch is found by its id alone. Before the
    /// switch to the sharded layout, the topic's lane under the meta tag, which is a shard's
    /// only when there is one shard (its outbox is read then; its tasks are never moved).
    async fn batch_lane(&self, topic: &str) -> Result<(String, Lane, Option<usize>, usize)> {
        let (layout, n) = self.topology(topic, true).await?;
        let shards = self.store.shards();
        if layout == Layout::Meta {
            if shards.len() > 1 {
                return Err(Error::Setup(
                    "a batch of topic tasks with on_complete waits for the delay queue's switch \
                     to the sharded layout, which the nodes make once every live node is \
                     upgraded"
                        .into(),
                ));
            }
            return Ok((
                uuid::Uuid::new_v4().to_string(),
                Lane::legacy(topic),
                None,
                n,
            ));
        }
        loop {
            let batch_id = uuid::Uuid::new_v4().to_string();
            let p = partition_of(&batch_id, n);
            let lane = Lane::part(shards, topic, p, n);
            if lane.slot_group().unwrap_or(0) == shards.of(&batch_id) {
                return Ok((batch_id, lane, Some(p), n));
            }
        }
    }
}

fn invalid(field: String, message: impl Into<String>) -> Error {
    Error::Invalid(ValidationError::new(field, message))
}
