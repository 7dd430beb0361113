//! `GET /v1/topics/{topic}/tasks/{id}/why`: why a delay-queue task is where it is (delayed,
//! ready, reserved, dead, done or deleted), in reason codes and one sentence, from what the
//! queue stores: the task's record, its rank in its partition's ready set (and the scores before
//! it in the topic's other partitions) and the topic's paused flag; and, for a task past due and
//! not yet promoted, whether any node is live.

use axum::Json;
use axum::extract::{Path, State};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiState;
use super::error::{ApiError, ErrorBody};
use super::system::live_nodes;
use keyfire::queue::{TaskInfo, TaskState};

/// A due instant past by more than this, with the task still delayed, is named overdue.
const OVERDUE_MS: i64 = 5_000;

/// A reason a task is where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskWhyCode {
    /// Its topic is paused: consumers are handed none of its tasks until it is resumed.
    Paused,
    /// It waits for its due instant (`due_at`).
    Delayed,
    /// Its due instant is past and it has not been made ready: promotion is late.
    Overdue,
    /// No node is live: nothing promotes its topic's delayed tasks.
    NoNode,
    /// It waits for a consumer (`ready_ahead` ready tasks of its topic before it).
    Ready,
    /// A consumer holds it until `deadline`.
    Reserved,
    /// It was delivered `max_deliveries` times without a finish: a dead letter, replayable.
    Dead,
    /// A consumer finished it.
    Done,
    /// It was deleted.
    Deleted,
}

/// One reason, in a sentence.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskWhyCause {
    /// The reason's code.
    pub code: TaskWhyCode,
    /// What it means for this task.
    pub message: String,
}

/// Why a delay-queue task is where it is.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskWhyView {
    /// The task's topic.
    pub topic: String,
    /// The task's id.
    pub id: String,
    /// `delayed`, `ready`, `reserved`, `dead`, `done` or `deleted`.
    pub task_state: String,
    /// The main reason: the first of `causes`.
    pub state: TaskWhyCode,
    /// In one sentence.
    pub summary: String,
    /// Every reason that applies, the main one first.
    pub causes: Vec<TaskWhyCause>,
    /// Redis's clock now.
    pub now: Option<DateTime<Utc>>,
    /// When it is (was) due.
    pub due_at: DateTime<Utc>,
    /// How far off its due instant is, in ms (negative: past).
    pub due_in_ms: i64,
    /// When it last became ready.
    pub ready_at: Option<DateTime<Utc>>,
    /// While ready: how many ready tasks of its topic come before it (in its partition, those
    /// ahead of it; in the others, those of a higher priority or ready earlier).
    pub ready_ahead: Option<u64>,
    /// Whether its topic is paused.
    pub paused: bool,
    /// Deliveries so far.
    pub deliveries: u32,
    /// Deliveries before the dead letters.
    pub max_deliveries: u32,
    /// While reserved: when the reservation expires unless finished or touched.
    pub deadline: Option<DateTime<Utc>>,
    /// When it was finished, went to the dead letters, or was deleted.
    pub finished_at: Option<DateTime<Utc>>,
    /// A dead letter's: why it went to the dead letters.
    pub error: Option<String>,
}

/// How long, for people: `3 s`, `4 min`, `2 h 5 min`, `3 d`.
fn span(ms: i64) -> String {
    let s = ms.abs() / 1000;
    match s {
        0 => format!("{} ms", ms.abs()),
        1..=119 => format!("{s} s"),
        120..=7_199 => format!("{} min", s / 60),
        7_200..=172_799 => format!("{} h {} min", s / 3600, s / 60 % 60),
        _ => format!("{} d", s / 86_400),
    }
}

fn when(t: Option<DateTime<Utc>>) -> String {
    t.map_or_else(|| "an unknown time".into(), |t| t.to_rfc3339())
}

