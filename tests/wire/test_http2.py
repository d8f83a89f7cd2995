"""HTTP/2 (RFC 9113) as common/wire/h2client.py speaks it, against a strict peer: the `h2` library's server
side checks every frame, header block and window this client sends. The preface and SETTINGS, the server's
limits (concurrent streams, frame size, header table), flow control (bodies larger than the server's
windows), header blocks split in CONTINUATION frames, padding, PING, RST_STREAM, GOAWAY (the streams the
server did not process fail, the others are answered, the next request opens a new connection), a server
breaking the protocol (GOAWAY with the RFC's error code), timeouts (a late answer to a stream given up
does not disturb the connection), and any asyncio transport (uvloop's)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import pytest
from hyperframe.frame import HeadersFrame, PushPromiseFrame, WindowUpdateFrame

from common.wire.h2client import H2Client, H2Error
from tests.peers.credentials import server_tls

Handler = Callable[[h2.connection.H2Connection, int, dict[str, str], bytes], Awaitable[bool]]


class StrictServer:
    """HTTP/2 with prior knowledge on loopback; `handler` answers a finished request (or not, and returns
    False to leave it unanswered). Every connection's events are kept for the test to read."""

    def __init__(self, handler: Handler, settings: dict[int, int] | None = None) -> None:
        self.handler = handler
        self.settings = settings or {}
        self.connections: list[h2.connection.H2Connection] = []
        self.events: list[h2.events.Event] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.raw = bytearray()  # frames written ahead of h2's own (a late answer h2 would refuse to send)

    async def start(self, tls: ssl.SSLContext | None = None) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=tls)
        port = self.server.sockets[0].getsockname()[1]
        return f"{'https' if tls else 'http'}://127.0.0.1:{port}"

    async def stop(self) -> None:
        for writer in self.writers:
            writer.close()
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        )
        self.connections.append(conn)
        self.writers.append(writer)
        conn.initiate_connection()
        if self.settings:
            conn.update_settings(self.settings)
        writer.write(conn.data_to_send())
        streams: dict[int, tuple[dict[str, str], bytearray]] = {}
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            while data := await reader.read(65536):
                for event in conn.receive_data(data):
                    self.events.append(event)
                    if isinstance(event, h2.events.RequestReceived):
                        streams[event.stream_id] = ({str(k): str(v) for k, v in event.headers}, bytearray())
                    elif isinstance(event, h2.events.DataReceived):
                        streams[event.stream_id][1].extend(event.data)
                        conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    elif isinstance(event, h2.events.StreamEnded):
                        headers, body = streams.pop(event.stream_id)
                        await self.handler(conn, event.stream_id, headers, bytes(body))
                writer.write(bytes(self.raw) + conn.data_to_send())
                self.raw.clear()
                await writer.drain()


async def _echo(
    conn: h2.connection.H2Connection, stream_id: int, headers: dict[str, str], body: bytes
) -> bool:
    """200 with the body's digest in a header and the body's length as the answer's body."""
    answer = str(len(body)).encode()
    conn.send_headers(stream_id, [(":status", "200"), ("digest", hashlib.sha256(body).hexdigest()),
                                  ("path", headers[":path"]), ("server", "strict")])  # fmt: skip
    conn.send_data(stream_id, answer, end_stream=True, pad_length=7)
    return True


def _run(server: StrictServer, test: Callable[[H2Client], Awaitable[Any]], timeout: float = 10.0) -> Any:
    async def main() -> Any:
        client = H2Client(await server.start(), timeout=timeout, per_request_headers=("x-id",))
        try:
            return await test(client)
        finally:
            await client.aclose()
            await server.stop()

    return asyncio.run(main())


