//! The sweeper: the due ZSET is the source of truth, so whatever events and timers missed is
//! found here (G2). It also takes over runs whose lease expired (G5), claims due retries,
//! arms timers for the firings this node owns within the horizon, and cleans up finished
//! one-shot tasks.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::MissedTickBehavior;

use super::Inner;
use super::claim::{Kind, Source};
use crate::store::notify;

/// Entries read per page.
const SWEEP_BATCH: usize = 10_000;
/// Most due entries read per sweep; a larger backlog is taken over the next sweeps.
const SWEEP_MAX: usize = 1_000_000;
/// How far the next sweep's read reaches back into what this one read (ms).
const OVERLAP_MS: i64 = 100;
/// Longest time between two cleanups of finished tasks.
const CLEANUP_EVERY_MS: i64 = 60_000;

impl Inner {
    pub(super) async fn sweeper_loop(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.settings.sweep_interval);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let cleanup_every = Inner::ms(self.settings.task_retention).clamp(1, CLEANUP_EVERY_MS);
        let mut last_cleanup = self.clock.local_ms();
        loop {
            tokio::select! {
                _ = self.claiming.cancelled() => break,
                _ = tick.tick() => {}
                _ = self.sweep_now.notified() => {}
            }
            if let Err(e) = self.sweep().await {
                tracing::warn!(error = %e, "sweep failed");
            }
            Inner::bump(&self.stats.sweeps);
            if self.clock.local_ms() - last_cleanup >= cleanup_every {
                last_cleanup = self.clock.local_ms();
                if let Err(e) = self.clean_up_tasks().await {
                    tracing::warn!(error = %e, "task cleanup failed");
                }
            }
        }
    }

    /// One sweep: the owner takes its overdue entries at once, anyone takes them past the
    /// grace period; the owner arms timers for its entries due within the horizon.
    pub(super) async fn sweep(self: &Arc<Self>) -> crate::Result<()> {
        let now = self.clock.redis_now_ms();
        // Other nodes help with a firing once its owner had the grace period and, had it
        // died, would have dropped out of the live set (so a new owner would hold it): a
        // firing still overdue then has an owner that is alive but behind. Helping earlier
        // only races the owners on a backlog (one claim in two wasted, measured).
        let grace = Inner::ms(self.settings.claim_grace + self.settings.node_ttl);
        let horizon = now + Inner::ms(self.settings.timer_horizon);
        // Shards are swept concurrently, each in a task of its own: one whose server is
        // down (a failover under way: its calls wait for seconds) finishes in the
        // background, is skipped until then, and does not hold up the others.
        let mut sweeps = Vec::new();
        for shard in 0..self.store.shards().len() {
            if !self.sweeping.lock().expect("sweeping lock").insert(shard) {
                continue;
            }
            let me = self.clone();
            sweeps.push(tokio::spawn(async move {
                let result = me.sweep_shard(shard, now, grace, horizon).await;
                me.sweeping.lock().expect("sweeping lock").remove(&shard);
                if let Err(e) = &result {
                    tracing::warn!(shard, error = %e, "sweep of a shard failed");
                }
                result
            }));
        }
        let wait = self.settings.sweep_interval.max(Duration::from_millis(100));
        match tokio::time::timeout(wait, futures::future::join_all(sweeps)).await {
            Ok(results) => results
                .into_iter()
                .filter_map(|r| r.ok())
                .find(|r| r.is_err())
                .unwrap_or(Ok(())),
            Err(_) => {
                tracing::warn!("a shard's sweep is slow; the others go on");
                Ok(())
            }
        }
    }

    async fn sweep_shard(
        self: &Arc<Self>,
        shard: usize,
        now: i64,
        grace: i64,
        horizon: i64,
    ) -> crate::Result<()> {
        // Page through what is due within the horizon: many firings may share one instant,
        // and each must get its timer before the instant, not a sweep later. What an earlier
        // sweep read (for the same live set, with no message lost since) is armed already,
        // so only the overdue entries and those that came within the horizon are read.
        let upto = self
            .armed_upto
            .lock()
            .expect("armed_upto lock")
            .get(&shard)
            .copied()
            .filter(|&u| u > now);
        let ranges = match upto {
            Some(u) => vec![(None, now), (Some(u), horizon)],
            None => vec![(None, horizon)],
        };
        let mut complete = true;
        for (after, until) in ranges {
            let mut offset = 0;
            loop {
                if offset >= SWEEP_MAX {
                    complete = false;
                    break;
                }
                let page = self
                    .store
                    .due_page(shard, after, until, offset, SWEEP_BATCH)
                    .await?;
                let n = page.len();
                Inner::bump_by(&self.stats.due_read, n as u64);
                for (job_id, at) in page {
                    self.take(job_id, at, Kind::Scheduled, at, now, grace);
                }
                if n < SWEEP_BATCH {
                    break;
                }
                offset += n;
            }
        }
        {
            let mut armed = self.armed_upto.lock().expect("armed_upto lock");
            if complete {
                // Overlap the next read a little: `now` is this node's estimate of Redis's
                // clock, and claim.lua announces next firings by Redis's own.
                armed.insert(shard, horizon - OVERLAP_MS);
            } else {
                armed.remove(&shard);
            }
        }
        for (job_id, at, due) in self
            .store
            .retries_until(shard, horizon, SWEEP_BATCH)
            .await?
        {
            self.take(job_id, at, Kind::Retry, due, now, grace);
        }
        // Firings that came within the sentinel horizon get their sentinel keys.
        self.store.promote(shard, SWEEP_BATCH).await?;
        let (pending, sentinels) = self.store.shard_pending_counts(shard).await?;
        let (node, shard_label) = (self.id.clone(), shard.to_string());
        metrics::gauge!(crate::metrics::name::PENDING, "node" => node.clone(), "shard" => shard_label.clone())
            .set(pending as f64);
        metrics::gauge!(crate::metrics::name::SENTINELS, "node" => node, "shard" => shard_label)
            .set(sentinels as f64);
        // A lease is already a grace period: the owner takes it over at once.
        for (job_id, at, expiry) in self.store.expired_leases(shard, now, SWEEP_BATCH).await? {
            self.take(job_id, at, Kind::Lease, expiry, now, grace);
        }
        Ok(())
    }

    fn take(self: &Arc<Self>, job_id: String, at: i64, kind: Kind, due: i64, now: i64, grace: i64) {
        if due <= now - grace {
            self.spawn_claim(job_id, at, kind, Source::Sweep);
        } else if self.owns(&job_id, at) {
            if due <= now {
                self.spawn_claim(job_id, at, kind, Source::Sweep);
            } else {
                self.arm_due(job_id, at, kind, due);
            }
        }
    }

    /// Delete one-shot tasks that succeeded longer ago than the retention period.
    async fn clean_up_tasks(&self) -> crate::Result<()> {
        let before = self.clock.redis_now_ms() - Inner::ms(self.settings.task_retention);
        for shard in 0..self.store.shards().len() {
            for id in self.store.done_until(shard, before, 1_000).await? {
                self.store.delete_finished(&id).await?;
            }
        }
        Ok(())
    }

    pub(super) async fn membership_loop(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.settings.heartbeat_interval);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut beats: u64 = 0;
        loop {
            tokio::select! {
                _ = self.claiming.cancelled() => break,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.heartbeat(false).await {
                tracing::warn!(error = %e, "heartbeat failed");
            }
            beats += 1;
            // Someone may turn expiry events off at run time; the sweeper covers the gap,
            // and this turns them back on (when allowed) so firings are on time again.
            if beats.is_multiple_of(10) {
                let check = notify::ensure_everywhere(&self.store, self.notifications_allowed);
                match tokio::time::timeout(Duration::from_secs(5), check).await {
                    Ok(Ok(true)) => self.sweep_now.notify_one(),
                    Ok(Ok(false)) => {}
                    Ok(Err(e)) => tracing::error!(error = %e, "expired events are off"),
                    Err(_) => tracing::warn!("notification check timed out"),
                }
            }
        }
    }
}
