//! `keyfire doctor`: does this Redis suit keyfire?
//!
//! Two steps, kept apart so tests can drive the second without a Redis: [`gather`] reads what
//! the checks need ([`Facts`]: `INFO`, `CONFIG GET`, `TIME`, the layout keys), and [`CHECKS`],
//! a table of pure functions, turns those facts into [`Finding`]s, each with a fix.
//! [`diagnose`] does both against a URL. [`diagnose_settings`] follows `redis.mode`: in
//! sentinel and cluster mode it connects as a node does ([`Conn`]), runs the per-server checks
//! on every master (each finding names its `server`), reads the layout from the meta tag's
//! master, and adds the deployment's own checks (replicas, the spread of the shards over the
//! masters, the sentinels' agreement). A check fails only where keyfire's guarantees break
//! (a firing lost, run twice, or data gone on restart); where keyfire still works but worse
//! (later events, no failover), it warns.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Client, ConnectionAddr, IntoConnectionInfo, RedisResult, TlsCertificates};
use serde::Serialize;

use keyfire::config::{RedisSettings, node_addr};
use keyfire::engine::notify::has_expired_events;
use keyfire::store::{Conn, Keys, LAYOUT_VERSION, LAYOUTS_UNDERSTOOD, Mode, Shards, client_addr};

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
    /// Jobs under the prefix (`ZCARD` of every shard's job index).
    pub jobs: Option<u64>,
    /// `redis.shards` of the settings, to compare with the stored shard count; `None`: not
    /// compared (a bare URL was checked).
    pub expected_shards: Option<u32>,
    /// The master (`host:port`) holding the meta tag, when there are several (cluster mode).
    pub meta_server: Option<String>,
    /// What the Redis user was refused (`NOPERM`) among the probes of what keyfire needs;
    /// `None` when not probed.
    pub acl_denied: Option<Vec<String>>,
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
            format!("cannot read {setting} ({why})"),
            format!(
                "check `{setting}` by hand (redis-cli CONFIG GET {setting}); managed Redis services often forbid CONFIG"
            ),
        )
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
        name: "layout",
        about: "key-layout version under the prefix",
        scope: Scope::Data,
        eval: check_layout,
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

/// `7.0.15` → (7, 0).
fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split('.');
    let major = parts.next()?.trim().parse().ok()?;
    let minor = parts.next().and_then(|m| m.parse().ok()).unwrap_or(0);
    Some((major, minor))
}

fn check_version(f: &Facts) -> Finding {
    const NAME: &str = "version";
    let Some(version) = f.info("redis_version") else {
        let why = f
            .info_error
            .as_deref()
            .unwrap_or("INFO has no redis_version");
        return Finding::fail(
            NAME,
            format!("cannot tell the Redis version ({why})"),
            "make sure the URL points at a Redis server and its user may run INFO",
        );
    };
    // Valkey reports the Redis version it is compatible with as redis_version.
    let shown = match f.info("valkey_version") {
        Some(v) => format!("Valkey {v} (Redis {version} compatible)"),
        None => format!("Redis {version}"),
    };
    match major_minor(version) {
        Some((major, _)) if major >= MIN_REDIS_MAJOR => Finding::ok(NAME, shown),
        Some(_) => Finding::fail(
            NAME,
            format!(
                "{shown} is older than {MIN_REDIS_MAJOR}.0, the oldest keyfire is built and tested against"
            ),
            format!("upgrade to Redis {MIN_REDIS_MAJOR} or newer"),
        ),
        None => Finding::warn(
            NAME,
            format!("cannot parse the version '{version}'"),
            format!("make sure it is Redis {MIN_REDIS_MAJOR} or newer"),
        ),
    }
}

fn check_notifications(f: &Facts) -> Finding {
    const NAME: &str = "notifications";
    let Some(flags) = f.config("notify-keyspace-events") else {
        return f.unreadable(NAME, "notify-keyspace-events");
    };
    if has_expired_events(flags) {
        return Finding::ok(
            NAME,
            format!("notify-keyspace-events is \"{flags}\": expired key events are on"),
        );
    }
    let mut wanted = flags.to_string();
    for c in ['E', 'x'] {
        if !wanted.contains(c) {
            wanted.push(c);
        }
    }
    Finding::fail(
        NAME,
        format!(
            "expired key events are off (notify-keyspace-events is \"{flags}\"): firings wait for \
             the sweeper instead of firing on their key's expiry, and a node with \
             redis.enable_notifications = false refuses to start (a node with it true turns the \
             events on, until Redis restarts without them)"
        ),
        format!(
            "put `notify-keyspace-events {wanted}` in redis.conf (the shipped redis.conf has `Ex`) \
             and apply it now: redis-cli CONFIG SET notify-keyspace-events {wanted}"
        ),
    )
}

fn check_eviction(f: &Facts) -> Finding {
    const NAME: &str = "eviction";
    let Some(policy) = f.config("maxmemory-policy") else {
        return f.unreadable(NAME, "maxmemory-policy");
    };
    if policy == "noeviction" {
        return Finding::ok(
            NAME,
            "maxmemory-policy is noeviction: keyfire's keys are never evicted",
        );
    }
    let limit = match f.config("maxmemory") {
        Some("0") => " (maxmemory is 0, so nothing is evicted until a limit is set)",
        _ => "",
    };
    Finding::fail(
        NAME,
        format!(
            "maxmemory-policy is {policy}: Redis may evict sentinel keys (an evicted key emits \
             `evicted`, not `expired`), run locks (a firing could run twice) and job data{limit}"
        ),
        "put `maxmemory-policy noeviction` in redis.conf and apply it now: \
         redis-cli CONFIG SET maxmemory-policy noeviction (keep caches in another Redis)",
    )
}

