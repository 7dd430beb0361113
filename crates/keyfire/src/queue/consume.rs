//! What consumers do: pop (long-polling), finish and touch reservations.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::check::{check_max, check_ttr, check_wait};
use super::lane;
use super::reply::fenced;
use super::traced;
use super::wait::Backoff;
use super::{
    CANDIDATES, Finished, Lane, MAX_POP, MAX_PRIORITY, Queue, Reserved, check_task_id, check_topic,
    duration_ms, instant, ms_duration, token_topic,
};
use crate::error::{Error, Result};
use crate::job::ValidationError;

/// What the lanes a pop visited gave: the tasks taken, ready tasks left, and the nearest
/// reservation deadline (ms from now).
#[derive(Default)]
struct Popped {
    out: Vec<Reserved>,
    left: u64,
    earliest: Option<i64>,
}

impl Queue {
    /// Pop the oldest ready task of `topic` and reserve it for its ttr, waiting up to `wait`
    /// for one (long poll); `None` when none came. See [`Queue::pop_many`].
    pub async fn pop(&self, topic: &str, wait: Duration) -> Result<Option<Reserved>> {
        Ok(self.pop_many(topic, 1, wait).await?.pop())
    }

    /// Pop up to `max` ready tasks of `topic` (the longest ready first) in one round trip,
    /// each reserved for its ttr under a token of its own. When none is ready, waits up to
    /// `wait` for some (long poll) and returns an empty list if none came. Reservations of the
    /// topic past their deadline are taken back first (to ready, or to the dead letters), and a
    /// waiting pop wakes when one expires.
    ///
    /// Refused, naming the field: `max` of 0 or above [`MAX_POP`], `wait` above [`MAX_WAIT`](super::MAX_WAIT),
    /// a bad topic name.
    ///
    /// A paused topic ([`Queue::pause`]) gives nothing: the pop waits out its `wait` (a
    /// [`Queue::resume`] meanwhile wakes it) and returns an empty list.
    pub async fn pop_many(&self, topic: &str, max: usize, wait: Duration) -> Result<Vec<Reserved>> {
        traced::pop(self, topic, max, wait).await
    }

