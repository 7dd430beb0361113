//! What the bench measures besides lateness: Redis's `INFO` (command counts, memory, CPU)
//! and this process's CPU time, taken as snapshots at the edges of a measured phase.
//!
//! Every Redis figure is read from each of the connections given (one per master: one in
//! standalone mode, every master of a cluster) and summed; when one master does not answer,
//! the figure is left out rather than reported for part of the deployment.

use std::collections::HashMap;
use std::time::Instant;

use redis::aio::MultiplexedConnection;

/// Commands the harness itself sends while measuring; left out of the per-firing count.
const HARNESS_COMMANDS: &[&str] = &["info", "client|list", "ping"];

/// Redis commands that run Lua: `INFO commandstats` counts each of them once *and* every
/// `redis.call` inside it under that command's own name.
pub const SCRIPT_COMMANDS: &[&str] = &["evalsha", "eval", "evalsha_ro", "eval_ro", "fcall"];

/// Read one `INFO` section.
pub async fn info(conn: &mut MultiplexedConnection, section: &str) -> redis::RedisResult<String> {
    redis::cmd("INFO").arg(section).query_async(conn).await
}

/// Read one `INFO` section from every master at once, in the order given.
pub async fn info_all(
    masters: &[MultiplexedConnection],
    section: &str,
) -> redis::RedisResult<Vec<String>> {
    futures::future::try_join_all(masters.iter().map(|c| {
        let mut c = c.clone();
        async move { info(&mut c, section).await }
    }))
    .await
}

/// Commands one master ran in all (`INFO commandstats`), the harness's own left out.
pub fn master_calls(text: &str) -> u64 {
    parse_commandstats(text)
        .into_iter()
        .filter(|(name, _)| !HARNESS_COMMANDS.contains(&name.as_str()))
        .map(|(_, n)| n)
        .sum()
}

/// One master's CPU seconds (`used_cpu_user + used_cpu_sys`: the whole process).
pub fn master_cpu_s(text: &str) -> Option<f64> {
    Some(info_number(text, "used_cpu_user")? + info_number(text, "used_cpu_sys")?)
}

/// `INFO commandstats` of several masters, added up per command.
pub fn sum_commandstats(texts: &[String]) -> HashMap<String, u64> {
    let mut total: HashMap<String, u64> = HashMap::new();
    for t in texts {
        for (name, calls) in parse_commandstats(t) {
            *total.entry(name).or_default() += calls;
        }
    }
    total
}

/// `INFO commandstats` of several masters, added up per command: microseconds spent.
pub fn sum_commandstats_usec(texts: &[String]) -> HashMap<String, u64> {
    let mut total: HashMap<String, u64> = HashMap::new();
    for t in texts {
        for (name, usec) in parse_commandstats_field(t, "usec=") {
            *total.entry(name).or_default() += usec;
        }
    }
    total
}

/// `INFO commandstats` as command name → calls.
pub fn parse_commandstats(text: &str) -> HashMap<String, u64> {
    parse_commandstats_field(text, "calls=")
}

/// `INFO commandstats` as command name → one of its counters (`calls=`, `usec=`).
fn parse_commandstats_field(text: &str, field: &str) -> HashMap<String, u64> {
    keyfire::store::parse_info(text)
        .into_iter()
        .filter_map(|(k, v)| {
            let name = k.strip_prefix("cmdstat_")?;
            let n = v
                .split(',')
                .find_map(|kv| kv.strip_prefix(field))?
                .parse()
                .ok()?;
            Some((name.to_string(), n))
        })
        .collect()
}

/// A numeric field of an `INFO` section.
pub fn info_number(text: &str, field: &str) -> Option<f64> {
    keyfire::store::parse_info(text).get(field)?.parse().ok()
}

/// This process's user + system CPU time, in seconds (every in-process node plus the harness).
pub fn process_cpu_s() -> f64 {
    use nix::sys::resource::{UsageWho, getrusage};
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let tv = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            tv(u.user_time()) + tv(u.system_time())
        }
        Err(_) => 0.0,
    }
}

