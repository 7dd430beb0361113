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
    Redis(RedisError),
    /// A Redis operation failed; `op` says which (connecting to a named server, asking the
    /// sentinels for the master, reading the cluster's slots).
    #[error("redis: {op}: {source}")]
    RedisOp {
        /// What was being done, naming the server or setting involved.
        op: String,
        /// The error from Redis or the connection.
        #[source]
        source: RedisError,
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
    /// The calendar does not exist.
    #[error("calendar '{0}' not found")]
    CalendarNotFound(String),
    /// The calendar is named in `exclude` by these jobs: it is not deleted.
    #[error("calendar '{name}' is in use by job(s) {}: remove it from their exclude first", jobs.join(", "))]
    CalendarInUse {
        /// The calendar.
        name: String,
        /// The jobs that name it (at most 100).
        jobs: Vec<String>,
    },
    /// The delay-queue task does not exist (or was deleted).
    #[error("task '{0}' not found")]
    TaskNotFound(String),
    /// A delay-queue finish or touch whose reservation is no longer held: it expired and the
    /// task went back to ready (maybe to another consumer) or to the dead letters, or the token
    /// is wrong. The task was not acknowledged by this call.
    #[error("task '{0}': reservation lost (it expired and the task was handed on) or wrong token")]
    ReservationLost(String),
    /// The topic's partition count is set already, to another count (or the topic has had
    /// tasks with its current one): a count is set once and never changed. Nothing was written.
    #[error(
        "topic '{topic}' has {partitions} partition(s): a count is set once, before the topic's \
         first task, and never changed (use a new topic for another count)"
    )]
    PartitionsSet {
        /// The topic.
        topic: String,
        /// Its partition count now.
        partitions: usize,
    },
}

impl Error {
    /// A [`Error::RedisOp`]: `source` while doing `op`.
    pub fn redis_op(op: impl Into<String>, source: impl Into<RedisError>) -> Self {
        Error::RedisOp {
            op: op.into(),
            source: source.into(),
        }
    }

    /// The Redis error underneath, if this is one ([`Error::Redis`] or [`Error::RedisOp`]).
    pub fn redis_error(&self) -> Option<&RedisError> {
        match self {
            Error::Redis(e) | Error::RedisOp { source: e, .. } => Some(e),
            _ => None,
        }
    }

    /// Redis refused a write because it is full: see [`RedisError::is_full`].
    pub fn is_redis_full(&self) -> bool {
        self.redis_error().is_some_and(RedisError::is_full)
    }

    /// Worth trying again later: see [`RedisError::is_transient`].
    pub fn is_transient(&self) -> bool {
        self.redis_error().is_some_and(RedisError::is_transient)
    }

    /// Redis could not be reached: see [`RedisError::is_connection`].
    pub fn is_connection(&self) -> bool {
        self.redis_error().is_some_and(RedisError::is_connection)
    }
}

/// An error from Redis or from the connection to it. Its text is the client's; the questions
/// below tell the cases a caller acts on apart, so keyfire's API does not depend on the Redis
/// client it is built on.
#[derive(Debug, Clone)]
pub struct RedisError(redis::RedisError);

impl std::fmt::Display for RedisError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for RedisError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// The Redis client's error, for keyfire's own `?`; not part of the API.
#[doc(hidden)]
impl From<redis::RedisError> for RedisError {
    fn from(e: redis::RedisError) -> Self {
        Self(e)
    }
}

/// The Redis client's error, for keyfire's own `?`; not part of the API.
#[doc(hidden)]
impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        Error::Redis(RedisError(e))
    }
}

impl From<std::io::Error> for RedisError {
    fn from(e: std::io::Error) -> Self {
        Self(e.into())
    }
}

impl RedisError {
    /// The error code of Redis's reply (`OOM`, `NOPERM`, `READONLY`, `WRONGTYPE`, ...), when
    /// Redis answered with an error.
    pub fn code(&self) -> Option<&str> {
        self.0.code()
    }

    /// Redis could not be reached or the connection broke: refused, timed out, dropped, or
    /// another I/O error. The command may or may not have run.
    pub fn is_connection(&self) -> bool {
        let e = &self.0;
        e.is_connection_refusal() || e.is_timeout() || e.is_connection_dropped() || e.is_io_error()
    }

