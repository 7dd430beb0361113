//! What keyfire's own tests build on a [`RedisServer`]: a test's [`World`] (its own Redis,
//! settings with a key prefix of its own and fast node timings), a [`Recorder`] the test
//! handlers write to (outside keyfire) so tests can count and time firings, and waits on
//! observable conditions ([`crate::wait`], [`Recorder::wait_until`]) rather than on wall
//! time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keyfire::clock::Clock;
use keyfire::config::{NodeSettings, RedisSettings};
use keyfire::engine::NodeHandle;
use keyfire::{Client, Firing, HandlerResult, Node, Registry, Settings};
use redis::aio::ConnectionManager;
use tokio::sync::Notify;

use crate::{RedisOptions, RedisServer};

/// The shipped ACL file (`redis/keyfire.acl`): [`confined_user`] gives a user its rule.
const KEYFIRE_ACL: &str = include_str!("../../../redis/keyfire.acl");

static PREFIX: AtomicUsize = AtomicUsize::new(0);

/// The settings a [`WorldOf`] keeps: the library's [`Settings`], or a server's settings that
/// hold them (the server's tests use its own, with its API and log sections).
pub trait WorldSettings: Default + Clone + Send + Sync + 'static {
    /// The library's part.
    fn library(&self) -> Settings;
    /// Where Redis is, and the key prefix.
    fn redis(&self) -> &RedisSettings;
    /// The same, to change.
    fn redis_mut(&mut self) -> &mut RedisSettings;
    /// The node's timings.
    fn node_mut(&mut self) -> &mut NodeSettings;
}

impl WorldSettings for Settings {
    fn library(&self) -> Settings {
        self.clone()
    }
    fn redis(&self) -> &RedisSettings {
        &self.redis
    }
    fn redis_mut(&mut self) -> &mut RedisSettings {
        &mut self.redis
    }
    fn node_mut(&mut self) -> &mut NodeSettings {
        &mut self.node
    }
}

/// A test's world on the library's settings.
pub type World = WorldOf<Settings>;

/// A test's world: its own Redis and key prefix.
pub struct WorldOf<S = Settings> {
    /// Its redis-server.
    pub redis: RedisServer,
    /// Settings for its nodes and clients: its Redis, its prefix, [`fast_node`] timings.
    pub settings: S,
    /// What the handlers of [`World::registry`] saw.
    pub recorder: Recorder,
}

/// Create a Redis user with only the shipped `redis/keyfire.acl` rule for `prefix`; its URL.
pub async fn confined_user(redis: &RedisServer, prefix: &str) -> String {
    let rule: Vec<String> = KEYFIRE_ACL
        .lines()
        .find(|l| l.starts_with("user keyfire "))
        .expect("a user line")
        .split_whitespace()
        .skip(2)
        .map(|t| {
            t.replace(">CHANGE-ME", ">confined-pw")
                .replace("{keyfire", &format!("{{{prefix}"))
        })
        .collect();
    redis.acl_setuser("confined", &rule).await;
    format!("redis://confined:confined-pw@127.0.0.1:{}/0", redis.port())
}

impl<S: WorldSettings> WorldOf<S> {
    /// A world on a fresh redis-server (as a managed service offers it under
    /// `KEYFIRE_TEST_REDIS_MANAGED=1`).
    pub async fn new() -> Self {
        Self::with(RedisOptions::default()).await
    }

    /// A world on a fresh redis-server started with `options`.
    pub async fn with(options: RedisOptions) -> Self {
        // KEYFIRE_TEST_REDIS_MANAGED=1: Redis as a managed service offers it, without CONFIG,
        // DEBUG, ROLE, COMMAND, MONITOR, ACL or CLUSTER (the fixtures reach the ones they need
        // to set faults up by secret names: `RedisServer::admin`).
        let options = if crate::managed_from_env() {
            options.as_managed()
        } else {
            options
        };
        let redis = RedisServer::start_with(options).expect("start redis-server");
        let mut settings = S::default();
        settings.redis_mut().url = redis.url();
        settings.redis_mut().prefix = format!("kt{}", PREFIX.fetch_add(1, Ordering::Relaxed));
        fast_node(settings.node_mut());
        // KEYFIRE_TEST_REDIS_ACL=1: keyfire connects as a user with only the shipped
        // redis/keyfire.acl (the fixtures' own reads stay on the default user).
        if std::env::var("KEYFIRE_TEST_REDIS_ACL").is_ok_and(|v| !v.is_empty()) {
            let url = confined_user(&redis, &settings.redis().prefix).await;
            settings.redis_mut().url = url;
        }
        let recorder = Recorder::new(&redis.url()).await;
        Self {
            redis,
            settings,
            recorder,
        }
    }

