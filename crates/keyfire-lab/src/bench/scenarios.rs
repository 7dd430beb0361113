//! The bench scenarios. Each loads its jobs, takes a snapshot, lets the measured
//! phase happen, takes another, and turns what the handler recorded into a [`Report`].

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use futures::StreamExt;
use keyfire::queue::NewTask;
use serde_json::json;

use super::harness::{HANDLER, Harness, LOAD_CONCURRENCY, load_jobs};
use super::metrics::{Delta, Percentiles, Snapshot, round2, shares};
use super::timeline::{self, Point};
use super::{BenchOptions, BenchRun, Report, Scenario};
use keyfire::job::JobSpec;

/// Pending jobs that must not fire are spread over an hour, starting an hour from now.
const HOUR_MS: i64 = 3_600_000;

/// Parameters after defaults.
struct Params {
    scenario: Scenario,
    n: usize,
    nodes: usize,
    duration_ms: i64,
    due: usize,
    redis_mode: &'static str,
    masters: usize,
    shards: u32,
    /// Print the timeline of the measured phase on stderr.
    timeline: bool,
}

/// Run the scenario of `opts` on a started harness.
pub(super) async fn run(
    h: &mut Harness,
    opts: &BenchOptions,
    nodes: usize,
) -> anyhow::Result<BenchRun> {
    let s = opts.scenario;
    let p = Params {
        scenario: s,
        n: opts.n.unwrap_or_else(|| s.default_n()),
        nodes,
        duration_ms: opts
            .duration
            .unwrap_or_else(|| s.default_duration())
            .as_millis()
            .max(1) as i64,
        due: opts.due.unwrap_or(1_000).max(1),
        redis_mode: h.mode.name(),
        masters: h.masters(),
        shards: h.settings.redis.shards,
        timeline: opts.timeline,
    };
    match s {
        Scenario::Sparse => sparse(h, &p).await,
        Scenario::Steady => steady(h, &p).await,
        Scenario::Burst => burst(h, &p).await,
        Scenario::Enqueue => enqueue(h, &p).await,
        Scenario::Cron => cron(h, &p).await,
        Scenario::Idle => idle(h, &p).await,
        Scenario::Flow => {
            let nodes = p.nodes;
            super::flow::run(
                h,
                blank(&p),
                opts.limit_rate.unwrap_or(super::flow::DEFAULT_RATE).max(1),
                opts.limit_in_flight
                    .unwrap_or(super::flow::DEFAULT_IN_FLIGHT)
                    .max(1),
                |r, d| apply_delta(r, d, nodes),
            )
            .await
        }
        Scenario::Queue | Scenario::QueueRest => {
            let nodes = p.nodes;
            let rest = match s {
                Scenario::QueueRest => Some(super::queue::RestServers {
                    bin: match &opts.server_bin {
                        Some(b) => b.clone(),
                        None => std::env::current_exe()?,
                    },
                    count: opts.servers.unwrap_or(2).max(1),
                }),
                _ => None,
            };
            let topics = opts.topics.unwrap_or(1).max(1);
            let partitions = opts
                .partitions
                .unwrap_or(match opts.redis_mode {
                    super::RedisMode::Standalone => 1,
                    super::RedisMode::Cluster => p.shards as usize,
                })
                .clamp(1, 64);
            let shape = super::queue::Shape {
                topics,
                partitions,
                consumers: opts
                    .consumers
                    .unwrap_or(super::queue::CONSUMERS)
                    .max(topics),
                pop_max: opts.pop_max.unwrap_or(super::queue::POP_MAX).max(1),
                priorities: opts.priorities,
            };
            let mut report = blank(&p);
            report.topics = Some(shape.topics);
            report.partitions = Some(shape.partitions);
            report.consumers = Some(shape.consumers);
            report.pop_max = Some(shape.pop_max);
            report.priorities = shape.priorities;
            super::queue::run(h, report, p.duration_ms, rest, shape, p.timeline, |r, d| {
                apply_delta(r, d, nodes)
            })
            .await
        }
    }
}

