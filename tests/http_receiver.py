"""A real HTTP server on a free loopback port, in a thread, for the tests whose code under test makes HTTP
calls (callbacks, webhooks, the push webhook provider): each test writes only what its handler answers."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    """A handler that keeps the test output clean and answers with a status and an empty body."""

    def answer(self, status: int, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    # The default backlog of 5 drops the SYNs of a burst of concurrent callers (a worker's 16 HTTP threads):
    # they come back a second later, as connect timeouts the code under test never caused.
    request_queue_size = 128
    daemon_threads = True


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler], *, tls: ssl.SSLContext | None = None) -> Iterator[int]:
    """Serve `handler` (over TLS with `tls`) until the block ends; yields the port."""
    server = _Server(("127.0.0.1", 0), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