    /// A registry with the built-ins plus `rec` (records and returns) and `slow` (records,
    /// sleeps the `sleep_ms` param, records the end).
    pub fn registry(&self) -> Registry {
        let mut r = Registry::with_builtins();
        let rec = self.recorder.clone();
        r.register("rec", move |f: Firing| {
            let rec = rec.clone();
            async move { rec.record(f).await }
        });
        let rec = self.recorder.clone();
        r.register("slow", move |f: Firing| {
            let rec = rec.clone();
            async move {
                let ms = f.params["sleep_ms"].as_u64().unwrap_or(1_000);
                let id = f.firing_id.clone();
                rec.record(f).await?;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                rec.finished(&id).await;
                Ok(())
            }
        });
        // Fails until attempt `ok_at` (param), then succeeds.
        let rec = self.recorder.clone();
        r.register("flaky", move |f: Firing| {
            let rec = rec.clone();
            async move {
                let ok_at = f.params["ok_at"].as_u64().unwrap_or(1) as u32;
                let attempt = f.attempt;
                rec.record(f).await?;
                if attempt < ok_at {
                    return Err(keyfire::HandlerError::retry(format!(
                        "attempt {attempt} fails"
                    )));
                }
                Ok(())
            }
        });
        // Attempt 1 fails: asking for a delay (`after_ms`) or refusing retries (`abort`).
        let rec = self.recorder.clone();
        r.register("ask", move |f: Firing| {
            let rec = rec.clone();
            async move {
                let (attempt, params) = (f.attempt, f.params.clone());
                rec.record(f).await?;
                if attempt > 1 {
                    return Ok(());
                }
                if params["abort"].as_bool() == Some(true) {
                    return Err(keyfire::HandlerError::abort("refused"));
                }
                let ms = params["after_ms"].as_u64().unwrap_or(0);
                Err(keyfire::HandlerError::Retry {
                    after: Some(Duration::from_millis(ms)),
                    message: "later, please".into(),
                })
            }
        });
        // Attempt 1 panics, where the `at` param says: in the call that makes its future
        // (`call`), in the future's first poll (`poll`), or after it has waited once
        // (anything else); later attempts record and succeed.
        let rec = self.recorder.clone();
        r.register("panicky", move |f: Firing| {
            let rec = rec.clone();
            let at = f.params["at"].as_str().unwrap_or_default().to_string();
            if f.attempt == 1 && at == "call" {
                panic!("boom in the call");
            }
            async move {
                if f.attempt == 1 {
                    if at != "poll" {
                        tokio::task::yield_now().await;
                    }
                    panic!("boom in the future");
                }
                rec.record(f).await
            }
        });
        // Sleeps `sleep_ms` unless cancelled first; records the end either way.
        let rec = self.recorder.clone();
        r.register("sleepy", move |f: Firing| {
            let rec = rec.clone();
            async move {
                let ms = f.params["sleep_ms"].as_u64().unwrap_or(1_000);
                let id = f.firing_id.clone();
                let cancel = f.cancel.clone();
                rec.record(f).await?;
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => {
                        rec.finished(&id).await;
                        Ok(())
                    }
                    _ = cancel.cancelled() => {
                        rec.cancelled(&id).await;
                        Err(keyfire::HandlerError::abort("cancelled"))
                    }
                }
            }
        });
        r
    }

    /// A started node `id` on this world's settings and [`World::registry`].
    pub async fn node(&self, id: &str) -> NodeHandle {
        self.node_with(id, self.settings.library(), None).await
    }

    /// A started node `id` on `settings` (and `clock`, if given) with [`World::registry`].
    pub async fn node_with(
        &self,
        id: &str,
        settings: impl Into<Settings>,
        clock: Option<Arc<dyn Clock>>,
    ) -> NodeHandle {
        let mut settings: Settings = settings.into();
        settings.node.id = id.into();
        let mut node = Node::new(settings, self.registry());
        if let Some(c) = clock {
            node = node.with_clock(c);
        }
        node.start().await.expect("start node")
    }

    /// A client that may schedule every handler of [`World::registry`].
    pub async fn client(&self) -> Client {
        Client::connect(&self.settings.library())
            .await
            .expect("client")
            .allow_handlers(self.registry().names())
    }

    /// A connection of the test's own to this world's Redis.
    pub async fn conn(&self) -> ConnectionManager {
        redis::Client::open(self.redis.url())
            .unwrap()
            .get_connection_manager()
            .await
            .unwrap()
    }

    /// Every key under this world's prefix, sorted: equal before and after means nothing
    /// was written.
    pub async fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{{{}}}*", self.settings.redis().prefix))
            .query_async(&mut self.conn().await)
            .await
            .unwrap();
        keys.sort();
        keys
    }

    /// Kill every subscriber connection (`CLIENT KILL TYPE pubsub`) `times` times, `every` so
    /// often, in a task of its own: expired key events lost while firings come due. The task
    /// gives back how many connections it killed.
    pub async fn kill_subscribers(
        &self,
        times: usize,
        every: Duration,
    ) -> tokio::task::JoinHandle<i64> {
        let mut conn = self.conn().await;
        tokio::spawn(async move {
            let mut killed = 0;
            for _ in 0..times {
                let k: i64 = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("TYPE")
                    .arg("pubsub")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                killed += k;
                // The fault's pace, not a wait for something to happen.
                tokio::time::sleep(every).await;
            }
            killed
        })
    }

    /// How many clients Redis has blocked (a waiting `BLPOP`, say): `INFO clients`. A test
    /// waits for it (rather than sleeps) before it adds to a pop it wants to find waiting.
    pub async fn blocked_clients(&self) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("clients")
            .query_async(&mut self.conn().await)
            .await
            .unwrap();
        crate::info_field(&info, "blocked_clients")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// Redis's clock now (ms).
    pub async fn redis_ms(&self) -> i64 {
        redis_ms(&mut self.conn().await).await
    }

    /// Wait until Redis's clock reads `ms` or later: for tests about time passing (a lease, a
    /// deadline, a retention running out), told by the clock keyfire's scripts read.
    pub async fn until_redis_ms(&self, ms: i64) {
        let mut c = self.conn().await;
        loop {
            let left = ms - redis_ms(&mut c).await;
            if left <= 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(left.min(50) as u64)).await;
        }
    }

    /// Wait until nothing is overdue, queued for another attempt, or running under this
    /// world's prefix.
    pub async fn wait_idle(&self, limit: Duration) {
        let mut c = self.conn().await;
        let r = self.settings.redis();
        let shards = keyfire::store::Shards::new(&r.prefix, r.shards as usize);
        crate::wait::until("nothing due, queued or running", limit, async || {
            let now = redis_ms(&mut c).await;
            let (mut due, mut retry, mut running) = (0, 0, 0);
            for keys in shards.iter() {
                let (d, q, n): (usize, usize, usize) = redis::pipe()
                    .zcount(keys.due(), "-inf", now)
                    .zcard(keys.retry())
                    .zcard(keys.running())
                    .query_async(&mut c)
                    .await
                    .unwrap();
                (due, retry, running) = (due + d, retry + q, running + n);
            }
            match (due, retry, running) {
                (0, 0, 0) => Ok(()),
                _ => Err(format!("{due} due, {retry} queued, {running} running")),
            }
        })
        .await;
    }
}

