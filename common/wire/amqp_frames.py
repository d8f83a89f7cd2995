"""The AMQP 0-9-1 frames of one `basic.publish`, encoded for a whole chunk at once.

py-amqp encodes each message's properties through its generic table writer and hands every message to the
socket on its own, a large share of the dispatch loop's time (docs/benchmarks.md, "Figures moved out of
the code"). The project's messages always carry the same properties
(JSON, persistent, a message id, three headers), so their bytes are assembled here from a cached prefix
and the chunk goes to the socket in a few large writes. The bytes are the ones py-amqp writes for the
same `amqp.Message` (tests/wire/test_amqp.py compares them).
"""

from __future__ import annotations

from collections.abc import Callable
from struct import Struct

_FRAME_HEAD = Struct(">BHI")
_CONTENT_HEAD = Struct(">HHQ")
_LONG = Struct(">I")
_INT = Struct(">i")
_LONGLONG = Struct(">q")
_FRAME_END = b"\xce"
_BASIC_CLASS = 60
_BASIC_PUBLISH = Struct(">HH").pack(60, 40)
# Property flags of content_type, content_encoding, application_headers, delivery_mode and message_id (in
# py-amqp's `Message.PROPERTIES` order, highest bit first), then the first two values and delivery_mode.
_FLAGS = 0x8000 | 0x4000 | 0x2000 | 0x1000 | 0x0080
# Flush the buffer to the socket past this size: a chunk of large payloads is not joined in memory whole.
_FLUSH_BYTES = 1 << 20


def shortstr(value: str) -> bytes:
    raw = value.encode("utf-8", "surrogatepass")
    if len(raw) > 255:
        raise ValueError(f"AMQP short string over 255 bytes: {value[:40]!r}...")
    return bytes((len(raw),)) + raw


def _longstr(value: str) -> bytes:
    raw = value.encode("utf-8", "surrogatepass")
    return b"S" + _LONG.pack(len(raw)) + raw


def _int(value: int) -> bytes:
    # py-amqp's rule: a signed 32-bit 'I' within ±(2^31 - 1), else a signed 64-bit 'L'.
    if -2147483647 <= value <= 2147483647:
        return b"I" + _INT.pack(value)
    return b"L" + _LONGLONG.pack(value)


class PublishEncoder:
    """Frames of `basic.publish` (exchange "", mandatory) on one channel, JSON bodies, persistent."""

    def __init__(self, channel_id: int, frame_max: int) -> None:
        self._channel_id = channel_id
        self._body_max = frame_max - 8  # a frame's type, channel, size and end octet
        self._methods: dict[str, bytes] = {}
        self._prefix = (
            _FLAGS.to_bytes(2, "big") + shortstr("application/json") + shortstr("utf-8")
        )  # the table, delivery_mode and message_id follow per message

    def method_frame(self, queue: str) -> bytes:
        """`basic.publish(ticket=0, exchange="", routing_key=queue, mandatory=True, immediate=False)`."""
        frame = self._methods.get(queue)
        if frame is None:
            payload = _BASIC_PUBLISH + b"\x00\x00" + shortstr("") + shortstr(queue) + b"\x01"
            frame = _FRAME_HEAD.pack(1, self._channel_id, len(payload)) + payload + _FRAME_END
            self._methods[queue] = frame
        return frame

    def message(
        self, queue: str, body: bytes, *, message_id: str, job_key: str, fire_at: str, attempt: int
    ) -> list[bytes]:
        """The method, content header and body frames of one message, as parts to join."""
        table = (
            b"\x07job_key"
            + _longstr(job_key)
            + b"\x07fire_at"
            + _longstr(fire_at)
            + b"\x07attempt"
            + _int(attempt)
        )
        header = (
            _CONTENT_HEAD.pack(_BASIC_CLASS, 0, len(body))
            + self._prefix
            + _LONG.pack(len(table))
            + table
            + b"\x02"
            + shortstr(message_id)
        )
        channel, size = self._channel_id, len(body)
        parts = [self.method_frame(queue), _FRAME_HEAD.pack(2, channel, len(header)), header, _FRAME_END]
        step = self._body_max
        for start in range(0, size, step):
            piece = body[start : start + step] if size > step else body
            parts += (_FRAME_HEAD.pack(3, channel, len(piece)), piece, _FRAME_END)
        return parts


class FrameBuffer:
    """Frames gathered for one socket write, flushed past `_FLUSH_BYTES` and at the end of a chunk."""

    def __init__(self, write: Callable[[bytes], object]) -> None:
        self._write = write
        self._parts: list[bytes] = []
        self._size = 0

    def add(self, parts: list[bytes]) -> None:
        self._parts += parts
        self._size += sum(map(len, parts))
        if self._size >= _FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self._parts:
            data = b"".join(self._parts)
            self._parts, self._size = [], 0
            self._write(data)
