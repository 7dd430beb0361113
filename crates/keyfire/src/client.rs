//! [`Client`]: create, read, list, update, pause, resume and delete jobs without running a node.

use std::collections::HashSet;
use std::sync::{Arc, RwLock};

use crate::config::{HttpHandlerSettings, InputLimits, Settings};
use crate::error::{Error, Result};
use crate::inspect::{LiveNode, ServerMemory, Totals};
use crate::job::{
    Calendar, CalendarSpec, Deduplicated, Job, JobSpec, OnDuplicate, Validation, ValidationError,
};
mod fanin;
pub(crate) use fanin::batch_callback;
pub use fanin::{BATCH_RETENTION_MS, BatchEnqueued, MAX_BATCH_TASKS, OnComplete};

use crate::store::{
    CancelReply, DeadLetter, Deduped, JobRecord, JobStatus, RunRecord, RunningLease, Shards,
    SkipRecord, Store, UpsertReply,
};

/// Check that `spec` is one-shot and give it an instant when it has none, and an id when it
/// has none: a fresh UUID, on the dedup key's shard when it names one (the script that decides
/// on the key touches the task's keys too, so both must share a slot on Redis Cluster).
fn as_task(mut spec: JobSpec, shards: &Shards) -> Result<JobSpec, ValidationError> {
    if spec.cron.is_some() || spec.every.is_some() {
        return Err(ValidationError::new(
            "schedule",
            "a task is one-shot: give `at` or `after`, not cron or every",
        ));
    }
    if spec.at.is_none() && spec.after.is_none() {
        spec.after = Some("0s".into());
    }
    if let Some(awaited) = &spec.after_task {
        // Stored, `after` reads as `at` (its instant at creation): only the input is checked.
        if spec.at.is_some() {
            return Err(ValidationError::new(
                "at",
                "with after_task, give `after` (a delay after that task's success), not `at`",
            ));
        }
        if spec.dedup.is_some() {
            return Err(ValidationError::new("dedup", "not with after_task"));
        }
        let shard = shards.of(awaited);
        if spec.id.is_empty() {
            spec.id = loop {
                let id = uuid::Uuid::new_v4().to_string();
                if shards.of(&id) == shard {
                    break id;
                }
            };
        } else if shards.of(&spec.id) != shard {
            return Err(ValidationError::new(
                "id",
                "a task with after_task lives on that task's shard: leave the id out (keyfire \
                 picks one there)",
            ));
        }
    }
    if let Some(dedup) = &spec.dedup {
        if !spec.id.is_empty() {
            return Err(ValidationError::new(
                "id",
                "leave the id out when dedup is given: keyfire picks it, and the dedup key is \
                 what makes a retried enqueue safe",
            ));
        }
        let dedup = dedup.resolve(&spec.handler, &spec.params)?;
        let shard = shards.of(&dedup.name);
        spec.id = loop {
            let id = uuid::Uuid::new_v4().to_string();
            if shards.of(&id) == shard {
                break id;
            }
        };
    }
    if spec.id.is_empty() {
        spec.id = uuid::Uuid::new_v4().to_string();
    }
    Ok(spec)
}

/// What an upsert did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upserted {
    /// The job did not exist; it is at version 1.
    Created,
    /// The job existed with another spec; its version went up by one.
    Replaced,
    /// The job existed with this very spec: nothing was written, the version is the same.
    Unchanged,
    /// An enqueue found its id taken: the existing task was left as it is.
    Kept,
    /// An enqueue named a dedup key that a task enqueued within the key's window holds: that
    /// task, left as it is; nothing was created.
    Duplicate,
}

/// What [`Client::cancel`] did: both lists empty when the job had nothing to cancel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cancelled {
    /// Running firings (firing ids) told to stop: the node running each stops it (its handler
    /// sees [`Firing::cancel`](crate::Firing::cancel)) and records it `cancelled`, unless it
    /// succeeded first; no further attempt follows.
    pub stopping: Vec<String>,
    /// Firings cancelled before they ran, recorded `cancelled` already: a one-shot job's
    /// pending instant (the job is then finished) and attempts queued for a retry.
    pub cancelled: Vec<String>,
}

