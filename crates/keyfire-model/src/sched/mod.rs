//! The scheduler's protocol: firings claimed, leased, renewed, fenced, taken over and retried.
//!
//! Redis's state ([`Data`]) changes only by the scripts, each one step: `claim.lua`,
//! `renew.lua`, `heartbeat.lua`, `complete.lua`, `recover.lua` and `claim_retry.lua`, with the
//! preconditions and effects of the real ones (the conformance walks check that). A node
//! ([`Node`]) follows the engine's rules: it claims and takes over only when it has joined and
//! is not fenced, fences itself when its last good heartbeat is older than 3/5 of `node_ttl`
//! (unless it was frozen and wakes before `node_ttl`: then it keeps its runs and asks Redis),
//! fences at once when a heartbeat finds its entry lapsed, and hands over the runs the fence cut
//! off. Faults: a node crashes (and restarts under its id), pauses for any length, Redis
//! restarts from its AOF losing the writes since the last fsync (a tick), or fails over to a
//! replica that lacks what was not replicated.
//!
//! Abstractions, each safe for the properties below:
//! - Time is ticks of Redis's clock; a node's clock counts the same ticks (the drift of a
//!   healthy clock over `node_ttl` is far below a tick; offsets only move local timers, and the
//!   scripts decide by Redis's `TIME`).
//! - Expiry events, change messages and timers only make a claim prompt: here any node that may
//!   claim may do so at any step once the firing is due (the sweeper's way), so a lost event or
//!   message changes no reachable state.
//! - A script call and its reply are one step: a claim in flight across a fence (the engine's
//!   "claims sent before the fence" rule) and a takeover decided on a stale view (the
//!   "expiry as read" rule) are not modelled.
//! - Each firing is a one-shot job's (a job hash; compact tasks behave alike for these scripts)
//!   with overlap `allow`, no misfire, up to [`MAX_ATTEMPTS`] attempts, retries due at once.
//! - The fence loop runs every 100 ms: a node that should fence has done so by the next tick
//!   (it may fence earlier, and may race a step of its own before it does); a run it cut off
//!   stops at once (the 1 s grace is within the 2 ticks between the fence and a takeover).
//!
//! Out of scope (the docs say so): a process frozen past `node_ttl` runs on until it wakes
//! (its outcome is refused then: that part is checked); Redis losing everything (G6: the nodes
//! write back what they own); a network partition between a node and Redis (its heartbeats
//! fail: the fence rule is the same as for a node whose beats stop).

use stateright::{Model, Property};

mod show;

/// `node.node_ttl` in ticks: a node whose heartbeat is older has left the live set.
pub const TTL: u8 = 3;
/// A node fences itself once its last good heartbeat is older than this (3/5 of `node_ttl`:
/// 1.8 ticks, so 2 whole ticks).
pub const FENCE_AFTER: u8 = 1;
/// `node.lease` in ticks.
pub const LEASE: u8 = 3;
/// Attempts of a firing before it goes to the dead letters.
pub const MAX_ATTEMPTS: u8 = 2;

/// A weakened rule, to show that the checks catch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// The real rules.
    None,
    /// `complete.lua` records the outcome of an attempt that no longer holds its lease.
    UnfencedComplete,
}

/// Which Redis faults a check includes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RedisFaults {
    /// Redis never loses a write.
    None,
    /// Redis restarts from its AOF (`appendfsync everysec`): the writes since the last tick
    /// are lost.
    AofRestart,
    /// Redis fails over to its replica, which lacks what was not replicated; the nodes wait for
    /// this many replicas (`redis.wait_replicas`, 0 or 1) after a claim before the handler runs.
    Failover {
        /// `redis.wait_replicas`.
        wait_replicas: u8,
    },
}

