"""A lean HTTP/2 client for the push providers: one connection per origin, every request its own stream.

Why not httpx or the `h2` library: their generic machinery (connection pool scans, a state table per
stream, frame objects serialized one by one) cost many times the protocol work a push needs (the figures
are in docs/benchmarks.md, "Figures moved out of the code"). A push client needs little of
HTTP/2: requests out (HEADERS, DATA), answers in (HEADERS, DATA, CONTINUATION), SETTINGS, WINDOW_UPDATE,
PING, GOAWAY and RST_STREAM. This module frames those itself, and encodes and decodes the header blocks
(HPACK, with `hpack`'s Huffman code table).

`https://` origins negotiate h2 by ALPN (APNs and FCM both speak it); `http://` origins use HTTP/2 with
prior knowledge (h2c), for a plain-text peer in tests. A GOAWAY fails the requests the server says it did
not process and lets the rest finish; a broken socket or a protocol error fails every request in flight
with `H2Error` (the gateway retries them); the next request opens a new connection.

What a request costs is kept small:
- Header blocks are encoded here (`HeaderEncoder`). A value that repeats on a connection (the
  `authorization` bearer token, the topic, the push type) is indexed: after the first request it costs one
  byte, copied from a cache. A value that is new on every request or nearly (`:path` with the device
  token, `content-length`, the caller's `per_request_headers` such as `apns-id`) is sent never-indexed,
  so it never evicts the repeating ones. `authorization` is indexed although h2 would not: that guard is
  for values an attacker can probe with guesses in the same compression context, and HPACK only matches
  whole values: nobody but this client sets `authorization` on the connection, and the value is a signed
  JWT / a random access token nobody can guess whole. Literals are not Huffman-coded (the bytes it saves
  do not matter on one multiplexed connection).
- Header names and values are checked here: a value with a control character or surrounding white space
  (a device token, an app's topic) fails that request alone (`H2BadRequest`) instead of making the server
  drop the connection.
- The connection's and each stream's receive windows are opened wide once, so answers cost no
  WINDOW_UPDATE each; a body the server's window cannot take yet waits in a queue that WINDOW_UPDATE
  frames drain, without a task per stream.
- Frames are written once per event-loop turn, not once per request: one TLS record and one `send` for
  every request started in that turn.
- A request's timeout is its deadline, checked by one timer per connection (`asyncio.wait_for` wrapped
  every request in a task; a timer per request cost a heap entry each).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
from collections.abc import Collection
from urllib.parse import urlsplit

from common.wire.h2_connection import H2Connection, H2Error, H2Response
from common.wire.hpack_codec import (
    HeaderDecoder,
    HeaderEncoder,
    PlainEncoder,
    hpack_integer,
    hpack_literal,
)

__all__ = [
    "H2BadRequest",
    "H2Client",
    "H2Error",
    "H2Response",
    "HeaderDecoder",
    "HeaderEncoder",
    "PlainEncoder",
]


class H2BadRequest(ValueError):
    """The request cannot be sent as asked (a header value with a control character): nothing went out,
    and trying again would not help."""


_UNSAFE = re.compile(r"[\x00-\x1f\x7f]|^\s|\s$")  # control characters, surrounding white space
_NAME = re.compile(r"[a-z0-9!#$%&'*+.^_`|~-]+")  # a lower-case HTTP token


class H2Client:
    """Requests to one origin over one HTTP/2 connection (opened on first use, reopened after a loss)."""

    def __init__(
        self,
        base_url: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        timeout: float = 10.0,
        per_request_headers: Collection[str] = (),
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError(f"{base_url!r} is not an http(s) URL")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.authority = parts.netloc
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self.per_request_headers = frozenset(h.lower() for h in per_request_headers)
        self.ssl_context: ssl.SSLContext | None = None
        if self.scheme == "https":
            self.ssl_context = ssl_context or ssl.create_default_context()
            self.ssl_context.set_alpn_protocols(["h2"])
        self._connection: H2Connection | None = None
        self._connecting: asyncio.Lock | None = None
        # Per header name: the never-indexed literal's first bytes (its name), for per-request values.
        self._never_indexed: dict[bytes, bytes] = {}
        self._names: dict[str, bytes] = {}  # header names seen, checked and encoded once
        self._authority = self.authority.encode()
        # The request line's fields: `:method POST` and `:scheme` are static-table entries, one byte each.
        self._start = bytes((0x83, 0x87 if self.scheme == "https" else 0x86))

    async def _connect(self) -> H2Connection:
        if self._connection is not None and not self._connection.closed:
            return self._connection
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._connection is None or self._connection.closed:
                loop = asyncio.get_running_loop()
                transport, connection = await asyncio.wait_for(
                    loop.create_connection(lambda: H2Connection(loop, self.timeout), self.host, self.port,
                                           ssl=self.ssl_context,
                                           server_hostname=self.host if self.ssl_context else None),
                    self.timeout,
                )  # fmt: skip
                if self.ssl_context is not None:
                    protocol = transport.get_extra_info("ssl_object").selected_alpn_protocol()
                    if protocol != "h2":
                        transport.close()
                        raise H2Error(f"{self.authority} did not agree to HTTP/2 (ALPN {protocol!r})")
                self._connection = connection
            return self._connection

    def _never(self, name: bytes, value: bytes) -> bytes:
        head = self._never_indexed.get(name)
        if head is None:
            head = self._never_indexed[name] = hpack_literal(name, b"", 0x10, 4)[:-1]
        return head + hpack_integer(len(value), 7, 0) + value

    def _header_block(self, encoder: HeaderEncoder, path: str, headers: dict[str, str], body: bytes) -> bytes:
        """The request's HPACK block, its values checked here: the pseudo-headers are this client's own,
        so what can be wrong is a value (a device token, an app's topic) with a control character or
        surrounding white space, which would make the server drop the whole connection."""
        if _UNSAFE.search(path):
            raise H2BadRequest("the request path has a control character or surrounding white space")
        indexed = encoder._indexed
        per_request = self.per_request_headers
        fields: list[tuple[bool, bytes, bytes]] = []
        for name, value in headers.items():  # all checked before the table changes
            name_bytes = self._names.get(name)
            if name_bytes is None:
                if not _NAME.fullmatch(name):
                    raise H2BadRequest(f"header {name[:40]!r}: not a lower-case HTTP token")
                name_bytes = self._names[name] = name.encode()
            value_bytes = value.encode()
            never = name in per_request
            if (never or (name_bytes, value_bytes) not in indexed) and _UNSAFE.search(value):
                raise H2BadRequest(f"header {name[:40]!r}: a control character or surrounding white space")
            fields.append((never, name_bytes, value_bytes))
        parts = [encoder.start(), self._start, encoder.indexed(b":authority", self._authority),
                 self._never(b":path", (self.prefix + path).encode())]  # fmt: skip
        for never, name_bytes, value_bytes in fields:
            if never:
                parts.append(self._never(name_bytes, value_bytes))
            else:
                parts.append(encoder.indexed(name_bytes, value_bytes))
        parts.append(self._never(b"content-length", str(len(body)).encode()))
        return b"".join(parts)

    async def post(self, path: str, *, headers: dict[str, str], body: bytes) -> H2Response:
        try:
            connection = self._connection
            if connection is None or connection.closed:
                connection = await self._connect()
            block = self._header_block(connection.encoder, path, headers, body)
            _, future = connection.request(block, body)
        except (OSError, ssl.SSLError, TimeoutError) as exc:
            raise H2Error(f"{type(exc).__name__}: {exc}"[:200]) from None
        return await future  # the connection fails it after `timeout` without an answer

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        with contextlib.suppress(Exception):
            connection.goodbye()
        # The TLS close is asynchronous: awaited here, so the transport is not left to the garbage
        # collector of a closed loop ("Event loop is closed").
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(connection.lost), 2)
