#!/usr/bin/env python3
"""What a schema cannot see in the deployment files: that they agree with each other and with
keyfire. Run by deploy/check.sh after kubernetes-validate.

    python3 deploy/check.py                      # the files agree
    python3 deploy/check.py --keyfire BINARY     # and a node boots on the ConfigMap's settings

Every failure names the file and the field; the exit code is 1 when any check failed.
"""

import argparse
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
K8S = ROOT / "deploy" / "kubernetes"
# Files under deploy/kubernetes that no kustomization lists, on purpose.
UNLISTED = {K8S / "secret.example.yaml"}
# After node.drain_timeout a node cancels the runs left and waits this long for them to stop
# (crates/keyfire/src/engine/mod.rs, NodeHandle::shutdown).
CANCEL_WAIT_S = 5

failures = []


def fail(where, message):
    failures.append(f"{where}: {message}")


def rel(path):
    return path.relative_to(ROOT)


# humantime's units, as keyfire's settings take them ("30s", "1m 30s", "250ms", "7days").
UNITS = {
    **dict.fromkeys(["nsec", "ns"], 1e-9),
    **dict.fromkeys(["usec", "us"], 1e-6),
    **dict.fromkeys(["msec", "ms"], 1e-3),
    **dict.fromkeys(["seconds", "second", "sec", "s"], 1),
    **dict.fromkeys(["minutes", "minute", "min", "m"], 60),
    **dict.fromkeys(["hours", "hour", "hr", "h"], 3600),
    **dict.fromkeys(["days", "day", "d"], 86400),
    **dict.fromkeys(["weeks", "week", "w"], 7 * 86400),
}