/// The model: how many nodes and firings, which faults, the time bound.
#[derive(Clone, Debug)]
pub struct Sched {
    /// Nodes (2 checked exhaustively, 3 up to a depth).
    pub nodes: u8,
    /// Firings: firing `f` is due at tick `f + 1`.
    pub firings: u8,
    /// Node crashes, pauses and Redis faults in all (a fault budget keeps behaviours finite).
    pub faults: u8,
    /// Whether nodes may crash (and restart) and pause.
    pub node_faults: bool,
    /// Redis's faults.
    pub redis: RedisFaults,
    /// Faults happen up to this tick; time stops at [`Sched::end`] (late enough for every
    /// takeover to be due).
    pub last_fault: u8,
    /// A weakened rule, or none.
    pub mutation: Mutation,
}

impl Sched {
    /// The exhaustive configuration: 2 nodes, 2 firings, node crashes and pauses.
    pub fn new(nodes: u8) -> Self {
        Sched {
            nodes,
            firings: 2,
            faults: 2,
            node_faults: true,
            redis: RedisFaults::None,
            last_fault: 2,
            mutation: Mutation::None,
        }
    }

    /// The last tick: late enough for the runs of a node that stopped at the last fault to
    /// be taken over (its heartbeat `node_ttl` old, its lease expired).
    pub fn end(&self) -> u8 {
        self.last_fault + TTL.max(LEASE) + 1
    }

    /// The instant (tick) of firing `f`.
    pub fn at(&self, f: u8) -> u8 {
        f + 1
    }
}

/// A run's lease: the running ZSET's member `<firing>|<attempt>|<claimed>|<node>` and its
/// expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Lease {
    /// The attempt.
    pub attempt: u8,
    /// When it was claimed (tick).
    pub claimed: u8,
    /// The node that holds it.
    pub node: u8,
    /// Its expiry (tick).
    pub expiry: u8,
}

/// A run record of the job's history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The handler succeeded.
    Ok,
    /// It failed (the next attempt queued, or dead).
    Failed,
    /// Taken over (`recover.lua`): its node died, hung or fenced.
    Lost,
}

/// One firing in Redis.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Firing {
    /// Still pending: the job's `next` and its due entry are the firing's instant.
    pub due: bool,
    /// The lease of its run, if one runs.
    pub lease: Option<Lease>,
    /// A queued attempt (retry ZSET and attempts hash): its number; due at once.
    pub retry: Option<u8>,
    /// Its run records, oldest first: attempt and outcome.
    pub records: Vec<(u8, Outcome)>,
    /// Moved to the dead letters.
    pub dead: bool,
}

/// Redis's data: the firings, and each node's last heartbeat (tick).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Data {
    /// Per firing.
    pub firings: Vec<Firing>,
    /// Per node: its score in the nodes ZSET.
    pub seen: Vec<Option<u8>>,
}

/// What a node knows of a firing: the attempt and claim tick that name its lease, and for an
/// ended run whether its handler succeeded.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Run {
    /// Claimed; its handler waits for `WAIT` (wait_replicas 1).
    Waiting { attempt: u8, claimed: u8 },
    /// Its handler runs.
    Running { attempt: u8, claimed: u8 },
    /// Its handler returned; the outcome waits to be recorded.
    Ended { attempt: u8, claimed: u8, ok: bool },
    /// The fence cut it off: it stopped, and is handed over at the next good heartbeat.
    CutOff { attempt: u8, claimed: u8 },
}

impl Run {
    fn lease(&self) -> (u8, u8) {
        match *self {
            Run::Waiting { attempt, claimed }
            | Run::Running { attempt, claimed }
            | Run::Ended {
                attempt, claimed, ..
            }
            | Run::CutOff { attempt, claimed } => (attempt, claimed),
        }
    }
}

/// A node process.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    /// Its process runs.
    pub up: bool,
    /// Frozen (SIGSTOP, a VM migration): it does nothing, its runs included.
    pub paused: bool,
    /// Its first heartbeat succeeded (it claims only then).
    pub joined: bool,
    /// It fenced itself: it claims nothing until a heartbeat succeeds.
    pub fenced: bool,
    /// It woke from a pause and has not had a good heartbeat since.
    pub frozen: bool,
    /// When its last good heartbeat was sent (tick).
    pub last_beat: u8,
    /// Per firing, what it runs.
    pub runs: Vec<Option<Run>>,
}

