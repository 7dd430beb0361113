//! What the store reads and writes: job records and state, leases, runs, dead letters, and
//! the typed replies of the scripts.

use redis::{FromRedisValue, ParsingError, Value};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::job::JobSpec;

/// A job's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Scheduled: it has a pending firing.
    Active,
    /// Kept, but fires nothing until resumed.
    Paused,
    /// No firing left (a one-shot that ran, or past its window's end).
    Finished,
    /// A one-shot task waiting for the task its `after_task` names to succeed.
    Waiting,
}

impl JobStatus {
    pub(super) fn parse(s: &str) -> Result<Self> {
        match s {
            "active" => Ok(Self::Active),
            "paused" => Ok(Self::Paused),
            "finished" => Ok(Self::Finished),
            "waiting" => Ok(Self::Waiting),
            other => Err(Error::Corrupt(format!("unknown job status '{other}'"))),
        }
    }

    /// The status as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Paused => "paused",
            Self::Finished => "finished",
            Self::Waiting => "waiting",
        }
    }
}

/// A job as stored: its spec and its state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// The job as declared (with `after` resolved).
    pub spec: JobSpec,
    /// Bumped by every upsert.
    pub version: u64,
    /// Lifecycle state.
    pub status: JobStatus,
    /// Next pending firing (ms, Redis time).
    pub next_ms: Option<i64>,
    /// Instant of the last claimed firing.
    pub last_ms: Option<i64>,
    /// Creation instant (ms, Redis time).
    pub created_ms: i64,
    /// Last change (ms, Redis time).
    pub updated_ms: i64,
    /// Runs started: attempts claimed (a run in progress counts).
    pub runs: u64,
    /// Runs that failed.
    pub failures: u64,
    /// Firings skipped under the misfire policy.
    pub missed: u64,
    /// Firings skipped because the previous run still ran (overlap `forbid`).
    pub skipped: u64,
    /// Firings that ended in the dead letters.
    pub dead: u64,
    /// Manual triggers.
    pub triggered: u64,
    /// The firing of the latest run claimed (it may have ended), if any.
    pub active: Option<String>,
    /// When the job was last paused (ms, Redis time).
    pub paused_ms: Option<i64>,
    /// Run limits: why keyfire itself stopped the job (`max_runs`: finished; `failures`:
    /// paused), its successful firings of the schedule (counted while it has `max_runs`) and
    /// its failed firings in a row (counted while it has `pause_after_failures`).
    #[serde(default)]
    pub run_limits: RunLimitState,
}

/// What a job's run limits have counted, and whether they stopped it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunLimitState {
    /// `max_runs` (the job finished after its last counted success) or `failures` (paused
    /// after `pause_after_failures` failed firings in a row); None when they did not stop it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Successful firings of the schedule, counted toward `max_runs`.
    #[serde(default)]
    pub succeeded: u64,
    /// Failed firings in a row, counted toward `pause_after_failures`.
    #[serde(default)]
    pub failure_streak: u64,
}

/// The fields of a job hash that [`Store::job_state`] reads before a change.
#[derive(Debug, Clone, Default)]
pub struct JobState {
    /// 0 when the job does not exist.
    pub version: u64,
    /// Next firing, if pending.
    pub next_ms: Option<i64>,
    /// Creation instant, if it exists.
    pub created_ms: Option<i64>,
    /// Status, if it exists.
    pub status: Option<JobStatus>,
}

/// What a heartbeat says of its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beat {
    /// Alive and in the live set.
    Alive,
    /// Out of the live set (it owns no firings) but alive: it drains its runs, which are
    /// not to be taken from it.
    Draining,
    /// Gone: nothing of it is left to take over.
    Gone,
}