impl Cancelled {
    /// Whether there was nothing to cancel.
    pub fn is_empty(&self) -> bool {
        self.stopping.is_empty() && self.cancelled.is_empty()
    }
}

/// Optimistic updates retry this often when a concurrent change moved the version.
const MAX_TRIES: usize = 8;

/// Manages jobs in Redis. Every change is one script (G4) and is announced on the change
/// channel, so running nodes see it at once.
///
/// Cheap to clone: clones share the connection and the set of known handler names.
#[derive(Clone)]
pub struct Client {
    store: Store,
    limits: InputLimits,
    /// The `http` handler's settings: its params are checked against them on writes.
    http: HttpHandlerSettings,
    /// Handler names known to be valid: those nodes registered in Redis, plus local ones.
    handlers: Arc<RwLock<HashSet<String>>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("store", &self.store)
            .finish()
    }
}

impl Client {
    /// Connect with the Redis settings and limits of `settings`.
    pub async fn connect(settings: &Settings) -> Result<Self> {
        let store = Store::open(&settings.redis)
            .await?
            .with_ledger(crate::store::Ledger::of(&settings.node));
        store.check_layout().await?;
        let mut client = Self::new(store, settings.limits.clone());
        client.http = settings.handlers.http.clone();
        Ok(client)
    }

    /// A client over an existing store (keyfire's own crates: the lab and the tests; an
    /// embedder connects with [`Client::connect`]).
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn new(store: Store, limits: InputLimits) -> Self {
        Self::over(store, limits)
    }

    /// A client over an existing store.
    #[cfg(not(feature = "internals"))]
    pub(crate) fn new(store: Store, limits: InputLimits) -> Self {
        Self::over(store, limits)
    }

    fn over(store: Store, limits: InputLimits) -> Self {
        Self {
            store,
            limits,
            http: HttpHandlerSettings::default(),
            handlers: Arc::default(),
        }
    }

    /// Check `http` params (and callback URLs) against these settings of the `http` handler.
    pub(crate) fn with_http(mut self, http: HttpHandlerSettings) -> Self {
        self.http = http;
        self
    }

    /// Also accept these handler names (besides those that nodes registered in Redis).
    pub fn allow_handlers<I: IntoIterator<Item = S>, S: Into<String>>(self, names: I) -> Self {
        self.handlers
            .write()
            .expect("handler set lock")
            .extend(names.into_iter().map(Into::into));
        self
    }

    /// The store this client writes through (keyfire's own crates: the lab and the tests).
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The store this client writes through.
    #[cfg(not(feature = "internals"))]
    #[allow(dead_code)]
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// Most bytes of a job's params (and of a queued task's payload) this client accepts.
    pub(crate) fn max_params_bytes(&self) -> usize {
        self.limits.max_params_bytes
    }

    async fn known_handler(&self, name: &str) -> Result<bool> {
        if self
            .handlers
            .read()
            .expect("handler set lock")
            .contains(name)
        {
            return Ok(true);
        }
        let registered = self.store.handlers().await?;
        let mut set = self.handlers.write().expect("handler set lock");
        set.extend(registered);
        Ok(set.contains(name))
    }

    /// Validate a spec written by a user: its fields, then the params of the built-in `http`
    /// handler (signing secrets, callback URLs, host rules), so they are refused at once
    /// rather than failing every run.
    fn check(
        &self,
        spec: JobSpec,
        now_ms: i64,
        created_ms: i64,
        known_handler: bool,
    ) -> std::result::Result<Job, ValidationError> {
        if spec.batch.is_some() {
            return Err(ValidationError::new(
                "batch",
                "set by keyfire: enqueue the tasks as a batch with on_complete",
            ));
        }
        let job = spec.validate(&Validation {
            now_ms,
            created_ms,
            known_handler: Some(&|_: &str| known_handler),
            max_params_bytes: self.limits.max_params_bytes,
        })?;
        if job.spec.handler == "http" {
            #[cfg(feature = "http")]
            crate::handler::http::check_params(&job.spec.params, &self.http)?;
        }
        Ok(job)
    }

