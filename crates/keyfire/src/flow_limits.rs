//! Flow control through the [`Client`]: set, read and lift per-key limits. A limit applies
//! to every firing whose job names its key (`limit_key`), or, for `http` jobs, whose target
//! host it is (`host:<host>`); every node learns of a change at once (the change channel).

use crate::client::Client;
use crate::error::{Error, Result};
use crate::job::{FlowLimitSpec, validate_limit_key};
use crate::store::FlowLimitStatus;

impl Client {
    /// Set (create or replace) a limit. A bound of 0, a key that is not a valid limit key,
    /// or neither bound given is refused with the field named, and nothing is written.
    pub async fn put_limit(&self, spec: FlowLimitSpec) -> Result<FlowLimitStatus> {
        spec.validate()?;
        self.store().put_limit(&spec).await?;
        self.limit(&spec.key).await
    }

    /// The limit of `key`, with what runs and waits under it now.
    pub async fn limit(&self, key: &str) -> Result<FlowLimitStatus> {
        validate_limit_key("key", key)?;
        self.store()
            .limit_status(key)
            .await?
            .ok_or_else(|| Error::LimitNotFound(key.to_string()))
    }

    /// Every limit, by key.
    pub async fn limits(&self) -> Result<Vec<FlowLimitStatus>> {
        self.store().limits().await
    }

    /// Lift the limit of `key`: firings held back by it run at their turn, unlimited.
    pub async fn delete_limit(&self, key: &str) -> Result<()> {
        validate_limit_key("key", key)?;
        if self.store().delete_limit(key).await? {
            Ok(())
        } else {
            Err(Error::LimitNotFound(key.to_string()))
        }
    }

    /// The firings held back under `key`, first in line first: (firing id, scheduled ms).
    pub async fn held_firings(&self, key: &str, limit: usize) -> Result<Vec<(String, i64)>> {
        validate_limit_key("key", key)?;
        self.store().held_firings(key, limit).await
    }
}
