"""A TCP proxy to cut the broker with: the fault scenarios run a worker's broker connections through it and
drop them (tests/faults/test_broker_outage.py)."""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit

from django.conf import settings


class TcpProxy:
    """Forwards 127.0.0.1:<port> (or `listen`:<port>) to an upstream address; `cut()` drops every connection
    and refuses new ones (what a client sees while RabbitMQ restarts), `restore()` lets them through again."""

    def __init__(self, upstream: tuple[str, int], *, listen: str = "127.0.0.1", port: int = 0) -> None:
        self.upstream = upstream
        self._listener = socket.create_server((listen, port))
        self.port: int = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._cut = threading.Event()
        self._closed = threading.Event()
        self.cuts = 0
        self.dropped = 0
        threading.Thread(target=self._accept, name="fault-proxy", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._cut.is_set():
                _close_hard(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _close_hard(client)
                continue
            server.settimeout(None)
            with self._lock:
                self._open.update((client, server))
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                self._forget(sock)

    def _forget(self, sock: socket.socket) -> None:
        with self._lock:
            known = sock in self._open
            self._open.discard(sock)
        if known:
            _close_hard(sock)

    def cut(self) -> None:
        self.cuts += 1
        self._drop_all()

    def _drop_all(self) -> None:
        self._cut.set()
        with self._lock:
            sockets, self._open = list(self._open), set()
        self.dropped += len(sockets) // 2
        for sock in sockets:
            _close_hard(sock)

    def restore(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self._closed.set()
        self._drop_all()
        self._listener.close()


def _close_hard(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


def broker_address() -> tuple[str, int]:
    parts = urlsplit(settings.CELERY_BROKER_URL)
    return parts.hostname or "127.0.0.1", parts.port or 5672