/// Redis's state and this process's CPU at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// When it was taken (local monotonic clock).
    pub at: Instant,
    /// This process's CPU seconds.
    pub cpu_node_s: f64,
    /// Redis's CPU seconds (`used_cpu_user + used_cpu_sys`: the whole process, every thread;
    /// summed over the masters).
    pub cpu_redis_s: Option<f64>,
    /// Calls per command, summed over the masters; None when `INFO commandstats` is not
    /// available.
    pub commands: Option<HashMap<String, u64>>,
    /// Microseconds Redis spent per command (`usec` of `INFO commandstats`), summed over
    /// the masters.
    pub usec: Option<HashMap<String, u64>>,
    /// Firings the bench handler had recorded.
    pub recorded: usize,
    /// Each master's commands in all (the harness's own left out), in the order of the
    /// connections.
    pub calls_by_master: Option<Vec<u64>>,
    /// Each master's CPU seconds.
    pub cpu_by_master: Option<Vec<f64>>,
}

impl Snapshot {
    /// Take a snapshot of every master in `masters` (one connection each); `recorded` is
    /// the recorder's count at this moment.
    pub async fn take(masters: &[MultiplexedConnection], recorded: usize) -> Self {
        let cpu_node_s = process_cpu_s();
        let cpu = info_all(masters, "cpu").await.ok();
        let stats = info_all(masters, "commandstats").await.ok();
        let cpu_by_master: Option<Vec<f64>> = cpu
            .as_deref()
            .and_then(|texts| texts.iter().map(|t| master_cpu_s(t)).collect());
        Self {
            at: Instant::now(),
            cpu_node_s,
            cpu_redis_s: cpu_by_master
                .as_ref()
                .filter(|v| !v.is_empty())
                .map(|v| v.iter().sum()),
            commands: stats.as_deref().map(sum_commandstats),
            usec: stats.as_deref().map(sum_commandstats_usec),
            recorded,
            calls_by_master: stats
                .as_deref()
                .map(|texts| texts.iter().map(|t| master_calls(t)).collect()),
            cpu_by_master,
        }
    }
}

/// What happened between two snapshots.
#[derive(Debug, Clone)]
pub struct Delta {
    /// Wall time between them, s.
    pub wall_s: f64,
    /// This process's CPU, s.
    pub cpu_node_s: f64,
    /// Redis's CPU, s.
    pub cpu_redis_s: Option<f64>,
    /// Calls per command between them, the harness's own left out, most first.
    pub commands: Option<Vec<(String, u64)>>,
    /// Microseconds Redis spent per command between them, the harness's own left out.
    pub usec: Option<Vec<(String, u64)>>,
    /// Firings recorded between them.
    pub recorded: usize,
    /// Each master's commands between them (the harness's own left out).
    pub calls_by_master: Option<Vec<u64>>,
    /// Each master's CPU seconds between them.
    pub cpu_by_master: Option<Vec<f64>>,
}

impl Delta {
    /// The change from `a` to `b`.
    pub fn between(a: &Snapshot, b: &Snapshot) -> Self {
        Self {
            commands: counter_delta(&a.commands, &b.commands),
            usec: counter_delta(&a.usec, &b.usec),
            wall_s: b.at.duration_since(a.at).as_secs_f64(),
            cpu_node_s: b.cpu_node_s - a.cpu_node_s,
            cpu_redis_s: a.cpu_redis_s.zip(b.cpu_redis_s).map(|(x, y)| y - x),
            recorded: b.recorded.saturating_sub(a.recorded),
            calls_by_master: pairwise(&a.calls_by_master, &b.calls_by_master, |x, y| {
                y.saturating_sub(x)
            }),
            cpu_by_master: pairwise(&a.cpu_by_master, &b.cpu_by_master, |x, y| y - x),
        }
    }

    /// Every command Redis executed, those run inside scripts included.
    pub fn total_calls(&self) -> Option<u64> {
        Some(self.commands.as_ref()?.iter().map(|(_, n)| n).sum())
    }

    /// Microseconds Redis spent executing commands, counted as the calls are: a script's
    /// time includes what it called, and each of those calls counts again on its own
    /// (`INFO commandstats` gives no other split). Unlike `used_cpu_*` it leaves out the
    /// event loop, I/O and the machine's other load, so it moves with the work done, not
    /// with noise: the figure to compare two builds by.
    pub fn total_usec(&self) -> Option<u64> {
        Some(self.usec.as_ref()?.iter().map(|(_, n)| n).sum())
    }