/// Wait until each of `nodes` sees `n` live nodes (a heartbeat of each after all started).
pub async fn wait_all_seen(nodes: &[NodeHandle], n: usize) {
    crate::wait::until(
        "every node to see all nodes",
        Duration::from_secs(10),
        async || {
            let seen: Vec<usize> = nodes.iter().map(|h| h.live_nodes().len()).collect();
            match seen.iter().all(|&k| k == n) {
                true => Ok(()),
                false => Err(format!("live nodes seen: {seen:?}")),
            }
        },
    )
    .await;
}

/// Node settings for tests: heartbeats, sweeps, grace and leases in (fractions of) seconds.
pub fn fast_node(n: &mut keyfire::config::NodeSettings) {
    n.heartbeat_interval = Duration::from_millis(200);
    n.node_ttl = Duration::from_millis(1_000);
    n.sweep_interval = Duration::from_millis(500);
    n.claim_grace = Duration::from_millis(1_000);
    n.timer_horizon = Duration::from_millis(1_500);
    n.drain_timeout = Duration::from_secs(10);
    n.lease = Duration::from_secs(5);
}

/// Assert that `seen` holds `n` runs, each firing once and none before its instant; returns
/// the lateness summary (p50, p99, max, a line for the log).
pub fn assert_exactly_once(seen: &[Seen], n: usize) -> (i64, i64, i64, String) {
    assert_eq!(seen.len(), n, "runs recorded");
    assert!(doubles(seen).is_empty(), "doubles: {:?}", doubles(seen));
    for s in seen {
        assert!(s.not_early(s.scheduled_ms), "early run: {s:?}");
    }
    lateness_summary(seen)
}

