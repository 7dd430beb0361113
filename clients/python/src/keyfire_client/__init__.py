"""keyfire's Python client: a thin hand-written layer over code generated from the node's
OpenAPI document (`keyfire_client._generated`, by openapi-python-client).

    from keyfire_client import Keyfire

    kf = Keyfire("http://127.0.0.1:8080", token="...")
    kf.add("orders", {"order": 7}, delay="30s")
    kf.consumer("orders", lambda task: print(task.payload)).run()

See docs/client-python.md.
"""

from ._version import __version__
from .client import Enqueued, EnqueuedBatch, Keyfire, Task
from .consumer import Consumer, ConsumerStats
from .errors import (
    Code,
    Conflict,
    Invalid,
    KeyfireError,
    NotFound,
    RedisFull,
    Unauthorized,
    Unavailable,
    Unreachable,
)
from .webhooks import Delivery, WebhookVerificationError, WebhookVerifier

__all__ = [
    "Code",
    "Conflict",
    "Consumer",
    "ConsumerStats",
    "Delivery",
    "Enqueued",
    "EnqueuedBatch",
    "Invalid",
    "Keyfire",
    "KeyfireError",
    "NotFound",
    "RedisFull",
    "Task",
    "Unauthorized",
    "Unavailable",
    "Unreachable",
    "WebhookVerificationError",
    "WebhookVerifier",
    "__version__",
]
