//! The delay queue's scripts against [`keyfire_model::queue`]: one topic `t` of one lane,
//! task `k` is `k<k>`, a delivery's token is `tok<delivery>`.

use keyfire_model::queue::{self, Data, MAX_DELIVERIES, Queue, Step, TTR, Task};
use keyfire_model::walk::{self, Rng};
use redis::Value;
use stateright::Model;

use super::{scripts, set_clock, tick};

fn key(what: &str) -> String {
    format!("{{q}}:q:{what}")
}
fn task_key(t: u8) -> String {
    key(&format!("task:k{t}"))
}

/// The scripts a walk runs.
pub(crate) struct Scripts {
    add: redis::Script,
    promote: redis::Script,
    pop: redis::Script,
    touch: redis::Script,
    finish: redis::Script,
    requeue: redis::Script,
}

impl Scripts {
    /// The real ones.
    pub(crate) fn real() -> Self {
        Self::with_finish(scripts::FINISH)
    }

    /// The real ones but `finish.lua`.
    pub(crate) fn with_finish(finish: &str) -> Self {
        Scripts {
            add: scripts::load(Some(scripts::TEXT_LIB), scripts::ADD),
            promote: scripts::load(None, scripts::PROMOTE),
            pop: scripts::load(Some(scripts::TEXT_LIB), scripts::POP),
            touch: scripts::load(None, scripts::TOUCH),
            finish: scripts::load(Some(scripts::FANIN_LIB), finish),
            requeue: scripts::load(Some(scripts::FANIN_LIB), scripts::REQUEUE),
        }
    }
}

/// One walk (see the scheduler's).
pub(crate) fn walk(
    con: &mut redis::Connection,
    scripts: &Scripts,
    seed: u64,
    steps: usize,
    seen: &mut super::Coverage,
) -> Result<(), String> {
    let model = Queue::new(2);
    let mut state = start(con, &model)?;
    let mut rng = Rng::new(seed);
    let mut trail = String::new();
    for i in 0..steps {
        if model.next_states(&state).is_empty() {
            // Nothing left to do: a new episode from the start.
            trail = format!("(from the start, at step {i})\n");
            state = start(con, &model)?;
        }
        // One walk in three has consumers that never finish: tasks die of expired
        // reservations.
        let keep = |s: &Step| seed % 3 != 2 || !matches!(s, Step::Finish(..));
        let Some((step, next)) = walk::next(&model, &state, &mut rng, keep) else {
            break;
        };
        trail.push_str(&format!("{i:>4}. {step}\n"));
        seen.count(kind(&model, &state, &next, step));
        run(con, scripts, &model, &state, &next, step)
            .map_err(|e| format!("{e}\nafter:\n{trail}"))?;
        state = next;
        let seen = read(con, &model).map_err(|e| format!("{e}\nafter:\n{trail}"))?;
        if std::env::var("KFM_TRACE").is_ok() {
            println!("{step} => {:?} {:?}", state.data, state.consumers);
        }
        if seen != state.data {
            return Err(format!(
                "Redis's data is not the model's\n redis: {seen:?}\n model: {:?}\nafter:\n{trail}",
                state.data
            ));
        }
    }
    Ok(())
}

/// An empty Redis at tick 0, and the model's start.
fn start(con: &mut redis::Connection, model: &Queue) -> Result<queue::State, String> {
    redis::cmd("FLUSHALL")
        .query::<()>(con)
        .map_err(|e| e.to_string())?;
    set_clock(con, 0);
    Ok(model.init_states().remove(0))
}

/// What a step exercises, for the coverage the tests ask of the walks.
fn kind(m: &Queue, before: &queue::State, after: &queue::State, step: Step) -> &'static str {
    let changed = before != after;
    let dead = |s: &queue::State| s.data.tasks.iter().filter(|t| t.0 == Task::Dead).count();
    match step {
        Step::Pop(..) if changed => "pop.lua reserves",
        Step::Touch(..) if changed && after.data == before.data => {
            "touch.lua refuses a stale token"
        }
        Step::Touch(..) if changed => "touch.lua extends",
        Step::Finish(..) if changed && after.data == before.data => {
            "finish.lua refuses a stale token"
        }
        Step::Finish(..) if changed => "finish.lua finishes",
        Step::Requeue if dead(after) > dead(before) => "requeue.lua: dead",
        Step::Requeue if changed => "requeue.lua: ready again",
        Step::Promote if changed => "promote.lua promotes",
        _ => {
            let _ = m;
            "other"
        }
    }
}