/// A run in progress, from its lease: the running ZSET's entry, member
/// `<firing id>|<attempt>|<claimed ms>|<node>` and score the lease expiry (see
/// [`lease_member`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The job.
    pub job_id: String,
    /// The firing's scheduled instant (ms).
    pub at_ms: i64,
    /// When the lease expires unless renewed (ms, Redis time).
    pub expiry_ms: i64,
    /// The attempt that runs (0 when the lease does not say: an earlier layout's).
    pub attempt: u32,
    /// When it was claimed (ms, Redis time; 0 when the lease does not say).
    pub claimed_ms: i64,
    /// The node that holds it (None when the lease does not say).
    pub node: Option<String>,
}

/// A run's lease as the running ZSET holds it: `<firing id>|<attempt>|<claimed ms>|<node>`.
/// One entry is both the run's fence (renewals and the outcome must name it) and its lease
/// expiry (the score). Job ids and instants hold no `|`; the node id comes last.
pub fn lease_member(firing_id: &str, attempt: u32, claimed_ms: i64, node: &str) -> String {
    let (mut a, mut c) = (itoa::Buffer::new(), itoa::Buffer::new());
    super::keys::concat(&lease_member_parts(
        firing_id,
        a.format(attempt),
        c.format(claimed_ms),
        node,
    ))
}

/// The parts of a [`lease_member`] (its numbers written as text): a script call on the
/// firing path writes them into its command, building no string per member.
pub(crate) fn lease_member_parts<'a>(
    firing_id: &'a str,
    attempt: &'a str,
    claimed_ms: &'a str,
    node: &'a str,
) -> [&'a str; 7] {
    [firing_id, "|", attempt, "|", claimed_ms, "|", node]
}

/// Split a running ZSET member into the firing id and, for a lease of this layout, (attempt,
/// claimed ms, node); None for an earlier layout's member (the bare firing id, its record
/// in the attempts hash: see [`parse_lease_record`]).
pub fn parse_lease_member(member: &str) -> (&str, Option<(u32, i64, &str)>) {
    let Some((fid, rest)) = member.split_once('|') else {
        return (member, None);
    };
    let mut parts = rest.splitn(3, '|');
    let lease = (|| {
        let attempt = parts.next()?.parse().ok()?;
        let claimed = parts.next()?.parse().ok()?;
        Some((attempt, claimed, parts.next()?))
    })();
    (fid, lease)
}

/// A lease record of the earlier layout (the attempts hash), `<attempt>:<claimed ms>:<node>`,
/// as (attempt, claimed ms, node); None for a queued attempt's record (a bare attempt
/// number).
pub fn parse_lease_record(record: &str) -> Option<(u32, i64, &str)> {
    let mut parts = record.splitn(3, ':');
    let attempt = parts.next()?.parse().ok()?;
    let claimed = parts.next()?.parse().ok()?;
    Some((attempt, claimed, parts.next()?))
}

/// One run of a firing, as kept in the job's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// `<job id>:<instant ms>`.
    pub firing_id: String,
    /// The scheduled instant (ms).
    pub scheduled_ms: i64,
    /// 1 for the first run of a firing.
    pub attempt: u32,
    /// The node that ran it.
    pub node: String,
    /// When the claim succeeded (ms, Redis time).
    #[serde(default)]
    pub claimed_ms: i64,
    /// When the handler started (ms, Redis time as the node estimates it).
    #[serde(default)]
    pub started_ms: i64,
    /// `ok`, `failed`, `timeout`, `cancelled` (overlap `replace`) or `lost` (lease expired).
    pub outcome: String,
    /// The handler's error, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When the run ended (ms, Redis time); filled in by Redis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<i64>,
    /// What became of the firing: `done`, `retry` or `dead`; filled in by Redis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fate: Option<String>,
    /// When the next attempt is due, if one was scheduled; filled in by Redis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at_ms: Option<i64>,
}

