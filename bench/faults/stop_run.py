#!/usr/bin/env python3
"""A fault run with every node setting at its default (node_ttl 5 s, heartbeat 1 s).

Three `keyfire serve` nodes on a Redis of their own (AOF on), one-shot `http` tasks that hold
their receiver 2 s, and faults while they run: 3-second SIGSTOPs of a node (less than
node_ttl), SIGKILLs (the node comes back 5 s later), a Redis restart from its AOF, and
`CLIENT KILL TYPE pubsub`. Then it reads every task's run history and says:

- re-runs after stops: firings whose attempt was on a node while it was stopped and that ran
  again as a later attempt (a node paused for less than node_ttl must keep its runs: 0);
- takeovers after kills: for each run in flight on a killed node, how long after the kill its
  next attempt was claimed (within about node_ttl + heartbeat + sweep: under 12 s);
- firings that did not end ok, and deliveries the receiver saw per firing.

Usage: bench/faults/stop_run.py [--keyfire target/release/keyfire] [--seconds 100]
Needs redis-server (>= 7) on PATH. Writes nothing outside a temporary directory.
"""

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def iso_ms(text):
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def now_ms():
    return int(time.time() * 1000)


DELIVERIES = []
LOCK = threading.Lock()


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        with LOCK:
            DELIVERIES.append(
                (now_ms(), self.headers.get("webhook-id"), int(self.headers.get("keyfire-attempt", "0")))
            )
        time.sleep(2)
        self.send_response(200)
        self.end_headers()

    do_GET = do_POST

    def log_message(self, *args):
        pass


def http(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, None
    except Exception:
        return None, None


def redis_cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True).stdout