    /// Microseconds Redis spent in scripts (`EVALSHA` and kin), what they called included.
    pub fn script_usec(&self) -> Option<u64> {
        Some(
            self.usec
                .as_ref()?
                .iter()
                .filter(|(name, _)| SCRIPT_COMMANDS.contains(&name.as_str()))
                .map(|(_, n)| n)
                .sum(),
        )
    }

    /// Script invocations (`EVALSHA` and kin), each counted once.
    pub fn script_calls(&self) -> Option<u64> {
        Some(
            self.commands
                .as_ref()?
                .iter()
                .filter(|(name, _)| SCRIPT_COMMANDS.contains(&name.as_str()))
                .map(|(_, n)| n)
                .sum(),
        )
    }

    /// `calls / per`, rounded to two decimals.
    pub fn per(&self, calls: Option<u64>, per: usize) -> Option<f64> {
        (per > 0).then_some(round2(calls? as f64 / per as f64))
    }

    /// The command mix as `name=calls/firing` for the log, most first.
    pub fn mix(&self, per: usize) -> String {
        let Some(cmds) = &self.commands else {
            return "INFO commandstats unavailable".into();
        };
        cmds.iter()
            .take(16)
            .map(|(name, n)| format!("{name}={:.2}", *n as f64 / per.max(1) as f64))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// `f(a[i], b[i])` for each master; None unless both have every master.
fn pairwise<T: Copy>(
    a: &Option<Vec<T>>,
    b: &Option<Vec<T>>,
    f: impl Fn(T, T) -> T,
) -> Option<Vec<T>> {
    let (a, b) = (a.as_ref()?, b.as_ref()?);
    (a.len() == b.len()).then(|| a.iter().zip(b).map(|(x, y)| f(*x, *y)).collect())
}

/// Each value's share of their sum, rounded to three decimals; None when the sum is not
/// positive (nothing to share) or a value is negative (a measurement that went backwards).
pub fn shares(values: &[f64]) -> Option<Vec<f64>> {
    let total: f64 = values.iter().sum();
    if values.is_empty() || total <= 0.0 || values.iter().any(|v| *v < 0.0) {
        return None;
    }
    Some(
        values
            .iter()
            .map(|v| (v / total * 1000.0).round() / 1000.0)
            .collect(),
    )
}

/// How far a master's share may be from an even one (`1 / masters`), relative to it.
pub const SHARE_TOLERANCE: f64 = 0.15;

/// The shares outside `1 / n × (1 ± SHARE_TOLERANCE)`, as `(index, share)`.
pub fn uneven(shares: &[f64]) -> Vec<(usize, f64)> {
    let even = 1.0 / shares.len().max(1) as f64;
    shares
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, s)| (s - even).abs() > even * SHARE_TOLERANCE + 1e-9)
        .collect()
}