/// `n` tasks with ids `<tag><i>`, spread evenly over `[from, from + span)`.
fn spread(tag: &str, n: usize, from: i64, span: i64) -> Vec<JobSpec> {
    (0..n)
        .map(|i| {
            let at = from + (i as i128 * span as i128 / n.max(1) as i128) as i64;
            Harness::task(format!("{tag}{i}"), at)
        })
        .collect()
}

/// The instant of the last of `specs` (one-shot tasks), or `none` when there is none.
fn last_at(specs: &[JobSpec], none: i64) -> i64 {
    specs
        .last()
        .and_then(|s| s.at)
        .map_or(none, |a| a.timestamp_millis())
}

/// The firing id each one-shot task will run under.
fn firing_ids(specs: &[JobSpec]) -> HashSet<String> {
    specs
        .iter()
        .map(|s| {
            let at = s.at.expect("one-shot").timestamp_millis();
            keyfire::store::firing_id(&s.id, at)
        })
        .collect()
}

/// Load `n` jobs pending an hour away; Redis's data memory (each master's) before and after.
async fn load_pending(h: &mut Harness, n: usize) -> anyhow::Result<Memory> {
    let before = h.data_memory().await;
    let far = h.redis_ms().await? + HOUR_MS;
    h.load(spread("p", n, far, HOUR_MS), "pending").await?;
    h.settle().await?;
    Ok(Memory::since(before, h).await)
}

/// Redis's data memory (each master's) before and after loading a scenario's jobs.
pub(super) struct Memory {
    pub(super) before: Option<Vec<f64>>,
    pub(super) after: Option<Vec<f64>>,
}

impl Memory {
    /// From `before` to Redis's data memory now.
    async fn since(before: Option<Vec<f64>>, h: &Harness) -> Memory {
        Memory {
            before,
            after: h.data_memory().await,
        }
    }

    /// The change over every master, per item of `n`.
    fn total(&self, n: usize) -> Option<f64> {
        let each = self.each()?;
        (n > 0).then(|| (each.iter().sum::<f64>() / n as f64).round())
    }

    /// Each master's change.
    fn each(&self) -> Option<Vec<f64>> {
        let (b, a) = (self.before.as_ref()?, self.after.as_ref()?);
        (a.len() == b.len()).then(|| a.iter().zip(b).map(|(a, b)| a - b).collect())
    }

    /// Fill in the memory per job of `n` jobs and, with several masters, each one's share.
    pub(super) fn apply(&self, r: &mut Report, n: usize) {
        let Some(each) = self.each() else {
            return;
        };
        if n > 0 {
            r.redis_memory_bytes_per_pending_job =
                Some((each.iter().sum::<f64>() / n as f64).round());
        }
        if each.len() > 1 {
            r.master_memory_shares = shares(&each);
        }
    }
}

/// A report with nothing measured yet.
fn blank(p: &Params) -> Report {
    Report {
        scenario: p.scenario.name().into(),
        n: p.n,
        nodes: p.nodes,
        redis_mode: p.redis_mode.into(),
        masters: p.masters,
        shards: p.shards,
        node_threads: tokio::runtime::Handle::current().metrics().num_workers(),
        firings: 0,
        lateness_p50_ms: None,
        lateness_p90_ms: None,
        lateness_p99_ms: None,
        lateness_max_ms: None,
        firings_per_s: None,
        missed: 0,
        doubled: 0,
        redis_commands_per_firing: None,
        redis_scripts_per_firing: None,
        redis_usec_per_firing: None,
        redis_script_usec_per_firing: None,
        node_cpu_usec_per_firing: None,
        redis_commands_per_s: None,
        redis_memory_bytes_per_pending_job: None,
        redis_memory_bytes_per_cron_job: None,
        redis_memory_bytes_per_topic: None,
        redis_memory_bytes_per_topic_task: None,
        redis_memory_bytes_per_reserved_task: None,
        redis_commands_per_s_empty: None,
        cpu_pct_redis_empty: None,
        cpu_pct_node_empty: None,
        cpu_s_node: 0.0,
        cpu_s_redis: None,
        cpu_pct_node: 0.0,
        cpu_pct_redis: None,
        cpu_pct_redis_firing: None,
        cpu_pct_process_firing: None,
        master_command_shares: None,
        master_cpu_shares: None,
        master_memory_shares: None,
        master_shares_even: None,
        measured_s: 0.0,
        last_started_ms: None,
        tasks_per_s: None,
        redis_commands_per_task: None,
        topics: None,
        partitions: None,
        consumers: None,
        pop_max: None,
        priorities: false,
        limit_rate: None,
        limit_in_flight: None,
        per_second: None,
        max_in_any_second: None,
        max_in_flight: None,
    }
}

