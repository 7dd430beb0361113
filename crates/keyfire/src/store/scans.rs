//! Scans of a shard's sorted sets: what is due, retrying, running, done; promotion into the sentinel horizon; counts.

use std::collections::HashMap;

use redis::AsyncCommands;

use super::*;
use crate::error::Result;

script!(PROMOTE, "promote.lua");
script!(DUE_PAGE, "due_page.lua");

impl Store {
    /// Attempts queued in a shard's retry ZSET due at or before `max_ms`: (job id, instant,
    /// due).
    pub async fn retries_until(
        &self,
        shard: usize,
        max_ms: i64,
        limit: usize,
    ) -> Result<Vec<(String, i64, i64)>> {
        self.firings_in(self.shards.keys(shard).retry(), max_ms, limit)
            .await
    }

    /// A shard's runs in progress (up to `limit`), with their leases: who holds each and
    /// since when, for the sweeper to take over the runs of nodes that left. Leases of the
    /// earlier layout (a bare firing id; the record in the attempts hash) are read too.
    pub async fn leases(&self, shard: usize, limit: usize) -> Result<Vec<Lease>> {
        let k = self.shards.keys(shard);
        let mut conn = self.conn.clone();
        let running: Vec<(String, i64)> = conn
            .zrange_withscores(k.running(), 0, limit as isize - 1)
            .await?;
        let earlier: Vec<&str> = running
            .iter()
            .filter(|(m, _)| parse_lease_member(m).1.is_none())
            .map(|(m, _)| m.as_str())
            .collect();
        let mut records: HashMap<&str, String> = HashMap::new();
        if !earlier.is_empty() {
            let found: Vec<Option<String>> = redis::cmd("HMGET")
                .arg(k.attempts())
                .arg(&earlier)
                .query_async(&mut conn)
                .await?;
            for (fid, record) in earlier.iter().zip(found) {
                if let Some(r) = record {
                    records.insert(fid, r);
                }
            }
        }
        Ok(running
            .iter()
            .filter_map(|(member, expiry)| {
                let (fid, lease) = parse_lease_member(member);
                let (job_id, at_ms) = parse_firing_id(fid)?;
                let (attempt, claimed_ms, node) = lease
                    .or_else(|| records.get(fid).and_then(|r| parse_lease_record(r)))
                    .map(|(a, c, n)| (a, c, Some(n.to_string())))
                    .unwrap_or((0, 0, None));
                Some(Lease {
                    job_id: job_id.to_string(),
                    at_ms,
                    expiry_ms: *expiry,
                    attempt,
                    claimed_ms,
                    node,
                })
            })
            .collect())
    }

    /// A shard's runs whose lease expired at or before `max_ms`: (job id, instant, lease
    /// expiry).
    pub async fn expired_leases(
        &self,
        shard: usize,
        max_ms: i64,
        limit: usize,
    ) -> Result<Vec<(String, i64, i64)>> {
        self.firings_in(self.shards.keys(shard).running(), max_ms, limit)
            .await
    }

    async fn firings_in(
        &self,
        key: String,
        max_ms: i64,
        limit: usize,
    ) -> Result<Vec<(String, i64, i64)>> {
        let fids: Vec<(String, i64)> = self
            .conn
            .clone()
            .zrangebyscore_limit_withscores(key, "-inf", max_ms, 0, limit as isize)
            .await?;
        Ok(fids
            .iter()
            .filter_map(|(member, score)| {
                let (fid, _) = parse_lease_member(member);
                parse_firing_id(fid).map(|(id, at)| (id.to_string(), at, *score))
            })
            .collect())
    }

    /// A shard's one-shot jobs that succeeded at or before `max_ms` (to clean up).
    pub async fn done_until(&self, shard: usize, max_ms: i64, limit: usize) -> Result<Vec<String>> {
        Ok(self
            .conn
            .clone()
            .zrangebyscore_limit(
                self.shards.keys(shard).done(),
                "-inf",
                max_ms,
                0,
                limit as isize,
            )
            .await?)
    }

    /// Delete the sentinel keys of firings whose owner armed a timer for them (see the
    /// sweeper's read-ahead): the timer claims at the instant, so the key would only expire
    /// after that claim (Redis's expire cycle deleting it, its `expired` event sent to every
    /// node) for nothing. One `UNLINK` per call; keys that are gone cost nothing.
    pub async fn retire_sentinels(&self, shard: usize, firings: &[(String, i64)]) -> Result<()> {
        if firings.is_empty() {
            return Ok(());
        }
        let k = self.shards.keys(shard);
        let keys: Vec<String> = firings.iter().map(|(id, at)| k.fire(id, *at)).collect();
        let _: i64 = self.conn.clone().unlink(keys).await?;
        Ok(())
    }

