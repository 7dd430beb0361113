//! Shards: one call per shard, the key-layout check, replication waits, the servers holding data.

use super::*;
use crate::error::{Error, Result};

impl Store {
    /// The servers that hold data now: expired events are subscribed to on each.
    pub async fn masters(&self) -> Result<Vec<redis::Client>> {
        self.conn.masters().await
    }

    /// Check (and on first use, write) the key-layout version; refuse a layout this build
    /// does not understand.
    ///
    /// One shard writes layout 1 (the layout of builds before sharding, so they can still
    /// join during an upgrade); more shards write layout 2 and the shard count next to it.
    /// A node configured with another shard count than the data's is refused: jobs would be
    /// looked for on the wrong shards.
    pub async fn check_layout(&self) -> Result<()> {
        let k = self.shards.meta();
        let n = self.shards.len() as i64;
        let mut c = self.conn.clone();
        let mine = if n == 1 { 1 } else { LAYOUT_VERSION };
        // Read first, and write only what is missing: a full Redis refuses even a SET NX of
        // a key that exists, and a node must start there.
        let (mut stored, mut shards): (Option<i64>, Option<i64>) = redis::pipe()
            .get(k.layout())
            .get(k.shard_count())
            .query_async(&mut c)
            .await?;
        if stored.is_none() || (n > 1 && shards.is_none()) {
            let mut pipe = redis::pipe();
            pipe.set_nx(k.layout(), mine).ignore();
            if n > 1 {
                // Layout 1 has no shard count: one shard.
                pipe.set_nx(k.shard_count(), n).ignore();
            }
            (stored, shards) = pipe
                .get(k.layout())
                .get(k.shard_count())
                .query_async(&mut c)
                .await?;
        }
        let stored = stored.unwrap_or(mine);
        if !LAYOUTS_UNDERSTOOD.contains(&stored) {
            return Err(Error::Setup(format!(
                "the data under this prefix uses key layout {stored}; this keyfire understands {LAYOUTS_UNDERSTOOD:?}: upgrade keyfire"
            )));
        }
        let shards = shards.unwrap_or(1);
        if shards != n {
            return Err(Error::Setup(format!(
                "redis.shards is {n} but the data under this prefix is spread over {shards} shards; set redis.shards = {shards}"
            )));
        }
        Ok(())
    }

    /// Run `f` once per shard on that shard's items (concurrently), and give the answers back
    /// in the order of `items`. `f` answers one value per item, in the order given.
    pub(super) async fn per_shard<'a, T, R, F, Fut>(
        &self,
        items: &'a [T],
        id: impl Fn(&T) -> &str,
        f: F,
    ) -> Result<Vec<R>>
    where
        F: Fn(usize, Vec<&'a T>) -> Fut,
        Fut: std::future::Future<Output = Result<Vec<R>>>,
    {
        if self.shards.len() == 1 || items.len() <= 1 {
            let shard = items.first().map_or(0, |i| self.shards.of(id(i)));
            return f(shard, items.iter().collect()).await;
        }
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); self.shards.len()];
        for (i, item) in items.iter().enumerate() {
            groups[self.shards.of(id(item))].push(i);
        }
        let calls = groups
            .iter()
            .enumerate()
            .filter(|(_, g)| !g.is_empty())
            .map(|(shard, g)| {
                let call = f(shard, g.iter().map(|&i| &items[i]).collect());
                async move { call.await.map(|answers| (g, answers)) }
            });
        let answered = futures::future::try_join_all(calls).await?;
        let mut out: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
        for (g, answers) in answered {
            if answers.len() != g.len() {
                return Err(Error::Corrupt(format!(
                    "{} answers for {} items",
                    answers.len(),
                    g.len()
                )));
            }
            for (&i, a) in g.iter().zip(answers) {
                out[i] = Some(a);
            }
        }
        Ok(out
            .into_iter()
            .map(|a| a.expect("every item answered"))
            .collect())
    }

    /// With `redis.wait_replicas`, wait until that many replicas of the shard's master
    /// acknowledged the writes just made on its connection (a claim, before its handler
    /// runs), so a failover cannot lose them. Never fails: the write stands either way, and
    /// what was not acknowledged in time is counted.
    ///
    /// `WAIT` blocks the (shared, multiplexed) connection while it waits, so when the
    /// replicas fall short the shard stops waiting for [`WAIT_BACKOFF`] (one slow `WAIT` per
    /// back-off, not one per call): a master that lost its replica, or a new master after a
    /// failover, keeps its throughput, and its writes are counted as unreplicated.
    pub(super) async fn replicate(&self, k: &Keys) {
        let Some((replicas, timeout_ms)) = self.wait else {
            return;
        };
        let now = std::time::Instant::now();
        let off = self
            .wait_off
            .lock()
            .expect("wait_off lock")
            .get(k.tag())
            .copied();
        if off.is_some_and(|until| now < until) {
            metrics::counter!(crate::metrics::name::UNREPLICATED).increment(1);
            return;
        }
        let short = match self
            .conn
            .wait_replicas(&k.due(), replicas, timeout_ms)
            .await
        {
            Ok(acked) if acked >= replicas => return,
            Ok(acked) => format!("{acked} of {replicas} replicas acknowledged in {timeout_ms} ms"),
            Err(e) => e.to_string(),
        };
        tracing::warn!(shard = %k.tag(), %short, "writes not replicated in time; not waiting for {WAIT_BACKOFF:?}");
        self.wait_off.lock().expect("wait_off lock").insert(
            k.tag().to_string(),
            std::time::Instant::now() + WAIT_BACKOFF,
        );
        metrics::counter!(crate::metrics::name::UNREPLICATED).increment(1);
    }
}
