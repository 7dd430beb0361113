//! Keyspace notifications: keyfire needs `expired` key events.

use crate::error::{Error, Result};

/// Whether a `notify-keyspace-events` value includes expired key events (`E` with `x` or `A`).
pub fn has_expired_events(flags: &str) -> bool {
    flags.contains('E') && (flags.contains('x') || flags.contains('A'))
}

/// Make sure Redis emits expired key events: turn them on with `CONFIG SET` when `allowed`,
/// otherwise refuse with what to set. Returns true when it had to turn them on.
pub async fn ensure_expired_events<C>(conn: &mut C, allowed: bool) -> Result<bool>
where
    C: redis::aio::ConnectionLike + Send,
{
    let advice = "set `notify-keyspace-events Ex` in redis.conf (or run `CONFIG SET notify-keyspace-events Ex`)";
    let reply: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("notify-keyspace-events")
        .query_async(conn)
        .await
        .map_err(|e| {
            Error::Setup(format!(
                "cannot read notify-keyspace-events ({e}); keyfire needs expired events: {advice}"
            ))
        })?;
    let flags = reply.get(1).cloned().unwrap_or_default();
    if has_expired_events(&flags) {
        return Ok(false);
    }
    if !allowed {
        return Err(Error::Setup(format!(
            "Redis does not emit expired key events (notify-keyspace-events is \"{flags}\"): {advice}, or allow keyfire to do it with redis.enable_notifications = true"
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
        .query_async(conn)
        .await
        .map_err(|e| {
            Error::Setup(format!(
                "CONFIG SET notify-keyspace-events failed ({e}): {advice}"
            ))
        })?;
    tracing::warn!(from = %flags, to = %new, "turned on expired key events in Redis");
    Ok(true)
}

/// [`ensure_expired_events`] on every server that holds data. Returns true when it had to
/// turn them on anywhere.
pub async fn ensure_everywhere(store: &crate::store::Store, allowed: bool) -> Result<bool> {
    let mut turned_on = false;
    for server in store.masters().await? {
        let mut conn = server
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| {
                Error::Setup(format!(
                    "cannot reach {} to check notify-keyspace-events: {e}",
                    server.get_connection_info().addr()
                ))
            })?;
        turned_on |= ensure_expired_events(&mut conn, allowed).await?;
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
}
