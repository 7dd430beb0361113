//! The workload: the static jobs, the driver that creates tasks in batches and creates,
//! updates, pauses, resumes, triggers and deletes dynamic jobs while everything runs (each
//! call recorded with Redis time around it, retried through outages), and the delay-queue
//! consumers of a job round.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::json;
use tokio::time::Instant;

use super::redis::redis_ms;
use super::round::Round;
use super::{QUEUE_TTR, TOPIC};
use crate::chaos::model::{Op, OpKind, QueueEv, QueueEvent};
use crate::chaos::record::host_ms;
use keyfire::client::Client;
use keyfire::error::Error;
use keyfire::job::{JobSpec, RetrySpec};
use keyfire::queue::{NewTask, Queue, When};
use keyfire::store::{Conn, JobStatus};

/// A seed from a name, the same in every run.
pub(super) fn stable_seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// How a call of the workload ended.
pub(in crate::chaos) enum Answer<T> {
    /// It succeeded.
    Done(T),
    /// Redis refused it because it is full (`Error::is_redis_full`): nothing was written, and
    /// it is not tried again (the refusal is the answer under test).
    Full(String),
    /// It kept failing; or a delete found nothing (it succeeded on an earlier try).
    Gone,
}

impl<T> Answer<T> {
    /// What it returned, if it succeeded.
    pub(in crate::chaos) fn done(self) -> Option<T> {
        match self {
            Answer::Done(v) => Some(v),
            _ => None,
        }
    }
}