/// A firing that used up its attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// `<job id>:<instant ms>`.
    pub firing_id: String,
    /// The job.
    pub job_id: String,
    /// The scheduled instant (ms).
    #[serde(default)]
    pub scheduled_ms: i64,
    /// Attempts made.
    pub attempts: u32,
    /// The last error.
    #[serde(default)]
    pub error: Option<String>,
    /// When it was moved here (ms, Redis time); filled in by Redis.
    #[serde(default)]
    pub failed_ms: i64,
}

/// What became of a firing after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Finished (success, or cancelled by a replacing run).
    Done,
    /// The next attempt is scheduled.
    Retry,
    /// Attempts used up: in the dead letters.
    Dead,
    /// A newer attempt of this firing exists; this outcome was not recorded.
    Fenced,
    /// The job was deleted while the attempt ran; nothing was recorded.
    Gone,
}

/// The reply of the claim script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimReply {
    /// This node holds the firing; `now_ms` is Redis time at the claim (up to the claim
    /// lead before the firing's release: the run then waits for its release).
    Claimed {
        /// Redis time of the claim.
        now_ms: i64,
        /// The attempt granted.
        attempt: u32,
    },
    /// Claimed already, or the job changed, was paused or deleted: nothing to do.
    Stale,
    /// The instant is still `wait_ms` away by Redis's clock (beyond the claim lead).
    Early {
        /// How long until it is due.
        wait_ms: i64,
    },
    /// The job changed to this version; recompute the next firing with its spec.
    VersionChanged {
        /// The stored version.
        version: u64,
    },
    /// The computed next firing is older than the misfire tolerance; recompute from `now_ms`.
    Misfire {
        /// Redis time.
        now_ms: i64,
    },
    /// A run of this firing holds its lock.
    Locked,
    /// Skipped under the misfire policy (recorded as missed).
    Missed,
    /// Skipped: the job's previous run still runs (overlap `forbid`).
    Overlapped,
    /// Dropped: the job is paused or gone.
    Dropped,
}

fn parse_err(what: &str, v: &Value) -> ParsingError {
    ParsingError::from(format!("unexpected {what} reply: {v:?}"))
}

impl ClaimReply {
    /// A claim call's reply, one text for the call (see claim.lua): per firing its code,
    /// followed by a number for codes 1 to 4. None unless it holds exactly `n` replies.
    pub(super) fn from_text(text: &[u8], n: usize) -> Option<Vec<Self>> {
        let mut words = text
            .split(|&b| b == b' ')
            .filter(|w| !w.is_empty())
            .map(|w| std::str::from_utf8(w).ok()?.parse::<i64>().ok());
        let mut out = Vec::with_capacity(n);
        while let Some(code) = words.next() {
            let mut num = || words.next().flatten();
            out.push(match code? {
                1 => ClaimReply::Claimed {
                    now_ms: num()?,
                    attempt: 1,
                },
                0 => ClaimReply::Stale,
                2 => ClaimReply::Early { wait_ms: num()? },
                3 => ClaimReply::VersionChanged {
                    version: u64::try_from(num()?).ok()?,
                },
                4 => ClaimReply::Misfire { now_ms: num()? },
                5 => ClaimReply::Locked,
                6 => ClaimReply::Missed,
                7 => ClaimReply::Overlapped,
                _ => return None,
            });
        }
        (out.len() == n).then_some(out)
    }

    /// `claim_retry.lua`'s reply, read in place: `code`, `arg`, and the attempt.
    pub(super) fn from_values(items: &[Value]) -> std::result::Result<Self, ParsingError> {
        let bad = || parse_err("claim", &Value::Array(items.to_vec()));
        let (code, arg) = match items {
            [code, arg, ..] => (i64::from_redis_value_ref(code)?, arg),
            _ => return Err(bad()),
        };
        let num = || i64::from_redis_value_ref(arg);
        Ok(match code {
            1 => ClaimReply::Claimed {
                now_ms: num()?,
                attempt: match items.get(2) {
                    Some(a) => u32::from_redis_value_ref(a)?,
                    None => 1,
                },
            },
            0 => ClaimReply::Stale,
            2 => ClaimReply::Early { wait_ms: num()? },
            3 => ClaimReply::VersionChanged {
                version: u64::from_redis_value_ref(arg)?,
            },
            4 => ClaimReply::Misfire { now_ms: num()? },
            5 => ClaimReply::Locked,
            6 => ClaimReply::Missed,
            7 => ClaimReply::Overlapped,
            8 => ClaimReply::Dropped,
            _ => return Err(bad()),
        })
    }
}

