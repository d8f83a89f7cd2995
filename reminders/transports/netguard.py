"""Keep HTTP callbacks away from the worker's own network (SSRF).

A callback URL is chosen by an API client, but the request is made from inside our network, where
loopback, the cloud metadata endpoint (169.254.169.254) and private services answer. Two checks:

- `validate_callback_url` when the job is created, so an obviously unsafe URL is refused with a 400;
- `resolve_public_addresses` when the callback is sent. This one is authoritative: DNS can change between
  the two (DNS rebinding), so the transport connects to exactly the addresses vetted here and never asks
  DNS again.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from typing import NamedTuple, TypeAlias
from urllib.parse import urlsplit

ALLOWED_SCHEMES = ("http", "https")
DEFAULT_PORTS = {"http": 80, "https": 443}

# After IDNA encoding a host name is ASCII letters, digits, dots, hyphens (underscores occur in real DNS
# names); colons only inside an IPv6 literal. Anything else (spaces, "%" zone ids, control characters) is
# refused rather than handed to resolvers that each parse it their own way.
_HOST_CHARACTERS = re.compile(r"[a-z0-9._:-]+")

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address


class UnsafeURL(ValueError):
    """A callback URL that must not be requested; the message says why."""


class UnresolvedHost(UnsafeURL):
    """The host has no address right now. Unlike the other refusals this may pass on its own."""


class CallbackTarget(NamedTuple):
    """The parts of a callback URL the transport needs, host in ASCII (IDNA) without brackets."""

    scheme: str
    host: str
    port: int
    path: str

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"


_UNSAFE_CHARACTER = re.compile(r"[\x00-\x20\x7f]")


def parse_callback_url(url: str) -> CallbackTarget:
    """Split a callback URL, refusing what no callback needs: other schemes, no host, user:pass@, and
    spaces or control characters (urlsplit drops CR, LF and tab silently, so the URL stored would not be
    the one used; a raw CR or LF in a request line is header injection)."""
    unsafe = _UNSAFE_CHARACTER.search(url)
    if unsafe is not None:
        raise UnsafeURL(
            f"the URL has a space or control character ({unsafe.group()!r} at position {unsafe.start()});"
            " percent-encode it"
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeURL(f"invalid URL {url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        raise UnsafeURL(f"only http and https callback URLs are allowed, not {scheme or 'no'} scheme")
    if parts.username is not None or parts.password is not None:
        raise UnsafeURL("callback URLs must not carry credentials (user:password@)")
    if not parts.hostname:
        raise UnsafeURL("callback URL has no host")
    try:
        host = parts.hostname.encode("idna").decode("ascii")
    except UnicodeError:
        raise UnsafeURL(f"invalid host name {parts.hostname!r}") from None
    if not _HOST_CHARACTERS.fullmatch(host) or (":" in host and _ip_literal(host) is None):
        raise UnsafeURL(f"invalid host name {parts.hostname!r}")
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    return CallbackTarget(scheme, host, port or DEFAULT_PORTS[scheme], path)


def validate_callback_url(url: str, *, allow_private: bool) -> None:
    """Refuse a callback URL that points, or currently resolves, into a non-public network.

    A name that does not resolve at all is accepted: DNS may be briefly down, or the record not published
    yet, and refusing would turn a transient outage into a rejected job. Nothing is sent to such a name
    without `resolve_public_addresses` vetting it at connect time.
    """
    target = parse_callback_url(url)
    literal = _ip_literal(target.host)
    if literal is not None:
        if not allow_private and not is_public(literal):
            raise UnsafeURL(f"{target.host} is not a public address")
        return
    try:
        resolve_public_addresses(target.host, target.port, allow_private=allow_private)
    except UnresolvedHost:
        return


def resolve_public_addresses(host: str, port: int, *, allow_private: bool) -> list[str]:
    """Resolve `host` and return the addresses to connect to, all of them public unless allowed otherwise.

    Every address must pass, not just the first: the connecting side may fall back to any of them.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise UnresolvedHost(f"{host} does not resolve: {exc}") from None
    except (UnicodeError, ValueError) as exc:
        raise UnsafeURL(f"invalid host name {host!r}: {exc}") from None
    addresses: list[str] = []
    for _family, _type, _proto, _canonname, sockaddr in infos:
        address = str(sockaddr[0])
        try:
            parsed = ipaddress.ip_address(address)
        except ValueError:
            raise UnsafeURL(f"{host} resolves to an unparsable address {address!r}") from None
        if not allow_private and not is_public(parsed):
            raise UnsafeURL(f"{host} resolves to {address}, which is not a public address")
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise UnresolvedHost(f"{host} has no addresses")
    return addresses


def is_public(address: IPAddress) -> bool:
    """Globally routable unicast: not loopback, private, link-local (metadata), CGNAT, reserved, multicast.

    An IPv6 address that carries an IPv4 address for a translator or tunnel to reach (see
    `embedded_ipv4`) is public only if every IPv4 address it carries is: ``[64:ff9b::7f00:1]`` reaches
    127.0.0.1 through a NAT64 gateway, and ``is_global`` alone calls it public."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return is_public(address.ipv4_mapped)  # ::ffff:a.b.c.d is a.b.c.d on a dual-stack socket
        if any(address in network for network in _NEVER_PUBLIC_V6):
            return False
        if not all(is_public(carried) for carried in embedded_ipv4(address)):
            return False
    return address.is_global and not address.is_multicast


# Translation and tunnel prefixes whose addresses carry an IPv4 address in their low 32 bits.
_NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052
_IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")  # RFC 2765 (SIIT)
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")  # RFC 4291, deprecated but still routed by some stacks
# Not globally reachable in IANA's registry, though Python 3.11's `is_global` says so: local-use NAT64
# (RFC 8215) embeds an IPv4 address at a position only its operator knows.
_NEVER_PUBLIC_V6 = (ipaddress.IPv6Network("64:ff9b:1::/48"),)


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address hands to a translator or tunnel: IPv4-mapped, IPv4-compatible,
    IPv4-translated, NAT64 (64:ff9b::/96), 6to4 (2002::/16), and Teredo's server and client."""
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address in _NAT64_WELL_KNOWN or address in _IPV4_TRANSLATED or address in _IPV4_COMPATIBLE:
        return [low32]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return list(address.teredo)
    return []


def _ip_literal(host: str) -> IPAddress | None:
    """The address a host string denotes by itself, in any spelling a C resolver would accept.

    `inet_aton` reads the old BSD forms (`2130706433`, `0x7f000001`, `0177.0.0.1`, `127.1`) that
    `ipaddress` refuses but libc, and so the HTTP client, would happily connect to.
    """
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None
