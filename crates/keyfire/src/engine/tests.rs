//! Each component driven through its step against a real Redis (started for the test), the
//! result read back from Redis: no loop runs, nothing sleeps.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use chrono::Utc;
use keyfire_testkit::RedisServer;
use tokio::sync::mpsc;

use super::executor::RunPermit;
use super::firing::{Claimed, Kind, Source};
use super::flow_limiter::Gate;
use super::*;
use crate::client::Client;
use crate::handler::{Callback, CallbackCall, CallbackSender, Firing, HandlerResult};
use crate::job::{FlowLimitSpec, JobSpec};

struct Fixture {
    _redis: RedisServer,
    url: String,
    engine: Engine,
    queues: Queues,
    client: Client,
    /// The firings the `record` handler ran.
    ran: mpsc::UnboundedReceiver<String>,
}

/// Settings for the Redis started for the test.
fn settings(redis: &RedisServer) -> Settings {
    let mut settings = Settings::default();
    settings.redis.url = redis.url();
    settings.redis.prefix = "engine".into();
    settings
}

/// A node's components wired around a fresh Redis, with a `record` handler that reports
/// each firing it runs (and asks for a callback on success), and `sender` for callbacks.
async fn fixture(sender: Option<Arc<dyn CallbackSender>>) -> Fixture {
    let redis = RedisServer::start().expect("start redis-server");
    let settings = settings(&redis);
    let (tx, ran) = mpsc::unbounded_channel();
    let mut registry = Registry::new();
    registry.register("record", move |f: Firing| {
        let tx = tx.clone();
        async move {
            f.report.callbacks(
                Some(Callback {
                    url: "http://receiver.test/done".into(),
                    secrets: Vec::new(),
                }),
                None,
            );
            let _ = tx.send(f.firing_id.clone());
            HandlerResult::Ok(())
        }
    });
    if let Some(s) = sender {
        registry.set_callback_sender(s);
    }
    let store = Store::open(&settings.redis).await.expect("open the store");
    store.check_layout().await.expect("layout");
    store
        .register_handlers(&registry.names())
        .await
        .expect("register handlers");
    let client = Client::connect(&settings).await.expect("client");
    let (engine, queues) = Engine::wire(
        "node-a".into(),
        &settings,
        store,
        registry,
        RedisClock::new(Arc::new(SystemClock)),
    );
    Fixture {
        url: redis.url(),
        _redis: redis,
        engine,
        queues,
        client,
        ran,
    }
}

/// A one-shot job `id` due `in_ms` from now (past when negative) with the `record`
/// handler; its firing's instant.
async fn one_shot(fx: &Fixture, id: &str, in_ms: i64, limit_key: Option<&str>) -> i64 {
    let at = Utc::now() + chrono::Duration::milliseconds(in_ms);
    let mut spec = JobSpec::at(id, at, "record");
    if let Some(k) = limit_key {
        spec = spec.limit_key(k);
    }
    let record = fx.client.upsert(spec).await.expect("create the job");
    record.next_ms.expect("a next firing")
}

/// A scheduled claim of firing `at` of `id`, with a run permit.
fn request(fx: &Fixture, id: &str, at: i64) -> ClaimRequest {
    let claimer = &fx.engine.claimer;
    let permit = claimer
        .executor
        .permits
        .clone()
        .try_acquire_owned()
        .unwrap();
    ClaimRequest {
        guard: claimer
            .enter_inflight(id.into(), at, Kind::Scheduled)
            .expect("not being claimed"),
        source: Source::Sweep,
        permit: RunPermit::Run(permit),
    }
}

/// Claim firing `at` of `id` by the one-firing protocol (no run starts).
async fn claim(fx: &Fixture, id: &str, at: i64) -> Claimed {
    fx.engine
        .claimer
        .try_claim(id, at, None)
        .await
        .expect("claim")
        .expect("claimed")
}

/// A free run permit of the node.
fn run_permit(fx: &Fixture) -> tokio::sync::OwnedSemaphorePermit {
    fx.engine
        .executor
        .permits
        .clone()
        .try_acquire_owned()
        .expect("a free run permit")
}

/// Run a claimed firing on the runner; the outcome it queued for the completer.
async fn run(fx: &mut Fixture, c: Claimed) -> Done {
    let permit = run_permit(fx);
    fx.engine.runner.clone().execute(permit, c, 0).await;
    fx.queues.completions[0]
        .try_recv()
        .expect("an outcome queued")
}

