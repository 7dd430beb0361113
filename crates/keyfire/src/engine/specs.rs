//! The spec cache: each job's validated spec at its current version, loaded on first use
//! (several in one round trip) and dropped when a change message says it changed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::context::{NodeCore, bump, bump_by};
use crate::job::{Calendar, Job, Validation};
use crate::store::StoredSpec;

/// A job's validated spec at one version.
pub(crate) struct CachedJob {
    pub(super) version: u64,
    pub(super) generation: u64,
    pub(super) job: Job,
    /// The flow-control key its firings ask (it limits them only if it has a limit).
    pub(super) limit_key: Option<String>,
    /// Read as a compact task (its record in a bucket; see `store::tasks`).
    pub(super) compact: bool,
    /// The calendars it names in `exclude`, as they were when it was read (a calendar
    /// change drops it from the cache). One that does not exist excludes nothing.
    pub(super) calendars: Vec<Arc<Calendar>>,
}

impl CachedJob {
    /// The calendar that excludes the instant `at_ms`, if one does.
    pub(super) fn excluded_by(&self, at_ms: i64) -> Option<&str> {
        self.calendars
            .iter()
            .find(|c| c.excludes(at_ms))
            .map(|c| c.name())
    }
}

type CalendarMap = Arc<HashMap<String, Arc<Calendar>>>;

/// Validated specs by job id, each replaced when its job's version changes.
///
/// Keyed by a hash of the job id, checked against the cached spec's id on every lookup: a
/// one-shot task's spec is cached when its timer is armed and taken out at its claim, and
/// keyed by its id that was a string allocated, hashed and compared per firing. Two ids with
/// the same hash only take each other's place (the other is read again).
pub(super) struct Specs {
    core: Arc<NodeCore>,
    map: Mutex<foldhash::HashMap<u64, Arc<CachedJob>>>,
    hasher: foldhash::fast::RandomState,
    /// Every calendar, read when a job that names one is first read after a change.
    calendars: Mutex<Option<CalendarMap>>,
}

impl Specs {
    pub(super) fn new(core: Arc<NodeCore>) -> Self {
        Self {
            core,
            map: Mutex::default(),
            hasher: Default::default(),
            calendars: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, foldhash::HashMap<u64, Arc<CachedJob>>> {
        self.map.lock().expect("spec cache lock")
    }

    fn key(&self, job_id: &str) -> u64 {
        use std::hash::BuildHasher;
        self.hasher.hash_one(job_id)
    }

    /// The cached spec of a job in `map`, if any; taken out of it when `claim` asks for a
    /// one-shot job's (see [`Specs::spec`]).
    fn found(
        &self,
        map: &mut foldhash::HashMap<u64, Arc<CachedJob>>,
        job_id: &str,
        claim: bool,
    ) -> Option<Arc<CachedJob>> {
        use std::collections::hash_map::Entry;
        match map.entry(self.key(job_id)) {
            Entry::Occupied(e) if e.get().job.spec.id == job_id => {
                if claim && e.get().job.schedule.is_once() {
                    Some(e.remove())
                } else {
                    Some(e.get().clone())
                }
            }
            _ => None,
        }
    }

    /// The cached spec of a job, if any.
    pub(super) fn get(&self, job_id: &str) -> Option<Arc<CachedJob>> {
        self.found(&mut self.lock(), job_id, false)
    }

    /// Whether a job's spec is cached.
    pub(super) fn contains(&self, job_id: &str) -> bool {
        self.get(job_id).is_some()
    }

    /// Validate a stored spec and cache it (a one-shot job's only when not read for its
    /// claim); None (and logged) when it no longer validates.
    fn insert(
        &self,
        job_id: &str,
        stored: StoredSpec,
        calendars: Option<&CalendarMap>,
        claim: bool,
    ) -> Option<Arc<CachedJob>> {
        let StoredSpec {
            version,
            generation,
            spec,
            created_ms,
            compact,
        } = stored;
        let job = spec.validate(&Validation {
            now_ms: created_ms,
            created_ms,
            known_handler: None,
            max_params_bytes: usize::MAX,
        });
        let job = match job {
            Ok(job) => job,
            Err(e) => {
                tracing::error!(job = job_id, error = %e, "stored job no longer validates; not firing it");
                return None;
            }
        };
        let calendars = job
            .spec
            .exclude
            .iter()
            .filter_map(|name| {
                let found = calendars.and_then(|m| m.get(name)).cloned();
                if found.is_none() {
                    tracing::warn!(job = job_id, calendar = %name, "job names a calendar that does not exist; it excludes nothing");
                }
                found
            })
            .collect();
        let cached = Arc::new(CachedJob {
            version,
            generation,
            limit_key: job.spec.effective_limit_key(),
            compact,
            calendars,
            job,
        });
        if claim && cached.job.schedule.is_once() {
            return Some(cached);
        }
        let key = self.key(job_id);
        let replaced = self.lock().insert(key, cached.clone());
        drop(replaced);
        Some(cached)
    }

    /// Drop a job's spec (it changed, was deleted, or will not fire again).
    pub(super) fn forget(&self, job_id: &str) {
        // Another id of the same hash would only be read again. Dropped after the lock.
        let key = self.key(job_id);
        let gone = self.lock().remove(&key);
        drop(gone);
    }

    /// Drop several jobs' specs.
    pub(super) fn forget_all<'a>(&self, job_ids: impl IntoIterator<Item = &'a str>) {
        let mut map = self.lock();
        for id in job_ids {
            map.remove(&self.key(id));
        }
    }

    /// Drop a job's spec if it is not at `version`.
    pub(super) fn forget_unless(&self, job_id: &str, version: u64) {
        let mut map = self.lock();
        let key = self.key(job_id);
        if map
            .get(&key)
            .is_some_and(|c| c.job.spec.id == job_id && c.version != version)
        {
            map.remove(&key);
        }
    }

    /// Drop every spec (change messages may have been lost), and the calendars.
    pub(super) fn clear(&self) {
        *self.calendars.lock().expect("calendar cache lock") = None;
        self.lock().clear();
    }

    /// A calendar changed: drop the calendars and the specs of the jobs that name any (they
    /// are read again, with the calendars as they are now, at their next claim).
    pub(super) fn calendars_changed(&self) {
        *self.calendars.lock().expect("calendar cache lock") = None;
        self.lock().retain(|_, c| c.job.spec.exclude.is_empty());
    }

    /// The calendars, when one of `specs` names any: read once after each change.
    async fn calendars_for<'a>(
        &self,
        mut specs: impl Iterator<Item = &'a StoredSpec>,
    ) -> crate::Result<Option<CalendarMap>> {
        if !specs.any(|s| !s.spec.exclude.is_empty()) {
            return Ok(None);
        }
        if let Some(c) = self.calendars.lock().expect("calendar cache lock").clone() {
            return Ok(Some(c));
        }
        let loaded: CalendarMap = Arc::new(self.core.store.loaded_calendars().await?);
        *self.calendars.lock().expect("calendar cache lock") = Some(loaded.clone());
        Ok(Some(loaded))
    }

