"""`Consumer`: pops a topic in batches, runs a handler per task, finishes them in batches.

Delivery is at least once: a task is finished only after its handler returned; a handler that
raises leaves its task reserved until its time-to-run passes, and the topic hands it out again
(up to its `max_deliveries`, then to the dead letters). Use `task.deliveries` or the task id
to make the work idempotent.
"""

from __future__ import annotations

import logging
import random
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Callable

from . import errors
from .client import Keyfire, Task

__all__ = ["Consumer", "ConsumerStats"]

log = logging.getLogger("keyfire_client.consumer")


@dataclass
class ConsumerStats:
    """Counts since the consumer started."""

    popped: int = 0
    #: Finished with outcome `done`.
    finished: int = 0
    #: The handler raised: left to come back after its time-to-run.
    failed: int = 0
    #: Finished too late (`lost`: the reservation had expired) or deleted (`not_found`).
    lost: int = 0
    #: Calls that met an unreachable or unavailable node and were retried.
    retries: int = 0


class Consumer:
    """Consume `topic`: long-poll pops of up to `batch` tasks (waiting up to `wait` for the
    first), `handler(task)` for each, and batch finishes of the tasks whose handler returned.

    - `concurrency`: handlers running at once (threads); 1 runs them in order.
    - Finishes are sent after each batch, and sooner while a batch is long in hand
      (`flush_interval` seconds after the first unsent one), so a slow batch does not hold
      finished tasks until their reservations expire. For work longer than the time-to-run,
      use `task.touch()` or `with task.keep_alive():`.
    - A node that is away (no answer) or answers 503 (or 507, Redis full) is retried with
      exponential backoff and jitter between `backoff_base` and `backoff_max` seconds, and
      never sooner than the answer's `Retry-After`; other errors (a wrong token, a bad topic
      name) end `run()` with their typed exception.
    - `stop()` (or SIGINT/SIGTERM while `run()` handles signals) stops popping; the tasks in
      hand are worked through and finished, since they are reserved to this consumer, then
      `run()` returns. A pop in flight returns within `wait`.
    - `on_error(task, exc)` is called when a handler raises, `on_retry(exc, delay)` when a
      call is retried after the node was away or answered 503 (default: log them).
    """

    def __init__(
        self,
        client: Keyfire,
        topic: str,
        handler: Callable[[Task], Any],
        *,
        batch: int = 100,
        wait: str = "5s",
        concurrency: int = 1,
        flush_interval: float = 1.0,
        backoff_base: float = 0.1,
        backoff_max: float = 10.0,
        on_error: Callable[[Task, BaseException], Any] | None = None,
        on_retry: Callable[[errors.Unavailable, float], Any] | None = None,
    ) -> None:
        if not 1 <= batch <= 1000:
            raise ValueError("batch must be 1 to 1000")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.client = client
        self.topic = topic
        self.handler = handler
        self.batch = batch
        self.wait = wait
        self.concurrency = concurrency
        self.flush_interval = flush_interval
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.on_error = on_error or self._log_error
        self.on_retry = on_retry or self._log_retry
        self.stats = ConsumerStats()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pending: list[Task] = []
        self._pending_since = 0.0

    # --- control -------------------------------------------------------------------------

    def stop(self, timeout: float | None = None) -> None:
        """Ask the consumer to stop; when it runs in `start()`'s thread, wait for it (up to
        `timeout` seconds)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def start(self) -> threading.Thread:
        """Run the consumer in a daemon thread; `stop()` ends it."""
        self._thread = threading.Thread(
            target=self.run,
            kwargs={"handle_signals": False},
            name=f"keyfire-consumer-{self.topic}",
            daemon=True,
        )
        self._thread.start()
        return self._thread

    def run(self, *, handle_signals: bool = True) -> None:
        """Consume until `stop()`. With `handle_signals` (and on the main thread), the first
        SIGINT or SIGTERM stops gracefully and a second one acts as it would have."""
        restore = self._install_signals() if handle_signals else {}
        pool = ThreadPoolExecutor(self.concurrency) if self.concurrency > 1 else None
        try:
            while not self._stop.is_set():
                tasks = self._retrying(
                    lambda: self.client.pop(self.topic, max=self.batch, wait=self.wait)
                )
                if tasks is None:
                    break  # stopped while the node was away
                self.stats.popped += len(tasks)
                self._work(tasks, pool)
                self._flush()
        finally:
            try:
                self._flush(final=True)
            finally:
                if pool is not None:
                    pool.shutdown(wait=True)
                for sig, handler in restore.items():
                    signal.signal(sig, handler)

    # --- one batch -----------------------------------------------------------------------

    def _work(self, tasks: list[Task], pool: ThreadPoolExecutor | None) -> None:
        if pool is None:
            for task in tasks:
                self._done(task, self._run_one(task))
                self._flush_if_due()
            return
        futures = {pool.submit(self._run_one, t): t for t in tasks}
        for future in as_completed(futures):
            self._done(futures[future], future.result())
            self._flush_if_due()

    def _run_one(self, task: Task) -> bool:
        try:
            self.handler(task)
            return True
        except Exception as exc:  # a handler's failure is the task's, not the consumer's
            try:
                self.on_error(task, exc)
            except Exception:
                log.exception("keyfire consumer: on_error raised")
            return False

    def _done(self, task: Task, ok: bool) -> None:
        if not ok:
            self.stats.failed += 1
            return
        if not self._pending:
            self._pending_since = time.monotonic()
        self._pending.append(task)

    def _flush_if_due(self) -> None:
        if self._pending and time.monotonic() - self._pending_since >= self.flush_interval:
            self._flush()

    def _flush(self, final: bool = False) -> None:
        """Finish what the handlers completed. While the node is away this retries, until the
        consumer stops (then for a few more attempts)."""
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        outcomes = self._retrying(
            lambda: self.client.finish(self.topic, batch), attempts=8 if final else None
        )
        if outcomes is None:
            log.warning(
                "keyfire consumer: %d finished tasks not acknowledged (node away); "
                "they will be delivered again after their ttr",
                len(batch),
            )
            return
        for task in batch:
            outcome = outcomes.get(task.id)
            if outcome == "done":
                self.stats.finished += 1
            else:
                self.stats.lost += 1
                log.warning(
                    "keyfire consumer: task %s of %s finished as %s: its reservation expired "
                    "before the finish, so it may run again",
                    task.id,
                    self.topic,
                    outcome,
                )

    # --- retries -------------------------------------------------------------------------

    def _retrying(self, call: Callable[[], Any], attempts: int | None = None) -> Any:
        """`call()`, retried with backoff while the node is away or answers 503; None when the
        consumer stopped (or `attempts` ran out) before it got through."""
        attempt = 0
        while True:
            try:
                return call()
            except errors.Unavailable as exc:
                self.stats.retries += 1
                attempt += 1
                if attempts is not None and attempt >= attempts:
                    return None
                # At least what the node asked for (507 comes with a Retry-After).
                delay = max(self._backoff(attempt), exc.retry_after or 0.0)
                self.on_retry(exc, delay)
                if attempts is None:
                    if self._stop.wait(delay):
                        return None
                else:
                    time.sleep(delay)

    def _backoff(self, attempt: int) -> float:
        """Exponential, capped, with jitter: between half and all of the capped delay, so
        consumers that lost the node together do not come back in lockstep."""
        ceiling = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1))
        return random.uniform(ceiling / 2, ceiling)

    # --- plumbing ------------------------------------------------------------------------

    def _install_signals(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous: dict[int, Any] = {}

        def graceful(signum: int, frame: Any) -> None:
            self._stop.set()
            # A second signal does what it did before: the way out of a stuck handler.
            signal.signal(signum, previous[signum])

        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.getsignal(sig)
            signal.signal(sig, graceful)
        return previous

    @staticmethod
    def _log_retry(exc: errors.Unavailable, delay: float) -> None:
        log.warning("keyfire consumer: %s; retrying in %.2fs", exc, delay)

    @staticmethod
    def _log_error(task: Task, exc: BaseException) -> None:
        log.error(
            "keyfire consumer: handler failed on task %s of %s (delivery %d); it comes back "
            "after its ttr",
            task.id,
            task.topic,
            task.deliveries,
            exc_info=exc,
        )
