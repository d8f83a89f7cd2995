"""HTTPTransport against a real HTTP server on 127.0.0.1: what is sent and how each answer is classified."""

from __future__ import annotations

import hashlib
import hmac
import json
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from reminders.transports import netguard
from reminders.transports.base import Delivery, TransportError
from reminders.transports.http import HTTPTransport
from tests.http_receiver import QuietHandler, serving

FIRE_AT = datetime(2025, 3, 30, 7, 30, tzinfo=UTC)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """What a test callback receiver saw; its answer depends on the request path (see `receiver`)."""

    port: int
    requests: list[Received] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    @property
    def paths(self) -> list[str]:
        return [r.path for r in self.requests]


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    settings.REMINDERS_HTTP_ALLOW_PRIVATE = True
    settings.REMINDERS_HTTP_SIGNING_SECRET = ""
    settings.REMINDERS_HTTP_CONNECT_TIMEOUT = 0.5
    settings.REMINDERS_HTTP_READ_TIMEOUT = 0.5
    state = Receiver(port=0)
    barrier = threading.Barrier(3, timeout=0.5)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            state.requests.append(Received(self.path, dict(self.headers.items()), body))
            status, headers, reply = 200, {}, b"ok"
            if self.path == "/fail":
                status, reply = 500, b"<html>\n  database   is down</html>" + b"x" * 1000
            elif self.path == "/missing":
                status, reply = 404, b"no such hook"
            elif self.path == "/throttled":
                status, reply = 429, b"slow down"
            elif self.path == "/moved":
                status, headers = 302, {"Location": state.url("/landing")}
            elif self.path == "/slow":
                state.release.wait(2)
            elif self.path == "/together":
                try:
                    barrier.wait()
                except threading.BrokenBarrierError:
                    status = 503
            self._answer(status, headers, reply)

        def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
            try:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass  # the client gave up (timeout test)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()


def make_delivery(target: str, occurrence_id: int = 1, **overrides: Any) -> Delivery:
    fields: dict[str, Any] = {
        "occurrence_id": occurrence_id,
        "idempotency_key": f"occ-{occurrence_id}-key",
        "job_key": "training-42-reminder",
        "fire_at": FIRE_AT,
        "attempt": 2,
        "target": target,
        "payload": {"training": 42, "title": "Läufertraining"},
        "secret": "per-job-secret",
    }
    fields.update(overrides)
    return Delivery(**fields)


def deliver_one(delivery: Delivery) -> TransportError | None:
    return HTTPTransport().deliver([delivery]).get(delivery.occurrence_id)


def expected_signature(body: bytes, key: str) -> str:
    return "sha256=" + hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


def test_it_posts_the_signed_json_payload_with_its_headers(receiver: Receiver) -> None:
    delivery = make_delivery(receiver.url("/hook?source=reminders"))

    assert HTTPTransport().deliver([delivery]) == {}

    [request] = receiver.requests
    assert request.path == "/hook?source=reminders"
    assert json.loads(request.body.decode("utf-8")) == {"training": 42, "title": "Läufertraining"}
    assert request.body == '{"training":42,"title":"Läufertraining"}'.encode()
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["Idempotency-Key"] == "occ-1-key"
    assert request.headers["User-Agent"] == "reminders/0.1"
    assert request.headers["X-Reminders-Job"] == "training-42-reminder"
    assert request.headers["X-Reminders-Fire-At"] == FIRE_AT.isoformat()
    assert request.headers["X-Reminders-Attempt"] == "2"
    assert request.headers["Host"] == f"127.0.0.1:{receiver.port}"
    assert request.headers["X-Reminders-Signature"] == expected_signature(request.body, "per-job-secret")


def test_it_signs_with_the_settings_secret_when_the_job_has_none(receiver: Receiver, settings: Any) -> None:
    settings.REMINDERS_HTTP_SIGNING_SECRET = "deployment-secret"

    assert deliver_one(make_delivery(receiver.url("/hook"), secret="")) is None

    [request] = receiver.requests
    assert request.headers["X-Reminders-Signature"] == expected_signature(request.body, "deployment-secret")


def test_it_still_signs_without_any_configured_secret(receiver: Receiver) -> None:
    assert deliver_one(make_delivery(receiver.url("/hook"), secret="")) is None

    [request] = receiver.requests
    signature = request.headers["X-Reminders-Signature"]
    assert signature.startswith("sha256=") and len(signature) == len("sha256=") + 64
    assert signature != expected_signature(request.body, "")


@pytest.mark.parametrize(
    ("path", "permanent", "message"),
    [
        ("/fail", False, "HTTP 500: <html> database is down</html>xxx"),
        ("/throttled", False, "HTTP 429: slow down"),
        ("/missing", True, "HTTP 404: no such hook"),
    ],
)
def test_it_classifies_error_statuses(receiver: Receiver, path: str, permanent: bool, message: str) -> None:
    error = deliver_one(make_delivery(receiver.url(path)))

    assert error is not None
    assert error.permanent is permanent
    assert str(error).startswith(message)
    assert len(str(error)) <= len("HTTP 500: ") + 200


def test_it_does_not_follow_redirects(receiver: Receiver) -> None:
    error = deliver_one(make_delivery(receiver.url("/moved")))

    assert error is not None and error.permanent
    assert "HTTP 302" in str(error) and "redirects are not followed" in str(error)
    assert receiver.paths == ["/moved"]


def test_a_read_timeout_is_retryable(receiver: Receiver, settings: Any) -> None:
    settings.REMINDERS_HTTP_READ_TIMEOUT = 0.2

    error = deliver_one(make_delivery(receiver.url("/slow")))

    assert error is not None and not error.permanent
    assert "ReadTimeoutError" in str(error)