    /// Give the pending firings that came within the sentinel horizon their sentinel keys.
    /// A watermark in Redis (`{prefix}:promoted`) records how far ahead this was done, so
    /// each firing is promoted about once whatever the number of nodes. Returns how many
    /// sentinel keys were set.
    pub async fn promote(&self, shard: usize, limit: usize) -> Result<usize> {
        let k = self.shards.keys(shard);
        let mut conn = self.conn.clone();
        let (wm, time): (Option<i64>, (i64, i64)) = redis::pipe()
            .get(k.promoted())
            .cmd("TIME")
            .query_async(&mut conn)
            .await?;
        let now = time_reply_ms(time);
        let from = wm.unwrap_or(now).max(now);
        let until = now + self.horizon_ms;
        if from >= until {
            return Ok(0);
        }
        let entries: Vec<(String, i64)> = conn
            .zrangebyscore_limit_withscores(k.due(), format!("({from}"), until, 0, limit as isize)
            .await?;
        // Up to where this call covers: all of the window, or, when the batch was full, up
        // to just before the last instant read (entries at that instant are read again).
        let covered = if entries.len() >= limit {
            entries.last().map_or(until, |(_, at)| at - 1)
        } else {
            until
        };
        let mut inv = PROMOTE.prepare_invoke();
        inv.key(k.promoted()).key(k.due());
        for (id, at) in &entries {
            inv.key(k.fire(id, *at));
        }
        inv.arg(covered).arg(self.horizon_ms);
        for (id, at) in &entries {
            inv.arg(id).arg(*at);
        }
        let n: i64 = inv.invoke_async(&mut conn).await?;
        Ok(n as usize)
    }

    /// Jobs with a pending firing, and pending firings within the sentinel horizon (those
    /// hold sentinel keys), in one round trip.
    pub async fn pending_counts(&self) -> Result<(u64, u64)> {
        let mut total = (0, 0);
        for shard in 0..self.shards.len() {
            let (pending, inside) = self.shard_pending_counts(shard).await?;
            total.0 += pending;
            total.1 += inside;
        }
        Ok(total)
    }

    /// [`Store::pending_counts`] of one shard.
    pub async fn shard_pending_counts(&self, shard: usize) -> Result<(u64, u64)> {
        let k = self.shards.keys(shard);
        let now = self.time_ms().await?;
        let (pending, inside): (u64, u64) = redis::pipe()
            .zcard(k.due())
            .zcount(k.due(), format!("({now}"), now + self.horizon_ms)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok((pending, inside))
    }

    /// Sentinel keys alive now (a SCAN; for tests and diagnostics, not for hot paths).
    pub async fn sentinel_count(&self) -> Result<usize> {
        let mut n = 0;
        for k in self.shards.iter() {
            let mut conn = self.conn.clone();
            let pattern = format!("{}*", k.fire_prefix());
            let mut iter: redis::AsyncIter<String> = conn.scan_match(pattern).await?;
            while let Some(item) = futures::StreamExt::next(&mut iter).await {
                item?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// A shard's pending firings due at or before `max_ms`, oldest first: (job id, instant).
    pub async fn due_until(
        &self,
        shard: usize,
        max_ms: i64,
        limit: usize,
    ) -> Result<Vec<(String, i64)>> {
        self.due_page(shard, &DueFrom::Start, max_ms, limit).await
    }

    /// A page of [`Store::due_until`]: up to `limit` entries due from `from` to `max_ms`. A
    /// caller paging through many entries goes on from the last entry it read
    /// ([`DueFrom::Past`]): each page costs Redis the same however many entries share one
    /// instant before it.
    pub async fn due_page(
        &self,
        shard: usize,
        from: &DueFrom,
        max_ms: i64,
        limit: usize,
    ) -> Result<Vec<(String, i64)>> {
        self.zset_page(self.shards.keys(shard).due(), from, max_ms, limit)
            .await
    }

    /// A page of any ZSET scored by instants (ms), as [`Store::due_page`] reads a shard's due
    /// firings: the entries from `from` up to `max_ms`, at most `limit` of them, with scores.
    pub async fn zset_page(
        &self,
        key: String,
        from: &DueFrom,
        max_ms: i64,
        limit: usize,
    ) -> Result<Vec<(String, i64)>> {
        let mut conn = self.conn.clone();
        let min = match from {
            DueFrom::Start => "-inf".to_string(),
            DueFrom::After(at) => format!("({at}"),
            DueFrom::Past(at, member) => {
                let mut inv = DUE_PAGE.prepare_invoke();
                inv.key(key).arg(*at).arg(member).arg(max_ms).arg(limit);
                return Ok(inv.invoke_async(&mut conn).await?);
            }
        };
        Ok(conn
            .zrangebyscore_limit_withscores(key, min, max_ms, 0, limit as isize)
            .await?)
    }
}

/// Where a page of a shard's due firings starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DueFrom {
    /// The first entry.
    Start,
    /// The first entry due after this instant (ms).
    After(i64),
    /// The entry after this one (instant, job id), which need not exist any more.
    Past(i64, String),
}
