//! The subscriber: expired events and the change channel, with reconnects.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde::Deserialize;

use super::claim::Claimer;
use super::context::{NodeCore, SweepState, bump, ms};
use super::executor::Executor;
use super::firing::{Kind, Source};
use super::flow_limiter::FlowLimiter;
use super::hooks::Hooks;
use super::membership::{Live, Membership};
use super::specs::Specs;
use super::timers::TimerQueue;
use crate::store::parse_firing_id;

/// A message on the change channel, tagged by `op` (written by the scripts named).
#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
enum Change {
    /// upsert.lua (create, update, pause, resume): the job's new version and next firing.
    Upsert {
        id: String,
        #[serde(default)]
        version: Option<u64>,
        #[serde(default)]
        next: Option<String>,
    },
    /// delete.lua.
    Delete { id: String },
    /// trigger.lua and dead-letter replays: an attempt of `firing` due at `at`.
    Retry { firing: String, at: i64 },
    /// heartbeat.lua: a node joined or left the live set.
    Nodes,
    /// claim.lua (`overlap = replace`): stop the run of `firing`.
    Cancel { firing: String },
    /// claim.lua: next firings due within the timer horizon, as (id, firing ms).
    Next {
        #[serde(default)]
        firings: Vec<(String, String)>,
    },
    /// insert.lua: the new jobs due soon, as (id, first firing ms).
    Created {
        #[serde(default)]
        firings: Vec<(String, String)>,
    },
    /// The delay queue's add.lua: topic `id` has a task due at `at`, earlier than its
    /// sentinel key says; handed to the node's hooks (the topic promoter).
    Wake {
        id: String,
        #[serde(default)]
        at: Option<i64>,
    },
    /// A limit was set or lifted (`Store::put_limit`, `Store::delete_limit`).
    Limits,
    /// A message this version does not know (a newer node's, during a rolling upgrade).
    #[serde(other)]
    Unknown,
}

/// claim.lua's announcement of next firings (`{"op":"next","id":"","firings":[[id, ms],
/// ...]}`), read straight into borrowed strings. Every node reads every announcement, a
/// burst's worth each second under every-second cron jobs, and arms only its own share: the
/// general [`Change`] path buffers the message and copies each id first.
#[derive(Deserialize)]
struct NextFirings<'a> {
    #[serde(borrow)]
    firings: Vec<(&'a str, &'a str)>,
}

impl<'a> NextFirings<'a> {
    /// The announcement in `payload`, if it is one (None: not a `next` message, or one
    /// with an escaped character, which cannot be borrowed; the general path reads it).
    fn parse(payload: &'a [u8]) -> Option<Self> {
        if !payload.starts_with(br#"{"op":"next","#) {
            return None;
        }
        serde_json::from_slice(payload).ok()
    }
}

/// How often the subscriber re-reads which servers hold data (Sentinel failover, cluster
/// failover or resharding), besides whenever a subscription drops.
const TOPOLOGY_EVERY: Duration = Duration::from_secs(2);

/// The listener: hands expired events and change messages to the components they are for.
pub(super) struct Listener {
    core: Arc<NodeCore>,
    claimer: Arc<Claimer>,
    timers: TimerQueue,
    live: Arc<Live>,
    membership: Arc<Membership>,
    executor: Arc<Executor>,
    specs: Arc<Specs>,
    limiter: Arc<FlowLimiter>,
    hooks: Arc<Hooks>,
    sweep: Arc<SweepState>,
}