/// Redis's clock. Retried for a few seconds: a handler may read it while a test restarts
/// Redis, and the connection manager needs a moment to reconnect (a broken pipe then is the
/// fixture's, not keyfire's).
pub async fn redis_ms(c: &mut ConnectionManager) -> i64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match keyfire::store::redis_time_ms(c).await {
            Ok(ms) => return ms,
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("redis_ms: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("Redis's clock: {e}"),
        }
    }
}

/// One handler invocation, as the handler saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The job's id.
    pub job_id: String,
    /// The firing's id.
    pub firing_id: String,
    /// The instant it was scheduled for (Redis time, ms).
    pub scheduled_ms: i64,
    /// When a node claimed it (Redis time, ms).
    pub claimed_ms: i64,
    /// Redis time read by the handler as it started.
    pub start_ms: i64,
    /// Its attempt, from 1.
    pub attempt: u32,
    /// The node that ran it.
    pub node: String,
}

impl Seen {
    /// Its lateness: the claim minus the instant; for a run claimed ahead of its instant (the
    /// node's claim lead), its start minus the instant.
    pub fn lateness_ms(&self) -> i64 {
        if self.claimed_ms < self.scheduled_ms {
            self.start_ms - self.scheduled_ms
        } else {
            self.claimed_ms - self.scheduled_ms
        }
    }

    /// Whether it ran on time or later than `release_ms` (its instant, plus a jitter offset):
    /// started no earlier, and claimed no earlier than the default claim lead before it.
    pub fn not_early(&self, release_ms: i64) -> bool {
        let lead = keyfire::config::NodeSettings::default()
            .claim_ahead
            .as_millis() as i64;
        self.start_ms >= release_ms && self.claimed_ms >= release_ms - lead
    }
}

/// Records every handler invocation, outside keyfire.
#[derive(Clone)]
pub struct Recorder {
    seen: Arc<Mutex<Vec<Seen>>>,
    ended: Arc<Mutex<HashMap<String, i64>>>,
    cancels: Arc<Mutex<Vec<String>>>,
    conn: ConnectionManager,
    changed: Arc<Notify>,
}

impl Recorder {
    /// A recorder reading Redis's clock from the server at `url`.
    pub async fn new(url: &str) -> Self {
        // Not redis-rs's 500 ms default: under a loaded CI machine a handler's TIME call
        // must wait rather than fail the run.
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_response_timeout(Some(Duration::from_secs(10)));
        let conn = redis::Client::open(url)
            .unwrap()
            .get_connection_manager_with_config(config)
            .await
            .unwrap();
        Self {
            seen: Arc::default(),
            ended: Arc::default(),
            cancels: Arc::default(),
            conn,
            changed: Arc::new(Notify::new()),
        }
    }

    /// Record a handler's start of `f` (stamped with Redis's clock).
    pub async fn record(&self, f: Firing) -> HandlerResult {
        let start_ms = redis_ms(&mut self.conn.clone()).await;
        self.seen.lock().unwrap().push(Seen {
            job_id: f.job_id,
            firing_id: f.firing_id,
            scheduled_ms: f.scheduled_at.timestamp_millis(),
            claimed_ms: f.claimed_at.timestamp_millis(),
            start_ms,
            attempt: f.attempt,
            node: f.node_id,
        });
        self.changed.notify_waiters();
        Ok(())
    }

    /// Record the end of `firing_id`'s run (stamped with Redis's clock).
    pub async fn finished(&self, firing_id: &str) {
        let now = redis_ms(&mut self.conn.clone()).await;
        self.ended
            .lock()
            .unwrap()
            .insert(firing_id.to_string(), now);
        self.changed.notify_waiters();
    }

    /// Record that `firing_id`'s run saw its cancel token, and its end.
    pub async fn cancelled(&self, firing_id: &str) {
        self.cancels.lock().unwrap().push(firing_id.to_string());
        self.finished(firing_id).await;
    }

    /// Whether `firing_id`'s run saw its cancel token.
    pub fn was_cancelled(&self, firing_id: &str) -> bool {
        self.cancels.lock().unwrap().iter().any(|c| c == firing_id)
    }

