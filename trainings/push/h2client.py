"""A lean HTTP/2 client for the push providers: one connection per origin, every request its own stream.

Why not httpx: under the gateway's load httpx/httpcore/anyio spent 2-3 ms of CPU per request (connection
pool scans, anyio attribute lookups), ten times what the protocol work costs. Why not the `h2` library
either: its generic state machine (per stream: an event-driven state table, header validation passes, a
scan of every open stream to count them, frame objects serialized one by one, an asyncio task for a body
that waits for flow control) was most of the gateway's CPU per push. A push client needs little of
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
import struct
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import hpack
from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH
from hpack.table import HeaderTable


class H2Error(Exception):
    """The request did not get an answer (connection lost, stream reset, timeout)."""


class H2BadRequest(ValueError):
    """The request cannot be sent as asked (a header value with a control character): nothing went out,
    and trying again would not help."""


class _ProtocolError(Exception):
    """The server broke HTTP/2: the connection is closed with GOAWAY and this error code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


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
    """hpack's encoder with literals sent as they are (the loopback peers' answers use it)."""

    def encode(self, headers: Any, huffman: bool = True) -> bytes:
        return super().encode(headers, huffman=False)


# --- HPACK (RFC 7541), the encoding side -----------------------------------------------------------------

_STATIC_NAMES: dict[bytes, int] = {}
for _index, (_name, _) in enumerate(HeaderTable.STATIC_TABLE, start=1):
    _STATIC_NAMES.setdefault(_name, _index)


def _integer(value: int, prefix_bits: int, first: int) -> bytes:
    """An HPACK integer with an N-bit prefix, `first` holding the representation's pattern bits."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((first | value,))
    out = bytearray((first | limit,))
    value -= limit
    while value >= 128:
        out.append((value & 127) | 128)
        value >>= 7
    out.append(value)
    return bytes(out)


def _literal(name: bytes, value: bytes, pattern: int, prefix_bits: int) -> bytes:
    """A literal field (never Huffman-coded), its name from the static table when it is there."""
    index = _STATIC_NAMES.get(name, 0)
    head = _integer(index, prefix_bits, pattern)
    if not index:
        head += _integer(len(name), 7, 0) + name
    return head + _integer(len(value), 7, 0) + value


class HeaderEncoder:
    """HPACK for this client's requests. Repeating fields go into the dynamic table once and are one
    index byte afterwards; per-request fields are never indexed. The table holds only what this encoder
    inserted, so an entry's index is known without searching: `_indexed` maps a field to its bytes."""

    def __init__(self, max_size: int = 4096) -> None:
        self.max_size = max_size
        self.entries: deque[tuple[bytes, bytes]] = deque()  # newest first (index 62 is entries[0])
        self.size = 0
        self._indexed: dict[tuple[bytes, bytes], bytes] = {}
        self._size_update: int | None = None

    def set_max_size(self, size: int) -> None:
        """The server's SETTINGS_HEADER_TABLE_SIZE: the table shrinks (announced in the next block)."""
        size = min(size, 4096)
        if size != self.max_size:
            self.max_size = size
            self._size_update = size
            self._evict()

    @property
    def dynamic_entries(self) -> list[tuple[bytes, bytes]]:
        return list(self.entries)

    def _evict(self) -> None:
        while self.size > self.max_size:
            name, value = self.entries.pop()
            self.size -= len(name) + len(value) + 32
        self._reindex()

    def _reindex(self) -> None:
        self._indexed = {entry: _integer(62 + i, 7, 0x80) for i, entry in enumerate(self.entries)}

    def start(self) -> bytes:
        """What a header block begins with: a table size update when one is owed."""
        if self._size_update is None:
            return b""
        self._size_update = None
        return _integer(self.max_size, 5, 0x20)

    def indexed(self, name: bytes, value: bytes) -> bytes:
        """A repeating field: its index when in the table, else a literal that enters it."""
        encoded = self._indexed.get((name, value))
        if encoded is not None:
            return encoded
        size = len(name) + len(value) + 32
        if size > self.max_size:
            return _literal(name, value, 0x00, 4)
        self.entries.appendleft((name, value))
        self.size += size
        self._evict()  # also renumbers: every entry moved one index up
        return _literal(name, value, 0x40, 6)


