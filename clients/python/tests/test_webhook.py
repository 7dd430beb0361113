"""A task with the `http` handler reaches a receiver started here, which verifies it with the
Standard Webhooks library (through `WebhookVerifier`)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import new_secret

from keyfire_client import WebhookVerificationError, WebhookVerifier


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


def test_http_task_verifies_under_the_nodes_secret(kf, node, receiver):
    enqueued = kf.enqueue("http", {"url": f"{receiver.url}/hooks/order", "body": {"order": 7}})
    assert enqueued.created

    path, body, headers = receiver.next()
    assert path == "/hooks/order"
    delivery = WebhookVerifier(node.signing_secret).verify(body, headers)
    assert delivery.job_id == enqueued.id
    assert delivery.id.startswith(f"{enqueued.id}:")
    assert delivery.attempt == 1
    assert delivery.json() == {"order": 7}

    # The same request with one byte changed, or under another secret, does not verify.
    with pytest.raises(WebhookVerificationError):
        WebhookVerifier(node.signing_secret).verify(body.replace(b"7", b"8"), headers)
    with pytest.raises(WebhookVerificationError):
        WebhookVerifier(new_secret()).verify(body, headers)


def test_http_task_verifies_under_its_own_secrets_while_rotating(kf, node, receiver):
    old, new = new_secret(), new_secret()
    enqueued = kf.enqueue(
        "http",
        {"url": f"{receiver.url}/hook", "body": "plain text", "signing_secrets": [new, old]},
        dedup_key=f"rotate-{receiver.url}",
        dedup_window="1m",
    )
    _, body, headers = receiver.next()
    assert body == b"plain text"
    # A job's own secrets win over the node's; a receiver holding either one accepts.
    for secret in (old, new):
        assert WebhookVerifier(secret).verify(body, headers).job_id == enqueued.id
    assert WebhookVerifier(new_secret(), old).verify(body, headers).id == headers["webhook-id"]
    with pytest.raises(WebhookVerificationError):
        WebhookVerifier(node.signing_secret).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        WebhookVerifier(old).verify(body, {**headers, "webhook-timestamp": "1000000000"})
