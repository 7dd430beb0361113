"""Error answers arrive as typed exceptions carrying the API's code, message and field."""

from __future__ import annotations

import pytest

from keyfire_client import (
    Code,
    Conflict,
    Invalid,
    Keyfire,
    KeyfireError,
    NotFound,
    Unauthorized,
    Unavailable,
)


def test_bad_input_names_the_field_and_writes_nothing(kf, topic):
    with pytest.raises(Invalid) as e:
        kf.add(topic, {"order": 7}, delay="soon")
    assert (e.value.code, e.value.field, e.value.status) == (Code.INVALID, "delay", 422)
    assert "soon" in e.value.message
    assert kf.pop(topic, max=10) == []  # nothing was added

    with pytest.raises(Invalid) as e:
        kf.enqueue("http", {"url": "http://127.0.0.1:9/", "signing_secrets": ["not-a-secret"]})
    assert e.value.code == "invalid"
    assert e.value.field == "params.signing_secrets[0]"

    with pytest.raises(Invalid) as e:
        kf.put_job({"id": "bad-cron", "cron": "61 * * * *", "handler": "log"})
    assert e.value.field == "cron"
    with pytest.raises(NotFound):
        kf.get_job("bad-cron")

    # A query parameter is a 400 with its own code, still named.
    with pytest.raises(Invalid) as e:
        kf.pop(topic, wait="2m")
    assert (e.value.code, e.value.field, e.value.status) == ("bad_query", "wait", 400)

    with pytest.raises(Invalid) as e:
        kf.pop("not a topic!", wait="0s")
    assert e.value.field is not None and e.value.status == 422


def test_each_kind_of_failure_has_its_class(node, kf, topic):
    with pytest.raises(NotFound) as e:
        kf.get_task(topic, "no-such-task")
    assert e.value.code == "not_found" and e.value.status == 404

    task_id = kf.add(topic, None, ttr="30s")
    [task] = kf.pop(topic)
    assert task.id == task_id and task.payload is None
    assert kf.finish(topic, [task]) == {task_id: "done"}
    with pytest.raises(Conflict) as e:
        task.touch()  # the reservation ended with the finish
    assert e.value.code == "conflict" and e.value.status == 409

    with Keyfire(node.url, token="wrong") as stranger, pytest.raises(Unauthorized) as e:
        stranger.topics()
    assert e.value.code == "unauthorized" and e.value.status == 401

    # All of them are KeyfireErrors; Unavailable is what a retry may cure.
    assert issubclass(Unauthorized, KeyfireError) and not issubclass(Conflict, Unavailable)


def test_error_bodies_map_to_classes_whatever_route_answered():
    from keyfire_client.errors import RedisFull, from_response

    full = from_response(
        507,
        b'{"error": {"code": "redis_full", "message": "Redis is full", "field": null}}',
        {"retry-after": "30"},
    )
    assert type(full) is RedisFull and isinstance(full, Unavailable)
    assert (full.code, full.status, full.retry_after, full.field) == ("redis_full", 507, 30.0, None)
    # A proxy's page in front of the node: no keyfire body, the status decides.
    gateway = from_response(502, b"<html>Bad Gateway</html>")
    assert type(gateway) is Unavailable and gateway.code == "unavailable"
    assert "Bad Gateway" in gateway.message and gateway.retry_after is None
    # A code this client does not know yet keeps its code, under the status's class.
    later = from_response(409, b'{"error": {"code": "moved", "message": "m", "field": "id"}}')
    assert type(later) is Conflict and (later.code, later.field) == ("moved", "id")