/// Facts the checks need that no part of the system keeps (they survive Redis losing data).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Ghost {
    /// Per firing: claims of its first attempt a node was told of.
    pub claims: Vec<u8>,
    /// Per firing: `ok` outcomes a node was told were recorded.
    pub oks: Vec<u8>,
    /// Per firing: attempts taken over (bit `a`: attempt `a` lost its lease to a takeover).
    pub taken: Vec<u8>,
    /// Per firing: bit 1, its first claim reached the replica before its handler started
    /// (wait_replicas 1); bit 2, its success reached the replica.
    pub acked: Vec<u8>,
    /// A firing acknowledged by the replica was claimed again.
    pub rerun_acked: bool,
}

/// The whole state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// Redis's clock (tick).
    pub now: u8,
    /// Faults left.
    pub faults: u8,
    /// The master's data.
    pub data: Data,
    /// The data Redis restarts with (the AOF as of the last fsync), or the replica's.
    pub copy: Option<Data>,
    /// The nodes.
    pub nodes: Vec<Node>,
    /// See [`Ghost`].
    pub ghost: Ghost,
}

/// A script call a step made, with the reply the model expects (the conformance walks run the
/// real script and compare).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// `heartbeat.lua`: whether it finds the node's entry lapsed.
    Heartbeat {
        /// The node.
        node: u8,
        /// The reply's `lapsed`.
        lapsed: bool,
    },
    /// `claim.lua`: whether it claims (reply 1).
    Claim {
        /// The node.
        node: u8,
        /// The firing.
        firing: u8,
        /// Claimed.
        claimed: bool,
    },
    /// `claim_retry.lua`: the attempt it claims, if any.
    ClaimRetry {
        /// The node.
        node: u8,
        /// The firing.
        firing: u8,
        /// The attempt claimed.
        attempt: Option<u8>,
    },
    /// `renew.lua` of the lease the node's run names: whether it is still the node's.
    Renew {
        /// The node.
        node: u8,
        /// The firing.
        firing: u8,
        /// The run's attempt.
        attempt: u8,
        /// Its claim (tick).
        claimed: u8,
        /// Renewed.
        ours: bool,
    },
    /// `complete.lua` of a run's outcome: whether it is recorded (not fenced).
    Complete {
        /// The node.
        node: u8,
        /// The firing.
        firing: u8,
        /// The run's attempt.
        attempt: u8,
        /// Its claim (tick).
        claimed: u8,
        /// Its handler succeeded.
        ok: bool,
        /// Recorded.
        recorded: bool,
    },
    /// `recover.lua`: the holder named (None: take it only if the lease expired), and
    /// whether it takes the run over.
    Recover {
        /// The node.
        node: u8,
        /// The firing.
        firing: u8,
        /// The holder named.
        holder: Option<u8>,
        /// Taken over.
        taken: bool,
    },
}

/// Why a node takes a run over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Why {
    /// Its lease expired (`recover.lua` with no holder).
    Expired,
    /// Its holder left the live set (no heartbeat for `node_ttl`).
    Left,
    /// It holds the lease of a run it does not run (cut off by its fence, or a previous
    /// process's): its hand-over.
    Own,
}

/// A step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Redis's clock moves one tick. The AOF is fsynced; then each live node that is not
    /// frozen does what its loops do several times a tick: the fence loop fences it if its
    /// last good heartbeat is too old, it heartbeats (`heartbeat.lua`; fenced if its entry
    /// lapsed, the fence lifted by the beat's success) and renews each lease it runs under
    /// (`renew.lua`; a run whose lease is not its own any more stops).
    Tick,
    /// `claim.lua`: node, firing.
    Claim(u8, u8),
    /// `claim_retry.lua`: node, firing.
    ClaimRetry(u8, u8),
    /// A handler returns (node, firing, success); no script.
    HandlerEnds(u8, u8, bool),
    /// `complete.lua`: node, firing.
    Complete(u8, u8),
    /// `recover.lua`: node, firing, why.
    Recover(u8, u8, Why),
    /// A node process dies (its runs with it).
    Crash(u8),
    /// It starts again under its id.
    Restart(u8),
    /// A node process is frozen.
    Pause(u8),
    /// It wakes.
    Resume(u8),
    /// Redis restarts from its AOF.
    RedisRestart,
    /// The replica receives what the master wrote.
    Replicate,
    /// Redis fails over to the replica.
    Failover,
}

