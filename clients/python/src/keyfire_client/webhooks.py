"""Verify a request keyfire's `http` handler sent, with the Standard Webhooks library.

keyfire signs every delivery (and callback) by the Standard Webhooks spec; the verification
here is the spec's own Python library (`standardwebhooks`), given the raw body and headers. It
refuses a body changed by one byte, a missing or wrong signature, and a timestamp more than
five minutes from this machine's clock (a replay).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

__all__ = ["Delivery", "WebhookVerificationError", "WebhookVerifier"]


@dataclass(frozen=True)
class Delivery:
    """A verified request.

    `id` is the firing id (`<job id>:<instant ms>`), the same on every attempt: do the work
    once per id. Callbacks carry `<firing id>:succeeded` or `<firing id>:failed`.
    """

    id: str
    timestamp: int
    body: bytes
    job_id: str | None
    attempt: int | None
    scheduled_at: str | None

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


class WebhookVerifier:
    """Verifies requests under one secret, or under any of several while rotating one:

    verifier = WebhookVerifier("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    delivery = verifier.verify(raw_body, request.headers)  # WebhookVerificationError
    """

    def __init__(self, *secrets: str) -> None:
        if not secrets:
            raise ValueError("give at least one whsec_ secret")
        self._hooks = [Webhook(s) for s in secrets]

    def verify(self, body: bytes | str, headers: Mapping[str, str]) -> Delivery:
        """Check `body` (the raw bytes, before any JSON parsing) against `headers`; the
        verified `Delivery`, or `WebhookVerificationError` naming why not."""
        raw = body.encode() if isinstance(body, str) else bytes(body)
        plain = {k.lower(): v for k, v in headers.items()}
        error: WebhookVerificationError | None = None
        for hook in self._hooks:
            try:
                hook.verify(raw, plain, json_parse=False)
                break
            except WebhookVerificationError as e:
                error = e
        else:
            assert error is not None
            raise error
        attempt = plain.get("keyfire-attempt")
        return Delivery(
            id=plain["webhook-id"],
            timestamp=int(float(plain["webhook-timestamp"])),
            body=raw,
            job_id=plain.get("keyfire-job-id"),
            attempt=int(attempt) if attempt and attempt.isdigit() else None,
            scheduled_at=plain.get("keyfire-scheduled-at"),
        )
