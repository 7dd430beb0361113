//! The node: listens for expiry events, arms precision timers, claims firings, sweeps for
//! what events missed, keeps its membership, and runs handlers in a bounded executor.
//!
//! A node is a set of components, each holding only what it uses (the pieces they share,
//! as `Arc`s: the [`NodeCore`](context::NodeCore) with the node's id, settings, store,
//! clock, counters and lifecycle; the live set; the fence; the executor's permits; the spec
//! cache). Each has a step that tests call and a loop that calls it; [`Engine::wire`] builds
//! them, in this one place, and [`Node::start`] starts their loops:
//!
//! - [`Membership`](membership::Membership) (`beat`): heartbeat in Redis time, the live set,
//!   the clock offset, the self-fence (`check_fence`), the notification check;
//! - [`Listener`](listener::Listener): PSUBSCRIBE to expired events and SUBSCRIBE to the
//!   change channel; after every (re)subscribe it asks for a sweep, since messages are lost
//!   while disconnected;
//! - [`Timers`](timers::Timers) (`run_once`): local timers for firings this node owns that
//!   are due within the horizon, armed through a [`TimerQueue`](timers::TimerQueue);
//! - [`Sweeper`](sweeper::Sweeper) (`run_once`): claims overdue firings from the due ZSET
//!   (the owner's at once, anyone's after the grace period) and arms timers for the owner's
//!   upcoming ones;
//! - [`Claimer`](claim::Claimer) (`claim_batch`, `try_claim`): the claim protocol, scheduled
//!   claims in one script call per shard;
//! - [`Runner`](runner::Runner) (`execute`): a claimed firing on the bounded executor, its
//!   lease renewed, cut off by a lost lease, the fence or the drain timeout;
//! - [`Leases`](leases::Leases) (`hold`): one loop renews the leases of every run in
//!   progress (started with the first run, stopped once none is left to renew);
//! - [`FlowLimiter`](flow_limiter::FlowLimiter) (`gate`): a limited firing asks its key for
//!   a slot, or is held back for its turn;
//! - [`Completer`](completer::Completer) (`record_batch`): outcomes in one script call per
//!   shard;
//! - [`Callbacks`](callbacks::Callbacks) (`run_once`): sends the callbacks queued with
//!   outcomes (each shard's outbox), bounded;
//! - [`Hooks`](hooks::Hooks): the registry's hooks (the delay queue's topic promotion), each
//!   given a view of the node and the expired keys and change messages that are theirs.
//!
//! Who calls whom (each arrow a field; no component holds one that holds it):
//! listener → claimer, membership, hooks; sweeper → claimer; claimer → runner, flow limiter;
//! runner → flow limiter, completer, leases; completer → callbacks; claimer, sweeper, flow limiter
//! and completer → timer queue. The timers hand what is due to the claimer, and membership
//! hands the runs the fence cut off to it, through functions given them here.

mod batch;
mod batcher;
mod callbacks;
mod claim;
mod completer;
mod context;
mod executor;
mod firing;
mod flow_limiter;
mod healing;
mod hooks;
mod leases;
mod listener;
pub mod membership;
mod misfire;
mod runner;
mod specs;
mod sweeper;
#[cfg(test)]
mod tests;
mod timers;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::clock::{Clock, RedisClock, SystemClock};
use crate::config::Settings;
use crate::error::Result;
use crate::handler::Registry;
use crate::store::{Beat, Store, notify};

use callbacks::Callbacks;
use claim::{ClaimRequest, Claimer};
use completer::{Completer, Done};
pub use context::Stats;
use context::{NodeCore, SweepState};
use executor::Executor;
use firing::Source;
use flow_limiter::FlowLimiter;
pub use healing::DATA_LOSS_SHOWN;
use healing::Healer;
use hooks::Hooks;
use listener::Listener;
use membership::{Fence, Live, Membership};
use runner::Runner;
use specs::Specs;
use sweeper::Sweeper;
use timers::{TimerQueue, Timers};

/// A node, ready to start.
pub struct Node {
    settings: Settings,
    registry: Registry,
    clock: Arc<dyn Clock>,
}

impl Node {
    /// A node with these settings and handlers.
    pub fn new(settings: Settings, registry: Registry) -> Self {
        Self {
            settings,
            registry,
            clock: Arc::new(SystemClock),
        }
    }

