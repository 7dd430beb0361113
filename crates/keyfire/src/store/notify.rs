//! Keyspace notifications: keyfire needs `expired` key events.
//!
//! The setting is read with `CONFIG GET notify-keyspace-events`. Managed services (ElastiCache,
//! MemoryDB, Aiven, ...) forbid `CONFIG` and set it in their parameter groups instead; there
//! the events are checked by a probe: a key under the prefix with a 1 ms TTL, whose `expired`
//! event must arrive on a subscription like the node's own within [`PROBE_BOUND`].

use std::time::{Duration, Instant};

use futures::StreamExt;
use redis::RedisError;

use crate::error::{Error, Result};

/// How long the probe waits for its key's `expired` event. The key is read right after its
/// TTL passes, which expires it on the spot (Redis expires a key that is read past its TTL
/// and emits the event then), so the event comes in a round trip or two; the bound covers a
/// slow network and a busy server.
pub const PROBE_BOUND: Duration = Duration::from_secs(3);

/// What to set where keyfire cannot set it, for the messages.
const ADVICE: &str =
    "set `notify-keyspace-events Ex` in redis.conf (or run `CONFIG SET notify-keyspace-events Ex`)";
const MANAGED_ADVICE: &str = "set the parameter `notify-keyspace-events` to `Ex` (or any value with E and x, such as `KEA`) where the service keeps Redis settings (ElastiCache and MemoryDB: the cluster's parameter group; Memorystore: the instance's Redis configs; Azure Cache for Redis: Advanced settings, keyspace notifications; Aiven: the service's advanced configuration); see docs/operations.md, Managed Redis";

/// Whether a `notify-keyspace-events` value includes expired key events (`E` with `x` or `A`).
pub fn has_expired_events(flags: &str) -> bool {
    flags.contains('E') && (flags.contains('x') || flags.contains('A'))
}

/// Whether `e` is the server refusing a command it does not offer this user: renamed away or
/// unknown (`ERR unknown command`, as managed services answer `CONFIG`), or denied by an ACL
/// (`NOPERM`). A connection failure or a timeout is not: nothing was learnt.
pub fn is_command_unavailable(e: &RedisError) -> bool {
    if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
        return false;
    }
    matches!(e.code(), Some("ERR" | "NOPERM"))
        || e.to_string().contains("unknown command")
        || e.to_string().contains("NOPERM")
}

/// How a server's expired events were found on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Events {
    /// `CONFIG GET` shows them on.
    On,
    /// They were off and keyfire turned them on with `CONFIG SET` (allowed by
    /// `redis.enable_notifications`).
    TurnedOn,
    /// `CONFIG` is not available; a probe key's event arrived after this long.
    Probed(Duration),
    /// `CONFIG` is not available and the probe was not asked for (the periodic re-check).
    Unchecked,
}

/// A key for the probe of `prefix`'s server: under the meta tag, with a random part so that
/// probes of several nodes starting at once do not meet.
pub fn probe_key(prefix: &str) -> String {
    probe_key_tagged(&format!("{{{prefix}}}"))
}

fn probe_key_tagged(tag: &str) -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{tag}:expiry-probe:{}", &id[..12])
}

/// Candidate hash tags for a probe key on a cluster master that holds none of the shards the
/// meta tag names: `{prefix:probe:k}`, which the shipped ACL's `{prefix:*` key pattern covers.
pub fn probe_tags(prefix: &str, count: usize) -> Vec<String> {
    (0..count)
        .map(|k| format!("{{{prefix}:probe:{k}}}"))
        .collect()
}

/// A probe key for each of `masters` (as [`super::Conn::masters`] lists them) under
/// `prefix`: one of the meta tag where there is one master; in a cluster, one whose slot that
/// master serves, since events are local to the server that expires the key (`None` for a
/// master none of the candidate tags falls on).
pub async fn probe_keys(
    conn: &super::Conn,
    prefix: &str,
    masters: &[redis::Client],
) -> Result<Vec<Option<String>>> {
    if masters.len() <= 1 {
        return Ok(vec![Some(probe_key(prefix)); masters.len()]);
    }
    let tags = probe_tags(prefix, 64 * masters.len());
    let owners = conn.master_of_keys(&tags).await?;
    Ok(masters
        .iter()
        .map(|m| {
            let addr = super::client_addr(m);
            tags.iter()
                .zip(&owners)
                .find(|(_, owner)| **owner == addr)
                .map(|(tag, _)| probe_key_tagged(tag))
        })
        .collect())
}

/// Probe `client`'s server: subscribe to its expired events as the node does, write `key`
/// with a 1 ms TTL, read it back once the TTL passed (which expires it), and wait up to
/// `bound` for its event. Ok(Some(elapsed)) when it came, Ok(None) when it did not.
pub async fn probe_expired_events(
    client: &redis::Client,
    key: &str,
    bound: Duration,
) -> Result<Option<Duration>> {
    let db = client.get_connection_info().redis_settings().db();
    let pattern = format!("__keyevent@{db}__:expired");
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.psubscribe(&pattern).await?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let started = Instant::now();
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg("1")
        .arg("PX")
        .arg(1)
        .query_async(&mut conn)
        .await?;
    let mut messages = pubsub.on_message();
    let mut poke = tokio::time::interval(Duration::from_millis(50));
    let deadline = tokio::time::sleep(bound);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            _ = &mut deadline => {
                // Leave nothing behind (the key may still be there when events are off).
                let _: std::result::Result<(), _> =
                    redis::cmd("DEL").arg(key).query_async(&mut conn).await;
                return Ok(None);
            }
            _ = poke.tick() => {
                // Reading a key past its TTL expires it now, with its event; the first tick
                // is immediate, so this waits for the next ones.
                if started.elapsed() >= Duration::from_millis(2) {
                    let _: i64 = redis::cmd("EXISTS").arg(key).query_async(&mut conn).await?;
                }
            }
            msg = messages.next() => match msg {
                Some(msg) if msg.get_payload_bytes() == key.as_bytes() => {
                    return Ok(Some(started.elapsed()));
                }
                Some(_) => {}
                None => {
                    return Err(Error::Setup(
                        "the subscription for the expired-events probe closed".into(),
                    ));
                }
            },
        }
    }
}

