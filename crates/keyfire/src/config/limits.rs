//! `[limits]`: bounds on the size of what callers hand keyfire.

use serde::{Deserialize, Serialize};

/// Bounds on the size of what callers hand keyfire (`[limits]`): a job's `params`, a
/// delay-queue task's payload. Not flow control ([`crate::FlowLimitSpec`]) nor history
/// retention ([`NodeSettings::history_limit`](super::NodeSettings::history_limit)).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InputLimits {
    /// Largest `params` of a job, serialized, in bytes.
    pub max_params_bytes: usize,
}

impl Default for InputLimits {
    fn default() -> Self {
        Self {
            max_params_bytes: 64 * 1024,
        }
    }
}