    /// Worth trying again later, unchanged: the connection failed ([`RedisError::is_connection`])
    /// or Redis is between states (loading its data, a failover, a cluster resharding, no
    /// master known to the sentinels yet).
    pub fn is_transient(&self) -> bool {
        use redis::{ErrorKind, ServerErrorKind};
        self.is_connection()
            || matches!(
                self.0.kind(),
                ErrorKind::ClusterConnectionNotFound
                    | ErrorKind::MasterNameNotFoundBySentinel
                    | ErrorKind::NoValidReplicasFoundBySentinel
                    | ErrorKind::Server(
                        ServerErrorKind::BusyLoading
                            | ServerErrorKind::MasterDown
                            | ServerErrorKind::ClusterDown
                            | ServerErrorKind::TryAgain
                    )
            )
    }

    /// Redis refused a write because it is full: its memory reached `maxmemory`, and under
    /// `maxmemory-policy noeviction` (what keyfire needs) it answers writes with `OOM`.
    /// Nothing was written by the refused call; reads still work. Retrying helps only once
    /// memory is freed (tasks finished or deleted, records expired) or `maxmemory` raised.
    pub fn is_full(&self) -> bool {
        is_oom(&self.0)
    }

    /// Redis refused the credentials (`WRONGPASS`, `NOAUTH`): `redis.username` and
    /// `redis.password` (or the URL's) are wrong or missing.
    pub fn is_auth(&self) -> bool {
        matches!(self.0.kind(), redis::ErrorKind::AuthenticationFailed)
            || matches!(self.code(), Some("WRONGPASS" | "NOAUTH"))
    }

    /// The ACL user may not run a command or touch a key (`NOPERM`).
    pub fn is_no_perm(&self) -> bool {
        matches!(
            self.0.kind(),
            redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm)
        ) || self.code() == Some("NOPERM")
    }

    /// The server is a replica and refused a write (`READONLY`).
    pub fn is_read_only(&self) -> bool {
        matches!(
            self.0.kind(),
            redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
        ) || self.code() == Some("READONLY")
    }

    /// The connection settings cannot work (no sentinel named, a TLS setup the client
    /// refuses): a matter of configuration, not of Redis's state.
    pub fn is_client_config(&self) -> bool {
        matches!(
            self.0.kind(),
            redis::ErrorKind::EmptySentinelList | redis::ErrorKind::InvalidClientConfig
        )
    }

    /// Redis answered with an error reply (or the server lacks a protocol keyfire needs), as
    /// opposed to the connection failing.
    pub fn is_server_reply(&self) -> bool {
        matches!(
            self.0.kind(),
            redis::ErrorKind::Server(_)
                | redis::ErrorKind::Extension
                | redis::ErrorKind::RESP3NotSupported
        )
    }

    /// The Redis client's error, for keyfire's own crates.
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn as_redis(&self) -> &redis::RedisError {
        &self.0
    }
}

/// Whether Redis answered `OOM`: a write refused at `maxmemory` (a script's refused write
/// keeps the code). redis-rs has no kind of its own for it, so the code is what tells; in a
/// pipeline the error holds each failed command's, and any one of them counts.
fn is_oom(e: &redis::RedisError) -> bool {
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
    fn only_oom_replies_are_redis_full() {
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
        let full = Error::from(reply(
            "OOM command not allowed when used memory > 'maxmemory'.",
        ));
        // The text stays the server's.
        assert!(full.to_string().contains("maxmemory"), "{full}");
        assert!(!full.is_transient() && !full.is_connection());
    }

    #[test]
    fn redis_errors_answer_what_a_caller_acts_on() {
        let refused = Error::redis_op(
            "connecting",
            std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        );
        assert!(
            refused.is_connection() && refused.is_transient(),
            "{refused:?}"
        );
        let r = |text: &str| RedisError::from(reply(text));
        assert!(r("LOADING Redis is loading the dataset in memory").is_transient());
        assert!(!r("LOADING Redis is loading the dataset in memory").is_connection());
        assert!(r("WRONGPASS invalid username-password pair").is_auth());
        assert!(r("NOPERM this user has no permissions").is_no_perm());
        assert!(r("READONLY You can't write against a read only replica.").is_read_only());
        let other = r("WRONGTYPE Operation against a key holding the wrong kind of value");
        assert_eq!(other.code(), Some("WRONGTYPE"));
        assert!(other.is_server_reply() && !other.is_transient() && !other.is_full());
        assert!(other.to_string().contains("wrong kind of value"), "{other}");
    }
}
