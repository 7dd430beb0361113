//! Subscriptions: the `expired` key events of every server that holds data, and the change
//! channels, on any deployment (one server, Sentinel, Redis Cluster), followed across
//! reconnects, failovers and slot moves.
//!
//! Announcements go out with `SPUBLISH` on the change channel of the shard whose keys the
//! writing script touches ([`Keys::changes`] of that shard; node-wide ones on the meta
//! shard's). In a Redis Cluster a shard channel's message stays on the master that serves
//! its slot (and that master's replicas), where a `PUBLISH` would be copied to every node of
//! the cluster over the cluster bus; on one server (standalone or Sentinel) `SPUBLISH`
//! behaves as `PUBLISH` on a channel space of its own. So a node subscribes, on each master:
//! to its `expired` events (`PSUBSCRIBE`: events are local to the server that expires a key)
//! and, with `SSUBSCRIBE`, to those change channels whose slot that master serves. Where the
//! meta channel is, it also listens with a plain `SUBSCRIBE` on the meta channel, so that
//! announcements of nodes of an earlier version (which `PUBLISH` there) still reach it
//! during a rolling upgrade.
//!
//! Messages published while a connection was not subscribed are lost: every (re)subscribe
//! is reported as [`Event::Subscribed`], for the node to sweep.

use std::sync::Arc;
use std::time::Duration;

use redis::{AsyncConnectionConfig, Client, PushInfo, PushKind, Value};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::Store;
use super::conn::{CONNECTION_TIMEOUT, RESPONSE_TIMEOUT};
use crate::error::{Error, Result};

/// How often the subscription re-reads which servers hold data and which of them serves
/// each channel's slot (Sentinel failover, cluster failover, resharding), besides whenever a
/// connection drops or the server moves a shard channel away.
pub const TOPOLOGY_EVERY: Duration = Duration::from_secs(2);

/// What a [`Subscription`] yields.
#[derive(Debug)]
pub enum Event {
    /// One server's subscriptions are in place (again; the first time too): what was
    /// announced or expired there while they were not is lost. `changes`: that server holds
    /// change channels (not only `expired` events).
    Subscribed {
        /// `host:port` of the server.
        server: String,
        /// Whether change channels are subscribed on it.
        changes: bool,
    },
    /// An `expired` event: the payload is the key's name.
    Expired(Payload),
    /// A message on a change channel.
    Change(Payload),
}

/// A message's payload, as Redis sent it (not copied).
#[derive(Debug)]
pub struct Payload(Value);

impl Payload {
    /// The payload's bytes (empty when Redis sent something else than a string).
    pub fn bytes(&self) -> &[u8] {
        match &self.0 {
            Value::BulkString(b) => b,
            _ => &[],
        }
    }
}

/// Events of the servers that hold data, until dropped (which closes its connections).
#[derive(Debug)]
pub struct Subscription {
    events: mpsc::UnboundedReceiver<Event>,
    stop: CancellationToken,
}

impl Subscription {
    /// The next event; None once the subscription has stopped.
    pub async fn next(&mut self) -> Option<Event> {
        self.events.recv().await
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// One server's part: its client and the channels whose slot it serves.
#[derive(Clone)]
struct Target {
    server: String,
    client: Client,
    channels: Vec<String>,
    /// Also `SUBSCRIBE` the meta channel (the server serves its slot).
    plain: bool,
}

impl Store {
    /// Every change channel: the meta shard's and each shard's (one channel when the data is
    /// in one shard: its tag is the meta tag).
    pub fn change_channels(&self) -> Vec<String> {
        let mut channels = vec![self.keys().changes()];
        for k in self.shards.iter() {
            let c = k.changes();
            if !channels.contains(&c) {
                channels.push(c);
            }
        }
        channels
    }

    /// Subscribe to the `expired` events of every server that holds data and to every change
    /// channel, wherever they are; follow failovers and slot moves until the subscription is
    /// dropped. Needs a Tokio runtime.
    pub fn subscribe(&self) -> Subscription {
        let (tx, events) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        tokio::spawn(follow(self.clone(), tx, stop.clone()));
        Subscription { events, stop }
    }

    /// Where to subscribe now.
    async fn subscription_targets(&self) -> Result<Vec<Target>> {
        let channels = self.change_channels();
        let meta = self.keys().changes();
        let mut targets: Vec<Target> = self
            .conn
            .subscription_targets(&channels)
            .await?
            .into_iter()
            .map(|(client, channels)| Target {
                server: super::client_addr(&client),
                plain: channels.contains(&meta),
                client,
                channels,
            })
            .collect();
        targets.sort_by(|a, b| a.server.cmp(&b.server));
        Ok(targets)
    }
}

/// What the subscriptions follow: each server with its channels.
fn layout(targets: &[Target]) -> Vec<(&str, &[String])> {
    targets
        .iter()
        .map(|t| (t.server.as_str(), t.channels.as_slice()))
        .collect()
}

/// Subscribe on every target; whenever the targets change, subscribe again, until `stop`.
async fn follow(store: Store, events: mpsc::UnboundedSender<Event>, stop: CancellationToken) {
    let replan = Arc::new(Notify::new());
    let mut backoff = Duration::from_millis(50);
    while !stop.is_cancelled() && !events.is_closed() {
        let targets = match store.subscription_targets().await {
            Ok(t) if !t.is_empty() => t,
            Ok(_) => {
                tracing::warn!("no server holds data; retrying");
                Vec::new()
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read which servers hold data; retrying");
                Vec::new()
            }
        };
        if targets.is_empty() {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(2));
            continue;
        }
        backoff = Duration::from_millis(50);
        tracing::info!(servers = ?layout(&targets), "subscribing to expired events and change channels");
        let round = stop.child_token();
        let mut servers = tokio::task::JoinSet::new();
        for t in targets.iter().cloned() {
            servers.spawn(serve(
                store.clone(),
                t,
                events.clone(),
                replan.clone(),
                round.clone(),
            ));
        }
        // Until stopped, or the servers or the slots of the channels move.
        let mut tick = tokio::time::interval(TOPOLOGY_EVERY);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = events.closed() => break,
                _ = tick.tick() => {}
                _ = replan.notified() => {}
            }
            match store.subscription_targets().await {
                Ok(now) if !now.is_empty() && layout(&now) != layout(&targets) => {
                    tracing::warn!(from = ?layout(&targets), to = ?layout(&now), "servers holding data or channels moved; resubscribing");
                    break;
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(error = %e, "topology check failed"),
            }
        }
        round.cancel();
        while servers.join_next().await.is_some() {}
    }
}

