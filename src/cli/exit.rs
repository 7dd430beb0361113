//! How `keyfire serve` and `keyfire dev` end when they cannot start (or run): one line on
//! stderr, `error: <what failed>: <what to set>`, and an exit code that says which part of
//! the environment is at fault, so that a supervisor or a script can tell them apart.
//!
//! The class comes from the error's type (keyfire's [`Error`] variants, the Redis error's
//! kind, [`BindError`], the testkit's `StartError` for `keyfire dev`), never from its text.

use std::error::Error as StdError;

use keyfire::RedisError;
use keyfire::error::Error;
#[cfg(feature = "lab")]
use keyfire_testkit::StartError;

use crate::api::BindError;

/// The exit codes of `keyfire serve` and `keyfire dev`. Stable: scripts and supervisors
/// match on them. (0: stopped by SIGINT or SIGTERM, after draining.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Anything not below.
    Failure = 1,
    /// Bad usage or settings: an impossible or unknown setting, a config file missing,
    /// unreadable or not TOML, a declared job that is invalid. (clap's usage errors are 2 too.)
    Config = 2,
    /// Redis unreachable, or not ready (loading, cluster down), or `dev`'s redis-server
    /// could not be run.
    RedisUnreachable = 3,
    /// Redis refused the login or a command's permission (`WRONGPASS`, `NOAUTH`, `NOPERM`).
    RedisRefused = 4,
    /// Redis answers but is not fit for keyfire: its setup (expired events, key layout),
    /// a replica instead of a master, data it cannot read.
    RedisUnsuitable = 5,
    /// `api.listen` is taken, or may not be listened on.
    Bind = 6,
    /// A directory keyfire needs cannot be made or written (`dev`'s Redis under `TMPDIR`).
    Filesystem = 7,
}

impl Exit {
    /// Every code, in order.
    pub const ALL: [Exit; 7] = [
        Exit::Failure,
        Exit::Config,
        Exit::RedisUnreachable,
        Exit::RedisRefused,
        Exit::RedisUnsuitable,
        Exit::Bind,
        Exit::Filesystem,
    ];

    /// The process's exit status.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// What the code means, as `--help` and docs/operations.md say it.
    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Failure => "any other failure",
            Exit::Config => "bad usage or settings (a setting, the --config file, a declared job)",
            Exit::RedisUnreachable => {
                "Redis unreachable or not ready (dev: redis-server would not run)"
            }
            Exit::RedisRefused => {
                "Redis refused the credentials or a permission (WRONGPASS, NOAUTH, NOPERM)"
            }
            Exit::RedisUnsuitable => {
                "Redis not fit for keyfire (expired events, key layout, a replica)"
            }
            Exit::Bind => "api.listen is taken or may not be listened on",
            Exit::Filesystem => "a needed directory cannot be written (dev: under TMPDIR)",
        }
    }
}

/// The `Exit codes:` list of `keyfire serve --help` and `keyfire dev --help`; a test checks it
/// against [`Exit::meaning`] and docs/operations.md.
pub const HELP: &str = "\
Exit codes:
  0  stopped by SIGINT or SIGTERM, after draining
  1  any other failure
  2  bad usage or settings (a setting, the --config file, a declared job)
  3  Redis unreachable or not ready (dev: redis-server would not run)
  4  Redis refused the credentials or a permission (WRONGPASS, NOAUTH, NOPERM)
  5  Redis not fit for keyfire (expired events, key layout, a replica)
  6  api.listen is taken or may not be listened on
  7  a needed directory cannot be written (dev: under TMPDIR)
Each failure prints one line on stderr: `error: <what failed>: <what to set>`.";

/// Hint for a Redis that does not answer.
const UNREACHABLE: &str = "start Redis there, or set redis.url or KEYFIRE__REDIS__URL (redis.nodes or KEYFIRE__REDIS__NODES in sentinel and cluster modes) to a server that answers";
/// Hint for refused credentials.
const AUTH: &str = "set redis.username and redis.password (KEYFIRE__REDIS__USERNAME, KEYFIRE__REDIS__PASSWORD), or the URL's credentials, to a user Redis accepts";
/// [`AUTH`] after a message that names the settings.
const AUTH_FROM_ENV: &str =
    "from the environment: KEYFIRE__REDIS__USERNAME, KEYFIRE__REDIS__PASSWORD";
/// Hint for a missing permission.
const NOPERM: &str = "give the user keyfire's ACL rules (redis/keyfire.acl), or set redis.username (KEYFIRE__REDIS__USERNAME) to a user that has them";

/// The exit code of a failed start, and the line to print after `error: `.
pub fn describe(err: &anyhow::Error) -> (Exit, String) {
    let (exit, hint) = err
        .chain()
        .find_map(class_of)
        .unwrap_or((Exit::Failure, None));
    let mut line = one_line(err);
    // The connection's own error names the settings already (see `Access::connect_error`).
    let hint = match hint {
        Some(AUTH) if line.contains("redis.password") => Some(AUTH_FROM_ENV),
        other => other,
    };
    if let Some(hint) = hint {
        line.push_str(": ");
        line.push_str(hint);
    }
    (exit, line)
}

/// The exit code of `err` (see [`describe`]).
pub fn classify(err: &anyhow::Error) -> Exit {
    describe(err).0
}

