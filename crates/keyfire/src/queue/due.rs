//! What makes tasks due again: the promotion of delayed tasks and the reclaim of lapsed
//! reservations, lane by lane (the calls; what triggers them on the nodes is `promoter.rs`).

use super::lane::{self, Lane};
use super::{CANDIDATES, PROMOTE_ROUNDS, Queue, Requeued, check_topic};
use crate::error::{Error, Result};
use crate::job::ValidationError;

/// What one [`Queue::promote`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Promotion {
    /// Tasks made ready.
    pub moved: u64,
    /// Redis's clock when it ended (ms).
    pub now_ms: i64,
    /// The topic's next due instant (ms), if a task is delayed.
    pub next_due_ms: Option<i64>,
}

impl Queue {
    /// Make every due task of `topic` ready (by Redis's clock), in batches. Nodes do this on
    /// their own (see [`TopicPromoter`](super::TopicPromoter)); calling it is always safe, since a task leaves the
    /// delayed set once.
    pub async fn promote(&self, topic: &str) -> Result<Promotion> {
        check_topic(topic)?;
        let mut done = Promotion::default();
        for lane in self.lanes(topic, true).await? {
            let r = self.promote_lane(&lane).await?;
            done.moved += r.moved;
            done.now_ms = done.now_ms.max(r.now_ms);
            done.next_due_ms = match (done.next_due_ms, r.next_due_ms) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        Ok(done)
    }

    /// Promote the lane a promotion's work names ([`Lane::id`]).
    pub(super) async fn promote_id(&self, id: &str) -> Result<Promotion> {
        let lane = self.lane_by_id(id).await?;
        self.promote_lane(&lane).await
    }

    /// [`Queue::recover`] of the lane a sweep's work names ([`Lane::id`]).
    pub(super) async fn recover_id(&self, id: &str, budget: usize) -> Result<Requeued> {
        let lane = self.lane_by_id(id).await?;
        self.recover_lane(&lane, budget).await
    }

    /// Promote one lane of a topic.
    async fn promote_lane(&self, lane: &Lane) -> Result<Promotion> {
        let mut done = Promotion::default();
        for _ in 0..PROMOTE_ROUNDS {
            let r = self.promote_once(lane).await?;
            done.moved += r.moved;
            done.now_ms = r.now_ms;
            done.next_due_ms = r.next_due;
            if !r.more {
                break;
            }
        }
        Ok(done)
    }

    /// The lane a promotion's work names ([`Lane::id`]): a topic (its lane under the meta tag)
    /// or `<topic>:<partition>`.
    async fn lane_by_id(&self, id: &str) -> Result<Lane> {
        let (topic, part) = lane::parse_lane_id(id).ok_or_else(|| {
            Error::Invalid(ValidationError::new("topic", format!("not a lane: {id}")))
        })?;
        check_topic(topic)?;
        Ok(match part {
            None => Lane::legacy(topic),
            Some(p) => {
                let (_, mut n) = self.topology(topic, false).await?;
                if p >= n {
                    n = self.topology(topic, true).await?.1;
                }
                Lane::part(self.store.shards(), topic, p, n.max(p + 1))
            }
        })
    }

    /// Take back every reservation of `topic` past its deadline (to ready, or to the dead
    /// letters when its deliveries are used up), and make ready the delayed tasks that are due
    /// (a promotion that events and timers missed). Pops do the first part themselves, and
    /// every node's sweep does both for every topic; calling it is always safe.
    pub async fn requeue_expired(&self, topic: &str) -> Result<Requeued> {
        self.recover(topic, usize::MAX).await
    }

    /// [`Queue::requeue_expired`], taking back at most `budget` reservations per lane.
    pub(crate) async fn recover(&self, topic: &str, budget: usize) -> Result<Requeued> {
        check_topic(topic)?;
        let mut done = Requeued::default();
        for lane in self.lanes(topic, true).await? {
            let r = self.recover_lane(&lane, budget).await?;
            done.requeued += r.requeued;
            done.dead += r.dead;
            done.promoted += r.promoted;
        }
        Ok(done)
    }

    /// [`Queue::recover`] of one lane.
    async fn recover_lane(&self, lane: &Lane, budget: usize) -> Result<Requeued> {
        let mut done = Requeued::default();
        let mut seen = 0;
        while seen < budget {
            let (reserved, now) = self.read_reserved_head(lane, CANDIDATES).await?;
            let expired: Vec<String> = reserved
                .iter()
                .filter(|(_, deadline)| *deadline as i64 <= now)
                .map(|(id, _)| id.clone())
                .collect();
            if expired.is_empty() {
                break;
            }
            seen += expired.len();
            let r = self.requeue(lane, &expired).await?;
            done.requeued += r.requeued;
            done.dead += r.dead;
            if expired.len() < CANDIDATES {
                break;
            }
        }
        done.promoted = self.promote_lane(lane).await?.moved;
        Ok(done)
    }

    /// [`Queue::requeue_expired`] for every topic.
    pub async fn requeue_all_expired(&self) -> Result<Requeued> {
        let mut all = Requeued::default();
        for topic in self.topic_names().await? {
            let r = self.requeue_expired(&topic).await?;
            all.requeued += r.requeued;
            all.dead += r.dead;
            all.promoted += r.promoted;
        }
        Ok(all)
    }
}
