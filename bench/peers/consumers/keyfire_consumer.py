"""A Python consumer of keyfire's delay queue over REST, as a service would write one with
httpx (one AsyncClient: its pool keeps connections alive between calls).

`consumers` asyncio loops, spread round-robin over the servers' URLs, each: long-poll
`POST /v1/topics/{topic}/pop?max=&wait=` for a batch, then one `POST /v1/topics/{topic}/finish`
for the whole batch. It stops once `n` distinct tasks are finished (or at `timeout_s`), then
prints its result for bench.mjs.

Protocol with bench.mjs (stdout, one JSON line each): {"type":"ready"} once it polls, then
{"type":"done", ...}; then it waits for stdin to close, so the driver can read its CPU.
"""

import asyncio
import json
import platform
import sys
import time

import httpx


def now_ms() -> float:
    return time.time() * 1000


async def main(cfg: dict) -> None:
    urls, topic, n = cfg["urls"], cfg["topic"], cfg["n"]
    consumers, max_, wait = cfg["consumers"], cfg["max"], cfg["wait"]
    deadline = time.monotonic() + cfg["timeout_s"]

    times: dict[str, int] = {}  # task id -> times popped
    redelivered: set[str] = set()  # ids popped with deliveries > 1
    finished: set[str] = set()  # ids whose finish answered `done`
    refused = 0
    last_finish = 0.0
    lat: list[float] = []  # received by this consumer minus due (payload.due), ms
    errors: list[str] = []

    # The pop's long poll must not hit the client's read timeout.
    limits = httpx.Limits(max_connections=consumers, max_keepalive_connections=consumers)
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(30.0)) as http:

        async def call(url: str, body=None):
            r = await http.post(url, json=body) if body is not None else await http.post(url)
            if r.is_error:
                raise RuntimeError(f"{url}: {r.status_code} {r.text[:200]}")
            return r.json()

        async def consume(base: str) -> None:
            nonlocal refused, last_finish
            pop = f"{base}/v1/topics/{topic}/pop?max={max_}&wait={wait}"
            fin = f"{base}/v1/topics/{topic}/finish"
            while len(finished) < n and time.monotonic() < deadline:
                tasks = (await call(pop))["tasks"]
                if not tasks:
                    continue
                got = now_ms()
                for t in tasks:
                    lat.append(got - t["payload"]["due"])
                    times[t["id"]] = times.get(t["id"], 0) + 1
                    if t["deliveries"] > 1:
                        redelivered.add(t["id"])
                body = {"tasks": [{"id": t["id"], "token": t["token"]} for t in tasks]}
                results = (await call(fin, body))["results"]
                last_finish = now_ms()
                for o in results:
                    if o["outcome"] == "done":
                        finished.add(o["id"])
                    else:
                        refused += 1

        async def guarded(base: str) -> None:
            try:
                await consume(base)
            except Exception as e:  # reported to the driver, which fails the run
                errors.append(repr(e))

        # One request per server before "ready": the connections exist and the servers answer.
        for u in urls:
            (await http.get(f"{u}/healthz")).raise_for_status()
        versions = {"python": platform.python_version(), "httpx": httpx.__version__}
        print(json.dumps({"type": "ready", "versions": versions}), flush=True)
        await asyncio.gather(*(guarded(urls[i % len(urls)]) for i in range(consumers)))

    doubled = set(redelivered) | {i for i, c in times.items() if c > 1}
    done = {
        "type": "done",
        "finished": len(finished),
        "popped": len(times),
        "doubled": len(doubled),
        "refused": refused,
        "last_finish_ms": last_finish,
        "lat": lat,
        "errors": errors[:3],
    }
    print(json.dumps(done), flush=True)


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
    sys.stdin.read()  # until the driver closes it
