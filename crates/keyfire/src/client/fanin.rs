//! Fan-in on the client: batches of tasks with a completion callback, and tasks that run
//! after another (`after_task`); see `docs/jobs.md`, "Fan-in".

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Client, Upserted};
use crate::error::{Error, Result};
use crate::job::{JobSpec, ValidationError};
use crate::store::{AfterReply, BatchStatus, JobRecord};

/// How long a batch's record is kept after its last task ended.
pub const BATCH_RETENTION_MS: i64 = 7 * 24 * 3600 * 1000;

/// Most tasks in a batch with a completion callback (one script call writes them all).
pub const MAX_BATCH_TASKS: usize = 1000;

/// Where a batch's completion callback goes: one signed POST once every task of the batch has
/// ended (succeeded, died, or was cancelled), with the counts. Sent through the callback outbox
/// (see `docs/delivery.md`, Callbacks): its `webhook-id` is `batch:<batch id>:completed`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct OnComplete {
    /// `http://` or `https://`; the same host rules as the `http` handler's URLs.
    pub url: String,
    /// Secrets to sign it with (`whsec_…`, one, or two while rotating); none: those
    /// configured for the host, if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signing_secrets: Vec<String>,
}

/// A batch enqueued with a completion callback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchEnqueued {
    /// The batch's id (`GET /v1/batches/{id}`, [`Client::get_batch`]).
    pub batch_id: String,
    /// The tasks' ids, in the order given.
    pub ids: Vec<String>,
}

impl Client {
    /// Enqueue one-shot tasks as a batch whose completion sends one callback: when every task
    /// has ended (succeeded, or went to its dead letters, or was cancelled or deleted), the
    /// callback `on_complete` is queued in the same script step that ended the last one, so
    /// it is sent once whatever node crashes when. keyfire picks the tasks' ids, on the batch's
    /// shard (a task names no `id`, `dedup` or `after_task`). Every task is checked before
    /// anything is written; errors name `tasks[i].field`.
    pub async fn enqueue_batch(
        &self,
        specs: Vec<JobSpec>,
        on_complete: OnComplete,
    ) -> Result<BatchEnqueued> {
        if specs.is_empty() || specs.len() > MAX_BATCH_TASKS {
            return Err(invalid(
                "tasks",
                format!(
                    "a batch with on_complete holds 1 to {MAX_BATCH_TASKS} tasks, got {}",
                    specs.len()
                ),
            ));
        }
        self.check_on_complete(&on_complete)?;
        let shards = self.store.shards();
        let batch_id = uuid::Uuid::new_v4().to_string();
        let shard = shards.of(&batch_id);
        let now = self.store.time_ms().await?;
        let mut jobs = Vec::with_capacity(specs.len());
        for (i, mut spec) in specs.into_iter().enumerate() {
            let named = |e: ValidationError| invalid(&format!("tasks[{i}].{}", e.field), e.message);
            for (given, field) in [
                (!spec.id.is_empty(), "id"),
                (spec.dedup.is_some(), "dedup"),
                (spec.after_task.is_some(), "after_task"),
            ] {
                if given {
                    return Err(named(ValidationError::new(
                        field,
                        "not in a batch with on_complete: keyfire picks the tasks' ids, on the \
                         batch's shard",
                    )));
                }
            }
            spec.id = loop {
                let id = uuid::Uuid::new_v4().to_string();
                if shards.of(&id) == shard {
                    break id;
                }
            };
            let spec = super::as_task(spec, shards).map_err(named)?;
            let known = self.known_handler(&spec.handler).await?;
            let mut job = self.check(spec, now, now, known).map_err(named)?;
            job.spec.batch = Some(batch_id.clone());
            let first = job.first_firing(now);
            jobs.push((job.spec, first));
        }
        let callback = batch_callback(&batch_id, &on_complete);
        self.store
            .insert_batch(&batch_id, &jobs, &callback, BATCH_RETENTION_MS, now)
            .await?;
        Ok(BatchEnqueued {
            batch_id,
            ids: jobs.into_iter().map(|(s, _)| s.id).collect(),
        })
    }

