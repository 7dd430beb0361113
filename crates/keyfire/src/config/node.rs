//! `[node]`: how a node takes part in the cluster: its runs at once, its heartbeat, sweeps,
//! leases and how much history it keeps.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// How a node takes part in the cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeSettings {
    /// This node's id; empty picks `<hostname>-<random>`.
    pub id: String,
    /// Runs this node executes at once; past it, it claims nothing new, except ahead of runs
    /// while they are short (docs/architecture.md, claims ahead of runs).
    pub max_concurrent_runs: usize,
    /// How often the node announces itself and re-reads Redis's clock.
    #[serde(with = "crate::job::duration_serde")]
    pub heartbeat_interval: Duration,
    /// A node not heard from for this long is no longer live.
    #[serde(with = "crate::job::duration_serde")]
    pub node_ttl: Duration,
    /// How often the sweeper looks for overdue firings.
    #[serde(with = "crate::job::duration_serde")]
    pub sweep_interval: Duration,
    /// How long after its instant (plus `node_ttl`) a firing is left to its owner before any
    /// node claims it.
    #[serde(with = "crate::job::duration_serde")]
    pub claim_grace: Duration,
    /// How far ahead a node arms local timers for the firings it owns.
    #[serde(with = "crate::job::duration_serde")]
    pub timer_horizon: Duration,
    /// How long before its instant a node may claim a scheduled firing it owns; it holds the
    /// run until the instant by Redis's clock. Claims of a second's firings then run in
    /// Redis before the instant rather than queueing after it (10,000 every-second cron
    /// jobs). A pause, update or delete within it of an instant no longer stops that
    /// instant; `0s` claims at the instant. At most 1 s.
    #[serde(with = "crate::job::duration_serde")]
    pub claim_ahead: Duration,
    /// On shutdown, how long running jobs may take to finish.
    #[serde(with = "crate::job::duration_serde")]
    pub drain_timeout: Duration,
    /// Lease of a run: renewed while it runs; a run whose node died is taken over after it.
    #[serde(with = "crate::job::duration_serde")]
    pub lease: Duration,
    /// Runs kept in each job's history.
    pub history_limit: usize,
    /// Oldest run record kept in a job's history.
    #[serde(with = "crate::job::duration_serde")]
    pub history_max_age: Duration,
    /// Dead letters kept per job.
    pub dead_letter_limit: usize,
    /// How long a one-shot task that succeeded is kept before it is cleaned up.
    #[serde(with = "crate::job::duration_serde")]
    pub task_retention: Duration,
}

impl Default for NodeSettings {
    fn default() -> Self {
        Self {
            id: String::new(),
            max_concurrent_runs: 256,
            heartbeat_interval: Duration::from_secs(1),
            node_ttl: Duration::from_secs(5),
            sweep_interval: Duration::from_secs(1),
            claim_grace: Duration::from_secs(2),
            timer_horizon: Duration::from_secs(3),
            claim_ahead: Duration::from_millis(50),
            drain_timeout: Duration::from_secs(30),
            lease: Duration::from_secs(30),
            history_limit: 100,
            history_max_age: Duration::from_secs(7 * 24 * 3600),
            dead_letter_limit: 1_000,
            task_retention: Duration::from_secs(24 * 3600),
        }
    }
}

impl NodeSettings {
    /// Refuse node settings that cannot work, naming the setting.
    pub fn check(&self) -> Result<()> {
        let bad = |name: &str, why: &str| Err(Error::Config(format!("{name}: {why}")));
        if self.max_concurrent_runs == 0 {
            return bad("node.max_concurrent_runs", "must be at least 1");
        }
        for (name, d) in [
            ("node.heartbeat_interval", self.heartbeat_interval),
            ("node.sweep_interval", self.sweep_interval),
            ("node.lease", self.lease),
        ] {
            if d.is_zero() {
                return bad(name, "must be greater than zero");
            }
        }
        if self.claim_ahead > Duration::from_secs(1) {
            return bad("node.claim_ahead", "must be at most 1s");
        }
        if self.node_ttl <= self.heartbeat_interval {
            return bad(
                "node.node_ttl",
                "must be longer than node.heartbeat_interval",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::config::tests::refusal;

    #[test]
    fn a_claim_lead_past_a_second_is_refused_by_name() {
        let e = refusal(|s| s.node.claim_ahead = Duration::from_millis(1_001));
        assert!(
            e.contains("node.claim_ahead") && e.contains("at most 1s"),
            "{e}"
        );
        // Off and the largest lead are fine.
        for ms in [0, 1_000] {
            let mut s = crate::config::Settings::default();
            s.node.claim_ahead = Duration::from_millis(ms);
            s.check().unwrap();
        }
    }
}
