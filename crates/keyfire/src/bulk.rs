//! Pause and resume many jobs at once, chosen by handler or by id prefix: an operator's
//! action ("stop everything that bills"), built on the one-job [`Client::pause`] and
//! [`Client::resume`]. It reads the job index page by page when called, and costs nothing
//! while idle.

use std::collections::HashSet;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::job::{MAX_ID_LEN, ValidationError};
use crate::store::{JobRecord, JobStatus};

/// Job ids read per page of the scan.
const SCAN_PAGE: usize = 500;

/// Longest handler name a selector takes, in characters.
pub const MAX_HANDLER_LEN: usize = 200;

/// Which jobs a bulk pause or resume acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobSelector {
    /// Every job (one-shot tasks included) whose handler is this one.
    Handler(String),
    /// Every job whose id starts with this.
    IdPrefix(String),
}

impl JobSelector {
    /// Refuse a selector that names nothing: an empty handler or prefix (which would pick
    /// every job), or one that no job id or handler name can hold. The error names the field
    /// (`handler`, `id_prefix`).
    pub fn check(&self) -> Result<()> {
        let bad = |field: &str, why: String| Err(Error::Invalid(ValidationError::new(field, why)));
        match self {
            JobSelector::Handler(h) => {
                if h.is_empty() {
                    return bad("handler", "must not be empty".into());
                }
                if h.chars().count() > MAX_HANDLER_LEN
                    || h.chars().any(|c| c.is_control() || c.is_whitespace())
                {
                    return bad(
                        "handler",
                        format!(
                            "is not a handler name (no spaces or control characters, at most \
                             {MAX_HANDLER_LEN} characters)"
                        ),
                    );
                }
            }
            JobSelector::IdPrefix(p) => {
                if p.is_empty() {
                    return bad(
                        "id_prefix",
                        "must not be empty (it would pick every job)".into(),
                    );
                }
                let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
                if p.len() > MAX_ID_LEN
                    || !p.chars().all(ok_char)
                    || !p.starts_with(|c: char| c.is_ascii_alphanumeric())
                {
                    return bad(
                        "id_prefix",
                        format!(
                            "no job id starts with '{p}': ids hold only letters, digits, '_', \
                             '.' and '-', start with a letter or digit, and are at most \
                             {MAX_ID_LEN} bytes"
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    /// Whether `job` is one this selector picks.
    pub fn matches(&self, job: &JobRecord) -> bool {
        match self {
            JobSelector::Handler(h) => job.spec.handler == *h,
            JobSelector::IdPrefix(p) => job.spec.id.starts_with(p.as_str()),
        }
    }
}

/// What a bulk pause or resume did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BulkOutcome {
    /// Jobs the selector picked, whatever their status.
    pub matched: u64,
    /// Those this call paused (or resumed): the others already were, or are finished.
    pub changed: u64,
}

impl Client {
    /// Pause every job `selector` picks that is active (see [`Client::pause`]). Reads the
    /// whole job index, a page at a time; a job created while it runs may be missed.
    pub async fn pause_matching(&self, selector: &JobSelector) -> Result<BulkOutcome> {
        self.bulk(selector, false).await
    }

    /// Resume every job `selector` picks that is paused (see [`Client::resume`]: each meets
    /// its misfire policy for the firings its pause skipped).
    pub async fn resume_matching(&self, selector: &JobSelector) -> Result<BulkOutcome> {
        self.bulk(selector, true).await
    }

    async fn bulk(&self, selector: &JobSelector, resume: bool) -> Result<BulkOutcome> {
        selector.check()?;
        // First the whole scan, then the changes: a paused compact task is expanded into the
        // jobs index, which the listing reads first, so changing while listing would meet
        // jobs twice.
        let picked = self.select(selector).await?;
        let wanted = if resume {
            JobStatus::Paused
        } else {
            JobStatus::Active
        };
        let mut outcome = BulkOutcome {
            matched: picked.len() as u64,
            changed: 0,
        };
        for (id, status) in picked {
            if status != wanted {
                continue;
            }
            let done = if resume {
                self.resume(&id).await
            } else {
                self.pause(&id).await
            };
            match done {
                Ok(after) if after.status != wanted => outcome.changed += 1,
                Ok(_) => {}
                // Deleted since it was read: nothing to do.
                Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(outcome)
    }

    /// The id and status of every job `selector` picks, each once.
    async fn select(&self, selector: &JobSelector) -> Result<Vec<(String, JobStatus)>> {
        let mut seen = HashSet::new();
        let mut picked = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let ids = self.list_ids(after.as_deref(), SCAN_PAGE).await?;
            let Some(last) = ids.last().cloned() else {
                break;
            };
            let read: Vec<String> = match selector {
                // Ids alone tell; read only the jobs that match.
                JobSelector::IdPrefix(p) => ids
                    .iter()
                    .filter(|id| id.starts_with(p.as_str()))
                    .cloned()
                    .collect(),
                JobSelector::Handler(_) => ids.clone(),
            };
            for job in self.get_many(&read).await? {
                if selector.matches(&job) && seen.insert(job.spec.id.clone()) {
                    picked.push((job.spec.id, job.status));
                }
            }
            if ids.len() < SCAN_PAGE {
                break;
            }
            after = Some(last);
        }
        Ok(picked)
    }
}