    /// A batch's counts ([`Client::enqueue_batch`], or a topic's batch:
    /// [`Queue::add_batch`](crate::queue::Queue::add_batch), whose id names its lane's shard as
    /// well); [`Error::NotFound`] when there is no such batch, or its record expired
    /// ([`BATCH_RETENTION_MS`] after it completed).
    pub async fn get_batch(&self, id: &str) -> Result<BatchStatus> {
        crate::job::validate_id(id).map_err(|_| Error::NotFound(id.to_string()))?;
        self.store
            .get_batch(id)
            .await?
            .ok_or_else(|| Error::NotFound(id.to_string()))
    }

    /// The callback's URL and secrets, by the `http` handler's rules (errors name
    /// `on_complete.url`, `on_complete.signing_secrets[i]`).
    pub(crate) fn check_on_complete(&self, on: &OnComplete) -> Result<()> {
        #[cfg(feature = "http")]
        crate::handler::http::check_params(
            &json!({"url": on.url, "signing_secrets": on.signing_secrets}),
            &self.http,
        )
        .map_err(|e| {
            let field = e.field.replacen("params", "on_complete", 1);
            let message = e.message.replace("params.", "on_complete.");
            invalid(&field, message)
        })?;
        #[cfg(not(feature = "http"))]
        if !(on.url.starts_with("http://") || on.url.starts_with("https://")) {
            return Err(invalid(
                "on_complete.url",
                "must be an http:// or https:// URL",
            ));
        }
        Ok(())
    }

    /// Create a task with `after_task` (checked by `as_task`: on that task's shard).
    pub(super) async fn enqueue_after(&self, spec: JobSpec) -> Result<(JobRecord, Upserted)> {
        let awaited = spec.after_task.clone().unwrap_or_default();
        let known = self.known_handler(&spec.handler).await?;
        let now = self.store.time_ms().await?;
        let job = self.check(spec, now, now, known)?;
        let delay = job.first_firing(now).map_or(0, |at| (at - now).max(0));
        let id = job.spec.id.clone();
        let how = match self
            .store
            .insert_after(&job.spec, &awaited, delay, now)
            .await?
        {
            AfterReply::Exists => Upserted::Kept,
            AfterReply::Missing => {
                return Err(invalid(
                    "after_task",
                    format!(
                        "no task '{awaited}' (it never existed, or its record is gone after its \
                         retention)"
                    ),
                ));
            }
            AfterReply::Recurring => {
                return Err(invalid(
                    "after_task",
                    format!("'{awaited}' is a recurring job: only a one-shot task can be awaited"),
                ));
            }
            AfterReply::Waiting | AfterReply::Due(_) | AfterReply::Dead => Upserted::Created,
        };
        Ok((self.get(&id).await?, how))
    }
}

/// A batch's completion callback as the outbox keeps it (JSON), queued by `batch_count` in
/// `fanin_lib.lua` with the counts when the batch's last task ends: for batches of one-shot
/// tasks and of topic tasks alike.
pub(crate) fn batch_callback(batch_id: &str, on_complete: &OnComplete) -> String {
    let mut callback = json!({
        "job_id": batch_id,
        "firing_id": format!("batch:{batch_id}"),
        "attempts": 0,
        "url": on_complete.url,
        "payload": {
            "type": "keyfire.batch.completed",
            "data": {"batch_id": batch_id},
        },
    });
    // Left out when empty: Redis's cjson writes an empty array back as an object.
    if !on_complete.signing_secrets.is_empty() {
        callback["secrets"] = json!(on_complete.signing_secrets);
    }
    callback.to_string()
}

fn invalid(field: &str, message: impl Into<String>) -> Error {
    Error::Invalid(ValidationError::new(field, message))
}