/// Fill in the CPU and command figures of a measured phase.
fn apply_delta(r: &mut Report, d: &Delta, nodes: usize) {
    let wall = d.wall_s.max(1e-6);
    r.measured_s = round2(d.wall_s);
    r.cpu_s_node = round2(d.cpu_node_s);
    r.cpu_s_redis = d.cpu_redis_s.map(round2);
    r.cpu_pct_node = round2(d.cpu_node_s / wall / nodes.max(1) as f64 * 100.0);
    r.cpu_pct_redis = d.cpu_redis_s.map(|c| round2(c / wall * 100.0));
    r.redis_commands_per_s = d.total_calls().map(|c| round2(c as f64 / wall));
    if d.recorded > 0 {
        r.redis_commands_per_firing = d.per(d.total_calls(), d.recorded);
        r.redis_scripts_per_firing = d.per(d.script_calls(), d.recorded);
        r.redis_usec_per_firing = d.per(d.total_usec(), d.recorded);
        r.redis_script_usec_per_firing = d.per(d.script_usec(), d.recorded);
        r.node_cpu_usec_per_firing = Some(round2(d.cpu_node_s * 1e6 / d.recorded as f64));
    }
    if let Some(calls) = d.calls_by_master.as_ref().filter(|c| c.len() > 1) {
        r.master_command_shares = shares(&calls.iter().map(|&c| c as f64).collect::<Vec<_>>());
    }
    if let Some(cpu) = d.cpu_by_master.as_ref().filter(|c| c.len() > 1) {
        r.master_cpu_shares = shares(cpu);
    }
}

/// Redis's and this process's CPU from the first due instant to the end of the phase, and
/// the timeline on stderr when asked for.
pub(super) fn apply_timeline(r: &mut Report, points: &[Point], show: bool, h: &Harness) {
    if let Some((redis, process)) = timeline::busy_pct(points) {
        r.cpu_pct_redis_firing = Some(redis);
        r.cpu_pct_process_firing = Some(process);
    }
    if show {
        h.progress.note(timeline::render(points));
    }
}

/// The deadline for the last expected firing: generous, and longer for bigger batches (it
/// allows for 1,000 firings a second), so slowness shows as lateness, not as missed.
fn deadline(last_ms: i64, expected: usize) -> i64 {
    last_ms + 30_000 + expected as i64
}