impl Listener {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        core: Arc<NodeCore>,
        claimer: Arc<Claimer>,
        timers: TimerQueue,
        live: Arc<Live>,
        membership: Arc<Membership>,
        executor: Arc<Executor>,
        specs: Arc<Specs>,
        limiter: Arc<FlowLimiter>,
        hooks: Arc<Hooks>,
        sweep: Arc<SweepState>,
    ) -> Self {
        Self {
            core,
            claimer,
            timers,
            live,
            membership,
            executor,
            specs,
            limiter,
            hooks,
            sweep,
        }
    }

    /// Subscribe to expired events on every server that holds data (events are local to
    /// the server that expires the key) and to the change channel on one of them; follow
    /// the set of servers as it changes.
    pub(super) async fn run(self: Arc<Self>) {
        let mut backoff = Duration::from_millis(50);
        while !self.core.claiming.is_cancelled() {
            let masters = match self.core.store.masters().await {
                Ok(m) if !m.is_empty() => m,
                Ok(_) => {
                    tracing::warn!("no server holds data; retrying");
                    Vec::new()
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read which servers hold data; retrying");
                    Vec::new()
                }
            };
            if masters.is_empty() {
                tokio::select! {
                    _ = self.core.claiming.cancelled() => break,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(2));
                continue;
            }
            backoff = Duration::from_millis(50);
            let addrs = addresses(&masters);
            tracing::info!(servers = ?addrs, "subscribing to expired events");
            let stop = self.core.claiming.child_token();
            let mut subscribers = tokio::task::JoinSet::new();
            for (i, client) in masters.into_iter().enumerate() {
                subscribers.spawn(self.clone().subscriber_loop(client, i == 0, stop.clone()));
            }
            // Until stopped, or the servers holding data change.
            let mut tick = tokio::time::interval(TOPOLOGY_EVERY);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = self.core.claiming.cancelled() => break,
                    _ = tick.tick() => {}
                }
                match self.core.store.masters().await {
                    Ok(now) if !now.is_empty() && addresses(&now) != addrs => {
                        tracing::warn!(from = ?addrs, to = ?addresses(&now), "servers holding data changed; resubscribing");
                        break;
                    }
                    Ok(_) => {}
                    Err(e) => tracing::debug!(error = %e, "topology check failed"),
                }
            }
            stop.cancel();
            while subscribers.join_next().await.is_some() {}
        }
    }

    /// One server's subscription, reconnecting with backoff until `stop`.
    async fn subscriber_loop(
        self: Arc<Self>,
        client: redis::Client,
        changes: bool,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let db = client.get_connection_info().redis_settings().db();
        let pattern = format!("__keyevent@{db}__:expired");
        let mut backoff = Duration::from_millis(50);
        while !stop.is_cancelled() {
            match self.listen_once(&client, &pattern, changes, &stop).await {
                Ok(true) => backoff = Duration::from_millis(50),
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "subscriber connection failed"),
            }
            if stop.is_cancelled() {
                break;
            }
            tracing::info!(?backoff, "subscriber disconnected; reconnecting");
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }

    /// Subscribe and handle messages until the connection drops (true if it had subscribed).
    async fn listen_once(
        self: &Arc<Self>,
        client: &redis::Client,
        pattern: &str,
        with_changes: bool,
        stop: &tokio_util::sync::CancellationToken,
    ) -> crate::Result<bool> {
        let changes = self.core.store.keys().changes();
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.psubscribe(pattern).await?;
        if with_changes {
            pubsub.subscribe(&changes).await?;
        }
        if self
            .core
            .stats
            .subscribed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            > 0
        {
            metrics::counter!(crate::metrics::name::RECONNECTS, "node" => self.core.id.clone())
                .increment(1);
        }
        // Messages published while we were away are gone: forget every cached spec (a change
        // or a delete may have been missed) and sweep now (G2).
        if with_changes {
            self.specs.clear();
        }
        // Change messages may have been lost too: read the whole horizon again.
        self.sweep.forget_armed();
        self.sweep.sweep_now();
        let mut stream = pubsub.on_message();
        loop {
            tokio::select! {
                _ = stop.cancelled() => return Ok(true),
                msg = stream.next() => match msg {
                    None => return Ok(true),
                    Some(msg) => {
                        if msg.get_channel_name() == changes {
                            if let Some(next) = NextFirings::parse(msg.get_payload_bytes()) {
                                self.arm_firings(next.firings, false);
                                continue;
                            }
                            match serde_json::from_slice::<Change>(msg.get_payload_bytes()) {
                                Ok(change) => self.on_change(change),
                                Err(e) => tracing::warn!(error = %e, "bad change message"),
                            }
                        } else if let Ok(key) = std::str::from_utf8(msg.get_payload_bytes()) {
                            self.on_expired(key);
                        }
                    }
                }
            }
        }
    }

    fn on_expired(self: &Arc<Self>, key: &str) {
        let Some((_, job_id, at)) = self.core.store.shards().parse_fire(key) else {
            return self.hooks.expired(key);
        };
        bump(&self.core.stats.events);
        // Only the owner claims at once; the others leave it to the sweeper after the grace
        // period, so a firing costs one claim, not one per node.
        if self.live.owns(&job_id) {
            self.claimer
                .spawn_claim(job_id, at, Kind::Scheduled, Source::Event);
        }
    }

    fn on_change(self: &Arc<Self>, change: Change) {
        match change {
            Change::Cancel { firing } => self.executor.cancel_run(&firing),
            Change::Nodes => self.membership.on_membership_change(),
            Change::Retry { firing, at: due } => {
                // A trigger or a dead-letter replay: an attempt due now.
                if let Some((job, at)) = parse_firing_id(&firing)
                    && self.live.owns(job)
                {
                    self.timers.arm_due(job.to_string(), at, Kind::Retry, due);
                }
            }
            Change::Next { firings } => {
                // Next firings a claim scheduled within its timer horizon: their owners arm
                // timers, whatever their own horizon (nothing else brings such a firing to
                // its instant: it has no sentinel key, and the sweeper read its range
                // already). The jobs did not change, so their cached specs stay.
                self.arm_firings(firings, false);
            }
            Change::Created { firings } => {
                // Jobs created in bulk: new ids, so a cached spec is one of a deleted job
                // (its claim would be refused by generation anyway).
                self.specs
                    .forget_all(firings.iter().map(|(id, _)| id.as_str()));
                self.arm_firings(firings, true);
            }
            Change::Delete { id } => {
                self.specs.forget(&id);
            }
            Change::Upsert { id, version, next } => {
                if let Some(v) = version {
                    self.specs.forget_unless(&id, v);
                }
                if let Some(at) = next.as_deref().and_then(|n| n.parse::<i64>().ok()) {
                    self.arm_if_soon(id, at);
                }
            }
            Change::Wake { id, at } => self.hooks.message("wake", &id, at),
            Change::Limits => {
                let limiter = self.limiter.clone();
                tokio::spawn(async move { limiter.refresh().await });
            }
            Change::Unknown => {}
        }
    }

    /// `(id, instant ms)` pairs of a `created` or `next` message: each owner arms its own,
    /// only those within its own timer horizon if `only_soon`. An id is copied only when
    /// this node arms it.
    fn arm_firings<S: AsRef<str>>(
        self: &Arc<Self>,
        firings: impl IntoIterator<Item = (S, S)>,
        only_soon: bool,
    ) {
        for (id, at) in firings {
            let Ok(at) = at.as_ref().parse::<i64>() else {
                continue;
            };
            if only_soon {
                self.arm_if_soon(id.as_ref().to_string(), at);
            } else if self.live.owns(id.as_ref()) {
                self.timers.arm(id.as_ref().to_string(), at);
            }
        }
    }

    /// A new or changed job due soon: its owner arms a timer (fires at once when past, since
    /// a sentinel key with a past instant would never give an `expired` event).
    fn arm_if_soon(self: &Arc<Self>, id: String, at: i64) {
        let horizon = self.core.clock.redis_now_ms() + ms(self.core.settings.timer_horizon);
        if at <= horizon && self.live.owns(&id) {
            self.timers.arm(id, at);
        }
    }
}