impl Model for Sched {
    type State = State;
    type Action = Step;

    fn init_states(&self) -> Vec<State> {
        let f = self.firings as usize;
        let data = Data {
            firings: vec![
                Firing {
                    due: true,
                    ..Firing::default()
                };
                f
            ],
            seen: vec![None; self.nodes as usize],
        };
        let node = Node {
            up: true,
            paused: false,
            joined: false,
            fenced: false,
            frozen: false,
            last_beat: 0,
            runs: vec![None; f],
        };
        vec![State {
            now: 0,
            faults: self.faults,
            copy: (self.redis != RedisFaults::None).then(|| data.clone()),
            data,
            nodes: vec![node; self.nodes as usize],
            ghost: Ghost {
                claims: vec![0; f],
                oks: vec![0; f],
                taken: vec![0; f],
                acked: vec![0; f],
                rerun_acked: false,
            },
        }]
    }

    fn actions(&self, s: &State, out: &mut Vec<Step>) {
        if s.now < self.end() {
            out.push(Step::Tick);
        }
        let faults = s.faults > 0 && s.now <= self.last_fault;
        for n in 0..self.nodes {
            let node = &s.nodes[n as usize];
            if !node.up {
                out.push(Step::Restart(n));
                continue;
            }
            if node.paused {
                out.push(Step::Resume(n));
                continue;
            }
            if faults && self.node_faults {
                out.push(Step::Crash(n));
                out.push(Step::Pause(n));
            }
            for f in 0..self.firings {
                match node.runs[f as usize] {
                    None => {
                        out.push(Step::Claim(n, f));
                        out.push(Step::ClaimRetry(n, f));
                        out.push(Step::Recover(n, f, Why::Expired));
                        out.push(Step::Recover(n, f, Why::Left));
                        out.push(Step::Recover(n, f, Why::Own));
                    }
                    Some(Run::Running { .. }) => {
                        out.push(Step::HandlerEnds(n, f, true));
                        out.push(Step::HandlerEnds(n, f, false));
                    }
                    Some(Run::Ended { .. }) => out.push(Step::Complete(n, f)),
                    Some(Run::CutOff { .. }) => out.push(Step::Recover(n, f, Why::Own)),
                    Some(Run::Waiting { .. }) => {}
                }
            }
        }
        if faults {
            match self.redis {
                RedisFaults::AofRestart => out.push(Step::RedisRestart),
                RedisFaults::Failover { .. } => out.push(Step::Failover),
                RedisFaults::None => {}
            }
        }
        if matches!(self.redis, RedisFaults::Failover { .. }) {
            out.push(Step::Replicate);
        }
    }

    fn next_state(&self, s: &State, step: Step) -> Option<State> {
        let mut t = s.clone();
        self.apply(&mut t, step, &mut Vec::new());
        (t != *s).then_some(t)
    }

