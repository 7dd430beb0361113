"""A task with the `http` handler reaches a local receiver (conftest's `receiver`), which
verifies it with the Standard Webhooks library (through `WebhookVerifier`)."""

from __future__ import annotations

import pytest
from conftest import new_secret

from keyfire_client import WebhookVerificationError, WebhookVerifier


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