    /// A job written by id (an upsert) is already idempotent by its id: dedup applies to
    /// enqueues. A spec that keeps the stored job's own dedup declaration is let through, so a
    /// deduplicated task can be read, changed and written back (its key still names it).
    async fn dedup_on_upsert(&self, spec: &JobSpec) -> Result<()> {
        if spec.after_task.is_some() {
            return Err(Error::Invalid(ValidationError::new(
                "after_task",
                "only an enqueued task waits for another (POST /v1/tasks, `keyfire task add`); \
                 a job written by id does not",
            )));
        }
        let Some(dedup) = &spec.dedup else {
            return Ok(());
        };
        if let Some(stored) = self.store.get_job(&spec.id).await?
            && stored.spec.dedup.as_ref() == Some(dedup)
        {
            return Ok(());
        }
        Err(Error::Invalid(ValidationError::new(
            "dedup",
            "applies only when a task is enqueued (Client::enqueue, POST /v1/tasks, `keyfire \
             task add`); a job written by its id is already idempotent by that id",
        )))
    }

    /// Check a task as [`Client::enqueue`] would, without writing anything. Returns it with
    /// the id and instant an enqueue would give it when it has none.
    pub async fn validate_task(&self, spec: &JobSpec) -> Result<JobSpec> {
        let spec = as_task(spec.clone(), self.store.shards()).map_err(Error::Invalid)?;
        let now = self.store.time_ms().await?;
        let known = self.known_handler(&spec.handler).await?;
        self.check(spec.clone(), now, now, known)?;
        Ok(spec)
    }

    /// Check a spec as [`Client::upsert`] would, without writing anything.
    pub async fn validate(&self, spec: &JobSpec) -> Result<()> {
        self.validate_with_calendars(spec, &[]).await
    }

    /// [`Client::validate`], taking the calendars named in `also` as existing (calendars
    /// declared beside the job, written before it).
    pub async fn validate_with_calendars(&self, spec: &JobSpec, also: &[String]) -> Result<()> {
        self.dedup_on_upsert(spec).await?;
        let now = self.store.time_ms().await?;
        let known = self.known_handler(&spec.handler).await?;
        self.check(spec.clone(), now, now, known)?;
        if spec.exclude.is_empty() {
            return Ok(());
        }
        let mut names: Vec<String> = self
            .store
            .calendars()
            .await?
            .into_iter()
            .map(|c| c.name)
            .collect();
        names.extend_from_slice(also);
        if let Some((i, name)) = spec
            .exclude
            .iter()
            .enumerate()
            .find(|(_, n)| !names.contains(n))
        {
            return Err(unknown_calendar(i, name));
        }
        Ok(())
    }

    /// Refuse a job that names a calendar that does not exist (`exclude[i]`), registering
    /// it as a user of those it names first (a deletion of one then sees it).
    async fn check_calendars(&self, spec: &JobSpec) -> Result<()> {
        match self.store.use_calendars(&spec.id, &spec.exclude).await? {
            Some(i) => Err(unknown_calendar(i, &spec.exclude[i])),
            None => Ok(()),
        }
    }

    /// Create or replace a calendar. Jobs that name it judge each instant by it from the
    /// moment it is written (see `docs/jobs.md`, Calendars).
    pub async fn put_calendar(&self, spec: CalendarSpec) -> Result<Calendar> {
        let calendar = spec.validate()?;
        self.store.put_calendar(&calendar.spec).await?;
        Ok(calendar)
    }

    /// A calendar.
    pub async fn calendar(&self, name: &str) -> Result<CalendarSpec> {
        self.store
            .calendar(name)
            .await?
            .ok_or_else(|| Error::CalendarNotFound(name.to_string()))
    }

    /// Every calendar, by name.
    pub async fn calendars(&self) -> Result<Vec<CalendarSpec>> {
        self.store.calendars().await
    }

    /// Delete a calendar; refused ([`Error::CalendarInUse`], naming them) while jobs name
    /// it in `exclude`.
    pub async fn delete_calendar(&self, name: &str) -> Result<()> {
        if self.store.delete_calendar(name).await? {
            Ok(())
        } else {
            Err(Error::CalendarNotFound(name.to_string()))
        }
    }

    /// Create the job, or replace the job with the same id (idempotent). The next firing is
    /// computed from Redis's clock. On a validation error nothing is written. A spec equal to
    /// the stored one (once `after` is resolved) changes nothing and keeps the version.
    pub async fn upsert(&self, spec: JobSpec) -> Result<JobRecord> {
        Ok(self.upsert_inner(spec, None).await?.0)
    }