    /// Use `clock` as this node's wall clock (tests skew it; Redis time still rules).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Run until `shutdown` resolves, then leave the live set, stop claiming and wait for
    /// running jobs up to the drain timeout.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<()> {
        let handle = self.start().await?;
        shutdown.await;
        handle.shutdown().await;
        Ok(())
    }

    /// Start the node's tasks and return a handle to it.
    pub async fn start(self) -> Result<NodeHandle> {
        let Node {
            settings,
            registry,
            clock,
        } = self;
        settings.check()?;
        executor::check_run_permits(settings.node.max_concurrent_runs)?;
        let store = Store::open(&settings.redis)
            .await?
            .with_ledger(crate::store::Ledger::of(&settings.node));
        store.check_layout().await?;
        notify::ensure_everywhere(&store, settings.redis.enable_notifications, true).await?;
        store.register_handlers(&registry.names()).await?;

        let id = if settings.node.id.is_empty() {
            default_node_id()
        } else {
            settings.node.id.clone()
        };
        let (engine, queues) = Engine::wire(id, &settings, store, registry, RedisClock::new(clock));
        // At 0 from the start, so that the first loss is an increase to alert on.
        metrics::counter!(crate::metrics::name::DATA_LOSS, "node" => engine.core.id.clone())
            .absolute(0);
        // Join the live set and learn Redis's clock before claiming anything.
        engine.membership.beat(Beat::Alive).await?;
        engine.limiter.refresh().await;

        let Queues {
            timers,
            claims,
            completions,
        } = queues;
        let e = &engine;
        let mut tasks = JoinSet::new();
        tasks.spawn(e.membership.clone().run());
        tasks.spawn(e.listener.clone().run());
        let claimer = e.claimer.clone();
        tasks.spawn(timers.run(move |job_id, at_ms, kind| {
            claimer.spawn_claim(job_id, at_ms, kind, Source::Timer);
        }));
        tasks.spawn(e.sweeper.clone().run());
        e.hooks.start(&mut tasks);
        // Not with the loops above either: a draining node still fences itself.
        let fence = tokio::spawn(e.membership.clone().fence_loop());
        for rx in claims {
            tasks.spawn(e.claimer.clone().run_batcher(rx));
        }
        for shard in 0..e.core.store.shards().len() {
            tasks.spawn(e.callbacks.clone().run(shard));
        }
        // Not with the loops above: they must outlive them, to record the runs that finish
        // while the node drains.
        let completers = completions
            .into_iter()
            .map(|rx| tokio::spawn(e.completer.clone().run(rx)))
            .collect();
        tracing::info!(node = %e.core.id, "node started");
        Ok(NodeHandle {
            engine,
            tasks,
            completers,
            fence,
        })
    }
}

/// A node's components, wired.
pub(crate) struct Engine {
    core: Arc<NodeCore>,
    live: Arc<Live>,
    executor: Arc<Executor>,
    limiter: Arc<FlowLimiter>,
    callbacks: Arc<Callbacks>,
    completer: Arc<Completer>,
    #[cfg_attr(not(test), allow(dead_code))]
    runner: Arc<Runner>,
    claimer: Arc<Claimer>,
    sweeper: Arc<Sweeper>,
    membership: Arc<Membership>,
    hooks: Arc<Hooks>,
    listener: Arc<Listener>,
}

/// The queues the loops of [`Engine`] read, one per shard for the batchers and completers.
struct Queues {
    timers: Timers,
    claims: Vec<mpsc::UnboundedReceiver<ClaimRequest>>,
    completions: Vec<mpsc::UnboundedReceiver<Done>>,
}

impl Engine {
    /// Cancel the node's runs: the token its loops watch, and every run's own token (the
    /// executor cancels those in progress and any that starts from now on).
    fn cancel_runs(&self) {
        self.core.runs_cancel.cancel();
        self.executor.stop_all();
    }

