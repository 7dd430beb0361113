//! The delay queue's protocol: tasks added, promoted, reserved, touched, finished, and taken
//! back when their reservation expires.
//!
//! Redis's steps are `add.lua`, `promote.lua`, `pop.lua`, `touch.lua`, `finish.lua` and
//! `requeue.lua` (the sweep's take-back of expired reservations), with the real scripts'
//! preconditions and effects; consumers are the nodes' handlers, each holding the token of what
//! it reserved. A token is the delivery's number here (the real ones are random: unique per
//! delivery either way). Faults: a consumer crashes (what it holds is forgotten) or pauses
//! for any length; Redis restarts from its AOF losing the last tick.
//!
//! One topic of one lane; task `t` is added (in the first ticks) with a delay of `t` ticks
//! (task 0 ready at once);
//! `ttr` is [`TTR`] ticks, [`MAX_DELIVERIES`] deliveries before a task is dead.

use std::fmt;

use stateright::{Model, Property};

use crate::Summary;

/// A task's `ttr` in ticks.
pub const TTR: u8 = 2;
/// Deliveries before a task whose reservation expires is dead.
pub const MAX_DELIVERIES: u8 = 2;

/// A weakened rule, to show that the checks catch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// The real rules.
    None,
    /// `finish.lua` accepts any token of the task.
    AnyToken,
}

/// The model.
#[derive(Clone, Debug)]
pub struct Queue {
    /// Consumers (nodes).
    pub consumers: u8,
    /// Tasks.
    pub tasks: u8,
    /// Faults in all.
    pub faults: u8,
    /// Whether Redis may restart from its AOF.
    pub aof: bool,
    /// Faults happen up to this tick.
    pub last_fault: u8,
    /// A weakened rule, or none.
    pub mutation: Mutation,
}

impl Queue {
    /// 2 consumers, 2 tasks, consumer crashes and pauses.
    pub fn new(consumers: u8) -> Self {
        Queue {
            consumers,
            tasks: 2,
            faults: 2,
            aof: false,
            last_fault: 3,
            mutation: Mutation::None,
        }
    }

    /// The last tick.
    pub fn end(&self) -> u8 {
        self.last_fault + TTR * MAX_DELIVERIES + 2
    }
}

/// A task's record and where its id is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Task {
    /// Not added yet.
    Absent,
    /// In the delayed set, due at this tick.
    Delayed(u8),
    /// In the ready set.
    Ready,
    /// In the reserved set: the delivery's token and deadline.
    Reserved {
        /// The token finish and touch must show.
        token: u8,
        /// The reservation's deadline (tick).
        deadline: u8,
    },
    /// Finished (its record kept for the retention).
    Done,
    /// Dead: its last reservation expired unfinished at its last delivery.
    Dead,
}

/// Redis's data.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Data {
    /// Per task: its state and deliveries so far.
    pub tasks: Vec<(Task, u8)>,
}

/// The whole state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// Redis's clock (tick).
    pub now: u8,
    /// Faults left.
    pub faults: u8,
    /// Redis's data.
    pub data: Data,
    /// The AOF as of the last fsync.
    pub aof: Option<Data>,
    /// Per consumer: up, paused, and per task the token it holds.
    pub consumers: Vec<(bool, bool, Vec<Option<u8>>)>,
    /// Per task: finishes accepted (ghost), and whether a task was made ready again before
    /// its deadline, or a stale token's finish accepted.
    pub finished: Vec<u8>,
    /// A rule of the docs broken on the way (see the properties).
    pub broken: Option<&'static str>,
}

/// A step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Redis's clock moves one tick (the AOF is fsynced).
    Tick,
    /// `add.lua`: the task is added with a delay of its number in ticks.
    Add(u8),
    /// `promote.lua`: due delayed tasks become ready.
    Promote,
    /// `pop.lua`: consumer, task.
    Pop(u8, u8),
    /// `touch.lua`: consumer, task.
    Touch(u8, u8),
    /// `finish.lua`: consumer, task.
    Finish(u8, u8),
    /// `requeue.lua`: expired reservations taken back (the sweep).
    Requeue,
    /// A consumer crashes (it forgets what it holds) and restarts.
    Crash(u8),
    /// A consumer is frozen.
    Pause(u8),
    /// It wakes.
    Resume(u8),
    /// Redis restarts from its AOF.
    RedisRestart,
}

impl Model for Queue {
    type State = State;
    type Action = Step;

    fn init_states(&self) -> Vec<State> {
        let data = Data {
            tasks: vec![(Task::Absent, 0); self.tasks as usize],
        };
        vec![State {
            now: 0,
            faults: self.faults,
            aof: self.aof.then(|| data.clone()),
            data,
            consumers: vec![
                (true, false, vec![None; self.tasks as usize]);
                self.consumers as usize
            ],
            finished: vec![0; self.tasks as usize],
            broken: None,
        }]
    }

    fn actions(&self, s: &State, out: &mut Vec<Step>) {
        if s.now < self.end() {
            out.push(Step::Tick);
        }
        if s.now <= self.last_fault {
            for t in 0..self.tasks {
                out.push(Step::Add(t));
            }
        }
        out.push(Step::Promote);
        out.push(Step::Requeue);
        let faults = s.faults > 0 && s.now <= self.last_fault;
        for c in 0..self.consumers {
            let (up, paused, _) = &s.consumers[c as usize];
            if *paused {
                out.push(Step::Resume(c));
                continue;
            }
            if faults && *up {
                out.push(Step::Crash(c));
                out.push(Step::Pause(c));
            }
            for t in 0..self.tasks {
                out.push(Step::Pop(c, t));
                out.push(Step::Touch(c, t));
                out.push(Step::Finish(c, t));
            }
        }
        if faults && self.aof {
            out.push(Step::RedisRestart);
        }
    }