_STATIC_FIELDS: list[tuple[str, str]] = [(n.decode(), v.decode()) for n, v in HeaderTable.STATIC_TABLE]
_MAX_HEADER_LIST = 256 * 1024  # what one answer's header fields may add up to (decoded)


def _read_integer(data: bytes, offset: int, prefix_bits: int) -> tuple[int, int]:
    """An HPACK integer at `offset` with an N-bit prefix: (value, offset after it)."""
    limit = (1 << prefix_bits) - 1
    value = data[offset] & limit
    offset += 1
    if value < limit:
        return value, offset
    shift = 0
    while True:
        if offset >= len(data) or shift > 28:
            raise _ProtocolError("header block: a bad integer", _COMPRESSION_ERROR)
        byte = data[offset]
        offset += 1
        value += (byte & 127) << shift
        shift += 7
        if not byte & 128:
            return value, offset


_huffman_table: list[tuple[int, bytes] | None] = []  # (state, byte) -> (next state, decoded bytes)
_huffman_ends: frozenset[int] = frozenset()  # states a string may end in (up to 7 bits of 1s as padding)


def _huffman_build() -> None:
    """A byte-at-a-time decoder for HPACK's Huffman code (RFC 7541, appendix B), built on first use: hpack's
    decoder walks it four bits at a time in Python, most of what an answer's header block cost."""
    global _huffman_table, _huffman_ends
    children: list[list[int]] = [[-1, -1]]  # the code's tree; a leaf has no children, its symbol below
    symbols: dict[int, int] = {}
    for symbol, (code, bits) in enumerate(zip(REQUEST_CODES, REQUEST_CODES_LENGTH, strict=True)):
        node = 0
        for i in range(bits - 1, -1, -1):
            bit = (code >> i) & 1
            if i == 0:
                symbols[len(children)] = symbol
                children[node][bit] = len(children)
                children.append([])
            else:
                if children[node][bit] == -1:
                    children[node][bit] = len(children)
                    children.append([-1, -1])
                node = children[node][bit]
    table: list[tuple[int, bytes] | None] = [None] * (len(children) * 256)
    for state, branches in enumerate(children):
        if not branches:
            continue
        for byte in range(256):
            node, out, valid = state, bytearray(), True
            for i in range(7, -1, -1):
                node = children[node][(byte >> i) & 1]
                leaf = symbols.get(node)
                if leaf is not None:
                    if leaf == 256:  # EOS inside a string is an error
                        valid = False
                        break
                    out.append(leaf)
                    node = 0
            table[state * 256 + byte] = (node, bytes(out)) if valid else None
    ends, node = {0}, 0
    for _ in range(7):
        node = children[node][1]
        ends.add(node)
    _huffman_table, _huffman_ends = table, frozenset(ends)


def _huffman_decode(data: bytes) -> bytes:
    if not _huffman_table:
        _huffman_build()
    table, state, out = _huffman_table, 0, bytearray()
    for byte in data:
        step = table[state * 256 + byte]
        if step is None:
            raise _ProtocolError("header block: EOS in a Huffman string", _COMPRESSION_ERROR)
        state = step[0]
        out += step[1]
    if state not in _huffman_ends:
        raise _ProtocolError("header block: bad Huffman padding", _COMPRESSION_ERROR)
    return bytes(out)


def _read_string(data: bytes, offset: int) -> tuple[str, int]:
    huffman = data[offset] & 0x80
    length, offset = _read_integer(data, offset, 7)
    end = offset + length
    if end > len(data):
        raise _ProtocolError("header block: a string past its end", _COMPRESSION_ERROR)
    raw = data[offset:end]
    if huffman:
        raw = _huffman_decode(raw)
    return raw.decode("utf-8", "replace"), end