/// Retry a call until it succeeds (Redis may be restarting): the change happened between the
/// first try and the success. A delete that finds nothing succeeded on an earlier try; a call
/// refused because Redis is full is not tried again.
pub(in crate::chaos) async fn retrying<T, F, Fut>(
    conn: &mut Conn,
    round: &Round,
    what: &str,
    mut f: F,
) -> (i64, i64, Answer<T>)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = keyfire::Result<T>>,
{
    let call = redis_ms(conn).await;
    for _ in 0..100 {
        match f().await {
            Ok(v) => return (call, redis_ms(conn).await, Answer::Done(v)),
            Err(Error::NotFound(_)) if what == "delete" => {
                return (call, redis_ms(conn).await, Answer::Gone);
            }
            Err(e) if e.is_redis_full() => {
                round.note(format!("{what} refused, Redis is full: {e}"));
                return (call, redis_ms(conn).await, Answer::Full(e.to_string()));
            }
            Err(e) => {
                round.note(format!("{what} failed, retrying: {e}"));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    (call, redis_ms(conn).await, Answer::Gone)
}

/// The static jobs: every schedule kind and policy, created before the faults begin.
pub(super) fn static_jobs(now_ms: i64) -> Vec<JobSpec> {
    let at = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).expect("instant");
    let fixed = |attempts: u32, interval: &str| RetrySpec {
        max_attempts: Some(attempts),
        backoff: Some("fixed".into()),
        interval: Some(interval.into()),
        ..RetrySpec::default()
    };
    let mut jobs = vec![
        JobSpec::cron("cron-1s", "* * * * * *", "chaos").params(json!({"v": 1})),
        JobSpec::cron("cron-2s-slow", "*/2 * * * * *", "chaos")
            .params(json!({"v": 1, "sleep_ms": 2_500})),
        JobSpec::cron("cron-5s-fail", "*/5 * * * * *", "chaos")
            .params(json!({"v": 1, "fail": 2}))
            .retry(fixed(6, "300ms")),
        JobSpec::every("every-1500ms", "1500ms", "chaos").params(json!({"v": 1})),
        JobSpec::every("every-3s-hang", "3s", "chaos")
            .params(json!({"v": 1, "hang": 1}))
            .retry(fixed(6, "300ms")),
        JobSpec::every("every-2s-skip", "2s", "chaos").params(json!({"v": 1})),
        JobSpec::every("every-2s-catchup", "2s", "chaos").params(json!({"v": 1})),
        JobSpec::cron("cron-3s-window", "*/3 * * * * *", "chaos")
            .params(json!({"v": 1}))
            .window(Some(at(now_ms + 5_000)), Some(at(now_ms + 40_000))),
    ];
    jobs[4].timeout = Some("1s".into());
    jobs[5].misfire = Some("skip".into());
    jobs[5].misfire_tolerance = Some("5s".into());
    jobs[6].misfire = Some("catch_up".into());
    jobs[6].misfire_tolerance = Some("1s".into());
    jobs
}

/// The workload driver: tasks in batches, and dynamic jobs created, updated, paused,
/// resumed, triggered and deleted while everything runs.
pub(super) struct Driver<'a> {
    pub(super) round: &'a Round,
    pub(super) client: Client,
    pub(super) conn: Conn,
    pub(super) rng: StdRng,
    pub(super) ops: Vec<Op>,
    pub(super) next_task: u64,
    /// Producer of delay-queue tasks.
    pub(super) queue: Queue,
    pub(super) next_qtask: u64,
    /// Dynamic jobs: their version counter (never reset, so a re-created job's params are
    /// newer than any of its previous life) and state.
    pub(super) dyn_jobs: Vec<(String, u64, DynState)>,
    /// The static jobs: the spec, its version (bumped each time it is created again) and
    /// whether it exists (it does not after Redis lost its data, until created again).
    pub(super) statics: Vec<(JobSpec, u64, bool)>,
    /// The data losses the driver has seen ([`Round::data_losses`]).
    pub(super) losses_seen: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DynState {
    Absent,
    Active,
    Paused,
}

impl Driver<'_> {
    async fn now(&mut self) -> i64 {
        redis_ms(&mut self.conn).await
    }

    /// Record a call Redis refused as full, once per job or task it named.
    fn refused(&mut self, jobs: &[String], call: &str, v: u64, call_ms: i64, ret_ms: i64, e: &str) {
        self.round.refused.fetch_add(1, Ordering::SeqCst);
        for job in jobs {
            self.ops.push(Op {
                job: job.clone(),
                call_ms,
                ret_ms,
                kind: OpKind::Refused {
                    call: call.into(),
                    v,
                    error: e.to_string(),
                },
            });
        }
    }

    /// Create or update a job; whether it was written (`false`: refused, Redis is full).
    async fn upsert(&mut self, spec: JobSpec, v: u64) -> anyhow::Result<bool> {
        let id = spec.id.clone();
        let client = &self.client;
        let call = redis_ms(&mut self.conn).await;
        let mut tries = 0;
        let record = loop {
            match client.upsert(spec.clone()).await {
                Ok(r) => break r,
                Err(e) if e.is_redis_full() => {
                    self.round
                        .note(format!("upsert {id} refused, Redis is full: {e}"));
                    let ret = self.now().await;
                    self.refused(&[id], "upsert", v, call, ret, &e.to_string());
                    return Ok(false);
                }
                Err(e) if tries < 100 => {
                    tries += 1;
                    self.round
                        .note(format!("upsert {id} failed, retrying: {e}"));
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(e).context("upsert"),
            }
        };
        let ret = self.now().await;
        self.ops.push(Op {
            job: id,
            call_ms: call,
            ret_ms: ret,
            kind: OpKind::Upsert {
                spec: record.spec,
                v,
                status: record.status,
                next_ms: record.next_ms,
                created_ms: record.created_ms,
            },
        });
        Ok(true)
    }

    /// Create the static jobs that do not exist (all at first; after Redis lost its data,
    /// those it lost, each under a new version).
    pub(super) async fn ensure_statics(&mut self) -> anyhow::Result<()> {
        for i in 0..self.statics.len() {
            let (spec, v, exists) = self.statics[i].clone();
            if exists {
                continue;
            }
            if self.upsert(spec, v).await? {
                self.statics[i].2 = true;
            }
        }
        Ok(())
    }

    /// Redis lost its data: nothing the workload created before exists. Forget the dynamic
    /// jobs (their versions go on) and create the static ones again, under new versions.
    async fn after_data_loss(&mut self) -> anyhow::Result<()> {
        self.round
            .note("Redis lost its data: the workload creates its jobs again");
        for job in &mut self.dyn_jobs {
            job.2 = DynState::Absent;
        }
        for (spec, v, exists) in &mut self.statics {
            *v += 1;
            spec.params["v"] = json!(*v);
            *exists = false;
        }
        self.ensure_statics().await
    }

    async fn enqueue_batch(&mut self) -> anyhow::Result<()> {
        let n = self.rng.random_range(1..=4);
        let now = self.now().await;
        let mut specs = Vec::new();
        for _ in 0..n {
            self.next_task += 1;
            let at_ms = now + self.rng.random_range(300..=5_000);
            let at = chrono::DateTime::from_timestamp_millis(at_ms).expect("instant");
            let id = format!("task-{}", self.next_task);
            let roll: f64 = self.rng.random();
            let fixed = |attempts: u32, interval: &str| RetrySpec {
                max_attempts: Some(attempts),
                backoff: Some("fixed".into()),
                interval: Some(interval.into()),
                ..RetrySpec::default()
            };
            let mut spec = JobSpec::at(id, at, "chaos").retry(fixed(6, "300ms"));
            spec.params = if roll < 0.6 {
                json!({"v": 1})
            } else if roll < 0.75 {
                json!({"v": 1, "fail": 2})
            } else if roll < 0.85 {
                spec.timeout = Some("800ms".into());
                json!({"v": 1, "hang": 1})
            } else if roll < 0.95 {
                json!({"v": 1, "sleep_ms": self.rng.random_range(1_000..=3_000)})
            } else {
                // Doomed: fails every attempt, must end in the dead letters.
                spec.retry = Some(fixed(2, "200ms"));
                json!({"v": 1, "fail": 99})
            };
            specs.push(spec);
        }
        let client = &self.client;
        let (call, ret, ids) = retrying(&mut self.conn, self.round, "enqueue", || {
            client.enqueue_many(specs.clone())
        })
        .await;
        match ids {
            Answer::Done(_) => {}
            Answer::Full(e) => {
                let ids: Vec<String> = specs.iter().map(|s| s.id.clone()).collect();
                self.refused(&ids, "enqueue", 1, call, ret, &e);
                return Ok(());
            }
            Answer::Gone => anyhow::bail!("enqueue_many kept failing"),
        }
        for spec in specs {
            self.ops.push(Op {
                job: spec.id.clone(),
                call_ms: call,
                ret_ms: ret,
                kind: OpKind::Enqueue { spec, v: 1 },
            });
        }
        Ok(())
    }

    fn dyn_spec(&mut self, id: &str, v: u64) -> JobSpec {
        let mut spec = match self.rng.random_range(0..5) {
            0 => JobSpec::every(id, "1s", "chaos"),
            1 => JobSpec::every(id, "1500ms", "chaos"),
            2 => JobSpec::every(id, "2s", "chaos"),
            3 => JobSpec::cron(id, "*/2 * * * * *", "chaos"),
            _ => JobSpec::cron(id, "*/3 * * * * *", "chaos"),
        };
        spec.params = if self.rng.random_bool(0.2) {
            json!({"v": v, "fail": 1})
        } else {
            json!({"v": v})
        };
        spec.retry(RetrySpec {
            max_attempts: Some(6),
            backoff: Some("fixed".into()),
            interval: Some("300ms".into()),
            ..RetrySpec::default()
        })
    }

    async fn lifecycle(&mut self) -> anyhow::Result<()> {
        let i = self.rng.random_range(0..self.dyn_jobs.len());
        let (id, v, state) = self.dyn_jobs[i].clone();
        let roll: f64 = self.rng.random();
        // A version is never used twice, even when Redis refused it.
        match state {
            DynState::Absent => {
                let spec = self.dyn_spec(&id, v + 1);
                self.dyn_jobs[i].1 = v + 1;
                if self.upsert(spec, v + 1).await? {
                    self.dyn_jobs[i].2 = DynState::Active;
                }
            }
            DynState::Active | DynState::Paused if roll < 0.3 => {
                // Update (a paused job stays paused).
                let spec = self.dyn_spec(&id, v + 1);
                self.dyn_jobs[i].1 = v + 1;
                self.upsert(spec, v + 1).await?;
            }
            DynState::Active if roll < 0.55 => {
                let (call, ret, answer) = retrying(&mut self.conn, self.round, "pause", || {
                    self.client.pause(&id)
                })
                .await;
                if let Answer::Full(e) = answer {
                    self.refused(&[id], "pause", 0, call, ret, &e);
                    return Ok(());
                }
                self.ops.push(Op {
                    job: id,
                    call_ms: call,
                    ret_ms: ret,
                    kind: OpKind::Pause,
                });
                self.dyn_jobs[i].2 = DynState::Paused;
            }
            DynState::Active if roll < 0.8 => {
                let call = self.now().await;
                let answer = self.client.trigger(&id).await;
                let ret = self.now().await;
                match answer {
                    Err(e) if e.is_redis_full() => {
                        self.refused(&[id], "trigger", 0, call, ret, &e.to_string());
                    }
                    answer => self.ops.push(Op {
                        job: id,
                        call_ms: call,
                        ret_ms: ret,
                        kind: OpKind::Trigger {
                            firing: answer.ok(),
                        },
                    }),
                }
            }
            DynState::Paused if roll < 0.75 => {
                let (call, ret, record) = retrying(&mut self.conn, self.round, "resume", || {
                    self.client.resume(&id)
                })
                .await;
                let record = match record {
                    Answer::Full(e) => {
                        self.refused(&[id], "resume", 0, call, ret, &e);
                        return Ok(());
                    }
                    record => record.done(),
                };
                let (status, next_ms) = record
                    .map(|r| (r.status, r.next_ms))
                    .unwrap_or((JobStatus::Paused, None));
                self.ops.push(Op {
                    job: id,
                    call_ms: call,
                    ret_ms: ret,
                    kind: OpKind::Resume { status, next_ms },
                });
                self.dyn_jobs[i].2 = DynState::Active;
            }
            _ => {
                if self.delete(&id).await {
                    self.dyn_jobs[i].2 = DynState::Absent;
                }
            }
        }
        Ok(())
    }

    /// Add 1 to 3 delay-queue tasks, due 0.3 to 5 s from now.
    async fn add_queue_tasks(&mut self) -> anyhow::Result<()> {
        let n = self.rng.random_range(1..=3);
        let now = self.now().await;
        let mut tasks = Vec::new();
        for _ in 0..n {
            self.next_qtask += 1;
            let due_ms = now + self.rng.random_range(300..=5_000);
            tasks.push(NewTask {
                id: Some(format!("qt-{}", self.next_qtask)),
                topic: TOPIC.into(),
                payload: json!({"n": self.next_qtask}),
                when: When::At(chrono::DateTime::from_timestamp_millis(due_ms).expect("instant")),
                ttr: QUEUE_TTR,
                max_deliveries: 20,
                priority: 0,
                dedup: None,
            });
        }
        let queue = &self.queue;
        let (call, ret, ids) = retrying(&mut self.conn, self.round, "queue add", || {
            queue.add_many(tasks.clone())
        })
        .await;
        match ids {
            Answer::Done(_) => {}
            Answer::Full(e) => {
                let ids: Vec<String> = tasks.iter().filter_map(|t| t.id.clone()).collect();
                self.refused(&ids, "queue_add", 0, call, ret, &e);
                return Ok(());
            }
            Answer::Gone => anyhow::bail!("queue add kept failing"),
        }
        for t in tasks {
            let When::At(at) = t.when else { continue };
            self.ops.push(Op {
                job: t.id.unwrap_or_default(),
                call_ms: call,
                ret_ms: ret,
                kind: OpKind::QueueAdd {
                    topic: t.topic,
                    due_ms: at.timestamp_millis(),
                    ttr_ms: QUEUE_TTR.as_millis() as i64,
                },
            });
        }
        Ok(())
    }

    /// Delete a dynamic job and create it again at once, with a new schedule and params.
    async fn churn(&mut self) -> anyhow::Result<()> {
        let live: Vec<usize> = (0..self.dyn_jobs.len())
            .filter(|i| self.dyn_jobs[*i].2 != DynState::Absent)
            .collect();
        let i = if live.is_empty() {
            self.rng.random_range(0..self.dyn_jobs.len())
        } else {
            live[self.rng.random_range(0..live.len())]
        };
        let (id, v, state) = self.dyn_jobs[i].clone();
        self.round.note(format!("churn: delete and re-create {id}"));
        let gone = state == DynState::Absent || self.delete(&id).await;
        let spec = self.dyn_spec(&id, v + 1);
        self.dyn_jobs[i].1 = v + 1;
        if self.upsert(spec, v + 1).await? {
            self.dyn_jobs[i].2 = DynState::Active;
        } else if gone {
            self.dyn_jobs[i].2 = DynState::Absent;
        }
        Ok(())
    }

    /// Delete a job, keeping the history the delete drops; whether it is gone (`false`:
    /// refused, Redis is full).
    async fn delete(&mut self, id: &str) -> bool {
        let runs = self.client.runs(id, 100_000).await.unwrap_or_default();
        let dead = self
            .client
            .dead_letters(id, 100_000)
            .await
            .unwrap_or_default();
        let (call, ret, answer) = retrying(&mut self.conn, self.round, "delete", || {
            self.client.delete(id)
        })
        .await;
        if let Answer::Full(e) = answer {
            self.refused(&[id.to_string()], "delete", 0, call, ret, &e);
            return false;
        }
        self.ops.push(Op {
            job: id.to_string(),
            call_ms: call,
            ret_ms: ret,
            kind: OpKind::Delete { runs, dead },
        });
        true
    }

    /// Tasks and lifecycle changes until `until`.
    pub(super) async fn run(&mut self, until: Instant) -> anyhow::Result<()> {
        let mut next_tasks = Instant::now();
        let mut next_queue = Instant::now();
        let mut next_change = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            let wake = next_tasks.min(next_change).min(next_queue).min(until);
            let churn = tokio::select! {
                _ = tokio::time::sleep_until(wake) => false,
                _ = self.round.churn.notified() => true,
            };
            if Instant::now() >= until {
                break;
            }
            let _held = self.round.op_lock.lock().await;
            let losses = self.round.data_losses.load(Ordering::SeqCst);
            if losses != self.losses_seen {
                self.losses_seen = losses;
                self.after_data_loss().await?;
            } else {
                // Created again once Redis has room (a loss while it was full).
                self.ensure_statics().await?;
            }
            if churn {
                self.churn().await?;
                continue;
            }
            if Instant::now() >= next_tasks {
                self.enqueue_batch().await?;
                next_tasks =
                    Instant::now() + Duration::from_millis(self.rng.random_range(400..=1_000));
            }
            if Instant::now() >= next_queue {
                self.add_queue_tasks().await?;
                next_queue =
                    Instant::now() + Duration::from_millis(self.rng.random_range(500..=1_200));
            }
            if Instant::now() >= next_change {
                self.lifecycle().await?;
                next_change =
                    Instant::now() + Duration::from_millis(self.rng.random_range(800..=2_500));
            }
        }
        Ok(())
    }
}

/// A delay-queue consumer: pops, and finishes after a short while; now and then it drops a
/// task without finishing it (a consumer crash), so the task comes back after its ttr.
pub(super) async fn consume(
    name: String,
    queue: Queue,
    seed: u64,
    events: Arc<std::sync::Mutex<Vec<QueueEvent>>>,
    stop: tokio_util::sync::CancellationToken,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let push = |ev: QueueEv, r: &keyfire::queue::Reserved| {
        events.lock().expect("queue events lock").push(QueueEvent {
            ev,
            task: r.id.clone(),
            consumer: name.clone(),
            deliveries: r.deliveries,
            due_ms: r.due_at.timestamp_millis(),
            ready_ms: r.ready_at.timestamp_millis(),
            reserved_ms: r.reserved_at.timestamp_millis(),
            at_ms: host_ms(),
        });
    };
    while !stop.is_cancelled() {
        let popped = tokio::select! {
            _ = stop.cancelled() => return,
            p = queue.pop(TOPIC, Duration::from_secs(1)) => p,
        };
        let r = match popped {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(_) => {
                // Redis is restarting or paused.
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        push(QueueEv::Pop, &r);
        if rng.random_bool(0.1) {
            push(QueueEv::Abandon, &r);
            continue;
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..=200))).await;
        let mut outcome = QueueEv::FinishErr;
        for _ in 0..20 {
            match queue.finish(&r.id, &r.token).await {
                Ok(()) => {
                    outcome = QueueEv::FinishOk;
                    break;
                }
                Err(Error::ReservationLost(_)) => {
                    outcome = QueueEv::FinishLost;
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        push(outcome, &r);
    }
}