    /// Create or replace the job only if it is still at version `expected` (0: only if it
    /// does not exist yet); otherwise [`Error::VersionMismatch`] and nothing is written. The
    /// check and the write are one script, so a concurrent edit cannot slip between them.
    pub async fn upsert_if_version(&self, spec: JobSpec, expected: u64) -> Result<JobRecord> {
        Ok(self.upsert_inner(spec, Some(expected)).await?.0)
    }

    /// [`Client::upsert`] (or, with `expected`, [`Client::upsert_if_version`]), telling
    /// whether the job was created, replaced, or left as it was.
    pub async fn upsert_with_outcome(
        &self,
        spec: JobSpec,
        expected: Option<u64>,
    ) -> Result<(JobRecord, Upserted)> {
        self.upsert_inner(spec, expected).await
    }

    async fn upsert_inner(
        &self,
        spec: JobSpec,
        expected: Option<u64>,
    ) -> Result<(JobRecord, Upserted)> {
        self.dedup_on_upsert(&spec).await?;
        let known = self.known_handler(&spec.handler).await?;
        for _ in 0..MAX_TRIES {
            let (state, now) = self.store.job_state(&spec.id).await?;
            let mismatch = |actual: u64| Error::VersionMismatch {
                id: spec.id.clone(),
                expected: expected.unwrap_or(0),
                actual,
            };
            if expected.is_some_and(|v| v != state.version) {
                // Still validate first: bad input is reported as such, not as a conflict.
                self.check(spec.clone(), now, now, known)?;
                return Err(mismatch(state.version));
            }
            let created_ms = state.created_ms.unwrap_or(now);
            let job = self.check(spec.clone(), now, created_ms, known)?;
            self.check_calendars(&job.spec).await?;
            // A write that changes nothing keeps the version, so a client holding it in
            // `If-Match` is not told of a conflict after re-sending the same spec.
            if state.version > 0
                && let Some(stored) = self.store.get_job(&spec.id).await?
                && stored.version == state.version
                && stored.spec == job.spec
            {
                return Ok((stored, Upserted::Unchanged));
            }
            let next = job.first_firing(now);
            match self
                .store
                .upsert(&job.spec, &state, next, created_ms)
                .await?
            {
                UpsertReply::Written { .. } => {
                    let outcome = if state.version == 0 {
                        Upserted::Created
                    } else {
                        Upserted::Replaced
                    };
                    return Ok((self.get(&spec.id).await?, outcome));
                }
                UpsertReply::Conflict if expected.is_some() => {
                    let (now_state, _) = self.store.job_state(&spec.id).await?;
                    return Err(mismatch(now_state.version));
                }
                UpsertReply::Conflict => continue,
            }
        }
        Err(Error::Conflict(spec.id))
    }

    /// Enqueue a one-shot task: `spec` must be a one-shot (`at` or `after`; neither means
    /// now); an empty id is replaced by a fresh UUID. An id that exists already is left as it
    /// is and returned (enqueueing is create-if-absent, like [`Client::enqueue_many`] and the
    /// delay queue's add), so a retried enqueue never runs a task twice; use
    /// [`Client::upsert`] to replace a pending task.
    ///
    /// A task with [`JobSpec::dedup`] (and no id: keyfire picks it) is created unless a task
    /// enqueued with the same dedup key within its window exists: then that task is returned
    /// ([`Upserted::Duplicate`] from [`Client::enqueue_with_outcome`]) and nothing is written.
    /// One script decides, so this holds across nodes and under concurrency. A deleted task
    /// does not hold its key: the next enqueue with the key creates a new task.
    pub async fn enqueue(&self, spec: JobSpec) -> Result<JobRecord> {
        Ok(self.enqueue_with_outcome(spec).await?.0)
    }

    /// [`Client::enqueue`], telling whether the task was created ([`Upserted::Created`]) or
    /// its id was taken ([`Upserted::Kept`]: the existing task, untouched), or its dedup key
    /// was ([`Upserted::Duplicate`]: the task enqueued with it, untouched).
    pub async fn enqueue_with_outcome(&self, spec: JobSpec) -> Result<(JobRecord, Upserted)> {
        let (record, how, _) = self.enqueue_deduplicated(spec).await?;
        Ok((record, how))
    }

