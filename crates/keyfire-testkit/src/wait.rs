//! The one wait of the tests and fixtures: look at a condition until it holds, for at most a
//! deadline, and on timeout panic (or, for the fixtures, fail) naming what did not happen and
//! what the last look saw.
//!
//! [`until`] is for async tests (its check is an async closure: a Redis read, an HTTP call, or
//! a plain read of node counters); [`until_blocking`] is for plain threads and blocking code
//! (a child process's output, a file). A check returns a [`Look`]: `bool`, `Option<T>` (done
//! with `T`) or `Result<T, E>` (done with `T`; `E` says what it saw instead, and the timeout's
//! message shows the last one).
//!
//! Wait on a condition, never on wall time: a sleep that hopes something happened is slow
//! when it is long and flaky when it is short.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// How often [`until`] and [`until_blocking`] look.
pub const EVERY: Duration = Duration::from_millis(20);

/// What one look at a condition gave: done (with a value), or what it saw instead.
pub trait Look {
    /// What a wait that ends gives back.
    type Done;
    /// `Ok` when done; otherwise what was seen, for the timeout's message.
    fn look(self) -> Result<Self::Done, String>;
}

impl Look for bool {
    type Done = ();
    fn look(self) -> Result<(), String> {
        if self { Ok(()) } else { Err("false".into()) }
    }
}

impl<T> Look for Option<T> {
    type Done = T;
    fn look(self) -> Result<T, String> {
        self.ok_or_else(|| "None".into())
    }
}

impl<T, E: Display> Look for Result<T, E> {
    type Done = T;
    fn look(self) -> Result<T, String> {
        self.map_err(|e| e.to_string())
    }
}

/// The message of a wait that ran out of time.
fn timed_out(what: &str, limit: Duration, last: &str) -> String {
    format!("{what}: did not happen within {limit:?} (last look: {last})")
}

/// Look at `check` every [`EVERY`] until it is done, and give back what it gave; panic after
/// `limit` with `what` and the last look. A look that is still pending at the deadline counts
/// as the last one (a hung request fails the wait instead of hanging the test).
pub async fn until<L: Look>(
    what: &str,
    limit: Duration,
    mut check: impl AsyncFnMut() -> L,
) -> L::Done {
    let deadline = tokio::time::Instant::now() + limit;
    let mut last = "none yet".to_string();
    loop {
        match tokio::time::timeout_at(deadline, check()).await {
            Ok(seen) => match seen.look() {
                Ok(done) => return done,
                Err(seen) => last = seen,
            },
            Err(_) => last = format!("still pending at the deadline, after {last}"),
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("{}", timed_out(what, limit, &last));
        }
        tokio::time::sleep(EVERY).await;
    }
}

/// [`until`] for blocking code: look at `check` every [`EVERY`] until it is done; panic after
/// `limit` with `what` and the last look. On a multi-thread tokio runtime the worker hands its
/// other tasks to the other workers first (`block_in_place`), so the nodes under test run on.
pub fn until_blocking<L: Look>(what: &str, limit: Duration, check: impl FnMut() -> L) -> L::Done {
    crate::off_runtime(|| poll_blocking(limit, EVERY, check))
        .unwrap_or_else(|last| panic!("{}", timed_out(what, limit, &last)))
}

/// The loop of [`until_blocking`] and the fixtures' waits (which look `every` so often and
/// return an error rather than panic): on timeout, what the last look saw.
pub(crate) fn poll_blocking<L: Look>(
    limit: Duration,
    every: Duration,
    mut check: impl FnMut() -> L,
) -> Result<L::Done, String> {
    let started = Instant::now();
    loop {
        let last = match check().look() {
            Ok(done) => return Ok(done),
            Err(seen) => seen,
        };
        if started.elapsed() >= limit {
            return Err(last);
        }
        std::thread::sleep(every);
    }
}

/// A count's look: done when `seen` reached `want`; otherwise what it is, for the timeout's
/// message (`wait::until("two sweeps", limit, async || at_least(sweeps(), 2))`).
pub fn at_least<T: PartialOrd + Display>(seen: T, want: T) -> Result<T, String> {
    if seen >= want {
        Ok(seen)
    } else {
        Err(format!("{seen}, not yet {want}"))
    }
}
