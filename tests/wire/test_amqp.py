"""The publish frames the RabbitMQ transport assembles itself are the bytes py-amqp writes for the same
message (its own frame writer, run into a byte sink), whatever the body size, headers or queue."""

from __future__ import annotations

from types import SimpleNamespace

import amqp
import pytest
from amqp import spec
from amqp.method_framing import frame_writer
from amqp.serialization import dumps

from common.wire.amqp_frames import FrameBuffer, PublishEncoder

FRAME_MAX = 4096  # small, so that a body of a few kilobytes is split into several body frames


def _py_amqp_bytes(
    queue: str, body: bytes, message_id: str, job_key: str, fire_at: str, attempt: int
) -> bytes:
    sink: list[bytes] = []
    connection = SimpleNamespace(frame_max=FRAME_MAX, bytes_sent=0)
    write = frame_writer(connection, SimpleNamespace(write=lambda data: sink.append(bytes(data))))
    message = amqp.Message(
        body=body,
        content_type="application/json",
        content_encoding="utf-8",
        delivery_mode=2,
        message_id=message_id,
        application_headers={"job_key": job_key, "fire_at": fire_at, "attempt": attempt},
    )
    write(1, 7, spec.Basic.Publish, dumps("Bssbb", (0, "", queue, True, False)), message)
    return b"".join(sink)


@pytest.mark.parametrize(
    ("queue", "body", "message_id", "job_key", "attempt"),
    [
        ("q", b'{"id":"42"}', "idem-1", "training-42", 1),
        ("trainings.reminder:é", '{"title": "Läufertraining ✓"}'.encode(), "ünï-2", "schlüssel-🔔", 3),
        ("big.q", b'{"blob":"' + b"x" * 10_000 + b'"}', "idem-3", "k" * 1000, 2**31),  # several body frames
        ("exact", b"x" * (FRAME_MAX - 8), "idem-4", "k", -5),
    ],
)
def test_the_frames_are_py_amqps_bytes(
    queue: str, body: bytes, message_id: str, job_key: str, attempt: int
) -> None:
    fire_at = "2030-01-01T08:00:00.123456+00:00"
    ours = b"".join(
        PublishEncoder(7, FRAME_MAX).message(
            queue, body, message_id=message_id, job_key=job_key, fire_at=fire_at, attempt=attempt
        )
    )
    assert ours == _py_amqp_bytes(queue, body, message_id, job_key, fire_at, attempt)


def test_a_message_id_too_long_for_a_short_string_is_refused() -> None:
    with pytest.raises(ValueError, match="255"):
        PublishEncoder(1, FRAME_MAX).message(
            "q", b"{}", message_id="m" * 256, job_key="k", fire_at="t", attempt=1
        )


def test_the_buffer_writes_in_order_and_flushes_past_its_size() -> None:
    writes: list[bytes] = []
    frames = FrameBuffer(writes.append)
    frames.add([b"a", b"b"])
    assert writes == []  # small: held for one write
    frames.add([b"c" * (1 << 20)])
    assert writes == [b"ab" + b"c" * (1 << 20)]
    frames.add([b"d"])
    frames.flush()
    frames.flush()  # nothing left: no empty write
    assert writes[1:] == [b"d"]
