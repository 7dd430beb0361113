//! The spec cache: each job's validated spec at its current version, loaded on first use
//! (several in one round trip) and dropped when a change message says it changed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::context::{NodeCore, bump, bump_by};
use crate::job::{Job, Validation};
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
}

/// Validated specs by job id, each replaced when its job's version changes.
pub(super) struct Specs {
    core: Arc<NodeCore>,
    map: Mutex<HashMap<String, Arc<CachedJob>>>,
}

impl Specs {
    pub(super) fn new(core: Arc<NodeCore>) -> Self {
        Self {
            core,
            map: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<CachedJob>>> {
        self.map.lock().expect("spec cache lock")
    }

    /// The cached spec of a job, if any.
    pub(super) fn get(&self, job_id: &str) -> Option<Arc<CachedJob>> {
        self.lock().get(job_id).cloned()
    }

    /// Whether a job's spec is cached.
    pub(super) fn contains(&self, job_id: &str) -> bool {
        self.lock().contains_key(job_id)
    }

    /// Validate a stored spec and cache it; None (and logged) when it no longer validates.
    pub(super) fn insert(&self, job_id: &str, stored: StoredSpec) -> Option<Arc<CachedJob>> {
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
        let cached = Arc::new(CachedJob {
            version,
            generation,
            limit_key: job.spec.effective_limit_key(),
            compact,
            job,
        });
        self.lock().insert(job_id.to_string(), cached.clone());
        Some(cached)
    }

    /// Drop a job's spec (it changed, was deleted, or will not fire again).
    pub(super) fn forget(&self, job_id: &str) {
        self.lock().remove(job_id);
    }

    /// Drop several jobs' specs.
    pub(super) fn forget_all<'a>(&self, job_ids: impl IntoIterator<Item = &'a str>) {
        let mut map = self.lock();
        for id in job_ids {
            map.remove(id);
        }
    }

    /// Drop a job's spec if it is not at `version`.
    pub(super) fn forget_unless(&self, job_id: &str, version: u64) {
        let mut map = self.lock();
        if map.get(job_id).is_some_and(|c| c.version != version) {
            map.remove(job_id);
        }
    }

    /// Drop every spec (change messages may have been lost).
    pub(super) fn clear(&self) {
        self.lock().clear();
    }

    /// The validated spec of a job at its current version (cached by version).
    pub(super) async fn spec(&self, job_id: &str) -> crate::Result<Option<Arc<CachedJob>>> {
        if let Some(c) = self.get(job_id) {
            return Ok(Some(c));
        }
        bump(&self.core.stats.specs_read);
        let Some(stored) = self.core.store.job_spec(job_id).await? else {
            return Ok(None);
        };
        Ok(self.insert(job_id, stored))
    }

    /// The specs of several jobs: cached ones from the cache, the others in one round trip.
    pub(super) async fn specs(
        &self,
        job_ids: &[&str],
    ) -> crate::Result<Vec<Option<Arc<CachedJob>>>> {
        let mut out: Vec<Option<Arc<CachedJob>>> = job_ids.iter().map(|id| self.get(id)).collect();
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
        let mut loaded = self.core.store.job_specs(&missing).await?.into_iter();
        for (slot, id) in out.iter_mut().zip(job_ids) {
            if slot.is_none()
                && let Some(Some(stored)) = loaded.next()
            {
                *slot = self.insert(id, stored);
            }
        }
        Ok(out)
    }
}