#[tokio::test]
async fn a_membership_beat_brings_the_live_set_up_to_date() {
    let fx = fixture(None).await;
    let store = &fx.engine.core.store;
    // A peer that beats, and one whose last beat is a minute old.
    store
        .heartbeat("node-b", 5_000, "{}", Beat::Alive)
        .await
        .unwrap();
    let mut redis = redis::Client::open(fx.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let now = store
        .heartbeat("node-c", 5_000, "{}", Beat::Alive)
        .await
        .unwrap()
        .now;
    let _: () = redis::cmd("ZADD")
        .arg(store.keys().nodes())
        .arg(now - 60_000)
        .arg("node-c")
        .query_async(&mut redis)
        .await
        .unwrap();
    assert!(fx.engine.live.owns("anything"), "no view yet: owns all");

    fx.engine.membership.beat(Beat::Alive).await.unwrap();

    assert_eq!(fx.engine.live.nodes(), ["node-a", "node-b"]);
    assert!(fx.engine.live.started_redis_ms() > 0);
    let (_, seen) = store.nodes_seen(&["node-a"]).await.unwrap();
    assert!(seen[0].is_some(), "the beat is in Redis");
    // Ownership now splits between the two live nodes.
    let owned = (0..100)
        .filter(|i| fx.engine.live.owns(&format!("job-{i}")))
        .count();
    assert!((20..80).contains(&owned), "owns {owned} of 100");
    // Leaving takes it out of the live set, and no later beat puts it back.
    fx.engine.membership.beat(Beat::Draining).await.unwrap();
    fx.engine.membership.beat(Beat::Alive).await.unwrap();
    let live = store
        .heartbeat("node-b", 5_000, "{}", Beat::Alive)
        .await
        .unwrap()
        .live;
    assert_eq!(live, ["node-b"]);
}

#[tokio::test]
async fn sweeper_claims_an_overdue_firing_leaving_an_upcoming_one_to_a_timer() {
    let mut fx = fixture(None).await;
    let overdue = one_shot(&fx, "overdue", -500, None).await;
    let upcoming = one_shot(&fx, "upcoming", 2_000, None).await;

    fx.engine.sweeper.run_once().await.unwrap();

    // The overdue firing went to its shard's claim batcher; the upcoming one has a timer.
    let req = fx.queues.claims[0].try_recv().expect("a claim queued");
    assert_eq!(
        (req.guard.job_id(), req.guard.at_ms()),
        ("overdue", overdue)
    );
    assert!(fx.queues.claims[0].try_recv().is_err(), "one claim");
    assert_eq!(
        fx.queues.timers.armed(),
        [("upcoming".to_string(), upcoming, Kind::Scheduled)]
    );
    // Claimed, the overdue firing runs under this node's lease.
    fx.engine.claimer.claim_batch(vec![req]).await;
    let leases = fx.engine.core.store.leases(0, 10).await.unwrap();
    assert_eq!(leases.len(), 1);
    assert_eq!(leases[0].job_id, "overdue");
    assert_eq!(leases[0].node.as_deref(), Some("node-a"));
    assert_eq!(fx.ran.recv().await.unwrap(), format!("overdue:{overdue}"));
}

#[tokio::test]
async fn timers_hand_a_due_firing_to_the_claimer() {
    let mut fx = fixture(None).await;
    let fired = Mutex::new(Vec::new());
    let fire = |id: String, at: i64, kind: Kind| fired.lock().unwrap().push((id, at, kind));
    let now = fx.engine.core.clock.redis_now_ms();
    let queue = &fx.engine.claimer.timers;
    queue.arm("later".into(), now + 60_000);
    queue.arm_due("due".into(), now - 10, Kind::Retry, now - 5);
    queue.arm_due("due".into(), now - 10, Kind::Retry, now - 5);

    assert_eq!(fx.queues.timers.run_once(&fire), 1, "armed once");
    assert_eq!(
        *fired.lock().unwrap(),
        [("due".to_string(), now - 10, Kind::Retry)]
    );
    assert_eq!(
        fx.queues.timers.armed(),
        [("later".to_string(), now + 60_000, Kind::Scheduled)]
    );
}

#[tokio::test]
async fn claimer_claims_a_firing_only_once() {
    let mut fx = fixture(None).await;
    let at = one_shot(&fx, "once", -100, None).await;
    let stats = &fx.engine.core.stats;

    fx.engine
        .claimer
        .claim_batch(vec![request(&fx, "once", at)])
        .await;
    assert_eq!(stats.claimed.load(Ordering::Relaxed), 1);
    assert_eq!(
        stats.claims_pending.load(Ordering::Relaxed),
        0,
        "claim ended"
    );
    assert_eq!(fx.ran.recv().await.unwrap(), format!("once:{at}"));

    fx.engine
        .claimer
        .claim_batch(vec![request(&fx, "once", at)])
        .await;
    assert_eq!(stats.claimed.load(Ordering::Relaxed), 1, "claimed once");
    assert_eq!(stats.stale.load(Ordering::Relaxed), 1);
    let leases = fx.engine.core.store.leases(0, 10).await.unwrap();
    assert_eq!(leases.len(), 1, "one run: {leases:?}");
    assert_eq!(leases[0].attempt, 1);
}

/// A one-shot task's spec, read ahead with its timer, leaves the cache at its claim (the
/// claim carries it to the run, and no lookup per firing drops it later); a recurring job's
/// stays for its next firings. A claim of the task again reads it again.
#[tokio::test]
async fn a_one_shot_spec_leaves_the_cache_at_its_claim() {
    let fx = fixture(None).await;
    let at = one_shot(&fx, "once", -100, None).await;
    fx.client
        .upsert(JobSpec::cron("tick", "* * * * * *", "record"))
        .await
        .expect("create the cron job");
    let specs = &fx.engine.claimer.specs;
    let stats = &fx.engine.core.stats;
    specs.specs(&["once", "tick"], false).await.unwrap();
    assert!(
        specs.contains("once") && specs.contains("tick"),
        "read ahead"
    );
    let read = stats.specs_read.load(Ordering::Relaxed);

    fx.engine
        .claimer
        .claim_batch(vec![request(&fx, "once", at)])
        .await;
    assert_eq!(stats.claimed.load(Ordering::Relaxed), 1);
    assert!(!specs.contains("once"), "taken out at its claim");
    assert_eq!(
        stats.specs_read.load(Ordering::Relaxed),
        read,
        "found ahead"
    );

    let tick = specs
        .spec("tick")
        .await
        .unwrap()
        .expect("the cron job's spec");
    assert_eq!(tick.job.spec.id, "tick");
    assert!(specs.contains("tick"), "a recurring job's stays");
    let once = specs.spec("once").await.unwrap().expect("read again");
    assert_eq!(once.job.spec.id, "once");
    assert_eq!(stats.specs_read.load(Ordering::Relaxed), read + 1);
    assert!(!specs.contains("once"), "not cached for a claim");
}

#[tokio::test]
async fn runner_queues_the_outcome_of_a_claimed_firing() {
    let mut fx = fixture(None).await;
    let at = one_shot(&fx, "job", -100, None).await;
    let c = claim(&fx, "job", at).await;

    let done = run(&mut fx, c).await;

    assert_eq!(fx.ran.try_recv().unwrap(), format!("job:{at}"));
    assert_eq!(done.record.outcome, "ok");
    assert_eq!((done.job_id(), done.at_ms), ("job", at));
    assert!(done.callback.is_some(), "the handler asked for a callback");
    assert_eq!(fx.engine.core.stats.started.load(Ordering::Relaxed), 1);
    assert_eq!(fx.engine.executor.active(), 0, "the run ended");
}

#[tokio::test]
async fn completer_records_an_outcome() {
    let mut fx = fixture(None).await;
    let at = one_shot(&fx, "job", -100, None).await;
    let c = claim(&fx, "job", at).await;
    let done = run(&mut fx, c).await;

    fx.engine.completer.record_batch(vec![done]).await;

    let runs = fx.client.store().runs("job", 10).await.unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].outcome, "ok");
    assert_eq!(runs[0].firing_id, format!("job:{at}"));
    assert!(fx.engine.core.store.leases(0, 10).await.unwrap().is_empty());
    assert_eq!(fx.engine.core.stats.completed.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn completer_holds_outcomes_behind_claims_until_record_permits_run_short() {
    let mut fx = fixture(None).await;
    let at = one_shot(&fx, "job", -100, None).await;
    let c = claim(&fx, "job", at).await;
    let done = run(&mut fx, c).await;
    let completer = &fx.engine.completer;
    let stats = &fx.engine.core.stats;

    assert!(
        !completer.holds(&done),
        "no claim pending: recorded at once"
    );
    stats.claims_pending.store(1, Ordering::Relaxed);
    assert!(completer.holds(&done), "held behind a pending claim");

    // Take record permits until fewer than a quarter are free (the outcome holds one).
    let records = &fx.engine.executor.record_permits;
    let total = records.available_permits() + 1;
    let mut taken = Vec::new();
    let unrecorded = fx.engine.executor.outcomes_unrecorded();
    assert_eq!(unrecorded, 1, "the outcome in hand holds one record permit");
    while records.available_permits() >= total / 4 {
        assert!(
            completer.holds(&done),
            "held with {} free",
            records.available_permits()
        );
        taken.push(records.clone().try_acquire_owned().unwrap());
    }
    assert!(
        !completer.holds(&done),
        "not held with {} of {total} record permits free: held outcomes would stop the runs",
        records.available_permits()
    );
    assert_eq!(
        fx.engine.executor.outcomes_unrecorded(),
        unrecorded + taken.len()
    );
    drop(taken);
    assert_eq!(fx.engine.executor.outcomes_unrecorded(), unrecorded);
    assert!(completer.holds(&done));
    stats.claims_pending.store(0, Ordering::Relaxed);
}

/// A callback sender that hands each call to the test.
struct Receiver(mpsc::UnboundedSender<CallbackCall>);

impl CallbackSender for Receiver {
    fn send(&self, call: CallbackCall) -> futures::future::BoxFuture<'static, HandlerResult> {
        let _ = self.0.send(call);
        Box::pin(async { Ok(()) })
    }
}