    fn format_action(&self, step: &Step) -> String {
        step.to_string()
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "G1: a firing is claimed at most once",
                |_: &Sched, s: &State| s.ghost.claims.iter().all(|&c| c <= 1),
            ),
            Property::always("at most one ok per firing", |_: &Sched, s: &State| {
                s.ghost.oks.iter().all(|&c| c <= 1)
                    && s.data
                        .firings
                        .iter()
                        .all(|f| f.records.iter().filter(|r| r.1 == Outcome::Ok).count() <= 1)
            }),
            Property::always(
                "no outcome recorded by a fenced attempt",
                |_: &Sched, s: &State| {
                    s.data.firings.iter().zip(&s.ghost.taken).all(|(f, taken)| {
                        f.records
                            .iter()
                            .all(|&(a, o)| o == Outcome::Lost || taken & (1 << a) == 0)
                    })
                },
            ),
            Property::always(
                "a failover re-runs nothing the replica acknowledged",
                |_: &Sched, s: &State| !s.ghost.rerun_acked,
            ),
            Property::always(
                "G2: every due firing is claimed while a node lives",
                |m: &Sched, s: &State| !m.settled(s) || s.data.firings.iter().all(|f| !f.due),
            ),
            Property::always(
                "G5: every claimed firing ends in an outcome while a node lives",
                |m: &Sched, s: &State| {
                    !m.settled(s)
                        || s.data.firings.iter().all(|f| {
                            f.lease.is_none()
                                && f.retry.is_none()
                                && (f.dead || f.records.iter().any(|r| r.1 == Outcome::Ok))
                        })
                },
            ),
            Property::sometimes("a run is taken over", |_: &Sched, s: &State| {
                s.ghost.taken.iter().any(|&t| t != 0)
            }),
            Property::sometimes("a firing succeeds", |_: &Sched, s: &State| {
                s.ghost.oks.iter().any(|&c| c > 0)
            }),
        ]
    }
}

impl Sched {
    /// A behaviour has ended (no step changes anything) with a node alive: up, not frozen, and
    /// in good standing (joined, not fenced, its last heartbeat current). Every behaviour is
    /// finite (time stops, faults are counted), so a liveness property is checked here: what
    /// must eventually happen has happened when nothing is left to do. The fairness this
    /// assumes: a step that stays possible is taken (a live node heartbeats, renews, records,
    /// sweeps), and each fault ends (a paused node wakes, a crashed one restarts or another
    /// lives).
    pub fn settled(&self, s: &State) -> bool {
        s.nodes.iter().any(|n| {
            n.up && !n.paused && n.joined && !n.fenced && s.now - n.last_beat <= FENCE_AFTER
        }) && self.next_states(s).is_empty()
    }

