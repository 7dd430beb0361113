//! Batching: what is queued goes to Redis in batches (up to [`CLAIM_BATCH`]), a few batches
//! in flight. The claim batchers and the completers both run on it.

use std::future::Future;

use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Most items (scheduled claims, outcomes) sent in one script call.
pub(super) const CLAIM_BATCH: usize = 128;
/// Batches of claims (or completions) in flight at once, per shard: with claims ahead of
/// run permits a node claims a burst in full batches, and Redis always has the next one.
const CLAIM_BATCHES_IN_FLIGHT: usize = 8;
/// How often a held batch looks again whether it may go.
const HOLD_POLL: std::time::Duration = std::time::Duration::from_millis(2);

/// The first item and whatever else is queued, up to a batch.
pub(super) fn gather<T>(first: T, rx: &mut mpsc::UnboundedReceiver<T>) -> Vec<T> {
    gather_up_to(first, rx, CLAIM_BATCH)
}

/// The first item and whatever else is queued, up to `most`.
fn gather_up_to<T>(first: T, rx: &mut mpsc::UnboundedReceiver<T>, most: usize) -> Vec<T> {
    // Sized for what is queued: grown from one, a batch of 128 outcomes was moved six times.
    let mut batch = Vec::with_capacity(most.min(1 + rx.len()));
    batch.push(first);
    while batch.len() < most {
        match rx.try_recv() {
            Ok(r) => batch.push(r),
            Err(_) => break,
        }
    }
    batch
}

/// Wait for the next item, then take it and whatever else is queued, up to `most`; `None`
/// once `stop` is cancelled or the queue closes. For batchers with one call in flight.
pub(super) async fn next_batch<T>(
    rx: &mut mpsc::UnboundedReceiver<T>,
    stop: &CancellationToken,
    most: usize,
) -> Option<Vec<T>> {
    let first = tokio::select! {
        r = rx.recv() => r?,
        _ = stop.cancelled() => return None,
    };
    Some(gather_up_to(first, rx, most))
}

/// Answer each asker of a batch with its item of `answers`, or every one with `None` when
/// the call failed (an asker then does the work on its own).
pub(super) fn answer_each<A, X, E>(
    batch: Vec<A>,
    answers: Result<Vec<X>, E>,
    reply: impl Fn(A) -> tokio::sync::oneshot::Sender<Option<X>>,
) {
    match answers {
        Ok(answers) => {
            for (a, x) in batch.into_iter().zip(answers) {
                let _ = reply(a).send(Some(x));
            }
        }
        Err(_) => {
            for a in batch {
                let _ = reply(a).send(None);
            }
        }
    }
}

/// Gather what is queued into batches and hand each to `work`, a few batches in flight
/// (tracked by `tasks`), until `stop` is cancelled or the queue closes. Returns once the
/// batches in flight are done.
pub(super) async fn run_batches<T, F, Fut>(
    rx: &mut mpsc::UnboundedReceiver<T>,
    stop: &CancellationToken,
    tasks: &TaskTracker,
    work: F,
) where
    T: Send + 'static,
    F: Fn(Vec<T>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    run_batches_held(rx, stop, tasks, |_| false, |batch, _| work(batch)).await
}

/// [`run_batches`], holding each batch back while `hold` says so of its first item (checked
/// every [`HOLD_POLL`]); what queues meanwhile joins the batch. `work` learns whether the
/// batch was held.
pub(super) async fn run_batches_held<T, H, F, Fut>(
    rx: &mut mpsc::UnboundedReceiver<T>,
    stop: &CancellationToken,
    tasks: &TaskTracker,
    hold: H,
    work: F,
) where
    T: Send + 'static,
    H: Fn(&T) -> bool,
    F: Fn(Vec<T>, bool) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let in_flight = std::sync::Arc::new(Semaphore::new(CLAIM_BATCHES_IN_FLIGHT));
    loop {
        let first = tokio::select! {
            r = rx.recv() => match r {
                Some(r) => r,
                None => break,
            },
            _ = stop.cancelled() => break,
        };
        let mut held = false;
        while !stop.is_cancelled() && hold(&first) {
            held = true;
            tokio::time::sleep(HOLD_POLL).await;
        }
        // Wait for a slot before gathering: what queues up meanwhile joins this batch
        // instead of waiting for the next one.
        let Ok(slot) = in_flight.clone().acquire_owned().await else {
            break;
        };
        let batch = gather(first, rx);
        let job = work(batch, held);
        tasks.spawn(async move {
            job.await;
            drop(slot);
        });
    }
    let _ = in_flight.acquire_many(CLAIM_BATCHES_IN_FLIGHT as u32).await;
}
