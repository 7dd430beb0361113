"""Typed errors: every error answer of the API is `{"error": {"code", "message", "field"}}`.

`KeyfireError` carries the three, plus the HTTP status; a subclass per kind of failure lets
callers catch what they can act on:

- `Invalid`: bad input, named in `field` (422 `invalid`; 400 `malformed_json`, `bad_query`,
  `bad_path`, `bad_request`; 413 `payload_too_large`; 415 `unsupported_media_type`);
- `NotFound` (404), `Conflict` (409: changed concurrently, not at the `If-Match` version, a
  reservation lost, nothing to cancel);
- `Unauthorized` (401: missing or wrong token; 403 `forbidden`);
- `Unavailable` (503: Redis is away; 502 and 504 from a proxy in front of the node) and its
  subclasses `Unreachable` (no answer at all: refused, reset, timed out) and `RedisFull` (507:
  Redis reached its `maxmemory` and refuses writes). All are worth retrying; the consumer
  does, with backoff, waiting at least the answer's `Retry-After` (`retry_after`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import Enum

__all__ = [
    "Code",
    "Conflict",
    "Invalid",
    "KeyfireError",
    "NotFound",
    "RedisFull",
    "Unauthorized",
    "Unavailable",
    "Unreachable",
]


class Code(str, Enum):
    """The API's error codes (`ErrorDetail.code`), plus `unreachable` for no answer."""

    MALFORMED_JSON = "malformed_json"
    BAD_QUERY = "bad_query"
    BAD_PATH = "bad_path"
    BAD_REQUEST = "bad_request"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    CONFLICT = "conflict"
    NOTHING_TO_CANCEL = "nothing_to_cancel"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    INVALID = "invalid"
    INTERNAL = "internal"
    UNAVAILABLE = "unavailable"
    REDIS_FULL = "redis_full"
    UNREACHABLE = "unreachable"


class KeyfireError(Exception):
    """An error answer of the API (or no answer: see `Unreachable`).

    `code` is the API's stable code (a string; compare with `Code`), `message` says what went
    wrong in words a person can act on, `field` names the input at fault (`cron`,
    `tasks[2].at`, `wait`) or is None; `status` is the HTTP status (None when no answer came);
    `retry_after` the seconds of the answer's `Retry-After` header, when it had one.
    """

    def __init__(
        self,
        code: str,
        message: str,
        field: str | None = None,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}" + (f" (field: {field})" if field else ""))
        self.code = code
        self.message = message
        self.field = field
        self.status = status
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, "
            f"field={self.field!r}, status={self.status!r})"
        )


class Invalid(KeyfireError):
    """Bad input; `field` names it. Nothing was written."""


class NotFound(KeyfireError):
    """No such job, task, topic task or limit."""


class Conflict(KeyfireError):
    """Changed concurrently, not at the `If-Match` version, or a reservation lost."""


class Unauthorized(KeyfireError):
    """Missing or wrong bearer token (401), or a request the node refuses to serve (403)."""


class Unavailable(KeyfireError):
    """The node answered that it cannot serve now (503: Redis is away); try again later."""


class Unreachable(Unavailable):
    """No answer from the node: connection refused or reset, or a timeout."""


class RedisFull(Unavailable):
    """Redis reached its `maxmemory` and refuses writes (507); nothing was written. Memory comes
    back as consumers finish tasks and records expire: retry after `retry_after` seconds."""


_BY_CODE: dict[str, type[KeyfireError]] = {
    "invalid": Invalid,
    "malformed_json": Invalid,
    "bad_query": Invalid,
    "bad_path": Invalid,
    "bad_request": Invalid,
    "payload_too_large": Invalid,
    "unsupported_media_type": Invalid,
    "not_found": NotFound,
    "conflict": Conflict,
    "unauthorized": Unauthorized,
    "forbidden": Unauthorized,
    "unavailable": Unavailable,
    "redis_full": RedisFull,
}

_BY_STATUS: dict[int, type[KeyfireError]] = {
    400: Invalid,
    401: Unauthorized,
    403: Unauthorized,
    404: NotFound,
    409: Conflict,
    413: Invalid,
    415: Invalid,
    422: Invalid,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
    507: RedisFull,
}


def from_response(
    status: int, content: bytes, headers: Mapping[str, str] | None = None
) -> KeyfireError:
    """The typed error of an answer with a non-2xx `status`, body `content` and `headers`."""
    code, message, field = None, None, None
    try:
        detail = json.loads(content)["error"]
        code, message, field = detail.get("code"), detail.get("message"), detail.get("field")
    except (ValueError, KeyError, TypeError, AttributeError):
        pass  # not keyfire's error shape: a proxy's page, say
    if not isinstance(code, str):
        code = {502: "unavailable", 503: "unavailable", 504: "unavailable"}.get(
            status, f"http_{status}"
        )
    if not isinstance(message, str):
        text = content[:200].decode("utf-8", "replace").strip()
        message = f"HTTP {status}" + (f": {text}" if text else "")
    retry_after = None
    try:
        retry_after = float((headers or {}).get("retry-after", ""))
    except ValueError:
        pass  # absent, or an HTTP date: the backoff alone decides
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status, KeyfireError)
    return cls(code, message, field if isinstance(field, str) else None, status, retry_after)


def unreachable(base_url: str, exc: Exception) -> Unreachable:
    """The error for a request that got no answer."""
    return Unreachable("unreachable", f"no answer from {base_url}: {exc!r}", None, None)
