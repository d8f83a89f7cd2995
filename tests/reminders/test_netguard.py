"""The SSRF guard: which callback URLs are refused at validation and which addresses at connect time."""

from __future__ import annotations

import ipaddress
import re
import socket

import pytest

from reminders.transports.netguard import (
    UnsafeURL,
    embedded_ipv4,
    resolve_public_addresses,
    validate_callback_url,
)
from tests.fake_dns import addrinfo

PUBLIC_V4 = "93.184.216.34"
PUBLIC_V6 = "2606:4700:4700::1111"


@pytest.fixture(autouse=True)
def dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """A fake DNS (the outer network edge): names in the dict resolve, everything else fails to resolve.

    Failing by default also proves the encoded IP literals below are recognised without asking DNS.
    """
    records: dict[str, list[str]] = {}

    def getaddrinfo(host: str, port: int, *args: object, **kwargs: object) -> list[tuple]:
        if host not in records:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return addrinfo(records[host], port)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return records


REFUSED_LITERALS = [
    "http://127.0.0.1/hook",
    "http://127.8.9.10:8000/",
    "http://[::1]/",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.5/",
    "http://172.16.0.1/",
    "http://172.31.255.254/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://0.0.0.0/",
    "http://224.0.0.1/",
    "http://[fc00::1]/",
    "http://[fd12:3456::1]/",
    "http://[fe80::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:169.254.169.254]/",
    # IPv6 forms that carry an IPv4 address to a translator or tunnel (issue 19): judged by that address.
    "http://[64:ff9b::7f00:1]/",  # NAT64 well-known prefix -> 127.0.0.1
    "http://[64:ff9b::a9fe:a9fe]/",  # ... -> the metadata endpoint
    "http://[64:ff9b::10.1.2.3]/",
    "http://[64:ff9b:1::7f00:1]/",  # local-use NAT64: never public
    "http://[2002:7f00:1::]/",  # 6to4 -> 127.0.0.1
    "http://[2002:a9fe:a9fe::1]/",  # ... -> 169.254.169.254
    "http://[::127.0.0.1]/",  # IPv4-compatible
    "http://[::7f00:1]/",
    "http://[::ffff:0:127.0.0.1]/",  # IPv4-translated (SIIT)
    "http://[2001:0:5db8:d822:0:0:80ff:fffe]/",  # Teredo, client 127.0.0.1 (stored inverted)
    "http://2130706433/",
    "http://0x7f000001/",
    "http://0177.0.0.1/",
    "http://017700000001/",
    "http://127.1/",
    "http://0/",
]


@pytest.mark.parametrize("url", REFUSED_LITERALS)
def test_it_refuses_non_public_ip_literals(url: str) -> None:
    with pytest.raises(UnsafeURL, match="not a public address"):
        validate_callback_url(url, allow_private=False)


@pytest.mark.parametrize("url", REFUSED_LITERALS)
def test_it_allows_non_public_ip_literals_when_private_is_allowed(url: str) -> None:
    validate_callback_url(url, allow_private=True)


@pytest.mark.parametrize(
    "url",
    [
        f"http://{PUBLIC_V4}/hook",
        f"https://{PUBLIC_V4}:8443/hook?x=1",
        f"http://[{PUBLIC_V6}]/",
        f"http://[::ffff:{PUBLIC_V4}]/",
        f"http://[64:ff9b::{PUBLIC_V4}]/",  # NAT64 to a public address
        "http://[2002:5db8:d822::1]/",  # 6to4 through 93.184.216.34
    ],
)
def test_it_accepts_public_ip_literals(url: str) -> None:
    validate_callback_url(url, allow_private=False)


OTHER_SCHEMES = [
    "ftp://example.com/file",
    "file:///etc/passwd",
    "gopher://example.com:70/_payload",
    "javascript:alert(1)",
    "example.com/hook",
    "//example.com/hook",
]
CREDENTIALS = [
    f"http://user:secret@{PUBLIC_V4}/",
    f"http://user@{PUBLIC_V4}/",
    f"https://:secret@{PUBLIC_V4}/",
    # The classic parser confusion: the real host is 127.0.0.1, "example.com" is a user name.
    "http://example.com@127.0.0.1/",
]
NO_USABLE_HOST = [
    "http:///hook",
    "https://",
    "http://exa mple.com/",
    "http://[::1/",
    "http://example.com:99999/",
]


