//! Reading the facts the checks need from one server.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use keyfire::inspect::{Data, Server, ServerConn};

use super::*;

pub(crate) fn now_ms_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

/// Sample `TIME` a few times and keep the sample with the shortest round trip.
pub(crate) async fn sample_clock(conn: &mut ServerConn) -> keyfire::Result<ClockSample> {
    let mut best: Option<(f64, f64)> = None; // (rtt ms, offset ms)
    for _ in 0..5 {
        let local = now_ms_f64();
        let started = Instant::now();
        let time = conn.time().await?;
        let rtt = started.elapsed().as_secs_f64() * 1000.0;
        let redis_ms = time.as_secs_f64() * 1000.0;
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
pub async fn gather(conn: &mut ServerConn, prefix: &str) -> Facts {
    let mut facts = gather_server(conn).await;
    facts.prefix = prefix.to_string();
    gather_data(&conn.data(prefix), &mut facts).await;
    facts
}

/// Read what the [`Scope::Server`] checks need: `INFO`, `CONFIG GET`, `TIME`. Errors are
/// recorded in the facts, never returned.
pub async fn gather_server(conn: &mut ServerConn) -> Facts {
    let mut facts = Facts::default();
    // Plain INFO: its default sections hold everything needed, on every Redis version.
    match conn.info().await {
        Ok(info) => facts.info = info,
        Err(e) => facts.info_error = Some(e.to_string()),
    }
    // One parameter at a time: several in one CONFIG GET needs Redis 7.
    for name in CONFIG_PARAMS {
        match conn.config_get(name).await {
            Ok(value) => match value {
                Some(value) => {
                    facts.config.insert(name.to_string(), value);
                }
                // Some services answer an empty list for what they do not expose (Upstash).
                None => {
                    facts
                        .config_error
                        .get_or_insert_with(|| format!("CONFIG GET {name} answered no value"));
                }
            },
            Err(e) => {
                facts
                    .config_error
                    .get_or_insert_with(|| e.to_string().trim().to_string());
            }
        }
    }
    fill_from_info(&mut facts);
    match sample_clock(conn).await {
        Ok(c) => facts.clock = Some(c),
        Err(e) => facts.clock_error = Some(e.to_string()),
    }
    facts
}

/// (`CONFIG GET` name, `INFO` field, how to turn the `INFO` value into the setting's).
type FromInfo = (&'static str, &'static str, fn(&str) -> String);

/// Settings `INFO` shows too (its default sections), for a server that refuses `CONFIG`.
const FROM_INFO: &[FromInfo] = &[
    ("maxmemory", "maxmemory", str::to_string),
    ("maxmemory-policy", "maxmemory_policy", str::to_string),
    ("hz", "configured_hz", str::to_string),
    ("appendonly", "aof_enabled", |v| {
        if v == "1" { "yes" } else { "no" }.to_string()
    }),
];

/// Fill the settings `CONFIG GET` could not read from `INFO`, where it shows them.
pub(crate) fn fill_from_info(facts: &mut Facts) {
    for (name, field, convert) in FROM_INFO {
        if facts.config.contains_key(*name) {
            continue;
        }
        // Redis before 6.2 has no configured_hz: its `hz` is the setting then.
        let value = facts
            .info
            .get(*field)
            .or_else(|| (*name == "hz").then(|| facts.info.get("hz")).flatten());
        if let Some(value) = value {
            facts.config.insert(name.to_string(), convert(value));
            facts.from_info.push(name);
        }
    }
}

/// Where `notify-keyspace-events` could not be read (a managed Redis refuses `CONFIG`), check
/// expired events the way a node does at start: a probe key under `prefix` with a 1 ms TTL,
/// whose event must reach a subscription on `server` (see
/// [`keyfire::inspect::Server::probe_expired_events`]). `key` is the probe key to use
/// (`None`: one under the meta tag).
pub async fn probe_notifications(server: &Server, facts: &mut Facts, key: Option<String>) {
    if facts.config.contains_key("notify-keyspace-events") {
        return;
    }
    let key = key.unwrap_or_else(|| keyfire::inspect::probe_key(&facts.prefix));
    let bound = keyfire::inspect::PROBE_BOUND;
    facts.expiry_probe = Some(match server.probe_expired_events(&key, bound).await {
        Ok(took) => Ok(took.map(|d| d.as_millis() as u64)),
        Err(e) => Err(e.to_string()),
    });
}

/// Read what the [`Scope::Data`] checks need into `facts`: whether the Redis user may run
/// what keyfire needs, the layout version and shard count under `facts.prefix`, and the jobs
/// of every shard. `data` must reach each key on its master ([`Data`] from a
/// [`keyfire::inspect::Deployment`] does, in every mode).
pub async fn gather_data(data: &Data, facts: &mut Facts) {
    facts.acl_denied = Some(data.acl_denied().await);
    facts.data_loss = data.data_loss().await.ok().flatten();
    match data.layout().await {
        Ok(stored) => {
            facts.layout = stored.version;
            facts.shard_count = stored.shards;
        }
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
    facts.jobs = data.job_count(stored).await.ok();
}