    /// Every run recorded so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The runs of `job_id` recorded so far.
    pub fn seen_of(&self, job_id: &str) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.job_id == job_id)
            .collect()
    }

    /// When `firing_id`'s run ended (Redis time, ms), if it has.
    pub fn ended(&self, firing_id: &str) -> Option<i64> {
        self.ended.lock().unwrap().get(firing_id).copied()
    }

    /// Wait until `pred` holds over the records, or fail after `limit`.
    pub async fn wait_until(&self, limit: Duration, what: &str, pred: impl Fn(&[Seen]) -> bool) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.changed.notified();
            if pred(&self.seen.lock().unwrap()) {
                return;
            }
            // A timeout tick as well as the notification: ended() changes notify too.
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                let n = self.seen.lock().unwrap().len();
                panic!("timed out after {limit:?} waiting for {what} ({n} runs recorded)");
            }
        }
    }

    /// Wait until `n` runs are recorded, or fail after `limit`.
    pub async fn wait_count(&self, n: usize, limit: Duration) {
        self.wait_until(limit, &format!("{n} runs"), |s| s.len() >= n)
            .await;
    }
}

/// p-th percentile (0..=100) of sorted values.
pub fn percentile(sorted: &[i64], p: usize) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let idx = ((sorted.len() - 1) * p + 50) / 100;
    sorted[idx.min(sorted.len() - 1)]
}

/// Assert that the runs of `seen`, by scheduled instant, are `every_ms` apart with none
/// missing (`what` says what a gap would mean).
pub fn assert_spaced(seen: &[Seen], every_ms: i64, what: &str) {
    let mut instants: Vec<i64> = seen.iter().map(|r| r.scheduled_ms).collect();
    instants.sort();
    for pair in instants.windows(2) {
        assert_eq!(pair[1] - pair[0], every_ms, "{what}: {instants:?}");
    }
}

/// Count runs per firing id; return the ones that ran more than once.
pub fn doubles(seen: &[Seen]) -> Vec<(String, usize)> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for s in seen {
        *counts.entry(&s.firing_id).or_default() += 1;
    }
    let mut d: Vec<(String, usize)> = counts
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(k, n)| (k.to_string(), n))
        .collect();
    d.sort();
    d
}

/// Lateness summary (claim time minus scheduled instant, Redis clock) as a line for the log.
pub fn lateness_summary(seen: &[Seen]) -> (i64, i64, i64, String) {
    let mut late: Vec<i64> = seen.iter().map(Seen::lateness_ms).collect();
    late.sort();
    let (p50, p99, max) = (
        percentile(&late, 50),
        percentile(&late, 99),
        *late.last().unwrap_or(&0),
    );
    (
        p50,
        p99,
        max,
        format!(
            "n={} lateness (claim, or start when claimed ahead) - instant ms: p50={p50} p99={p99} max={max}",
            late.len()
        ),
    )
}

/// Delay-queue fixtures: nodes that serve the `topic` handler, and queues.
impl<S: WorldSettings> WorldOf<S> {
    /// [`World::registry`] plus the `topic` handler on this world's Redis.
    pub fn queue_registry(&self) -> Registry {
        let mut r = self.registry();
        keyfire::queue::serve_topics(&mut r, self.settings.redis());
        r
    }

    /// A node that serves the `topic` handler (so delayed tasks become ready).
    pub async fn queue_node(&self, id: &str) -> NodeHandle {
        self.queue_node_with(id, self.settings.library()).await
    }

    /// A node `id` on `settings` that serves the `topic` handler.
    pub async fn queue_node_with(&self, id: &str, settings: impl Into<Settings>) -> NodeHandle {
        let mut settings: Settings = settings.into();
        settings.node.id = id.into();
        Node::new(settings, self.queue_registry())
            .start()
            .await
            .expect("start node")
    }

    /// A queue whose pops block (`BLPOP`).
    pub async fn queue(&self) -> keyfire::queue::Queue {
        keyfire::queue::Queue::connect(&self.settings.library())
            .await
            .expect("queue")
    }
}

/// Calls of each Redis command so far (`INFO commandstats`; a script's commands count too),
/// by command name.
pub async fn command_calls(
    c: &mut impl redis::aio::ConnectionLike,
) -> std::collections::BTreeMap<String, u64> {
    let text: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(c)
        .await
        .unwrap();
    keyfire::store::parse_info(&text)
        .into_iter()
        .filter_map(|(k, v)| {
            let name = k.strip_prefix("cmdstat_")?.to_string();
            let calls = v
                .split(',')
                .find_map(|p| p.strip_prefix("calls="))?
                .parse()
                .ok()?;
            Some((name, calls))
        })
        .collect()
}