    fn next_state(&self, s: &State, step: Step) -> Option<State> {
        let mut t = s.clone();
        self.apply(&mut t, step);
        (t != *s).then_some(t)
    }

    fn format_action(&self, step: &Step) -> String {
        step.to_string()
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "a reserved task is finished at most once",
                |_: &Queue, s: &State| s.finished.iter().all(|&n| n <= 1),
            ),
            Property::always(
                "a task is redelivered only after its ttr, and a stale token's finish is refused",
                |_: &Queue, s: &State| s.broken.is_none(),
            ),
            Property::always(
                "every task added is eventually finished or dead while a consumer lives",
                |m: &Queue, s: &State| {
                    !m.settled(s)
                        || s.data
                            .tasks
                            .iter()
                            .all(|(t, _)| matches!(t, Task::Done | Task::Dead | Task::Absent))
                },
            ),
            Property::sometimes("a task is redelivered", |_: &Queue, s: &State| {
                s.data.tasks.iter().any(|&(_, d)| d > 1)
            }),
            Property::sometimes("a task is finished", |_: &Queue, s: &State| {
                s.finished.iter().any(|&n| n > 0)
            }),
        ]
    }
}

impl Queue {
    /// Nothing is left to do and a consumer lives (see [`crate::sched::Sched::settled`]);
    /// Add is not counted (a task never added is not expected).
    pub fn settled(&self, s: &State) -> bool {
        s.consumers.iter().any(|c| c.0) && self.next_states(s).is_empty()
    }

    /// Apply a step.
    pub fn apply(&self, s: &mut State, step: Step) {
        let now = s.now;
        match step {
            Step::Tick => {
                if let Some(aof) = s.aof.as_mut() {
                    *aof = s.data.clone();
                }
                s.now += 1;
            }
            Step::Add(t) => {
                let task = &mut s.data.tasks[t as usize];
                if task.0 == Task::Absent {
                    task.0 = if t == 0 {
                        Task::Ready
                    } else {
                        Task::Delayed(now + t)
                    };
                }
            }
            Step::Promote => {
                for task in s.data.tasks.iter_mut() {
                    if let Task::Delayed(due) = task.0
                        && due <= now
                    {
                        task.0 = Task::Ready;
                    }
                }
            }
            Step::Pop(c, t) => {
                let (up, paused, held) = &mut s.consumers[c as usize];
                if !*up || *paused || held[t as usize].is_some() {
                    return;
                }
                let task = &mut s.data.tasks[t as usize];
                if task.0 == Task::Ready {
                    task.1 += 1;
                    task.0 = Task::Reserved {
                        token: task.1,
                        deadline: now + TTR,
                    };
                    held[t as usize] = Some(task.1);
                }
            }
            Step::Touch(c, t) => {
                let (up, paused, held) = &mut s.consumers[c as usize];
                let Some(token) = held[t as usize].filter(|_| *up && !*paused) else {
                    return;
                };
                match &mut s.data.tasks[t as usize].0 {
                    Task::Reserved { token: k, deadline } if *k == token => *deadline = now + TTR,
                    // Refused: the consumer learns it lost the task.
                    _ => held[t as usize] = None,
                }
            }
            Step::Finish(c, t) => {
                let (up, paused, held) = &mut s.consumers[c as usize];
                let Some(token) = held[t as usize].filter(|_| *up && !*paused) else {
                    return;
                };
                held[t as usize] = None;
                let task = &mut s.data.tasks[t as usize];
                if let Task::Reserved { token: k, .. } = task.0
                    && (k == token || self.mutation == Mutation::AnyToken)
                {
                    if k != token {
                        s.broken = Some("a stale token's finish was accepted");
                    }
                    task.0 = Task::Done;
                    s.finished[t as usize] += 1;
                }
            }
            Step::Requeue => {
                for task in s.data.tasks.iter_mut() {
                    if let Task::Reserved { deadline, .. } = task.0
                        && deadline <= now
                    {
                        task.0 = if task.1 >= MAX_DELIVERIES {
                            Task::Dead
                        } else {
                            Task::Ready
                        };
                    }
                }
            }
            Step::Crash(c) => {
                s.faults -= 1;
                let held = &mut s.consumers[c as usize].2;
                held.iter_mut().for_each(|h| *h = None);
            }
            Step::Pause(c) => {
                s.faults -= 1;
                s.consumers[c as usize].1 = true;
            }
            Step::Resume(c) => s.consumers[c as usize].1 = false,
            Step::RedisRestart => {
                s.faults -= 1;
                s.data = s.aof.clone().expect("the AOF's data");
            }
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Step::Tick => write!(f, "tick"),
            Step::Add(t) => write!(f, "add.lua: task {t}"),
            Step::Promote => write!(f, "promote.lua"),
            Step::Pop(c, t) => write!(f, "pop.lua: consumer {c} reserves task {t}"),
            Step::Touch(c, t) => write!(f, "touch.lua: consumer {c}, task {t}"),
            Step::Finish(c, t) => write!(f, "finish.lua: consumer {c}, task {t}"),
            Step::Requeue => write!(f, "requeue.lua (expired reservations)"),
            Step::Crash(c) => write!(f, "consumer {c} crashes and restarts"),
            Step::Pause(c) => write!(f, "consumer {c} is frozen"),
            Step::Resume(c) => write!(f, "consumer {c} wakes"),
            Step::RedisRestart => write!(f, "Redis restarts from its AOF (last tick lost)"),
        }
    }
}

impl Summary for State {
    fn summary(&self) -> String {
        format!(
            "t={} redis{:?} consumers{:?} finished{:?}",
            self.now, self.data.tasks, self.consumers, self.finished
        )
    }
}
