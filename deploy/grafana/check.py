#!/usr/bin/env python3
"""Every PromQL expression of the Grafana dashboard (and of the Prometheus alert rules) names
only metrics keyfire exports. Run by deploy/prometheus/check.sh.

    python3 deploy/grafana/check.py                          # boots a node of this checkout
    python3 deploy/grafana/check.py --keyfire target/debug/keyfire
    python3 deploy/grafana/check.py --url http://10.0.0.5:8080 --token T   # a running node

The exported names are read the honest way: from a node's /metrics. By default the check
starts a redis-server and `keyfire serve` of its own (free ports, temp dir), gives them work
that makes the metrics appear (firings that succeed, fail, retry, land in the dead letters,
are skipped, held by a flow limit, call back; queue tasks added, popped, finished; a node
killed mid-run and another taking over), and scrapes. A metric that only a rarer event brings
(NEEDS_EVENTS) may be missing from the scrape; it must then be declared in the library's
names module (crates/keyfire/src/metrics.rs). Any other name an expression uses fails the
check, naming the file, the panel or alert, and the expression. Exit code 1 on a failure.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
DASHBOARD = ROOT / "deploy" / "grafana" / "keyfire.json"
RULES = ROOT / "deploy" / "prometheus" / "keyfire-alerts.yml"
NAMES = ROOT / "crates" / "keyfire" / "src" / "metrics.rs"
EXPORTER = ROOT / "src" / "metrics.rs"

# Counters that only events a short run cannot bring about in a few seconds appear on: their
# first increment creates the series. They must be declared in the names module.
NEEDS_EVENTS = {
    "keyfire_claim_conflicts_total",  # two nodes claiming the same firing at once
    "keyfire_subscriber_reconnects_total",  # the expired-event subscriber losing Redis
}

PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
    "and", "or", "unless", "inf", "nan", "atan2",
}


def metric_names(expr):
    """The metric names a PromQL expression reads (not functions, labels or keywords)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)  # ranges and subqueries
    e = re.sub(
        r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e
    )
    names = set()
    for m in re.finditer(r"(?<![\w$.:])([a-zA-Z_:][a-zA-Z0-9_:]*)", e):
        word = m.group(1)
        rest = e[m.end():].lstrip()
        if rest.startswith("("):
            continue  # a function or aggregation
        if word.lower() in PROMQL_WORDS:
            continue
        names.add(word)
    return names


def dashboard_exprs(path):
    """(where, expression) of every target and query variable of a dashboard."""
    d = json.loads(path.read_text())
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((f"panel {p.get('title')!r} target {t.get('refId')}", t["expr"]))
            walk(p.get("panels", []))

    walk(d.get("panels", []))
    for v in d.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        # label_values(metric, label) and query_result(expr) hold PromQL.
        m = re.match(r"\s*label_values\((.*),\s*\w+\)\s*$", q or "")
        if m:
            out.append((f"variable {v['name']!r}", m.group(1)))
        m = re.match(r"\s*query_result\((.*)\)\s*$", q or "")
        if m:
            out.append((f"variable {v['name']!r}", m.group(1)))
    return out


def rule_exprs(path):
    out = []
    for g in yaml.safe_load(path.read_text())["groups"]:
        for r in g["rules"]:
            what = f"alert {r['alert']}" if "alert" in r else f"record {r['record']}"
            out.append((what, r["expr"]))
    return out


def declared_names():
    """The names module's metrics; histograms with their _bucket, _sum and _count series."""
    consts = dict(re.findall(r'pub const (\w+): &str = "(keyfire_\w+)"', NAMES.read_text()))
    histograms = set(re.findall(r"describe_histogram!\(\s*name::(\w+)", EXPORTER.read_text()))
    names = set(consts.values())
    for c in histograms:
        names |= {consts[c] + s for s in ("_bucket", "_sum", "_count")}
    return names