    /// [`Client::enqueue_with_outcome`], telling for a duplicate ([`Upserted::Duplicate`]) what
    /// it did to the task its dedup key names ([`DedupSpec::on_duplicate`](crate::job::DedupSpec::on_duplicate):
    /// kept it, replaced its spec, extended its instant, or both). The record is the task as
    /// it is after the change.
    pub async fn enqueue_deduplicated(
        &self,
        spec: JobSpec,
    ) -> Result<(JobRecord, Upserted, Option<Deduplicated>)> {
        let spec = as_task(spec, self.store.shards()).map_err(Error::Invalid)?;
        if spec.dedup.is_some() {
            return self.enqueue_deduped(spec).await;
        }
        if spec.after_task.is_some() {
            let (record, how) = self.enqueue_after(spec).await?;
            return Ok((record, how, None));
        }
        let id = spec.id.clone();
        for _ in 0..MAX_TRIES {
            match self.upsert_inner(spec.clone(), Some(0)).await {
                Err(Error::VersionMismatch { .. }) => match self.store.get_job(&id).await? {
                    Some(existing) => return Ok((existing, Upserted::Kept, None)),
                    // Deleted in between: try to create it again.
                    None => continue,
                },
                other => return other.map(|(r, how)| (r, how, None)),
            }
        }
        Err(Error::Conflict(id))
    }

    /// Create a task with a dedup key (its id picked on the key's shard by `as_task`), or
    /// return the task the key names, changed as its `on_duplicate` says when it is pending.
    async fn enqueue_deduped(
        &self,
        spec: JobSpec,
    ) -> Result<(JobRecord, Upserted, Option<Deduplicated>)> {
        let known = self.known_handler(&spec.handler).await?;
        let on = spec
            .dedup
            .as_ref()
            .map(|d| d.on_duplicate())
            .transpose()
            .map_err(Error::Invalid)?
            .unwrap_or_default();
        let mut stale: Option<String> = None;
        // Concurrent duplicates that replace or extend may each find the task changed by
        // another in between (its instant moved): a few more rounds than a plain enqueue.
        for _ in 0..MAX_TRIES * 8 {
            let now = self.store.time_ms().await?;
            let job = self.check(spec.clone(), now, now, known)?;
            let dedup = job
                .dedup
                .clone()
                .expect("a task with dedup has a checked dedup");
            let next = job.first_firing(now);
            match self
                .store
                .create_deduped(&job.spec, next, now, &dedup, stale.as_deref())
                .await?
            {
                Deduped::Created => {
                    return Ok((self.get(&job.spec.id).await?, Upserted::Created, None));
                }
                Deduped::Duplicate(id) => match self.store.get_job(&id).await? {
                    Some(existing) if on == OnDuplicate::Keep => {
                        metrics::counter!(crate::metrics::name::DEDUPED).increment(1);
                        return Ok((existing, Upserted::Duplicate, Some(Deduplicated::Kept)));
                    }
                    Some(existing) => {
                        let Some(next) = next else { break };
                        let what = self
                            .store
                            .debounce_task(
                                &id,
                                existing.next_ms,
                                &job.spec,
                                next,
                                &dedup,
                                on.as_str(),
                            )
                            .await?;
                        let done = match what.as_str() {
                            "moved" => {
                                stale = None;
                                continue;
                            }
                            // No longer pending: a new task takes the key over.
                            "gone" => {
                                stale = Some(id);
                                continue;
                            }
                            "kept" => Deduplicated::Kept,
                            "replaced" => Deduplicated::Replaced,
                            "extended" => Deduplicated::Extended,
                            "replaced_extended" => Deduplicated::ReplacedExtended,
                            other => {
                                return Err(Error::Corrupt(format!("debounce answered '{other}'")));
                            }
                        };
                        metrics::counter!(crate::metrics::name::DEDUPED).increment(1);
                        return Ok((self.get(&id).await?, Upserted::Duplicate, Some(done)));
                    }
                    // Deleted (by hand, or cleaned up after it ran) while its key still lives:
                    // a deleted task does not hold its key, so take it over.
                    None => stale = Some(id),
                },
                // A fresh UUID that exists: it cannot happen, but never overwrite a job.
                Deduped::IdTaken => break,
            }
        }
        Err(Error::Conflict(spec.id))
    }