class Redis:
    def __init__(self, d):
        self.port, self.dir, self.proc = free_port(), d, None
        self.start()

    def start(self):
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
             "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
             "--notify-keyspace-events", "Ex", "--maxmemory-policy", "noeviction"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            if redis_cli(self.port, "PING").strip() == "PONG":
                return
            time.sleep(0.05)
        sys.exit("redis-server did not start")

    def restart(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait()
        self.start()


class Node:
    def __init__(self, binary, d, redis_port, name):
        self.name, self.port = name, free_port()
        self.config = os.path.join(d, f"{name}.toml")
        with open(self.config, "w") as f:
            f.write(f'[redis]\nurl = "redis://127.0.0.1:{redis_port}/0"\n\n[node]\nid = "{name}"\n\n'
                    f'[api]\nlisten = "127.0.0.1:{self.port}"\n\n[log]\nlevel = "warn"\n')
        self.binary, self.log, self.proc = binary, os.path.join(d, f"{name}.log"), None
        self.start()

    def start(self):
        self.proc = subprocess.Popen([self.binary, "serve", "--config", self.config],
                                     stdout=open(self.log, "a"), stderr=subprocess.STDOUT)
        for _ in range(300):
            if http("GET", f"http://127.0.0.1:{self.port}/readyz")[0] == 200:
                return
            time.sleep(0.1)
        sys.exit(f"{self.name} did not start; see {self.log}")

    def signal(self, sig):
        self.proc.send_signal(sig)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keyfire", default="target/release/keyfire")
    ap.add_argument("--seconds", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    d = tempfile.mkdtemp(prefix="keyfire-stop-run-")
    recv = ThreadingHTTPServer(("127.0.0.1", free_port()), Receiver)
    threading.Thread(target=recv.serve_forever, daemon=True).start()
    target = f"http://127.0.0.1:{recv.server_address[1]}/hook"
    redis = Redis(d)
    nodes = [Node(args.keyfire, d, redis.port, f"n{i}") for i in (1, 2, 3)]
    stops, kills, events = [], [], []
    tasks = []
    stop_flag = threading.Event()

    def workload():
        i = 0
        while not stop_flag.is_set():
            node = rng.choice(nodes)
            tid = f"t{i}"
            code, _ = http("POST", f"http://127.0.0.1:{node.port}/v1/tasks",
                           {"id": tid, "handler": "http", "params": {"url": target, "timeout": "10s"},
                            "retry": {"max_attempts": 5}})
            if code in (200, 201):
                tasks.append(tid)
                i += 1
            time.sleep(0.1)

    w = threading.Thread(target=workload)
    w.start()
    start = time.time()
    # (second, what, node index): a stop or a kill every 10 s or so, Redis and pub/sub between.
    plan = []
    t = 8
    kinds = ["stop", "kill", "stop", "redis", "stop", "pubsub", "stop", "kill", "stop", "stop"]
    for k in kinds:
        if t > args.seconds - 10:
            break
        plan.append((t, k, rng.randrange(3)))
        t += 9
    for at, kind, n in plan:
        time.sleep(max(0, start + at - time.time()))
        node = nodes[n]
        if kind == "stop":
            t0 = now_ms()
            node.signal(signal.SIGSTOP)
            time.sleep(3)
            node.signal(signal.SIGCONT)
            stops.append((node.name, t0, now_ms()))
        elif kind == "kill":
            t0 = now_ms()
            node.signal(signal.SIGKILL)
            node.proc.wait()
            kills.append((node.name, t0))
            time.sleep(5)
            node.start()
        elif kind == "redis":
            redis.restart()
        elif kind == "pubsub":
            redis_cli(redis.port, "CLIENT", "KILL", "TYPE", "pubsub")
        events.append((round(time.time() - start, 1), kind, node.name))
        print(f"[{time.time() - start:6.1f}s] {kind} {node.name if kind in ('stop', 'kill') else ''}", flush=True)
    time.sleep(max(0, start + args.seconds - time.time()))
    stop_flag.set()
    w.join()
    time.sleep(25)  # drain: every task due, runs 2 s, takeovers within ~7 s

    api = f"http://127.0.0.1:{nodes[0].port}"
    reruns_after_stop, takeover_s, not_ok, details = [], [], [], []
    for tid in tasks:
        code, body = http("GET", f"{api}/v1/jobs/{tid}/runs")
        runs = (body or {}).get("runs", []) if code == 200 else []
        if not any(r.get("outcome") == "ok" for r in runs):
            not_ok.append(tid)
        by_attempt = sorted(runs, key=lambda r: r["attempt"])
        last = max((x["attempt"] for x in by_attempt), default=0)
        for r in by_attempt:
            if r["attempt"] == last or not r.get("claimed_at"):
                continue
            claimed = iso_ms(r["claimed_at"])
            nxt = [x for x in by_attempt if x["attempt"] == r["attempt"] + 1 and x.get("claimed_at")]
            for name, t0, t1 in stops:
                # In flight when the stop began (runs take 2 s, a call at most 10 s), on that
                # node, not cut off by a kill of it, and run again.
                killed = any(k == name and claimed <= tk <= t1 for k, tk in kills)
                if r["node"] == name and t0 - 10_000 <= claimed <= t1 and not killed:
                    reruns_after_stop.append(tid)
                    details.append({"task": tid, "stop": [name, t0, t1], "runs": by_attempt})
            for name, t0 in kills:
                if r["node"] == name and claimed <= t0 and r.get("outcome") == "lost" and nxt:
                    takeover_s.append(round((iso_ms(nxt[0]["claimed_at"]) - t0) / 1000, 1))
    per_firing = {}
    for _, fid, attempt in DELIVERIES:
        per_firing[fid] = per_firing.get(fid, 0) + 1
    report = {
        "binary": args.keyfire,
        "seconds": args.seconds,
        "tasks": len(tasks),
        "faults": events,
        "stops": len(stops),
        "kills": len(kills),
        "reruns_after_stops": len(set(reruns_after_stop)),
        "takeovers_after_kills": len(takeover_s),
        "takeover_seconds_max": max(takeover_s) if takeover_s else None,
        "firings_not_ok": len(not_ok),
        "deliveries": len(DELIVERIES),
        "firings_delivered_more_than_once": sum(1 for n in per_firing.values() if n > 1),
        "dir": d,
    }
    with open(os.path.join(d, "reruns.json"), "w") as f:
        json.dump(details, f, indent=1)
    print(json.dumps(report, indent=2))
    for n in nodes:
        n.proc.kill()
    redis.proc.kill()


if __name__ == "__main__":
    main()
