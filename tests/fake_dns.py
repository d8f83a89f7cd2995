"""What socket.getaddrinfo answers for a name, built from a list of addresses: the fake resolvers of the
SSRF tests (tests/reminders/test_netguard.py, tests/security/conftest.py) answer with it."""

from __future__ import annotations

import socket
from typing import Any


def addrinfo(addresses: list[str], port: int) -> list[tuple[Any, ...]]:
    """One TCP entry per address, shaped as the real resolver shapes them (4-tuples for IPv6)."""
    return [
        (
            socket.AF_INET6 if ":" in ip else socket.AF_INET,
            socket.SOCK_STREAM,
            socket.IPPROTO_TCP,
            "",
            (ip, port, 0, 0) if ":" in ip else (ip, port),
        )
        for ip in addresses
    ]