fn check_memory(f: &Facts) -> Finding {
    const NAME: &str = "memory";
    let max: Option<u64> = f.config("maxmemory").and_then(|m| m.parse().ok());
    let used: Option<u64> = f.info("used_memory").and_then(|m| m.parse().ok());
    match (max, used) {
        (Some(0), Some(used)) => {
            Finding::ok(NAME, format!("{} used, no maxmemory limit", mib(used)))
        }
        (Some(max), Some(used)) => {
            let share = used as f64 / max as f64;
            let text = format!(
                "{} used of maxmemory {} ({:.0}%)",
                mib(used),
                mib(max),
                share * 100.0
            );
            if share >= 0.9 {
                Finding::warn(
                    NAME,
                    format!(
                        "{text}: with noeviction a full Redis refuses writes, so creates, claims \
                         and run records fail"
                    ),
                    "raise maxmemory, or lower node.history_limit and node.task_retention",
                )
            } else {
                Finding::ok(NAME, text)
            }
        }
        (None, _) => f.unreadable(NAME, "maxmemory"),
        (_, None) => Finding::warn(
            NAME,
            "INFO has no used_memory",
            "check memory use by hand (redis-cli INFO memory)",
        ),
    }
}

fn check_persistence(f: &Facts) -> Finding {
    const NAME: &str = "persistence";
    if f.info("aof_last_write_status").is_some_and(|s| s != "ok") {
        return Finding::fail(
            NAME,
            "the last AOF write failed: Redis refuses writes until it succeeds",
            "look at the Redis log (disk full? permissions?) and fix the AOF directory",
        );
    }
    if f.info("rdb_last_bgsave_status").is_some_and(|s| s != "ok") {
        return Finding::fail(
            NAME,
            "the last RDB snapshot failed: with stop-writes-on-bgsave-error (the default) Redis refuses writes",
            "look at the Redis log (disk full? permissions?) and fix the snapshot directory",
        );
    }
    let aof = f.config("appendonly").or_else(|| {
        f.info("aof_enabled")
            .map(|v| if v == "1" { "yes" } else { "no" })
    });
    let Some(aof) = aof else {
        return f.unreadable(NAME, "appendonly");
    };
    let save = f.config("save").unwrap_or("");
    let fix_aof = "put `appendonly yes` and `appendfsync everysec` in redis.conf (as the shipped \
                   redis.conf does) and apply them now: redis-cli CONFIG SET appendonly yes";
    if aof == "yes" {
        return match f.config("appendfsync") {
            Some("no") => Finding::warn(
                NAME,
                "AOF on with appendfsync no: the OS decides when writes reach the disk, so a \
                 machine crash can lose tens of seconds of changes (firings run again or lost)",
                "appendfsync everysec (at most about a second is lost)",
            ),
            Some(sync) => Finding::ok(NAME, format!("AOF on (appendfsync {sync})")),
            None => Finding::ok(NAME, "AOF on"),
        };
    }
    if !save.trim().is_empty() {
        return Finding::warn(
            NAME,
            format!(
                "only RDB snapshots (save \"{save}\"): a Redis crash loses every change since the \
                 last snapshot, so jobs created since then vanish and claimed firings run again"
            ),
            fix_aof,
        );
    }
    Finding::fail(
        NAME,
        "no persistence (appendonly no, save \"\"): a Redis restart loses every job, pending \
         firing and dead letter",
        fix_aof,
    )
}

fn check_hz(f: &Facts) -> Finding {
    const NAME: &str = "hz";
    let Some(hz) = f.config("hz").and_then(|h| h.parse::<u64>().ok()) else {
        return f.unreadable(NAME, "hz");
    };
    if hz >= RECOMMENDED_HZ {
        return Finding::ok(NAME, format!("hz is {hz}"));
    }
    let dynamic = if f.config("dynamic-hz") == Some("yes") {
        " (dynamic-hz raises it only with many clients)"
    } else {
        ""
    };
    Finding::warn(
        NAME,
        format!(
            "hz is {hz}{dynamic}: Redis runs its active expire cycle and checks the timeouts of \
             blocking commands (BZPOPMIN, BLMOVE) {hz} times a second, so a blocking wait can \
             overshoot by up to {} ms and expiry events come later (keyfire's precision timers \
             keep firings on time regardless)",
            1000 / hz.max(1)
        ),
        format!(
            "put `hz {RECOMMENDED_HZ}` in redis.conf and apply it now: redis-cli CONFIG SET hz \
             {RECOMMENDED_HZ} (costs a little idle CPU)"
        ),
    )
}

/// The `hash-max-listpack-value` the shipped redis.conf sets.
const RECOMMENDED_LISTPACK_VALUE: u64 = 1024;
/// Below this, a typical job record (its spec JSON) does not fit a listpack.
const MIN_LISTPACK_VALUE: u64 = 512;

fn check_hash_encoding(f: &Facts) -> Finding {
    const NAME: &str = "hash-encoding";
    let Some(value) = f
        .config("hash-max-listpack-value")
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return f.unreadable(NAME, "hash-max-listpack-value");
    };
    if value >= MIN_LISTPACK_VALUE {
        return Finding::ok(NAME, format!("hash-max-listpack-value is {value}"));
    }
    Finding::warn(
        NAME,
        format!(
            "hash-max-listpack-value is {value}: a job record whose spec JSON is longer (a task \
             with a UUID id is ~100 bytes) is stored as a hash table, about 1,080 instead of \
             630 bytes of Redis memory per pending task (measured)"
        ),
        format!(
            "put `hash-max-listpack-value {RECOMMENDED_LISTPACK_VALUE}` in redis.conf and apply \
             it now: redis-cli CONFIG SET hash-max-listpack-value {RECOMMENDED_LISTPACK_VALUE} \
             (new records only; existing ones shrink when Redis reloads them)"
        ),
    )
}

/// `ip=10.0.0.2,port=6379,state=online,offset=123,lag=0` → its fields.
fn replica_fields(line: &str) -> BTreeMap<&str, &str> {
    line.split(',')
        .filter_map(|kv| kv.split_once('='))
        .collect()
}