/// Wait for the expected firings (the window is set already) and for their outcomes to be
/// recorded, close the measured phase, wait for late doubles, and report. The instants
/// run from `first_ms` to `last_ms`; `planned_ms` is the span they were spread over (0 for
/// a burst): firings per second are counted from the first instant to the last outcome
/// recorded (as BullMQ's figure counts to its last completed job), over at least that span.
/// A timeline runs beside the waiting, from the first instant on.
async fn measure_firings(
    h: &mut Harness,
    p: &Params,
    expected: &HashSet<String>,
    (first_ms, last_ms): (i64, i64),
    planned_ms: i64,
    snap0: &Snapshot,
) -> anyhow::Result<(Report, Vec<i64>)> {
    let stop = CancellationToken::new();
    let hh = &*h;
    let recorded = || hh.recorder.count();
    let ((all, recorded_ms), points) = tokio::join!(
        async {
            let all = hh
                .wait_firings(expected.len(), deadline(last_ms, expected.len()))
                .await;
            let recorded = hh.wait_recorded(Duration::from_secs(60)).await;
            stop.cancel();
            (all, recorded)
        },
        hh.timeline(first_ms, &stop, &recorded)
    );
    let recorded_ms = recorded_ms?;
    let snap1 = h.snapshot().await;
    if !all {
        h.progress.note(format!(
            "deadline passed with {} of {} firings run",
            h.recorder.in_window(),
            expected.len()
        ));
    }
    tokio::time::sleep(h.doubles_window()).await;
    let recs = h.recorder.recs();

    let mut runs: HashMap<&str, usize> = HashMap::new();
    for r in &recs {
        *runs.entry(r.firing_id.as_str()).or_default() += 1;
    }
    let doubled = runs.values().filter(|&&c| c > 1).count();
    // The first run of each expected firing.
    let mut first: HashMap<&str, &super::harness::Rec> = HashMap::new();
    for r in &recs {
        if expected.contains(&r.firing_id) {
            first.entry(r.firing_id.as_str()).or_insert(r);
        }
    }
    // Lateness: the claim's Redis time minus the instant; for a firing claimed ahead (the
    // claim lead), its handler's start (Redis time, by the harness's offset) minus it.
    let mut late: Vec<i64> = first
        .values()
        .map(|r| {
            if r.claimed_ms < r.scheduled_ms {
                h.local_us_to_redis_ms(r.started_local_us) - r.scheduled_ms
            } else {
                r.claimed_ms - r.scheduled_ms
            }
        })
        .collect();
    late.sort_unstable();

    let mut report = blank(p);
    report.firings = expected.len();
    report.missed = expected.len() - first.len();
    report.doubled = doubled;
    if let Some(pc) = Percentiles::of(&late) {
        report.lateness_p50_ms = Some(pc.p50);
        report.lateness_p90_ms = Some(pc.p90);
        report.lateness_p99_ms = Some(pc.p99);
        report.lateness_max_ms = Some(pc.max);
        let first_at = first.values().map(|r| r.scheduled_ms).min().unwrap_or(0);
        let last_claim = first.values().map(|r| r.claimed_ms).max().unwrap_or(0);
        let end = last_claim.max(recorded_ms);
        // Instants spread over a planned span cannot fire faster than it allows.
        let span_s = (end - first_at).max(planned_ms).max(1) as f64 / 1000.0;
        report.firings_per_s = Some(round2(first.len() as f64 / span_s));
    }
    let d = Delta::between(snap0, &snap1);
    apply_delta(&mut report, &d, p.nodes);
    apply_timeline(&mut report, &points, p.timeline, h);
    h.progress.note(format!(
        "{} firings in {:.1} s; redis commands per firing: {}",
        d.recorded,
        d.wall_s,
        d.mix(d.recorded)
    ));
    if let Some(first_at) = first.values().map(|r| r.scheduled_ms).min()
        && p.scenario == Scenario::Burst
    {
        let last_start = first
            .values()
            .map(|r| h.local_us_to_redis_ms(r.started_local_us))
            .max()
            .unwrap_or(first_at);
        report.last_started_ms = Some(last_start - first_at);
    }
    Ok((report, late))
}

/// `measure_firings`, with the data memory per item that loading took.
async fn measure_with_memory(
    h: &mut Harness,
    p: &Params,
    expected: &HashSet<String>,
    window: (i64, i64),
    planned_ms: i64,
    snap0: &Snapshot,
    mem: &Memory,
) -> anyhow::Result<BenchRun> {
    let (mut report, late) = measure_firings(h, p, expected, window, planned_ms, snap0).await?;
    mem.apply(&mut report, p.n);
    Ok(BenchRun {
        report,
        lateness_ms: late,
    })
}

