"""The consumer against a real node: 10,000 tasks once each, redelivery after a consumer dies
mid-batch, backoff while the node is away."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from conftest import PYTHON_SRC, Node, free_port

from keyfire_client import Keyfire, Unavailable, Unreachable

HERE = Path(__file__).resolve().parent


def test_consumer_finishes_10000_tasks_none_lost_or_doubled(node, kf, topic):
    n = 10_000
    seen: Counter[str] = Counter()
    lock = threading.Lock()
    all_seen = threading.Event()

    def handler(task):
        with lock:
            seen[task.id] += 1
            if len(seen) == n:
                all_seen.set()

    # Consume while the tasks are being added, as a consumer of a live topic does.
    consumer = kf.consumer(topic, handler, batch=500, wait="2s")
    consumer.start()
    with node.client(httpx_args={"limits": httpx.Limits(max_connections=16)}) as producer:
        with ThreadPoolExecutor(8) as pool:
            ids = list(pool.map(lambda i: producer.add(topic, {"i": i}), range(n)))
    assert len(set(ids)) == n

    assert all_seen.wait(120), f"only {len(seen)} of {n} tasks consumed"
    consumer.stop(timeout=30)
    assert not consumer._thread.is_alive()

    assert set(seen) == set(ids), "a task consumed that was not added, or one never consumed"
    doubled = {i: c for i, c in seen.items() if c != 1}
    assert not doubled, f"tasks handled more than once: {list(doubled.items())[:5]}"
    assert consumer.stats.popped == n
    assert consumer.stats.finished == n
    assert consumer.stats.lost == consumer.stats.failed == 0
    # Everything was acknowledged: nothing comes back, and the tasks are done.
    assert kf.pop(topic, max=1000, wait="0s") == []
    assert {kf.get_task(topic, ids[k]).state for k in (0, n // 2, n - 1)} == {"done"}


def test_tasks_of_a_killed_consumer_come_back_after_ttr(node, kf, topic):
    ids = [kf.add(topic, {"k": k}, ttr="3s") for k in range(20)]
    child = subprocess.Popen(
        [sys.executable, str(HERE / "consumer_child.py"), node.url, node.token, topic, "20", "5"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(PYTHON_SRC)},
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        line = child.stdout.readline().strip()
        assert line.startswith("blocked "), line
        held = line.removeprefix("blocked ").split(",")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    killed_at = time.monotonic()

    # The reservations hold until their ttr: nothing to pop at once...
    assert kf.pop(topic, max=100, wait="0s") == []
    finished = [i for i in ids if i not in held]
    assert len(finished) == 5 and len(held) == 15
    assert {kf.get_task(topic, i).state for i in held} == {"reserved"}
    assert {kf.get_task(topic, i).state for i in finished} == {"done"}

    # ...then every held task comes back, as its second delivery; the finished ones do not.
    back = []
    while len(back) < len(held) and time.monotonic() - killed_at < 30:
        back += kf.pop(topic, max=100, wait="5s")
    assert time.monotonic() - killed_at >= 2.0, "redelivered before the ttr ran out"
    assert sorted(t.id for t in back) == sorted(held)
    assert {t.deliveries for t in back} == {2}
    assert set(kf.finish(topic, back).values()) == {"done"}


def test_consumer_backs_off_while_the_node_is_away_and_stops():
    # Nothing listens on this port: every pop gets no answer.
    away = Keyfire(f"http://127.0.0.1:{free_port()}", timeout=2)
    consumer = away.consumer("orders", lambda task: None, backoff_base=0.01, backoff_max=0.2)
    consumer.start()
    deadline = time.monotonic() + 10
    while consumer.stats.retries < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert consumer.stats.retries >= 5
    started = time.monotonic()
    consumer.stop(timeout=10)
    assert time.monotonic() - started < 2, "stop waited out the backoff"
    assert not consumer._thread.is_alive()
    # Backoff grows and stays between half and all of its capped ceiling.
    delays = [consumer._backoff(a) for a in range(1, 12)]
    assert 0.005 <= delays[0] <= 0.01 and all(0.1 <= d <= 0.2 for d in delays[5:])
    try:
        away.pop("orders")
    except Unreachable as e:
        assert e.code == "unreachable" and e.status is None
    else:
        raise AssertionError("a pop with nobody listening answered")


def test_consumer_backs_off_while_redis_is_away_then_resumes(tmp_path, topic):
    # A node of this test's own, whose Redis goes away: the node answers 503 meanwhile.
    own = Node(tmp_path, persist=True)
    try:
        kf = own.client()
        handled: list[str] = []
        retried: list[BaseException] = []
        consumer = kf.consumer(
            topic,
            lambda task: handled.append(task.id),
            wait="1s",
            backoff_base=0.05,
            backoff_max=0.5,
            on_retry=lambda exc, delay: retried.append(exc),
        )
        consumer.start()
        own.stop_redis()
        deadline = time.monotonic() + 20
        while not retried and time.monotonic() < deadline:
            time.sleep(0.05)
        # Answered, not unreachable: 503, which the consumer retries after a backoff.
        assert retried and all(type(e) is Unavailable and e.status == 503 for e in retried), retried

        own.start_redis()
        deadline = time.monotonic() + 30
        while True:  # the node reconnects to Redis on its own
            try:
                task_id = kf.add(topic, {"after": "outage"})
                break
            except Unavailable:
                assert time.monotonic() < deadline, "the node did not come back"
                time.sleep(0.2)
        deadline = time.monotonic() + 30
        while task_id not in handled and time.monotonic() < deadline:
            time.sleep(0.05)
        assert handled == [task_id]
        consumer.stop(timeout=10)
        assert consumer.stats.finished == 1 and kf.get_task(topic, task_id).state == "done"
    finally:
        own.stop()


def test_keep_alive_holds_a_task_past_its_ttr(kf, topic):
    kf.add(topic, {"long": True}, ttr="1s")
    [task] = kf.pop(topic, wait="5s")
    with task.keep_alive():  # touches every third of the ttr
        time.sleep(2.5)
        assert kf.pop(topic, wait="0s") == [], "taken from its holder while touched"
    assert task.finish() == "done"

    # Without touching, the same wait loses it to the next consumer.
    kf.add(topic, {"long": True}, ttr="1s")
    [held] = kf.pop(topic, wait="5s")
    time.sleep(2.5)
    [again] = kf.pop(topic, wait="5s")
    assert again.id == held.id and again.deliveries == 2
    assert held.finish() == "lost"
    assert again.finish() == "done"