/// Make sure Redis emits expired key events: turn them on with `CONFIG SET` when `allowed`,
/// otherwise refuse with what to set. Where `CONFIG` is unavailable (a managed service),
/// probe with `probe_key` when it is given (see [`probe_expired_events`]), and refuse with the
/// service setting to change when the event does not come.
pub async fn ensure_expired_events(
    client: &redis::Client,
    allowed: bool,
    probe_key: Option<&str>,
) -> Result<Events> {
    let addr = super::client_addr(client);
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| Error::redis_op(format!("checking notify-keyspace-events on {addr}"), e))?;
    let reply: std::result::Result<Vec<String>, RedisError> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("notify-keyspace-events")
        .query_async(&mut conn)
        .await;
    // Some services answer CONFIG GET with an empty list instead of an error (Upstash, for
    // every parameter but the few they let a user set): nothing was read either way.
    let unreadable = match reply {
        Ok(reply) if reply.len() >= 2 => Ok(reply[1].clone()),
        Ok(_) => Err("CONFIG GET notify-keyspace-events answered no value".to_string()),
        Err(e) if is_command_unavailable(&e) => Err(e.to_string()),
        Err(e) => {
            return Err(Error::Setup(format!(
                "cannot read notify-keyspace-events on {addr} ({e}); keyfire needs expired \
                 events: {ADVICE}"
            )));
        }
    };
    let flags = match unreadable {
        Ok(flags) => flags,
        Err(why) => {
            let Some(key) = probe_key else {
                return Ok(Events::Unchecked);
            };
            let probed = probe_expired_events(client, key, PROBE_BOUND)
                .await
                .map_err(|e| match e {
                    Error::Redis(source) => {
                        Error::redis_op(format!("probing expired events on {addr}"), source)
                    }
                    e => e,
                })?;
            return match probed {
                Some(took) => {
                    tracing::info!(
                        server = %addr,
                        took_ms = took.as_millis() as u64,
                        config = %why,
                        "CONFIG is unavailable: expired key events checked by a probe key"
                    );
                    Ok(Events::Probed(took))
                }
                None => Err(Error::Setup(format!(
                    "Redis at {addr} sent no expired event for a probe key within {} s, and its \
                     notify-keyspace-events cannot be read (CONFIG is unavailable: {why}); \
                     keyfire needs expired key events: {MANAGED_ADVICE}",
                    PROBE_BOUND.as_secs()
                ))),
            };
        }
    };
    if has_expired_events(&flags) {
        return Ok(Events::On);
    }
    if !allowed {
        return Err(Error::Setup(format!(
            "Redis does not emit expired key events (notify-keyspace-events is \"{flags}\"): {ADVICE}, or allow keyfire to do it with redis.enable_notifications = true"
        )));
    }
    let mut new = flags.clone();
    for c in ['E', 'x'] {
        if !new.contains(c) {
            new.push(c);
        }
    }
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg(&new)
        .query_async(&mut conn)
        .await
        .map_err(|e| {
            Error::Setup(format!(
                "CONFIG SET notify-keyspace-events failed ({e}): {ADVICE}"
            ))
        })?;
    tracing::warn!(from = %flags, to = %new, "turned on expired key events in Redis");
    Ok(Events::TurnedOn)
}

/// [`ensure_expired_events`] on every server that holds data; with `probe`, servers without
/// `CONFIG` are probed (at start), else left unchecked (the periodic re-check: the sweeper
/// covers lost events). Returns true when it had to turn them on anywhere.
pub async fn ensure_everywhere(
    store: &crate::store::Store,
    allowed: bool,
    probe: bool,
) -> Result<bool> {
    let masters = store.masters().await?;
    let prefix = store.keys().prefix();
    let keys = if probe {
        probe_keys(&store.connection(), prefix, &masters).await?
    } else {
        vec![None; masters.len()]
    };
    let mut turned_on = false;
    for (server, key) in masters.iter().zip(&keys) {
        let addr = super::client_addr(server);
        let events = ensure_expired_events(server, allowed, key.as_deref()).await?;
        if probe && key.is_none() && events == Events::Unchecked {
            tracing::warn!(server = %addr, "CONFIG is unavailable and no probe key falls on this master: expired events unchecked");
        }
        turned_on |= events == Events::TurnedOn;
    }
    Ok(turned_on)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags() {
        assert!(has_expired_events("Ex"));
        assert!(has_expired_events("KEA"));
        assert!(!has_expired_events(""));
        assert!(!has_expired_events("Kx"));
        assert!(!has_expired_events("E$"));
    }

    #[test]
    fn probe_keys_stay_under_the_prefix() {
        let key = probe_key("kf");
        assert!(key.starts_with("{kf}:expiry-probe:"), "{key}");
        assert_ne!(probe_key("kf"), key, "random part");
        let tags = probe_tags("kf", 3);
        assert_eq!(tags, ["{kf:probe:0}", "{kf:probe:1}", "{kf:probe:2}"]);
    }
}