fn check_replication(f: &Facts) -> Finding {
    const NAME: &str = "replication";
    let Some(role) = f.info("role") else {
        return Finding::warn(
            NAME,
            "INFO has no role",
            "check by hand: redis-cli INFO replication",
        );
    };
    if role != "master" {
        let master = match (f.info("master_host"), f.info("master_port")) {
            (Some(h), Some(p)) => format!(" of {h}:{p}"),
            _ => String::new(),
        };
        return Finding::fail(
            NAME,
            format!(
                "this Redis is a replica{master}: replicas never emit expired events (the \
                 master's deletion reaches them instead) and refuse writes"
            ),
            format!("point redis.url at the master{master}"),
        );
    }
    let count: usize = f
        .info("connected_slaves")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    if count == 0 {
        return Finding::ok(
            NAME,
            "a master without replicas: while Redis is down nothing fires (jobs survive through \
             persistence, and late firings meet their misfire policy)",
        );
    }
    let mut lagging = Vec::new();
    for i in 0..count {
        let Some(line) = f.info(&format!("slave{i}")) else {
            continue;
        };
        let r = replica_fields(line);
        let lag: u64 = r.get("lag").and_then(|l| l.parse().ok()).unwrap_or(0);
        let state = r.get("state").copied().unwrap_or("?");
        if state != "online" || lag > 10 {
            lagging.push(format!(
                "{}:{} state {state}, lag {lag} s",
                r.get("ip").unwrap_or(&"?"),
                r.get("port").unwrap_or(&"?")
            ));
        }
    }
    let note = "settings are not replicated: run keyfire doctor against each replica too, so a \
                promoted one emits expired events and does not evict";
    if lagging.is_empty() {
        Finding::ok(
            NAME,
            format!("a master with {count} replica(s) online; {note}"),
        )
    } else {
        Finding::warn(
            NAME,
            format!(
                "a master with {count} replica(s), not all in sync ({}): a failover now loses \
                 recent changes",
                lagging.join("; ")
            ),
            format!("look at the replicas' logs and network; {note}"),
        )
    }
}

fn check_clock(f: &Facts) -> Finding {
    const NAME: &str = "clock";
    let Some(c) = f.clock else {
        let why = f.clock_error.as_deref().unwrap_or("no sample");
        return Finding::warn(
            NAME,
            format!("cannot read Redis's TIME ({why})"),
            "keyfire reads Redis's clock with TIME: let its user run it",
        );
    };
    let ahead = if c.offset_ms >= 0 {
        "ahead of"
    } else {
        "behind"
    };
    let text = format!(
        "Redis's clock is {} ms {ahead} this host's (± {} ms)",
        c.offset_ms.abs(),
        (c.rtt_ms / 2).max(1)
    );
    if c.offset_ms.abs() <= CLOCK_WARN_MS {
        Finding::ok(NAME, text)
    } else {
        Finding::warn(
            NAME,
            format!(
                "{text}: keyfire decides every firing by Redis's clock, so nothing fires early, \
                 late or twice because of it, but nodes on this host correct their local timers \
                 by the offset and their logs disagree with Redis's times"
            ),
            "run NTP (chrony, systemd-timesyncd) on this host and on the Redis host",
        )
    }
}

/// Parse a size as `CONFIG GET` or redis.conf writes it: `33554432`, `32mb`, `8m`, `1gb`.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim().to_ascii_lowercase();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(digits);
    let n: u64 = n.parse().ok()?;
    let mult = match unit {
        "" | "b" => 1,
        "k" => 1_000,
        "kb" => 1 << 10,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// The pubsub class of a `client-output-buffer-limit` value: (hard, soft, soft seconds).
pub fn pubsub_limits(value: &str) -> Option<(u64, u64, u64)> {
    let words: Vec<&str> = value.split_whitespace().collect();
    let i = words.iter().position(|w| *w == "pubsub")?;
    let hard = parse_size(words.get(i + 1)?)?;
    let soft = parse_size(words.get(i + 2)?)?;
    let secs = words.get(i + 3)?.parse().ok()?;
    Some((hard, soft, secs))
}

fn mib(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.0} MiB", bytes as f64 / (1u64 << 20) as f64)
    } else {
        format!("{:.0} KiB", bytes as f64 / 1024.0)
    }
}

fn check_pubsub_buffer(f: &Facts) -> Finding {
    const NAME: &str = "pubsub-buffer";
    let Some(value) = f.config("client-output-buffer-limit") else {
        return f.unreadable(NAME, "client-output-buffer-limit");
    };
    let Some((hard, soft, secs)) = pubsub_limits(value) else {
        return Finding::warn(
            NAME,
            format!("cannot find the pubsub class in client-output-buffer-limit \"{value}\""),
            "check it by hand: redis-cli CONFIG GET client-output-buffer-limit",
        );
    };
    let text = if hard == 0 && soft == 0 {
        "the pub/sub output buffer is unlimited".to_string()
    } else {
        format!(
            "the pub/sub output buffer limit is {} hard, {} soft for {secs} s",
            if hard == 0 { "none".into() } else { mib(hard) },
            if soft == 0 { "none".into() } else { mib(soft) },
        )
    };
    let roomy = |limit: u64, want: u64| limit == 0 || limit >= want;
    if roomy(hard, PUBSUB_HARD) && roomy(soft, PUBSUB_SOFT) {
        return Finding::ok(NAME, text);
    }
    Finding::warn(
        NAME,
        format!(
            "{text}: a node that falls behind a burst of expired events (many firings due at \
             once) is disconnected and misses the events meanwhile; the sweeper still claims \
             those firings, but up to claim_grace + sweep_interval late"
        ),
        "put `client-output-buffer-limit pubsub 64mb 16mb 60` in redis.conf (as the shipped \
         redis.conf does) and apply it now: redis-cli CONFIG SET client-output-buffer-limit \
         \"pubsub 64mb 16mb 60\"",
    )
}

/// Where the least privilege keyfire needs is written down.
const ACL_FILE: &str = "redis/keyfire.acl";

fn check_acl(f: &Facts) -> Finding {
    match &f.acl_denied {
        None => Finding::ok("acl", "not checked (the data could not be read)"),
        Some(denied) if denied.is_empty() => Finding::ok(
            "acl",
            format!(
                "the Redis user may run what keyfire needs on the keys and channels of \
                 prefix '{}' (the least it needs is in {ACL_FILE})",
                f.prefix
            ),
        ),
        Some(denied) => Finding::fail(
            "acl",
            format!(
                "the Redis user is refused (NOPERM) what keyfire needs: {}",
                denied.join("; ")
            ),
            format!(
                "grant the user the rule in {ACL_FILE} (ACL SETUSER <user> ..., with your \
                 prefix in the key and channel patterns), on every server"
            ),
        ),
    }
}