    /// Enqueue many one-shot tasks at once. All are checked first: if one is bad, nothing is
    /// written and the error names it (`tasks[3].after`). Then they are written in pipelined
    /// batches. A task whose id exists already is left as it is (the rule of
    /// [`Client::enqueue`]), so a retried batch does not enqueue twice. Returns the ids, in
    /// order.
    ///
    /// Tasks with a dedup key are written after the others, one script each (as
    /// [`Client::enqueue`] writes them); for a duplicate, the id returned is that of the task
    /// its key names.
    pub async fn enqueue_many(&self, specs: Vec<JobSpec>) -> Result<Vec<String>> {
        Ok(self
            .enqueue_many_with_outcome(specs)
            .await?
            .into_iter()
            .map(|(id, _)| id)
            .collect())
    }

    /// [`Client::enqueue_many`], telling for each task whether it was created or is a
    /// duplicate ([`Upserted::Duplicate`]: the id is that of the task its dedup key names).
    /// A task whose id existed already counts as created here (the bulk write does not tell).
    pub async fn enqueue_many_with_outcome(
        &self,
        specs: Vec<JobSpec>,
    ) -> Result<Vec<(String, Upserted)>> {
        let now = self.store.time_ms().await?;
        let mut jobs = Vec::with_capacity(specs.len());
        let mut deduped = Vec::new();
        let mut out = Vec::with_capacity(specs.len());
        for (i, spec) in specs.into_iter().enumerate() {
            let named = |e: ValidationError| {
                Error::Invalid(ValidationError::new(
                    format!("tasks[{i}].{}", e.field),
                    e.message,
                ))
            };
            let spec = as_task(spec, self.store.shards()).map_err(named)?;
            let known = self.known_handler(&spec.handler).await?;
            // Only a task with a dedup key is kept as given (it is written later, by its own
            // script); the bulk path clones nothing.
            let keep = (spec.dedup.is_some() || spec.after_task.is_some()).then(|| spec.clone());
            let job = self.check(spec, now, now, known).map_err(named)?;
            out.push((job.spec.id.clone(), Upserted::Created));
            match keep {
                Some(spec) => deduped.push((i, spec)),
                None => {
                    let first = job.first_firing(now);
                    jobs.push((job.spec, first));
                }
            }
        }
        self.store.insert_many(&jobs, now).await?;
        for (i, spec) in deduped {
            let (record, outcome) = match spec.after_task.is_some() {
                true => self.enqueue_after(spec).await?,
                false => {
                    let (record, outcome, _) = self.enqueue_deduped(spec).await?;
                    (record, outcome)
                }
            };
            out[i] = (record.spec.id, outcome);
        }
        Ok(out)
    }

    /// Read a job.
    pub async fn get(&self, id: &str) -> Result<JobRecord> {
        self.store
            .get_job(id)
            .await?
            .ok_or_else(|| Error::NotFound(id.to_string()))
    }

    /// Jobs after `after` (a cursor: the last id of the previous page): jobs in id order, then
    /// the one-shot tasks stored compact (in storage order; one changed, or whose run failed,
    /// between two pages moves to the jobs).
    pub async fn list(&self, after: Option<&str>, limit: usize) -> Result<Vec<JobRecord>> {
        let ids = self.store.list_ids(after, limit).await?;
        self.get_many(&ids).await
    }

    /// Delete a job. A firing not yet claimed never runs after this returns.
    pub async fn delete(&self, id: &str) -> Result<()> {
        let (state, _) = self.store.job_state(id).await?;
        if self.store.delete(id, state.next_ms).await? {
            Ok(())
        } else {
            Err(Error::NotFound(id.to_string()))
        }
    }

    /// Pause a job: it keeps its definition and fires nothing until resumed.
    pub async fn pause(&self, id: &str) -> Result<JobRecord> {
        let (state, _) = self.store.job_state(id).await?;
        let (_, status, _) = self.store.pause_resume(id, false, state.next_ms).await?;
        if status.is_none() {
            return Err(Error::NotFound(id.to_string()));
        }
        self.get(id).await
    }