/// The class of one error of a chain, with the hint to add when its text has none; None when
/// its type says nothing (the next in the chain may).
fn class_of(e: &(dyn StdError + 'static)) -> Option<(Exit, Option<&'static str>)> {
    if let Some(e) = e.downcast_ref::<Error>() {
        return Some(of_keyfire(e));
    }
    if let Some(e) = e.downcast_ref::<BindError>() {
        return Some(match e {
            BindError::Config(e) => of_keyfire(e),
            BindError::Listen { .. } => (Exit::Bind, None),
        });
    }
    if let Some(e) = e.downcast_ref::<RedisError>() {
        return Some(of_redis(e));
    }
    of_testkit(e)
}

/// `keyfire dev`: the testkit's redis-server could not be started.
#[cfg(feature = "lab")]
fn of_testkit(e: &(dyn StdError + 'static)) -> Option<(Exit, Option<&'static str>)> {
    let start = match e.downcast_ref::<std::io::Error>() {
        Some(io) => StartError::of(io),
        None => e.downcast_ref::<StartError>(),
    };
    match start? {
        StartError::Dir { .. } => Some((Exit::Filesystem, None)),
        StartError::Program { .. } => Some((Exit::RedisUnreachable, None)),
    }
}

/// Without `keyfire dev` there is no testkit error to tell.
#[cfg(not(feature = "lab"))]
fn of_testkit(_: &(dyn StdError + 'static)) -> Option<(Exit, Option<&'static str>)> {
    None
}

fn of_keyfire(e: &Error) -> (Exit, Option<&'static str>) {
    match e {
        Error::Config(_) | Error::Invalid(_) => (Exit::Config, None),
        // Its message names the setting or the server's parameter to change.
        Error::Setup(_) => (Exit::RedisUnsuitable, None),
        Error::Corrupt(_) => (
            Exit::RedisUnsuitable,
            Some(
                "the keys under redis.prefix hold data keyfire cannot read: set redis.prefix (KEYFIRE__REDIS__PREFIX) to keys of keyfire's own",
            ),
        ),
        Error::Redis(e) | Error::RedisOp { source: e, .. } => of_redis(e),
        _ => (Exit::Failure, None),
    }
}

fn of_redis(e: &RedisError) -> (Exit, Option<&'static str>) {
    if e.is_no_perm() {
        return (Exit::RedisRefused, Some(NOPERM));
    }
    if e.is_auth() {
        return (Exit::RedisRefused, Some(AUTH));
    }
    if e.is_transient() {
        return (Exit::RedisUnreachable, Some(UNREACHABLE));
    }
    if e.is_client_config() {
        return (Exit::Config, None);
    }
    if e.is_read_only() {
        return (
            Exit::RedisUnsuitable,
            Some("it is a replica: point redis.url (KEYFIRE__REDIS__URL) at the master"),
        );
    }
    if e.is_server_reply() {
        return (
            Exit::RedisUnsuitable,
            Some("run `keyfire doctor` against it for what to change"),
        );
    }
    (Exit::Failure, None)
}

/// The error and its causes on one line, each cause once: a cause whose text the line holds
/// already (a wrapper that prints its source) is left out, and a multi-line message (a TOML
/// parse error with its source excerpt) keeps its text lines, not the excerpt.
pub fn one_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        // keyfire's `Config` prints as `config: <message>`; the message names the setting.
        let text = match cause.downcast_ref::<Error>() {
            Some(Error::Config(message)) => flatten(message),
            _ => flatten(&cause.to_string()),
        };
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// A message's text lines joined into one: the first, then the rest after `: `, without the
/// lines of a source excerpt (`  |`, `1 | [redis`, `  |   ^`).
fn flatten(message: &str) -> String {
    let is_excerpt = |l: &str| {
        let rest = l.trim_start_matches(|c: char| c.is_ascii_digit() || c == ' ');
        rest.starts_with('|')
    };
    let mut lines = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !is_excerpt(l));
    let Some(first) = lines.next() else {
        return String::new();
    };
    let rest: Vec<&str> = lines.collect();
    if rest.is_empty() {
        first.to_string()
    } else {
        format!("{first}: {}", rest.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lists_every_code_with_its_meaning() {
        for exit in Exit::ALL {
            let line = format!("  {}  {}\n", exit.code(), exit.meaning());
            assert!(HELP.contains(&line), "{line:?} missing from HELP");
        }
    }

    #[test]
    fn a_toml_error_is_one_line_without_its_excerpt() {
        let text = "TOML parse error at line 1, column 7\n  |\n1 | [redis\n  |       ^\nunclosed table, expected `]`\n in bad.toml";
        assert_eq!(
            flatten(text),
            "TOML parse error at line 1, column 7: unclosed table, expected `]` in bad.toml"
        );
    }

    #[test]
    fn classes_come_from_types() {
        let io = |kind| RedisError::from(std::io::Error::from(kind));
        let refused = anyhow::Error::from(Error::redis_op(
            "connecting to 127.0.0.1:1",
            io(std::io::ErrorKind::ConnectionRefused),
        ));
        assert_eq!(classify(&refused), Exit::RedisUnreachable);
        let config = anyhow::Error::from(Error::Config("redis.shards: too many".into()));
        assert_eq!(classify(&config.context("config x")), Exit::Config);
        let setup = anyhow::Error::from(Error::Setup("notify-keyspace-events".into()));
        assert_eq!(classify(&setup), Exit::RedisUnsuitable);
        let bind = anyhow::Error::from(BindError::Listen {
            listen: "127.0.0.1:1".into(),
            source: std::io::ErrorKind::AddrInUse.into(),
        });
        assert_eq!(classify(&bind), Exit::Bind);
        assert_eq!(classify(&anyhow::anyhow!("other")), Exit::Failure);
    }

    #[cfg(feature = "lab")]
    #[test]
    fn a_redis_server_that_cannot_start_is_told_by_its_type() {
        let dir = anyhow::Error::from(std::io::Error::from(StartError::Dir {
            parent: "/nowhere".into(),
            source: std::io::ErrorKind::NotFound.into(),
        }));
        assert_eq!(classify(&dir), Exit::Filesystem);
    }
}
