//! The per-server checks: one pure function of [`Facts`] each.

use std::collections::BTreeMap;

use keyfire::inspect::{
    LAYOUT_VERSION, LAYOUTS_UNDERSTOOD, has_expired_events, layout_key, shard_count_key,
};

use super::*;

/// `7.0.15` → (7, 0).
pub(crate) fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split('.');
    let major = parts.next()?.trim().parse().ok()?;
    let minor = parts.next().and_then(|m| m.parse().ok()).unwrap_or(0);
    Some((major, minor))
}

pub(crate) fn check_version(f: &Facts) -> Finding {
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

pub(crate) fn check_notifications(f: &Facts) -> Finding {
    const NAME: &str = "notifications";
    let Some(flags) = f.config("notify-keyspace-events") else {
        return match &f.expiry_probe {
            Some(Ok(Some(ms))) => Finding::ok(
                NAME,
                format!(
                    "expired key events arrive: checked by a probe key, whose event came in {ms} \
                     ms (notify-keyspace-events itself cannot be read: CONFIG is unavailable)"
                ),
            ),
            Some(Ok(None)) => Finding::fail(
                NAME,
                format!(
                    "no expired event arrived for a probe key within {} s, and \
                     notify-keyspace-events cannot be read (CONFIG is unavailable): firings wait \
                     for the sweeper, and a node refuses to start",
                    keyfire::inspect::PROBE_BOUND.as_secs()
                ),
                "set the parameter notify-keyspace-events to Ex in the service's settings \
                 (ElastiCache and MemoryDB: the parameter group; Memorystore: Redis configs; \
                 Azure: keyspace notifications; see docs/operations.md, Managed Redis)",
            ),
            Some(Err(why)) => Finding::warn(
                NAME,
                format!(
                    "cannot read notify-keyspace-events (CONFIG is unavailable), and the probe \
                     key failed: {why}"
                ),
                "give the Redis user SET, EXISTS and PSUBSCRIBE on __keyevent@<db>__:expired \
                 (redis/keyfire.acl), or check the setting in the service's console",
            ),
            None => f.unreadable(NAME, "notify-keyspace-events"),
        };
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

/// The settings the checks read with `CONFIG GET` that `INFO` does not show, so a managed
/// Redis leaves them unchecked.
const NOT_IN_INFO: &[&str] = &[
    "appendfsync",
    "save",
    "dynamic-hz",
    "client-output-buffer-limit",
    "hash-max-listpack-value",
];

pub(crate) fn check_config_access(f: &Facts) -> Finding {
    const NAME: &str = "config-access";
    let Some(why) = f.config_error.as_deref() else {
        return Finding::ok(NAME, "CONFIG GET reads every setting checked here");
    };
    let probed = match &f.expiry_probe {
        Some(Ok(Some(_))) => "; expired key events checked by a probe key",
        Some(_) => "; expired key events probed, without success (see notifications)",
        None => "",
    };
    let unchecked: Vec<&str> = NOT_IN_INFO
        .iter()
        .copied()
        .filter(|name| !f.config.contains_key(*name))
        .collect();
    let from_info = if f.from_info.is_empty() {
        "nothing".to_string()
    } else {
        f.from_info.join(", ")
    };
    // A managed service refuses CONFIG by design: not a fault of the deployment, so not a
    // warning of its own; the checks left blind warn each.
    Finding::ok(
        NAME,
        format!(
            "CONFIG GET is refused ({why}), as managed Redis services do: read {from_info} from \
             INFO{probed}; cannot check {} (see docs/operations.md, Managed Redis, for what each \
             service sets)",
            if unchecked.is_empty() {
                "nothing else".to_string()
            } else {
                unchecked.join(", ")
            }
        ),
    )
}

pub(crate) fn check_eviction(f: &Facts) -> Finding {
    const NAME: &str = "eviction";
    let Some(policy) = f.config("maxmemory-policy") else {
        return f.unreadable(NAME, "maxmemory-policy");
    };
    if policy == "noeviction" {
        return Finding::ok(
            NAME,
            format!(
                "maxmemory-policy is noeviction{}: keyfire's keys are never evicted",
                f.source_note("maxmemory-policy")
            ),
        );
    }
    let limit = match f.config("maxmemory") {
        Some("0") => " (maxmemory is 0, so nothing is evicted until a limit is set)",
        _ => "",
    };
    Finding::fail(
        NAME,
        format!(
            "maxmemory-policy is {policy}{}: Redis may evict sentinel keys (an evicted key emits \
             `evicted`, not `expired`), run locks (a firing could run twice) and job data{limit}",
            f.source_note("maxmemory-policy")
        ),
        "put `maxmemory-policy noeviction` in redis.conf and apply it now: \
         redis-cli CONFIG SET maxmemory-policy noeviction (keep caches in another Redis)",
    )
}

/// Share of `maxmemory` in use from which `keyfire doctor` warns: early enough to act before
/// `/readyz` says not ready (95%) and Redis refuses writes (100%).
pub(crate) const MEMORY_WARN_RATIO: f64 = 0.8;

pub(crate) fn check_memory(f: &Facts) -> Finding {
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
            if share >= MEMORY_WARN_RATIO {
                Finding::warn(
                    NAME,
                    format!(
                        "{text}, {:.0}% or more: with noeviction a full Redis refuses writes \
                         (the API answers 507 redis_full, /readyz says not ready from 95%), so \
                         creates, adds and claims fail",
                        MEMORY_WARN_RATIO * 100.0
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

pub(crate) fn check_persistence(f: &Facts) -> Finding {
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
            None => Finding::ok(NAME, format!("AOF on{}", f.source_note("appendonly"))),
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

pub(crate) fn check_hz(f: &Facts) -> Finding {
    const NAME: &str = "hz";
    let Some(hz) = f.config("hz").and_then(|h| h.parse::<u64>().ok()) else {
        return f.unreadable(NAME, "hz");
    };
    let note = f.source_note("hz");
    if hz >= RECOMMENDED_HZ {
        return Finding::ok(NAME, format!("hz is {hz}{note}"));
    }
    let dynamic = if f.config("dynamic-hz") == Some("yes") {
        " (dynamic-hz raises it only with many clients)"
    } else {
        ""
    };
    Finding::warn(
        NAME,
        format!(
            "hz is {hz}{note}{dynamic}: Redis runs its active expire cycle and checks the timeouts of \
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
pub(crate) const RECOMMENDED_LISTPACK_VALUE: u64 = 1024;
/// Below this, a typical job record or compact task record (its spec JSON) does not fit a
/// listpack.
pub(crate) const MIN_LISTPACK_VALUE: u64 = 512;

pub(crate) fn check_hash_encoding(f: &Facts) -> Finding {
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
            "hash-max-listpack-value is {value}: a job record or a bucket of pending tasks \
             holding a value longer than that (a spec JSON is ~60 bytes, more with params) is \
             stored as a hash table, 266 instead of 208 bytes of Redis memory per pending task \
             (measured, `keyfire bench sparse`)"
        ),
        format!(
            "put `hash-max-listpack-value {RECOMMENDED_LISTPACK_VALUE}` in redis.conf and apply \
             it now: redis-cli CONFIG SET hash-max-listpack-value {RECOMMENDED_LISTPACK_VALUE} \
             (new records only; existing ones shrink when Redis reloads them)"
        ),
    )
}

/// `ip=10.0.0.2,port=6379,state=online,offset=123,lag=0` → its fields.
pub(crate) fn replica_fields(line: &str) -> BTreeMap<&str, &str> {
    line.split(',')
        .filter_map(|kv| kv.split_once('='))
        .collect()
}

pub(crate) fn check_replication(f: &Facts) -> Finding {
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

pub(crate) fn check_clock(f: &Facts) -> Finding {
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

pub(crate) fn mib(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.0} MiB", bytes as f64 / (1u64 << 20) as f64)
    } else {
        format!("{:.0} KiB", bytes as f64 / 1024.0)
    }
}

pub(crate) fn check_pubsub_buffer(f: &Facts) -> Finding {
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

pub(crate) fn check_layout(f: &Facts) -> Finding {
    const NAME: &str = "layout";
    let key = layout_key(&f.prefix);
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
                            shard_count_key(&f.prefix),
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

pub use keyfire::inspect::parse_info;

/// Where the least privilege keyfire needs is written down.
pub(crate) const ACL_FILE: &str = "redis/keyfire.acl";

pub(crate) fn check_acl(f: &Facts) -> Finding {
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

pub(crate) fn check_data_loss(f: &Facts) -> Finding {
    const NAME: &str = "data-loss";
    let Some(loss) = &f.data_loss else {
        return Finding::ok(NAME, "no data loss noticed within the last hour");
    };
    let when = chrono::DateTime::from_timestamp_millis(loss.at_ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| loss.at_ms.to_string());
    Finding::warn(
        NAME,
        format!(
            "Redis lost keyfire's data at {when} (noticed by node {}: {}): jobs, tasks and queue \
             tasks created at run time before then are gone; the nodes wrote back their \
             registrations and declared jobs, topics and flow limits",
            loss.node, loss.detail
        ),
        "re-create what was created at run time; keep it next time with Redis persistence \
         (appendonly yes), replicas and redis.wait_replicas = 1 (docs/operations.md, \
         \"When Redis loses data\"); `keyfire doctor --ack-data-loss` clears this finding \
         (it goes by itself after an hour)",
    )
}

#[cfg(test)]
mod memory_tests {
    use super::*;

    fn at(used: u64, max: u64) -> Finding {
        let mut f = Facts::default();
        f.info.insert("used_memory".into(), used.to_string());
        f.config.insert("maxmemory".into(), max.to_string());
        check_memory(&f)
    }

    #[test]
    fn memory_warns_from_80_percent_of_maxmemory() {
        let mb = 1024 * 1024;
        assert_eq!(at(79 * mb, 100 * mb).status, Status::Ok);
        let warn = at(80 * mb, 100 * mb);
        assert_eq!(warn.status, Status::Warn, "{warn:?}");
        assert!(warn.message.contains("80%"), "{warn:?}");
        assert_eq!(
            at(99 * mb, 0).status,
            Status::Ok,
            "no maxmemory, no warning"
        );
    }
}