#[tokio::test]
async fn callbacks_send_one_queued_callback_to_a_receiver() {
    let (tx, mut received) = mpsc::unbounded_channel();
    let mut fx = fixture(Some(Arc::new(Receiver(tx)))).await;
    let at = one_shot(&fx, "job", -100, None).await;
    let c = claim(&fx, "job", at).await;
    let done = run(&mut fx, c).await;
    fx.engine.completer.record_batch(vec![done]).await;

    assert_eq!(fx.engine.callbacks.run_once(0).await, 1);

    let call = received.try_recv().expect("one callback sent");
    assert_eq!(call.job_id, "job");
    assert_eq!(call.id, format!("job:{at}:succeeded"));
    assert_eq!(call.target.url, "http://receiver.test/done");
    assert!(received.try_recv().is_err(), "one callback");
    // Settled: the outbox is empty.
    assert_eq!(fx.engine.callbacks.run_once(0).await, 0);
}

#[tokio::test]
async fn flow_limiter_holds_a_firing_over_its_limit() {
    let mut fx = fixture(None).await;
    let store = fx.engine.core.store.clone();
    store
        .put_limit(&FlowLimitSpec::new("k", None, Some(1)))
        .await
        .unwrap();
    let first = one_shot(&fx, "first", -100, Some("k")).await;
    let second = one_shot(&fx, "second", -100, Some("k")).await;
    fx.engine.limiter.refresh().await;
    let limiter = &fx.engine.limiter;

    let a = claim(&fx, "first", first).await;
    assert!(matches!(limiter.gate(&a).await, Gate::Run(Some(ref k)) if k == "k"));
    let b = claim(&fx, "second", second).await;
    assert!(matches!(limiter.gate(&b).await, Gate::Held));

    assert_eq!(fx.engine.core.stats.held.load(Ordering::Relaxed), 1);
    let status = store.limit_status("k").await.unwrap().expect("the limit");
    assert_eq!((status.running, status.held), (1, 1), "{status:?}");
    // Queued again as the same attempt, due at its turn, and armed on this node's timers.
    let retries = store.retries_until(0, i64::MAX, 10).await.unwrap();
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert_eq!((retries[0].0.as_str(), retries[0].1), ("second", second));
    assert_eq!(
        fx.queues.timers.armed(),
        [("second".to_string(), second, Kind::Retry)]
    );
    // Unlimited firings pass without asking.
    let free = one_shot(&fx, "free", -100, None).await;
    let c = claim(&fx, "free", free).await;
    assert!(matches!(limiter.gate(&c).await, Gate::Run(None)));
}

