//! The sweeper: the due ZSET is the source of truth, so whatever events and timers missed is
//! found here (G2). It also takes over runs whose lease expired (G5), claims due retries,
//! arms timers for the firings this node owns within the horizon, and cleans up finished
//! one-shot tasks.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::MissedTickBehavior;

use super::claim::Claimer;
use super::context::{NodeCore, SweepState, bump, bump_by, ms};
use super::firing::{Kind, Source};
use super::flow_limiter::FlowLimiter;
use super::membership::{Fence, Live};
use super::timers::TimerQueue;
use crate::store::{DueFrom, Lease};

/// Entries read per page (leases, retries, promotions).
const SWEEP_BATCH: usize = 10_000;
/// Due entries read per page. Redis runs one command at a time: a page of 10,000 entries
/// with their scores (and the `UNLINK` of the sentinels armed from it) holds up the claims
/// behind it for several ms, on every node, every sweep.
const DUE_PAGE: usize = 1_000;
/// Most due entries read per sweep; a larger backlog is taken over the next sweeps.
const SWEEP_MAX: usize = 1_000_000;
/// How far the next sweep's read reaches back into what this one read (ms).
const OVERLAP_MS: i64 = 100;
/// Longest time between two cleanups of finished tasks.
const CLEANUP_EVERY_MS: i64 = 60_000;

/// The sweeper: one sweep every `node.sweep_interval`, or at once when asked.
pub(super) struct Sweeper {
    pub(super) core: Arc<NodeCore>,
    pub(super) claimer: Arc<Claimer>,
    pub(super) timers: TimerQueue,
    pub(super) live: Arc<Live>,
    pub(super) fence: Arc<Fence>,
    pub(super) limiter: Arc<FlowLimiter>,
    /// What to sweep next and how far the sweeps read (shared with membership and the
    /// listener, which reset it).
    pub(super) state: Arc<SweepState>,
    /// Shards whose sweep is in progress.
    pub(super) running: Mutex<HashSet<usize>>,
}