/// Probe, without changing anything, whether the connected user may run what keyfire needs
/// on the keys and channels of `prefix`: read and write a key of the meta tag and of another
/// shard's tag, load and run scripts, publish on its channels, read the clock. Each probe
/// refused with `NOPERM` is named.
pub async fn probe_acl<C: ConnectionLike>(conn: &mut C, prefix: &str) -> Vec<String> {
    let meta = format!("{{{prefix}}}:doctor:probe");
    let shard = format!("{{{prefix}:1}}:doctor:probe");
    let no_script = "0".repeat(40);
    let probes: Vec<(String, redis::Cmd)> = vec![
        (
            format!("EXISTS {meta}"),
            redis::cmd("EXISTS").arg(&meta).clone(),
        ),
        (format!("DEL {meta}"), redis::cmd("DEL").arg(&meta).clone()),
        (
            format!("EXISTS {shard}"),
            redis::cmd("EXISTS").arg(&shard).clone(),
        ),
        (
            format!("DEL {shard}"),
            redis::cmd("DEL").arg(&shard).clone(),
        ),
        (
            format!("EVALSHA ... 1 {meta}"),
            redis::cmd("EVALSHA")
                .arg(&no_script)
                .arg(1)
                .arg(&meta)
                .clone(),
        ),
        (
            "SCRIPT LOAD".to_string(),
            redis::cmd("SCRIPT").arg("LOAD").arg("return 0").clone(),
        ),
        (
            format!("PUBLISH {meta}"),
            redis::cmd("PUBLISH").arg(&meta).arg("").clone(),
        ),
        ("TIME".to_string(), redis::cmd("TIME").clone()),
    ];
    let mut denied = Vec::new();
    for (name, cmd) in probes {
        if let Err(e) = cmd.query_async::<redis::Value>(conn).await
            && (e.code() == Some("NOPERM") || e.to_string().contains("NOPERM"))
        {
            denied.push(name);
        }
    }
    denied
}

fn check_layout(f: &Facts) -> Finding {
    const NAME: &str = "layout";
    let keys = Keys::new(&f.prefix);
    let key = keys.layout();
    let other_program = || {
        format!(
            "another program uses the prefix '{}': give keyfire another redis.prefix",
            f.prefix
        )
    };
    if let Some(e) = &f.layout_error {
        return Finding::fail(
            NAME,
            format!("cannot read {key} ({e})"),
            format!(
                "{key} must be a string holding the key-layout version; is another program using the prefix '{}'?",
                f.prefix
            ),
        );
    }
    let jobs = match f.jobs {
        Some(n) => format!(", {n} job(s)"),
        None => String::new(),
    };
    let on = match &f.meta_server {
        Some(server) => format!(" (read from {server}, the master of the meta tag)"),
        None => String::new(),
    };
    match f.layout.as_deref().map(str::parse::<i64>) {
        None => Finding::ok(
            NAME,
            format!(
                "no keyfire data under the prefix '{}' yet; the first node writes layout 1 (one shard) or {LAYOUT_VERSION} (sharded){on}",
                f.prefix
            ),
        ),
        Some(Ok(v)) if LAYOUTS_UNDERSTOOD.contains(&v) => {
            // Layout 1 has no shard count: one shard.
            let stored = match f.shard_count.as_deref().map(str::parse::<u32>) {
                None => 1,
                Some(Ok(n)) if n >= 1 => n,
                Some(_) => {
                    return Finding::fail(
                        NAME,
                        format!(
                            "{} holds '{}', not a shard count",
                            keys.shard_count(),
                            f.shard_count.as_deref().unwrap_or_default()
                        ),
                        other_program(),
                    );
                }
            };
            if let Some(want) = f.expected_shards
                && want != stored
            {
                return Finding::fail(
                    NAME,
                    format!(
                        "the data under the prefix '{}' (key layout {v}) is spread over {stored} \
                         shard(s), but redis.shards is {want}: nodes refuse to start, as they \
                         would look for jobs on the wrong shards{on}",
                        f.prefix
                    ),
                    format!(
                        "set redis.shards = {stored} (the shard count of existing data cannot \
                         change; for {want} shards, start afresh under another redis.prefix)"
                    ),
                );
            }
            let spread = if stored > 1 {
                format!(" over {stored} shards")
            } else {
                String::new()
            };
            Finding::ok(
                NAME,
                format!(
                    "key layout {v} under the prefix '{}'{spread}{jobs}: this keyfire understands it{on}",
                    f.prefix
                ),
            )
        }
        Some(Ok(v)) => Finding::fail(
            NAME,
            format!(
                "the data under the prefix '{}' uses key layout {v}; this keyfire understands \
                 {LAYOUTS_UNDERSTOOD:?}, so its nodes refuse to start",
                f.prefix
            ),
            "run the keyfire version that wrote this data, or give this one another redis.prefix",
        ),
        Some(Err(_)) => Finding::fail(
            NAME,
            format!(
                "{key} holds '{}', not a layout version",
                f.layout.as_deref().unwrap_or_default()
            ),
            other_program(),
        ),
    }
}

