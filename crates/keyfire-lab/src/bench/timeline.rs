//! What the measured phase looked like from moment to moment: every [`EVERY`] the harness
//! reads each master's CPU and command count, this process's CPU, the firings the handler
//! recorded and the nodes' claims under way. From the first due instant to the end of the
//! phase this gives Redis's CPU *through* the firings (`cpu_pct_redis_firing`), leaving out
//! the wait before the instant that the phase's own figures include, and, with `--timeline`,
//! a table on stderr that shows where a run's time went: Redis busy, the nodes busy, or both
//! waiting for each other.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::harness::Harness;
use super::metrics::{self, info_all, round2};

/// How often the timeline reads Redis and the nodes.
pub const EVERY: Duration = Duration::from_millis(100);

/// The figures at one moment; counters are totals since start (differences give rates).
#[derive(Debug, Clone)]
pub struct Point {
    /// When (local monotonic clock).
    pub at: Instant,
    /// Each master's CPU seconds.
    pub redis_cpu_s: Option<Vec<f64>>,
    /// Each master's commands in all (the harness's own left out).
    pub calls: Option<Vec<u64>>,
    /// Script calls (`EVALSHA` and kin), every master's.
    pub scripts: Option<u64>,
    /// This process's CPU seconds (every node and the harness).
    pub process_cpu_s: f64,
    /// Firings run (the bench handler's records) or, in `queue`, tasks finished.
    pub recorded: usize,
    /// Scheduled claims under way on the nodes (a gauge: waiting for a permit, queued or in
    /// flight).
    pub claims_pending: u64,
    /// Firings claimed ahead of a run permit and waiting for one (a gauge).
    pub ahead_waiting: u64,
    /// Runs the nodes finished (outcome recorded), in all.
    pub completed: u64,
    /// Outcomes of ended runs not recorded in Redis yet (a gauge; see
    /// [`keyfire::engine::NodeHandle::outcomes_unrecorded`]).
    pub unrecorded: usize,
}

impl Harness {
    /// The figures now; `done` counts what the scenario finished (see [`Point::recorded`]).
    pub async fn point(&self, done: &(dyn Fn() -> usize + Sync)) -> Point {
        let process_cpu_s = metrics::process_cpu_s();
        let (cpu, stats) = futures::join!(
            info_all(&self.admin, "cpu"),
            info_all(&self.admin, "commandstats")
        );
        let stats = stats.ok();
        let sum =
            |f: fn(&keyfire::engine::Stats) -> u64| self.nodes.iter().map(|n| f(n.stats())).sum();
        use std::sync::atomic::Ordering::Relaxed;
        Point {
            at: Instant::now(),
            redis_cpu_s: cpu
                .ok()
                .and_then(|texts| texts.iter().map(|t| metrics::master_cpu_s(t)).collect()),
            calls: stats
                .as_ref()
                .map(|texts| texts.iter().map(|t| metrics::master_calls(t)).collect()),
            scripts: stats.as_ref().map(|texts| {
                metrics::sum_commandstats(texts)
                    .iter()
                    .filter(|(name, _)| metrics::SCRIPT_COMMANDS.contains(&name.as_str()))
                    .map(|(_, n)| n)
                    .sum()
            }),
            process_cpu_s,
            recorded: done(),
            claims_pending: sum(|s| s.claims_pending.load(Relaxed)),
            ahead_waiting: sum(|s| s.ahead_waiting.load(Relaxed)),
            completed: sum(|s| s.completed.load(Relaxed)),
            unrecorded: self.nodes.iter().map(|n| n.outcomes_unrecorded()).sum(),
        }
    }

    /// Points from Redis time `first_ms` (the first due instant) every [`EVERY`] until
    /// `stop` is cancelled, and one more then. Runs beside the phase's own waiting.
    pub async fn timeline(
        &self,
        first_ms: i64,
        stop: &CancellationToken,
        done: &(dyn Fn() -> usize + Sync),
    ) -> Vec<Point> {
        tokio::select! {
            _ = self.sleep_until_redis(first_ms) => {}
            _ = stop.cancelled() => {}
        }
        let mut points = vec![self.point(done).await];
        let start = tokio::time::Instant::now();
        let mut k = 1u32;
        loop {
            let next = start + EVERY * k;
            tokio::select! {
                _ = tokio::time::sleep_until(next) => {}
                _ = stop.cancelled() => break,
            }
            points.push(self.point(done).await);
            // A slow read skips the moments it overran rather than bunching points up.
            while start + EVERY * k <= tokio::time::Instant::now() {
                k += 1;
            }
        }
        points.push(self.point(done).await);
        points
    }
}

/// Redis's CPU (every master's, summed) and this process's, each in % of one core, from
/// the first point to the last; None with fewer than two points or no Redis CPU figure.
pub fn busy_pct(points: &[Point]) -> Option<(f64, f64)> {
    let (a, b) = (points.first()?, points.last()?);
    let wall = b.at.duration_since(a.at).as_secs_f64();
    if wall <= 0.0 {
        return None;
    }
    let redis: f64 =
        b.redis_cpu_s.as_ref()?.iter().sum::<f64>() - a.redis_cpu_s.as_ref()?.iter().sum::<f64>();
    Some((
        round2(redis / wall * 100.0),
        round2((b.process_cpu_s - a.process_cpu_s) / wall * 100.0),
    ))
}

/// The points as a table, one row per interval: what each interval did and the gauges at
/// its end.
pub fn render(points: &[Point]) -> String {
    let mut out = String::from(
        "timeline (per interval; gauges at its end; runs: firings run, or queue tasks finished)\n     t ms   runs  redis cpu % (per master)  process cpu %  commands  scripts  claims pending  ahead waiting  completed  unrecorded\n",
    );
    let Some(first) = points.first() else {
        return out;
    };
    for w in points.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let wall = b.at.duration_since(a.at).as_secs_f64().max(1e-6);
        let redis = match (&a.redis_cpu_s, &b.redis_cpu_s) {
            (Some(x), Some(y)) if x.len() == y.len() => {
                let each: Vec<String> = x
                    .iter()
                    .zip(y)
                    .map(|(x, y)| format!("{:.0}", (y - x) / wall * 100.0))
                    .collect();
                let total: f64 = y.iter().sum::<f64>() - x.iter().sum::<f64>();
                if each.len() > 1 {
                    format!("{:.0} ({})", total / wall * 100.0, each.join("/"))
                } else {
                    format!("{:.0}", total / wall * 100.0)
                }
            }
            _ => "-".into(),
        };
        let calls = match (&a.calls, &b.calls) {
            (Some(x), Some(y)) => {
                (y.iter().sum::<u64>().saturating_sub(x.iter().sum::<u64>())).to_string()
            }
            _ => "-".into(),
        };
        let scripts = match (a.scripts, b.scripts) {
            (Some(x), Some(y)) => y.saturating_sub(x).to_string(),
            _ => "-".into(),
        };
        let _ = writeln!(
            out,
            "{:>9} {:>6}  {:>24}  {:>13.0}  {:>8}  {:>7}  {:>14}  {:>13}  {:>9}  {:>10}",
            b.at.duration_since(first.at).as_millis(),
            b.recorded.saturating_sub(a.recorded),
            redis,
            (b.process_cpu_s - a.process_cpu_s) / wall * 100.0,
            calls,
            scripts,
            b.claims_pending,
            b.ahead_waiting,
            b.completed.saturating_sub(a.completed),
            b.unrecorded,
        );
    }
    out
}
