//! Firings: claim, take over, complete, renew, dead letters, run history.

use redis::{AsyncCommands, Value};

use super::keys::{JOB, RUNS};
use super::records::lease_member_parts;
use super::scripts::ScriptCall;
use super::*;
use crate::error::{Error, Result};

script!(CLAIM, "ledger_lib.lua" + "claim.lua");
script!(CLAIM_RETRY, "ledger_lib.lua" + "claim_retry.lua");
script!(RECOVER, "fanin_lib.lua" + "recover.lua");
script!(DEAD, "dead.lua");
script!(COMPLETE, "fanin_lib.lua" + "complete.lua");
script!(RENEW, "renew.lua");

impl Store {
    /// Try to claim one firing.
    pub async fn claim(&self, a: &ClaimArgs<'_>) -> Result<ClaimReply> {
        let mut replies = self.claim_many(std::slice::from_ref(a)).await?;
        replies
            .pop()
            .ok_or_else(|| Error::Corrupt("empty claim reply".into()))
    }

    /// Try to claim several firings in one script call; one reply per firing, in order.
    /// All must be from the same node with the same lease.
    /// Firings on different shards go as one call per shard, concurrently.
    pub async fn claim_many(&self, batch: &[ClaimArgs<'_>]) -> Result<Vec<ClaimReply>> {
        self.per_shard(
            batch,
            |a| a.job_id,
            |shard, part| self.claim_shard(shard, part),
        )
        .await
    }

    async fn claim_shard(
        &self,
        shard: usize,
        batch: Vec<&ClaimArgs<'_>>,
    ) -> Result<Vec<ClaimReply>> {
        let Some(first) = batch.first() else {
            return Ok(Vec::new());
        };
        let k = self.shards.keys(shard);
        // Per firing: its next firing's sentinel key only when the claim may give it one (a
        // next firing within the timer horizon of the instant is within it of Redis's now
        // too: the firing is due, and it is announced instead); the ledger's key when an
        // instant may be dropped (the plan drops some, or the overlap policy may refuse
        // this one).
        let shapes: Vec<(Option<i64>, bool)> = batch
            .iter()
            .map(|a| {
                let sentinel = a.next_ms.filter(|next| next - a.at_ms > first.announce_ms);
                let ledger = a.dropped.is_some() || a.overlap == "forbid" || a.max_runs.is_some();
                (sentinel, ledger)
            })
            .collect();
        let nkeys = 4 + batch
            .iter()
            .zip(&shapes)
            .map(|(a, (sentinel, ledger))| {
                1 + usize::from(sentinel.is_some())
                    + usize::from(a.compact)
                    + usize::from(*ledger)
                    + usize::from(a.max_runs.is_some())
            })
            .sum::<usize>();
        // Per firing: its job's key (and its bucket's...); its id, instant, version and next
        // firing, and its options. Every key first.
        let mut inv = ScriptCall::sized(&CLAIM, nkeys, batch.len(), 5, 96);
        inv.key(k.due())
            .key(k.running())
            .key(k.jobs())
            .key(k.task_count());
        for (a, &(sentinel, ledger)) in batch.iter().zip(&shapes) {
            inv.key_of(&k.parts(JOB, a.job_id));
            if let Some(next) = sentinel {
                inv.key(k.fire(a.job_id, next));
            }
            if a.compact {
                inv.key_of(&k.task_bucket_parts(a.job_id, &mut itoa::Buffer::new()));
            }
            if ledger {
                inv.key(k.skips(a.job_id));
            }
            if a.max_runs.is_some() {
                inv.key(k.attempts());
            }
        }
        inv.arg(first.node)
            .arg(first.lease_ms)
            .arg(k.changes())
            .arg(self.horizon_ms)
            .arg(if first.arms_next {
                format!("q{}", first.announce_ms)
            } else {
                first.announce_ms.to_string()
            })
            .arg(first.ahead_ms);
        for (a, &(sentinel, ledger)) in batch.iter().zip(&shapes) {
            let mut version = itoa::Buffer::new();
            let mut generation = itoa::Buffer::new();
            inv.arg(a.job_id).arg(a.at_ms).arg_of(&[
                generation.format(a.generation),
                ".",
                version.format(a.version),
            ]);
            match a.next_ms {
                Some(n) => inv.arg(n),
                None => inv.arg(""),
            };
            let common = !a.misfire_applied
                && a.run
                && a.missed == 0
                && a.overlap == "allow"
                && sentinel.is_none()
                && !ledger;
            // A jittered firing's options start "j<offset>|".
            let jitter = if a.jitter_ms > 0 {
                format!("j{}|", a.jitter_ms)
            } else {
                String::new()
            };
            if common && !a.compact && jitter.is_empty() {
                inv.arg(a.tolerance_ms);
            } else if common && !a.compact {
                inv.arg(format!("{jitter}{}", a.tolerance_ms));
            } else if common {
                inv.arg_of(&[&jitter, "t", itoa::Buffer::new().format(a.tolerance_ms)]);
            } else {
                let flag = |b: bool| if b { '1' } else { '0' };
                let overlap = match a.overlap {
                    "forbid" => 'f',
                    "replace" => 'r',
                    _ => 'a',
                };
                let mut opts = format!(
                    "{jitter}s{}|{}{}{}{}{}{}|{}",
                    a.tolerance_ms,
                    flag(a.misfire_applied),
                    flag(a.run),
                    flag(a.compact),
                    flag(sentinel.is_some()),
                    overlap,
                    flag(ledger),
                    a.missed
                );
                if ledger {
                    opts.push('|');
                    opts.push_str(&self.ledger.opts());
                    match a.dropped.filter(|_| a.missed > 0) {
                        Some(d) => opts.push_str(&format!(
                            "|{}|{}|{}",
                            d.reason.as_str(),
                            d.first_ms,
                            d.last_ms
                        )),
                        None => opts.push_str("|||"),
                    }
                }
                if let Some(max) = a.max_runs {
                    opts.push_str(&format!("#{max}"));
                }
                inv.arg(opts);
            }
        }
        let text: Value = inv.invoke(&mut self.conn.clone()).await?;
        self.replicate(k).await;
        let bytes = match &text {
            Value::BulkString(b) => b.as_slice(),
            other => return Err(Error::Corrupt(format!("claim reply {other:?}"))),
        };
        ClaimReply::from_text(bytes, batch.len()).ok_or_else(|| {
            Error::Corrupt(format!("claim reply {:?}", String::from_utf8_lossy(bytes)))
        })
    }

    /// Try to claim the next attempt of a firing from the retry ZSET. `version`: the
    /// (generation, version) of the job the caller will run it with; a job at another one
    /// answers [`ClaimReply::VersionChanged`] and nothing is written (None: no check).
    pub async fn claim_retry(
        &self,
        job_id: &str,
        at_ms: i64,
        node: &str,
        lease_ms: i64,
        overlap: &str,
        version: Option<(u64, u64)>,
    ) -> Result<ClaimReply> {
        let k = self.job_keys(job_id);
        Ok(CLAIM_RETRY
            .key(k.job(job_id))
            .key(k.retry())
            .key(k.running())
            .key(k.attempts())
            .key(k.skips(job_id))
            .arg(firing_id(job_id, at_ms))
            .arg(node)
            .arg(lease_ms)
            .arg(overlap)
            .arg(k.changes())
            .arg(job_id)
            .arg(version.map_or(String::new(), |(g, v)| format!("{g}.{v}")))
            .arg(self.ledger.opts())
            .invoke_async(&mut self.conn.clone())
            .await?)
    }

    /// Take over a run whose lease expired. Returns the next attempt when one was queued,
    /// `Some(0)` when the firing went to the dead letters, None when there was nothing to do.
    pub async fn recover(
        &self,
        job_id: &str,
        at_ms: i64,
        max_attempts: u32,
        dead_limit: usize,
        history_limit: usize,
    ) -> Result<Option<u32>> {
        self.take_over(job_id, at_ms, None, max_attempts, dead_limit, history_limit)
            .await
    }

    /// Take over a lost run: once its lease expired (`holder` None), or at once if `holder`
    /// still holds it (the caller found that node gone: no heartbeat for node_ttl). Returns
    /// as [`Store::recover`] does.
    pub async fn take_over(
        &self,
        job_id: &str,
        at_ms: i64,
        holder: Option<&str>,
        max_attempts: u32,
        dead_limit: usize,
        history_limit: usize,
    ) -> Result<Option<u32>> {
        self.take_over_unless_renewed(
            job_id,
            at_ms,
            holder,
            None,
            max_attempts,
            dead_limit,
            history_limit,
        )
        .await
    }

    /// [`Store::take_over`], refused when `expiry` is given and the lease's expiry is no
    /// longer that: its holder renewed it since the caller read it, so it is alive (a
    /// takeover decided on a view older than the holder's heartbeat).
    #[allow(clippy::too_many_arguments)]
    pub async fn take_over_unless_renewed(
        &self,
        job_id: &str,
        at_ms: i64,
        holder: Option<&str>,
        expiry: Option<i64>,
        max_attempts: u32,
        dead_limit: usize,
        history_limit: usize,
    ) -> Result<Option<u32>> {
        // A compact task's run is taken over as a job hash's: its history, failures and
        // queued attempt are written there (nothing to do for a job hash).
        self.expand(job_id).await?;
        let k = self.job_keys(job_id);
        let fid = firing_id(job_id, at_ms);
        let error = match holder {
            None => "lease expired: the node died, hung or lost Redis mid-run".to_string(),
            Some(node) => format!(
                "node {node} left the live set mid-run (no heartbeat for node_ttl): it died or lost Redis"
            ),
        };
        let dead = DeadLetter {
            firing_id: fid.clone(),
            job_id: job_id.to_string(),
            scheduled_ms: at_ms,
            attempts: 0,
            error: Some(error.clone()),
            failed_ms: 0,
        };
        let reply: Vec<i64> = RECOVER
            .key(k.running())
            .key(k.attempts())
            .key(k.retry())
            .key(k.job(job_id))
            .key(k.dead(job_id))
            .key(k.lock(job_id, at_ms))
            .key(k.runs(job_id))
            .key(k.cancels())
            .arg(&fid)
            .arg(max_attempts)
            .arg(dead_limit.max(1))
            .arg(serde_json::to_string(&dead)?)
            .arg(history_limit.max(1))
            .arg(at_ms)
            .arg(holder.unwrap_or(""))
            .arg(&error)
            .arg(expiry.map(|e| e.to_string()).unwrap_or_default())
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(match reply.as_slice() {
            [1, next] => Some(*next as u32),
            [2, _] => Some(0),
            _ => None,
        })
    }

    /// A job's dead letters, newest first.
    pub async fn dead_letters(&self, job_id: &str, limit: usize) -> Result<Vec<DeadLetter>> {
        let items: Vec<String> = self
            .conn
            .clone()
            .lrange(self.job_keys(job_id).dead(job_id), 0, limit as isize - 1)
            .await?;
        items
            .iter()
            .map(|s| serde_json::from_str(s).map_err(Error::from))
            .collect()
    }

    /// Replay (queue again as attempt 1) or purge a job's dead letters: one firing, or all.
    /// Returns how many; None when replaying for a job that no longer exists.
    pub async fn dead_op(
        &self,
        job_id: &str,
        replay: bool,
        firing: Option<&str>,
    ) -> Result<Option<u64>> {
        let k = self.job_keys(job_id);
        let n: i64 = DEAD
            .key(k.dead(job_id))
            .key(k.retry())
            .key(k.attempts())
            .key(k.job(job_id))
            .arg(if replay { "replay" } else { "purge" })
            .arg(firing.unwrap_or(""))
            .arg(k.changes())
            .arg(job_id)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok((n >= 0).then_some(n as u64))
    }

    /// Record the end of an attempt. `retry_delay_ms`: schedule the next attempt after this
    /// long; None: no further attempt (a failure goes to the dead letters).
    pub async fn complete(
        &self,
        job_id: &str,
        run: &RunRecord,
        limits: &HistoryLimits,
        retry_delay_ms: Option<i64>,
    ) -> Result<(Fate, i64)> {
        let mut out = self
            .complete_many(
                &[Completion {
                    job_id,
                    run,
                    retry_delay_ms,
                    once: None,
                    callback: None,
                    limits: Default::default(),
                    batch: None,
                }],
                limits,
            )
            .await?;
        out.pop()
            .ok_or_else(|| Error::Corrupt("empty complete reply".into()))
    }

    /// Record the end of several attempts in one script call; one (fate, Redis time) per
    /// attempt, in order.
    pub async fn complete_many(
        &self,
        batch: &[Completion<'_>],
        limits: &HistoryLimits,
    ) -> Result<Vec<(Fate, i64)>> {
        self.per_shard(
            batch,
            |c| c.job_id,
            |shard, part| self.complete_shard(shard, part, limits),
        )
        .await
    }

    async fn complete_shard(
        &self,
        shard: usize,
        batch: Vec<&Completion<'_>>,
        limits: &HistoryLimits,
    ) -> Result<Vec<(Fate, i64)>> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        // A compact task whose run failed (or was cancelled) becomes a job hash first: its
        // failures, retries and dead letters are kept there. A success records its run
        // without one (complete.lua writes nothing on the job hash then).
        futures::future::try_join_all(
            batch
                .iter()
                .filter(|c| c.run.outcome != "ok" && c.once != Some(false))
                .map(|c| self.expand(c.job_id)),
        )
        .await?;
        let k = self.shards.keys(shard);
        // Only a failure with no retry left can go to the dead letters (one more key).
        let can_die = |c: &Completion<'_>| {
            c.retry_delay_ms.is_none() && c.run.outcome != "ok" && c.run.outcome != "cancelled"
        };
        // Per outcome: its job's and its runs' keys (and its dead letters'); its lease, its
        // job's id, its record (about 250 bytes) and its options. Every key first.
        let nkeys = 8 + batch
            .iter()
            .map(|c| 2 + usize::from(can_die(c)))
            .sum::<usize>();
        let mut inv = ScriptCall::sized(&COMPLETE, nkeys, batch.len(), 4, 384);
        inv.key(k.running())
            .key(k.attempts())
            .key(k.retry())
            .key(k.done())
            .key(k.outbox())
            .key(k.outbox_data())
            .key(k.cancels())
            .key(k.due());
        for c in &batch {
            inv.key_of(&k.parts(JOB, c.job_id))
                .key_of(&k.parts(RUNS, c.job_id));
            if can_die(c) {
                inv.key(k.dead(c.job_id));
            }
        }
        inv.arg(limits.history.max(1))
            .arg(limits.dead.max(1))
            .arg(limits.history_max_age_ms)
            .arg(k.changes());
        for c in &batch {
            let run = c.run;
            // `failed_ms` is added by the script, in Redis time.
            let can_die = can_die(c);
            let dead = if can_die {
                serde_json::json!({
                    "firing_id": run.firing_id,
                    "job_id": c.job_id,
                    "scheduled_ms": run.scheduled_ms,
                    "attempts": run.attempt,
                    "error": run.error,
                })
                .to_string()
            } else {
                String::new()
            };
            let (mut attempt, mut claimed) = (itoa::Buffer::new(), itoa::Buffer::new());
            inv.arg_of(&lease_member_parts(
                &run.firing_id,
                attempt.format(run.attempt),
                claimed.format(run.claimed_ms),
                &run.node,
            ))
            .arg(c.job_id)
            .arg_built(|out| write_open_record(out, run))?;
            // Options (see complete.lua): a success with nothing else to do is one character.
            let once = match c.once {
                Some(true) => "1",
                Some(false) => "0",
                None => "",
            };
            if run.outcome == "ok"
                && c.retry_delay_ms.is_none()
                && c.callback.is_none()
                && !once.is_empty()
                && !c.limits.any()
                && c.batch.is_none()
            {
                inv.arg(once);
                continue;
            }
            let mut opts = format!(
                "s{}|{}|{}|{}{}",
                run.outcome,
                once,
                c.retry_delay_ms.map(|d| d.to_string()).unwrap_or_default(),
                if can_die { '1' } else { '0' },
                if c.callback.is_some() { '1' } else { '0' },
            );
            if let Some(batch) = c.batch {
                opts.push('@');
                opts.push_str(batch);
            }
            if c.limits.any() {
                let text = |n: Option<u64>| n.map(|n| n.to_string()).unwrap_or_default();
                opts.push_str(&format!(
                    "#{}|{}",
                    text(c.limits.max_runs),
                    text(c.limits.pause_after_failures.map(u64::from))
                ));
            }
            inv.arg(opts);
            if can_die {
                inv.arg(dead);
            }
            if let Some(cb) = c.callback {
                inv.arg(cb);
            }
        }
        let text: Value = inv.invoke(&mut self.conn.clone()).await?;
        self.replicate(k).await;
        let bad = || Error::Corrupt(format!("complete reply {text:?}"));
        let Value::BulkString(bytes) = &text else {
            return Err(bad());
        };
        let mut words = std::str::from_utf8(bytes).map_err(|_| bad())?.split(' ');
        let now: i64 = words.next().and_then(|w| w.parse().ok()).ok_or_else(bad)?;
        let fates = words
            .map(|w| {
                Ok(match w {
                    "done" => Fate::Done,
                    "retry" => Fate::Retry,
                    "dead" => Fate::Dead,
                    "fenced" => Fate::Fenced,
                    "gone" => Fate::Gone,
                    _ => return Err(bad()),
                })
            })
            .collect::<Result<Vec<Fate>>>()?;
        if fates.len() != batch.len() {
            return Err(bad());
        }
        Ok(fates.into_iter().map(|f| (f, now)).collect())
    }