#[test]
fn a_node_id_falls_back_when_no_host_name_is_found() {
    // No /etc/hostname, an empty kernel name, no HOSTNAME: `node-<8 hex digits>`.
    let id = node_id_from([None, Some(" \n".into()), None]);
    let suffix = id.strip_prefix("node-").expect(&id);
    assert_eq!(suffix.len(), 8, "{id}");
    assert!(suffix.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
    assert_ne!(id, node_id_from([None::<String>]), "ids are random");
    assert!(node_id_from([]).starts_with("node-"));
    // The first name found wins, its first line trimmed.
    let id = node_id_from([Some("\n".into()), Some(" web-1 \nignored".into())]);
    assert!(
        id.starts_with("web-1-") && id.len() == "web-1-".len() + 8,
        "{id}"
    );
    assert!(node_id_from([Some("db\n".into()), Some("web".into())]).starts_with("db-"));
}

/// One loop renews the leases of the runs in progress: a held lease's expiry moves on at
/// each renewal (a third of the lease); once the lease is gone (taken over), the next
/// renewal cancels the run, and its hold says the lease was lost.
#[tokio::test]
async fn the_lease_loop_renews_a_run_and_cancels_it_once_its_lease_is_lost() {
    let fx = fixture(None).await;
    let at = one_shot(&fx, "leased", -1_000, None).await;
    let c = claim(&fx, "leased", at).await;
    let mut node = fx.engine.core.settings.clone();
    node.lease = std::time::Duration::from_millis(300);
    let core = Arc::new(NodeCore::new(
        "node-a".into(),
        node,
        fx.engine.core.store.clone(),
        RedisClock::new(Arc::new(SystemClock)),
    ));
    let leases = Arc::new(leases::Leases::new(core, fx.engine.executor.clone()));
    let mut redis = redis::Client::open(fx.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let running = fx.engine.core.store.shards().keys(0).running();
    let lease = || {
        let mut redis = redis.clone();
        let running = running.clone();
        async move {
            let v: Vec<(String, i64)> = redis::cmd("ZRANGE")
                .arg(&running)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query_async(&mut redis)
                .await
                .unwrap();
            v
        }
    };
    let claimed = lease().await;
    assert_eq!(claimed.len(), 1, "one lease: {claimed:?}");
    // Claimed with the node's 30 s lease; renewed, it expires 300 ms after the renewal.
    let token = tokio_util::sync::CancellationToken::new();
    let hold = leases.hold(
        c.job.clone(),
        at,
        c.attempt,
        c.claimed_ms,
        None,
        token.clone(),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let now = lease().await;
        if now[0].1 < claimed[0].1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "lease never renewed: {now:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(!token.is_cancelled(), "a renewed run goes on");
    // Taken away: the next renewal finds it lost.
    let _: () = redis::cmd("ZREM")
        .arg(&running)
        .arg(&claimed[0].0)
        .query_async(&mut redis)
        .await
        .unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(10), token.cancelled())
        .await
        .expect("the run cancelled once its lease was lost");
    assert!(hold.end(), "the hold says the lease was lost");
}

/// Before any run ended (runs not known to be short) a run gets a task of its own. While
/// runs are short, a run starts in the task that claimed it: a handler that finishes in its
/// first poll has its outcome queued before `start_run` returns, and no task was spawned
/// for it; a run that has to wait (here, held until a later instant) goes on in a task of
/// its own and ends there.
#[tokio::test]
async fn a_short_run_ends_in_the_claiming_task_and_one_that_waits_gets_its_own() {
    let mut fx = fixture(None).await;
    let start = |fx: &Fixture, c: Claimed| {
        fx.engine
            .runner
            .start_run(run_permit(fx), c, Kind::Scheduled, Source::Sweep, 0);
    };
    let runs = |fx: &Fixture| fx.engine.core.runs.len();
    assert!(!fx.engine.executor.run_time.short(), "no run ended yet");

    let at = one_shot(&fx, "spawned", -1_000, None).await;
    let c = claim(&fx, "spawned", at).await;
    start(&fx, c);
    assert_eq!(runs(&fx), 1, "not known to be short: a task of its own");
    let done = fx.queues.completions[0].recv().await.expect("an outcome");
    assert_eq!(done.job_id(), "spawned");
    assert_eq!(
        fx.ran.try_recv().ok(),
        Some(crate::store::firing_id("spawned", at))
    );
    drop(done);
    fx.engine.core.runs.close();
    fx.engine.core.runs.wait().await;
    fx.engine.core.runs.reopen();

    fx.engine
        .executor
        .run_time
        .record(std::time::Duration::from_micros(300));
    assert!(fx.engine.executor.run_time.short());
    let at = one_shot(&fx, "inline", -1_000, None).await;
    let c = claim(&fx, "inline", at).await;
    start(&fx, c);
    let done = fx.queues.completions[0]
        .try_recv()
        .expect("finished in its first poll: its outcome is queued already");
    assert_eq!(done.job_id(), "inline");
    assert_eq!(done.record.outcome, "ok");
    assert_eq!(runs(&fx), 0, "no task spawned for it");
    assert_eq!(
        fx.ran.try_recv().ok(),
        Some(crate::store::firing_id("inline", at))
    );
    drop(done);

    let at = one_shot(&fx, "held", -1_000, None).await;
    let mut c = claim(&fx, "held", at).await;
    c.hold_until = Some(tokio::time::Instant::now() + std::time::Duration::from_millis(50));
    start(&fx, c);
    assert_eq!(runs(&fx), 1, "held: it goes on in a task of its own");
    assert!(fx.queues.completions[0].try_recv().is_err(), "not run yet");
    let done = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        fx.queues.completions[0].recv(),
    )
    .await
    .expect("the held run ends in its own task")
    .expect("an outcome");
    assert_eq!(done.job_id(), "held");
    assert_eq!(done.record.outcome, "ok");
}

/// A short run that ends in the claiming task with no permit to record free keeps its run
/// permit and waits for one in a task of its own; its outcome is queued once one is given
/// back. With its shard's completer stopped, such a run records its outcome itself.
#[tokio::test]
async fn a_short_run_waits_for_a_permit_to_record_and_records_itself_past_a_stopped_completer() {
    let mut fx = fixture(None).await;
    let executor = fx.engine.executor.clone();
    executor
        .run_time
        .record(std::time::Duration::from_micros(300));
    let free_runs = executor.permits.available_permits();
    let all = executor.record_permits.available_permits() as u32;
    let held = executor
        .record_permits
        .clone()
        .try_acquire_many_owned(all)
        .expect("every permit to record");

    let at = one_shot(&fx, "waits", -1_000, None).await;
    let c = claim(&fx, "waits", at).await;
    fx.engine
        .runner
        .start_run(run_permit(&fx), c, Kind::Scheduled, Source::Sweep, 0);
    assert_eq!(
        fx.ran.try_recv().ok(),
        Some(crate::store::firing_id("waits", at)),
        "it ran in the claiming task"
    );
    assert_eq!(fx.engine.core.runs.len(), 1, "waiting in a task of its own");
    tokio::task::yield_now().await;
    assert!(
        fx.queues.completions[0].try_recv().is_err(),
        "not queued while no permit to record is free"
    );
    assert_eq!(
        executor.permits.available_permits(),
        free_runs - 1,
        "its run permit is kept meanwhile"
    );
    drop(held);
    let done = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        fx.queues.completions[0].recv(),
    )
    .await
    .expect("queued once a permit to record is free")
    .expect("an outcome");
    assert_eq!(done.job_id(), "waits");
    assert_eq!(executor.permits.available_permits(), free_runs);
    assert_eq!(executor.record_permits.available_permits() as u32, all - 1);
    drop(done);

    // The completers stopped: the run records its outcome itself.
    fx.queues.completions.clear();
    let at = one_shot(&fx, "itself", -1_000, None).await;
    let c = claim(&fx, "itself", at).await;
    fx.engine
        .runner
        .start_run(run_permit(&fx), c, Kind::Scheduled, Source::Sweep, 0);
    fx.engine.core.runs.close();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        fx.engine.core.runs.wait(),
    )
    .await
    .expect("the run's task ends");
    let runs = fx.client.store().runs("itself", 10).await.unwrap();
    assert_eq!(runs.len(), 1, "recorded: {runs:?}");
    assert_eq!(runs[0].outcome, "ok");
    assert_eq!(executor.record_permits.available_permits() as u32, all);
}