/// Load due tasks, warn if loading ate into the lead, and start measuring just before the
/// first instant.
async fn load_due(
    h: &mut Harness,
    specs: Vec<JobSpec>,
    first_ms: i64,
    last_ms: i64,
    what: &str,
) -> anyhow::Result<(HashSet<String>, Snapshot)> {
    let expected = firing_ids(&specs);
    h.recorder.set_window(first_ms, last_ms, expected.len());
    h.load(specs, what).await?;
    let now = h.redis_ms().await?;
    if now > first_ms - 200 {
        h.progress.note(format!(
            "warning: loading ended {} ms after the first instant minus 200 ms; early lateness includes loading",
            now - (first_ms - 200)
        ));
    }
    h.sleep_until_redis(first_ms - 100).await;
    let snap0 = h.snapshot().await;
    Ok((expected, snap0))
}

/// 1,000,000 jobs pending an hour away; then 1,000 due over 10 s, measured.
async fn sparse(h: &mut Harness, p: &Params) -> anyhow::Result<BenchRun> {
    let mem = load_pending(h, p.n).await?;
    let lead = h.lead_ms(p.due).await?;
    let t0 = h.redis_ms().await? + lead;
    let specs = spread("s", p.due, t0, p.duration_ms);
    let last = last_at(&specs, t0);
    let (expected, snap0) = load_due(h, specs, t0, last, "due").await?;
    measure_with_memory(h, p, &expected, (t0, last), p.duration_ms, &snap0, &mem).await
}

/// n one-shot tasks due evenly over the duration (10,000 a second by default).
async fn steady(h: &mut Harness, p: &Params) -> anyhow::Result<BenchRun> {
    let lead = h.lead_ms(p.n).await?;
    let before = h.data_memory().await;
    let t0 = h.redis_ms().await? + lead;
    let specs = spread("s", p.n, t0, p.duration_ms);
    let last = last_at(&specs, t0);
    let (expected, snap0) = load_due(h, specs, t0, last, "steady").await?;
    let mem = Memory::since(before, h).await;
    measure_with_memory(h, p, &expected, (t0, last), p.duration_ms, &snap0, &mem).await
}

/// n tasks due at the same instant.
async fn burst(h: &mut Harness, p: &Params) -> anyhow::Result<BenchRun> {
    let lead = h.lead_ms(p.n).await?;
    let before = h.data_memory().await;
    let t0 = h.redis_ms().await? + lead;
    let specs: Vec<JobSpec> = (0..p.n)
        .map(|i| Harness::task(format!("b{i}"), t0))
        .collect();
    let (expected, snap0) = load_due(h, specs, t0, t0, "burst").await?;
    let mem = Memory::since(before, h).await;
    measure_with_memory(h, p, &expected, (t0, t0), 0, &snap0, &mem).await
}

/// n one-shot tasks through the bulk path: tasks per second.
async fn enqueue(h: &mut Harness, p: &Params) -> anyhow::Result<BenchRun> {
    let before = h.data_memory().await;
    let far = h.redis_ms().await? + HOUR_MS;
    let specs = spread("e", p.n, far, HOUR_MS);
    let snap0 = h.snapshot().await;
    let secs = h.load(specs, "enqueue").await?;
    let snap1 = h.snapshot().await;
    h.settle().await?;
    let mem = Memory::since(before, h).await;
    let d = Delta::between(&snap0, &snap1);
    let mut report = blank(p);
    apply_delta(&mut report, &d, p.nodes);
    report.tasks_per_s = Some(round2(p.n as f64 / secs.max(1e-6)));
    report.redis_commands_per_task = d.per(d.total_calls(), p.n);
    mem.apply(&mut report, p.n);
    h.progress
        .note(format!("redis commands per task: {}", d.mix(p.n)));
    Ok(BenchRun {
        report,
        lateness_ms: Vec::new(),
    })
}

