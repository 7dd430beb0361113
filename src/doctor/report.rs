//! What doctor found, as a report per deployment.

use serde::Serialize;

use keyfire::config::RedisMode as Mode;

use super::*;

/// Everything doctor found about one Redis, or about the masters of a Sentinel or Cluster
/// deployment.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The Redis URL (standalone) or the addresses of `redis.nodes`, passwords hidden.
    pub redis: String,
    /// How keyfire reaches Redis (`redis.mode`).
    pub mode: Mode,
    /// The key prefix checked.
    pub prefix: String,
    /// `redis.shards` of the settings (absent when a bare URL was checked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<u32>,
    /// Sentinel and cluster mode: the masters checked (`host:port`), as the findings' `server`
    /// names them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<String>,
    /// True when no check failed (warnings allowed).
    pub ok: bool,
    /// How many checks came out ok, warn and fail.
    pub summary: Summary,
    /// The findings: a `connection` finding first; in sentinel and cluster mode the
    /// deployment's findings (no `server`), then each master's.
    pub findings: Vec<Finding>,
}

/// Counts by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Checks that passed.
    pub ok: usize,
    /// Warnings.
    pub warn: usize,
    /// Failures.
    pub fail: usize,
}

impl Report {
    pub(crate) fn new(redis: String, prefix: &str, findings: Vec<Finding>) -> Self {
        let mut summary = Summary::default();
        for f in &findings {
            match f.status {
                Status::Ok => summary.ok += 1,
                Status::Warn => summary.warn += 1,
                Status::Fail => summary.fail += 1,
            }
        }
        Self {
            redis,
            mode: Mode::Standalone,
            prefix: prefix.to_string(),
            shards: None,
            servers: Vec::new(),
            ok: summary.fail == 0,
            summary,
            findings,
        }
    }

    /// The finding of one check (the first, when several servers have one).
    pub fn finding(&self, check: &str) -> Option<&Finding> {
        self.findings.iter().find(|f| f.check == check)
    }

    /// The findings about `server` (`None`: about the deployment, or everything in
    /// standalone mode), in order.
    pub fn findings_on<'a>(&'a self, server: Option<&'a str>) -> impl Iterator<Item = &'a Finding> {
        self.findings
            .iter()
            .filter(move |f| f.server.as_deref() == server)
    }
}