def scraped_names(text):
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            names.add(line.split()[2])
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{\s]", line, maxsplit=1)[0])
    return names


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(method, url, body=None, token=None, timeout=10):
    headers = {"content-type": "application/json"} if body is not None else {}
    if token:
        headers["authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(base, token=None):
    status, text = call("GET", f"{base}/metrics", token=token)
    if status != 200:
        sys.exit(f"GET {base}/metrics answered {status}: {text[:300]}")
    return text


CONFIG = """
[redis]
url = "redis://127.0.0.1:{rport}/0"
prefix = "grafana-check"
# No replica: every claim waits 10 ms for one and is counted as unreplicated.
wait_replicas = 1
wait_timeout = "10ms"

[node]
id = "{node_id}"
heartbeat_interval = "200ms"
node_ttl = "1s"
sweep_interval = "300ms"
claim_grace = "500ms"
timer_horizon = "1500ms"
drain_timeout = "1s"
lease = "1s"

[api]
listen = "127.0.0.1:{aport}"

[metrics]
min_interval = "100ms"

[handlers.command]
enabled = true
allowed_programs = ["true", "false", "sleep"]

[[flow_limits]]
key = "grafana-check"
rate = 1
in_flight = 1
"""


def wait_ready(base, node, log):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and node.poll() is None:
        try:
            if call("GET", f"{base}/readyz", timeout=2)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit(f"keyfire serve did not get ready:\n{log.read_text()[-3000:]}")


def must(status_body, what):
    status, body = status_body
    if status >= 300:
        sys.exit(f"{what}: {status} {body[:300]}")
    return json.loads(body) if body else None


def work(base):
    """Work that makes the metrics appear."""
    put = lambda path, body: must(call("PUT", base + path, body), f"PUT {path}")
    post = lambda path, body=None: must(call("POST", base + path, body), f"POST {path}")
    command = lambda program, *args: {"program": program, "args": list(args)}
    put("/v1/jobs/ok", {"every": "1s", "handler": "command", "params": command("true")})
    put(
        "/v1/jobs/fails",
        {
            "after": "0s",
            "handler": "command",
            "params": command("false"),
            "retry": {"max_attempts": 2, "backoff": "fixed", "interval": "200ms"},
        },
    )
    # Runs longer than its period: the next firings find it running and are skipped.
    put(
        "/v1/jobs/overlaps",
        {"every": "1s", "handler": "command", "params": command("sleep", "3"), "overlap": "forbid"},
    )
    for i in range(3):
        put(
            f"/v1/jobs/limited{i}",
            {"after": "0s", "handler": "command", "params": command("true"),
             "limit_key": "grafana-check"},
        )
    # Fails, and its failure callback cannot be delivered either.
    put(
        "/v1/jobs/calls-back",
        {
            "after": "0s",
            "handler": "http",
            "params": {"url": "http://127.0.0.1:1/", "timeout": "1s",
                       "callbacks": {"failure": "http://127.0.0.1:1/callback"}},
            "retry": {"max_attempts": 1},
        },
    )
    for _ in range(2):
        post("/v1/tasks", {"handler": "command", "params": command("true"), "after": "1h",
                           "dedup": {"key": "once", "window": "10m"}})
    for i in range(3):
        post("/v1/topics/grafana-check/tasks", {"payload": {"n": i}})
    popped = post("/v1/topics/grafana-check/pop")
    post(f"/v1/topics/grafana-check/tasks/{popped['id']}/finish", {"token": popped["token"]})


def boot(keyfire):
    redis_server = shutil.which("redis-server")
    if not redis_server:
        sys.exit("redis-server is not on PATH")
    with tempfile.TemporaryDirectory(prefix="keyfire-grafana-check-") as tmp:
        tmp = Path(tmp)
        rport = free_port()
        redis = subprocess.Popen(
            [redis_server, str(ROOT / "redis.conf"), "--port", str(rport), "--bind",
             "127.0.0.1", "--dir", str(tmp), "--save", "", "--appendonly", "no"],
            stdout=open(tmp / "redis.log", "w"), stderr=subprocess.STDOUT,
        )
        nodes = []
        env = {k: v for k, v in os.environ.items() if not k.startswith("KEYFIRE")}

        def start(node_id):
            aport = free_port()
            config = tmp / f"{node_id}.toml"
            config.write_text(CONFIG.format(rport=rport, aport=aport, node_id=node_id))
            log = tmp / f"{node_id}.log"
            node = subprocess.Popen([keyfire, "serve", "--config", str(config)], env=env,
                                    stdout=open(log, "w"), stderr=subprocess.STDOUT)
            nodes.append(node)
            base = f"http://127.0.0.1:{aport}"
            wait_ready(base, node, log)
            return node, base

        try:
            deadline = time.monotonic() + 30
            while subprocess.run(["redis-cli", "-p", str(rport), "ping"],
                                 capture_output=True).stdout.strip() != b"PONG":
                if time.monotonic() > deadline or redis.poll() is not None:
                    sys.exit(f"redis-server did not start: {(tmp / 'redis.log').read_text()}")
                time.sleep(0.1)
            # A node dies (SIGKILL) in the middle of a run, with a firing still to come: the
            # next node takes the run over once its lease expires, and its sweeper claims the
            # firing nobody was there to claim.
            first, base = start("grafana-check-a")
            must(call("PUT", f"{base}/v1/jobs/long",
                      {"after": "0s", "handler": "command",
                       "params": {"program": "sleep", "args": ["30"]}}), "PUT /v1/jobs/long")
            must(call("PUT", f"{base}/v1/jobs/orphan",
                      {"after": "1s", "handler": "command",
                       "params": {"program": "true"}}), "PUT /v1/jobs/orphan")
            time.sleep(0.5)
            first.send_signal(signal.SIGKILL)
            first.wait()
            time.sleep(2.5)
            _, base = start("grafana-check-b")
            work(base)
            time.sleep(6)
            return scrape(base)
        finally:
            for p in nodes + [redis]:
                if p.poll() is None:
                    p.kill()
                    p.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keyfire", help="the keyfire binary to boot (default: target/debug/keyfire)")
    parser.add_argument("--url", help="scrape this running node instead of booting one")
    parser.add_argument("--token", help="the node's api.token, with --url")
    args = parser.parse_args()

    if args.url:
        text = scrape(args.url.rstrip("/"), args.token)
        source = args.url
    else:
        keyfire = args.keyfire or str(
            Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "debug" / "keyfire"
        )
        if not Path(keyfire).exists():
            sys.exit(f"{keyfire} does not exist: cargo build --bin keyfire")
        text = boot(keyfire)
        source = "a node of this checkout"
    scraped = scraped_names(text)
    declared = declared_names()
    failures = []
    for name in sorted(NEEDS_EVENTS - declared):
        failures.append(f"check.py: NEEDS_EVENTS names {name}, which the names module does not declare")
    used = {}
    for path, exprs in ((DASHBOARD, dashboard_exprs(DASHBOARD)), (RULES, rule_exprs(RULES))):
        if not exprs:
            failures.append(f"{path.relative_to(ROOT)}: no expression found")
        for where, expr in exprs:
            for name in sorted(metric_names(expr)):
                used.setdefault(name, []).append(f"{path.relative_to(ROOT)}: {where}")
                if name in scraped or (name in NEEDS_EVENTS and name in declared):
                    continue
                why = ("declared, but not exported by the scrape"
                       if name in declared else "not a metric keyfire exports")
                failures.append(
                    f"{path.relative_to(ROOT)}: {where}: {name} is {why}\n    {expr.strip()}"
                )
    exported = {n for n in scraped if n.startswith("keyfire_")}
    print(f"scraped {len(exported)} keyfire series names from {source}")
    unshown = sorted(
        n for n in declared - set(used)
        if not n.endswith(("_sum", "_count")) and n + "_bucket" not in used
    )
    if unshown:
        print("declared and used by no panel or alert: " + ", ".join(unshown))
    for name in sorted(NEEDS_EVENTS):
        state = "seen in the scrape" if name in scraped else "not in the scrape; declared"
        print(f"needs events: {name} ({state})")
    if failures:
        print("\n".join(f"FAIL {f}" for f in failures), file=sys.stderr)
        sys.exit(1)
    print(f"ok  {len(used)} metric names in {DASHBOARD.relative_to(ROOT)} and "
          f"{RULES.relative_to(ROOT)}, each exported")


if __name__ == "__main__":
    main()