    /// Build a node's components around `store`: every component and what it holds, in one
    /// place. Nothing runs until the loops are started (or a test calls the steps).
    fn wire(
        id: String,
        settings: &Settings,
        store: Store,
        registry: Registry,
        clock: RedisClock,
    ) -> (Engine, Queues) {
        let handlers = registry.names();
        let hook_list = registry.hooks().to_vec();
        let sender = registry.callback_sender();
        let registry = Arc::new(registry);
        // One claim batcher and one completer per shard: a shard whose server is failing
        // over (its calls wait for seconds) does not hold up the others' batches.
        let shards = store.shards().len();
        let core = Arc::new(NodeCore::new(
            id.clone(),
            settings.node.clone(),
            store,
            clock,
        ));
        let (claim_tx, claim_rx): (Vec<_>, Vec<_>) =
            (0..shards).map(|_| mpsc::unbounded_channel()).unzip();
        let (done_tx, done_rx): (Vec<_>, Vec<_>) =
            (0..shards).map(|_| mpsc::unbounded_channel()).unzip();

        let live = Arc::new(Live::new(id));
        let fence = Arc::new(Fence::new());
        let sweep = Arc::new(SweepState::default());
        let executor = Arc::new(Executor::new(settings.node.max_concurrent_runs));
        let specs = Arc::new(Specs::new(core.clone()));
        let (timer_queue, timers) = TimerQueue::new(core.clone(), specs.clone());
        let limiter = Arc::new(FlowLimiter {
            core: core.clone(),
            timers: timer_queue.clone(),
            keys: Default::default(),
            any: Default::default(),
            asks: Default::default(),
            holds: Default::default(),
        });
        let callbacks = Arc::new(Callbacks::new(core.clone(), sender));
        let completer = Arc::new(Completer {
            core: core.clone(),
            executor: executor.clone(),
            timers: timer_queue.clone(),
            live: live.clone(),
            callbacks: callbacks.clone(),
        });
        let runner = Arc::new(Runner {
            core: core.clone(),
            registry,
            executor: executor.clone(),
            fence: fence.clone(),
            limiter: limiter.clone(),
            completions: done_tx,
            completer: completer.clone(),
            leases: Arc::new(leases::Leases::new(core.clone(), executor.clone())),
        });
        let claimer = Arc::new(Claimer {
            core: core.clone(),
            specs: specs.clone(),
            executor: executor.clone(),
            live: live.clone(),
            fence: fence.clone(),
            timers: timer_queue.clone(),
            runner: runner.clone(),
            limiter: limiter.clone(),
            sweep: sweep.clone(),
            book: Default::default(),
            claims: claim_tx,
            waiting: Default::default(),
            ahead_line: Default::default(),
        });
        let sweeper = Arc::new(Sweeper {
            core: core.clone(),
            claimer: claimer.clone(),
            timers: timer_queue.clone(),
            live: live.clone(),
            fence: fence.clone(),
            limiter: limiter.clone(),
            state: sweep.clone(),
            running: Default::default(),
        });
        let handover = {
            let claimer = claimer.clone();
            Box::new(move |job_id, at_ms, holder| {
                claimer.spawn_takeover(job_id, at_ms, holder, None)
            })
        };
        let healer = Arc::new(Healer {
            core: core.clone(),
            limiter: limiter.clone(),
            specs: specs.clone(),
            sweep: sweep.clone(),
            handlers: handlers.clone(),
            notifications_allowed: settings.redis.enable_notifications,
            losses: tokio::sync::watch::channel(0).0,
        });
        let membership = Arc::new(Membership {
            core: core.clone(),
            live: live.clone(),
            fence,
            executor: executor.clone(),
            sweep: sweep.clone(),
            handlers,
            notifications_allowed: settings.redis.enable_notifications,
            left: Default::default(),
            handover,
            data: Default::default(),
            healer,
            beat_now: Default::default(),
            confirming: Default::default(),
        });
        let hooks = Arc::new(Hooks {
            core: core.clone(),
            live: live.clone(),
            hooks: hook_list,
        });
        let listener = Arc::new(Listener {
            core: core.clone(),
            claimer: claimer.clone(),
            timers: timer_queue,
            live: live.clone(),
            membership: membership.clone(),
            executor: executor.clone(),
            specs,
            limiter: limiter.clone(),
            hooks: hooks.clone(),
            sweep,
        });
        let engine = Engine {
            core,
            live,
            executor,
            limiter,
            callbacks,
            completer,
            runner,
            claimer,
            sweeper,
            membership,
            hooks,
            listener,
        };
        let queues = Queues {
            timers,
            claims: claim_rx,
            completions: done_rx,
        };
        (engine, queues)
    }
}

/// `<host>-<8 hex digits>`: the host's name from `/etc/hostname`, else the kernel's
/// (`/proc/sys/kernel/hostname`), else `HOSTNAME`; `node` when none names one (an image
/// without `/etc/hostname`, a read-only or empty one).
fn default_node_id() -> String {
    node_id_from([
        std::fs::read_to_string("/etc/hostname").ok(),
        std::fs::read_to_string("/proc/sys/kernel/hostname").ok(),
        std::env::var("HOSTNAME").ok(),
    ])
}