/// One server's subscriptions, reconnecting with backoff until `stop`.
async fn serve(
    store: Store,
    target: Target,
    events: mpsc::UnboundedSender<Event>,
    replan: Arc<Notify>,
    stop: CancellationToken,
) {
    let mut backoff = Duration::from_millis(50);
    while !stop.is_cancelled() {
        match listen(&store, &target, &events, &replan, &stop).await {
            Ok(true) => backoff = Duration::from_millis(50),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(server = %target.server, error = %e, "subscriber connection failed");
                // A channel refused with MOVED, or a master gone: the layout may have changed.
                replan.notify_one();
            }
        }
        if stop.is_cancelled() {
            break;
        }
        tracing::info!(server = %target.server, ?backoff, "subscriber disconnected; reconnecting");
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

/// Subscribe on one server and pass its messages on until the connection drops (true if it
/// had subscribed) or `stop`.
async fn listen(
    store: &Store,
    target: &Target,
    events: &mpsc::UnboundedSender<Event>,
    replan: &Arc<Notify>,
    stop: &CancellationToken,
) -> Result<bool> {
    let lost = Arc::new(Notify::new());
    let sender = {
        let (events, lost, replan) = (events.clone(), lost.clone(), replan.clone());
        move |push: PushInfo| -> std::result::Result<(), ()> {
            let PushInfo { kind, mut data } = push;
            match kind {
                PushKind::PMessage => {
                    if let Some(key) = data.pop() {
                        let _ = events.send(Event::Expired(Payload(key)));
                    }
                }
                PushKind::SMessage | PushKind::Message => {
                    if let Some(payload) = data.pop() {
                        let _ = events.send(Event::Change(Payload(payload)));
                    }
                }
                // The server dropped a shard channel whose slot it no longer serves.
                PushKind::SUnsubscribe => replan.notify_one(),
                PushKind::Disconnection => lost.notify_one(),
                _ => {}
            }
            Ok(())
        }
    };
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECTION_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_push_sender(sender);
    let mut conn = target
        .client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| Error::redis_op(format!("subscribing on {}", target.server), e))?;
    let db = target.client.get_connection_info().redis_settings().db();
    let subscribed = async {
        conn.psubscribe(format!("__keyevent@{db}__:expired"))
            .await?;
        // One channel per command: each is answered by one confirmation.
        for channel in &target.channels {
            redis::cmd("SSUBSCRIBE")
                .arg(channel)
                .query_async::<Value>(&mut conn)
                .await?;
        }
        if target.plain {
            conn.subscribe(store.keys().changes()).await?;
        }
        Ok::<_, redis::RedisError>(())
    };
    tokio::select! {
        _ = stop.cancelled() => return Ok(false),
        r = subscribed => r.map_err(|e| Error::redis_op(format!("subscribing on {}", target.server), e))?,
    }
    if events
        .send(Event::Subscribed {
            server: target.server.clone(),
            changes: !target.channels.is_empty(),
        })
        .is_err()
    {
        return Ok(true);
    }
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = lost.notified() => {}
        _ = events.closed() => {}
    }
    Ok(true)
}
