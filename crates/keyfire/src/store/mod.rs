//! The only code that talks to Redis: key names ([`Keys`]), the scripts, typed replies.

#[macro_use]
mod scripts;
pub(crate) use scripts::script;

mod backfill;
mod calendars;
mod callbacks;
mod cancel;
mod conn;
mod fanin;
mod firings;
mod flow_limits;
mod jobs;
mod keys;
mod ledger;
mod nodes;
pub mod notify;
mod ops;
pub mod pubsub;
mod records;
mod scans;
mod shards;
mod stats;
mod tasks;

use std::collections::HashMap;
use std::sync::Arc;

pub use backfill::BackfillReply;
pub use callbacks::{CallbackFate, TakenCallback};
pub use cancel::{CancelReply, Renewal};
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use conn::{
    Conn, Mode, client_addr, data_client, parse_cluster_slots, redact_url, sentinel_client,
};
pub use fanin::{AfterReply, BatchStatus};
pub use flow_limits::{Acquired, FlowLimitStatus, Hold};
pub use jobs::Deduped;
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use keys::{
    CLUSTER_SLOTS, Keys, LimitKeys, Shards, TASK_BUCKETS, firing_id, parse_firing_id, slot_of,
    stable_hash, task_bucket,
};
pub use ledger::{Ledger, RunningLease, SkipReason, SkipRecord};
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use nodes::{DataLoss, Heartbeat};
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use ops::{LiveNode, Totals, parse_info, redis_time_ms, time_reply_ms};
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use pubsub::{Event, Payload, Subscription};
pub use records::*;
pub use scans::DueFrom;
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use stats::ServerMemory;

use crate::error::Result;

/// How long a shard stops waiting for its replicas after they fell short (see
/// `Store::replicate`).
pub const WAIT_BACKOFF: std::time::Duration = std::time::Duration::from_secs(5);

/// Default sentinel horizon: firings due within a minute hold a sentinel key.
pub const DEFAULT_SENTINEL_HORIZON_MS: i64 = 60_000;

/// The key-layout version this build writes for sharded data (more than one shard). Layout 1
/// (one shard under the meta tag) is the same as layout 2 with one shard, so data of one
/// shard keeps layout 1 and nodes of older builds can still run against it during an
/// upgrade.
pub const LAYOUT_VERSION: i64 = 2;

/// The key-layout versions this build understands.
pub const LAYOUTS_UNDERSTOOD: [i64; 2] = [1, 2];

/// Redis access for keyfire: a cheap-to-clone handle over one multiplexed connection.
#[derive(Clone)]
pub struct Store {
    conn: Conn,
    shards: Arc<Shards>,
    /// `redis.wait_replicas` and `redis.wait_timeout` (ms), when set.
    wait: Option<(u32, u64)>,
    /// Per shard tag: do not `WAIT` before this instant (the replicas fell short lately).
    wait_off: Arc<std::sync::Mutex<HashMap<String, std::time::Instant>>>,
    /// Only firings due within this many ms hold a sentinel key (see [`Store::promote`]).
    horizon_ms: i64,
    /// How many skip records a job's ledger keeps, and for how long (its run history's).
    ledger: Ledger,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("meta", self.shards.meta())
            .field("shards", &self.shards.len())
            .finish()
    }
}

impl Store {
    /// Connect as `redis` says (mode, addresses, TLS, ACL) and spread jobs over its shards.
    pub async fn open(redis: &crate::config::RedisSettings) -> Result<Self> {
        Ok(Self {
            conn: Conn::connect(redis).await?,
            shards: Arc::new(Shards::new(&redis.prefix, redis.shards as usize)),
            wait: (redis.wait_replicas > 0)
                .then_some((redis.wait_replicas, redis.wait_timeout.as_millis() as u64)),
            wait_off: Arc::default(),
            horizon_ms: DEFAULT_SENTINEL_HORIZON_MS,
            ledger: Ledger::default(),
        }
        .with_sentinel_horizon(redis.sentinel_horizon))
    }

    /// Connect to the standalone server at `url` and use keys under `prefix`, in one shard.
    pub async fn connect(url: &str, prefix: &str) -> Result<Self> {
        let redis = crate::config::RedisSettings {
            url: url.to_string(),
            prefix: prefix.to_string(),
            ..Default::default()
        };
        Self::open(&redis).await
    }

    /// Give only firings due within `horizon` a sentinel key; later ones live in the due ZSET
    /// alone until [`Store::promote`] gives them one.
    pub fn with_sentinel_horizon(mut self, horizon: std::time::Duration) -> Self {
        self.horizon_ms = (horizon.as_millis() as i64).max(1);
        self
    }

    /// Keep skip records as the run history is kept: `node.history_limit` per job, for
    /// `node.history_max_age` (see [`Ledger`]).
    pub fn with_ledger(mut self, ledger: Ledger) -> Self {
        self.ledger = ledger;
        self
    }

    /// Spread jobs over `n` shards (see [`Shards`]).
    pub fn with_shards(mut self, n: usize) -> Self {
        let prefix = self
            .shards
            .meta()
            .tag()
            .trim_matches(['{', '}'])
            .to_string();
        self.shards = Arc::new(Shards::new(&prefix, n));
        self
    }

    /// The meta key names (what belongs to no job: membership, handlers, changes, queue).
    pub fn keys(&self) -> &Keys {
        self.shards.meta()
    }

    /// The shards and their key names.
    pub fn shards(&self) -> &Shards {
        &self.shards
    }

    /// The key names of the shard a job lives on.
    pub fn job_keys(&self, job_id: &str) -> &Keys {
        self.shards.for_job(job_id)
    }

    /// A connection for commands this module has no method for (tests, tools).
    pub fn connection(&self) -> Conn {
        self.conn.clone()
    }

    /// Redis's clock, in ms.
    pub async fn time_ms(&self) -> Result<i64> {
        redis_time_ms(&mut self.conn.clone()).await
    }
}
