"""`Keyfire`: the hand-written layer over the generated client.

Every call goes through the code openapi-python-client generated from the node's OpenAPI
document (`keyfire_client._generated`); this layer turns dicts into its models, error answers
into typed exceptions (`keyfire_client.errors`), and adds what the document cannot say: the
delay queue's reserved tasks with `touch`, and `If-Match` versions as integers.

For routes this layer does not wrap (limits, jobs' dead letters, nodes), use the generated
functions with `Keyfire.api`:

    from keyfire_client._generated.api.limits import list_limits
    limits = list_limits.sync(client=kf.api)
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable

import httpx

from . import errors
from ._generated import AuthenticatedClient, Client
from ._generated.api.jobs import (
    backfill_job,
    cancel_job,
    delete_job,
    get_job,
    job_runs,
    job_why,
    pause_job,
    pause_jobs,
    post_job,
    resume_jobs,
)
from ._generated.api.tasks import cancel_task, get_batch, post_task, post_tasks_batch
from ._generated.api.topics import (
    add_task,
    add_topic_batch,
    delete_topic_task,
    finish_many,
    get_topic,
    get_topic_task,
    list_topic_dead,
    list_topics,
    pause_topic,
    pop,
    purge_topic_dead,
    put_topic,
    replay_topic_dead,
    resume_topic,
    topic_task_why,
    touch_topic_task,
)
from ._generated.models import (
    BackfillView,
    BatchStatus,
    BulkChanged,
    CancelView,
    JobView,
    RunList,
    TaskView,
    TaskWhyView,
    TopicDeadLetter,
    TopicList,
    TopicPaused,
    TopicSettings,
    TopicView,
    WhyView,
)
from ._generated.types import UNSET

if TYPE_CHECKING:
    from .consumer import Consumer

__all__ = ["Enqueued", "EnqueuedBatch", "Keyfire", "Task"]

# A pop's `wait` may be up to 60 s: its read timeout must outlast it.
_MAX_WAIT = 60.0


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text)


class _Json(dict):
    """A request body as plain JSON, where a generated operation expects a model.

    The generated operations only call `body.to_dict()`. Taking dicts keeps this layer apart
    from how the generator names the models of a `oneOf` (a job spec is one of four schedule
    shapes), and sends exactly the fields given.
    """

    def to_dict(self) -> dict[str, Any]:
        return dict(self)


def _body(**fields: Any) -> _Json:
    """The fields that are not None, as a body."""
    return _Json({k: v for k, v in fields.items() if v is not None})


def _ids(ids: Iterable[str] | None) -> Any:
    """Task ids as the `ids` query parameter takes them (comma-separated); UNSET for all."""
    return UNSET if ids is None else ",".join(ids)


def _rfc3339(value: datetime | str | None) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else value


@dataclass
class Task:
    """A task popped from a topic, reserved to this consumer until `deadline`.

    `payload` is the JSON value it was added with; `token` is the reservation that `finish`
    and `touch` must show; `deliveries` counts this delivery (2 or more: an earlier consumer
    did not finish it within its time-to-run).
    """

    id: str
    topic: str
    payload: Any
    deliveries: int
    token: str
    ttr: str
    due_at: datetime
    ready_at: datetime
    reserved_at: datetime
    deadline: datetime
    _kf: Keyfire = field(repr=False, compare=False)

    @classmethod
    def _from_json(cls, kf: Keyfire, d: Mapping[str, Any]) -> Task:
        return cls(
            id=d["id"],
            topic=d["topic"],
            payload=d.get("payload"),
            deliveries=d["deliveries"],
            token=d["token"],
            ttr=d["ttr"],
            due_at=_instant(d["due_at"]),
            ready_at=_instant(d["ready_at"]),
            reserved_at=_instant(d["reserved_at"]),
            deadline=_instant(d["deadline"]),
            _kf=kf,
        )

    def touch(self, ttr: str | None = None) -> datetime:
        """Extend the reservation to now plus `ttr` (default: the task's own); returns the new
        deadline. Raises `Conflict` when the reservation was lost (the time-to-run passed and
        the task went back to the topic)."""
        self.deadline = self._kf.touch(self.topic, self.id, self.token, ttr=ttr)
        return self.deadline

    def finish(self) -> str:
        """Acknowledge this task alone: `done`, `lost` or `not_found` (see `Keyfire.finish`)."""
        return self._kf.finish(self.topic, [self])[self.id]

    @contextmanager
    def keep_alive(self, every: float | None = None) -> Iterator[Task]:
        """Touch the reservation in the background while the block runs, every `every`
        seconds (default a third of the time-to-run), so long work keeps the task:

            with task.keep_alive():
                render_the_big_report(task.payload)
        """
        if every is None:
            every = max(0.05, (self.deadline - self.reserved_at).total_seconds() / 3)
        done = threading.Event()

        def beat() -> None:
            while not done.wait(every):
                try:
                    self.touch()
                except errors.Unavailable:
                    continue  # the next beat may get through before the deadline
                except errors.KeyfireError:
                    return  # lost or deleted: touching again cannot bring it back

        thread = threading.Thread(target=beat, name=f"keyfire-touch-{self.id}", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            done.set()
            thread.join()


@dataclass(frozen=True)
class Enqueued:
    """The answer to `Keyfire.enqueue`: the task as stored, and whether this call created it
    (`created`) or found it (`duplicate`: its dedup key was enqueued within the window; or
    neither: its id exists)."""

    job: JobView
    created: bool
    duplicate: bool

    @property
    def id(self) -> str:
        return self.job.id


@dataclass(frozen=True)
class EnqueuedBatch:
    """The answer to `Keyfire.enqueue_batch`: the tasks as stored, in the order given, and
    with `on_complete` the batch's id (`Keyfire.get_batch`); None without it."""

    tasks: list[JobView]
    batch_id: str | None

    @property
    def ids(self) -> list[str]:
        return [t.id for t in self.tasks]


class Keyfire:
    """A client of one keyfire node's REST API.

        kf = Keyfire("http://127.0.0.1:8080", token=os.environ.get("KEYFIRE_TOKEN"))
        task_id = kf.add("orders", {"order": 7}, delay="30s")
        for task in kf.pop("orders", max=100, wait="10s"):
            ...
            kf.finish("orders", [task])

    Thread-safe: one instance may serve many threads (it holds one pool of connections).
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        *,
        token: str | None = None,
        timeout: float = 30.0,
        httpx_args: dict[str, Any] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._timeout = timeout
        args: dict[str, Any] = {
            "base_url": self.base_url,
            "timeout": httpx.Timeout(timeout),
            "httpx_args": httpx_args or {},
        }
        # Every route is documented as needing the bearer token, so the generated functions
        # ask for an AuthenticatedClient; a node without `api.token` needs no header.
        self.api: AuthenticatedClient = (
            AuthenticatedClient(token=token, **args) if token else Client(**args)  # type: ignore[assignment]
        )

    def close(self) -> None:
        """Close the connections."""
        self.api.get_httpx_client().close()

    def __enter__(self) -> Keyfire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, op: Any, *args: Any, **kwargs: Any) -> Any:
        """Run a generated operation; its parsed 2xx answer, or a typed error."""
        try:
            resp = op.sync_detailed(*args, client=self.api, **kwargs)
        except httpx.TransportError as e:
            raise errors.unreachable(self.base_url, e) from e
        if 200 <= resp.status_code < 300:
            return resp
        raise errors.from_response(int(resp.status_code), resp.content, resp.headers)

    # --- the delay queue -----------------------------------------------------------------

    def add(
        self,
        topic: str,
        payload: Any = None,
        *,
        delay: str | None = None,
        at: datetime | str | None = None,
        ttr: str | None = None,
        max_deliveries: int | None = None,
        id: str | None = None,
        priority: int | None = None,
        dedup: dict[str, Any] | None = None,
    ) -> str:
        """Add a task to `topic`, ready after `delay` (`"30s"`), at `at`, or at once; returns
        its id. With `id`, the add is idempotent: an id that exists is left as it is, so a
        retried add adds nothing. `priority` 0 (default) to 9: pops take the highest ready
        first. `dedup` (`{"key": …, "window": "1h", "on_duplicate": "extend"}`, no `id`):
        a duplicate returns the id of the task its key names (see `add_with_outcome`)."""
        return self.add_with_outcome(
            topic,
            payload,
            delay=delay,
            at=at,
            ttr=ttr,
            max_deliveries=max_deliveries,
            id=id,
            priority=priority,
            dedup=dedup,
        )["id"]

    def add_with_outcome(
        self,
        topic: str,
        payload: Any = None,
        *,
        delay: str | None = None,
        at: datetime | str | None = None,
        ttr: str | None = None,
        max_deliveries: int | None = None,
        id: str | None = None,
        priority: int | None = None,
        dedup: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """`add`, returning the whole answer: `{"id", "topic"}`, and for a duplicate
        (`dedup`) `"deduplicated"`: what it did to the task its key names (`kept`,
        `replaced`, `extended`, `replaced_extended`)."""
        body = _body(
            delay=delay,
            at=_rfc3339(at),
            ttr=ttr,
            max_deliveries=max_deliveries,
            id=id,
            priority=priority,
            dedup=dedup,
        )
        body["payload"] = payload
        return self._call(add_task, topic, body=body).parsed.to_dict()

    def add_batch(
        self,
        topic: str,
        tasks: Iterable[Mapping[str, Any]],
        *,
        on_complete: str | Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Add 1 to 1000 tasks to `topic`, each the JSON of an add (`{"payload": ...,
        "delay": "5m"}`); returns `{"tasks": [{"id", "topic"}, ...]}`. With `on_complete` (a
        URL, or `{"url": ..., "signing_secrets": [...]}`), the tasks are a batch: one signed
        POST with the counts once every one was finished, dead-lettered or deleted, and
        `batch_id` reads its progress (`get_batch`); keyfire then picks the tasks' ids, on one
        partition."""
        body = _Json(tasks=[dict(t) for t in tasks])
        if on_complete is not None:
            body["on_complete"] = (
                {"url": on_complete} if isinstance(on_complete, str) else dict(on_complete)
            )
        return self._call(add_topic_batch, topic, body=body).parsed.to_dict()

    def pop(self, topic: str, *, max: int = 1, wait: str | float = "0s") -> list[Task]:
        """Reserve up to `max` (1 to 1000) ready tasks of `topic`, waiting up to `wait` (a
        duration such as `"10s"`, or seconds; at most 60 s) for the first; an empty list when
        none came."""
        if not isinstance(wait, str):
            wait = f"{int(float(wait) * 1000)}ms"
        # The generated request, its reply read here: the consumer's hot path builds `Task`s
        # (which can touch and finish themselves) straight from the JSON, once per task.
        # The reply is the document's PopAnswer: `{"tasks": [...]}` with `max`, else one task.
        kwargs = pop._get_kwargs(topic, wait=wait, max_=max)
        kwargs["timeout"] = httpx.Timeout(self._timeout, read=_MAX_WAIT + self._timeout)
        try:
            resp = self.api.get_httpx_client().request(**kwargs)
        except httpx.TransportError as e:
            raise errors.unreachable(self.base_url, e) from e
        if resp.status_code == 204:
            return []
        if resp.status_code != 200:
            raise errors.from_response(resp.status_code, resp.content, resp.headers)
        body = resp.json()
        items = body["tasks"] if "tasks" in body else [body]
        return [Task._from_json(self, d) for d in items]

    def finish(self, topic: str, tasks: Iterable[Task | tuple[str, str]]) -> dict[str, str]:
        """Acknowledge reserved tasks (`Task`s, or `(id, token)` pairs) in one call; returns
        each id's outcome: `done` (also when it was done already under this token), `lost`
        (the reservation expired and the task went back to the topic; it will run again) or
        `not_found` (deleted)."""
        items = [
            {"id": t.id, "token": t.token} if isinstance(t, Task) else {"id": t[0], "token": t[1]}
            for t in tasks
        ]
        if not items:
            return {}
        resp = self._call(finish_many, topic, body=_Json(tasks=items))
        return {r.id: r.outcome for r in resp.parsed.results}

    def touch(self, topic: str, id: str, token: str, *, ttr: str | None = None) -> datetime:
        """Extend a reservation to now plus `ttr` (default: the task's own); the new deadline.
        `Conflict` when the reservation was lost."""
        resp = self._call(touch_topic_task, topic, id, body=_body(token=token, ttr=ttr))
        return resp.parsed.deadline

    def get_task(self, topic: str, id: str) -> TaskView:
        """A topic task's state (`delayed`, `ready`, `reserved`, `done`, `dead`, `deleted`)
        and deliveries."""
        return self._call(get_topic_task, topic, id).parsed

    def task_why(self, topic: str, id: str) -> TaskWhyView:
        """Why a topic task is where it is: `state` (the main reason's code: `delayed`,
        `overdue`, `ready`, `paused`, `reserved`, `dead`, `done`, `deleted`...), every reason in
        `causes`, a `summary` sentence, and its instants and deliveries; `NotFound` when the
        task is not in the topic."""
        return self._call(topic_task_why, topic, id).parsed

    def delete_task(self, topic: str, id: str) -> None:
        """Delete a topic task in any state, for good."""
        self._call(delete_topic_task, topic, id)

    def topics(self) -> TopicList:
        """Every topic with its tasks by state."""
        return self._call(list_topics).parsed

    def set_topic(self, topic: str, *, partitions: int) -> TopicView:
        """Declare how many partitions (1 to 64) `topic`'s tasks spread over, each on a shard of
        its own, so a hot topic spreads over a cluster's masters. Set once, before the topic's
        first task: the same count again changes nothing, another is refused (`Conflict`)."""
        return self._call(put_topic, topic, body=TopicSettings(partitions=partitions)).parsed

    def get_topic(self, topic: str) -> TopicView:
        """`topic`'s settings: its partitions (1 unless declared with more)."""
        return self._call(get_topic, topic).parsed

    def dead_letters(self, topic: str, *, limit: int = 100) -> list[TopicDeadLetter]:
        """`topic`'s dead letters (tasks delivered `max_deliveries` times without a finish),
        newest first, at most `limit` (1 to 1000): each with its `deliveries`, `died_at` and
        `error` (why it died). `NotFound` for a topic that never had a task."""
        return self._call(list_topic_dead, topic, limit=limit).parsed.dead

    def replay_dead(self, topic: str, ids: Iterable[str] | None = None) -> int:
        """Make `topic`'s dead letters ready again, their deliveries reset to 0: those of
        `ids` (1 to 1000), or all of them. How many were made ready."""
        return self._call(replay_topic_dead, topic, ids=_ids(ids)).parsed.count

    def purge_dead(self, topic: str, ids: Iterable[str] | None = None) -> int:
        """Delete `topic`'s dead letters for good: those of `ids`, or all. How many."""
        return self._call(purge_topic_dead, topic, ids=_ids(ids)).parsed.count

    def pause(self, topic: str) -> TopicPaused:
        """Pause `topic`: its pops reserve nothing until `resume` (adds go on, reservations
        handed out before can still be finished)."""
        return self._call(pause_topic, topic).parsed

    def resume(self, topic: str) -> TopicPaused:
        """Resume a paused `topic`: its ready tasks are delivered again, in order."""
        return self._call(resume_topic, topic).parsed

    def consumer(self, topic: str, handler: Callable[[Task], Any], **options: Any) -> Consumer:
        """A `Consumer` of `topic` calling `handler` for each task (see `Consumer`)."""
        from .consumer import Consumer

        return Consumer(self, topic, handler, **options)

    # --- one-shot tasks ------------------------------------------------------------------

    def enqueue(
        self,
        handler: str,
        params: Mapping[str, Any] | None = None,
        *,
        after: str | None = None,
        at: datetime | str | None = None,
        id: str | None = None,
        dedup_key: str | None = None,
        dedup_content: bool = False,
        dedup_window: str | None = None,
        retry: Mapping[str, Any] | None = None,
        timeout: str | None = None,
        after_task: str | None = None,
    ) -> Enqueued:
        """Enqueue a one-shot task for `handler` (such as `http`), run `after` a delay, at
        `at`, or at once.

        With `dedup_key` (or `dedup_content=True`: a key from handler and params) and
        `dedup_window` (`"10m"`, at most `"24h"`), an enqueue of the same key within the
        window creates nothing and answers the task created then (`duplicate` is True).
        Without dedup, an `id` that exists is left as it is.

        With `after_task` (the id of another one-shot task), it runs only once that task
        succeeded, `after` then being its delay after that success; until then its status is
        `waiting`. If that task ends otherwise (dead, cancelled, deleted), this one goes to its
        dead letters. Not with `at` or dedup; `Invalid` (field `after_task`) for a task that
        does not exist.
        """
        spec = _body(
            handler=handler,
            params=dict(params) if params is not None else None,
            after=after,
            at=_rfc3339(at),
            id=id,
            after_task=after_task,
            retry=dict(retry) if retry is not None else None,
            timeout=timeout,
        )
        if dedup_key is not None or dedup_content or dedup_window is not None:
            dedup: dict[str, Any] = {}
            if dedup_key is not None:
                dedup["key"] = dedup_key
            if dedup_content:
                dedup["content"] = True
            if dedup_window is not None:
                dedup["window"] = dedup_window
            spec["dedup"] = dedup
        resp = self._call(post_task, body=spec)
        job: JobView = resp.parsed
        return Enqueued(
            job=job,
            created=resp.status_code == 201,
            duplicate=bool(job.duplicate) if job.duplicate is not UNSET else False,
        )

    def enqueue_batch(
        self,
        tasks: Iterable[Mapping[str, Any]],
        *,
        on_complete: str | Mapping[str, Any] | None = None,
    ) -> EnqueuedBatch:
        """Enqueue one-shot tasks together (1 to 1000), each the JSON of a task spec
        (`{"handler": "http", "params": {...}, "after": "5m"}`, as `enqueue` takes them).
        Every task is checked before any is written: `Invalid` names `tasks[i].<field>`.

        With `on_complete` (a URL, or `{"url": ..., "signing_secrets": [...]}`), the tasks are
        a batch: once every one has ended (succeeded, died, or was cancelled or deleted), one
        signed POST goes to the URL with the counts (`type` `keyfire.batch.completed`,
        `webhook-id` `batch:<batch id>:completed`), and `batch_id` of the answer reads its
        progress (`get_batch`). keyfire picks the tasks' ids then: a task names no `id`,
        `dedup` or `after_task`.
        """
        body = _Json(tasks=[dict(t) for t in tasks])
        if on_complete is not None:
            body["on_complete"] = (
                {"url": on_complete} if isinstance(on_complete, str) else dict(on_complete)
            )
        resp = self._call(post_tasks_batch, body=body)
        batch_id = resp.parsed.batch_id
        return EnqueuedBatch(
            tasks=list(resp.parsed.tasks),
            batch_id=batch_id if isinstance(batch_id, str) else None,
        )

    def get_batch(self, id: str) -> BatchStatus:
        """A batch's progress (`enqueue_batch` with `on_complete`): `total`, `succeeded`,
        `died`, `cancelled`, `pending`, `created_ms`, and `completed_ms` once its last task
        ended (its callback was queued then). `NotFound` for an unknown id, or 7 days after
        the batch completed."""
        return self._call(get_batch, id).parsed

    # --- jobs ----------------------------------------------------------------------------

    def put_job(
        self,
        spec: Mapping[str, Any],
        *,
        if_version: int | None = None,
    ) -> JobView:
        """Create or replace the job `spec["id"]` (idempotent: the spec it already has changes
        nothing). `spec` is the job as JSON: `id`, `handler`, one of `cron` (with `tz`),
        `every`, `at`, `after`, and the optional fields of docs/jobs.md. With `if_version`,
        only if the job is still at that version (0: only if it does not exist), else
        `Conflict`."""
        if_match = UNSET if if_version is None else f'"{if_version}"'
        return self._call(post_job, body=_Json(spec), if_match=if_match).parsed

    def create_job(self, spec: Mapping[str, Any]) -> JobView:
        """Create a job; `Conflict` when its id exists."""
        return self.put_job(spec, if_version=0)

    def update_job(self, spec: Mapping[str, Any], version: int) -> JobView:
        """Replace a job only if it is still at `version` (the `version` of the `JobView` it
        was read as); `Conflict` when it moved since."""
        return self.put_job(spec, if_version=version)

    def get_job(self, id: str) -> JobView:
        """A job with its state, version and next five firings; `NotFound` when absent."""
        return self._call(get_job, id).parsed

    def delete_job(self, id: str) -> None:
        """Delete a job, its pending firing and its history; `NotFound` when absent."""
        self._call(delete_job, id)

    def pause_jobs(
        self, *, handler: str | None = None, id_prefix: str | None = None
    ) -> BulkChanged:
        """Pause every active job of `handler`, or whose id starts with `id_prefix` (exactly
        one); `.matched` counts the jobs picked, `.changed` those this call paused. `Invalid`
        names the field of a bad selection."""
        return self._call(pause_jobs, body=_body(handler=handler, id_prefix=id_prefix)).parsed

    def resume_jobs(
        self, *, handler: str | None = None, id_prefix: str | None = None
    ) -> BulkChanged:
        """Resume every paused job of `handler`, or whose id starts with `id_prefix` (exactly
        one), each as `resume` would; `.matched` and `.changed` as for `pause_jobs`."""
        return self._call(resume_jobs, body=_body(handler=handler, id_prefix=id_prefix)).parsed

    def pause_job(self, id: str) -> JobView:
        """Pause a job: it fires nothing until resumed; `NotFound` when absent."""
        return self._call(pause_job, id).parsed

    def backfill(
        self,
        id: str,
        from_: datetime | str,
        to: datetime | str,
        *,
        rate: float | None = None,
    ) -> BackfillView:
        """Run each instant of a job's schedule from `from_` to `to` (both included; not in the
        future, at most 10,000 instants) once, each as a firing of its own, at `rate` runs per
        second (default 10, at most 100). Instants already run are skipped: `.scheduled` and
        `.skipped` count them. `Invalid` names a bad field; `NotFound` when absent."""
        body = _body(to=_rfc3339(to), rate=rate)
        body["from"] = _rfc3339(from_)
        return self._call(backfill_job, id, body=body).parsed

    def runs(self, id: str, *, limit: int = 20, skipped: bool = False) -> RunList:
        """A job's most recent runs, newest first. With `skipped`, also the instants that were
        due and did not run, with their reasons, merged with the runs in `timeline` (each
        entry's `kind` is `run` or `skipped`)."""
        include = "skipped" if skipped else UNSET
        return self._call(job_runs, id, limit=limit, include=include).parsed

    def why(self, id: str) -> WhyView:
        """Why a job or one-shot task runs or does not, now: `state` (the main reason's code),
        every reason in `causes`, a `summary` sentence, its next firing, and its last runs
        and skips; `NotFound` when absent."""
        return self._call(job_why, id).parsed

    def cancel_job(self, id: str) -> CancelView:
        """Cancel what a job has in progress, on whichever node runs it: `stopping` lists the
        running firings told to stop (each recorded `cancelled` in the job's runs once its node
        stopped it), `cancelled` those cancelled before they ran (queued retries, a one-shot
        job's pending instant). Never retried. `NotFound` when absent, `Conflict` (code
        `nothing_to_cancel`) when nothing was in progress."""
        return self._call(cancel_job, id).parsed

    def cancel_task(self, id: str) -> CancelView:
        """Cancel a one-shot task: before it runs (it is then finished, its run recorded
        `cancelled`), or while it runs. As `cancel_job`."""
        return self._call(cancel_task, id).parsed
