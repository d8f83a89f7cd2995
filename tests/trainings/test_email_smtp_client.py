"""The gateway's SMTP client (common/wire/smtp.py) against aiosmtpd servers on loopback: STARTTLS
and AUTH as Django's settings say, commands pipelined when the server offers it, one connection reused for
many emails, a refused recipient that leaves the connection usable, a server that drops the connection
(the email is retried, the next one opens a new connection), and refused credentials that stop the gateway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.smtp import AuthResult, LoginPassword

from delivery.channels.email.provider import EmailProvider
from delivery.messages import PushMessage, SendResult, Target, Verdict
from tests.peers.credentials import server_tls
from tests.trainings.push_fixtures import message
from tests.trainings.smtp_peer import Inbox, smtp_started


def _authenticator(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
    ok = isinstance(data, LoginPassword) and (data.login, data.password) == (b"reminders", b"s3cret")
    return AuthResult(success=ok, handled=False)  # aiosmtpd answers 235 / 535


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
    smtp: Inbox, pipelining: bool
) -> None:
    smtp.pipelining = pipelining
    smtp.refuse.add("gone@example.com")
    addresses = [f"p{i}@example.com" for i in range(12)]
    results = _send(EmailProvider(connections=2), *addresses[:6], "gone@example.com", *addresses[6:])
    verdicts = [r.verdict for r in results]
    assert verdicts.count(Verdict.ACCEPTED) == 12
    assert results[6].verdict == Verdict.TOKEN_DEAD and results[6].error.startswith("SMTP 550")
    assert sorted(m["To"] for m in smtp.messages) == sorted(addresses)
    assert len(set(smtp.ports)) <= 2  # two connections at most, each reused


def test_a_dropped_connection_is_retried_and_the_next_email_opens_a_new_one(smtp: Inbox) -> None:
    provider = EmailProvider(connections=1)
    smtp.drop_next = True

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
    assert [m["To"] for m in smtp.messages] == ["b@example.com"]


@pytest.fixture
def tls_server(settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Inbox]:
    """STARTTLS with a certificate the client trusts (SSL_CERT_FILE), AUTH required after it."""
    context, ca_file = server_tls(tmp_path, [])
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    inbox, controller = smtp_started(settings, tls_context=context, require_starttls=True,
                                     auth_required=True, authenticator=_authenticator)  # fmt: skip
    settings.EMAIL_USE_TLS = True
    settings.EMAIL_HOST_USER, settings.EMAIL_HOST_PASSWORD = "reminders", "s3cret"
    yield inbox
    controller.stop()


def test_starttls_and_auth_as_the_settings_say(tls_server: Inbox) -> None:
    (result,) = _send(EmailProvider(connections=1), "anna@example.com")
    assert result.verdict == Verdict.ACCEPTED
    (mail,) = tls_server.messages
    assert mail["To"] == "anna@example.com" and mail["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"


def test_refused_credentials_stop_the_gateway(tls_server: Inbox, settings: Any) -> None:
    settings.EMAIL_HOST_PASSWORD = "wrong"
    (result,) = _send(EmailProvider(connections=1), "anna@example.com")
    assert result.verdict == Verdict.AUTH and tls_server.messages == [], result.error
