"""SSRF through HTTP callbacks, at the API: unsafe callback URLs are refused when the job is created (400
naming the field, nothing stored) and, when one gets past validation anyway (DNS changed since, a redirect,
a row written without the API), at connect time, before any connection is opened.

Names resolve through the fixed table in tests/security/conftest.py; no traffic leaves this process except
to a receiver on 127.0.0.1, and a guard on urllib3's socket factory records (and refuses) every other
connection attempt, so a broken guard fails the test instead of reaching a private address.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

import reminders.transports.http as http_transport
from reminders.models import CallbackType, Job, Occurrence, OccurrenceStatus
from tests.factories import JobFactory, OccurrenceFactory
from tests.http_receiver import QuietHandler, serving
from tests.security import conftest as dns

pytestmark = pytest.mark.django_db

UNSAFE_URLS = [
    "http://127.0.0.1/hook",
    "http://127.0.0.1:8000/hook",
    "http://localhost/hook",
    "http://[::1]/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/hook",
    "http://10.255.255.254/hook",
    "http://172.16.0.1/hook",
    "http://172.31.255.254/hook",
    "http://192.168.0.1/hook",
    "http://192.168.255.254/hook",
    "http://100.64.0.1/hook",  # carrier-grade NAT
    "http://0.0.0.0/hook",
    "http://0/hook",
    "http://2130706433/hook",  # 127.0.0.1 as a decimal integer
    "http://0x7f000001/hook",  # ... as hex
    "http://0x7f.0.0.1/hook",
    "http://0177.0.0.1/hook",  # ... as octal
    "http://127.1/hook",  # ... in the short BSD form
    "http://2852039166/latest/meta-data/",  # 169.254.169.254 as a decimal integer
    "http://0xa9fea9fe/latest/meta-data/",  # ... as hex
    "http://[::ffff:127.0.0.1]/hook",  # IPv4-mapped IPv6
    "http://[::ffff:a9fe:a9fe]/latest/",
    "http://[fd00::1]/hook",  # unique local IPv6
    "http://[fe80::1]/hook",  # link-local IPv6
    "http://[64:ff9b::7f00:1]/hook",  # NAT64 to 127.0.0.1
    "http://[2002:7f00:1::]/hook",  # 6to4 through 127.0.0.1
    "http://[::127.0.0.1]/hook",  # IPv4-compatible
    "http://[64:ff9b::a9fe:a9fe]/latest/",  # NAT64 to the metadata endpoint
    "http://nat64-loopback.example.com/hook",  # a name that resolves to 64:ff9b::7f00:1
    "http://internal.example.com/hook",  # a name that resolves to 10.0.0.5
    "http://metadata.example.com/latest/",  # ... to 169.254.169.254
    "http://loopback.example.com/hook",
    "http://v6-loopback.example.com/hook",
    "http://dual.example.com/hook",  # one public and one private address: all must be public
    "http://user:secret@hooks.example.com/hook",
    "file:///etc/passwd",
    "ftp://hooks.example.com/hook",
    "gopher://hooks.example.com:70/_hook",
    "dict://hooks.example.com:11211/",
    "javascript:alert(1)",
    "data:text/plain,hello",
    "//hooks.example.com/hook",
    "http:///hook",
    "http://hooks.example.com:99999/hook",
]


def _job(url: str, key: str = "ssrf-job") -> dict[str, Any]:
    return {
        "key": key,
        "schedules": [(timezone.now() + timedelta(minutes=5)).isoformat()],
        "callback": {"type": "http", "data": {"url": url, "payload": {"x": 1}}},
    }


@pytest.mark.parametrize("url", UNSAFE_URLS)
def test_it_refuses_an_unsafe_callback_url_when_the_job_is_created(
    api: APIClient, settings: Any, url: str
) -> None:
    settings.REMINDERS_HTTP_ALLOW_PRIVATE = False
    response = api.post("/api/jobs/", _job(url), format="json")
    assert response.status_code == 400, response.content
    assert "url" in response.json()["callback"]["data"], response.json()
    assert not Job.objects.exists() and not Occurrence.objects.exists()


@pytest.mark.parametrize("url", ["http://hooks.example.com/hook", "https://hooks.example.com:8443/a?b=c"])
def test_it_accepts_a_public_callback_url(api: APIClient, settings: Any, url: str) -> None:
    settings.REMINDERS_HTTP_ALLOW_PRIVATE = False
    response = api.post("/api/jobs/", _job(url), format="json")
    assert response.status_code == 201, response.content


def test_it_accepts_a_private_callback_url_only_when_the_setting_allows_it(
    api: APIClient, settings: Any
) -> None:
    settings.REMINDERS_HTTP_ALLOW_PRIVATE = True
    assert api.post("/api/jobs/", _job("http://127.0.0.1:9/hook"), format="json").status_code == 201


# --- at connect time (needs the HTTP transport) ---------------------------------------------------------


@pytest.fixture
def transport() -> Any:
    return http_transport


class Network:
    """Stands in for the network at urllib3's socket factory: PUBLIC_IP is routed to a receiver on
    127.0.0.1; any other address is recorded and refused, so nothing leaves the machine."""

    PUBLIC_IP = "93.184.216.34"

    def __init__(self, receiver_port: int) -> None:
        self.receiver_port = receiver_port
        self.attempts: list[str] = []

    def create_connection(self, address: tuple[str, int], timeout: Any = None, **_: Any) -> socket.socket:
        host, port = address
        self.attempts.append(f"{host}:{port}")
        if host != self.PUBLIC_IP:
            raise ConnectionRefusedError(f"test network: {host} is not reachable from the test")
        return socket.create_connection(("127.0.0.1", self.receiver_port), timeout=timeout)


@pytest.fixture
def network(transport: Any, monkeypatch: pytest.MonkeyPatch, settings: Any) -> Iterator[Network]:
    """A receiver that redirects /redirect to the metadata endpoint and answers 200 otherwise."""
    import urllib3.util.connection

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path.startswith("/redirect"):
                self.answer(302, {"Location": "http://169.254.169.254/latest/meta-data/"})
            else:
                self.answer(200)

    with serving(Handler) as port:
        net = Network(port)
        monkeypatch.setattr(urllib3.util.connection, "create_connection", net.create_connection)
        settings.REMINDERS_HTTP_ALLOW_PRIVATE = False
        settings.REMINDERS_HTTP_CONNECT_TIMEOUT = 1
        settings.REMINDERS_HTTP_READ_TIMEOUT = 2
        yield net


def _dispatch_one() -> Occurrence:
    from reminders.engine.dispatch import occurrences_dispatch_batch

    occurrences_dispatch_batch()
    return Occurrence.objects.get()


def test_it_delivers_to_a_public_host_through_the_guard(network: Network, api: APIClient) -> None:
    """The control case: the same path, to an allowed host, is delivered."""
    assert api.post("/api/jobs/", _job("http://hooks.example.com/ok"), format="json").status_code == 201
    Occurrence.objects.update(next_attempt_at=timezone.now())
    assert _dispatch_one().status == OccurrenceStatus.DELIVERED
    assert network.attempts == [f"{Network.PUBLIC_IP}:80"]


def test_it_refuses_at_connect_a_host_that_resolves_private_after_validation(
    network: Network, api: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: public when the job was created, the metadata address when it fires."""
    monkeypatch.setitem(dns.FAKE_DNS, "rebind.example.com", [Network.PUBLIC_IP])
    assert api.post("/api/jobs/", _job("http://rebind.example.com/hook"), format="json").status_code == 201
    monkeypatch.setitem(dns.FAKE_DNS, "rebind.example.com", ["169.254.169.254"])
    Occurrence.objects.update(next_attempt_at=timezone.now())

    occurrence = _dispatch_one()

    assert occurrence.status == OccurrenceStatus.FAILED, "a refused address is permanent, not retried"
    assert "169.254.169.254" in occurrence.last_error and "not a public address" in occurrence.last_error
    assert network.attempts == []


def test_it_does_not_follow_a_redirect_to_a_private_address(network: Network, api: APIClient) -> None:
    assert api.post("/api/jobs/", _job("http://hooks.example.com/redirect"), format="json").status_code == 201
    Occurrence.objects.update(next_attempt_at=timezone.now())

    occurrence = _dispatch_one()

    assert occurrence.status == OccurrenceStatus.FAILED
    assert "redirects are not followed" in occurrence.last_error
    assert network.attempts == [f"{Network.PUBLIC_IP}:80"], "only the vetted address was contacted"


@pytest.mark.parametrize(
    "url",
    [
        u
        for u in UNSAFE_URLS
        if u.startswith("http://") and "@" not in u and ":99999" not in u and u != "http:///hook"
    ],
)
def test_it_refuses_at_connect_an_unsafe_url_that_skipped_validation(network: Network, url: str) -> None:
    """A row written without the API (an old row, a bulk import) gets the same guard when it fires."""
    OccurrenceFactory(job=JobFactory(callback_type=CallbackType.HTTP, target=url))

    occurrence = _dispatch_one()

    assert occurrence.status == OccurrenceStatus.FAILED, (url, occurrence.last_error)
    assert network.attempts == []
