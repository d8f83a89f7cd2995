"""A chunked request body (Transfer-Encoding: chunked, no Content-Length) is read or refused, never
taken for an empty one.

Django reads CONTENT_LENGTH bytes of input and none without it, so such a job was answered 400 naming
every field. Django's test client never chunks, so these go through real servers on loopback: gunicorn
removes the chunk framing and says where the body ends (the body is read, up to the request limit); the
standard library's wsgiref server (and runserver, built on it) does neither (411 Length Required).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
from collections.abc import Iterator
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest
from rest_framework.authtoken.models import Token

from config.wsgi import application
from reminders.models import Job
from tests.factories import UserFactory
from tests.ops.processes import gunicorn

JOB = {
    "key": "chunked-1",
    "schedules": ["2030-12-24T14:00:00Z"],
    "callback": {"type": "rabbitmq", "data": {"queue": "chunked.jobs", "payload": {"id": "1"}}},
}


def _post_chunked(port: int, body: bytes, token: str = "") -> tuple[int, dict[str, str], bytes]:
    """POST `body` in 1,000-byte chunks with no length, written in one go.

    One write puts a small request in one segment, so a server that answers before reading the body
    (wsgiref's 411) has it all in its buffer when it closes: a clean close, not a reset racing the
    client's next chunk. The answer is read even if the server closed before taking the rest.
    """
    head = [
        "POST /api/jobs/ HTTP/1.1",
        "Host: localhost",
        "Content-Type: application/json",
        "Transfer-Encoding: chunked",
        "Connection: close",
    ]
    if token:
        head.append(f"Authorization: Token {token}")
    framed = b"".join(
        b"%x\r\n%s\r\n" % (len(body[i : i + 1000]), body[i : i + 1000]) for i in range(0, len(body), 1000)
    )
    request = ("\r\n".join(head) + "\r\n\r\n").encode() + framed + b"0\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        # A server that answered and closed before reading everything still left its answer to read.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            connection.sendall(request)
        response = http.client.HTTPResponse(connection)
        response.begin()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.django_db(transaction=True)  # the server's thread counts the address in the database
def test_wsgiref_which_cannot_read_a_chunked_body_answers_411_in_json() -> None:
    server = make_server("127.0.0.1", 0, application, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        status, headers, body = _post_chunked(server.server_port, json.dumps(JOB).encode())
    finally:
        server.shutdown()
        server.server_close()
    assert status == 411
    assert headers["content-type"] == "application/json"
    assert "Content-Length" in json.loads(body)["detail"]


@pytest.fixture
def gunicorn_port() -> Iterator[int]:
    """gunicorn on the test database, with a 64 KiB request limit."""
    env = {"REMINDERS_MAX_REQUEST_BYTES": str(64 * 1024), "API_THROTTLE_IP_RATE": "100000/s"}
    with gunicorn(extra_env=env) as port:
        yield port


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_gunicorn_reads_a_chunked_job_and_refuses_one_over_the_limit_in_json(gunicorn_port: int) -> None:
    token = Token.objects.create(user=UserFactory(queues=["*"])).key
    status, _, body = _post_chunked(gunicorn_port, json.dumps(JOB).encode(), token)
    assert status == 201, body
    assert Job.objects.get(key="chunked-1").occurrences.count() == 1

    padded = {**JOB, "key": "chunked-2", "padding": "x" * 70_000}
    status, headers, body = _post_chunked(gunicorn_port, json.dumps(padded).encode(), token)
    assert status == 413
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["limit_bytes"] == 64 * 1024
    assert not Job.objects.filter(key="chunked-2").exists()