/// n cron jobs firing every second; the firings of `duration` whole seconds are measured.
async fn cron(h: &mut Harness, p: &Params) -> anyhow::Result<BenchRun> {
    let before = h.data_memory().await;
    let specs: Vec<JobSpec> = (0..p.n)
        .map(|i| JobSpec::cron(format!("c{i}"), "* * * * * *", HANDLER))
        .collect();
    let ids: Vec<String> = specs.iter().map(|s| s.id.clone()).collect();
    let pb = h.progress.bar(p.n as u64, "cron jobs");
    load_jobs(&h.client, specs, &pb).await?;
    pb.finish_and_clear();
    h.settle().await?;
    let mem = Memory::since(before, h).await;

    let seconds = (p.duration_ms / 1000).max(1);
    let t0 = (h.redis_ms().await? + 2_000) / 1000 * 1000 + 1000;
    let last = t0 + (seconds - 1) * 1000;
    let expected: HashSet<String> = ids
        .iter()
        .flat_map(|id| (0..seconds).map(move |k| keyfire::store::firing_id(id, t0 + k * 1000)))
        .collect();
    h.recorder.set_window(t0, last, expected.len());
    h.sleep_until_redis(t0 - 100).await;
    let snap0 = h.snapshot().await;
    measure_with_memory(h, p, &expected, (t0, last), p.duration_ms, &snap0, &mem).await
}

/// Work held, none due: measured first with nothing held, then holding `n` topics (each with
/// two tasks delayed an hour and one reserved for an hour), `n` cron jobs (next firing weeks
/// away) and `10 n` one-shot tasks an hour away; each phase over the duration. Redis commands
/// and CPU, the nodes' CPU, and Redis memory per held item.
async fn idle(h: &mut Harness, p: &Params) -> anyhow::Result<BenchRun> {
    // Let the nodes start (first heartbeats, registrations, the first sweeps) before measuring.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let empty = idle_phase(h, p, "idle, nothing held").await;
    let mut held = Held {
        tasks: load_pending(h, 10 * p.n).await?.total(10 * p.n),
        cron: load_cron_far(h, p.n).await?,
        ..Held::default()
    };
    load_idle_topics(h, p.n, &mut held).await?;
    // Let the nodes finish with the load (change messages, timers) before measuring.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let d = idle_phase(h, p, "idle, work held").await;
    let mut report = blank(p);
    apply_delta(&mut report, &d, p.nodes);
    let wall = empty.wall_s.max(1e-6);
    report.redis_commands_per_s_empty = empty.total_calls().map(|c| round2(c as f64 / wall));
    report.cpu_pct_redis_empty = empty.cpu_redis_s.map(|c| round2(c / wall * 100.0));
    report.cpu_pct_node_empty = Some(round2(
        empty.cpu_node_s / wall / p.nodes.max(1) as f64 * 100.0,
    ));
    report.redis_memory_bytes_per_pending_job = held.tasks;
    report.redis_memory_bytes_per_cron_job = held.cron;
    report.redis_memory_bytes_per_topic = held.topic;
    report.redis_memory_bytes_per_topic_task = held.topic_task;
    report.redis_memory_bytes_per_reserved_task = held.reserved;
    Ok(BenchRun {
        report,
        lateness_ms: Vec::new(),
    })
}

/// Bytes of Redis data memory per held item, by kind (`idle`).
#[derive(Default)]
struct Held {
    tasks: Option<f64>,
    cron: Option<f64>,
    /// A topic with one delayed task, the task left out.
    topic: Option<f64>,
    /// A delayed task of a topic.
    topic_task: Option<f64>,
    /// A reserved task of a topic.
    reserved: Option<f64>,
}