    /// Apply a step (a no-op where its script refuses, or the node may not take it), logging
    /// each script call it makes with the reply the model expects, in order.
    pub fn apply(&self, s: &mut State, step: Step, calls: &mut Vec<Call>) {
        let now = s.now;
        let may_claim = |n: &Node| n.up && !n.paused && n.joined && !n.fenced;
        match step {
            Step::Tick => {
                if let Some(copy) = s.copy.as_mut()
                    && self.redis == RedisFaults::AofRestart
                {
                    *copy = s.data.clone();
                }
                s.now += 1;
                let now = s.now;
                for n in 0..self.nodes {
                    let node = &mut s.nodes[n as usize];
                    if !node.up || node.paused {
                        continue;
                    }
                    if self.should_fence(node, now) {
                        fence(node);
                    }
                    let lapsed = heartbeat(&mut s.data, n, now);
                    calls.push(Call::Heartbeat { node: n, lapsed });
                    if lapsed && node.joined {
                        fence(node);
                    }
                    node.fenced = false;
                    node.frozen = false;
                    node.joined = true;
                    node.last_beat = now;
                    for f in 0..self.firings {
                        let Some(Run::Running { attempt, claimed }) = node.runs[f as usize] else {
                            continue;
                        };
                        let ours = match s.data.firings[f as usize].lease.as_mut() {
                            Some(l) if (l.attempt, l.claimed, l.node) == (attempt, claimed, n) => {
                                l.expiry = now + LEASE;
                                true
                            }
                            _ => false,
                        };
                        calls.push(Call::Renew {
                            node: n,
                            firing: f,
                            attempt,
                            claimed,
                            ours,
                        });
                        if !ours {
                            // Told to stop: its outcome would be refused.
                            node.runs[f as usize] = None;
                        }
                    }
                }
            }
            Step::Claim(n, f) => {
                if !may_claim(&s.nodes[n as usize])
                    || s.nodes[n as usize].runs[f as usize].is_some()
                {
                    return;
                }
                let at = self.at(f);
                let firing = &mut s.data.firings[f as usize];
                let claimed = firing.due && at <= now;
                calls.push(Call::Claim {
                    node: n,
                    firing: f,
                    claimed,
                });
                if !claimed {
                    return;
                }
                firing.due = false;
                firing.lease = Some(Lease {
                    attempt: 1,
                    claimed: now,
                    node: n,
                    expiry: now + LEASE,
                });
                s.ghost.claims[f as usize] += 1;
                if s.ghost.acked[f as usize] != 0 {
                    s.ghost.rerun_acked = true;
                }
                s.nodes[n as usize].runs[f as usize] = Some(self.started(1, now));
            }
            Step::ClaimRetry(n, f) => {
                if !may_claim(&s.nodes[n as usize])
                    || s.nodes[n as usize].runs[f as usize].is_some()
                {
                    return;
                }
                let firing = &mut s.data.firings[f as usize];
                let attempt = firing.retry.take();
                calls.push(Call::ClaimRetry {
                    node: n,
                    firing: f,
                    attempt,
                });
                let Some(attempt) = attempt else {
                    return;
                };
                firing.lease = Some(Lease {
                    attempt,
                    claimed: now,
                    node: n,
                    expiry: now + LEASE,
                });
                // A retry after a failure is no re-run; one after a success the replica had is.
                if s.ghost.acked[f as usize] & 2 != 0 {
                    s.ghost.rerun_acked = true;
                }
                s.nodes[n as usize].runs[f as usize] = Some(self.started(attempt, now));
            }
            Step::HandlerEnds(n, f, ok) => {
                if let Some(Run::Running { attempt, claimed }) =
                    s.nodes[n as usize].runs[f as usize]
                {
                    s.nodes[n as usize].runs[f as usize] = Some(Run::Ended {
                        attempt,
                        claimed,
                        ok,
                    });
                }
            }
            Step::Complete(n, f) => {
                let Some(Run::Ended {
                    attempt,
                    claimed,
                    ok,
                }) = s.nodes[n as usize].runs[f as usize]
                else {
                    return;
                };
                s.nodes[n as usize].runs[f as usize] = None;
                let firing = &mut s.data.firings[f as usize];
                let held = firing
                    .lease
                    .is_some_and(|l| (l.attempt, l.claimed, l.node) == (attempt, claimed, n));
                let recorded = held || self.mutation == Mutation::UnfencedComplete;
                calls.push(Call::Complete {
                    node: n,
                    firing: f,
                    attempt,
                    claimed,
                    ok,
                    recorded,
                });
                if held {
                    firing.lease = None;
                } else if !recorded {
                    return; // fenced: nothing written
                }
                if ok {
                    firing.records.push((attempt, Outcome::Ok));
                    s.ghost.oks[f as usize] += 1;
                } else {
                    firing.records.push((attempt, Outcome::Failed));
                    if attempt < MAX_ATTEMPTS {
                        firing.retry = Some(attempt + 1);
                    } else {
                        firing.dead = true;
                    }
                }
            }
            Step::Recover(n, f, why) => {
                let node = &s.nodes[n as usize];
                if !may_claim(node) {
                    return;
                }
                let lease = s.data.firings[f as usize].lease;
                // Whom the node names as the holder (None: the lease must have expired), if it
                // calls the script at all.
                let holder = match (why, node.runs[f as usize], lease) {
                    (Why::Expired, None, Some(_)) => None,
                    // The sweeper read the holder from its lease, and found it gone from the
                    // live set.
                    (Why::Left, None, Some(l))
                        if l.node != n
                            && s.data.seen[l.node as usize].is_none_or(|t| t + TTL < now) =>
                    {
                        Some(l.node)
                    }
                    // A run the fence cut off, handed over whatever holds it now; or a lease
                    // of this node's id that it does not run (a previous process's).
                    (Why::Own, Some(Run::CutOff { .. }), _) => Some(n),
                    (Why::Own, None, Some(l)) if l.node == n => Some(n),
                    _ => return,
                };
                if why == Why::Own {
                    s.nodes[n as usize].runs[f as usize] = None;
                }
                let taken = lease.filter(|l| match holder {
                    None => l.expiry <= now,
                    Some(h) => l.node == h,
                });
                calls.push(Call::Recover {
                    node: n,
                    firing: f,
                    holder,
                    taken: taken.is_some(),
                });
                let Some(l) = taken else {
                    return;
                };
                let firing = &mut s.data.firings[f as usize];
                firing.lease = None;
                firing.records.push((l.attempt, Outcome::Lost));
                s.ghost.taken[f as usize] |= 1 << l.attempt;
                if l.attempt >= MAX_ATTEMPTS {
                    firing.dead = true;
                } else {
                    firing.retry = Some(l.attempt + 1);
                }
            }
            Step::Crash(n) => {
                s.faults -= 1;
                let node = &mut s.nodes[n as usize];
                node.up = false;
                node.runs.iter_mut().for_each(|r| *r = None);
            }
            Step::Restart(n) => {
                // A node starts with a heartbeat (its first finds no lapse to fence for).
                let lapsed = heartbeat(&mut s.data, n, now);
                calls.push(Call::Heartbeat { node: n, lapsed });
                s.nodes[n as usize] = Node {
                    up: true,
                    paused: false,
                    joined: true,
                    fenced: false,
                    frozen: false,
                    last_beat: now,
                    runs: vec![None; self.firings as usize],
                };
            }
            Step::Pause(n) => {
                s.faults -= 1;
                s.nodes[n as usize].paused = true;
            }
            Step::Resume(n) => {
                let node = &mut s.nodes[n as usize];
                node.paused = false;
                node.frozen = true;
            }
            Step::RedisRestart => {
                s.faults -= 1;
                s.data = s.copy.clone().expect("the AOF's data");
            }
            Step::Replicate => {
                let copy = s.copy.as_mut().expect("the replica");
                *copy = s.data.clone();
                for f in 0..self.firings as usize {
                    let claimed = s.nodes.iter().any(|n| {
                        n.up && matches!(n.runs[f], Some(Run::Waiting { attempt: 1, .. }))
                    });
                    let ok = s.data.firings[f].records.iter().any(|r| r.1 == Outcome::Ok);
                    if claimed {
                        s.ghost.acked[f] |= 1;
                    }
                    if ok {
                        s.ghost.acked[f] |= 2;
                    }
                }
                // WAIT answers: the handlers start.
                release_waiting(&mut s.nodes);
            }
            Step::Failover => {
                s.faults -= 1;
                s.data = s.copy.clone().expect("the replica");
                // WAIT fails with the old master: the handlers run anyway (availability first).
                release_waiting(&mut s.nodes);
            }
        }
    }