impl Sweeper {
    /// Sweep every interval (or when asked) until the node stops claiming; clean up
    /// finished tasks now and then.
    pub(super) async fn run(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.core.settings.sweep_interval);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let cleanup_every = ms(self.core.settings.task_retention).clamp(1, CLEANUP_EVERY_MS);
        let mut last_cleanup = self.core.clock.local_ms();
        loop {
            tokio::select! {
                _ = self.core.claiming.cancelled() => break,
                _ = tick.tick() => {}
                _ = self.state.now.notified() => {}
            }
            if let Err(e) = self.run_once().await {
                tracing::warn!(error = %e, "sweep failed");
            }
            bump(&self.core.stats.sweeps);
            // Now and then, look at every run's holder even with no change seen: a change
            // missed (a node that left and came back between two heartbeats) costs a lease.
            if self
                .core
                .stats
                .sweeps
                .load(Ordering::Relaxed)
                .is_multiple_of(10)
            {
                self.state.check_holders();
            }
            if self.core.clock.local_ms() - last_cleanup >= cleanup_every {
                last_cleanup = self.core.clock.local_ms();
                if let Err(e) = self.clean_up_tasks().await {
                    tracing::warn!(error = %e, "task cleanup failed");
                }
            }
        }
    }

    /// The sweeper's step, one sweep: the owner takes its overdue entries at once, anyone
    /// takes them past the grace period; the owner arms timers for its entries due within
    /// the horizon. Returns once the sweep has read every shard (or waited a sweep interval
    /// for a slow one); the claims it starts run on.
    pub(super) async fn run_once(self: &Arc<Self>) -> crate::Result<()> {
        // A change message about limits may have been lost: read the limited keys again.
        self.limiter.refresh().await;
        let now = self.core.clock.redis_now_ms();
        // Other nodes help with a firing once its owner had the grace period and, had it
        // died, would have dropped out of the live set (so a new owner would hold it): a
        // firing still overdue then has an owner that is alive but behind. Helping earlier
        // only races the owners on a backlog (one claim in two wasted, measured).
        let grace = ms(self.core.settings.claim_grace + self.core.settings.node_ttl);
        let horizon = now + ms(self.core.settings.timer_horizon);
        // Shards are swept concurrently, each in a task of its own: one whose server is
        // down (a failover under way: its calls wait for seconds) finishes in the
        // background, is skipped until then, and does not hold up the others.
        let mut sweeps = Vec::new();
        for shard in 0..self.core.store.shards().len() {
            if !self.running.lock().expect("sweeping lock").insert(shard) {
                continue;
            }
            let me = self.clone();
            sweeps.push(tokio::spawn(async move {
                let result = me.sweep_shard(shard, now, grace, horizon).await;
                me.running.lock().expect("sweeping lock").remove(&shard);
                if let Err(e) = &result {
                    tracing::warn!(shard, error = %e, "sweep of a shard failed");
                }
                result
            }));
        }
        let wait = self
            .core
            .settings
            .sweep_interval
            .max(Duration::from_millis(100));
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
            .state
            .armed_upto
            .lock()
            .expect("armed_upto lock")
            .get(&shard)
            .copied()
            .filter(|&u| u > now);
        // While this node has a page or more of scheduled claims under way (a backlog an
        // earlier sweep read, or a burst of firings at one instant, such as 10,000 cron jobs
        // every second), what is overdue within the grace period is not read, only what is
        // past it (anyone's to take): those firings are in this node's claims or its
        // peers', and reading them with their scores costs Redis as much as claiming a good
        // part of them, in the middle of the burst (a backlog of 100,000 read every second
        // would cost more than claiming it). A firing whose timer was lost (its owner's
        // message), or whose claim failed, is read by the first sweep after the burst, or
        // past the grace period by any node's. Fewer claims under way (a steady load) leave
        // the sweep as it is.
        let busy = upto.is_some()
            && self.core.stats.claims_pending.load(Ordering::Relaxed) >= DUE_PAGE as u64;
        let overdue_until = if busy { now - grace } else { now };
        // Firings that came within the sentinel horizon get their sentinel keys; first, so
        // that those the read-ahead below arms lose theirs (at a node's first sweep the
        // promotion's window starts now, and covers the timer horizon too).
        self.core.store.promote(shard, SWEEP_BATCH).await?;
        let ranges = match upto {
            Some(u) => vec![(None, overdue_until), (Some(u), horizon)],
            None => vec![(None, horizon)],
        };
        let mut complete = true;
        for (after, until) in ranges {
            // The overdue range, read apart from the read-ahead: what is past the grace
            // period is anyone's; what is within it, this node's own firings only, which its
            // timers claimed unless one was lost or its claim failed. A page all within the
            // grace period that starts no claim (the firings of other nodes, or this node's
            // being claimed: the tail of a burst) ends it: the rest is most likely more of
            // the same, and reading a backlog of other nodes' firings at every sweep cost a
            // node as much as claiming its own. A firing of its own left there is read past
            // the grace period, by any node's sweep.
            let overdue_only = after.is_none() && upto.is_some();
            let (mut from, mut read) = (after.map_or(DueFrom::Start, DueFrom::After), 0);
            loop {
                if read >= SWEEP_MAX {
                    complete = false;
                    break;
                }
                let page = self
                    .core
                    .store
                    .due_page(shard, &from, until, DUE_PAGE)
                    .await?;
                let n = page.len();
                // The next page goes on after the last entry read (however many share its
                // instant).
                if let Some((id, at)) = page.last() {
                    from = DueFrom::Past(*at, id.clone());
                }
                bump_by(&self.core.stats.due_read, n as u64);
                // A firing this node arms a timer for no longer needs its sentinel key: the
                // timer claims at the instant, and if this node dies first the others take
                // the firing after the grace period, as they would have on its `expired`
                // event (only an owner claims on one). Those are retired, so a burst of
                // firings does not bring a burst of expiries and events to every node.
                let within_grace = page.first().is_some_and(|(_, at)| *at > now - grace);
                let mut armed = Vec::new();
                let mut claims = 0;
                for (job_id, at) in page {
                    match self.take(job_id.clone(), at, Kind::Scheduled, at, now, grace) {
                        Took::Armed => armed.push((job_id, at)),
                        Took::Claim => claims += 1,
                        Took::Nothing => {}
                    }
                }
                self.core.store.retire_sentinels(shard, &armed).await?;
                if n < DUE_PAGE || (overdue_only && within_grace && claims == 0) {
                    break;
                }
                read += n;
            }
        }
        {
            let mut armed = self.state.armed_upto.lock().expect("armed_upto lock");
            if complete {
                // Overlap the next read a little: `now` is this node's estimate of Redis's
                // clock, and claim.lua announces next firings by Redis's own.
                armed.insert(shard, horizon - OVERLAP_MS);
            } else {
                armed.remove(&shard);
            }
        }
        for (job_id, at, due) in self
            .core
            .store
            .retries_until(shard, horizon, SWEEP_BATCH)
            .await?
        {
            self.take(job_id, at, Kind::Retry, due, now, grace);
        }
        let (pending, sentinels) = self.core.store.shard_pending_counts(shard).await?;
        let (node, shard_label) = (self.core.id.clone(), shard.to_string());
        metrics::gauge!(crate::metrics::name::PENDING, "node" => node.clone(), "shard" => shard_label.clone())
            .set(pending as f64);
        metrics::gauge!(crate::metrics::name::SENTINELS, "node" => node, "shard" => shard_label)
            .set(sentinels as f64);
        // A lease is already a grace period: the owner takes it over at once.
        if self.state.check_holders.load(Ordering::Relaxed) {
            self.take_over_orphans(shard, now, grace).await?;
        } else {
            for (job_id, at, expiry) in self
                .core
                .store
                .expired_leases(shard, now, SWEEP_BATCH)
                .await?
            {
                self.take(job_id, at, Kind::Lease, expiry, now, grace);
            }
        }
        Ok(())
    }

    /// Read every run in progress on the shard with its holder: take over those whose
    /// lease expired, and at once those held by a node that left the live set without a
    /// heartbeat for node_ttl (it fenced itself before then), or by an earlier process of
    /// this node. Done when the live set changed (and at start), until no such run is left.
    async fn take_over_orphans(
        self: &Arc<Self>,
        shard: usize,
        now: i64,
        grace: i64,
    ) -> crate::Result<()> {
        let leases = self.core.store.leases(shard, SWEEP_BATCH).await?;
        let started = self.live.started_redis_ms();
        let live: HashSet<String> = self.live.nodes().into_iter().collect();
        let mut suspects: Vec<Lease> = Vec::new();
        for lease in leases {
            if lease.expiry_ms <= now {
                self.take(
                    lease.job_id,
                    lease.at_ms,
                    Kind::Lease,
                    lease.expiry_ms,
                    now,
                    grace,
                );
                continue;
            }
            match lease.node.as_deref() {
                // Held by this node's id but claimed before it started: an earlier process's.
                Some(n) if n == self.core.id && lease.claimed_ms < started => {
                    let holder = self.core.id.clone();
                    self.claimer
                        .spawn_takeover(lease.job_id, lease.at_ms, holder, None);
                }
                Some(n) if n == self.core.id => {}
                Some(n) if !live.contains(n) => suspects.push(lease),
                _ => {}
            }
        }
        if suspects.is_empty() {
            self.state.check_holders.store(false, Ordering::Relaxed);
            return Ok(());
        }
        // A node that was cut off itself does not judge others gone until it has been back
        // for node_ttl: their silence may have been the same outage, and they beat again
        // and record what ended meanwhile (outcomes wait behind claims) within that time.
        // Taking their runs over sooner ran firings twice after a Redis failover. Their
        // leases still expire as usual. Looked at again at the next sweep.
        if self.fence.cut_off_within(self.core.settings.node_ttl) {
            return Ok(());
        }
        // Their nodes are gone by this node's view: ask Redis when each last beat (a node
        // that drains has left the live set but still beats).
        let mut nodes: Vec<&str> = suspects.iter().filter_map(|l| l.node.as_deref()).collect();
        nodes.sort_unstable();
        nodes.dedup();
        let (redis_now, seen) = self.core.store.nodes_seen(&nodes).await?;
        let ttl = ms(self.core.settings.node_ttl);
        let gone: HashSet<&str> = nodes
            .iter()
            .zip(seen)
            .filter(|(_, s)| s.is_none_or(|s| s < redis_now - ttl))
            .map(|(n, _)| *n)
            .collect();
        let gone: HashSet<String> = gone.into_iter().map(str::to_string).collect();
        for lease in suspects {
            let Some(node) = lease.node else { continue };
            if gone.contains(&node) {
                self.claimer
                    .spawn_takeover(lease.job_id, lease.at_ms, node, Some(lease.expiry_ms));
            }
        }
        Ok(())
    }

    /// Take what the sweep found: claim it, arm a timer for it (a firing this node owns, due
    /// later), or leave it to its owner.
    fn take(
        self: &Arc<Self>,
        job_id: String,
        at: i64,
        kind: Kind,
        due: i64,
        now: i64,
        grace: i64,
    ) -> Took {
        let claim = |job_id| {
            if self.claimer.spawn_claim(job_id, at, kind, Source::Sweep) {
                Took::Claim
            } else {
                Took::Nothing
            }
        };
        if due <= now - grace {
            claim(job_id)
        } else if self.live.owns(&job_id) {
            if due <= now {
                claim(job_id)
            } else {
                self.timers.arm_due(job_id, at, kind, due);
                Took::Armed
            }
        } else {
            Took::Nothing
        }
    }

    /// Delete one-shot tasks that succeeded longer ago than the retention period.
    async fn clean_up_tasks(&self) -> crate::Result<()> {
        let before = self.core.clock.redis_now_ms() - ms(self.core.settings.task_retention);
        for shard in 0..self.core.store.shards().len() {
            for id in self.core.store.done_until(shard, before, 1_000).await? {
                self.core.store.delete_finished(&id).await?;
            }
        }
        Ok(())
    }
}

/// What the sweep did with an entry it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Took {
    /// Left to its owner, or being claimed here already.
    Nothing,
    /// A claim started.
    Claim,
    /// A timer armed (this node's, due later).
    Armed,
}
