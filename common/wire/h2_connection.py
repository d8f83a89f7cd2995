"""One HTTP/2 connection of the push providers' client (common/wire/h2client.py): the client's half of
the protocol (RFC 9113), driven by asyncio's transport callbacks. It frames requests and reads answers
itself; the module docstring of h2client.py says why and what it keeps cheap."""

from __future__ import annotations

import asyncio
import struct
import typing
from collections import deque
from dataclasses import dataclass, field

from common.wire.hpack_codec import H2ProtocolError, HeaderDecoder, HeaderEncoder


class H2Error(Exception):
    """The request did not get an answer (connection lost, stream reset, timeout)."""


@dataclass
class H2Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def header(self, name: str) -> str | None:
        return self.headers.get(name)


# --- framing (RFC 9113) ----------------------------------------------------------------------------------

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_HEAD = struct.Struct(">BHBBL")  # length (24 bits, as 8 + 16), type, flags, stream id
_DATA, _HEADERS, _PRIORITY, _RST_STREAM, _SETTINGS, _PUSH_PROMISE, _PING, _GOAWAY, _WINDOW_UPDATE, \
    _CONTINUATION = range(10)  # fmt: skip
_END_STREAM, _ACK, _END_HEADERS, _PADDED, _PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
_CANCEL, _NO_ERROR, _PROTOCOL_ERROR, _FLOW_CONTROL_ERROR = 0x8, 0x0, 0x1, 0x3
_MAX_WINDOW = (1 << 31) - 1
_STREAM_WINDOW = 1 << 24  # what each stream may receive before a WINDOW_UPDATE (answers are small)
_CONNECTION_WINDOW = 1 << 30
_MAX_FRAME = 16384  # what this client accepts (the default; it announces no other)


def _frame(kind: int, flags: int, stream_id: int, payload: bytes | memoryview = b"") -> bytes:
    n = len(payload)
    return _HEAD.pack(n >> 16, n & 0xFFFF, kind, flags, stream_id) + payload


@dataclass
class _Stream:
    stream_id: int
    future: asyncio.Future[H2Response]
    http_status: int = 0  # the answer's :status, 0 until its headers came
    headers: dict[str, str] = field(default_factory=dict)
    body: bytearray = field(default_factory=bytearray)
    window: int = 65535  # what the server lets this stream send
    received: int = 0  # bytes received since this stream's window was last opened again
    outgoing: memoryview | None = None  # the request body not sent yet
    sent: int = 0
    deadline: float = 0.0  # loop time after which the stream is given up


class Transport(typing.Protocol):
    """What the connection needs of its transport. asyncio's transports have it, and so have transports
    that do not subclass `asyncio.Transport` (uvloop's), so no class is asked for."""

    def write(self, data: bytes) -> None: ...
    def close(self) -> None: ...
    def is_closing(self) -> bool: ...