    /// Resume a paused job. Its next firing is the first one after the pause began, so the
    /// firings the pause skipped meet the job's misfire policy: by default (`fire_once`) one
    /// run happens now and the rest are recorded as missed; `skip` runs none of them;
    /// `catch_up` runs each (bounded). A pause shorter than the misfire tolerance loses nothing.
    /// Returns the job with the status and next firing the resume wrote (that firing may be
    /// past, and already claimed by the time this returns).
    pub async fn resume(&self, id: &str) -> Result<JobRecord> {
        let record = self.get(id).await?;
        if record.status != JobStatus::Paused {
            return Ok(record);
        }
        let now = self.store.time_ms().await?;
        let job = record.spec.clone().validate(&Validation {
            now_ms: now,
            created_ms: record.created_ms,
            known_handler: None,
            max_params_bytes: usize::MAX,
        })?;
        let since = record.paused_ms.unwrap_or(now).min(now);
        let next = job
            .first_firing(since)
            .filter(|n| record.last_ms.is_none_or(|last| *n > last));
        let (_, status, next) = self.store.pause_resume(id, true, next).await?;
        let Some(status) = status else {
            return Err(Error::NotFound(id.to_string()));
        };
        // Status and next firing as the resume wrote them: the first firing after the pause
        // began may be past, and its owner may claim it (and move `next` on) before the read.
        let mut record = self.get(id).await?;
        record.status = status;
        record.next_ms = next;
        Ok(record)
    }

    /// Run a job once now, without moving its schedule. The job's overlap policy applies.
    /// Returns the firing id of the run.
    pub async fn trigger(&self, id: &str) -> Result<String> {
        self.store
            .trigger(id)
            .await?
            .ok_or_else(|| Error::NotFound(id.to_string()))
    }

    /// Cancel what job `id` has in progress, in one atomic step: its running firings are
    /// told to stop (on whichever node runs them) and recorded `cancelled`; attempts queued
    /// for a retry, and a one-shot job's pending instant, are removed and recorded
    /// `cancelled`. A cancelled firing is never retried, not even when its node dies before it
    /// records the outcome. A recurring job's next scheduled firing is left alone (pause
    /// the job for that). [`Cancelled::is_empty`] when there was nothing to cancel;
    /// [`Error::NotFound`] when there is no such job.
    pub async fn cancel(&self, id: &str) -> Result<Cancelled> {
        crate::job::validate_id(id)?;
        match self.store.cancel(id).await? {
            CancelReply::Missing => Err(Error::NotFound(id.to_string())),
            CancelReply::Nothing => Ok(Cancelled::default()),
            CancelReply::Cancelled {
                stopping,
                cancelled,
            } => Ok(Cancelled {
                stopping,
                cancelled,
            }),
        }
    }

    /// A job's dead letters (firings that used up their attempts), newest first.
    pub async fn dead_letters(&self, id: &str, limit: usize) -> Result<Vec<DeadLetter>> {
        self.store.dead_letters(id, limit).await
    }

    /// Queue dead letters again, as attempt 1 with their firing ids: one (`firing`) or all.
    /// Returns how many were queued.
    pub async fn replay_dead(&self, id: &str, firing: Option<&str>) -> Result<u64> {
        self.store
            .dead_op(id, true, firing)
            .await?
            .ok_or_else(|| Error::NotFound(id.to_string()))
    }

    /// Drop dead letters: one (`firing`) or all. Returns how many were dropped.
    pub async fn purge_dead(&self, id: &str, firing: Option<&str>) -> Result<u64> {
        Ok(self.store.dead_op(id, false, firing).await?.unwrap_or(0))
    }

    /// A job's most recent runs, newest first.
    pub async fn runs(&self, id: &str, limit: usize) -> Result<Vec<RunRecord>> {
        self.store.runs(id, limit).await
    }

    /// A job's ledger of what did not run, newest first: one record per instant, or range
    /// of instants, that was due and did not run, with its reason. Kept as the run history
    /// is (`node.history_limit` records, `node.history_max_age`).
    pub async fn skips(&self, id: &str, limit: usize) -> Result<Vec<SkipRecord>> {
        self.store.skips(id, limit).await
    }

