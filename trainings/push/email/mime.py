"""A multipart/alternative email (a text and an HTML body) as the bytes an SMTP server receives, written
directly instead of through `email.message` objects and their generator, which cost more CPU per email
than everything else the gateway does for it.

What it writes is what Django's `EmailMultiAlternatives(...).message().as_bytes()` writes for the same
email (tests/trainings/test_email_mime.py compares both parsed): UTF-8 bodies sent as 7bit or 8bit, or
quoted-printable when a line is longer than SMTP allows; a non-ASCII subject or display name as an RFC 2047
encoded word; header values on one line (a newline in a value would start a header of its own: refused).
"""

from __future__ import annotations

import quopri
import uuid
from email.header import Header

from django.core.mail.message import sanitize_address

# RFC 5322 2.1.1: no line of a message may be longer than 998 characters.
LINE_LIMIT = 998


def header_text(value: str) -> str:
    """An unstructured header's value (Subject): as it is when ASCII, else an RFC 2047 encoded word."""
    if "\n" in value or "\r" in value:
        raise ValueError("a header value cannot contain a newline")
    if value.isascii() and len(value) < LINE_LIMIT - 20:
        return value
    return Header(value, "utf-8", header_name="Subject").encode(linesep="\r\n")


def address(value: str) -> str:
    """An address header's value (From, To): a plain ASCII address as it is, anything else as Django's
    SMTP backend writes it (display name encoded, domain in punycode)."""
    if value.isascii() and "<" not in value and "\n" not in value and "\r" not in value and " " not in value:
        return value
    return sanitize_address(value, "utf-8")


def _body(content_type: str, text: str) -> bytes:
    raw = text.replace("\r\n", "\n").encode()
    if max(map(len, raw.split(b"\n")), default=0) > LINE_LIMIT:
        encoding, payload = "quoted-printable", quopri.encodestring(raw)
    else:
        encoding, payload = ("7bit" if raw.isascii() else "8bit"), raw
    head = (f'Content-Type: {content_type}; charset="utf-8"\r\nMIME-Version: 1.0\r\n'
            f"Content-Transfer-Encoding: {encoding}\r\n\r\n")  # fmt: skip
    return head.encode() + payload.replace(b"\n", b"\r\n")


def alternative(headers: list[tuple[str, str]], text: str, html: str) -> bytes:
    """The message: `headers` (name, value already made by `header_text`/`address` where needed), then
    the text body and the HTML body as alternatives."""
    boundary = f"==============={uuid.uuid4().hex}=="
    head = [f'Content-Type: multipart/alternative;\r\n boundary="{boundary}"', "MIME-Version: 1.0"]
    for name, value in headers:
        unfolded = value.replace("\r\n ", " ").replace("\r\n\t", " ")
        if "\n" in unfolded or "\r" in unfolded:  # only folding (a line break and a blank) may be in it
            raise ValueError(f"header {name} cannot contain a newline")
        # RFC 5322 2.1.1: lines SHOULD stay within 78 characters; a long value without blanks (a link) goes
        # on a continuation line of its own, as the standard library folds it.
        fold = len(name) + 2 + len(value) > 78 and " " not in value and "\r\n" not in value
        head.append(f"{name}: \r\n {value}" if fold else f"{name}: {value}")
    separator = f"\r\n--{boundary}\r\n".encode()
    return b"".join([
        "\r\n".join(head).encode(), b"\r\n", separator, _body("text/plain", text), separator,
        _body("text/html", html), f"\r\n--{boundary}--\r\n".encode(),
    ])  # fmt: skip