/// Run the script a step calls, as the library does; compare its reply with the model's.
fn run(
    con: &mut redis::Connection,
    s: &Scripts,
    m: &Queue,
    before: &queue::State,
    after: &queue::State,
    step: Step,
) -> Result<(), String> {
    let err = |e: redis::RedisError| format!("{step}: {e}");
    let ttr_ms = (i64::from(TTR) * super::TICK).to_string();
    let held = |c: u8, t: u8| {
        let (up, paused, held) = &before.consumers[c as usize];
        held[t as usize].filter(|_| *up && !*paused)
    };
    match step {
        Step::Tick => set_clock(con, after.now),
        Step::Add(t) => {
            let _: Vec<Value> = s
                .add
                .key(key("delayed:t"))
                .key(key("ready:t"))
                .key(key("notify:t"))
                .key(key("stats:t"))
                .key(key("next"))
                .key(key("due"))
                .key(task_key(t))
                .arg("t")
                .arg(100)
                .arg("{q}:changes")
                .arg("t")
                .arg(format!("k{t}"))
                .arg("{}")
                .arg(&ttr_ms)
                .arg(MAX_DELIVERIES)
                .arg("delay")
                .arg(i64::from(t) * super::TICK)
                .arg("") // priority 0
                .arg("") // no traceparent
                .invoke(con)
                .map_err(err)?;
        }
        Step::Promote => {
            let _: Vec<Value> = s
                .promote
                .key(key("delayed:t"))
                .key(key("ready:t"))
                .key(key("notify:t"))
                .key(key("next"))
                .key(key("reserved:t"))
                .key(key("due"))
                .key(key("stats:t"))
                .arg(100)
                .arg(100)
                .arg("t")
                .invoke(con)
                .map_err(err)?;
        }
        Step::Pop(c, t) => {
            let (up, paused, mine) = &before.consumers[c as usize];
            if !*up || *paused || mine[t as usize].is_some() {
                return Ok(()); // the consumer asks for nothing
            }
            let token = format!("tok{}", before.data.tasks[t as usize].1 + 1);
            let reply: Vec<Value> = s
                .pop
                .key(key("ready:t"))
                .key(key("reserved:t"))
                .key(key("notify:t"))
                .key(key("stats:t"))
                .key(key("due"))
                .key(task_key(t))
                .arg(1)
                .arg(MAX_DELIVERIES)
                .arg(&ttr_ms)
                .arg("t")
                .arg(0) // any priority
                .arg(format!("k{t}"))
                .arg(token)
                .invoke(con)
                .map_err(err)?;
            let taken = matches!(reply.first(), Some(Value::Int(1)));
            let expected = after.consumers[c as usize].2[t as usize].is_some();
            if taken != expected {
                return Err(format!("{step}: pop answered {reply:?}"));
            }
        }
        Step::Touch(c, t) => {
            let Some(token) = held(c, t) else {
                return Ok(());
            };
            let reply: Vec<Value> = s
                .touch
                .key(task_key(t))
                .key(key("reserved:t"))
                .arg(format!("k{t}"))
                .arg(format!("tok{token}"))
                .arg("")
                .invoke(con)
                .map_err(err)?;
            let ok = matches!(reply.first(), Some(Value::Int(1)));
            let expected = after.consumers[c as usize].2[t as usize].is_some();
            if ok != expected {
                return Err(format!("{step}: touch answered {reply:?}"));
            }
        }
        Step::Finish(c, t) => {
            let Some(token) = held(c, t) else {
                return Ok(());
            };
            let reply: Vec<i64> = s
                .finish
                .key(key("reserved:t"))
                .key(key("stats:t"))
                .key(task_key(t))
                .arg(86_400_000)
                .arg(format!("k{t}"))
                .arg(format!("tok{token}"))
                .invoke(con)
                .map_err(err)?;
            let done = reply.get(1) == Some(&1);
            let expected = after.finished[t as usize] > before.finished[t as usize];
            if done != expected {
                return Err(format!("{step}: finish answered {reply:?}"));
            }
        }
        Step::Requeue => {
            let mut inv = s.requeue.prepare_invoke();
            inv.key(key("ready:t"))
                .key(key("reserved:t"))
                .key(key("dead:t"))
                .key(key("notify:t"))
                .key(key("stats:t"))
                .arg(86_400_000)
                .arg(100)
                .arg(MAX_DELIVERIES);
            for t in 0..m.tasks {
                inv.key(task_key(t)).arg(format!("k{t}"));
            }
            let _: Vec<Value> = inv.invoke(con).map_err(err)?;
        }
        Step::Crash(_) | Step::Pause(_) | Step::Resume(_) => {}
        Step::RedisRestart => return Err("no Redis faults in the walks".into()),
    }
    Ok(())
}

/// Redis's data in the model's terms.
fn read(con: &mut redis::Connection, m: &Queue) -> Result<Data, String> {
    let e = |e: redis::RedisError| e.to_string();
    let mut tasks = Vec::new();
    for t in 0..m.tasks {
        let id = format!("k{t}");
        let (state, token, deliveries): (Option<String>, Option<String>, Option<u8>) =
            redis::cmd("HMGET")
                .arg(task_key(t))
                .arg("state")
                .arg("token")
                .arg("deliveries")
                .query(con)
                .map_err(e)?;
        let score = |set: &str, con: &mut redis::Connection| -> Result<Option<i64>, String> {
            redis::cmd("ZSCORE")
                .arg(key(set))
                .arg(&id)
                .query(con)
                .map_err(|e| e.to_string())
        };
        let delayed = score("delayed:t", con)?;
        let ready = score("ready:t", con)?;
        let reserved = score("reserved:t", con)?;
        let dead = score("dead:t", con)?;
        let task = match (state.as_deref(), delayed, ready, reserved, dead) {
            (None, None, None, None, None) => Task::Absent,
            (Some("delayed"), Some(due), None, None, None) => Task::Delayed(tick(due)?),
            (Some("delayed" | "ready"), None, Some(_), None, None) => Task::Ready,
            (Some("reserved"), None, None, Some(deadline), None) => Task::Reserved {
                token: token
                    .as_deref()
                    .and_then(|k| k.strip_prefix("tok"))
                    .and_then(|k| k.parse().ok())
                    .ok_or(format!("task {t}: token {token:?}"))?,
                deadline: tick(deadline)?,
            },
            (Some("done"), None, None, None, None) => Task::Done,
            (Some("dead"), None, None, None, Some(_)) => Task::Dead,
            other => return Err(format!("task {t}: record and sets disagree: {other:?}")),
        };
        tasks.push((task, deliveries.unwrap_or(0)));
    }
    Ok(Data { tasks })
}