/// A node id from the first of `names` with a name on its first line, or `node`.
fn node_id_from(names: impl IntoIterator<Item = Option<String>>) -> String {
    let host = names
        .into_iter()
        .flatten()
        .find_map(|text| {
            let line = text.lines().next()?.trim();
            (!line.is_empty()).then(|| line.to_string())
        })
        .unwrap_or_else(|| "node".into());
    // The top 32 bits of a v4 UUID are random: 8 hex digits, formatted without slicing.
    let suffix = (uuid::Uuid::new_v4().as_u128() >> 96) as u32;
    format!("{host}-{suffix:08x}")
}

/// A running node.
pub struct NodeHandle {
    engine: Engine,
    tasks: JoinSet<()>,
    completers: Vec<tokio::task::JoinHandle<()>>,
    fence: tokio::task::JoinHandle<()>,
}

impl NodeHandle {
    /// This node's id.
    pub fn id(&self) -> &str {
        &self.engine.core.id
    }

    /// This node's counters.
    pub fn stats(&self) -> &Stats {
        &self.engine.core.stats
    }

    /// The live nodes as this node saw them at its last heartbeat, sorted.
    pub fn live_nodes(&self) -> Vec<String> {
        self.engine.live.nodes()
    }

    /// Run permits taken on this node: runs in progress, and runs ended whose outcomes are
    /// recorded on their run's permit.
    pub fn running(&self) -> usize {
        self.engine.executor.running()
    }

    /// Outcomes of runs that ended here and are not recorded in Redis yet (each holds one
    /// of the node's record permits, 16 per `max_concurrent_runs`; outcomes stop waiting
    /// behind claims once fewer than a quarter are free).
    pub fn outcomes_unrecorded(&self) -> usize {
        self.engine.executor.outcomes_unrecorded()
    }

    /// How many times this node found that Redis lost keyfire's data (restarted empty,
    /// `FLUSHALL`, a failover to an empty replica) and wrote back what it owns. An embedding
    /// application that declares jobs, topics or flow limits at start writes them back when
    /// this changes (`keyfire serve` does).
    pub fn data_losses(&self) -> tokio::sync::watch::Receiver<u64> {
        self.engine.membership.healer.losses.subscribe()
    }

    /// The estimated offset of Redis's clock to this node's clock, in ms.
    pub fn clock_offset_ms(&self) -> i64 {
        self.engine.core.clock.offset_ms()
    }

    /// Run one sweep now, as the sweeper does every `node.sweep_interval`: claim this node's
    /// overdue firings (and anyone's past the grace period) and arm timers for what is due
    /// within the horizon. Returns once the sweep has read every shard; the claims it starts
    /// run on. A seam for tests, which step the engine instead of waiting on the interval.
    pub async fn sweep_once(&self) -> Result<()> {
        self.engine.sweeper.run_once().await
    }

    /// Graceful shutdown: leave the live set, stop claiming, wait for running jobs up to the
    /// drain timeout, then cancel what still runs (its lease lets another node take it over).
    pub async fn shutdown(mut self) {
        let e = &self.engine;
        let core = e.core.clone();
        // Stop claiming and heartbeating first, so no heartbeat in flight re-adds this node
        // after it left; then leave the live set before draining, so the other nodes take
        // the firings that follow at once.
        core.claiming.cancel();
        while self.tasks.join_next().await.is_some() {}
        if let Err(e) = e.membership.beat(Beat::Draining).await {
            tracing::warn!(error = %e, "could not leave the live set; it expires after node_ttl");
        }
        // Out of the live set, but alive: keep saying so while the runs drain, or the other
        // nodes would take them over after node_ttl.
        let keepalive = tokio::spawn(e.membership.clone().draining_loop());
        core.runs.close();
        let drain = core.settings.drain_timeout;
        if tokio::time::timeout(drain, core.runs.wait()).await.is_err() {
            tracing::warn!(
                running = e.executor.running(),
                "drain timeout passed; cancelling running jobs"
            );
            e.cancel_runs();
            let _ = tokio::time::timeout(Duration::from_secs(5), core.runs.wait()).await;
        }
        // The completers record what the drained runs queued, then stop.
        e.cancel_runs();
        for c in self.completers {
            let _ = c.await;
        }
        keepalive.abort();
        let _ = self.fence.await;
        if let Err(e) = e.membership.gone().await {
            tracing::warn!(error = %e, "could not say this node is gone; its entry expires");
        }
        tracing::info!(node = %core.id, "node stopped");
    }

    /// Stop at once, as a crash would (for tests): nothing is drained or released, the node
    /// stays in the live set until its heartbeat goes stale.
    pub fn abort(mut self) {
        self.engine.cancel_runs();
        self.fence.abort();
        self.tasks.abort_all();
        for c in &self.completers {
            c.abort();
        }
    }
}
