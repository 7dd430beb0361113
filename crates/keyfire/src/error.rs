//! The library's error type.

use crate::job::ValidationError;

/// Everything that can go wrong in keyfire's library code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bad input: the field it names is wrong. Nothing was written.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// The job does not exist.
    #[error("job '{0}' not found")]
    NotFound(String),
    /// A concurrent change won every retry of an optimistic update.
    #[error("job '{0}' changed concurrently; try again")]
    Conflict(String),
    /// A conditional update found the job at another version (0: it does not exist).
    #[error("job '{id}' is at version {actual}, not {expected}; read it again")]
    VersionMismatch {
        /// The job.
        id: String,
        /// The version the caller expected.
        expected: u64,
        /// The version stored.
        actual: u64,
    },
    /// Redis refused or the connection failed.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// A Redis operation failed; `op` says which (connecting to a named server, asking the
    /// sentinels for the master, reading the cluster's slots).
    #[error("redis: {op}: {source}")]
    RedisOp {
        /// What was being done, naming the server or setting involved.
        op: String,
        /// The error from Redis or the connection.
        #[source]
        source: redis::RedisError,
    },
    /// Redis is not set up the way keyfire needs (e.g. keyspace notifications).
    #[error("redis setup: {0}")]
    Setup(String),
    /// Stored data could not be decoded (written by an incompatible version?).
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
    /// Configuration could not be loaded.
    #[error("config: {0}")]
    Config(String),
    /// The limit key has no limit.
    #[error("limit '{0}' not found")]
    LimitNotFound(String),
    /// The delay-queue task does not exist (or was deleted).
    #[error("task '{0}' not found")]
    TaskNotFound(String),
    /// A delay-queue finish or touch whose reservation is no longer held: it expired and the
    /// task went back to ready (maybe to another consumer) or to the dead letters, or the token
    /// is wrong. The task was not acknowledged by this call.
    #[error("task '{0}': reservation lost (it expired and the task was handed on) or wrong token")]
    ReservationLost(String),
}

impl Error {
    /// A [`Error::RedisOp`]: `source` while doing `op`.
    pub fn redis_op(op: impl Into<String>, source: redis::RedisError) -> Self {
        Error::RedisOp {
            op: op.into(),
            source,
        }
    }

    /// The Redis error underneath, if this is one ([`Error::Redis`] or [`Error::RedisOp`]).
    pub fn redis_error(&self) -> Option<&redis::RedisError> {
        match self {
            Error::Redis(e) | Error::RedisOp { source: e, .. } => Some(e),
            _ => None,
        }
    }

    /// Redis refused a write because it is full: its memory reached `maxmemory`, and under
    /// `maxmemory-policy noeviction` (what keyfire needs) it answers writes with `OOM`. Nothing
    /// was written by the refused call; reads still work. Retrying helps only once memory is
    /// freed (tasks finished or deleted, records expired) or `maxmemory` raised.
    pub fn is_redis_full(&self) -> bool {
        self.redis_error().is_some_and(is_oom)
    }
}

/// Whether Redis answered `OOM`: a write refused at `maxmemory` (a script's refused write
/// keeps the code). redis-rs has no kind of its own for it, so the code is what tells; in a
/// pipeline the error holds each failed command's, and any one of them counts.
pub fn is_oom(e: &redis::RedisError) -> bool {
    e.code() == Some("OOM")
        || e.clone()
            .into_server_errors()
            .is_some_and(|errs| errs.iter().any(|(_, s)| s.code() == "OOM"))
}

/// Result with keyfire's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::Corrupt(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Redis error reply as the parser makes it.
    fn reply(text: &str) -> redis::RedisError {
        let v = redis::parse_redis_value(format!("-{text}\r\n").as_bytes()).unwrap();
        v.extract_error().unwrap_err()
    }

    #[test]
    fn oom_replies_are_redis_full_and_others_are_not() {
        let direct = reply("OOM command not allowed when used memory > 'maxmemory'.");
        assert!(Error::from(direct).is_redis_full());
        let script = reply(
            "OOM command not allowed when used memory > 'maxmemory'. script: 44ff8b, on @user_script:1.",
        );
        assert!(Error::redis_op("add", script).is_redis_full());
        assert!(!Error::from(reply("ERR something else")).is_redis_full());
        assert!(
            !Error::from(reply(
                "READONLY You can't write against a read only replica."
            ))
            .is_redis_full()
        );
        assert!(!Error::NotFound("j".into()).is_redis_full());
    }
}
