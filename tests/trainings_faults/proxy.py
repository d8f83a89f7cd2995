"""A loopback TCP proxy in front of RabbitMQ that can swallow what the client sends.

With `swallow_client_bytes` set, every byte from the client (e.g. a gateway's basic.ack) is dropped while
the broker's bytes still reach it: the broker never hears of the ack, the client believes it sent it.
`close()` drops every connection, which is what RabbitMQ sees when the client dies.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit


class SwallowingProxy:
    def __init__(self, broker_url: str) -> None:
        parts = urlsplit(broker_url)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 5672)
        self.swallow_client_bytes = threading.Event()
        self.swallowed = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url_for(self, broker_url: str) -> str:
        """`broker_url` with its host and port replaced by this proxy's."""
        parts = urlsplit(broker_url)
        credentials = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        return parts._replace(netloc=f"{credentials}127.0.0.1:{self.port}").geturl()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            with self._lock:
                self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        try:
            while data := source.recv(65536):
                if from_client and self.swallow_client_bytes.is_set():
                    self.swallowed += len(data)
                    continue
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            for end in self._sockets:
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    end.close()
            self._sockets.clear()