impl FromRedisValue for ClaimReply {
    fn from_redis_value(v: Value) -> std::result::Result<Self, ParsingError> {
        match v {
            Value::Array(items) => Self::from_values(&items),
            other => Err(parse_err("claim", &other)),
        }
    }
}

/// What the upsert script did.
#[derive(Debug, Clone)]
pub enum UpsertReply {
    /// Written with this version and state.
    Written {
        /// New version.
        version: u64,
        /// Status after the write.
        status: JobStatus,
        /// Next firing.
        next_ms: Option<i64>,
    },
    /// The job's version was not the expected one.
    Conflict,
}

pub(super) fn opt_ms(s: &str) -> Option<i64> {
    s.parse().ok()
}

/// One attempt's end, for [`Store::complete_many`].
#[derive(Debug, Clone, Copy)]
pub struct Completion<'a> {
    /// The job.
    pub job_id: &'a str,
    /// The run record (its `finished_ms`, `fate` and `retry_at_ms` are filled in by Redis).
    pub run: &'a RunRecord,
    /// Schedule the next attempt after this long; None: no further attempt.
    pub retry_delay_ms: Option<i64>,
    /// Whether the job is a one-shot (its success marks it done, for the retention cleanup);
    /// None: read it from the job (one more Redis command).
    pub once: Option<bool>,
    /// A callback to queue with the outcome (JSON, see [`Store::take_callbacks`]): written
    /// only if the outcome is the one it reports (a success, or a firing that is dead).
    pub callback: Option<&'a str>,
    /// The job's run limits: its counts are kept when either is set.
    pub limits: crate::job::RunLimits,
    /// The batch of a task enqueued with a completion callback (its end counts there).
    pub batch: Option<&'a str>,
}

/// A job's spec as a claimer needs it.
#[derive(Debug, Clone)]
pub struct StoredSpec {
    /// Bumped by every upsert.
    pub version: u64,
    /// Taken when the job is created; a job created again after a delete has a new one.
    pub generation: u64,
    /// The spec.
    pub spec: JobSpec,
    /// Creation instant (ms).
    pub created_ms: i64,
    /// Read from a compact task (its claim reads that record for the version check).
    pub compact: bool,
}

/// How much history to keep.
#[derive(Debug, Clone, Copy)]
pub struct HistoryLimits {
    /// Run records per job.
    pub history: usize,
    /// Oldest run record kept, in ms.
    pub history_max_age_ms: i64,
    /// Dead letters per job.
    pub dead: usize,
}

