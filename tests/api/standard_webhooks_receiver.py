#!/usr/bin/env python3
"""A webhook receiver written from the Standard Webhooks spec alone: it verifies requests with
the spec's published Python library (`pip install standardwebhooks`), not with keyfire's code.

Usage: standard_webhooks_receiver.py '["whsec_...", ...]'

Listens on 127.0.0.1 (a free port, printed as the first line of stdout). Every request to
/hook is checked under each secret, as received, with one byte of its body changed, and as a
replay six minutes later (the library's tolerance is five). It answers 200 when some secret
verifies the request as received, else 401. GET /log returns what it saw, as JSON.
"""

import json
import sys
import threading
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import standardwebhooks.webhooks as swm
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

HOOKS = [Webhook(s) for s in json.loads(sys.argv[1])]
LOG = []
# Verification may swap the library's clock (the replay check): one at a time.
LOCK = threading.Lock()


class SixMinutesLater(datetime):
    @classmethod
    def now(cls, tz=None):
        return datetime.now(tz) + timedelta(minutes=6)


def verdicts(body, headers, later=False):
    """Per secret: "ok", or the library's reason for refusing."""
    out = []
    real = swm.datetime
    if later:
        swm.datetime = SixMinutesLater
    try:
        for hook in HOOKS:
            try:
                hook.verify(body, headers, json_parse=False)
                out.append("ok")
            except WebhookVerificationError as e:
                out.append(str(e))
    finally:
        swm.datetime = real
    return out


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, payload):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def hook(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        headers = {k.lower(): v for k, v in self.headers.items()}
        changed = bytearray(body if body else b"x")
        changed[-1] ^= 0x01
        with LOCK:
            entry = {
                "method": self.command,
                "path": self.path,
                "headers": headers,
                "body": body.decode(),
                "as_received": verdicts(body, headers),
                "one_byte_changed": verdicts(bytes(changed), headers),
                "replayed_later": verdicts(body, headers, later=True),
            }
            LOG.append(entry)
        ok = "ok" in entry["as_received"]
        self.answer(200 if ok else 401, entry["as_received"])

    def do_POST(self):
        self.hook()

    def do_PUT(self):
        self.hook()

    def do_GET(self):
        if self.path == "/log":
            with LOCK:
                self.answer(200, LOG)
        else:
            self.hook()


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
