"""Job create, read, update (with If-Match versions) and delete; enqueue with dedup; cancel; a
topic's partitions."""

from __future__ import annotations

import uuid

import pytest

from keyfire_client import Code, Conflict, Invalid, NotFound


def test_job_crud_round_trip(kf):
    job_id = f"report-{uuid.uuid4().hex[:8]}"
    spec = {"id": job_id, "cron": "0 9 * * MON-FRI", "tz": "Europe/Berlin", "handler": "log",
            "params": {"to": "ops@example.com"}}  # fmt: skip

    created = kf.create_job(spec)
    assert (created.id, created.status, created.version) == (job_id, "active", 1)
    # The spec as stored: one of the schedule shapes of the document's `oneOf`, as JSON.
    stored = created.spec.to_dict()
    assert {k: stored[k] for k in spec} == spec
    assert len(created.next_firings) == 5
    with pytest.raises(Conflict):
        kf.create_job(spec)  # only creates

    read = kf.get_job(job_id)
    assert read.version == 1 and read.spec.to_dict() == created.spec.to_dict()

    # Same spec: nothing changes, not even the version.
    assert kf.put_job(spec).version == 1

    updated = kf.update_job({**spec, "cron": "30 8 * * MON-FRI"}, version=read.version)
    assert updated.version == 2 and updated.spec.to_dict()["cron"] == "30 8 * * MON-FRI"
    # A writer holding the old version is refused, and changes nothing.
    with pytest.raises(Conflict) as e:
        kf.update_job({**spec, "cron": "0 7 * * *"}, version=read.version)
    assert e.value.status == 409
    assert kf.get_job(job_id).spec.to_dict()["cron"] == "30 8 * * MON-FRI"

    kf.delete_job(job_id)
    with pytest.raises(NotFound):
        kf.get_job(job_id)
    with pytest.raises(NotFound):
        kf.delete_job(job_id)


def test_enqueue_with_dedup_creates_one_task(kf):
    key = f"order-{uuid.uuid4().hex[:8]}:reminder"
    first = kf.enqueue("log", {"order": 7}, after="1h", dedup_key=key, dedup_window="10m")
    again = kf.enqueue("log", {"order": 7}, after="1h", dedup_key=key, dedup_window="10m")
    assert (first.created, first.duplicate) == (True, False)
    assert (again.created, again.duplicate) == (False, True)
    assert again.id == first.id
    kf.delete_job(first.id)


def test_cancel_a_pending_task_then_nothing_is_left(kf):
    task = kf.enqueue("log", after="1h")
    done = kf.cancel_task(task.id)
    assert done.job_id == task.id and done.stopping == []
    assert len(done.cancelled) == 1 and done.cancelled[0].startswith(f"{task.id}:")
    assert kf.get_job(task.id).status == "finished"
    with pytest.raises(Conflict) as e:
        kf.cancel_job(task.id)
    assert (e.value.code, e.value.status) == (Code.NOTHING_TO_CANCEL, 409)
    with pytest.raises(NotFound):
        kf.cancel_job(f"nope-{uuid.uuid4().hex[:8]}")
    kf.delete_job(task.id)


def test_topic_partitions_are_declared_once_then_read_back(kf, topic):
    assert kf.get_topic(topic).partitions == 1
    assert kf.set_topic(topic, partitions=4).partitions == 4
    assert kf.set_topic(topic, partitions=4).partitions == 4  # the same count: nothing changes
    with pytest.raises(Conflict) as e:  # a count is set once
        kf.set_topic(topic, partitions=2)
    assert e.value.status == 409
    with pytest.raises(Invalid) as e:
        kf.set_topic(topic + "-other", partitions=65)
    assert e.value.field == "partitions"
    assert kf.get_topic(topic).partitions == 4
    task_id = kf.add(topic, {"n": 1})
    assert [t.id for t in kf.pop(topic, max=1)] == [task_id]


def test_jobs_pause_and_resume_in_bulk(kf):
    prefix = f"bulk-{uuid.uuid4().hex[:8]}-"
    for n in range(3):
        kf.put_job({"id": f"{prefix}{n}", "every": "1h", "handler": "log"})
    kf.put_job({"id": f"{prefix}x", "every": "1h", "handler": "noop"})

    paused = kf.pause_jobs(id_prefix=prefix)
    assert (paused.matched, paused.changed) == (4, 4)
    assert kf.get_job(f"{prefix}0").status == "paused"
    again = kf.pause_jobs(id_prefix=prefix)
    assert (again.matched, again.changed) == (4, 0)

    resumed = kf.resume_jobs(id_prefix=prefix)
    assert resumed.changed == 4
    assert kf.get_job(f"{prefix}x").status == "active"

    with pytest.raises(Invalid) as e:
        kf.pause_jobs(handler="log", id_prefix=prefix)
    assert e.value.field == "id_prefix"
    with pytest.raises(Invalid) as e:
        kf.resume_jobs()
    assert e.value.field == "handler"
    for n in range(3):
        kf.delete_job(f"{prefix}{n}")
    kf.delete_job(f"{prefix}x")


def test_why_names_the_state_and_runs_list_the_ledger(kf):
    job_id = f"yearly-{uuid.uuid4().hex[:8]}"
    kf.create_job({"id": job_id, "cron": "0 0 1 1 *", "handler": "log"})

    why = kf.why(job_id)
    assert why.state == "waiting" and why.next_in_ms > 0
    assert why.causes[0].code == "waiting" and job_id in why.summary

    kf.pause_job(job_id)
    why = kf.why(job_id)
    assert why.state == "paused" and why.paused_since is not None

    # The default answer has no timeline; `skipped` adds it (nothing was skipped yet).
    assert not kf.runs(job_id).timeline
    assert kf.runs(job_id, skipped=True).timeline == []
    with pytest.raises(NotFound):
        kf.why(f"nope-{uuid.uuid4().hex[:8]}")
    kf.delete_job(job_id)


def test_backfill_runs_a_past_range_once(kf):
    job_id = f"yearly-{uuid.uuid4().hex[:8]}"
    kf.create_job({"id": job_id, "cron": "0 0 1 1 *", "handler": "noop"})

    done = kf.backfill(job_id, "2020-06-01T00:00:00Z", "2023-06-01T00:00:00Z", rate=100)
    assert (done.instants, done.scheduled, done.skipped) == (3, 3, 0)
    again = kf.backfill(job_id, "2020-06-01T00:00:00Z", "2023-06-01T00:00:00Z")
    assert (again.scheduled, again.skipped) == (0, 3)
    with pytest.raises(Invalid) as e:
        kf.backfill(job_id, "2020-06-01T00:00:00Z", "2023-06-01T00:00:00Z", rate=1000)
    assert e.value.field == "rate"
    kf.delete_job(job_id)
