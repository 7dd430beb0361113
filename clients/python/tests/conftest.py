"""A real keyfire node for the suite: a redis-server on a free port (the shipped redis.conf, a
temp dir, no persistence) and `keyfire serve` with a token, `handlers.http.allowed_hosts =
["127.0.0.1"]` and a signing secret for that host. The binary is KEYFIRE_BIN, default
target/debug/keyfire (build it with `cargo build --bin keyfire`). `receiver` is a local HTTP
server that records what the node sends it."""

from __future__ import annotations

import base64
import os
import queue
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from keyfire_client import Keyfire

ROOT = Path(__file__).resolve().parents[3]
PYTHON_SRC = ROOT / "clients" / "python" / "src"


def keyfire_bin() -> Path:
    path = Path(os.environ.get("KEYFIRE_BIN", "target/debug/keyfire"))
    return path if path.is_absolute() else ROOT / path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def wait_until(check, timeout: float, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.05)
    tail = log.read_text(errors="replace")[-4000:] if log and log.exists() else ""
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}\n{tail}")


def redis_answers(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
        s.sendall(b"PING\r\n")
        return s.recv(16).startswith(b"+PONG")


class Node:
    """redis-server and `keyfire serve` as child processes of the test.

    `url` and `token` reach its API; `signing_secret` is what it signs requests to 127.0.0.1
    with when a task names no secret of its own. `stop_redis()` and `start_redis()` take its
    Redis away and bring it back on the same port (with `persist`, from its append-only file,
    as the shipped redis.conf keeps it).
    """

    def __init__(self, work: Path, *, persist: bool = False) -> None:
        binary = keyfire_bin()
        if not binary.exists():
            pytest.fail(
                f"{binary} is missing: run `cargo build --bin keyfire` (or set KEYFIRE_BIN)"
            )
        self.work, self.persist = work, persist
        self.redis_port, api_port = free_port(), free_port()
        self.redis_log, self.log = work / "redis.log", work / "node.log"
        self.redis: subprocess.Popen | None = None
        self.process: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{api_port}"
        self.token, self.signing_secret = secrets.token_hex(16), new_secret()
        try:
            self.start_redis()
            config = work / "keyfire.toml"
            config.write_text(
                f'[redis]\nurl = "redis://127.0.0.1:{self.redis_port}/0"\n\n'
                f'[api]\nlisten = "127.0.0.1:{api_port}"\ntoken = "{self.token}"\n\n'
                '[handlers.http]\nallowed_hosts = ["127.0.0.1"]\n\n'
                f'[handlers.http.signing_secrets]\n"127.0.0.1" = ["{self.signing_secret}"]\n'
            )
            with open(self.log, "wb") as log:
                self.process = subprocess.Popen(
                    [str(binary), "serve", "--config", str(config)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, "NO_COLOR": "1"},
                )
            wait_until(self._ready, 60, "keyfire serve", self.log)
        except BaseException:
            self.stop()
            raise

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(
                f"keyfire exited with {self.process.returncode}:\n{self.log.read_text()}"
            )
        try:
            return httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def start_redis(self) -> None:
        persistence = ["--appendonly", "yes"] if self.persist else ["--appendonly", "no"]
        # A copy in the work dir: never started from the checkout's file, which the build embeds.
        conf = self.work / "redis.conf"
        shutil.copyfile(ROOT / "redis.conf", conf)
        self.redis = subprocess.Popen(
            ["redis-server", str(conf), "--port", str(self.redis_port),
             "--bind", "127.0.0.1", "--dir", str(self.work), "--save", "", *persistence,
             "--daemonize", "no", "--logfile", str(self.redis_log)],
        )  # fmt: skip
        wait_until(lambda: redis_answers(self.redis_port), 30, "redis-server", self.redis_log)

    def stop_redis(self) -> None:
        _stop(self.redis)

    def client(self, **kwargs) -> Keyfire:
        return Keyfire(self.url, token=self.token, **kwargs)

    def stop(self, print_log: bool = False) -> None:
        _stop(self.process)
        _stop(self.redis)
        if print_log and self.log.exists():
            sys.stderr.write(f"--- {self.log} (last 4000 bytes)\n{self.log.read_text()[-4000:]}\n")


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def node(tmp_path_factory, request) -> Iterator[Node]:
    """One node for the session; each test works in topics and ids of its own."""
    n = Node(tmp_path_factory.mktemp("keyfire"))
    try:
        yield n
    finally:
        n.stop(print_log=request.session.testsfailed > 0)


@pytest.fixture
def kf(node: Node) -> Iterator[Keyfire]:
    with node.client() as client:
        yield client


@pytest.fixture
def topic() -> str:
    """A topic of the test's own."""
    return f"t-{uuid.uuid4().hex[:12]}"


class Receiver:
    """Records each request's raw body and headers; answers 200."""

    def __init__(self) -> None:
        self.requests: queue.Queue[tuple[str, bytes, dict[str, str]]] = queue.Queue()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                outer.requests.put((self.path, body, dict(self.headers.items())))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def next(self, timeout: float = 30) -> tuple[str, bytes, dict[str, str]]:
        return self.requests.get(timeout=timeout)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()
    r.server.server_close()