    /// Extend an attempt's lease; false when the lease is no longer this node's.
    /// `claimed_ms`: when the attempt was claimed (the claim's reply), which names the lease
    /// at once; None: the lease is looked up by attempt and node.
    pub async fn renew(
        &self,
        job_id: &str,
        at_ms: i64,
        attempt: u32,
        claimed_ms: Option<i64>,
        node: &str,
        lease_ms: i64,
    ) -> Result<bool> {
        let k = self.job_keys(job_id);
        let n: i64 = RENEW
            .key(k.running())
            .key(k.attempts())
            .key(k.job(job_id))
            .arg(node)
            .arg(firing_id(job_id, at_ms))
            .arg(lease_ms)
            .arg(attempt)
            .arg(claimed_ms.map(|c| c.to_string()).unwrap_or_default())
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(n == 1)
    }

    /// A job's run history, newest first.
    pub async fn runs(&self, id: &str, limit: usize) -> Result<Vec<RunRecord>> {
        let items: Vec<String> = self
            .conn
            .clone()
            .lrange(self.job_keys(id).runs(id), 0, limit as isize - 1)
            .await?;
        items
            .iter()
            .map(|s| serde_json::from_str(s).map_err(Error::from))
            .collect()
    }
}

/// Write a run record as complete.lua takes it: its JSON object without the closing brace (the
/// script appends the fields it knows and closes it, one string built instead of three).
/// Written field by field into the call's buffer, as serde_json writes the record
/// (a test holds the two equal): it is built for every firing, and the generic serializer
/// escaped every field name and grew its buffer several times.
fn write_open_record(out: &mut Vec<u8>, run: &RunRecord) -> Result<()> {
    let RunRecord {
        firing_id,
        scheduled_ms,
        attempt,
        node,
        claimed_ms,
        started_ms,
        outcome,
        error,
        finished_ms,
        fate,
        retry_at_ms,
    } = run;
    let strings = [
        Some(firing_id),
        Some(node),
        Some(outcome),
        error.as_ref(),
        fate.as_ref(),
    ];
    out.reserve(200 + strings.iter().flatten().map(|s| s.len()).sum::<usize>());
    let mut n = itoa::Buffer::new();
    out.extend_from_slice(b"{\"firing_id\":");
    write_str(out, firing_id)?;
    out.extend_from_slice(b",\"scheduled_ms\":");
    out.extend_from_slice(n.format(*scheduled_ms).as_bytes());
    out.extend_from_slice(b",\"attempt\":");
    out.extend_from_slice(n.format(*attempt).as_bytes());
    out.extend_from_slice(b",\"node\":");
    write_str(out, node)?;
    out.extend_from_slice(b",\"claimed_ms\":");
    out.extend_from_slice(n.format(*claimed_ms).as_bytes());
    out.extend_from_slice(b",\"started_ms\":");
    out.extend_from_slice(n.format(*started_ms).as_bytes());
    out.extend_from_slice(b",\"outcome\":");
    write_str(out, outcome)?;
    if let Some(e) = error {
        out.extend_from_slice(b",\"error\":");
        write_str(out, e)?;
    }
    if let Some(f) = finished_ms {
        out.extend_from_slice(b",\"finished_ms\":");
        out.extend_from_slice(n.format(*f).as_bytes());
    }
    if let Some(f) = fate {
        out.extend_from_slice(b",\"fate\":");
        write_str(out, f)?;
    }
    if let Some(r) = retry_at_ms {
        out.extend_from_slice(b",\"retry_at_ms\":");
        out.extend_from_slice(n.format(*r).as_bytes());
    }
    Ok(())
}