    /// The run of a job in progress now, from its lease (None when none runs).
    pub async fn running(&self, id: &str) -> Result<Option<RunningLease>> {
        self.store.active_lease(id).await
    }
    /// Read a job, or `None` when there is no such job.
    pub async fn find(&self, id: &str) -> Result<Option<JobRecord>> {
        self.store.get_job(id).await
    }

    /// A page of job ids after `after` (a cursor: the last id of the previous page), in the
    /// order of [`Client::list`]: fewer than `limit` means the listing ended. Read the jobs
    /// with [`Client::get_many`].
    pub async fn list_ids(&self, after: Option<&str>, limit: usize) -> Result<Vec<String>> {
        self.store.list_ids(after, limit).await
    }

    /// Read the jobs of `ids` in one round trip per shard, in order; a job that does not exist
    /// (deleted since its id was listed) is left out.
    pub async fn get_many(&self, ids: &[String]) -> Result<Vec<JobRecord>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.store.get_jobs(ids).await
    }

    /// For each job id, in order: the named fields of its record as stored (`status`, `runs`,
    /// `failures`, `missed`, `skipped`, `dead`, `triggered`, `version`, ...; `None` where
    /// absent) and the length of its dead-letter list. One round trip per shard, for tools
    /// that sum counters over many jobs without decoding their specs. A one-shot task stored
    /// compact reads as its record would.
    pub async fn job_fields(
        &self,
        ids: &[String],
        fields: &[&str],
    ) -> Result<(Vec<Vec<Option<String>>>, Vec<u64>)> {
        if ids.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        self.store.job_fields(ids, fields).await
    }

    /// The last time a node found that Redis lost keyfire's data, within the hour it is
    /// kept ([`crate::DATA_LOSS_SHOWN`]), unless an operator acknowledged it.
    pub async fn data_loss(&self) -> Result<Option<crate::DataLoss>> {
        self.store.data_loss().await
    }

    /// Acknowledge the recorded data loss: `/readyz` and `keyfire doctor` stop showing it.
    /// Whether one was recorded.
    pub async fn ack_data_loss(&self) -> Result<bool> {
        self.store.ack_data_loss().await
    }

    /// Redis's clock, in ms: the clock every due decision is taken by.
    pub async fn time_ms(&self) -> Result<i64> {
        self.store.time_ms().await
    }

    /// Redis answers `PING`.
    pub async fn ping(&self) -> Result<()> {
        self.store.ping().await
    }

    /// Jobs (one-shot tasks included), firings due by `now_ms` (Redis time, see
    /// [`Client::time_ms`]), runs in progress and firings queued for another attempt, summed
    /// over the shards.
    pub async fn totals(&self, now_ms: i64) -> Result<Totals> {
        self.store.totals(now_ms).await
    }

    /// The nodes whose heartbeat is within `node_ttl_ms` of Redis's clock, with their last
    /// heartbeat and what they announced.
    pub async fn live_nodes(&self, node_ttl_ms: i64) -> Result<Vec<LiveNode>> {
        self.store.live_nodes(node_ttl_ms).await
    }

    /// The `notify-keyspace-events` setting of the server behind the client's connection;
    /// `None` where `CONFIG` is not available (a managed service: nodes check the events with
    /// a probe key at start). See [`crate::inspect::has_expired_events`].
    pub async fn notify_flags(&self) -> Result<Option<String>> {
        self.store.notify_flags().await
    }

    /// Each master's memory against its `maxmemory` (`INFO memory`), by address.
    pub async fn memory(&self) -> Result<Vec<ServerMemory>> {
        self.store.memory().await
    }

    /// Redis's clock (ms) and, per shard in order, the instant (ms) of the earliest firing no
    /// node has claimed yet (`None`: the shard has none). `now - instant` is how overdue it is.
    pub async fn due_heads(&self) -> Result<(i64, Vec<Option<i64>>)> {
        self.store.due_heads().await
    }
}

fn unknown_calendar(i: usize, name: &str) -> Error {
    Error::Invalid(ValidationError::new(
        format!("exclude[{i}]"),
        format!("unknown calendar '{name}' (create it first: PUT /v1/calendars/{name})"),
    ))
}
