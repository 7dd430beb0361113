//! `keyfire doctor`: does this Redis suit keyfire?
//!
//! Two steps, kept apart so tests can drive the second without a Redis: [`gather`] reads what
//! the checks need ([`Facts`]: `INFO`, `CONFIG GET`, `TIME`, the layout keys), and [`CHECKS`],
//! a table of pure functions, turns those facts into [`Finding`]s, each with a fix.
//! [`diagnose`] does both against a URL. [`diagnose_settings`] follows `redis.mode`: in
//! sentinel and cluster mode it connects as a node does ([`keyfire::inspect::Deployment`]), runs the per-server checks
//! on every master (each finding names its `server`), reads the layout from the meta tag's
//! master, and adds the deployment's own checks (replicas, the spread of the shards over the
//! masters, the sentinels' agreement). A check fails only where keyfire's guarantees break
//! (a firing lost, run twice, or data gone on restart); where keyfire still works but worse
//! (later events, no failover), it warns.

mod checks;
mod deploy;
mod gather;
mod report;

pub use checks::*;
pub use deploy::*;
pub use gather::*;
pub use report::*;

use std::collections::BTreeMap;

use serde::Serialize;

/// The oldest Redis major version keyfire supports.
pub const MIN_REDIS_MAJOR: u32 = 7;
/// `hz` at or above which blocking waits and the expire cycle are prompt enough.
pub const RECOMMENDED_HZ: u64 = 100;
/// Clock offset (ms) past which doctor warns.
pub const CLOCK_WARN_MS: i64 = 1_000;
/// Pub/sub output buffer limits of the shipped `redis.conf` (hard, soft), in bytes.
pub const PUBSUB_HARD: u64 = 64 << 20;
/// See [`PUBSUB_HARD`].
pub const PUBSUB_SOFT: u64 = 16 << 20;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fine.
    Ok,
    /// keyfire works, but worse than it could (later events, no failover, unchecked).
    Warn,
    /// A guarantee is at risk: doctor exits 1.
    Fail,
}

impl Status {
    /// `ok`, `WARN`, `FAIL`: failures shout in the human output.
    pub fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn => "WARN",
            Self::Fail => "FAIL",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The server (`host:port`) it is about, in sentinel and cluster mode; none for what is
    /// about the whole deployment (and for every finding in standalone mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The check's name (see [`CHECKS`]), such as `notifications`.
    pub check: &'static str,
    /// Its outcome.
    pub status: Status,
    /// What was found and why it matters.
    pub message: String,
    /// What to do about it (none when it is fine).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Finding {
    fn ok(check: &'static str, message: impl Into<String>) -> Self {
        Self {
            server: None,
            check,
            status: Status::Ok,
            message: message.into(),
            fix: None,
        }
    }

    fn warn(check: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            server: None,
            check,
            status: Status::Warn,
            message: message.into(),
            fix: Some(fix.into()),
        }
    }

    fn fail(check: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            server: None,
            check,
            status: Status::Fail,
            message: message.into(),
            fix: Some(fix.into()),
        }
    }

    /// The same finding, about `server`.
    fn on(mut self, server: &str) -> Self {
        self.server = Some(server.to_string());
        self
    }
}

/// Redis's clock against this host's, from the `TIME` sample with the shortest round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSample {
    /// Redis time minus this host's time at the middle of the round trip (ms): positive when
    /// Redis is ahead.
    pub offset_ms: i64,
    /// The round trip of that sample (ms); the offset is known to within half of it.
    pub rtt_ms: i64,
}