def test_bodies_larger_than_the_servers_windows_wait_for_its_window_updates_and_all_arrive_whole() -> None:
    # The server lets each stream send 1,000 bytes and the connection 65,535 until it acknowledges data.
    server = StrictServer(_echo, {h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1000})
    bodies = [bytes([n]) * (300 + n * 997) for n in range(60)]  # up to 59 KB each, 1.8 MB together

    async def test(client: H2Client) -> list[Any]:
        return await asyncio.gather(*(
            client.post(f"/echo/{n}", headers={"x-id": str(n), "authorization": "bearer t"}, body=body)
            for n, body in enumerate(bodies)
        ))  # fmt: skip

    answers = _run(server, test)
    for n, (body, answer) in enumerate(zip(bodies, answers, strict=True)):
        assert answer.status == 200 and answer.body == str(len(body)).encode()  # padding stripped
        assert answer.header("digest") == hashlib.sha256(body).hexdigest()
        assert answer.header("path") == f"/echo/{n}"
    assert len(server.connections) == 1
    closes = [e for e in server.events if isinstance(e, h2.events.ConnectionTerminated)]
    assert [e.error_code for e in closes] == [h2.errors.ErrorCodes.NO_ERROR]  # the client's goodbye only


def test_a_large_answer_header_block_in_continuation_frames_and_a_ping_are_handled() -> None:
    async def handler(conn: h2.connection.H2Connection, stream_id: int, headers: dict[str, str],
                      body: bytes) -> bool:  # fmt: skip
        conn.ping(b"12345678")
        conn.send_headers(stream_id, [(":status", "400"), ("big", "x" * 40_000)], end_stream=True)
        return True

    server = StrictServer(handler)
    answer = _run(server, lambda client: client.post("/big", headers={}, body=b"{}"))
    assert answer.status == 400 and answer.header("big") == "x" * 40_000
    acks = [e for e in server.events if isinstance(e, h2.events.PingAckReceived)]
    assert [e.ping_data for e in acks] == [b"12345678"]


def test_a_reset_stream_fails_that_request_alone() -> None:
    async def handler(conn: h2.connection.H2Connection, stream_id: int, headers: dict[str, str],
                      body: bytes) -> bool:  # fmt: skip
        if headers[":path"] == "/reset":
            conn.reset_stream(stream_id, error_code=h2.errors.ErrorCodes.REFUSED_STREAM)
            return True
        return await _echo(conn, stream_id, headers, body)

    server = StrictServer(handler)

    async def test(client: H2Client) -> tuple[Any, Any]:
        return await asyncio.gather(
            client.post("/reset", headers={}, body=b"a"), client.post("/ok", headers={}, body=b"b"),
            return_exceptions=True,
        )  # fmt: skip

    reset, ok = _run(server, test)
    assert isinstance(reset, H2Error) and "stream reset (error 7)" in str(reset)
    assert ok.status == 200 and len(server.connections) == 1


def test_goaway_fails_the_streams_the_server_did_not_process_and_the_next_request_reconnects() -> None:
    held: list[int] = []

    async def handler(conn: h2.connection.H2Connection, stream_id: int, headers: dict[str, str],
                      body: bytes) -> bool:  # fmt: skip
        if len(server.connections) > 1:
            return await _echo(conn, stream_id, headers, body)
        held.append(stream_id)
        if len(held) == 3:  # answer the first, tell the client the later two were not processed
            await _echo(conn, held[0], headers, body)
            conn.close_connection(last_stream_id=held[0])
        return True

    server = StrictServer(handler)

    async def test(client: H2Client) -> tuple[list[Any], Any]:
        first = [asyncio.ensure_future(client.post(f"/{n}", headers={}, body=b"x")) for n in range(3)]
        results = await asyncio.gather(*first, return_exceptions=True)
        return results, await client.post("/after", headers={}, body=b"y")

    (answered, *refused), after = _run(server, test)
    assert answered.status == 200
    assert all(isinstance(r, H2Error) and "GOAWAY" in str(r) for r in refused)
    assert after.status == 200 and len(server.connections) == 2