/// A JSON string: as it is between quotes when nothing in it needs escaping (ids, node
/// names, outcomes), else as serde_json writes it.
fn write_str(out: &mut Vec<u8>, s: &str) -> Result<()> {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
        return Ok(());
    }
    serde_json::to_writer(&mut *out, s)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A string is written as serde_json writes it, with or without a character to escape.
    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        for s in [
            "",
            "node-a",
            "n\u{153}ud-\u{e9}\u{7f}",
            "a\"b",
            "a\\b",
            "tab\there",
            "\u{1f}",
        ] {
            let mut out = Vec::new();
            write_str(&mut out, s).unwrap();
            assert_eq!(out, serde_json::to_vec(s).unwrap(), "{s:?}");
        }
    }

    /// The record written by hand is serde_json's, less its closing brace: with and without
    /// the optional fields, and with strings that need escaping.
    #[test]
    fn an_open_record_is_the_serialized_record_without_its_brace() {
        let plain = RunRecord {
            firing_id: "job-1:1700000000000".into(),
            scheduled_ms: 1_700_000_000_000,
            attempt: 1,
            node: "node-a".into(),
            claimed_ms: 1_700_000_000_007,
            started_ms: -3,
            outcome: "ok".into(),
            error: None,
            finished_ms: None,
            fate: None,
            retry_at_ms: None,
        };
        let full = RunRecord {
            firing_id: "j\"\\:1".into(),
            attempt: u32::MAX,
            node: "n\u{e9}\u{1}\n".into(),
            outcome: "failed".into(),
            error: Some("boom \"quoted\"\t\u{2028}".into()),
            finished_ms: Some(i64::MIN),
            fate: Some("dead".into()),
            retry_at_ms: Some(i64::MAX),
            ..plain.clone()
        };
        for r in [plain, full] {
            let mut open = Vec::new();
            write_open_record(&mut open, &r).unwrap();
            open.push(b'}');
            assert_eq!(open, serde_json::to_vec(&r).unwrap());
        }
    }
}