/// What doctor read from Redis. A value that could not be read is absent, and the matching
/// `*_error` says why.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// `INFO` fields (`redis_version`, `role`, `connected_slaves`, `aof_enabled`, …).
    pub info: BTreeMap<String, String>,
    /// Why `INFO` could not be read.
    pub info_error: Option<String>,
    /// `CONFIG GET` values by name.
    pub config: BTreeMap<String, String>,
    /// Why some `CONFIG GET` failed (managed Redis often renames or forbids `CONFIG`).
    pub config_error: Option<String>,
    /// Clock offset to Redis.
    pub clock: Option<ClockSample>,
    /// Why `TIME` failed.
    pub clock_error: Option<String>,
    /// The key prefix whose data is checked.
    pub prefix: String,
    /// The value of `{prefix}:layout`, `None` when there is no such key.
    pub layout: Option<String>,
    /// The value of `{prefix}:shards` (the shard count of layout 2), `None` when absent.
    pub shard_count: Option<String>,
    /// Why the layout key could not be read.
    pub layout_error: Option<String>,
    /// Jobs under the prefix (`ZCARD` of every shard's job index, plus its compact tasks).
    pub jobs: Option<u64>,
    /// The last data loss a node noticed (kept an hour unless acknowledged); `None` when
    /// none or not read.
    pub data_loss: Option<keyfire::DataLoss>,
    /// `redis.shards` of the settings, to compare with the stored shard count; `None`: not
    /// compared (a bare URL was checked).
    pub expected_shards: Option<u32>,
    /// The master (`host:port`) holding the meta tag, when there are several (cluster mode).
    pub meta_server: Option<String>,
    /// What the Redis user was refused (`NOPERM`) among the probes of what keyfire needs;
    /// `None` when not probed.
    pub acl_denied: Option<Vec<String>>,
    /// Settings read from `INFO` because `CONFIG GET` was refused (a managed Redis).
    pub from_info: Vec<&'static str>,
    /// Where `notify-keyspace-events` could not be read: the probe key's outcome, the ms its
    /// `expired` event took (`None`: it did not come within the bound), or why the probe
    /// failed. `None` when no probe was made.
    pub expiry_probe: Option<Result<Option<u64>, String>>,
}

impl Facts {
    fn info(&self, name: &str) -> Option<&str> {
        self.info.get(name).map(String::as_str)
    }

    fn config(&self, name: &str) -> Option<&str> {
        self.config.get(name).map(String::as_str)
    }

    /// A finding for a setting doctor could not read.
    fn unreadable(&self, check: &'static str, setting: &str) -> Finding {
        let why = self
            .config_error
            .as_deref()
            .unwrap_or("Redis did not list it");
        Finding::warn(
            check,
            format!("cannot check {setting} ({why}); INFO does not show it either"),
            format!(
                "check `{setting}` by hand (redis-cli CONFIG GET {setting}), or in a managed \
                 service's settings (its parameter group or console: see docs/operations.md, \
                 Managed Redis)"
            ),
        )
    }

    /// " (read from INFO: CONFIG is unavailable)" when `setting` was, else "".
    fn source_note(&self, setting: &str) -> &'static str {
        if self.from_info.contains(&setting) {
            " (read from INFO: CONFIG is unavailable)"
        } else {
            ""
        }
    }
}

/// What a check looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One server's version, settings and state: run on every master.
    Server,
    /// keyfire's data under the prefix: run once, on the master of the meta tag.
    Data,
}

/// A check: a name and a pure function of the [`Facts`].
#[derive(Debug, Clone, Copy)]
pub struct Check {
    /// Short name, shown in the output and used in `--json`.
    pub name: &'static str,
    /// What it looks at.
    pub about: &'static str,
    /// Whether it is about each server or about the data.
    pub scope: Scope,
    /// The verdict.
    pub eval: fn(&Facts) -> Finding,
}