def seconds(text):
    """A humantime duration in seconds, or None when it does not parse."""
    parts = re.findall(r"\s*(\d+)\s*([A-Za-z]+)\s*", text)
    if not parts or "".join(re.findall(r"\s*\d+\s*[A-Za-z]+\s*", text)) != text:
        return None
    total = 0.0
    for number, unit in parts:
        if unit not in UNITS:
            return None
        total += int(number) * UNITS[unit]
    return total


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def resources():
    """Every resource under deploy/kubernetes, by (kind, name), with the file it is in."""
    found = {}
    for path in sorted(K8S.rglob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in load_all(path):
            found[(doc["kind"], doc["metadata"]["name"])] = (path, doc)
    return found


def check_kustomizations():
    """Each kustomization lists exactly the manifests beside it (a file left out would
    silently not be applied), and the main one does not pull in the try-out Redis."""
    for kust in sorted(K8S.rglob("kustomization.yaml")):
        listed = [kust.parent / r for r in (load_all(kust)[0].get("resources") or [])]
        beside = {p for p in kust.parent.glob("*.yaml") if p.name != "kustomization.yaml"}
        for p in listed:
            if p.resolve().parent != kust.parent:
                fail(rel(kust), f"resources: {rel(p)} is outside this directory")
            elif not p.exists():
                fail(rel(kust), f"resources: {p.name} does not exist")
        for p in sorted(beside - set(listed) - UNLISTED):
            fail(rel(kust), f"resources: {p.name} is not listed")


def container(deployment):
    return deployment["spec"]["template"]["spec"]["containers"][0]


def check_node(res):
    """The Deployment, its ConfigMap, Secret and Service against each other and keyfire."""
    dep_path, dep = res[("Deployment", "keyfire")]
    pod = dep["spec"]["template"]["spec"]
    c = container(dep)
    dwhere = rel(dep_path)

    # The config file the node is told to read is the ConfigMap's key, mounted read-only.
    args = c.get("args", [])
    if args[:2] != ["serve", "--config"] or len(args) != 3:
        fail(dwhere, f"args: expected serve --config FILE, got {args}")
        return None
    config_file = Path(args[2])
    mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mount = next((m for m in mounts.values() if Path(m["mountPath"]) == config_file.parent), None)
    if mount is None:
        fail(dwhere, f"volumeMounts: nothing is mounted at {config_file.parent}")
        return None
    if not mount.get("readOnly"):
        fail(dwhere, f"volumeMounts.{mount['name']}: the config must be mounted readOnly")
    cm_name = volumes.get(mount["name"], {}).get("configMap", {}).get("name")
    if (("ConfigMap", cm_name)) not in res:
        fail(
            dwhere, f"volumes.{mount['name']}: no ConfigMap named {cm_name!r} in deploy/kubernetes"
        )
        return None
    cm_path, cm = res[("ConfigMap", cm_name)]
    cwhere = f"{rel(cm_path)} data.{config_file.name}"
    text = cm.get("data", {}).get(config_file.name)
    if text is None:
        fail(rel(cm_path), f"data: no key {config_file.name} (the file the Deployment reads)")
        return None
    try:
        settings = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        fail(cwhere, f"not TOML: {e}")
        return None

    # The drain fits in the grace period: preStop, then drain_timeout, then the wait for
    # cancelled runs, all before the kubelet's SIGKILL.
    drain_text = settings.get("node", {}).get("drain_timeout")
    if drain_text is None:
        fail(
            cwhere, "node.drain_timeout must be set explicitly (the grace period is sized from it)"
        )
    else:
        drain = seconds(drain_text)
        if drain is None:
            fail(cwhere, f"node.drain_timeout: {drain_text!r} is not a duration")
        else:
            grace = pod.get("terminationGracePeriodSeconds", 30)
            pre_stop = c.get("lifecycle", {}).get("preStop", {})
            pause = 0
            if "exec" in pre_stop:
                cmd = pre_stop["exec"]["command"]
                if cmd[0] != "sleep" or len(cmd) != 2 or not cmd[1].isdigit():
                    fail(dwhere, f"lifecycle.preStop: expected [sleep, N], got {cmd}")
                else:
                    pause = int(cmd[1])
            elif "sleep" in pre_stop:
                pause = pre_stop["sleep"]["seconds"]
            need = pause + drain + CANCEL_WAIT_S
            if not grace > need:
                fail(
                    dwhere,
                    f"terminationGracePeriodSeconds {grace} must exceed preStop {pause}s + "
                    f"node.drain_timeout {drain:g}s + {CANCEL_WAIT_S}s for cancelled runs = {need:g}s",
                )
            else:
                print(
                    f"ok  grace period {grace}s > preStop {pause}s + drain_timeout {drain:g}s + "
                    f"{CANCEL_WAIT_S}s = {need:g}s"
                )

    # The node listens on every interface at the port the probes and the Service use.
    listen = settings.get("api", {}).get("listen", "")
    host, _, port = listen.rpartition(":")
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    if host != "0.0.0.0":
        fail(cwhere, f"api.listen: {listen!r} must listen on 0.0.0.0 to be reachable in the pod")
    if not port.isdigit() or ports.get("http") != int(port):
        fail(
            dwhere,
            f"ports: containerPort 'http' {ports.get('http')} is not api.listen's port ({listen!r})",
        )
    for probe, path in [
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ]:
        get = c.get(probe, {}).get("httpGet", {})
        if get.get("path") != path or get.get("port") not in ("http", ports.get("http")):
            fail(dwhere, f"{probe}: expected httpGet {path} on port http, got {get}")
    svc_path, svc = res[("Service", "keyfire")]
    for p in svc["spec"]["ports"]:
        if p.get("targetPort") not in ("http", ports.get("http")):
            fail(
                rel(svc_path),
                f"ports.{p.get('name')}: targetPort {p.get('targetPort')} is not the nodes' http port",
            )
    labels = dep["spec"]["template"]["metadata"]["labels"]
    for kind, name in [("Service", "keyfire"), ("PodDisruptionBudget", "keyfire")]:
        path, doc = res[(kind, name)]
        sel = doc["spec"]["selector"]
        sel = sel.get("matchLabels", sel)
        if any(labels.get(k) != v for k, v in sel.items()):
            fail(rel(path), f"selector {sel} does not select the Deployment's pods {labels}")

    # The environment: node id from the pod's name, the token from the Secret.
    env = {e["name"]: e.get("valueFrom", {}) for e in c.get("env", [])}
    if env.get("KEYFIRE__NODE__ID", {}).get("fieldRef", {}).get("fieldPath") != "metadata.name":
        fail(dwhere, "env KEYFIRE__NODE__ID: must come from fieldRef metadata.name")
    token_ref = env.get("KEYFIRE__API__TOKEN", {}).get("secretKeyRef")
    if not token_ref or token_ref.get("optional"):
        fail(
            dwhere,
            "env KEYFIRE__API__TOKEN: must come from a Secret, not optional (0.0.0.0 needs a token)",
        )
    else:
        secret = res.get(("Secret", token_ref["name"]))
        if secret is None:
            fail(dwhere, f"env KEYFIRE__API__TOKEN: no example Secret named {token_ref['name']!r}")
        elif token_ref["key"] not in secret[1].get("stringData", {}):
            fail(
                rel(secret[0]),
                f"stringData: no key {token_ref['key']!r} (KEYFIRE__API__TOKEN reads it)",
            )

    # The image's user (Dockerfile) is the one the manifests run as.
    dockerfile = (ROOT / "Dockerfile").read_text()
    uid = re.search(r"useradd [^\n]*--uid (\d+)", dockerfile)
    for where, ctx in [
        ("securityContext", pod.get("securityContext", {})),
        ("containers[0].securityContext", c.get("securityContext", {})),
    ]:
        if uid and ctx.get("runAsUser", int(uid.group(1))) != int(uid.group(1)):
            fail(
                dwhere,
                f"{where}.runAsUser {ctx.get('runAsUser')} is not the image's uid {uid.group(1)} (Dockerfile)",
            )
    sc = c.get("securityContext", {})
    for field, want in [
        ("readOnlyRootFilesystem", True),
        ("allowPrivilegeEscalation", False),
        ("runAsNonRoot", True),
    ]:
        if sc.get(field) != want:
            fail(dwhere, f"containers[0].securityContext.{field} must be {want}")
    if sc.get("capabilities", {}).get("drop") != ["ALL"]:
        fail(dwhere, "containers[0].securityContext.capabilities.drop must be [ALL]")

    # The URL names the try-out Redis's Service.
    url = settings.get("redis", {}).get("url", "")
    redis_host = re.sub(r"^rediss?://(?:[^@/]*@)?([^:/]+).*$", r"\1", url)
    if ("Service", redis_host) not in res:
        fail(
            cwhere,
            f"redis.url: {url!r} names no Service in deploy/kubernetes (the try-out Redis is keyfire-redis)",
        )
    print(
        f"ok  {rel(cm_path)}: {config_file.name} is TOML; api.listen {listen}; probes, Service and env agree"
    )
    return text


def check_redis(res):
    """The try-out Redis's config is the shipped redis.conf, byte for byte."""
    path, cm = res[("ConfigMap", "keyfire-redis-config")]
    if cm["data"].get("redis.conf") != (ROOT / "redis.conf").read_text():
        fail(rel(path), "data.redis.conf differs from the shipped redis.conf: copy it again")
    else:
        print(f"ok  {rel(path)}: redis.conf is the shipped one")


def check_compose():
    """docker-compose.yml: each node stops within a grace period above the drain of the config
    it mounts, and listens on 0.0.0.0 only with a token."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name, svc in compose["services"].items():
        if not name.startswith("node"):
            continue
        env = svc.get("environment", {})
        config = next(
            (v.split(":")[0] for v in svc.get("volumes", []) if ":/etc/keyfire/keyfire.toml" in v),
            None,
        )
        drain_text = "30s"
        if config:
            drain_text = (
                tomllib.loads((ROOT / config).read_text())
                .get("node", {})
                .get("drain_timeout", "30s")
            )
        drain_text = env.get("KEYFIRE__NODE__DRAIN_TIMEOUT", drain_text)
        grace = seconds(svc.get("stop_grace_period", "10s"))
        drain = seconds(drain_text)
        if grace is None or drain is None or not grace > drain + CANCEL_WAIT_S:
            fail(
                f"docker-compose.yml services.{name}",
                f"stop_grace_period {svc.get('stop_grace_period')} must exceed node.drain_timeout "
                f"{drain_text} + {CANCEL_WAIT_S}s",
            )
        if env.get("KEYFIRE__API__LISTEN", "").startswith("0.0.0.0") and not env.get(
            "KEYFIRE__API__TOKEN"
        ):
            fail(
                f"docker-compose.yml services.{name}",
                "listens on 0.0.0.0 without KEYFIRE__API__TOKEN",
            )
    print("ok  docker-compose.yml: stop grace periods above the drain; tokens set")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, token=None, timeout=3):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def boot(keyfire, config_text, res):
    """Start a node on the ConfigMap's settings with the pod's environment, against a
    redis-server of our own (the shipped redis.conf, free port, temp dir): it must start,
    answer the probes, require the token, and stop on SIGTERM well within the grace period.
    Only the Redis URL and the listen address differ from the pod: 0.0.0.0:8080 may be taken
    on this machine, and would expose the node beyond it."""
    redis_server = shutil.which("redis-server")
    if not redis_server:
        fail("boot", "redis-server is not on PATH")
        return
    grace = res[("Deployment", "keyfire")][1]["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"
    ]
    with tempfile.TemporaryDirectory(prefix="keyfire-deploy-check-") as tmp:
        tmp = Path(tmp)
        config = tmp / "keyfire.toml"
        config.write_text(config_text)
        rport, aport = free_port(), free_port()
        redis = subprocess.Popen(
            [
                redis_server,
                str(ROOT / "redis.conf"),
                "--port",
                str(rport),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(tmp),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=open(tmp / "redis.log", "w"),
            stderr=subprocess.STDOUT,
        )
        node = None
        log = tmp / "node.log"
        token = secrets.token_hex(16)
        try:
            env = {k: v for k, v in os.environ.items() if not k.startswith("KEYFIRE")}
            env.update(
                KEYFIRE__NODE__ID="keyfire-7d9f8b6c4-x2x9q",
                KEYFIRE__API__TOKEN=token,
                KEYFIRE__REDIS__URL=f"redis://127.0.0.1:{rport}/0",
                KEYFIRE__API__LISTEN=f"127.0.0.1:{aport}",
            )
            deadline = time.monotonic() + 30
            while (
                subprocess.run(
                    ["redis-cli", "-p", str(rport), "ping"], capture_output=True
                ).stdout.strip()
                != b"PONG"
            ):
                if time.monotonic() > deadline or redis.poll() is not None:
                    fail(
                        "boot",
                        f"redis-server did not start: {(tmp / 'redis.log').read_text()[-2000:]}",
                    )
                    return
                time.sleep(0.1)
            node = subprocess.Popen(
                [keyfire, "serve", "--config", str(config)],
                env=env,
                stdout=open(log, "w"),
                stderr=subprocess.STDOUT,
            )
            base = f"http://127.0.0.1:{aport}"
            ready = None
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and node.poll() is None:
                try:
                    if (
                        get(f"{base}/healthz")[0] == 200
                        and (ready := get(f"{base}/readyz"))[0] == 200
                    ):
                        break
                except OSError:
                    pass
                time.sleep(0.2)
            if node.poll() is not None or ready is None or ready[0] != 200:
                what = (
                    f"exited {node.returncode}"
                    if node.poll() is not None
                    else f"was not ready within 60s (readyz: {ready})"
                )
                fail(
                    "boot",
                    f"on the ConfigMap's settings the node {what}:\n{log.read_text()[-3000:]}",
                )
                return
            status, body = get(f"{base}/v1/nodes", token)
            if status != 200 or "keyfire-7d9f8b6c4-x2x9q" not in body:
                fail("boot", f"GET /v1/nodes with the token: {status} {body[:300]}")
            status, _ = get(f"{base}/v1/nodes")
            if status != 401:
                fail("boot", f"GET /v1/nodes without the token answered {status}, not 401")
            started = time.monotonic()
            node.send_signal(signal.SIGTERM)
            try:
                code = node.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                fail(
                    "boot",
                    f"the node did not stop within the grace period ({grace}s) after SIGTERM",
                )
                return
            if code != 0:
                fail("boot", f"the node exited {code} after SIGTERM:\n{log.read_text()[-3000:]}")
                return
            print(
                f"ok  a node booted on the ConfigMap's settings: /healthz and /readyz 200, the token "
                f"required, SIGTERM to exit 0 in {time.monotonic() - started:.1f}s"
            )
        finally:
            for p in (node, redis):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--keyfire", help="a keyfire binary: boot a node on the ConfigMap's settings"
    )
    args = parser.parse_args()
    res = resources()
    check_kustomizations()
    config_text = check_node(res)
    check_redis(res)
    check_compose()
    if args.keyfire and config_text is not None and not failures:
        boot(args.keyfire, config_text, res)
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
