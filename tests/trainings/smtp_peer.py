"""The SMTP peer for the email tests: an aiosmtpd server on loopback that keeps what it receives (and
refuses the recipients it is told to), with the settings that point Django's SMTP backend at it."""

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
    """aiosmtpd handler: keeps every message; refuses the recipients in `refuse` with a 550."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.refuse: set[str] = set()
        self.lock = threading.Lock()

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str, options: Any) -> str:
        if address in self.refuse:
            return "550 5.1.1 No such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        parsed = email.message_from_bytes(envelope.content, policy=default_policy)
        with self.lock:
            self.messages.append(parsed)
        return "250 Message accepted"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def smtp(settings: Any) -> Iterator[Inbox]:
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=_free_port())
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    settings.TRAININGS_PUBLIC_URL = "https://coach.example.com"
    from trainings.answers.links import _url_parts

    _url_parts.cache_clear()
    yield inbox
    controller.stop()
    _url_parts.cache_clear()