/// Every check, in the order they are shown.
pub const CHECKS: &[Check] = &[
    Check {
        name: "version",
        about: "Redis version (keyfire needs 7 or newer)",
        scope: Scope::Server,
        eval: check_version,
    },
    Check {
        name: "notifications",
        about: "notify-keyspace-events emits expired key events (E and x)",
        scope: Scope::Server,
        eval: check_notifications,
    },
    Check {
        name: "eviction",
        about: "maxmemory-policy is noeviction",
        scope: Scope::Server,
        eval: check_eviction,
    },
    Check {
        name: "memory",
        about: "room left under maxmemory",
        scope: Scope::Server,
        eval: check_memory,
    },
    Check {
        name: "persistence",
        about: "AOF (or at least RDB) keeps jobs across a Redis restart",
        scope: Scope::Server,
        eval: check_persistence,
    },
    Check {
        name: "hz",
        about: "hz >= 100 for prompt expiry and blocking-command timeouts",
        scope: Scope::Server,
        eval: check_hz,
    },
    Check {
        name: "replication",
        about: "a master, and the state of its replicas",
        scope: Scope::Server,
        eval: check_replication,
    },
    Check {
        name: "clock",
        about: "this host's clock against Redis's TIME",
        scope: Scope::Server,
        eval: check_clock,
    },
    Check {
        name: "pubsub-buffer",
        about: "client-output-buffer-limit pubsub leaves room for bursts of events",
        scope: Scope::Server,
        eval: check_pubsub_buffer,
    },
    Check {
        name: "hash-encoding",
        about: "hash-max-listpack-value keeps job records compact",
        scope: Scope::Server,
        eval: check_hash_encoding,
    },
    Check {
        name: "config-access",
        about: "what CONFIG GET could read, and what was read from INFO or probed instead",
        scope: Scope::Server,
        eval: check_config_access,
    },
    Check {
        name: "layout",
        about: "key-layout version under the prefix",
        scope: Scope::Data,
        eval: check_layout,
    },
    Check {
        name: "data-loss",
        about: "Redis has not lost keyfire's data within the last hour",
        scope: Scope::Data,
        eval: check_data_loss,
    },
    Check {
        name: "acl",
        about: "the Redis user may run what keyfire needs on its keys and channels",
        scope: Scope::Data,
        eval: check_acl,
    },
];

/// The `CONFIG GET` parameters the checks read.
pub const CONFIG_PARAMS: &[&str] = &[
    "notify-keyspace-events",
    "maxmemory-policy",
    "maxmemory",
    "appendonly",
    "appendfsync",
    "save",
    "hz",
    "dynamic-hz",
    "client-output-buffer-limit",
    "hash-max-listpack-value",
];

/// Run every check over `facts`.
pub fn evaluate(facts: &Facts) -> Vec<Finding> {
    CHECKS.iter().map(|c| (c.eval)(facts)).collect()
}

/// Run the checks of one `scope` over `facts`.
pub fn evaluate_scope(facts: &Facts, scope: Scope) -> Vec<Finding> {
    CHECKS
        .iter()
        .filter(|c| c.scope == scope)
        .map(|c| (c.eval)(facts))
        .collect()
}

pub use keyfire::inspect::redact_url;

#[cfg(test)]
mod tests {
    use super::*;
    use keyfire::inspect::LAYOUT_VERSION;

    /// The facts of a Redis started with the shipped redis.conf.
    fn good() -> Facts {
        let mut f = Facts {
            prefix: "keyfire".into(),
            layout: Some("1".into()),
            jobs: Some(3),
            clock: Some(ClockSample {
                offset_ms: 2,
                rtt_ms: 1,
            }),
            ..Facts::default()
        };
        for (k, v) in [
            ("redis_version", "7.0.15"),
            ("role", "master"),
            ("connected_slaves", "0"),
            ("used_memory", "1048576"),
            ("aof_last_write_status", "ok"),
            ("rdb_last_bgsave_status", "ok"),
        ] {
            f.info.insert(k.into(), v.into());
        }
        for (k, v) in [
            ("notify-keyspace-events", "xE"),
            ("maxmemory-policy", "noeviction"),
            ("maxmemory", "0"),
            ("appendonly", "yes"),
            ("appendfsync", "everysec"),
            ("save", ""),
            ("hz", "100"),
            ("dynamic-hz", "yes"),
            ("hash-max-listpack-value", "1024"),
            (
                "client-output-buffer-limit",
                "normal 0 0 0 slave 268435456 67108864 60 pubsub 67108864 16777216 60",
            ),
        ] {
            f.config.insert(k.into(), v.into());
        }
        f
    }

    fn status_of(f: &Facts, check: &str) -> Status {
        evaluate(f)
            .into_iter()
            .find(|x| x.check == check)
            .unwrap()
            .status
    }

    #[test]
    fn the_shipped_settings_pass() {
        for finding in evaluate(&good()) {
            assert_eq!(finding.status, Status::Ok, "{finding:?}");
            assert!(finding.fix.is_none());
        }
    }

