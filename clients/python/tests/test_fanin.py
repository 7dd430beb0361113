"""Fan-in: a batch of tasks with a completion callback (`enqueue_batch(on_complete=...)`)
calls a local receiver once, signed, with the counts `get_batch` reads; a task enqueued with
`after_task` waits for another; bad input names its field."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from keyfire_client import Invalid, NotFound, WebhookVerifier


def test_a_batch_calls_back_once_its_tasks_ended_with_the_counts(kf, node, receiver):
    batch = kf.enqueue_batch(
        [{"handler": "log", "params": {"n": 1}}, {"handler": "log", "after": "1h"}],
        on_complete=f"{receiver.url}/batch-done",
    )
    assert batch.batch_id
    assert len(batch.ids) == 2 and len(set(batch.ids)) == 2
    # Each task is stored as a member of the batch.
    assert [t.spec.to_dict()["batch"] for t in batch.tasks] == [batch.batch_id] * 2

    status = kf.get_batch(batch.batch_id)
    assert (status.id, status.total) == (batch.batch_id, 2)
    assert status.created_ms > 0
    # The first task runs at once; the second waits an hour, and the batch with it.
    deadline = time.monotonic() + 30
    while (status := kf.get_batch(batch.batch_id)).succeeded < 1:
        assert time.monotonic() < deadline, f"the first task did not succeed: {status}"
        time.sleep(0.05)
    assert (status.succeeded, status.died, status.cancelled, status.pending) == (1, 0, 0, 1)
    assert not status.completed_ms
    assert receiver.requests.empty(), "a callback before the batch's last task ended"

    kf.cancel_task(batch.ids[1])
    path, body, headers = receiver.next()
    assert path == "/batch-done"
    delivery = WebhookVerifier(node.signing_secret).verify(body, headers)
    assert delivery.id == f"batch:{batch.batch_id}:completed"
    sent = json.loads(body)
    assert sent["type"] == "keyfire.batch.completed"
    assert sent["data"] == {
        "batch_id": batch.batch_id,
        "total": 2,
        "succeeded": 1,
        "died": 0,
        "cancelled": 1,
    }

    status = kf.get_batch(batch.batch_id)
    assert (status.succeeded, status.died, status.cancelled, status.pending) == (1, 0, 1, 0)
    assert status.completed_ms >= status.created_ms
    assert receiver.requests.empty(), "more than one callback"


def test_a_batch_takes_on_complete_as_a_dict_and_without_it_has_no_id(kf):
    # An unreachable receiver: the answer and the counts do not depend on it.
    batch = kf.enqueue_batch(
        [{"handler": "log", "after": "1h"}] * 3,
        on_complete={"url": "http://127.0.0.1:9/never", "signing_secrets": []},
    )
    assert batch.batch_id and len(batch.ids) == 3
    status = kf.get_batch(batch.batch_id)
    assert (status.total, status.pending, status.succeeded) == (3, 3, 0)
    for task_id in batch.ids:
        kf.delete_job(task_id)
    status = kf.get_batch(batch.batch_id)
    assert (status.cancelled, status.pending) == (3, 0) and status.completed_ms

    plain = kf.enqueue_batch([{"handler": "log", "after": "1h"}])
    assert plain.batch_id is None and len(plain.tasks) == 1
    kf.delete_job(plain.ids[0])


def test_a_batch_refuses_bad_input_naming_the_field(kf):
    with pytest.raises(Invalid) as e:
        kf.enqueue_batch(
            [{"handler": "log"}, {"handler": "log", "id": f"mine-{uuid.uuid4().hex[:8]}"}],
            on_complete="http://127.0.0.1:9/",
        )
    assert (e.value.status, e.value.field) == (422, "tasks[1].id")
    with pytest.raises(Invalid) as e:
        kf.enqueue_batch([{"handler": "log"}], on_complete="ftp://127.0.0.1/")
    assert e.value.field == "on_complete.url"


def test_an_unknown_batch_is_not_found(kf):
    with pytest.raises(NotFound) as e:
        kf.get_batch(f"no-such-{uuid.uuid4().hex[:8]}")
    assert (e.value.status, e.value.field) == (404, "id")


def test_after_task_waits_for_its_task(kf):
    first = kf.enqueue("log", after="1h")
    second = kf.enqueue("log", after="5s", after_task=first.id)
    assert second.created
    assert second.job.status == "waiting"
    assert second.job.spec.to_dict()["after_task"] == first.id
    assert kf.get_job(second.id).status == "waiting"
    assert kf.why(second.id).state == "after_task"

    # Its task cancelled, it will never run: it is finished, a dead letter naming why.
    kf.cancel_task(first.id)
    job = kf.get_job(second.id)
    assert (job.status, job.dead, job.runs) == ("finished", 1, 0)
    [run] = kf.runs(second.id).runs
    assert (run.outcome, run.fate) == ("skipped", "dead")
    assert run.error == f"after_task {first.id} ended cancelled"
    kf.delete_job(first.id)
    kf.delete_job(second.id)


def test_after_task_runs_once_its_task_succeeded(kf):
    first = kf.enqueue("log", {"step": 1})
    second = kf.enqueue("log", {"step": 2}, after_task=first.id)
    # Waiting or due already (when the first had ended), it runs after the first succeeded.
    deadline = time.monotonic() + 30
    while (job := kf.get_job(second.id)).status != "finished":
        assert time.monotonic() < deadline, f"the second task did not run: {job.status}"
        time.sleep(0.05)
    [before] = kf.runs(first.id).runs
    [after] = kf.runs(second.id).runs
    assert (before.outcome, after.outcome) == ("ok", "ok")
    assert after.started_at >= before.finished_at
    kf.delete_job(first.id)
    kf.delete_job(second.id)


def test_after_task_naming_no_task_is_refused(kf):
    missing = f"nobody-{uuid.uuid4().hex[:8]}"
    with pytest.raises(Invalid) as e:
        kf.enqueue("log", after_task=missing)
    assert (e.value.status, e.value.code, e.value.field) == (422, "invalid", "after_task")
    assert missing in e.value.message


def test_a_topic_batch_reads_its_counts_as_its_tasks_are_finished(kf):
    topic = f"fanin-{uuid.uuid4().hex[:8]}"
    added = kf.add_batch(
        topic,
        [{"payload": {"n": 1}}, {"payload": {"n": 2}}],
        on_complete="http://127.0.0.1:9/topic-batch",
    )
    assert added["batch_id"] and len(added["tasks"]) == 2
    assert kf.get_batch(added["batch_id"]).pending == 2
    tasks = kf.pop(topic, max=2, wait="2s")
    assert sorted(t.id for t in tasks) == sorted(t["id"] for t in added["tasks"])
    kf.finish(topic, tasks)
    status = kf.get_batch(added["batch_id"])
    assert (status.total, status.succeeded, status.pending) == (2, 2, 0)
    assert status.completed_ms
    # Without on_complete: the tasks are added, no batch.
    plain = kf.add_batch(topic, [{"payload": 3}])
    assert "batch_id" not in plain and len(plain["tasks"]) == 1
