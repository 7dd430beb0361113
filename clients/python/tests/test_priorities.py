"""A topic task's priority and a dedup key's `on_duplicate` (debounce), through the thin
`add` and `add_with_outcome`, against a real node."""

from __future__ import annotations

import pytest

from keyfire_client import Invalid


def test_pops_take_the_highest_priority_first(kf, topic):
    for i, p in enumerate([0, 9, 3]):
        kf.add(topic, i, priority=p)
    assert [t.payload for t in kf.pop(topic, max=10, wait="1s")] == [1, 2, 0]
    with pytest.raises(Invalid) as e:
        kf.add(topic, 1, priority=10)
    assert e.value.field == "priority"


def test_a_duplicate_replaces_the_pending_task(kf, topic):
    dedup = {"key": "digest:7", "window": "1h", "on_duplicate": "replace"}
    first = kf.add_with_outcome(topic, {"v": 1}, delay="1h", dedup=dedup)
    assert "deduplicated" not in first
    again = kf.add_with_outcome(topic, {"v": 2}, delay="1h", dedup=dedup)
    assert (again["id"], again["deduplicated"]) == (first["id"], "replaced")
    assert kf.get_task(topic, first["id"]).payload == {"v": 2}
    with pytest.raises(Invalid) as e:
        kf.add(topic, 1, dedup={**dedup, "on_duplicate": "merge"})
    assert e.value.field == "dedup.on_duplicate"
