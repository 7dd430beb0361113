//! How the scheduler model's steps and states read in a counterexample's trace.

use std::fmt;

use super::{State, Step, Why};
use crate::Summary;

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Step::Tick => write!(f, "tick (heartbeat.lua and renew.lua by the live nodes)"),
            Step::Claim(n, x) => write!(f, "claim.lua: node {n} claims firing {x}"),
            Step::ClaimRetry(n, x) => write!(f, "claim_retry.lua: node {n}, firing {x}"),
            Step::HandlerEnds(n, x, ok) => write!(
                f,
                "node {n}'s handler of firing {x} {}",
                if ok { "succeeds" } else { "fails" }
            ),
            Step::Complete(n, x) => write!(f, "complete.lua: node {n}, firing {x}"),
            Step::Recover(n, x, why) => write!(
                f,
                "recover.lua: node {n} takes firing {x} over ({})",
                match why {
                    Why::Expired => "lease expired",
                    Why::Left => "holder left the live set",
                    Why::Own => "its own, handed over",
                }
            ),
            Step::Crash(n) => write!(f, "node {n} crashes"),
            Step::Restart(n) => write!(f, "node {n} restarts (heartbeat.lua)"),
            Step::Pause(n) => write!(f, "node {n} is frozen"),
            Step::Resume(n) => write!(f, "node {n} wakes"),
            Step::RedisRestart => write!(f, "Redis restarts from its AOF (last tick lost)"),
            Step::Replicate => write!(f, "the replica catches up"),
            Step::Failover => write!(f, "Redis fails over to its replica"),
        }
    }
}

impl Summary for State {
    fn summary(&self) -> String {
        let mut out = format!("t={} redis[", self.now);
        for (i, f) in self.data.firings.iter().enumerate() {
            out.push_str(&format!("f{i}:"));
            if f.due {
                out.push_str("due");
            }
            if let Some(l) = f.lease {
                out.push_str(&format!(
                    " lease(a{} n{} claimed {} exp {})",
                    l.attempt, l.node, l.claimed, l.expiry
                ));
            }
            if let Some(a) = f.retry {
                out.push_str(&format!(" retry(a{a})"));
            }
            if !f.records.is_empty() {
                out.push_str(&format!(" runs{:?}", f.records));
            }
            if f.dead {
                out.push_str(" dead");
            }
            out.push_str("; ");
        }
        out.push_str(&format!("seen {:?}]", self.data.seen));
        for (i, n) in self.nodes.iter().enumerate() {
            out.push_str(&format!(" node{i}["));
            if !n.up {
                out.push_str("down");
            } else {
                if n.paused {
                    out.push_str("frozen ");
                }
                if n.fenced {
                    out.push_str("fenced ");
                }
                out.push_str(&format!("beat {}", n.last_beat));
                for (f, r) in n.runs.iter().enumerate() {
                    if let Some(r) = r {
                        out.push_str(&format!(" f{f}:{r:?}"));
                    }
                }
            }
            out.push(']');
        }
        out
    }
}