/// Per-command counters from `a` to `b`, the harness's own left out, most first.
fn counter_delta(
    a: &Option<HashMap<String, u64>>,
    b: &Option<HashMap<String, u64>>,
) -> Option<Vec<(String, u64)>> {
    let (x, y) = (a.as_ref()?, b.as_ref()?);
    let mut v: Vec<(String, u64)> = y
        .iter()
        .filter(|(name, _)| !HARNESS_COMMANDS.contains(&name.as_str()))
        .map(|(name, n)| {
            let before = x.get(name).copied().unwrap_or(0);
            (name.clone(), n.saturating_sub(before))
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    v.sort_by(|p, q| q.1.cmp(&p.1).then(p.0.cmp(&q.0)));
    Some(v)
}

/// `x` rounded to two decimals (for the JSON line).
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Memory Redis holds for data: `used_memory` less client buffers, which swing with the
/// subscribers' backlog and are not part of what a pending job costs; one figure per master.
pub async fn data_memory(masters: &[MultiplexedConnection]) -> Option<Vec<f64>> {
    let texts = info_all(masters, "memory").await.ok()?;
    texts
        .iter()
        .map(|text| {
            let used = info_number(text, "used_memory")?;
            let clients = info_number(text, "mem_clients_normal").unwrap_or(0.0);
            Some(used - clients)
        })
        .collect()
}

/// Lateness percentiles (nearest rank) over sorted values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Percentiles {
    /// Median.
    pub p50: i64,
    /// 90th percentile.
    pub p90: i64,
    /// 99th percentile.
    pub p99: i64,
    /// Largest.
    pub max: i64,
}

/// The nearest-rank `p`-th percentile (0 < p ≤ 100) of sorted values.
pub fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Percentiles {
    /// Percentiles of `sorted`; None when empty.
    pub fn of(sorted: &[i64]) -> Option<Self> {
        Some(Self {
            p50: percentile(sorted, 50.0),
            p90: percentile(sorted, 90.0),
            p99: percentile(sorted, 99.0),
            max: *sorted.last()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commandstats_parse_with_subcommands() {
        let text = "# Commandstats\r\ncmdstat_evalsha:calls=12,usec=80,usec_per_call=6.67,rejected_calls=0,failed_calls=0\r\ncmdstat_config|get:calls=3,usec=9,usec_per_call=3.00,rejected_calls=0,failed_calls=0\r\n";
        let m = parse_commandstats(text);
        assert_eq!(m["evalsha"], 12);
        assert_eq!(m["config|get"], 3);
        let u = sum_commandstats_usec(&[text.to_string()]);
        assert_eq!((u["evalsha"], u["config|get"]), (80, 9));
    }

    #[test]
    fn usec_deltas_count_the_masters_own_work_with_scripts_apart() {
        let snap = |text: &str, recorded| Snapshot {
            at: Instant::now(),
            cpu_node_s: 0.0,
            cpu_redis_s: None,
            commands: Some(sum_commandstats(&[text.to_string()])),
            usec: Some(sum_commandstats_usec(&[text.to_string()])),
            recorded,
            calls_by_master: Some(vec![master_calls(text)]),
            cpu_by_master: None,
        };
        let a = snap(
            "cmdstat_evalsha:calls=1,usec=100\r\ncmdstat_set:calls=1,usec=10\r\ncmdstat_info:calls=1,usec=50\r\n",
            0,
        );
        let b = snap(
            "cmdstat_evalsha:calls=3,usec=400\r\ncmdstat_set:calls=5,usec=30\r\ncmdstat_info:calls=9,usec=900\r\n",
            2,
        );
        let d = Delta::between(&a, &b);
        assert_eq!(d.total_usec(), Some(320));
        assert_eq!(d.script_usec(), Some(300));
        assert_eq!(d.per(d.total_usec(), d.recorded), Some(160.0));
        // The harness's INFO calls are not a master's work.
        assert_eq!(d.calls_by_master, Some(vec![6]));
    }

    #[test]
    fn commandstats_and_numbers_sum_over_masters() {
        let a =
            "cmdstat_evalsha:calls=2,usec=1\r\ncmdstat_get:calls=5,usec=1\r\nused_cpu_sys:1.5\r\n";
        let b = "cmdstat_evalsha:calls=3,usec=1\r\nused_cpu_sys:0.25\r\n";
        let texts = [a.to_string(), b.to_string()];
        let m = sum_commandstats(&texts);
        assert_eq!((m["evalsha"], m["get"]), (5, 5));
        assert_eq!((master_calls(a), master_calls(b)), (7, 3));
        let cpu = "used_cpu_sys:1.5\r\nused_cpu_user:0.25\r\n";
        assert_eq!(master_cpu_s(cpu), Some(1.75));
        assert_eq!(master_cpu_s(a), None, "no used_cpu_user");
    }

    #[test]
    fn uneven_masters_are_flagged_by_their_share() {
        let s = shares(&[100.0, 100.0, 200.0]).unwrap();
        assert_eq!(s, vec![0.25, 0.25, 0.5]);
        assert_eq!(uneven(&s), vec![(0, 0.25), (1, 0.25), (2, 0.5)]);
        // 1/3 ± 15 %: 0.283 to 0.383.
        assert!(uneven(&[0.30, 0.32, 0.38]).is_empty());
        assert_eq!(uneven(&[0.28, 0.34, 0.38]), vec![(0, 0.28)]);
        assert_eq!(shares(&[0.0, 0.0]), None);
        assert_eq!(shares(&[5.0, -1.0]), None, "memory that shrank is no share");
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(
            Percentiles::of(&v),
            Some(Percentiles {
                p50: 50,
                p90: 90,
                p99: 99,
                max: 100
            })
        );
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(Percentiles::of(&[]), None);
    }
}