    pub(super) async fn pop_waiting(
        &self,
        topic: &str,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<Reserved>> {
        check_topic(topic)?;
        check_max(max)?;
        check_wait(wait)?;
        let end = tokio::time::Instant::now() + wait;
        let mut backoff = Backoff::new();
        // Rounds in a row whose candidates other pops took first (see `skip_after`).
        let mut collided = 0;
        loop {
            // The partitions in turn, from a start that moves on with each pop, so that no
            // partition is served before the others for long.
            let lanes = self.lanes(topic, false).await?;
            let start = self.next_lane.fetch_add(1, Ordering::Relaxed) % lanes.len();
            let mut acc = Popped::default();
            if lanes.len() > 1 && self.is_prioritized(topic) {
                self.pop_by_priority(topic, &lanes, start, max, &mut acc)
                    .await?;
            }
            // A topic that holds priorities reads every lane from its head (its highest first).
            let skip_ahead = !self.is_prioritized(topic);
            if acc.out.is_empty() {
                for i in 0..lanes.len() {
                    let lane = &lanes[(start + i) % lanes.len()];
                    let want = max - acc.out.len();
                    let skip = if skip_ahead {
                        skip_after(collided, want)
                    } else {
                        0
                    };
                    self.pop_lane(topic, lane, want, 0, skip, &mut acc).await?;
                    if acc.out.len() >= max {
                        break;
                    }
                }
            }
            let Popped {
                out,
                left,
                earliest,
            } = acc;
            if !out.is_empty() {
                return Ok(out);
            }
            if left > 0 {
                // Others took the candidates read: read the heads again.
                collided += 1;
                continue;
            }
            let remaining = end.saturating_duration_since(tokio::time::Instant::now());
            if remaining.is_zero() {
                return Ok(Vec::new());
            }
            let until_expiry = earliest.map(|ms| ms_duration(ms + 1));
            let limit = until_expiry.map_or(remaining, |e| e.min(remaining));
            self.waiter.wait(self, &lanes, limit, &mut backoff).await?;
        }
    }

    /// Pop up to `want` tasks of one lane, none of a priority below `floor`, into `acc`; its
    /// candidates read `skip` places behind the head of the ready set (see `skip_after`).
    async fn pop_lane(
        &self,
        topic: &str,
        lane: &Lane,
        want: usize,
        floor: u8,
        skip: usize,
        acc: &mut Popped,
    ) -> Result<()> {
        let candidates = self
            .read_candidates(lane, skip, want + want.clamp(16, 256))
            .await?;
        let reply = self.pop_script(lane, want, floor, &candidates).await?;
        if reply.paused {
            // The topic is paused: this lane reserved nothing and answers no ready
            // tasks, so the pop waits (a resume wakes it).
            tracing::trace!(topic, lane = %lane.id(), "pop of a paused topic");
        }
        acc.left += reply.left;
        if let Some(d) = reply.earliest_deadline {
            let wait = (d - reply.now_ms).max(0);
            acc.earliest = Some(acc.earliest.map_or(wait, |e: i64| e.min(wait)));
        }
        if !reply.taken.is_empty() {
            traced::link_adds(&reply.taken);
        }
        for t in reply.taken {
            if t.priority > 0 {
                self.mark_prioritized(topic);
            }
            acc.out.push(Reserved {
                payload: serde_json::from_str(&t.payload)?,
                id: t.id,
                topic: topic.to_string(),
                deliveries: t.deliveries,
                token: t.token,
                ttr: ms_duration(t.ttr_ms),
                due_at: instant(t.due_ms),
                ready_at: instant(t.ready_ms),
                priority: t.priority,
                reserved_at: instant(reply.now_ms),
                deadline: instant(t.deadline_ms),
            });
        }
        Ok(())
    }

    /// A pop across the partitions of a topic that holds priorities: from the partition whose
    /// head is of the highest level (in the pop's turn among equals), none below the level of
    /// another partition's head, then again from the heads as they are then, until `max` are
    /// taken or nothing is ready. One read of every partition's head per round.
    async fn pop_by_priority(
        &self,
        topic: &str,
        lanes: &[Lane],
        start: usize,
        max: usize,
        acc: &mut Popped,
    ) -> Result<()> {
        let n = lanes.len();
        // A round takes at least one task or ends the loop; the bound only guards a race.
        for _ in 0..(max + n).min(4 * MAX_PRIORITY as usize + 64) {
            let levels = self.read_head_levels(lanes).await?;
            let turn = |i: usize| (i + n - start) % n;
            let Some(best) = (0..n)
                .filter(|&i| levels[i].is_some())
                .min_by_key(|&i| (std::cmp::Reverse(levels[i]), turn(i)))
            else {
                return Ok(());
            };
            let floor = (0..n)
                .filter(|&i| i != best)
                .filter_map(|i| levels[i])
                .max()
                .unwrap_or(0);
            let before = acc.out.len();
            self.pop_lane(topic, &lanes[best], max - before, floor, 0, acc)
                .await?;
            if acc.out.len() == before || acc.out.len() >= max {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The head of a lane's ready set (`n` ids from `skip` places behind it, or from the head
    /// when there are none that far or the head is of a priority), after taking back the
    /// expired reservations at the head of its reserved set (those made ready are candidates
    /// too).
    async fn read_candidates(&self, lane: &Lane, skip: usize, n: usize) -> Result<Vec<String>> {
        let heads = self.read_heads(lane, skip, n, CANDIDATES).await?;
        let (mut candidates, reserved, now) = (heads.ready, heads.reserved, heads.now);
        if skip > 0 && (candidates.is_empty() || heads.prioritized) {
            candidates = self.read_ready_head(lane, n).await?;
        }
        let expired: Vec<String> = reserved
            .into_iter()
            .filter(|(_, deadline)| *deadline as i64 <= now)
            .map(|(id, _)| id)
            .collect();
        if !expired.is_empty() {
            self.requeue(lane, &expired).await?;
            // They went to the tail of the ready set: read the head again.
            candidates = self.read_ready_head(lane, n).await?;
        }
        Ok(candidates)
    }

    /// Acknowledge a reserved task with the token its pop returned: it is done. Refused with
    /// [`Error::ReservationLost`] when the reservation is no longer this token's (it expired and
    /// the task went back to ready or to another consumer, went to the dead letters, or the
    /// token is wrong); [`Error::TaskNotFound`] when there is no such task (or it was deleted).
    /// Finishing again with the token that finished it succeeds (a retried request).
    pub async fn finish(&self, id: &str, token: &str) -> Result<()> {
        traced::finish(self, id, token).await
    }

    pub(super) async fn finish_one(&self, id: &str, token: &str) -> Result<()> {
        let lane = self.lane_for(id, token).await?;
        let reply = self.finish_script(&lane, &[(id, token)]).await?;
        match reply.0.first().copied() {
            Some(1) => Ok(()),
            Some(0) => Err(Error::ReservationLost(id.to_string())),
            Some(_) => Err(Error::TaskNotFound(id.to_string())),
            None => Err(Error::Corrupt("empty finish reply".into())),
        }
    }

    /// Acknowledge many reserved tasks, `(id, token)` pairs as pops returned them, in one
    /// script call per topic. The input is checked first, all or nothing: an empty list, more
    /// than [`MAX_POP`] pairs, a bad id or a token no pop could have given is refused naming
    /// the pair (`tasks[2].token`) and nothing changes. Then each pair is answered on its own,
    /// in order ([`Finished`]): a stale token does not keep the others from finishing.
    pub async fn finish_many(&self, tasks: &[(String, String)]) -> Result<Vec<Finished>> {
        traced::finish_many(self, tasks).await
    }

    pub(super) async fn finish_batch(&self, tasks: &[(String, String)]) -> Result<Vec<Finished>> {
        if tasks.is_empty() || tasks.len() > MAX_POP {
            return Err(Error::Invalid(ValidationError::new(
                "tasks",
                format!("give 1 to {MAX_POP} tasks, not {}", tasks.len()),
            )));
        }
        let mut by_topic: BTreeMap<(&str, Option<usize>), Vec<usize>> = BTreeMap::new();
        for (i, (id, token)) in tasks.iter().enumerate() {
            check_task_id(id).map_err(|_| {
                Error::Invalid(ValidationError::new(
                    format!("tasks[{i}].id"),
                    "not a task id",
                ))
            })?;
            let topic = token_topic(&format!("tasks[{i}].token"), token)?;
            by_topic
                .entry((topic, lane::token_part(token)))
                .or_default()
                .push(i);
        }
        let mut out = vec![Finished::Lost; tasks.len()];
        for ((topic, _), idx) in by_topic {
            let items: Vec<(&str, &str)> = idx
                .iter()
                .map(|&i| (tasks[i].0.as_str(), tasks[i].1.as_str()))
                .collect();
            let lane = self.token_lane(topic, items[0].1).await?;
            let reply = self.finish_script(&lane, &items).await?;
            if reply.0.len() != idx.len() {
                return Err(Error::Corrupt(format!(
                    "finish answered {reply:?}",
                    reply = reply.0
                )));
            }
            for (&i, &c) in idx.iter().zip(&reply.0) {
                out[i] = match c {
                    1 => Finished::Done,
                    0 => Finished::Lost,
                    _ => Finished::NotFound,
                };
            }
        }
        Ok(out)
    }

    /// Extend a reservation: its deadline becomes now plus `ttr` (or the task's own ttr).
    /// Returns the new deadline. Refused like [`Queue::finish`].
    pub async fn touch(
        &self,
        id: &str,
        token: &str,
        ttr: Option<Duration>,
    ) -> Result<DateTime<Utc>> {
        if let Some(t) = ttr {
            check_ttr(t)?;
        }
        let lane = self.lane_for(id, token).await?;
        let reply = self
            .touch_script(&lane, id, token, ttr.map(duration_ms))
            .await?;
        fenced(id, &reply).map(instant)
    }
}

/// Where a pop reads its candidates after `collided` rounds in a row found them taken by
/// other pops (concurrent consumers read the same head, and all but one or two of them found
/// every candidate gone, a script call for nothing each): its first round reads the head
/// (the longest ready first); after a collision, a random multiple of `want` places behind
/// it, spread wider as collisions repeat (up to 8 pops' worth), so that the pops racing for
/// one head take tasks side by side instead. What is skipped is what the others are taking.
/// Not for a topic that holds priorities, whose pops take its highest first.
fn skip_after(collided: usize, want: usize) -> usize {
    if collided == 0 {
        return 0;
    }
    want * rand::random_range(1..=(2 * collided).min(8))
}

#[cfg(test)]
mod tests {
    use keyfire_testkit::RedisServer;
    use serde_json::json;

    use super::*;
    use crate::config::Settings;
    use crate::queue::NewTask;
    use crate::store::Store;

    #[test]
    fn a_first_round_reads_the_head_and_a_collision_a_multiple_of_want_behind_it() {
        assert_eq!(skip_after(0, 50), 0);
        for collided in 1..12 {
            let most = 50 * (2 * collided).min(8);
            for _ in 0..200 {
                let skip = skip_after(collided, 50);
                assert!(
                    skip.is_multiple_of(50) && (50..=most).contains(&skip),
                    "{skip}"
                );
            }
        }
        // Spread: eight pops that collided twice do not all read at one place.
        let places: std::collections::HashSet<usize> = (0..64).map(|_| skip_after(2, 10)).collect();
        assert!(places.len() > 1, "{places:?}");
    }

    /// A read behind the head gets the ids there; from the head again when the ready set is
    /// shorter than the skip, or when its head is of a priority (a pop takes those first).
    #[tokio::test]
    async fn a_read_behind_the_head_falls_back_to_it_when_short_or_when_the_head_has_a_priority() {
        let redis = RedisServer::start().expect("start redis-server");
        let mut settings = Settings::default();
        settings.redis.url = redis.url();
        let q = Queue::new(Store::open(&settings.redis).await.expect("open the store"));
        for i in 0..10 {
            q.add_task(NewTask::new("q", json!(i)).id(format!("t{i:02}")))
                .await
                .unwrap();
        }
        let lanes = q.lanes("q", false).await.unwrap();
        let lane = &lanes[0];
        let ids = |v: Vec<String>| v.join(" ");

        let read = q.read_candidates(lane, 0, 3).await.unwrap();
        assert_eq!(ids(read), "t00 t01 t02");
        let read = q.read_candidates(lane, 4, 3).await.unwrap();
        assert_eq!(ids(read), "t04 t05 t06", "behind the head");
        let read = q.read_candidates(lane, 8, 3).await.unwrap();
        assert_eq!(ids(read), "t08 t09", "what there is that far");
        let read = q.read_candidates(lane, 20, 3).await.unwrap();
        assert_eq!(ids(read), "t00 t01 t02", "none that far: the head");

        q.add_task(NewTask::new("q", json!("urgent")).id("p").priority(5))
            .await
            .unwrap();
        let read = q.read_candidates(lane, 4, 3).await.unwrap();
        assert_eq!(ids(read), "p t00 t01", "a priority at the head: the head");
    }
}