    /// The validated spec of a job at its current version (cached by version), for its claim.
    /// A one-shot job's is taken out of the cache (read ahead with its timer, it waited
    /// there for this claim): its claim carries it to its run, and a claim of it again (a
    /// retry) reads it again. Dropped after the run instead, it was one more lookup in a map
    /// as large as the firings armed, a cache miss per firing.
    pub(super) async fn spec(&self, job_id: &str) -> crate::Result<Option<Arc<CachedJob>>> {
        if let Some(c) = self.found(&mut self.lock(), job_id, true) {
            return Ok(Some(c));
        }
        bump(&self.core.stats.specs_read);
        let Some(stored) = self.core.store.job_spec(job_id).await? else {
            return Ok(None);
        };
        let calendars = self.calendars_for(std::iter::once(&stored)).await?;
        Ok(self.insert(job_id, stored, calendars.as_ref(), true))
    }

    /// The specs of several jobs: cached ones from the cache, the others in one round trip.
    /// `claim`: read for their claims, the one-shot jobs' taken out of the cache (see
    /// [`Specs::spec`]); otherwise read ahead, all cached.
    pub(super) async fn specs(
        &self,
        job_ids: &[&str],
        claim: bool,
    ) -> crate::Result<Vec<Option<Arc<CachedJob>>>> {
        let mut out: Vec<Option<Arc<CachedJob>>> = {
            let mut map = self.lock();
            job_ids
                .iter()
                .map(|id| self.found(&mut map, id, claim))
                .collect()
        };
        let missing: Vec<&str> = job_ids
            .iter()
            .zip(&out)
            .filter(|(_, c)| c.is_none())
            .map(|(id, _)| *id)
            .collect();
        if missing.is_empty() {
            return Ok(out);
        }
        bump_by(&self.core.stats.specs_read, missing.len() as u64);
        let loaded = self.core.store.job_specs(&missing).await?;
        let calendars = self.calendars_for(loaded.iter().flatten()).await?;
        let mut loaded = loaded.into_iter();
        for (slot, id) in out.iter_mut().zip(job_ids) {
            if slot.is_none()
                && let Some(Some(stored)) = loaded.next()
            {
                *slot = self.insert(id, stored, calendars.as_ref(), claim);
            }
        }
        Ok(out)
    }
}
