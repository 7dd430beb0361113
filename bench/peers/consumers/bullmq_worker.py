"""BullMQ's own Python package on the consumers pair's flow: delayed jobs due at one instant,
taken and completed by one Python Worker (concurrency 100, a no-op processor), as
bullmq/worker.mjs does in Node.

    bullmq_worker.py worker  CONFIG_JSON   # the Worker; stops once n jobs completed
    bullmq_worker.py produce CONFIG_JSON   # adds the n delayed jobs with Queue.addBulk

The producer is BullMQ's Python Queue too, so the jobs are written by the same version of
BullMQ's scripts that reads them. It first adds a probe of delayed jobs (due in a day, to
another queue) to time its adds, and picks the due instant so that every job is added before
it (2 s + 1.5 times the estimated add time, as keyfire's `bench queue` does).

Protocol with bench.mjs (stdout, one JSON line each): the worker prints {"type":"ready"},
then {"type":"done", ...} and waits for stdin to close; the producer prints
{"type":"added", ...} and exits.
"""

import asyncio
import importlib.metadata
import json
import platform
import sys
import time

from bullmq import Queue, Worker


def now_ms() -> float:
    return time.time() * 1000


async def worker(cfg: dict) -> None:
    n = cfg["n"]
    lat: list[float] = []  # processing start minus due, ms
    seen: set[str] = set()
    doubled = 0
    completed = 0
    last_completed = 0.0
    all_done = asyncio.Event()

    async def process(job, token):
        nonlocal doubled
        lat.append(now_ms() - job.data["due"])
        if job.id in seen:
            doubled += 1
        else:
            seen.add(job.id)

    def on_completed(job, result):
        nonlocal completed, last_completed
        completed += 1
        if completed >= n and not all_done.is_set():
            last_completed = now_ms()
            all_done.set()

    errors: list[str] = []
    w = Worker(
        cfg["queue"],
        process,
        {"connection": f"redis://127.0.0.1:{cfg['port']}", "concurrency": cfg["concurrency"]},
    )
    w.on("completed", on_completed)
    w.on("error", lambda err, *rest: errors.append(repr(err)))
    # As worker.mjs: give the blocking connection a moment to enter its blocking pop.
    await asyncio.sleep(0.5)
    versions = {"python": platform.python_version(), "bullmq": importlib.metadata.version("bullmq")}
    print(json.dumps({"type": "ready", "versions": versions}), flush=True)
    timed_out = False
    try:
        await asyncio.wait_for(all_done.wait(), cfg["timeout_s"])
    except asyncio.TimeoutError:
        timed_out = True
        last_completed = now_ms()
    done = {
        "type": "done",
        "finished": completed,
        "popped": len(seen),
        "doubled": doubled,
        "refused": 0,
        "last_finish_ms": last_completed,
        "timed_out": timed_out,
        "lat": lat,
        "errors": errors[:3],
    }
    print(json.dumps(done), flush=True)
    await w.close()


async def produce(cfg: dict) -> None:
    n, chunk = cfg["n"], cfg["chunk"]
    conn = {"connection": f"redis://127.0.0.1:{cfg['port']}"}
    probe = Queue(cfg["queue"] + "-probe", conn)
    size = max(100, min(n, 2000))
    t0 = time.monotonic()
    for i in range(0, size, chunk):
        jobs = [{"name": "probe", "data": {}, "opts": {"delay": 86_400_000}}]
        await probe.addBulk(jobs * min(chunk, size - i))
    rate = size / max(time.monotonic() - t0, 1e-6)
    await probe.close()

    q = Queue(cfg["queue"], conn)
    due = round(now_ms() + 2000 + 1.5 * n / max(rate, 100.0) * 1000)
    t0 = time.monotonic()
    for i in range(0, n, chunk):
        now = round(now_ms())
        opts = {"timestamp": now, "delay": max(0, due - now), "removeOnComplete": True, "removeOnFail": True}
        await q.addBulk([{"name": "noop", "data": {"due": due}, "opts": opts}] * min(chunk, n - i))
    enqueue_s = time.monotonic() - t0
    added = {
        "type": "added",
        "due_ms": due,
        "enqueue_s": round(enqueue_s, 3),
        "enqueue_per_s": round(n / max(enqueue_s, 1e-6)),
        "enqueue_finished_before_due": now_ms() < due,
    }
    await q.close()
    print(json.dumps(added), flush=True)


if __name__ == "__main__":
    mode, cfg = sys.argv[1], json.loads(sys.argv[2])
    if mode == "worker":
        asyncio.run(worker(cfg))
        sys.stdin.read()  # until the driver closes it
    elif mode == "produce":
        asyncio.run(produce(cfg))
    else:
        sys.exit(f"unknown mode {mode!r}: worker or produce")