/// Parse `INFO` output into its `name:value` fields.
pub fn parse_info(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.trim_end().split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn now_ms_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

/// Sample `TIME` a few times and keep the sample with the shortest round trip.
async fn sample_clock(conn: &mut MultiplexedConnection) -> redis::RedisResult<ClockSample> {
    let mut best: Option<(f64, f64)> = None; // (rtt ms, offset ms)
    for _ in 0..5 {
        let local = now_ms_f64();
        let started = Instant::now();
        let (s, us): (i64, i64) = redis::cmd("TIME").query_async(conn).await?;
        let rtt = started.elapsed().as_secs_f64() * 1000.0;
        let redis_ms = s as f64 * 1000.0 + us as f64 / 1000.0;
        let offset = redis_ms - (local + rtt / 2.0);
        if best.is_none_or(|(r, _)| rtt < r) {
            best = Some((rtt, offset));
        }
    }
    let (rtt, offset) = best.unwrap_or_default();
    Ok(ClockSample {
        offset_ms: offset.round() as i64,
        rtt_ms: rtt.ceil() as i64,
    })
}

/// Read everything the checks need. Errors are recorded in the facts, never returned: one
/// forbidden command must not hide the other findings.
pub async fn gather(conn: &mut MultiplexedConnection, prefix: &str) -> Facts {
    let mut facts = gather_server(conn).await;
    facts.prefix = prefix.to_string();
    gather_data(conn, &mut facts).await;
    facts
}

/// Read what the [`Scope::Server`] checks need: `INFO`, `CONFIG GET`, `TIME`. Errors are
/// recorded in the facts, never returned.
pub async fn gather_server(conn: &mut MultiplexedConnection) -> Facts {
    let mut facts = Facts::default();
    // Plain INFO: its default sections hold everything needed, on every Redis version.
    match redis::cmd("INFO").query_async::<String>(conn).await {
        Ok(text) => facts.info = parse_info(&text),
        Err(e) => facts.info_error = Some(e.to_string()),
    }
    // One parameter at a time: several in one CONFIG GET needs Redis 7.
    for name in CONFIG_PARAMS {
        let reply: redis::RedisResult<Vec<String>> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(*name)
            .query_async(conn)
            .await;
        match reply {
            Ok(pairs) => {
                if let Some(value) = pairs.get(1) {
                    facts.config.insert(name.to_string(), value.clone());
                }
            }
            Err(e) => {
                facts.config_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    match sample_clock(conn).await {
        Ok(c) => facts.clock = Some(c),
        Err(e) => facts.clock_error = Some(e.to_string()),
    }
    facts
}

/// Read what the [`Scope::Data`] checks need into `facts`: the layout version and shard count
/// under `facts.prefix`, and the jobs of every shard. `conn` must route each key to its
/// master (a [`Conn`] does, in every mode).
pub async fn gather_data<C: ConnectionLike>(conn: &mut C, facts: &mut Facts) {
    facts.acl_denied = Some(probe_acl(conn, &facts.prefix).await);
    let keys = Keys::new(&facts.prefix);
    let read = |key: String| {
        let mut cmd = redis::cmd("GET");
        cmd.arg(key);
        cmd
    };
    match read(keys.layout())
        .query_async::<Option<String>>(conn)
        .await
    {
        Ok(v) => facts.layout = v,
        Err(e) => {
            facts.layout_error = Some(e.to_string());
            return;
        }
    }
    match read(keys.shard_count())
        .query_async::<Option<String>>(conn)
        .await
    {
        Ok(v) => facts.shard_count = v,
        Err(e) => {
            facts.layout_error = Some(e.to_string());
            return;
        }
    }
    // The jobs live on the shards the data was written with (layout 1: the meta tag alone).
    let stored = facts
        .shard_count
        .as_deref()
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| (1..=1024).contains(n))
        .unwrap_or(1);
    let mut jobs = 0;
    for shard in Shards::new(&facts.prefix, stored).iter() {
        match redis::cmd("ZCARD")
            .arg(shard.jobs())
            .query_async::<u64>(conn)
            .await
        {
            Ok(n) => jobs += n,
            Err(_) => return,
        }
    }
    facts.jobs = Some(jobs);
}

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
    fn new(redis: String, prefix: &str, findings: Vec<Finding>) -> Self {
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

/// `redis://user:secret@host/0` → `redis://***@host/0`.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://***@{host}{path}"),
        None => url.to_string(),
    }
}

/// How long doctor waits to connect, and for all its reads.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Connect to `url` and run every check on it and on the data under `prefix` (the stored
/// shard count is not compared with any setting).
pub async fn diagnose(url: &str, prefix: &str) -> Report {
    diagnose_url(url, prefix, None).await
}

/// Check the Redis that settings `s` point at, as `redis.mode` says: in standalone mode the
/// server at `redis.url` (as [`diagnose`], with the settings' credentials and TLS, and the
/// stored shard count compared with `redis.shards`); in sentinel and cluster mode every master
/// (each finding naming its `server`) and the deployment as a whole.
pub async fn diagnose_settings(s: &RedisSettings) -> Report {
    let mut report = match s.mode {
        Mode::Standalone => diagnose_url(&s.url, &s.prefix, Some(s)).await,
        Mode::Sentinel | Mode::Cluster => diagnose_topology(s).await,
    };
    report.shards = Some(s.shards);
    report
}

/// Open a connection to `client`'s server and PING it: the connection, and how long it took
/// (ms); or a failed `connection` finding with `fix`.
async fn connect(
    client: &Client,
    fix: &str,
) -> std::result::Result<(MultiplexedConnection, u128), Finding> {
    const NAME: &str = "connection";
    let started = Instant::now();
    let conn = tokio::time::timeout(TIMEOUT, client.get_multiplexed_async_connection()).await;
    let mut conn = match conn {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return Err(Finding::fail(NAME, format!("cannot connect: {e}"), fix)),
        Err(_) => {
            return Err(Finding::fail(
                NAME,
                format!("no connection within {} s", TIMEOUT.as_secs()),
                fix,
            ));
        }
    };
    // PING first: a wrong password or a protected-mode refusal shows here, named.
    match tokio::time::timeout(TIMEOUT, redis::cmd("PING").query_async::<String>(&mut conn)).await {
        Ok(Ok(_)) => Ok((conn, started.elapsed().as_millis())),
        Ok(Err(e)) => Err(Finding::fail(
            NAME,
            format!("connected, but PING failed: {e}"),
            fix,
        )),
        Err(_) => Err(Finding::fail(
            NAME,
            format!(
                "connected, but no answer to PING within {} s",
                TIMEOUT.as_secs()
            ),
            fix,
        )),
    }
}

fn slow_redis() -> Finding {
    Finding::fail(
        "connection",
        format!("Redis did not answer within {} s", TIMEOUT.as_secs()),
        "look at Redis's latency (redis-cli --latency) and slow log",
    )
}

async fn diagnose_url(url: &str, prefix: &str, settings: Option<&RedisSettings>) -> Report {
    const NAME: &str = "connection";
    let fix = "check the URL (--redis, redis.url or KEYFIRE__REDIS__URL), that Redis is running \
               and reachable from here, and its password";
    let shown = redact_url(url);
    let client = match settings {
        Some(s) => data_client(url, s),
        None => Client::open(url),
    };
    let client = match client {
        Ok(c) => c,
        Err(e) => {
            let f = Finding::fail(NAME, format!("bad Redis URL: {e}"), fix);
            return Report::new(shown, prefix, vec![f]);
        }
    };
    let (mut conn, ms) = match connect(&client, fix).await {
        Ok(c) => c,
        Err(f) => return Report::new(shown, prefix, vec![f]),
    };
    let connected = Finding::ok(NAME, format!("connected in {ms} ms"));
    let Ok(mut facts) = tokio::time::timeout(TIMEOUT, gather(&mut conn, prefix)).await else {
        return Report::new(shown, prefix, vec![slow_redis()]);
    };
    facts.expected_shards = settings.map(|s| s.shards);
    let mut findings = vec![connected];
    findings.extend(evaluate(&facts));
    Report::new(shown, prefix, findings)
}

/// Sentinel and cluster mode: connect as a node does, check every master, then the
/// deployment.
async fn diagnose_topology(s: &RedisSettings) -> Report {
    const NAME: &str = "connection";
    let shown = s
        .nodes
        .iter()
        .map(|n| redact_url(n))
        .collect::<Vec<_>>()
        .join(", ");
    let finish = |findings: Vec<Finding>, servers: Vec<String>| {
        let mut r = Report::new(shown.clone(), &s.prefix, findings);
        r.mode = s.mode;
        r.servers = servers;
        r
    };
    let fix = match s.mode {
        Mode::Sentinel => {
            "check redis.nodes (the sentinels' addresses; KEYFIRE__REDIS__NODES) and \
             redis.sentinel_master, that the sentinels and the master run and are reachable from \
             here, and redis.username and redis.password"
        }
        _ => {
            "check redis.nodes (seed nodes of the cluster; KEYFIRE__REDIS__NODES), that the \
             cluster runs and is reachable from here, and redis.username and redis.password"
        }
    };
    let started = Instant::now();
    let conn = match tokio::time::timeout(TIMEOUT, Conn::connect(s)).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            let f = Finding::fail(NAME, format!("cannot connect: {e}"), fix);
            return finish(vec![f], Vec::new());
        }
        Err(_) => {
            let f = Finding::fail(
                NAME,
                format!("no connection within {} s", TIMEOUT.as_secs()),
                fix,
            );
            return finish(vec![f], Vec::new());
        }
    };
    let masters = match tokio::time::timeout(TIMEOUT, conn.masters()).await {
        Ok(Ok(m)) => m,
        Ok(Err(e)) => {
            let f = Finding::fail(
                NAME,
                format!("connected, but cannot list the masters: {e}"),
                fix,
            );
            return finish(vec![f], Vec::new());
        }
        Err(_) => return finish(vec![slow_redis()], Vec::new()),
    };
    let addrs: Vec<String> = masters.iter().map(client_addr).collect();
    let mut findings = vec![Finding::ok(
        NAME,
        format!(
            "connected in {} ms; {} master(s): {}",
            started.elapsed().as_millis(),
            addrs.len(),
            addrs.join(", ")
        ),
    )];

    // Each master's own checks, all at once.
    let servers: Vec<(Option<Facts>, Vec<Finding>)> = futures::future::join_all(
        masters
            .iter()
            .zip(&addrs)
            .map(|(client, addr)| check_server(client, addr)),
    )
    .await;
    let replicas: Vec<(String, Option<usize>)> = addrs
        .iter()
        .zip(&servers)
        .map(|(addr, (facts, _))| (addr.clone(), facts.as_ref().and_then(replica_count)))
        .collect();

    // The deployment's own checks.
    match s.mode {
        Mode::Cluster => {
            findings.push(check_cluster_replicas(&replicas));
            findings.push(shard_spread(&conn, s, &addrs).await);
            findings.push(check_shard_count(s.shards, addrs.len()));
        }
        Mode::Sentinel => {
            let answers = sentinel_answers(s).await;
            findings.push(check_sentinels(&s.sentinel_master, &answers));
            findings.push(check_sentinel_replicas(&replicas));
        }
        Mode::Standalone => {}
    }
    findings.extend(data_findings(&conn, s).await);
    for (_, server_findings) in servers {
        findings.extend(server_findings);
    }
    finish(findings, addrs)
}