/// The servers' addresses, sorted: what the subscriptions follow.
fn addresses(clients: &[redis::Client]) -> Vec<String> {
    let mut a: Vec<String> = clients.iter().map(crate::store::client_addr).collect();
    a.sort();
    a
}

#[cfg(test)]
mod tests {
    use super::{Change, NextFirings};

    /// The messages the scripts publish, as they encode them (cjson), decode to their kind.
    #[test]
    fn each_script_message_decodes() {
        let decode = |s: &str| serde_json::from_str::<Change>(s).unwrap();
        assert!(matches!(
            decode(r#"{"op":"upsert","id":"a","version":3,"next":"1700000000000"}"#),
            Change::Upsert {
                version: Some(3),
                next: Some(_),
                ..
            }
        ));
        assert!(matches!(
            decode(r#"{"op":"upsert","id":"a","version":4}"#),
            Change::Upsert { next: None, .. }
        ));
        assert!(matches!(
            decode(r#"{"op":"delete","id":"a"}"#),
            Change::Delete { .. }
        ));
        assert!(matches!(
            decode(r#"{"op":"retry","id":"a","firing":"a:1700000000000","at":1700000000500}"#),
            Change::Retry {
                at: 1700000000500,
                ..
            }
        ));
        assert!(matches!(
            decode(r#"{"op":"nodes","id":"n1","what":"left"}"#),
            Change::Nodes
        ));
        assert!(matches!(
            decode(r#"{"op":"cancel","id":"a","firing":"a:1"}"#),
            Change::Cancel { .. }
        ));
        match decode(r#"{"op":"next","id":"","firings":[["a","1700000000000"]]}"#) {
            Change::Next { firings } => {
                assert_eq!(firings, [("a".to_string(), "1700000000000".to_string())])
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            decode(r#"{"op":"created","id":"","firings":[["b","1"]]}"#),
            Change::Created { .. }
        ));
        assert!(matches!(
            decode(r#"{"op":"wake","id":"emails","at":1700000000000}"#),
            Change::Wake {
                at: Some(1700000000000),
                ..
            }
        ));
        assert!(matches!(
            decode(r#"{"op":"from-a-newer-node","id":"x"}"#),
            Change::Unknown
        ));
    }

    #[test]
    fn next_announcements_are_read_in_place() {
        let msg =
            br#"{"op":"next","id":"","firings":[["a","1700000000000"],["b","1700000001000"]]}"#;
        let next = NextFirings::parse(msg).expect("a next message");
        assert_eq!(
            next.firings,
            [("a", "1700000000000"), ("b", "1700000001000")]
        );
        // An escaped character cannot be borrowed: the general path reads such a message.
        let escaped = r#"{"op":"next","id":"","firings":[["b\u0041","1"]]}"#;
        assert!(NextFirings::parse(escaped.as_bytes()).is_none());
        match serde_json::from_str::<Change>(escaped).unwrap() {
            Change::Next { firings } => assert_eq!(firings, [("bA".into(), "1".into())]),
            other => panic!("{other:?}"),
        }
        // Other messages go the general way.
        assert!(NextFirings::parse(br#"{"op":"created","id":"","firings":[["b","1"]]}"#).is_none());
        assert!(NextFirings::parse(br#"{"op":"upsert","id":"a","version":3}"#).is_none());
    }
}