def test_a_request_without_an_answer_times_out_and_a_late_answer_does_not_disturb_the_connection() -> None:
    late: list[int] = []

    async def handler(conn: h2.connection.H2Connection, stream_id: int, headers: dict[str, str],
                      body: bytes) -> bool:  # fmt: skip
        if headers[":path"] == "/slow":
            late.append(stream_id)
            return False
        # The slow one's answer crossing the client's RST_STREAM, as a real server's may: its header
        # block enters the server's HPACK table, which the next answer then refers to.
        block = conn.encoder.encode([(":status", "200"), ("server", "strict")])
        raw = HeadersFrame(late[0], flags=["END_HEADERS", "END_STREAM"], data=block)
        server.raw += raw.serialize()
        return await _echo(conn, stream_id, headers, body)

    server = StrictServer(handler)

    async def test(client: H2Client) -> Any:
        with pytest.raises(H2Error, match="no answer within"):
            await client.post("/slow", headers={}, body=b"s")
        return await client.post("/next", headers={}, body=b"n")

    answer = _run(server, test, timeout=0.5)
    assert answer.status == 200 and answer.header("path") == "/next" and answer.header("server") == "strict"
    assert len(server.connections) == 1
    resets = [e for e in server.events if isinstance(e, h2.events.StreamReset)]
    assert [e.error_code for e in resets] == [h2.errors.ErrorCodes.CANCEL]  # the server was told


def test_the_preface_and_settings_are_rfc_9113_s_and_the_server_s_settings_are_acknowledged() -> None:
    """3.4 and 6.5: the client opens with the preface and its SETTINGS (no server push, wide stream
    windows), opens the connection's window (6.9), and acknowledges the server's SETTINGS."""
    server = StrictServer(_echo, {h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 50})
    answer = _run(server, lambda client: client.post("/first", headers={}, body=b"{}"))
    assert answer.status == 200
    changed = [e for e in server.events if isinstance(e, h2.events.RemoteSettingsChanged)]
    settings = {code: setting.new_value for code, setting in changed[0].changed_settings.items()}
    assert settings == {h2.settings.SettingCodes.ENABLE_PUSH: 0,
                        h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 24}  # fmt: skip
    opened = [e for e in server.events if isinstance(e, h2.events.WindowUpdated) and e.stream_id == 0]
    assert [e.delta for e in opened] == [(1 << 30) - 65535]
    assert any(isinstance(e, h2.events.SettingsAcknowledged) for e in server.events)


def test_the_server_s_limits_are_kept_streams_frame_size_and_header_table() -> None:
    """6.5.2: at most MAX_CONCURRENT_STREAMS open (a request past it fails alone, nothing is sent); a
    header block longer than the frame size goes on in CONTINUATION frames; a HEADER_TABLE_SIZE of 0
    makes the encoder announce it and index nothing (h2's decoder would fail the connection otherwise)."""
    held: list[int] = []

    async def handler(conn: h2.connection.H2Connection, stream_id: int, headers: dict[str, str],
                      body: bytes) -> bool:  # fmt: skip
        if headers[":path"] == "/hold":
            held.append(stream_id)
            return False
        await _echo(conn, stream_id, headers, body)
        if held:  # the held one is answered with the big one
            conn.send_headers(held.pop(), [(":status", "204")], end_stream=True)
        return True

    server = StrictServer(handler, {h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 2,
                                    h2.settings.SettingCodes.HEADER_TABLE_SIZE: 0})  # fmt: skip

    async def test(client: H2Client) -> tuple[Any, ...]:
        await client.post("/settings", headers={}, body=b"")  # the server's SETTINGS are in
        hold = asyncio.ensure_future(client.post("/hold", headers={"authorization": "bearer t"}, body=b"h"))
        await asyncio.sleep(0.05)
        big = {"authorization": "bearer t", "x-big": "y" * 40_000}
        second = asyncio.ensure_future(client.post("/big", headers=big, body=b"b"))
        third = asyncio.ensure_future(client.post("/third", headers={}, body=b"c"))
        return tuple(await asyncio.gather(hold, second, third, return_exceptions=True))

    hold, big, third = _run(server, test)
    assert isinstance(third, H2Error) and "allows 2 streams" in str(third)
    assert big.status == 200 and hold.status == 204
    requests = [dict(e.headers) for e in server.events if isinstance(e, h2.events.RequestReceived)]
    assert [h.get("x-big") for h in requests].count("y" * 40_000) == 1
    assert len(requests) == 3 and len(server.connections) == 1
    closes = [e for e in server.events if isinstance(e, h2.events.ConnectionTerminated)]
    assert [e.error_code for e in closes] == [h2.errors.ErrorCodes.NO_ERROR]