/// A client for a data server at `url`, with the settings' credentials (which override the
/// URL's) and TLS applied, as `Conn` applies them.
fn data_client(url: &str, s: &RedisSettings) -> RedisResult<Client> {
    let info = url.into_connection_info()?;
    let mut redis_info = info.redis_settings().clone();
    if let Some(user) = &s.username {
        redis_info = redis_info.set_username(user);
    }
    if let Some(password) = &s.password {
        redis_info = redis_info.set_password(password);
    }
    tls_client(info.set_redis_settings(redis_info), s)
}

/// A client for `info`, over TLS when `redis.tls` is on (trusting `redis.tls_ca`).
fn tls_client(info: redis::ConnectionInfo, s: &RedisSettings) -> RedisResult<Client> {
    if !s.tls {
        return Client::open(info);
    }
    // rustls needs a process-wide crypto provider (keyfire builds it with ring only);
    // installing fails harmlessly when one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let addr = match info.addr().clone() {
        ConnectionAddr::Tcp(host, port) => ConnectionAddr::TcpTls {
            host,
            port,
            insecure: s.tls_insecure,
            tls_params: None,
        },
        ConnectionAddr::TcpTls {
            host,
            port,
            insecure,
            ..
        } => ConnectionAddr::TcpTls {
            host,
            port,
            insecure: insecure || s.tls_insecure,
            tls_params: None,
        },
        other => other,
    };
    let info = info.set_addr(addr);
    match &s.tls_ca {
        Some(path) if !s.tls_insecure => {
            let pem = std::fs::read(path)?;
            Client::build_with_tls(
                info,
                TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem),
                },
            )
        }
        _ => Client::open(info),
    }
}