    #[test]
    fn each_bad_setting_is_named() {
        let cases: &[(&str, &str, &str, Status)] = &[
            ("notifications", "notify-keyspace-events", "", Status::Fail),
            (
                "notifications",
                "notify-keyspace-events",
                "Kx",
                Status::Fail,
            ),
            ("notifications", "notify-keyspace-events", "KEA", Status::Ok),
            ("eviction", "maxmemory-policy", "allkeys-lru", Status::Fail),
            ("eviction", "maxmemory-policy", "volatile-ttl", Status::Fail),
            ("hz", "hz", "10", Status::Warn),
            ("hz", "hz", "500", Status::Ok),
            (
                "hash-encoding",
                "hash-max-listpack-value",
                "64",
                Status::Warn,
            ),
            (
                "hash-encoding",
                "hash-max-listpack-value",
                "4096",
                Status::Ok,
            ),
            ("persistence", "appendonly", "no", Status::Fail),
            (
                "pubsub-buffer",
                "client-output-buffer-limit",
                "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
                Status::Warn,
            ),
            (
                "pubsub-buffer",
                "client-output-buffer-limit",
                "pubsub 0 0 0",
                Status::Ok,
            ),
        ];
        for (check, param, value, want) in cases {
            let mut f = good();
            f.config.insert(param.to_string(), value.to_string());
            assert_eq!(status_of(&f, check), *want, "{param} = {value:?}");
        }
        let mut f = good();
        f.config.insert("appendonly".into(), "no".into());
        f.config.insert("save".into(), "3600 1".into());
        assert_eq!(status_of(&f, "persistence"), Status::Warn);
        let mut f = good();
        f.info.insert("aof_last_write_status".into(), "err".into());
        assert_eq!(status_of(&f, "persistence"), Status::Fail);
    }

    #[test]
    fn the_fix_for_notifications_keeps_other_flags() {
        let mut f = good();
        f.config
            .insert("notify-keyspace-events".into(), "Kg".into());
        let finding = check_notifications(&f);
        assert!(
            finding
                .fix
                .unwrap()
                .contains("CONFIG SET notify-keyspace-events KgEx")
        );
    }

    #[test]
    fn versions_replicas_clock_and_layout() {
        let mut f = good();
        f.info.insert("redis_version".into(), "6.2.14".into());
        assert_eq!(status_of(&f, "version"), Status::Fail);
        f.info.remove("redis_version");
        assert_eq!(status_of(&f, "version"), Status::Fail);

        let mut f = good();
        f.info.insert("role".into(), "slave".into());
        f.info.insert("master_host".into(), "10.0.0.1".into());
        f.info.insert("master_port".into(), "6379".into());
        let r = check_replication(&f);
        assert_eq!(r.status, Status::Fail);
        assert!(r.fix.unwrap().contains("10.0.0.1:6379"));
        let mut f = good();
        f.info.insert("connected_slaves".into(), "2".into());
        f.info.insert(
            "slave0".into(),
            "ip=10.0.0.2,port=6379,state=online,offset=10,lag=0".into(),
        );
        f.info.insert(
            "slave1".into(),
            "ip=10.0.0.3,port=6379,state=wait_bgsave,offset=0,lag=0".into(),
        );
        let r = check_replication(&f);
        assert_eq!(r.status, Status::Warn);
        assert!(
            r.message.contains("10.0.0.3:6379 state wait_bgsave"),
            "{r:?}"
        );

        let mut f = good();
        f.clock = Some(ClockSample {
            offset_ms: -3_600_000,
            rtt_ms: 1,
        });
        let c = check_clock(&f);
        assert_eq!(c.status, Status::Warn);
        assert!(c.message.contains("3600000 ms behind"), "{c:?}");

        let mut f = good();
        f.layout = None;
        assert_eq!(status_of(&f, "layout"), Status::Ok);
        f.layout = Some(format!("{}", LAYOUT_VERSION + 1));
        assert_eq!(status_of(&f, "layout"), Status::Fail);
        f.layout = Some("hello".into());
        assert_eq!(status_of(&f, "layout"), Status::Fail);
    }