def test_a_refused_connection_is_retryable(settings: Any) -> None:
    settings.REMINDERS_HTTP_ALLOW_PRIVATE = True
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once the socket is closed

    error = deliver_one(make_delivery(f"http://127.0.0.1:{port}/hook"))

    assert error is not None and not error.permanent
    assert "could not connect" in str(error)


def test_it_refuses_a_loopback_target_unless_private_is_allowed(receiver: Receiver, settings: Any) -> None:
    settings.REMINDERS_HTTP_ALLOW_PRIVATE = False

    error = deliver_one(make_delivery(receiver.url("/hook")))

    assert error is not None and error.permanent
    assert "not a public address" in str(error)
    assert receiver.requests == []


@pytest.mark.parametrize("target", ["ftp://127.0.0.1/hook", "http://user:pw@127.0.0.1/hook", "not a url"])
def test_it_refuses_unusable_targets_permanently(receiver: Receiver, target: str) -> None:
    error = deliver_one(make_delivery(target))

    assert error is not None and error.permanent
    assert receiver.requests == []


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> Callable[[str, list[str]], list[str]]:
    """Answer the given name with a sequence of addresses, one per lookup; other names resolve for real.

    Returns the list of looked-up names for this host, to count lookups.
    """
    real_getaddrinfo = socket.getaddrinfo

    def install(name: str, answers: list[str]) -> list[str]:
        lookups: list[str] = []

        def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> Any:
            if host != name:
                return real_getaddrinfo(host, port, *args, **kwargs)
            lookups.append(host)
            ip = answers[min(len(lookups), len(answers)) - 1]
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (ip, port))]

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        return lookups

    return install


def test_dns_rebinding_to_a_private_address_is_refused_at_connect_time(
    receiver: Receiver, settings: Any, fake_dns: Callable[[str, list[str]], list[str]]
) -> None:
    settings.REMINDERS_HTTP_ALLOW_PRIVATE = False
    fake_dns("rebind.example.com", ["93.184.216.34", "127.0.0.1"])
    url = receiver.url("/hook", host="rebind.example.com")

    netguard.validate_callback_url(url, allow_private=False)  # the API saw a public address
    error = deliver_one(make_delivery(url))

    assert error is not None and error.permanent
    assert "resolves to 127.0.0.1" in str(error)
    assert receiver.requests == []


def test_it_connects_to_the_address_it_vetted_without_a_second_lookup(
    receiver: Receiver, fake_dns: Callable[[str, list[str]], list[str]]
) -> None:
    lookups = fake_dns("hooks.example.com", ["127.0.0.1", "192.0.2.1"])

    error = deliver_one(make_delivery(receiver.url("/hook", host="hooks.example.com")))

    assert error is None
    assert lookups == ["hooks.example.com"]
    [request] = receiver.requests
    assert request.headers["Host"] == f"hooks.example.com:{receiver.port}"


@pytest.fixture
def tls_receiver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[int, list[str]]]:
    """An HTTPS receiver on 127.0.0.1 whose self-signed certificate names hooks.example.com only.

    The certificate becomes the trust store through SSL_CERT_FILE, which OpenSSL reads when urllib3 loads
    the default CAs. Yields the port and the SNI names the server was asked for.
    """
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-subj", "/CN=hooks.example.com", "-addext", "subjectAltName=DNS:hooks.example.com",
            "-nodes", "-days", "1", "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    sni: list[str] = []

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.answer(204)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda _sock, name, _ctx: sni.append(name)
    with serving(Handler, tls=context) as port:
        yield port, sni


@pytest.fixture
def tls_url(
    tls_receiver: tuple[int, list[str]], settings: Any, fake_dns: Callable[[str, list[str]], list[str]]
) -> Callable[[str], str]:
    """The TLS receiver's URL under a host name that resolves to loopback (private addresses allowed)."""
    port, _sni = tls_receiver
    settings.REMINDERS_HTTP_ALLOW_PRIVATE = True

    def url(name: str) -> str:
        fake_dns(name, ["127.0.0.1"])
        return f"https://{name}:{port}/hook"

    return url


def test_https_connects_to_the_vetted_ip_but_verifies_the_certificate_for_the_name(
    tls_receiver: tuple[int, list[str]], tls_url: Callable[[str], str]
) -> None:
    assert deliver_one(make_delivery(tls_url("hooks.example.com"))) is None
    assert tls_receiver[1] == ["hooks.example.com"]  # the name went out as SNI, not the IP


def test_https_refuses_a_certificate_for_another_name(tls_url: Callable[[str], str]) -> None:
    error = deliver_one(make_delivery(tls_url("other.example.com")))

    assert error is not None and not error.permanent
    assert "SSLError" in str(error) and "doesn't match" in str(error)


def test_it_delivers_a_batch_concurrently_and_reports_each_outcome(receiver: Receiver) -> None:
    # The receiver answers /together only once three requests wait at the same time (503 otherwise).
    batch = [make_delivery(receiver.url("/together"), occurrence_id=i) for i in (1, 2, 3)]
    batch += [
        make_delivery(receiver.url("/missing"), occurrence_id=4),
        make_delivery(receiver.url("/hook"), occurrence_id=5, payload={"not": object()}),
    ]

    errors = HTTPTransport().deliver(batch)

    assert sorted(errors) == [4, 5]
    assert errors[4].permanent and "HTTP 404" in str(errors[4])
    assert errors[5].permanent and "JSON" in str(errors[5])
    assert sorted(receiver.paths) == ["/missing", "/together", "/together", "/together"]


def test_an_empty_batch_sends_nothing(receiver: Receiver) -> None:
    assert HTTPTransport().deliver([]) == {}
    assert receiver.requests == []
