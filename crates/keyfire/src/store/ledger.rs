//! The ledger of what did not run: per job, one record for each instant (or range of
//! instants) that was due and did not run, with its reason. Kept beside the run history
//! (`{tag}:skips:<id>`, a list, newest first), bounded as it is: at most
//! `node.history_limit` records, none older than `node.history_max_age`. Written by the
//! script that drops the instant, in the same step (`ledger_lib.lua`).

use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

use super::*;
use crate::error::{Error, Result};

/// How a job's ledger is bounded: as its run history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ledger {
    /// Records per job (`node.history_limit`).
    pub limit: usize,
    /// The oldest record shown, in ms (`node.history_max_age`); the list expires that long
    /// after its latest record.
    pub max_age_ms: i64,
}

impl Default for Ledger {
    fn default() -> Self {
        let node = crate::config::NodeSettings::default();
        Self {
            limit: node.history_limit,
            max_age_ms: node.history_max_age.as_millis() as i64,
        }
    }
}

impl Ledger {
    /// The ledger from a node's settings.
    pub fn of(node: &crate::config::NodeSettings) -> Self {
        Self {
            limit: node.history_limit,
            max_age_ms: node.history_max_age.as_millis() as i64,
        }
    }

    /// As the scripts take it: `<limit>|<max age ms>`.
    pub(crate) fn opts(&self) -> String {
        format!("{}|{}", self.limit.max(1), self.max_age_ms.max(1))
    }
}

/// Why a due instant did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Found later than the misfire tolerance under the `skip` misfire policy.
    Misfire,
    /// Found late with others under `fire_once`: one ran, these were merged into it.
    Merged,
    /// Found late under `catch_up`, beyond `catch_up_limit` (the newest ones ran).
    CatchUpLimit,
    /// The previous run still ran (overlap `forbid`).
    Overlap,
    /// Due while the job was paused.
    Paused,
    /// The job was deleted with this instant due and not yet run.
    Deleted,
    /// The job was changed with this instant due and not yet run (its schedule moved on).
    Updated,
    /// Runs still in progress could make up the job's `max_runs` (or it reached it).
    MaxRuns,
    /// A calendar the job names in `exclude` excludes this instant.
    Excluded,
    /// A reason this version does not know (written by a later one).
    #[serde(other)]
    Other,
}

impl SkipReason {
    /// The reason's code, as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Misfire => "misfire",
            Self::Merged => "merged",
            Self::CatchUpLimit => "catch_up_limit",
            Self::Overlap => "overlap",
            Self::Paused => "paused",
            Self::Deleted => "deleted",
            Self::Updated => "updated",
            Self::MaxRuns => "max_runs",
            Self::Excluded => "excluded",
            Self::Other => "other",
        }
    }
}

/// One record of the ledger: an instant, or a range of instants, that did not run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkipRecord {
    /// Why.
    pub reason: SkipReason,
    /// The first instant dropped (ms).
    pub first_ms: i64,
    /// The last instant dropped (ms); `first_ms` for one.
    pub last_ms: i64,
    /// How many instants (a range of a long outage is one record).
    pub count: u64,
    /// When it was recorded (ms, Redis time).
    pub at_ms: i64,
    /// What else is known: the run that still ran (`overlap`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A run in progress, read from its lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningLease {
    /// `<job id>:<instant ms>`.
    pub firing_id: String,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// When it was claimed (ms, Redis time).
    pub claimed_ms: i64,
    /// The node that holds it.
    pub node: String,
    /// When the lease runs out unless renewed (ms, Redis time).
    pub expiry_ms: i64,
}

impl Store {
    /// How skip records are bounded.
    pub fn ledger(&self) -> Ledger {
        self.ledger
    }

    /// A job's skip records, newest first, none older than the ledger's maximum age.
    pub async fn skips(&self, id: &str, limit: usize) -> Result<Vec<SkipRecord>> {
        let items: Vec<String> = self
            .conn
            .clone()
            .lrange(self.job_keys(id).skips(id), 0, limit as isize - 1)
            .await?;
        let now = self.time_ms().await?;
        let oldest = now - self.ledger.max_age_ms;
        let mut out = Vec::with_capacity(items.len());
        for s in &items {
            let r: SkipRecord = serde_json::from_str(s).map_err(Error::from)?;
            if r.at_ms >= oldest {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// The lease of a job's latest run while it is held (the run is in progress).
    pub async fn active_lease(&self, id: &str) -> Result<Option<RunningLease>> {
        let k = self.job_keys(id);
        let active: Option<String> = self.conn.clone().hget(k.job(id), "active").await?;
        let member = match active.filter(|m| !m.is_empty()) {
            Some(m) => m,
            // A compact task has no job hash: its lease is found by its firing id.
            None => {
                let Some(fid) = self.get_job(id).await?.and_then(|j| j.active) else {
                    return Ok(None);
                };
                let mut cursor = 0u64;
                let found = loop {
                    let (next, page): (u64, Vec<String>) = redis::cmd("ZSCAN")
                        .arg(k.running())
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(format!("{fid}|*"))
                        .arg("COUNT")
                        .arg(1000)
                        .query_async(&mut self.conn.clone())
                        .await?;
                    // Members and scores alternate.
                    let hit = page.into_iter().step_by(2).next();
                    cursor = next;
                    if hit.is_some() || cursor == 0 {
                        break hit;
                    }
                };
                match found {
                    Some(m) => m,
                    None => return Ok(None),
                }
            }
        };
        let expiry: Option<f64> = self.conn.clone().zscore(k.running(), &member).await?;
        let Some(expiry) = expiry else {
            return Ok(None);
        };
        let (fid, lease) = parse_lease_member(&member);
        let Some((attempt, claimed_ms, node)) = lease else {
            return Ok(None);
        };
        Ok(Some(RunningLease {
            firing_id: fid.to_string(),
            attempt,
            claimed_ms,
            node: node.to_string(),
            expiry_ms: expiry as i64,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_and_unknown_reasons_are_other() {
        let r: SkipRecord = serde_json::from_str(
            r#"{"reason":"catch_up_limit","first_ms":1,"last_ms":9,"count":9,"at_ms":10}"#,
        )
        .unwrap();
        assert_eq!(r.reason, SkipReason::CatchUpLimit);
        assert_eq!((r.first_ms, r.last_ms, r.count), (1, 9, 9));
        let r: SkipRecord = serde_json::from_str(
            r#"{"reason":"later","first_ms":1,"last_ms":1,"count":1,"at_ms":2,"detail":"x"}"#,
        )
        .unwrap();
        assert_eq!(r.reason, SkipReason::Other);
        assert_eq!(r.detail.as_deref(), Some("x"));
    }
}
