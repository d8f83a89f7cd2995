"""The gateway's SMTP client (trainings/push/email/smtp.py) against aiosmtpd servers on loopback: STARTTLS
and AUTH as Django's settings say, commands pipelined when the server offers it, one connection reused for
many emails, a refused recipient that leaves the connection usable, a server that drops the connection
(the email is retried, the next one opens a new connection), and refused credentials that stop the gateway.
"""

from __future__ import annotations

import asyncio
import email
import socket
from collections.abc import Iterator
from email.policy import default as default_policy
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from tests.trainings.push_fixtures import message
from trainings.push.email.provider import EmailProvider
from trainings.push.messages import PushMessage, SendResult, Target, Verdict
from trainings.push.peer_credentials import server_tls


class Server:
    """aiosmtpd handler: keeps each message with the connection (peer port) it came on; refuses `refuse`."""

    def __init__(self) -> None:
        self.messages: list[tuple[int, Any]] = []
        self.commands: list[str] = []
        self.refuse: set[str] = set()
        self.drop_next = False
        self.pipelining = False

    async def handle_EHLO(
        self, server: Any, session: Any, envelope: Any, hostname: str, responses: list[str]
    ) -> list[str]:
        """aiosmtpd reads commands line by line, so it serves pipelined ones: it says so when asked to."""
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
        self.messages.append((session.peer[1], parsed))
        return "250 Message accepted"


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _authenticator(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
    ok = isinstance(data, LoginPassword) and (data.login, data.password) == (b"reminders", b"s3cret")
    return AuthResult(success=ok, handled=False)  # aiosmtpd answers 235 / 535


@pytest.fixture
def server(settings: Any) -> Iterator[Server]:
    handler = Server()
    controller = Controller(handler, hostname="127.0.0.1", port=_port())
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    settings.TRAININGS_PUBLIC_URL = "https://coach.example.com"
    yield handler
    controller.stop()


def _send(provider: EmailProvider, *addresses: str) -> list[SendResult]:
    async def run() -> list[SendResult]:
        try:
            return list(await asyncio.gather(*[
                provider.send(PushMessage.from_body(message(f"occ.{i}", 7)), Target(i, "email", "email", a))
                for i, a in enumerate(addresses)
            ]))  # fmt: skip
        finally:
            await provider.aclose()

    return asyncio.run(run())


@pytest.mark.parametrize("pipelining", [False, True])
def test_many_emails_share_the_pool_s_connections_and_a_refusal_leaves_them_usable(
    server: Server, pipelining: bool
) -> None:
    server.pipelining = pipelining
    server.refuse.add("gone@example.com")
    addresses = [f"p{i}@example.com" for i in range(12)]
    results = _send(EmailProvider(connections=2), *addresses[:6], "gone@example.com", *addresses[6:])
    verdicts = [r.verdict for r in results]
    assert verdicts.count(Verdict.ACCEPTED) == 12
    assert results[6].verdict == Verdict.TOKEN_DEAD and results[6].error.startswith("SMTP 550")
    assert sorted(m["To"] for _, m in server.messages) == sorted(addresses)
    assert len({port for port, _ in server.messages}) <= 2  # two connections at most, each reused


def test_a_dropped_connection_is_retried_and_the_next_email_opens_a_new_one(server: Server) -> None:
    provider = EmailProvider(connections=1)
    server.drop_next = True

    async def run() -> list[SendResult]:
        results = [
            await provider.send(
                PushMessage.from_body(message(f"occ.{i}", 7)), Target(i, "email", "email", to)
            )
            for i, to in enumerate(["a@example.com", "b@example.com"])
        ]
        await provider.aclose()
        return results

    first, second = asyncio.run(run())
    assert first.verdict == Verdict.RETRY and "unreachable" in first.error
    assert second.verdict == Verdict.ACCEPTED
    assert [m["To"] for _, m in server.messages] == ["b@example.com"]


@pytest.fixture
def tls_server(settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    """STARTTLS with a certificate the client trusts (SSL_CERT_FILE), AUTH required after it."""
    context, ca_file = server_tls(tmp_path, [])
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    handler = Server()
    controller = Controller(
        handler, hostname="127.0.0.1", port=_port(), tls_context=context, require_starttls=True,
        auth_required=True, authenticator=_authenticator,
    )  # fmt: skip
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = "127.0.0.1", controller.port, True
    settings.EMAIL_HOST_USER, settings.EMAIL_HOST_PASSWORD = "reminders", "s3cret"
    settings.TRAININGS_PUBLIC_URL = "https://coach.example.com"
    yield handler
    controller.stop()


def test_starttls_and_auth_as_the_settings_say(tls_server: Server) -> None:
    (result,) = _send(EmailProvider(connections=1), "anna@example.com")
    assert result.verdict == Verdict.ACCEPTED
    ((_, mail),) = tls_server.messages
    assert mail["To"] == "anna@example.com" and mail["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"


def test_refused_credentials_stop_the_gateway(tls_server: Server, settings: Any) -> None:
    settings.EMAIL_HOST_PASSWORD = "wrong"
    (result,) = _send(EmailProvider(connections=1), "anna@example.com")
    assert result.verdict == Verdict.AUTH and tls_server.messages == [], result.error