class HeaderDecoder:
    """HPACK for the answers (RFC 7541, 6): the server's dynamic table mirrored, Huffman-coded strings
    decoded a byte at a time. hpack's own decoder cost two to four times as much per answer (a debug log
    call and a tuple object per field, a Huffman walk four bits at a time)."""

    def __init__(self, max_size: int = 4096) -> None:
        self.max_size = max_size  # this client's SETTINGS_HEADER_TABLE_SIZE (the default, never changed)
        self.size_limit = max_size  # the size the server last chose, at most `max_size`
        self.entries: deque[tuple[str, str]] = deque()  # newest first: index 62 is entries[0]
        self.size = 0

    def _field(self, index: int) -> tuple[str, str]:
        if 0 < index <= 61:
            return _STATIC_FIELDS[index - 1]
        if 62 <= index < 62 + len(self.entries):
            return self.entries[index - 62]
        raise _ProtocolError(f"header block: no table entry {index}", _COMPRESSION_ERROR)

    def _add(self, name: str, value: str) -> None:
        size = len(name.encode()) + len(value.encode()) + 32
        self.entries.appendleft((name, value))
        self.size += size
        self._evict()

    def _evict(self) -> None:
        while self.size > self.size_limit and self.entries:
            name, value = self.entries.pop()
            self.size -= len(name.encode()) + len(value.encode()) + 32

    def decode(self, data: bytes) -> list[tuple[str, str]]:
        try:
            return self._decode(data)
        except IndexError:
            raise _ProtocolError("header block: cut short", _COMPRESSION_ERROR) from None

    def _decode(self, data: bytes) -> list[tuple[str, str]]:
        fields: list[tuple[str, str]] = []
        offset, end, total = 0, len(data), 0
        while offset < end:
            byte = data[offset]
            if byte & 0x80:  # indexed field
                index, offset = _read_integer(data, offset, 7)
                field = self._field(index)
            elif byte & 0xE0 == 0x20:  # dynamic table size update
                size, offset = _read_integer(data, offset, 5)
                if size > self.max_size:
                    raise _ProtocolError("header block: table size above the setting", _COMPRESSION_ERROR)
                self.size_limit = size
                self._evict()
                continue
            else:  # a literal: with incremental indexing (01), without (0000) or never indexed (0001)
                indexing = byte & 0x40
                index, offset = _read_integer(data, offset, 6 if indexing else 4)
                if index:
                    name = self._field(index)[0]
                else:
                    name, offset = _read_string(data, offset)
                if offset >= end:
                    raise _ProtocolError("header block: a field without its value", _COMPRESSION_ERROR)
                value, offset = _read_string(data, offset)
                field = (name, value)
                if indexing:
                    self._add(name, value)
            total += len(field[0]) + len(field[1]) + 32
            if total > _MAX_HEADER_LIST:
                raise _ProtocolError("header block: too large", _COMPRESSION_ERROR)
            fields.append(field)
        return fields


# --- framing (RFC 9113) ----------------------------------------------------------------------------------

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_HEAD = struct.Struct(">BHBBL")  # length (24 bits, as 8 + 16), type, flags, stream id
_DATA, _HEADERS, _PRIORITY, _RST_STREAM, _SETTINGS, _PUSH_PROMISE, _PING, _GOAWAY, _WINDOW_UPDATE, \
    _CONTINUATION = range(10)  # fmt: skip
_END_STREAM, _ACK, _END_HEADERS, _PADDED, _PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
_CANCEL, _NO_ERROR, _PROTOCOL_ERROR, _FLOW_CONTROL_ERROR, _COMPRESSION_ERROR = 0x8, 0x0, 0x1, 0x3, 0x9
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
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytearray = field(default_factory=bytearray)
    window: int = 65535  # what the server lets this stream send
    received: int = 0  # bytes received since this stream's window was last opened again
    outgoing: memoryview | None = None  # the request body not sent yet
    sent: int = 0
    deadline: float = 0.0  # loop time after which the stream is given up