    #[test]
    fn a_stored_shard_count_other_than_redis_shards_fails() {
        let mut f = good();
        f.layout = Some("2".into());
        f.shard_count = Some("6".into());
        f.jobs = Some(10);
        // A bare URL: nothing to compare with.
        assert_eq!(status_of(&f, "layout"), Status::Ok);
        f.expected_shards = Some(6);
        let ok = check_layout(&f);
        assert_eq!(ok.status, Status::Ok);
        assert!(
            ok.message
                .contains("layout 2 under the prefix 'keyfire' over 6 shards, 10 job(s)"),
            "{ok:?}"
        );
        f.expected_shards = Some(12);
        let bad = check_layout(&f);
        assert_eq!(bad.status, Status::Fail);
        assert!(
            bad.message
                .contains("spread over 6 shard(s), but redis.shards is 12"),
            "{bad:?}"
        );
        assert!(bad.fix.unwrap().starts_with("set redis.shards = 6"));
        // Layout 1 holds no shard count: one shard.
        f.layout = Some("1".into());
        f.shard_count = None;
        assert_eq!(status_of(&f, "layout"), Status::Fail);
        f.expected_shards = Some(1);
        assert_eq!(status_of(&f, "layout"), Status::Ok);
        f.layout = Some("2".into());
        f.shard_count = Some("many".into());
        assert_eq!(status_of(&f, "layout"), Status::Fail);
    }

    #[test]
    fn scopes_split_the_checks() {
        let server: Vec<&str> = evaluate_scope(&good(), Scope::Server)
            .iter()
            .map(|f| f.check)
            .collect();
        assert_eq!(server.len(), CHECKS.len() - 3);
        assert!(!server.contains(&"layout") && !server.contains(&"acl"));
        let data: Vec<&str> = evaluate_scope(&good(), Scope::Data)
            .iter()
            .map(|f| f.check)
            .collect();
        assert_eq!(data, ["layout", "data-loss", "acl"]);
    }

    #[test]
    fn a_recorded_data_loss_is_a_warning_that_says_what_to_do() {
        let mut f = good();
        assert_eq!(status_of(&f, "data-loss"), Status::Ok);
        f.data_loss = Some(keyfire::DataLoss {
            at_ms: 1_796_000_000_000,
            node: "n1".into(),
            detail: "lost the meta keys".into(),
        });
        assert_eq!(status_of(&f, "data-loss"), Status::Warn);
        let finding = evaluate(&f)
            .into_iter()
            .find(|x| x.check == "data-loss")
            .unwrap();
        assert!(finding.message.contains("n1") && finding.message.contains("2026-"));
        let fix = finding.fix.unwrap();
        assert!(
            fix.contains("appendonly") && fix.contains("--ack-data-loss"),
            "{fix}"
        );
    }

    #[test]
    fn acl_names_what_the_user_is_refused() {
        let mut f = good();
        f.acl_denied = Some(vec![]);
        assert_eq!(status_of(&f, "acl"), Status::Ok);
        f.acl_denied = Some(vec!["EVALSHA ... 1 {keyfire}:doctor:probe".into()]);
        assert_eq!(status_of(&f, "acl"), Status::Fail);
        let finding = evaluate(&f).into_iter().find(|x| x.check == "acl").unwrap();
        assert!(finding.message.contains("EVALSHA"), "{}", finding.message);
    }

    fn masters(counts: &[usize]) -> Vec<(String, usize)> {
        counts
            .iter()
            .enumerate()
            .map(|(i, n)| (format!("10.0.0.{i}:6379"), *n))
            .collect()
    }

    #[test]
    fn shard_spread_and_count() {
        assert_eq!(
            check_shard_spread(12, &masters(&[4, 4, 4])).status,
            Status::Ok
        );
        assert_eq!(
            check_shard_spread(13, &masters(&[5, 4, 4])).status,
            Status::Ok
        );
        let uneven = check_shard_spread(12, &masters(&[5, 4, 3]));
        assert_eq!(uneven.status, Status::Warn);
        assert!(uneven.message.contains("10.0.0.2:6379: 3"), "{uneven:?}");
        let idle = check_shard_spread(2, &masters(&[1, 1, 0]));
        assert_eq!(idle.status, Status::Warn);
        assert!(idle.message.contains("no shard"), "{idle:?}");
        assert!(idle.fix.unwrap().contains("multiple of 3"));

        assert_eq!(check_shard_count(12, 3).status, Status::Ok);
        assert_eq!(check_shard_count(3, 3).status, Status::Ok);
        let few = check_shard_count(2, 3);
        assert_eq!(few.status, Status::Warn);
        assert!(few.fix.unwrap().contains("multiple of 3"));
    }