@pytest.mark.parametrize(
    ("frame", "code", "why"),
    [
        # 6.9.1: a WINDOW_UPDATE that takes the connection's window past 2^31-1
        (WindowUpdateFrame(0, window_increment=(1 << 31) - 1).serialize(), 0x3, "window overflowed"),
        # 8.4: PUSH_PROMISE although SETTINGS_ENABLE_PUSH is 0
        (
            PushPromiseFrame(1, promised_stream_id=2, data=b"\x82", flags=["END_HEADERS"]).serialize(),
            0x1,
            "PUSH_PROMISE",
        ),
        # 4.2: a frame longer than the SETTINGS_MAX_FRAME_SIZE this client allows (16,384)
        (b"\x00\x40\x01\x00\x00\x00\x00\x00\x01" + bytes(16385), 0x6, "a frame of 16385 bytes"),
    ],
    ids=["window-overflow", "push-promise", "frame-too-large"],
)
def test_a_server_breaking_the_protocol_gets_goaway_with_the_error_and_every_request_fails(
    frame: bytes, code: int, why: str
) -> None:
    async def handler(conn: h2.connection.H2Connection, stream_id: int, headers: dict[str, str],
                      body: bytes) -> bool:  # fmt: skip
        server.raw += frame
        return False

    server = StrictServer(handler)

    async def test(client: H2Client) -> Any:
        return await asyncio.gather(client.post("/a", headers={}, body=b"a"), return_exceptions=True)

    (failed,) = _run(server, test)
    assert isinstance(failed, H2Error) and why in str(failed)
    closes = [e for e in server.events if isinstance(e, h2.events.ConnectionTerminated)]
    assert [e.error_code for e in closes] == [code]


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "tls-alpn"])
def test_it_runs_on_uvloop_whose_transports_are_not_asyncio_s(tmp_path: Path, tls: bool) -> None:
    """uvloop's TCP transport implements the transport interface without subclassing asyncio.Transport;
    the client takes any transport that writes, closes and says whether it is closing (over TLS too,
    where ALPN is read from the transport)."""
    uvloop = pytest.importorskip("uvloop")
    server = StrictServer(_echo)
    seen: list[type] = []

    async def main() -> list[Any]:
        context, ca_file = server_tls(tmp_path, ["h2"]) if tls else (None, None)
        trust = ssl.create_default_context(cafile=str(ca_file)) if ca_file else None
        client = H2Client(await server.start(context), timeout=5.0, ssl_context=trust)
        try:
            answers = await asyncio.gather(*(client.post(f"/uv/{n}", headers={}, body=b"x" * n)
                                             for n in range(1, 20)))  # fmt: skip
            assert client._connection is not None and client._connection.transport is not None
            seen.append(type(client._connection.transport))
            return list(answers)
        finally:
            await client.aclose()
            await server.stop()

    answers = uvloop.run(main())
    assert [a.body for a in answers] == [str(n).encode() for n in range(1, 20)]
    assert all(a.status == 200 and a.header("path") == f"/uv/{n}" for n, a in enumerate(answers, 1))
    assert seen[0].__module__.startswith("uvloop")
    if not tls:
        assert not issubclass(seen[0], asyncio.Transport)