/// One master's checks, each finding labelled with `addr`; its facts when it could be read.
async fn check_server(client: &Client, addr: &str) -> (Option<Facts>, Vec<Finding>) {
    let fix = "check that this master runs and is reachable from here at the address the \
               deployment announces (cluster-announce-ip, replica-announce-ip), and \
               redis.username and redis.password";
    let (mut conn, ms) = match connect(client, fix).await {
        Ok(c) => c,
        Err(f) => return (None, vec![f.on(addr)]),
    };
    let connected = Finding::ok("connection", format!("connected in {ms} ms")).on(addr);
    let Ok(facts) = tokio::time::timeout(TIMEOUT, gather_server(&mut conn)).await else {
        return (None, vec![slow_redis().on(addr)]);
    };
    let mut findings = vec![connected];
    findings.extend(
        evaluate_scope(&facts, Scope::Server)
            .into_iter()
            .map(|f| f.on(addr)),
    );
    (Some(facts), findings)
}

/// The replicas connected to a master, from its `INFO`.
fn replica_count(facts: &Facts) -> Option<usize> {
    if facts.info("role")? != "master" {
        return None;
    }
    facts.info("connected_slaves")?.parse().ok()
}

/// The [`Scope::Data`] findings, read through `conn` (so from the meta tag's master).
async fn data_findings(conn: &Conn, s: &RedisSettings) -> Vec<Finding> {
    let mut facts = Facts {
        prefix: s.prefix.clone(),
        expected_shards: Some(s.shards),
        ..Facts::default()
    };
    if s.mode == Mode::Cluster {
        let layout = vec![Keys::new(&s.prefix).layout()];
        if let Ok(Ok(owner)) = tokio::time::timeout(TIMEOUT, conn.master_of_keys(&layout)).await {
            facts.meta_server = owner.into_iter().next();
        }
    }
    let mut c = conn.clone();
    if tokio::time::timeout(TIMEOUT, gather_data(&mut c, &mut facts))
        .await
        .is_err()
    {
        facts.layout_error = Some(format!("no answer within {} s", TIMEOUT.as_secs()));
    }
    evaluate_scope(&facts, Scope::Data)
}

/// Cluster mode: which master holds each of the `redis.shards` shards.
async fn shard_spread(conn: &Conn, s: &RedisSettings, masters: &[String]) -> Finding {
    const NAME: &str = "shard-spread";
    let keys: Vec<String> = Shards::new(&s.prefix, s.shards as usize)
        .iter()
        .map(Keys::jobs)
        .collect();
    let fix = "check the cluster's slot map: redis-cli --cluster check <host:port>";
    let owners = match tokio::time::timeout(TIMEOUT, conn.master_of_keys(&keys)).await {
        Ok(Ok(owners)) => owners,
        Ok(Err(e)) => {
            return Finding::warn(
                NAME,
                format!("cannot tell which master holds each shard ({e})"),
                fix,
            );
        }
        Err(_) => {
            return Finding::warn(
                NAME,
                format!(
                    "cannot tell which master holds each shard (no answer within {} s)",
                    TIMEOUT.as_secs()
                ),
                fix,
            );
        }
    };
    let mut per_master: Vec<(String, usize)> = masters.iter().map(|m| (m.clone(), 0)).collect();
    for owner in owners {
        match per_master.iter_mut().find(|(m, _)| *m == owner) {
            Some((_, n)) => *n += 1,
            None => per_master.push((owner, 1)),
        }
    }
    check_shard_spread(s.shards, &per_master)
}

