"""A webhook receiver for the image-conditions test: plain HTTP, or HTTPS with the given
certificate and key (Python's own TLS stack, not keyfire's). Prints its port, then one line per
request as it starts (`start <path> <webhook-id>`) and as its answer has gone (`done <path>`).
A `delay` query parameter (seconds) holds the answer back, for a run in progress at SIGTERM.

    python3 image_receiver.py [CERT KEY]
"""

import ssl
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


class Hook(BaseHTTPRequestHandler):
    def handle_one(self):
        url = urlparse(self.path)
        print(f"start {url.path} {self.headers.get('webhook-id', '-')}", flush=True)
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        delay = float(parse_qs(url.query).get("delay", ["0"])[0])
        time.sleep(delay)
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
        self.wfile.flush()
        print(f"done {url.path}", flush=True)

    do_GET = handle_one
    do_POST = handle_one

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    if len(sys.argv) == 3:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[1], sys.argv[2])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