    fn started(&self, attempt: u8, claimed: u8) -> Run {
        match self.redis {
            RedisFaults::Failover { wait_replicas: 1 } => Run::Waiting { attempt, claimed },
            _ => Run::Running { attempt, claimed },
        }
    }

    /// The fence loop's verdict: fence when the last good heartbeat is older than
    /// [`FENCE_AFTER`], unless the node woke from a pause with it younger than `node_ttl`
    /// (it keeps its runs while a heartbeat confirms its place).
    fn should_fence(&self, node: &Node, now: u8) -> bool {
        if !node.up || node.paused || !node.joined || node.fenced {
            return false;
        }
        let since = now - node.last_beat;
        since > FENCE_AFTER && !(node.frozen && since < TTL)
    }
}

/// `heartbeat.lua`: whether the node's entry had lapsed; its score becomes now.
fn heartbeat(data: &mut Data, n: u8, now: u8) -> bool {
    let lapsed = data.seen[n as usize].is_none_or(|t| t + TTL < now);
    data.seen[n as usize] = Some(now);
    lapsed
}

/// Fence a node: it claims nothing, its runs stop (to be handed over).
fn fence(node: &mut Node) {
    node.fenced = true;
    for run in node.runs.iter_mut() {
        if let Some(r) = *run {
            let (attempt, claimed) = r.lease();
            *run = Some(Run::CutOff { attempt, claimed });
        }
    }
}

fn release_waiting(nodes: &mut [Node]) {
    for node in nodes {
        for run in node.runs.iter_mut() {
            if let Some(Run::Waiting { attempt, claimed }) = *run {
                *run = Some(Run::Running { attempt, claimed });
            }
        }
    }
}
