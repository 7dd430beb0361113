"""A topic's dead letters (listed, replayed, purged) and its pause, through the thin methods,
against a real node."""

from __future__ import annotations

import time

import pytest

from keyfire_client import Invalid, NotFound


def kill(kf, topic: str, n: int) -> list[str]:
    """`n` tasks delivered once, popped and left to lapse: dead letters. Their ids."""
    ids = [
        kf.add(topic, {"n": i}, id=f"{topic}-{i}", ttr="200ms", max_deliveries=1) for i in range(n)
    ]
    assert len(kf.pop(topic, max=n, wait="1s")) == n
    deadline = time.monotonic() + 20
    while len(kf.dead_letters(topic)) < n:
        assert time.monotonic() < deadline, "the reservations never became dead letters"
        kf.pop(topic, wait="0s")  # a pop takes back expired reservations first
        time.sleep(0.1)
    return ids


def test_dead_letters_are_listed_replayed_and_purged(kf, topic):
    ids = kill(kf, topic, 3)
    dead = kf.dead_letters(topic, limit=10)
    assert sorted(d.id for d in dead) == ids
    for d in dead:
        assert (d.deliveries, d.max_deliveries) == (1, 1)
        assert "delivery 1 of 1" in d.error
        assert d.died_at is not None
    assert len(kf.dead_letters(topic, limit=2)) == 2

    assert kf.replay_dead(topic, [ids[0], "nosuch"]) == 1
    again = kf.pop(topic, wait="1s")
    assert [(t.id, t.deliveries) for t in again] == [(ids[0], 1)]
    kf.finish(topic, again)

    assert kf.purge_dead(topic, [ids[1]]) == 1
    assert kf.get_task(topic, ids[1]).state == "deleted"
    assert kf.replay_dead(topic) == 1
    assert [t.id for t in kf.pop(topic, max=10, wait="1s")] == [ids[2]]
    assert kf.dead_letters(topic) == []
    assert kf.purge_dead(topic) == 0


def test_bad_dead_letter_input_is_refused_naming_the_field(kf, topic):
    kill(kf, topic, 1)
    with pytest.raises(Invalid) as e:
        kf.dead_letters(topic, limit=0)
    assert e.value.field == "limit"
    with pytest.raises(Invalid) as e:
        kf.replay_dead(topic, ["ok", "not an id"])
    assert e.value.field == "ids[1]"
    with pytest.raises(NotFound) as e:
        kf.purge_dead(topic + "-none")
    assert e.value.field == "topic"
    assert len(kf.dead_letters(topic)) == 1


def test_a_paused_topic_pops_nothing_until_resumed(kf, topic):
    first = kf.add(topic, {"n": 1})
    held = kf.pop(topic)
    assert [t.id for t in held] == [first]
    p = kf.pause(topic)
    assert (p.paused, p.changed) == (True, True)
    assert kf.get_topic(topic).paused is True
    second = kf.add(topic, {"n": 2})  # adds go on
    assert kf.pop(topic, max=10, wait="300ms") == []
    assert kf.finish(topic, held) == {first: "done"}  # handed out before the pause
    r = kf.resume(topic)
    assert (r.paused, r.changed) == (False, True)
    assert [t.id for t in kf.pop(topic, max=10, wait="1s")] == [second]
    with pytest.raises(NotFound):
        kf.pause(topic + "-none")


def test_task_why_names_where_a_task_is(kf, topic):
    first = kf.add(topic, {"n": 1})
    second = kf.add(topic, {"n": 2})
    why = kf.task_why(topic, second)
    assert why.state == "ready" and why.ready_ahead == 1
    assert why.causes[0].code == "ready" and f"topic {topic}" in why.summary
    kf.pause(topic)
    why = kf.task_why(topic, first)
    assert why.state == "paused" and why.paused is True
    assert [c.code for c in why.causes] == ["paused", "ready"]
    kf.resume(topic)
    [held] = kf.pop(topic)
    why = kf.task_why(topic, held.id)
    assert why.state == "reserved" and why.deliveries == 1 and why.deadline is not None
    with pytest.raises(NotFound):
        kf.task_why(topic, "no-such-task")
    with pytest.raises(Invalid) as e:
        kf.task_why(topic, "a:b")
    assert e.value.field == "id"