class H2Connection(asyncio.Protocol):
    """One HTTP/2 connection: the client's half of the protocol, driven by the transport's callbacks."""

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        self.loop = loop
        self.timeout = timeout
        self._watching = False
        self.transport: Transport | None = None
        self.encoder = HeaderEncoder()
        self.decoder = HeaderDecoder()
        self.streams: dict[int, _Stream] = {}
        self.next_stream_id = 1
        self.closed = False  # no new streams (GOAWAY received, or the connection is gone)
        self.lost: asyncio.Future[None] = loop.create_future()
        self.send_window = 65535  # the connection's: what the server lets this client send
        self.initial_window = 65535  # each new stream's, from the server's SETTINGS
        self.max_frame = 16384
        self.max_streams = _MAX_WINDOW
        self.received = 0
        self.waiting: deque[_Stream] = deque()  # bodies waiting for the server's windows, in order
        self._buffer = bytearray()
        self._continuing: tuple[int, int, bytearray] | None = None  # a header block split in frames
        self._out = bytearray()
        self._flush_pending = False
        self._error: H2Error = H2Error("connection closed")

    # transport callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = typing.cast(Transport, transport)
        settings = struct.pack(">HLHL", 0x2, 0, 0x4, _STREAM_WINDOW)  # no server push; stream windows
        self.transport.write(
            _PREFACE
            + _frame(_SETTINGS, 0, 0, settings)
            + _frame(_WINDOW_UPDATE, 0, 0, struct.pack(">L", _CONNECTION_WINDOW - 65535))
        )

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None and self._error.args == ("connection closed",):
            self._error = H2Error(f"connection lost: {type(exc).__name__}")
        self._close(self._error)
        if not self.lost.done():
            self.lost.set_result(None)

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        offset, end = 0, len(buffer)
        try:
            while end - offset >= 9:
                high, low, kind, flags, stream_id = _HEAD.unpack_from(buffer, offset)
                length = (high << 16) | low
                if length > _MAX_FRAME:
                    raise H2ProtocolError(f"a frame of {length} bytes", 0x6)
                if end - offset < 9 + length:
                    break
                payload = bytes(buffer[offset + 9 : offset + 9 + length])
                offset += 9 + length
                self._on_frame(kind, flags, stream_id & _MAX_WINDOW, payload)
        except H2ProtocolError as exc:
            self._abort(exc)
            return
        del buffer[:offset]
        self._flush()

    # frames in

    def _on_frame(self, kind: int, flags: int, stream_id: int, payload: bytes) -> None:
        if self._continuing is not None and kind != _CONTINUATION:
            raise H2ProtocolError("a header block interrupted")
        if kind == _DATA:
            self._on_data(flags, stream_id, payload)
        elif kind == _HEADERS:
            if not stream_id:
                raise H2ProtocolError("HEADERS on stream 0")
            if flags & _PADDED:
                payload = _unpad(payload)
            if flags & _PRIORITY_FLAG:
                payload = payload[5:]
            if flags & _END_HEADERS:
                self._on_headers(stream_id, flags, payload)
            else:
                self._continuing = (stream_id, flags, bytearray(payload))
        elif kind == _CONTINUATION:
            if self._continuing is None or self._continuing[0] != stream_id:
                raise H2ProtocolError("CONTINUATION out of place")
            self._continuing[2].extend(payload)
            if flags & _END_HEADERS:
                stream_id, first_flags, block = self._continuing
                self._continuing = None
                self._on_headers(stream_id, first_flags, bytes(block))
        elif kind == _RST_STREAM:
            code = int.from_bytes(payload[:4], "big")
            self._end_stream(stream_id, H2Error(f"stream reset (error {code})"))
        elif kind == _SETTINGS:
            if not flags & _ACK:
                self._on_settings(payload)
        elif kind == _PING:
            if not flags & _ACK:
                self._out += _frame(_PING, _ACK, 0, payload)
        elif kind == _GOAWAY:
            last, code = struct.unpack_from(">LL", payload)
            self._on_goaway(last & _MAX_WINDOW, code)
        elif kind == _WINDOW_UPDATE:
            increment = int.from_bytes(payload[:4], "big") & _MAX_WINDOW
            if stream_id == 0:
                self.send_window += increment
                if self.send_window > _MAX_WINDOW:
                    raise H2ProtocolError("the connection's window overflowed", _FLOW_CONTROL_ERROR)
            elif (stream := self.streams.get(stream_id)) is not None:
                stream.window += increment
            self._send_waiting()
        elif kind == _PUSH_PROMISE:
            raise H2ProtocolError("PUSH_PROMISE although push is disabled")
        # PRIORITY and frame types this client does not know are ignored (RFC 9113, 4.1)

    def _on_data(self, flags: int, stream_id: int, payload: bytes) -> None:
        counted = len(payload)  # padding included: it counts against the windows
        if flags & _PADDED:
            payload = _unpad(payload)
        self.received += counted
        if self.received >= _CONNECTION_WINDOW // 2:
            self._out += _frame(_WINDOW_UPDATE, 0, 0, struct.pack(">L", self.received))
            self.received = 0
        stream = self.streams.get(stream_id)
        if stream is None:
            return  # a stream given up (timeout): the connection's window is replenished above
        stream.body += payload
        stream.received += counted
        if stream.received >= _STREAM_WINDOW // 2 and not flags & _END_STREAM:
            self._out += _frame(_WINDOW_UPDATE, 0, stream_id, struct.pack(">L", stream.received))
            stream.received = 0
        if flags & _END_STREAM:
            self._finish(stream)

    def _on_headers(self, stream_id: int, flags: int, block: bytes) -> None:
        headers = self.decoder.decode(block)  # even for a stream given up: the table is the connection's
        stream = self.streams.get(stream_id)
        if stream is None:
            return
        if not stream.http_status:  # the answer's headers (1xx informational ones are skipped)
            fields = dict(headers)
            status = int(fields.pop(":status", "0") or 0)
            if 100 <= status < 200 and not flags & _END_STREAM:
                return
            stream.http_status, stream.headers = status, fields
        if flags & _END_STREAM:  # with the headers, or trailers
            self._finish(stream)

    def _on_settings(self, payload: bytes) -> None:
        for offset in range(0, len(payload) - 5, 6):
            key, value = struct.unpack_from(">HL", payload, offset)
            if key == 0x1:
                self.encoder.set_max_size(value)
            elif key == 0x3:
                self.max_streams = value
            elif key == 0x4:
                if value > _MAX_WINDOW:
                    raise H2ProtocolError("SETTINGS_INITIAL_WINDOW_SIZE too large", _FLOW_CONTROL_ERROR)
                delta, self.initial_window = value - self.initial_window, value
                for stream in self.streams.values():
                    stream.window += delta
            elif key == 0x5:
                self.max_frame = value
        self._out += _frame(_SETTINGS, _ACK, 0)
        self._send_waiting()

    def _on_goaway(self, last_stream_id: int, code: int) -> None:
        """No new streams; those above `last_stream_id` were not processed (safe to retry), the others
        still get their answers; the connection closes when none is left."""
        self.closed = True
        self._error = H2Error(f"connection closed by the server (GOAWAY, error {code})")
        for stream_id in [s for s in self.streams if s > last_stream_id]:
            self._end_stream(stream_id, self._error)
        if not self.streams and self.transport is not None:
            self.transport.close()

    # streams

    def _finish(self, stream: _Stream) -> None:
        del self.streams[stream.stream_id]
        if stream.outgoing is not None:  # answered before the body was all sent: stop sending it
            stream.outgoing = None
            self._out += _frame(_RST_STREAM, 0, stream.stream_id, struct.pack(">L", _NO_ERROR))
        if not stream.future.done():
            stream.future.set_result(H2Response(stream.http_status, stream.headers, bytes(stream.body)))
        if self.closed and not self.streams and self.transport is not None:
            self.transport.close()  # after a GOAWAY, the last answer

    def _end_stream(self, stream_id: int, error: H2Error) -> None:
        stream = self.streams.pop(stream_id, None)
        if stream is not None:
            stream.outgoing = None
            if not stream.future.done():
                stream.future.set_exception(error)

    def request(self, block: bytes, body: bytes) -> tuple[int, asyncio.Future[H2Response]]:
        """Open a stream with this header block (HPACK, encoded by `self.encoder`) and body."""
        if len(self.streams) >= self.max_streams:
            raise H2Error(f"the server allows {self.max_streams} streams at once")
        stream_id = self.next_stream_id
        self.next_stream_id += 2
        if self.next_stream_id > _MAX_WINDOW:
            self.closed = True  # stream ids used up: the next request opens a new connection
        future: asyncio.Future[H2Response] = self.loop.create_future()
        stream = _Stream(
            stream_id, future, window=self.initial_window, deadline=self.loop.time() + self.timeout
        )
        if not self._watching:
            self._watching = True
            self.loop.call_later(self._watch_every(), self._expire)
        self.streams[stream_id] = stream
        out = self._out
        for start in range(0, max(len(block), 1), self.max_frame):
            last = start + self.max_frame >= len(block)
            flags = (_END_HEADERS if last else 0) | (0 if body or start else _END_STREAM)
            out += _frame(_HEADERS if not start else _CONTINUATION, flags, stream_id,
                          block[start : start + self.max_frame])  # fmt: skip
        if body:
            stream.outgoing = memoryview(body)
            if self.waiting or not self._send_body(stream):
                self.waiting.append(stream)
        self._flush_soon()
        return stream_id, future

    def _send_body(self, stream: _Stream) -> bool:
        """As much of the body as the windows allow; True once all of it is out."""
        body = stream.outgoing
        while body is not None:
            n = min(len(body) - stream.sent, self.send_window, stream.window, self.max_frame)
            if n <= 0:
                return False
            stream.sent += n
            self.send_window -= n
            stream.window -= n
            done = stream.sent >= len(body)
            self._out += _frame(_DATA, _END_STREAM if done else 0, stream.stream_id,
                                body[stream.sent - n : stream.sent])  # fmt: skip
            if done:
                stream.outgoing = None
                return True
        return True

    def _send_waiting(self) -> None:
        """Bodies that waited for the windows, in the order they came, while the connection's window
        lasts (a stream whose own window is shut does not hold up the others)."""
        waiting = self.waiting
        for _ in range(len(waiting)):
            if self.send_window <= 0:
                break
            stream = waiting.popleft()
            if stream.outgoing is not None and not self._send_body(stream):
                waiting.append(stream)

    def _watch_every(self) -> float:
        return min(max(self.timeout / 10, 0.05), 1.0)

    def _expire(self) -> None:
        """Give up the streams past their deadline. One timer per connection, not one per request: the
        streams are kept in the order they were opened, all with the same timeout, so the expired ones are
        the first few."""
        now = self.loop.time()
        for stream in list(self.streams.values()):
            if stream.deadline > now:
                break
            self.fail(stream.stream_id, H2Error(f"no answer within {self.timeout:g} s"))
        self._watching = bool(self.streams) and not self.lost.done()
        if self._watching:
            self.loop.call_later(self._watch_every(), self._expire)

    def fail(self, stream_id: int, error: H2Error) -> None:
        """Give up on a stream (its timeout): the caller gets `error`, the server a RST_STREAM."""
        if stream_id in self.streams:
            self._end_stream(stream_id, error)
            if self.transport is not None and not self.transport.is_closing():
                self._out += _frame(_RST_STREAM, 0, stream_id, struct.pack(">L", _CANCEL))
                self._flush_soon()

    # writing and closing

    def _flush(self) -> None:
        if self._out and self.transport is not None and not self.transport.is_closing():
            self.transport.write(bytes(self._out))
        self._out.clear()

    def _flush_soon(self) -> None:
        """Write what is queued at the end of this event-loop turn (one write for many requests)."""
        if not self._flush_pending:
            self._flush_pending = True
            self.loop.call_soon(self._flush_now)

    def _flush_now(self) -> None:
        self._flush_pending = False
        self._flush()

    def _close(self, error: H2Error) -> None:
        self.closed = True
        for stream_id in list(self.streams):
            self._end_stream(stream_id, error)
        self.waiting.clear()

    def _abort(self, exc: H2ProtocolError) -> None:
        """The server broke the protocol: GOAWAY with the error, every stream failed, the socket closed."""
        self._error = H2Error(f"connection lost: protocol error ({exc})")
        self._out += _frame(_GOAWAY, 0, 0, struct.pack(">LL", 0, exc.code))  # it opened no stream
        self._flush()
        self._close(self._error)
        if self.transport is not None:
            self.transport.close()

    def goodbye(self) -> None:
        """Close as a client does: GOAWAY (no error), then the socket."""
        self.closed = True
        self._out += _frame(_GOAWAY, 0, 0, struct.pack(">LL", 0, _NO_ERROR))
        self._flush()
        if self.transport is not None:
            self.transport.close()


def _unpad(payload: bytes) -> bytes:
    if not payload or payload[0] >= len(payload):
        raise H2ProtocolError("bad padding")
    return payload[1 : len(payload) - payload[0]]
