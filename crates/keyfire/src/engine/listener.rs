//! The subscriber: expired events and change messages, as the store's subscription yields them.

use std::sync::Arc;

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
use crate::store::{Event, parse_firing_id};

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
    /// claim.lua (`overlap = replace`), or cancel.lua (`why`: `request`, a cancel request):
    /// stop the run of `firing`.
    Cancel {
        firing: String,
        #[serde(default)]
        why: Option<String>,
    },
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
    /// A calendar was written or deleted (`Store::put_calendar`, `calendar_delete.lua`).
    Calendars,
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

/// The listener: hands expired events and change messages to the components they are for.
pub(super) struct Listener {
    pub(super) core: Arc<NodeCore>,
    pub(super) claimer: Arc<Claimer>,
    pub(super) timers: TimerQueue,
    pub(super) live: Arc<Live>,
    pub(super) membership: Arc<Membership>,
    pub(super) executor: Arc<Executor>,
    pub(super) specs: Arc<Specs>,
    pub(super) limiter: Arc<FlowLimiter>,
    pub(super) hooks: Arc<Hooks>,
    pub(super) sweep: Arc<SweepState>,
}

impl Listener {
    /// Follow the store's subscription (expired events of every server that holds data, and
    /// the change channels) until the node stops claiming.
    pub(super) async fn run(self: Arc<Self>) {
        let mut subscription = self.core.store.subscribe();
        loop {
            let event = tokio::select! {
                _ = self.core.claiming.cancelled() => break,
                event = subscription.next() => event,
            };
            match event {
                None => break,
                Some(Event::Subscribed { changes, .. }) => self.on_subscribed(changes),
                Some(Event::Expired(key)) => {
                    if let Ok(key) = std::str::from_utf8(key.bytes()) {
                        self.on_expired(key);
                    }
                }
                Some(Event::Change(message)) => self.on_change_message(message.bytes()),
            }
        }
    }

    /// A server's subscriptions are in place (again): what was announced or expired there
    /// meanwhile is lost.
    fn on_subscribed(self: &Arc<Self>, changes: bool) {
        self.core.stats.subscribed(&self.core.id);
        // Forget every cached spec (a change or a delete may have been missed) and sweep
        // now (G2).
        if changes {
            self.specs.clear();
        }
        // Change messages may have been lost too: read the whole horizon again.
        self.sweep.forget_armed();
        self.sweep.sweep_now();
    }

    fn on_change_message(self: &Arc<Self>, payload: &[u8]) {
        if let Some(next) = NextFirings::parse(payload) {
            return self.arm_firings(next.firings);
        }
        if payload.is_empty() {
            return;
        }
        match serde_json::from_slice::<Change>(payload) {
            Ok(change) => self.on_change(change),
            Err(e) => tracing::warn!(error = %e, "bad change message"),
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
            Change::Cancel { firing, why } => {
                let requested = why.as_deref() == Some("request");
                self.executor.cancel_run(&firing, requested)
            }
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
                self.arm_firings(firings);
            }
            Change::Created { firings } => {
                // Jobs created in bulk: new ids, so a cached spec is one of a deleted job
                // (its claim would be refused by generation anyway).
                self.specs
                    .forget_all(firings.iter().map(|(id, _)| id.as_str()));
                self.arm_created(firings);
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
            Change::Calendars => self.specs.calendars_changed(),
            Change::Unknown => {}
        }
    }

    /// `(id, instant ms)` pairs of a `next` message: each owner arms its own. An id is
    /// copied only when this node arms it.
    fn arm_firings<S: AsRef<str>>(self: &Arc<Self>, firings: impl IntoIterator<Item = (S, S)>) {
        for (id, at) in firings {
            let Ok(at) = at.as_ref().parse::<i64>() else {
                continue;
            };
            if self.live.owns(id.as_ref()) {
                self.timers.arm(id.as_ref().to_string(), at);
            }
        }
    }

    /// Jobs created in bulk (`insert.lua`'s message): the owner of each one due within its
    /// timer horizon arms its timer, and retires the sentinel keys of those still ahead, as
    /// the sweeper's read-ahead does (the timer claims at the instant; if this node dies
    /// first, the others take the firing after the grace period, as they would have after
    /// its `expired` event). Left alone, a burst of tasks created due within seconds would
    /// expire at its instant and send every node an event per task while the claims drain.
    /// One `UNLINK` per shard of the message.
    fn arm_created(self: &Arc<Self>, firings: Vec<(String, String)>) {
        let now = self.core.clock.redis_now_ms();
        let horizon = now + ms(self.core.settings.timer_horizon);
        let shards = self.core.store.shards();
        let mut retire: foldhash::HashMap<usize, Vec<(String, i64)>> = Default::default();
        for (id, at) in firings {
            let Ok(at) = at.parse::<i64>() else {
                continue;
            };
            if at > horizon || !self.live.owns(&id) {
                continue;
            }
            self.timers.arm(id.clone(), at);
            if at > now {
                retire.entry(shards.of(&id)).or_default().push((id, at));
            }
        }
        for (shard, keys) in retire {
            let core = self.core.clone();
            tokio::spawn(async move {
                if let Err(e) = core.store.retire_sentinels(shard, &keys).await {
                    tracing::debug!(error = %e, "retiring sentinel keys failed; they expire");
                }
            });
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
            Change::Cancel { why: None, .. }
        ));
        assert!(matches!(
            decode(r#"{"op":"cancel","id":"a","firing":"a:1","why":"request"}"#),
            Change::Cancel { why: Some(_), .. }
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