/// Why task `id` of `topic` is where it is: delayed until its due instant (or overdue, with
/// no live node to promote it), ready and waiting for a consumer (how many before it; its
/// topic paused), reserved until its deadline (delivery n of max), a dead letter (its error,
/// replayable), done, or deleted.
#[utoipa::path(
    get,
    path = "/v1/topics/{topic}/tasks/{id}/why",
    tag = "topics",
    params(
        ("topic" = String, Path, description = "The task's topic"),
        ("id" = String, Path, description = "The task's id"),
    ),
    responses(
        (status = 200, description = "Why it is where it is", body = TaskWhyView),
        (status = 404, description = "No such task in this topic", body = ErrorBody),
        (status = 422, description = "Not a valid topic or task id (names the field)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn topic_task_why(
    State(state): State<ApiState>,
    Path((topic, id)): Path<(String, String)>,
) -> Result<Json<TaskWhyView>, ApiError> {
    let queue = state.queue();
    let task = super::topic_tasks::in_topic(&state, &topic, &id).await?;
    let now = state.client().time_ms().await?;
    let paused = queue.is_paused(&topic).await?;
    let ready_ahead = match task.state {
        TaskState::Ready => queue.ready_ahead_in(&topic, &id).await?,
        _ => None,
    };
    let live = if task.state == TaskState::Delayed {
        Some(live_nodes(state.client(), state.node_ttl_ms()).await?.len())
    } else {
        None
    };
    Ok(Json(explain(
        &task,
        Facts {
            now,
            paused,
            ready_ahead,
            live,
        },
    )))
}

/// What `explain` needs besides the task's record.
struct Facts {
    now: i64,
    paused: bool,
    ready_ahead: Option<u64>,
    /// Live nodes, when it matters (the task is delayed).
    live: Option<usize>,
}

fn explain(task: &TaskInfo, f: Facts) -> TaskWhyView {
    let now = f.now;
    let due = task.due_at.timestamp_millis();
    let mut causes: Vec<TaskWhyCause> = Vec::new();
    let mut cause = |code, message: String| causes.push(TaskWhyCause { code, message });
    let paused = "its topic is paused: consumers are handed none of its tasks until it is resumed";
    match task.state {
        TaskState::Delayed => {
            if due < now - OVERDUE_MS {
                cause(
                    TaskWhyCode::Overdue,
                    format!(
                        "it was due at {} ({} ago) and is still delayed: promotion is late",
                        when(Some(task.due_at)),
                        span(now - due)
                    ),
                );
                if f.live == Some(0) {
                    cause(
                        TaskWhyCode::NoNode,
                        "no node is live: nothing makes its topic's due tasks ready until one starts"
                            .into(),
                    );
                }
            } else if due <= now {
                cause(
                    TaskWhyCode::Delayed,
                    format!(
                        "it is due now ({}): it becomes ready at the next promotion",
                        when(Some(task.due_at))
                    ),
                );
            } else {
                cause(
                    TaskWhyCode::Delayed,
                    format!(
                        "it is delayed until {} (in {})",
                        when(Some(task.due_at)),
                        span(due - now)
                    ),
                );
            }
            if f.paused {
                cause(TaskWhyCode::Paused, paused.into());
            }
        }
        TaskState::Ready => {
            if f.paused {
                cause(TaskWhyCode::Paused, paused.into());
            }
            let ahead = match f.ready_ahead {
                Some(0) => "; it is next in its topic".to_string(),
                Some(1) => "; 1 ready task of its topic is ahead of it".to_string(),
                Some(n) => format!("; {n} ready tasks of its topic are ahead of it"),
                None => String::new(),
            };
            let since = task.ready_at.unwrap_or(task.due_at);
            cause(
                TaskWhyCode::Ready,
                format!(
                    "it is ready and waits for a consumer since {} ({} ago){ahead}",
                    when(Some(since)),
                    span(now - since.timestamp_millis())
                ),
            );
        }
        TaskState::Reserved => {
            let until = match task.deadline {
                Some(d) => format!(
                    "until {} (in {})",
                    d.to_rfc3339(),
                    span(d.timestamp_millis() - now)
                ),
                None => "until its deadline".into(),
            };
            let then = if task.deliveries >= task.max_deliveries {
                "the dead letters"
            } else {
                "ready for another delivery"
            };
            cause(
                TaskWhyCode::Reserved,
                format!(
                    "it is held by a consumer {until}, delivery {} of {}; unless finished or touched by then, it goes to {then}",
                    task.deliveries, task.max_deliveries
                ),
            );
        }
        TaskState::Dead => {
            let error = task
                .last_error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default();
            cause(
                TaskWhyCode::Dead,
                format!(
                    "it is a dead letter since {}, after {} of {} deliveries without a finish{error}; it can be replayed (POST /v1/topics/{}/dead/replay?ids={}, or keyfire topics dead replay {} --id {})",
                    when(task.finished_at),
                    task.deliveries,
                    task.max_deliveries,
                    task.topic,
                    task.id,
                    task.topic,
                    task.id
                ),
            );
        }
        TaskState::Done => cause(
            TaskWhyCode::Done,
            format!(
                "it is done: a consumer finished it at {}",
                when(task.finished_at)
            ),
        ),
        TaskState::Deleted => cause(
            TaskWhyCode::Deleted,
            format!(
                "it was deleted at {}: it is never delivered again",
                when(task.finished_at)
            ),
        ),
    }
    let summary = {
        let mut s = format!(
            "Task {} of topic {}: {}",
            task.id, task.topic, causes[0].message
        );
        if causes.len() > 1 {
            let more: Vec<&str> = causes[1..].iter().map(|c| c.message.as_str()).collect();
            s.push_str("; also, ");
            s.push_str(&more.join("; "));
        }
        s.push('.');
        s
    };
    TaskWhyView {
        topic: task.topic.clone(),
        id: task.id.clone(),
        task_state: task.state.as_str().to_string(),
        state: causes[0].code,
        summary,
        now: DateTime::<Utc>::from_timestamp_millis(now),
        due_at: task.due_at,
        due_in_ms: due - now,
        ready_at: task.ready_at.filter(|_| task.state == TaskState::Ready),
        ready_ahead: f.ready_ahead,
        paused: f.paused,
        deliveries: task.deliveries,
        max_deliveries: task.max_deliveries,
        deadline: task.deadline.filter(|_| task.state == TaskState::Reserved),
        finished_at: task.finished_at,
        error: task.last_error.clone(),
        causes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn task(state: TaskState, due_ms: i64) -> TaskInfo {
        TaskInfo {
            id: "t1".into(),
            topic: "orders".into(),
            state,
            payload: None,
            deliveries: 0,
            max_deliveries: 3,
            ttr: Duration::from_secs(30),
            created_at: DateTime::<Utc>::from_timestamp_millis(0).unwrap(),
            due_at: DateTime::<Utc>::from_timestamp_millis(due_ms).unwrap(),
            ready_at: None,
            priority: 0,
            reserved_at: None,
            deadline: None,
            finished_at: None,
            last_error: None,
            batch: None,
        }
    }

    fn facts(now: i64, paused: bool, live: Option<usize>) -> Facts {
        Facts {
            now,
            paused,
            ready_ahead: None,
            live,
        }
    }

    #[test]
    fn a_delayed_task_past_due_is_overdue_and_names_no_live_node() {
        let now = 1_000_000;
        let w = explain(
            &task(TaskState::Delayed, now - 60_000),
            facts(now, false, Some(0)),
        );
        let codes: Vec<TaskWhyCode> = w.causes.iter().map(|c| c.code).collect();
        assert_eq!(codes, [TaskWhyCode::Overdue, TaskWhyCode::NoNode]);
        assert!(w.summary.contains("60 s ago"), "{}", w.summary);
        assert_eq!(w.due_in_ms, -60_000);
        // A node is live: overdue alone.
        let w = explain(
            &task(TaskState::Delayed, now - 60_000),
            facts(now, false, Some(1)),
        );
        assert_eq!(w.causes.len(), 1);
        // Just due: not overdue yet.
        let w = explain(
            &task(TaskState::Delayed, now - 1_000),
            facts(now, false, Some(0)),
        );
        assert_eq!(w.state, TaskWhyCode::Delayed);
        let w = explain(
            &task(TaskState::Delayed, now + 90_000),
            facts(now, false, Some(0)),
        );
        assert_eq!(w.state, TaskWhyCode::Delayed);
        assert!(w.summary.contains("(in 90 s)"), "{}", w.summary);
    }

    #[test]
    fn a_paused_topic_comes_first_for_a_ready_task() {
        let now = 1_000_000;
        let mut f = facts(now, true, None);
        f.ready_ahead = Some(2);
        let w = explain(&task(TaskState::Ready, now - 5_000), f);
        let codes: Vec<TaskWhyCode> = w.causes.iter().map(|c| c.code).collect();
        assert_eq!(codes, [TaskWhyCode::Paused, TaskWhyCode::Ready]);
        assert!(
            w.summary.contains("2 ready tasks of its topic are ahead"),
            "{}",
            w.summary
        );
    }
}
