"""The security tests never reach a real resolver: host names resolve through a fixed table here."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from tests.fake_dns import addrinfo

# Names the tests use, and what they "resolve" to. Anything else does not resolve (as offline).
FAKE_DNS = {
    "localhost": ["127.0.0.1", "::1"],
    "hooks.example.com": ["93.184.216.34"],
    "dual.example.com": ["93.184.216.34", "10.1.2.3"],
    "internal.example.com": ["10.0.0.5"],
    "metadata.example.com": ["169.254.169.254"],
    "loopback.example.com": ["127.0.0.1"],
    "v6-loopback.example.com": ["::1"],
    "nat64-loopback.example.com": ["64:ff9b::7f00:1"],
}


_real_getaddrinfo = socket.getaddrinfo


def fake_getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
    if isinstance(host, bytes):
        host = host.decode()
    try:
        # Literal addresses resolve to themselves, as with a real resolver, without asking anyone.
        return _real_getaddrinfo(host, port, *args, flags=socket.AI_NUMERICHOST, **kwargs)
    except socket.gaierror:
        pass
    addresses = FAKE_DNS.get(str(host).lower().rstrip("."))
    if addresses is None:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return addrinfo(addresses, port or 0)


@pytest.fixture(autouse=True)
def _offline_dns(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from reminders.transports import netguard

    monkeypatch.setattr(netguard.socket, "getaddrinfo", fake_getaddrinfo)
    yield


@pytest.fixture
def wsgi_keeps_the_test_connection() -> Iterator[None]:
    """Schemathesis calls the raw WSGI app, whose request signals close the database connection after each
    request: the test's transaction (and its rows) would go with it."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)