/// One idle phase over the duration: what changed between its snapshots.
async fn idle_phase(h: &mut Harness, p: &Params, what: &str) -> Delta {
    let snap0 = h.snapshot().await;
    let secs = (p.duration_ms as u64).div_ceil(1000);
    let pb = h.progress.bar(secs, "idle s");
    let end = tokio::time::Instant::now() + Duration::from_millis(p.duration_ms as u64);
    while tokio::time::Instant::now() < end {
        tokio::time::sleep_until((tokio::time::Instant::now() + Duration::from_secs(1)).min(end))
            .await;
        pb.inc(1);
    }
    pb.finish_and_clear();
    let snap1 = h.snapshot().await;
    let d = Delta::between(&snap0, &snap1);
    h.progress.note(format!(
        "{what}: {:.1} redis commands/s; calls in {:.0} s: {}",
        d.total_calls().unwrap_or(0) as f64 / d.wall_s.max(1e-6),
        d.wall_s,
        d.mix(1)
    ));
    d
}

/// `n` cron jobs whose next firing is weeks away (at midnight on the 1st of a month 13 months
/// out of step with now is not expressible; the 31st of February is not valid: so 00:00 on
/// January 1st, at least three weeks away on any day but those three weeks). Bytes per job.
async fn load_cron_far(h: &mut Harness, n: usize) -> anyhow::Result<Option<f64>> {
    let before = h.data_memory().await;
    let specs: Vec<JobSpec> = (0..n)
        .map(|i| JobSpec::cron(format!("held-c{i}"), "0 0 1 1 *", HANDLER))
        .collect();
    let pb = h.progress.bar(n as u64, "cron jobs");
    load_jobs(&h.client, specs, &pb).await?;
    pb.finish_and_clear();
    h.settle().await?;
    Ok(Memory {
        before,
        after: h.data_memory().await,
    }
    .total(n))
}

/// `n` topics: one task delayed an hour each (bytes per topic and task), a second one (bytes
/// per delayed task), then one reserved for an hour (bytes per reserved task).
async fn load_idle_topics(h: &mut Harness, n: usize, held: &mut Held) -> anyhow::Result<()> {
    let queue = keyfire::queue::Queue::connect(&h.settings).await?;
    let hour = Duration::from_millis(HOUR_MS as u64);
    let topic = |i: usize| format!("held-t{i}");
    let step = async |h: &mut Harness, what: &str, task: &dyn Fn(usize) -> NewTask| {
        let before = h.data_memory().await;
        let pb = h.progress.bar(n as u64, what);
        let chunks: Vec<Vec<NewTask>> = (0..n)
            .map(task)
            .collect::<Vec<_>>()
            .chunks(500)
            .map(|c| c.to_vec())
            .collect();
        let mut adds = futures::stream::iter(chunks.into_iter().map(|c| {
            let (queue, len) = (queue.clone(), c.len());
            async move { queue.add_many(c).await.map(|_| len) }
        }))
        .buffer_unordered(8);
        while let Some(r) = adds.next().await {
            pb.inc(r? as u64);
        }
        pb.finish_and_clear();
        anyhow::Ok(Memory::since(before, h).await)
    };
    let first = step(h, "topics", &|i| {
        NewTask::new(topic(i), json!(i)).delay(hour)
    })
    .await?
    .total(n);
    let second = step(h, "delayed tasks", &|i| {
        NewTask::new(topic(i), json!(i)).delay(hour)
    })
    .await?
    .total(n);
    let ready = step(h, "ready tasks", &|i| {
        NewTask::new(topic(i), json!(i)).ttr(hour)
    })
    .await?;
    let pb = h.progress.bar(n as u64, "reservations");
    let mut pops = futures::stream::iter((0..n).map(|i| {
        let queue = queue.clone();
        async move { queue.pop(&topic(i), Duration::ZERO).await }
    }))
    .buffer_unordered(LOAD_CONCURRENCY);
    while let Some(r) = pops.next().await {
        anyhow::ensure!(r?.is_some(), "a topic had no ready task to reserve");
        pb.inc(1);
    }
    pb.finish_and_clear();
    let reserved = Memory {
        before: ready.before,
        after: h.data_memory().await,
    }
    .total(n);
    held.topic_task = second;
    held.topic = first.zip(second).map(|(a, b)| (a - b).round());
    held.reserved = reserved;
    Ok(())
}