/// A claim request: one firing and what the claimer computed for it.
#[derive(Debug, Clone)]
pub struct ClaimArgs<'a> {
    /// The job.
    pub job_id: &'a str,
    /// The firing's instant.
    pub at_ms: i64,
    /// The job version `next_ms` was computed with.
    pub version: u64,
    /// The job's generation (a job created again after a delete has a new one).
    pub generation: u64,
    /// The job's next firing after this one.
    pub next_ms: Option<i64>,
    /// The claiming node.
    pub node: &'a str,
    /// Lease / lock lifetime.
    pub lease_ms: i64,
    /// The claim lead: how long before its release (its instant, plus its jitter offset) the
    /// firing may be claimed; a claim made ahead answers Redis's now, and the caller holds
    /// the run until the release, counted from that now (0: claimed at its release or
    /// later). One per script call; the batch's first value counts.
    pub ahead_ms: i64,
    /// Misfire tolerance of the job.
    pub tolerance_ms: i64,
    /// The caller applied the misfire policy: `next_ms`, `run` and `missed` stand as given.
    pub misfire_applied: bool,
    /// Run this firing (false: skip it under the misfire policy).
    pub run: bool,
    /// Firings to count as missed.
    pub missed: u64,
    /// The job's overlap policy.
    pub overlap: &'a str,
    /// Announce the next firing on the change channel when it is due within this many ms of
    /// Redis's now (or already due), so that its owner arms a timer: the node's timer
    /// horizon. One message per script call; the batch's first value counts.
    pub announce_ms: i64,
    /// The caller owns every next firing of the call and arms the timers of those the claim
    /// gives no sentinel key (`next_ms - at_ms` within `announce_ms`) itself when the claim
    /// moves the firing on (claimed, missed or overlapped): the claim announces none. One per
    /// script call; the batch's first value counts.
    pub arms_next: bool,
    /// The job was read as a compact task: the claim reads its record for the version check.
    pub compact: bool,
    /// The instants the caller's misfire plan drops (`missed` of them), for the ledger.
    pub dropped: Option<Dropped>,
    /// The job's `max_runs`: the firing runs only while its successes and open firings
    /// are fewer.
    pub max_runs: Option<u64>,
    /// The firing's jitter offset (0: none): it is claimed no earlier than `at_ms` plus this,
    /// and its lateness is judged from then.
    pub jitter_ms: i64,
}

/// A range of late instants a misfire plan drops: the ledger's record of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    /// `misfire`, `merged` or `catch_up_limit` (the claim makes it `paused` when the range
    /// began during a pause).
    pub reason: super::SkipReason,
    /// The first instant dropped (ms).
    pub first_ms: i64,
    /// The last (ms).
    pub last_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_members_parse_back() {
        let m = lease_member("job-1.a_b:1700000000123", 3, 1_700_000_000_456, "host:1|x");
        assert_eq!(m, "job-1.a_b:1700000000123|3|1700000000456|host:1|x");
        assert_eq!(
            parse_lease_member(&m),
            (
                "job-1.a_b:1700000000123",
                Some((3, 1_700_000_000_456, "host:1|x"))
            )
        );
        // The earlier layout's member: the bare firing id.
        assert_eq!(parse_lease_member("j:17"), ("j:17", None));
        assert_eq!(parse_lease_record("2:17:n1"), Some((2, 17, "n1")));
        assert_eq!(parse_lease_record("2"), None);
    }

    #[test]
    fn a_claim_calls_text_reads_as_one_reply_per_firing() {
        let got = ClaimReply::from_text(b"1 1700000000123 0 2 40 3 7 4 1700000000999 5 6 7", 8)
            .expect("eight replies");
        assert!(matches!(
            got[0],
            ClaimReply::Claimed {
                now_ms: 1_700_000_000_123,
                attempt: 1
            }
        ));
        assert!(matches!(got[1], ClaimReply::Stale));
        assert!(matches!(got[2], ClaimReply::Early { wait_ms: 40 }));
        assert!(matches!(got[3], ClaimReply::VersionChanged { version: 7 }));
        assert!(matches!(
            got[4],
            ClaimReply::Misfire {
                now_ms: 1_700_000_000_999
            }
        ));
        assert!(matches!(got[5], ClaimReply::Locked));
        assert!(matches!(got[6], ClaimReply::Missed));
        assert!(matches!(got[7], ClaimReply::Overlapped));
        // Too few or too many replies, a code without its number, an unknown code: refused.
        assert!(ClaimReply::from_text(b"1 17 0", 3).is_none());
        assert!(ClaimReply::from_text(b"1 17 0", 1).is_none());
        assert!(ClaimReply::from_text(b"1", 1).is_none());
        assert!(ClaimReply::from_text(b"9", 1).is_none());
        assert!(ClaimReply::from_text(b"1 x", 1).is_none());
    }
}