    #[test]
    fn replicas_of_every_master() {
        let with = |n: &[Option<usize>]| -> Vec<(String, Option<usize>)> {
            n.iter()
                .enumerate()
                .map(|(i, n)| (format!("10.0.0.{i}:6379"), *n))
                .collect()
        };
        assert_eq!(
            check_cluster_replicas(&with(&[Some(1), Some(2), Some(1)])).status,
            Status::Ok
        );
        let missing = check_cluster_replicas(&with(&[Some(1), Some(0), Some(1)]));
        assert_eq!(missing.status, Status::Warn);
        assert!(
            missing
                .message
                .contains("1 of the 3 masters have no replica (10.0.0.1:6379)"),
            "{missing:?}"
        );
        assert_eq!(
            check_cluster_replicas(&with(&[Some(1), None])).status,
            Status::Warn
        );

        assert_eq!(
            check_sentinel_replicas(&with(&[Some(1)])).status,
            Status::Ok
        );
        assert_eq!(
            check_sentinel_replicas(&with(&[Some(0)])).status,
            Status::Warn
        );
        assert_eq!(check_sentinel_replicas(&with(&[])).status, Status::Warn);
    }

    #[test]
    fn sentinels_must_agree() {
        let answer = |s: &str, a: SentinelAnswer| (s.to_string(), a);
        let m = |a: &str| Ok(Some(a.to_string()));
        let agree = [
            answer("s1:26379", m("10.0.0.1:6379")),
            answer("s2:26379", m("10.0.0.1:6379")),
            answer("s3:26379", m("10.0.0.1:6379")),
        ];
        let ok = check_sentinels("mymaster", &agree);
        assert_eq!(ok.status, Status::Ok);
        assert!(ok.message.contains("3 of the 3 sentinels"), "{ok:?}");

        let split = [
            answer("s1:26379", m("10.0.0.1:6379")),
            answer("s2:26379", m("10.0.0.2:6379")),
        ];
        let bad = check_sentinels("mymaster", &split);
        assert_eq!(bad.status, Status::Fail);
        assert!(
            bad.message.contains("s2:26379 name 10.0.0.2:6379"),
            "{bad:?}"
        );

        let partial = [
            answer("s1:26379", m("10.0.0.1:6379")),
            answer("s2:26379", Err("connection refused".into())),
            answer("s3:26379", Ok(None)),
        ];
        let warn = check_sentinels("mymaster", &partial);
        assert_eq!(warn.status, Status::Warn);
        assert!(warn.message.contains("no answer from s2:26379"), "{warn:?}");
        assert!(
            warn.message.contains("s3:26379 do not monitor 'mymaster'"),
            "{warn:?}"
        );

        let none = [answer("s1:26379", Ok(None))];
        assert_eq!(check_sentinels("mymaster", &none).status, Status::Fail);
    }

    #[test]
    fn unreadable_config_warns_instead_of_failing() {
        let mut f = good();
        f.config.clear();
        f.config_error = Some("ERR unknown command 'CONFIG'".into());
        for check in [
            "notifications",
            "eviction",
            "hz",
            "pubsub-buffer",
            "hash-encoding",
        ] {
            let finding = evaluate(&f).into_iter().find(|x| x.check == check).unwrap();
            assert_eq!(finding.status, Status::Warn, "{finding:?}");
            assert!(finding.message.contains("unknown command"), "{finding:?}");
        }
    }

    #[test]
    fn sizes_and_urls() {
        assert_eq!(parse_size("32mb"), Some(32 << 20));
        assert_eq!(parse_size("33554432"), Some(32 << 20));
        assert_eq!(parse_size("1gb"), Some(1 << 30));
        assert_eq!(parse_size("8m"), Some(8_000_000));
        assert_eq!(parse_size("x"), None);
        assert_eq!(
            pubsub_limits("normal 0 0 0 slave 1 2 3 pubsub 64mb 16mb 60"),
            Some((64 << 20, 16 << 20, 60))
        );
        assert_eq!(
            redact_url("redis://user:s3cret@db.example:6379/0"),
            "redis://user:***@db.example:6379/0"
        );
        assert_eq!(
            redact_url("redis://127.0.0.1:6379/0"),
            "redis://127.0.0.1:6379/0"
        );
        assert_eq!(
            parse_info("# Server\r\nredis_version:7.0.15\r\nrole:master\r\n")["redis_version"],
            "7.0.15"
        );
    }
}
