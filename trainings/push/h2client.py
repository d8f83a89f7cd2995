"""A lean HTTP/2 client for the push providers: one connection per origin, every request its own stream.

Why not httpx: under the gateway's load httpx/httpcore/anyio spent 2-3 ms of CPU per request (connection
pool scans, anyio attribute lookups), ten times what the protocol work costs; the gateway's throughput
target needs the protocol work only. The framing, HPACK and flow-control bookkeeping are the `h2`
library's; this module only owns the socket, the streams' futures and reconnecting.

`https://` origins negotiate h2 by ALPN (APNs and FCM both speak it); `http://` origins use HTTP/2 with
prior knowledge (h2c), for a plain-text peer in tests. A GOAWAY or a broken socket fails the requests in
flight with `H2Error` (the gateway retries them) and the next request opens a new connection.

Per request the costs are HPACK's and the socket's, so both are kept small (py-spy on the push benchmark:
encoding headers was most of the sending thread's time):
- Header indexing is chosen here, not by h2's defaults. A value that repeats on a connection (the
  `authorization` bearer token, the topic, the push type) is indexed: after the first request it costs one
  byte. A value that is new on every request or nearly (`:path` with the device token, `content-length`,
  the caller's `per_request_headers` such as `apns-id`) is sent never-indexed, so it neither churns the
  4 KiB dynamic table (evicting the token) nor slows hpack's table search, which walks every dynamic
  entry for every header of every request. h2 itself never indexes
  `authorization` (its default guards against compression oracles); that guard is for values an attacker
  can probe with guesses in the same compression context, and HPACK only matches whole values: nobody but
  this client sets `authorization` on the connection, and the value is a signed JWT / a random access
  token nobody can guess whole. Header names are lower-case already (h2's normalizing pass is off) and
  h2 still validates every header block.
- Literals are not Huffman-coded: hpack's Huffman coder is pure Python and cost more than all the rest of
  a request; the bytes it saves (about a fifth of a literal) do not matter on one multiplexed connection.
- Frames are written once per event-loop turn, not once per request: one TLS record and one `send` for
  every request started in that turn.
- A request's timeout is a timer on its future (`asyncio.wait_for` wrapped every request in a task).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import hpack
from hpack import HeaderTuple, NeverIndexedHeaderTuple


class H2Error(Exception):
    """The request did not get an answer (connection lost, stream reset, timeout)."""


class H2BadRequest(ValueError):
    """The request cannot be sent as asked (a header value with a control character): nothing went out,
    and trying again would not help."""


@dataclass
class H2Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def header(self, name: str) -> str | None:
        return self.headers.get(name)


_UNSAFE = re.compile(r"[\x00-\x1f\x7f]|^\s|\s$")  # control characters, surrounding white space
_NAME = re.compile(r"[a-z0-9!#$%&'*+.^_`|~-]+")  # a lower-case HTTP token


class PlainEncoder(hpack.Encoder):
    """HPACK with literals sent as they are (see the module's docstring)."""

    def encode(self, headers: Any, huffman: bool = True) -> bytes:
        return super().encode(headers, huffman=False)


@dataclass
class _Stream:
    future: asyncio.Future[H2Response]
    headers: dict[str, str] = field(default_factory=dict)
    body: bytearray = field(default_factory=bytearray)


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.h2 = h2.connection.H2Connection(
            h2.config.H2Configuration(
                client_side=True,
                header_encoding="utf-8",
                normalize_outbound_headers=False,
                validate_outbound_headers=False,  # `H2Client._header_block` checks what can vary
            )
        )
        self.h2.encoder = PlainEncoder()
        self.h2.initiate_connection()
        self.h2.update_settings({h2.settings.SettingCodes.ENABLE_PUSH: 0})
        self.writer.write(self.h2.data_to_send())
        self.streams: dict[int, _Stream] = {}
        self.window_open = asyncio.Event()
        self.closed = False
        self._flush_pending = False
        self.loop = asyncio.get_running_loop()
        self.reading = self.loop.create_task(self._read())

    async def _read(self) -> None:
        error: Exception = H2Error("connection closed")
        try:
            while True:
                data = await self.reader.read(65536)
                if not data:
                    break
                for event in self.h2.receive_data(data):
                    self._on(event)
                self._flush()
                if self.closed:
                    break
        except (OSError, ssl.SSLError, h2.exceptions.ProtocolError) as exc:
            error = H2Error(f"connection lost: {type(exc).__name__}")
        finally:
            self.closed = True
            self.window_open.set()
            for stream in self.streams.values():
                if not stream.future.done():
                    stream.future.set_exception(error)
            self.streams.clear()
            with contextlib.suppress(Exception):
                self.writer.close()

    def _on(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.ResponseReceived):
            stream = self.streams.get(event.stream_id)
            if stream is not None:
                stream.headers = {str(k): str(v) for k, v in event.headers or []}
        elif isinstance(event, h2.events.DataReceived):
            stream = self.streams.get(event.stream_id)
            if stream is not None:
                stream.body.extend(event.data or b"")
            self.h2.acknowledge_received_data(event.flow_controlled_length or 0, event.stream_id or 0)
        elif isinstance(event, h2.events.StreamEnded):
            stream = self.streams.pop(event.stream_id or 0, None)
            if stream is not None and not stream.future.done():
                status = int(stream.headers.pop(":status", "0"))
                stream.future.set_result(H2Response(status, stream.headers, bytes(stream.body)))
        elif isinstance(event, h2.events.StreamReset):
            stream = self.streams.pop(event.stream_id or 0, None)
            if stream is not None and not stream.future.done():
                stream.future.set_exception(H2Error(f"stream reset (error {event.error_code})"))
        elif isinstance(event, h2.events.WindowUpdated):
            self.window_open.set()
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.closed = True  # GOAWAY: streams above last_stream_id fail in `finally`, the rest are done

    def _flush(self) -> None:
        data = self.h2.data_to_send()
        if data:
            self.writer.write(data)

    def _flush_soon(self) -> None:
        """Write what h2 has queued at the end of this event-loop turn (one write for many requests)."""
        if not self._flush_pending:
            self._flush_pending = True
            self.loop.call_soon(self._flush_now)

    def _flush_now(self) -> None:
        self._flush_pending = False
        if not self.closed:
            self._flush()

    def request(self, headers: list[HeaderTuple], body: bytes) -> tuple[int, asyncio.Future[H2Response]]:
        """Open a stream with this header block and body; the future gets the answer."""
        stream_id = self.h2.get_next_available_stream_id()
        future: asyncio.Future[H2Response] = self.loop.create_future()
        self.streams[stream_id] = _Stream(future)
        try:
            self.h2.send_headers(stream_id, headers, end_stream=not body)
        except BaseException:
            del self.streams[stream_id]
            raise
        if body:
            window = min(self.h2.local_flow_control_window(stream_id), self.h2.max_outbound_frame_size)
            if len(body) <= window:
                self.h2.send_data(stream_id, body, end_stream=True)
            else:  # a large body or a closed window: the rest waits for WINDOW_UPDATE frames
                self.loop.create_task(self._send_body(stream_id, body))
        self._flush_soon()
        return stream_id, future

    async def _send_body(self, stream_id: int, body: bytes) -> None:
        sent = 0
        try:
            while sent < len(body) and not self.closed and stream_id in self.streams:
                window = min(self.h2.local_flow_control_window(stream_id), self.h2.max_outbound_frame_size)
                if window <= 0:
                    self._flush()
                    self.window_open.clear()
                    await self.window_open.wait()
                    continue
                chunk = body[sent : sent + window]
                sent += len(chunk)
                self.h2.send_data(stream_id, chunk, end_stream=sent >= len(body))
                self._flush_soon()
        except h2.exceptions.ProtocolError as exc:
            self.fail(stream_id, H2Error(f"{type(exc).__name__}"))

    def fail(self, stream_id: int, error: H2Error) -> None:
        """Give up on a stream (its timeout): the caller gets `error`, the server a RST_STREAM."""
        stream = self.streams.pop(stream_id, None)
        if stream is not None and not stream.future.done():
            stream.future.set_exception(error)
        if not self.closed:
            with contextlib.suppress(h2.exceptions.ProtocolError):
                self.h2.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
                self._flush_soon()


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
        self._pseudo = [HeaderTuple(b":method", b"POST"), HeaderTuple(b":authority", self.authority.encode()),
                        HeaderTuple(b":scheme", self.scheme.encode())]  # fmt: skip
        self.ssl_context: ssl.SSLContext | None = None
        if self.scheme == "https":
            self.ssl_context = ssl_context or ssl.create_default_context()
            self.ssl_context.set_alpn_protocols(["h2"])
        self._connection: _Connection | None = None
        self._connecting: asyncio.Lock | None = None

    async def _connect(self) -> _Connection:
        if self._connection is not None and not self._connection.closed:
            return self._connection
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._connection is None or self._connection.closed:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port, ssl=self.ssl_context,
                                            server_hostname=self.host if self.ssl_context else None),
                    self.timeout,
                )  # fmt: skip
                if self.ssl_context is not None:
                    protocol = writer.get_extra_info("ssl_object").selected_alpn_protocol()
                    if protocol != "h2":
                        writer.close()
                        raise H2Error(f"{self.authority} did not agree to HTTP/2 (ALPN {protocol!r})")
                self._connection = _Connection(reader, writer)
            return self._connection

    def _header_block(self, path: str, headers: dict[str, str], body: bytes) -> list[HeaderTuple]:
        """The request's header block, checked here rather than by h2's generic validation (a fifth of a
        request's CPU): the pseudo-headers are this client's own, so what can be wrong is a value (a
        device token, an app's topic) with a control character or surrounding white space, which would
        make the server drop the whole connection."""
        if _UNSAFE.search(path):
            raise H2BadRequest("the request path has a control character or surrounding white space")
        block = [*self._pseudo, NeverIndexedHeaderTuple(b":path", (self.prefix + path).encode())]
        for name, value in headers.items():
            name = name.lower()
            if _UNSAFE.search(value) or not name or not _NAME.fullmatch(name):
                raise H2BadRequest(f"header {name[:40]!r}: a control character or surrounding white space")
            kind = NeverIndexedHeaderTuple if name in self.per_request_headers else HeaderTuple
            block.append(kind(name.encode(), value.encode()))
        block.append(NeverIndexedHeaderTuple(b"content-length", str(len(body)).encode()))
        return block

    async def post(self, path: str, *, headers: dict[str, str], body: bytes) -> H2Response:
        try:
            connection = await self._connect()
            stream_id, future = connection.request(self._header_block(path, headers, body), body)
        except (OSError, ssl.SSLError, TimeoutError, h2.exceptions.ProtocolError) as exc:
            raise H2Error(f"{type(exc).__name__}: {exc}"[:200]) from None
        timer = connection.loop.call_later(
            self.timeout, connection.fail, stream_id, H2Error(f"no answer within {self.timeout:g} s")
        )
        try:
            return await future
        finally:
            timer.cancel()

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None and not connection.closed:
            with contextlib.suppress(Exception):
                connection.h2.close_connection()
                connection._flush()
                connection.writer.close()
            connection.reading.cancel()
            with contextlib.suppress(BaseException):
                await connection.reading
        if connection is not None:
            # The TLS close is asynchronous: awaited here, so the transport is not left to the garbage
            # collector of a closed loop ("Event loop is closed").
            with contextlib.suppress(Exception):
                await asyncio.wait_for(connection.writer.wait_closed(), 2)