@pytest.mark.parametrize(
    ("url", "reason"),
    [(url, "only http and https") for url in OTHER_SCHEMES]
    + [(url, "credentials") for url in CREDENTIALS]
    + [(url, None) for url in NO_USABLE_HOST],
)
def test_it_refuses_a_url_it_could_not_call_safely_even_with_private_addresses_allowed(
    url: str, reason: str | None
) -> None:
    """Other schemes, credentials in the URL, no usable host: refused whatever the address policy."""
    with pytest.raises(UnsafeURL, match=reason):
        validate_callback_url(url, allow_private=True)


def test_it_accepts_a_name_resolving_to_public_addresses(dns: dict[str, list[str]]) -> None:
    dns["hooks.example.com"] = [PUBLIC_V4, PUBLIC_V6]

    validate_callback_url("https://hooks.example.com/reminders", allow_private=False)


@pytest.mark.parametrize("private", ["127.0.0.1", "10.1.2.3", "169.254.169.254", "::1", "::ffff:10.0.0.1"])
def test_it_refuses_a_name_resolving_to_a_private_address_at_validation(
    dns: dict[str, list[str]], private: str
) -> None:
    dns["internal.example.com"] = [private]

    with pytest.raises(UnsafeURL, match=re.escape(f"resolves to {private}")):
        validate_callback_url("https://internal.example.com/", allow_private=False)


def test_it_refuses_a_name_when_any_of_its_addresses_is_private(dns: dict[str, list[str]]) -> None:
    dns["mixed.example.com"] = [PUBLIC_V4, "192.168.0.10"]

    with pytest.raises(UnsafeURL, match=re.escape("192.168.0.10")):
        validate_callback_url("http://mixed.example.com/", allow_private=False)
    with pytest.raises(UnsafeURL, match=re.escape("192.168.0.10")):
        resolve_public_addresses("mixed.example.com", 80, allow_private=False)


def test_it_accepts_an_unresolvable_name_at_validation_but_not_at_connect_time() -> None:
    validate_callback_url("https://not-yet-published.example.com/", allow_private=False)

    with pytest.raises(UnsafeURL, match="does not resolve"):
        resolve_public_addresses("not-yet-published.example.com", 443, allow_private=False)


def test_it_returns_every_vetted_address_once_in_resolver_order(dns: dict[str, list[str]]) -> None:
    dns["hooks.example.com"] = [PUBLIC_V6, PUBLIC_V4, PUBLIC_V6]

    assert resolve_public_addresses("hooks.example.com", 443, allow_private=False) == [PUBLIC_V6, PUBLIC_V4]


@pytest.mark.parametrize(
    "private",
    [
        *["127.0.0.1", "169.254.169.254", "172.20.0.3", "fe80::1", "fd00::1"],
        *["64:ff9b::7f00:1", "2002:7f00:1::", "::127.0.0.1", "::ffff:0:a9fe:a9fe", "::ffff:127.0.0.1"],
    ],
)
def test_it_refuses_private_addresses_at_connect_time(dns: dict[str, list[str]], private: str) -> None:
    dns["rebound.example.com"] = [private]

    with pytest.raises(UnsafeURL, match="not a public address"):
        resolve_public_addresses("rebound.example.com", 443, allow_private=False)


def test_it_returns_private_addresses_at_connect_time_when_allowed(dns: dict[str, list[str]]) -> None:
    dns["db.internal"] = ["10.0.0.7"]

    assert resolve_public_addresses("db.internal", 5432, allow_private=True) == ["10.0.0.7"]


@pytest.mark.parametrize(
    ("address", "carried"),
    [
        ("64:ff9b::7f00:1", ["127.0.0.1"]),
        ("2002:7f00:1::", ["127.0.0.1"]),
        ("::127.0.0.1", ["127.0.0.1"]),
        ("::ffff:127.0.0.1", ["127.0.0.1"]),
        ("::ffff:0:127.0.0.1", ["127.0.0.1"]),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", ["65.54.227.120", "192.0.2.45"]),  # RFC 4380's example
        (PUBLIC_V6, []),
    ],
)
def test_it_finds_the_ipv4_address_an_ipv6_address_carries(address: str, carried: list[str]) -> None:
    assert [str(v4) for v4 in embedded_ipv4(ipaddress.IPv6Address(address))] == carried