class _Connection(asyncio.Protocol):
    """One HTTP/2 connection: the client's half of the protocol, driven by the transport's callbacks."""

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        self.loop = loop
        self.timeout = timeout
        self._watching = False
        self.transport: asyncio.Transport | None = None
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
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        settings = struct.pack(">HLHL", 0x2, 0, 0x4, _STREAM_WINDOW)  # no server push; stream windows
        transport.write(
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
                    raise _ProtocolError(f"a frame of {length} bytes", 0x6)
                if end - offset < 9 + length:
                    break
                payload = bytes(buffer[offset + 9 : offset + 9 + length])
                offset += 9 + length
                self._on_frame(kind, flags, stream_id & _MAX_WINDOW, payload)
        except _ProtocolError as exc:
            self._abort(exc)
            return
        del buffer[:offset]
        self._flush()

    # frames in

    def _on_frame(self, kind: int, flags: int, stream_id: int, payload: bytes) -> None:
        if self._continuing is not None and kind != _CONTINUATION:
            raise _ProtocolError("a header block interrupted")
        if kind == _DATA:
            self._on_data(flags, stream_id, payload)
        elif kind == _HEADERS:
            if not stream_id:
                raise _ProtocolError("HEADERS on stream 0")
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
                raise _ProtocolError("CONTINUATION out of place")
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
                    raise _ProtocolError("the connection's window overflowed", _FLOW_CONTROL_ERROR)
            elif (stream := self.streams.get(stream_id)) is not None:
                stream.window += increment
            self._send_waiting()
        elif kind == _PUSH_PROMISE:
            raise _ProtocolError("PUSH_PROMISE although push is disabled")
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
        if not stream.status:  # the answer's headers (1xx informational ones are skipped)
            fields = dict(headers)
            status = int(fields.pop(":status", "0") or 0)
            if 100 <= status < 200 and not flags & _END_STREAM:
                return
            stream.status, stream.headers = status, fields
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
                    raise _ProtocolError("SETTINGS_INITIAL_WINDOW_SIZE too large", _FLOW_CONTROL_ERROR)
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
            stream.future.set_result(H2Response(stream.status, stream.headers, bytes(stream.body)))
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

    def _abort(self, exc: _ProtocolError) -> None:
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
        raise _ProtocolError("bad padding")
    return payload[1 : len(payload) - payload[0]]


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
        self._connection: _Connection | None = None
        self._connecting: asyncio.Lock | None = None
        # Per header name: the never-indexed literal's first bytes (its name), for per-request values.
        self._never_indexed: dict[bytes, bytes] = {}
        # The request line's fields: `:method POST` and `:scheme` are static-table entries, one byte each.
        self._start = bytes((0x83, 0x87 if self.scheme == "https" else 0x86))

    async def _connect(self) -> _Connection:
        if self._connection is not None and not self._connection.closed:
            return self._connection
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._connection is None or self._connection.closed:
                loop = asyncio.get_running_loop()
                transport, connection = await asyncio.wait_for(
                    loop.create_connection(lambda: _Connection(loop, self.timeout), self.host, self.port,
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
            head = self._never_indexed[name] = _literal(name, b"", 0x10, 4)[:-1]
        return head + _integer(len(value), 7, 0) + value

    def _header_block(self, encoder: HeaderEncoder, path: str, headers: dict[str, str], body: bytes) -> bytes:
        """The request's HPACK block, its values checked here: the pseudo-headers are this client's own,
        so what can be wrong is a value (a device token, an app's topic) with a control character or
        surrounding white space, which would make the server drop the whole connection."""
        if _UNSAFE.search(path):
            raise H2BadRequest("the request path has a control character or surrounding white space")
        fields = [(name, name.encode(), value.encode()) for name, value in headers.items()]
        indexed = encoder._indexed
        for name, name_bytes, value_bytes in fields:  # all checked before the table changes
            if (name_bytes, value_bytes) not in indexed and (
                _UNSAFE.search(headers[name]) or not _NAME.fullmatch(name)
            ):
                raise H2BadRequest(f"header {name[:40]!r}: a control character or surrounding white space")
        parts = [encoder.start(), self._start, encoder.indexed(b":authority", self.authority.encode()),
                 self._never(b":path", (self.prefix + path).encode())]  # fmt: skip
        for name, name_bytes, value_bytes in fields:
            if name in self.per_request_headers:
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
