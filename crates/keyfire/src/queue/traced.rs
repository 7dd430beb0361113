//! The queue's spans, where a process exports traces (see [`crate::trace`]): `queue.add`
//! (a child of the caller's `traceparent`), `queue.pop` (linked to the add of every task it
//! delivered: each task stores its add's context) and `queue.finish`. Without a tracer,
//! each operation runs as it did, with no span.

use std::time::Duration;

use tracing::Instrument;

use super::check::Checked;
use super::reply::Taken;
use super::{Finished, Queue, Reserved, TaskAdded};
use crate::error::Result;
use crate::trace::{self, Start, TraceParent, Tracer, Value};

/// The installed tracer and a new span, unless no tracer is installed or the span is
/// filtered out.
fn traced(span: tracing::Span) -> Option<(&'static dyn Tracer, tracing::Span)> {
    let t = trace::for_span(&span)?;
    Some((t, span))
}

fn messaging(t: &dyn Tracer, span: &tracing::Span, operation: &str, topic: Option<&str>) {
    t.set_attributes(
        span,
        &[
            ("messaging.system", Value::Str("keyfire")),
            ("messaging.operation.type", Value::Str(operation)),
        ],
    );
    if let Some(topic) = topic {
        t.set_attributes(span, &[("messaging.destination.name", Value::Str(topic))]);
    }
}

fn count(t: &dyn Tracer, span: &tracing::Span, n: usize) {
    t.set_attributes(
        span,
        &[("messaging.batch.message_count", Value::Int(n as i64))],
    );
}

fn ended<T>(t: &dyn Tracer, span: &tracing::Span, result: &Result<T>) {
    if let Err(e) = result {
        t.set_error(span, &e.to_string());
    }
}

/// Add checked tasks under the caller's trace. Each task stores the `queue.add` span's
/// context, or, where traces are not exported, the caller's `traceparent`, for the pop that
/// delivers it.
pub(super) async fn add(
    q: &Queue,
    checked: Vec<Checked>,
    caller: Option<&str>,
) -> Result<Vec<TaskAdded>> {
    let caller = caller.and_then(TraceParent::parse);
    let Some((t, span)) = traced(tracing::info_span!("queue.add", otel.kind = "producer")) else {
        let stored = caller.map(|c| c.to_string());
        return q.add_stored(checked, stored.as_deref()).await;
    };
    t.start(
        &span,
        Start {
            parent: caller.as_ref(),
            ..Start::default()
        },
    );
    let topic = checked.first().map(|c| c.topic.clone());
    let one_topic = checked.iter().all(|c| Some(&c.topic) == topic.as_ref());
    messaging(t, &span, "send", topic.as_deref().filter(|_| one_topic));
    count(t, &span, checked.len());
    let stored = t.context(&span).or(caller).map(|c| c.to_string());
    let result = q
        .add_stored(checked, stored.as_deref())
        .instrument(span.clone())
        .await;
    ended(t, &span, &result);
    result
}

/// Pop under a `queue.pop` span.
pub(super) async fn pop(
    q: &Queue,
    topic: &str,
    max: usize,
    wait: Duration,
) -> Result<Vec<Reserved>> {
    let Some((t, span)) = traced(tracing::info_span!("queue.pop", otel.kind = "consumer")) else {
        return q.pop_waiting(topic, max, wait).await;
    };
    messaging(t, &span, "receive", Some(topic));
    let result = q
        .pop_waiting(topic, max, wait)
        .instrument(span.clone())
        .await;
    if let Ok(tasks) = &result {
        count(t, &span, tasks.len());
    }
    ended(t, &span, &result);
    result
}

/// Link the current `queue.pop` span to the adds of the tasks it took.
pub(super) fn link_adds(taken: &[Taken]) {
    let Some(t) = trace::tracer() else { return };
    let span = tracing::Span::current();
    if span.is_disabled() {
        return;
    }
    for task in taken {
        if let Some(tp) = TraceParent::parse(&task.traceparent) {
            t.add_link(&span, &tp);
        }
    }
}

/// Finish one task under a `queue.finish` span.
pub(super) async fn finish(q: &Queue, id: &str, token: &str) -> Result<()> {
    let Some((t, span)) = traced(tracing::info_span!("queue.finish", otel.kind = "client")) else {
        return q.finish_one(id, token).await;
    };
    messaging(t, &span, "settle", None);
    t.set_attributes(&span, &[("messaging.message.id", Value::Str(id))]);
    let result = q.finish_one(id, token).instrument(span.clone()).await;
    ended(t, &span, &result);
    result
}

/// Finish a batch under a `queue.finish` span; a task not finished (its reservation lost,
/// or gone) marks the span failed.
pub(super) async fn finish_many(q: &Queue, tasks: &[(String, String)]) -> Result<Vec<Finished>> {
    let Some((t, span)) = traced(tracing::info_span!("queue.finish", otel.kind = "client")) else {
        return q.finish_batch(tasks).await;
    };
    messaging(t, &span, "settle", None);
    count(t, &span, tasks.len());
    let result = q.finish_batch(tasks).instrument(span.clone()).await;
    match &result {
        Ok(outcomes) => {
            let missed = outcomes
                .iter()
                .filter(|o| !matches!(o, Finished::Done))
                .count();
            if missed > 0 {
                t.set_error(
                    &span,
                    &format!("{missed} of {} not finished", outcomes.len()),
                );
            }
        }
        Err(_) => ended(t, &span, &result),
    }
    result
}
