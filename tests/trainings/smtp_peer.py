"""The SMTP peer for the email tests: an aiosmtpd server on loopback that keeps what it receives (and
refuses the recipients it is told to, drops a connection when told to, offers PIPELINING when told to),
with the settings that point Django's SMTP backend at it."""

from __future__ import annotations

import email
import socket
import threading
from collections.abc import Iterator
from email.message import EmailMessage
from email.policy import default as default_policy
from typing import Any

import pytest
from aiosmtpd.controller import Controller


class Inbox:
    """aiosmtpd handler: keeps every message (and in `ports` the client port it came from: which
    connection); refuses the recipients in `refuse` with a 550; closes the connection instead of taking the
    next message when `drop_next` is set; offers PIPELINING when `pipelining` is set (aiosmtpd reads
    commands line by line, so it serves pipelined ones, it only does not say so)."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.ports: list[int] = []
        self.refuse: set[str] = set()
        self.drop_next = False
        self.pipelining = False
        self.lock = threading.Lock()

    async def handle_EHLO(
        self, server: Any, session: Any, envelope: Any, hostname: str, responses: list[str]
    ) -> list[str]:
        session.host_name = hostname
        return [*responses[:-1], *(["250-PIPELINING"] if self.pipelining else []), responses[-1]]

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str, options: Any) -> str:
        if address in self.refuse:
            return "550 5.1.1 No such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.drop_next:
            self.drop_next = False
            server.transport.close()
            return "451 dropped"
        parsed = email.message_from_bytes(envelope.content, policy=default_policy)
        with self.lock:
            self.messages.append(parsed)
            self.ports.append(session.peer[1])
        return "250 Message accepted"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def smtp_started(settings: Any, **options: Any) -> tuple[Inbox, Controller]:
    """An Inbox served on loopback (aiosmtpd `options`: TLS, AUTH), Django's SMTP backend pointed at it."""
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port(), **options)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    settings.TRAININGS_PUBLIC_URL = "https://coach.example.com"
    return inbox, controller


@pytest.fixture
def smtp(settings: Any) -> Iterator[Inbox]:
    inbox, controller = smtp_started(settings)
    from trainings.answers.links import _url_parts

    _url_parts.cache_clear()
    yield inbox
    controller.stop()
    _url_parts.cache_clear()