/// Cluster mode: the shards should spread evenly over the masters (`per_master`: how many
/// each holds), or some masters carry more of keyfire's load than others.
pub fn check_shard_spread(shards: u32, per_master: &[(String, usize)]) -> Finding {
    const NAME: &str = "shard-spread";
    let masters = per_master.len();
    let min = per_master.iter().map(|(_, n)| *n).min().unwrap_or(0);
    let max = per_master.iter().map(|(_, n)| *n).max().unwrap_or(0);
    let list = per_master
        .iter()
        .map(|(m, n)| format!("{m}: {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    if min > 0 && max - min <= 1 {
        return Finding::ok(
            NAME,
            format!("the {shards} shard(s) spread evenly over the {masters} masters ({list})"),
        );
    }
    let why = if min == 0 {
        "a master holding no shard does none of keyfire's work, the others carry it all"
    } else {
        "the masters holding more shards carry more of keyfire's load"
    };
    Finding::warn(
        NAME,
        format!("the {shards} shard(s) spread unevenly over the {masters} masters ({list}): {why}"),
        format!(
            "under a new redis.prefix, choose redis.shards as a multiple of {masters} (each shard \
             takes an equal slot range, so a multiple spreads evenly over masters with equal \
             ranges; a prefix keeps the shard count its data was written with); if the masters' \
             slot ranges differ, rebalance them: redis-cli --cluster rebalance <host:port>"
        ),
    )
}

/// Cluster mode: `redis.shards` below the number of masters leaves masters idle.
pub fn check_shard_count(shards: u32, masters: usize) -> Finding {
    const NAME: &str = "shard-count";
    if shards as usize >= masters {
        return Finding::ok(
            NAME,
            format!(
                "redis.shards = {shards}: at least one shard for each of the {masters} masters"
            ),
        );
    }
    Finding::warn(
        NAME,
        format!(
            "redis.shards = {shards} but the cluster has {masters} masters: at least {} of them \
             hold no shard, and keyfire's load falls on the others",
            masters - shards as usize
        ),
        format!(
            "set redis.shards to a multiple of {masters} (such as {}) before the first node \
             writes data under the prefix; a prefix keeps its shard count, so for existing data \
             start under a new redis.prefix",
            masters * 4
        ),
    )
}

/// Cluster mode: every master should have a replica to fail over to (`replicas`: master and
/// its connected replicas, `None` when unknown).
pub fn check_cluster_replicas(replicas: &[(String, Option<usize>)]) -> Finding {
    const NAME: &str = "replicas";
    let without: Vec<&str> = replicas
        .iter()
        .filter(|(_, n)| *n == Some(0))
        .map(|(m, _)| m.as_str())
        .collect();
    let unknown: Vec<&str> = replicas
        .iter()
        .filter(|(_, n)| n.is_none())
        .map(|(m, _)| m.as_str())
        .collect();
    if !without.is_empty() {
        return Finding::warn(
            NAME,
            format!(
                "{} of the {} masters have no replica ({}): when one fails, its slots and the \
                 shards on them stay down until it is back (nothing on them fires), and with \
                 cluster-require-full-coverage yes (the default) the whole cluster refuses \
                 commands meanwhile",
                without.len(),
                replicas.len(),
                without.join(", ")
            ),
            "give every master a replica: redis-cli --cluster add-node <new host:port> \
             <any node's host:port> --cluster-slave --cluster-master-id <the master's id>",
        );
    }
    if !unknown.is_empty() {
        return Finding::warn(
            NAME,
            format!(
                "cannot tell whether {} have replicas (their INFO could not be read)",
                unknown.join(", ")
            ),
            "check by hand: redis-cli -h <host> -p <port> INFO replication",
        );
    }
    Finding::ok(
        NAME,
        format!(
            "each of the {} masters has a replica to fail over to",
            replicas.len()
        ),
    )
}

/// Sentinel mode: the master should have a replica for the sentinels to promote.
pub fn check_sentinel_replicas(replicas: &[(String, Option<usize>)]) -> Finding {
    const NAME: &str = "replicas";
    match replicas.first() {
        Some((_, Some(0))) | None => Finding::warn(
            NAME,
            format!(
                "the master{} has no replica: the sentinels have nothing to fail over to, so \
                 while it is down nothing fires",
                replicas
                    .first()
                    .map(|(m, _)| format!(" {m}"))
                    .unwrap_or_default()
            ),
            "start a replica of it (`replicaof <master host> <port>` in the replica's \
             redis.conf); the sentinels find it by themselves",
        ),
        Some((master, None)) => Finding::warn(
            NAME,
            format!(
                "cannot tell whether the master {master} has replicas (its INFO could not be read)"
            ),
            "check by hand: redis-cli -h <host> -p <port> INFO replication",
        ),
        Some((master, Some(n))) => Finding::ok(
            NAME,
            format!("the master {master} has {n} replica(s) the sentinels can promote"),
        ),
    }
}

/// What one sentinel answered to `SENTINEL get-master-addr-by-name`: the master's
/// `host:port`, `None` when it does not monitor that name, or why it could not be asked.
pub type SentinelAnswer = std::result::Result<Option<String>, String>;

/// Ask every sentinel of `redis.nodes` for the master of `redis.sentinel_master`.
async fn sentinel_answers(s: &RedisSettings) -> Vec<(String, SentinelAnswer)> {
    futures::future::join_all(s.nodes.iter().map(|node| async move {
        let shown = node_addr(node)
            .map(|(host, port)| format!("{host}:{port}"))
            .unwrap_or_else(|| redact_url(node));
        (shown, ask_sentinel(node, s).await)
    }))
    .await
}

async fn ask_sentinel(node: &str, s: &RedisSettings) -> SentinelAnswer {
    let url = if node.contains("://") {
        node.to_string()
    } else {
        format!("redis://{node}")
    };
    // A sentinel's credentials come from its URL, not from redis.username and redis.password.
    let client = url
        .as_str()
        .into_connection_info()
        .and_then(|info| tls_client(info, s))
        .map_err(|e| e.to_string())?;
    let ask = async {
        let mut conn = client.get_multiplexed_async_connection().await?;
        redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(&s.sentinel_master)
            .query_async::<Option<(String, u16)>>(&mut conn)
            .await
    };
    match tokio::time::timeout(TIMEOUT, ask).await {
        Ok(Ok(addr)) => Ok(addr.map(|(host, port)| format!("{host}:{port}"))),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {} s", TIMEOUT.as_secs())),
    }
}

/// Sentinel mode: the sentinels should agree on the master of `service` (`answers`: each
/// sentinel's answer).
pub fn check_sentinels(service: &str, answers: &[(String, SentinelAnswer)]) -> Finding {
    const NAME: &str = "sentinels";
    let mut named: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut unreachable = Vec::new();
    let mut unaware = Vec::new();
    for (sentinel, answer) in answers {
        match answer {
            Ok(Some(master)) => named.entry(master).or_default().push(sentinel),
            Ok(None) => unaware.push(sentinel.as_str()),
            Err(e) => unreachable.push(format!("{sentinel} ({e})")),
        }
    }
    if named.len() > 1 {
        let views = named
            .iter()
            .map(|(master, who)| format!("{} name {master}", who.join(", ")))
            .collect::<Vec<_>>()
            .join("; ");
        return Finding::fail(
            NAME,
            format!(
                "the sentinels disagree on the master of '{service}' ({views}): nodes asking \
                 different sentinels may write to different masters, and a firing could run twice"
            ),
            format!(
                "wait for a failover in progress to end and run keyfire doctor again; if they \
                 still disagree, check the sentinels' network and that each has the same \
                 `sentinel monitor {service} ...` line"
            ),
        );
    }
    let Some((master, agreeing)) = named.into_iter().next() else {
        return Finding::fail(
            NAME,
            format!("no sentinel in redis.nodes names a master for '{service}'"),
            format!(
                "check redis.sentinel_master ('{service}') against the sentinels' `sentinel \
                 monitor` lines, and that redis.nodes lists the sentinels"
            ),
        );
    };
    let mut problems = Vec::new();
    if !unreachable.is_empty() {
        problems.push(format!("no answer from {}", unreachable.join(", ")));
    }
    if !unaware.is_empty() {
        problems.push(format!("{} do not monitor '{service}'", unaware.join(", ")));
    }
    let agree = format!(
        "{} of the {} sentinels in redis.nodes name {master} as the master of '{service}'",
        agreeing.len(),
        answers.len()
    );
    if problems.is_empty() {
        return Finding::ok(NAME, agree);
    }
    Finding::warn(
        NAME,
        format!(
            "{agree}; {}: nodes cannot ask those, and fewer sentinels are left to agree on a \
             failover",
            problems.join("; ")
        ),
        format!(
            "make every sentinel of redis.nodes reachable from here and monitor '{service}' \
             (`sentinel monitor {service} <host> <port> <quorum>`), or drop it from redis.nodes"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(server.len(), CHECKS.len() - 2);
        assert!(!server.contains(&"layout") && !server.contains(&"acl"));
        let data: Vec<&str> = evaluate_scope(&good(), Scope::Data)
            .iter()
            .map(|f| f.check)
            .collect();
        assert_eq!(data, ["layout", "acl"]);
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
            "redis://***@db.example:6379/0"
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
