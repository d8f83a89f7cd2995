"""Sending one reminder email: with Django's SMTP backend (the default), on the gateway's event loop through
a pool of open SMTP connections (common/wire/smtp.py), the bytes of Django's message (message.py
`as_bytes`); with any other backend (a django-anymail provider, the console under `make run`), through that
backend on threads of their own, since those backends block and the gateway's loop must not.

With SMTP, the connection settings are the backend's (EMAIL_HOST, EMAIL_USE_TLS, …) and the bytes are what
Django's SMTP backend sends for the same message; TRAININGS_EMAIL_CONNECTIONS connections at most, each
reused for every email it sends. On threads, each thread keeps one open connection of the
backend; a connection that fails is closed and opened again on the next email.

What the server answers becomes the gateway's verdict: a recipient refused permanently (SMTP 5xx on RCPT,
anymail's "rejected"/"invalid") disables the address like a dead token; a temporary refusal (4xx), a
dropped connection or a provider's 429/5xx is retried; refused credentials stop the gateway; a push that
cannot be an email (a header value with a line break, an address Django cannot write) fails for that
address alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import smtplib
import threading
from concurrent.futures import ThreadPoolExecutor
from email.utils import parseaddr
from typing import Any

from django.conf import settings
from django.core.mail import get_connection
from django.core.mail.backends.smtp import EmailBackend as SmtpBackend
from django.core.mail.message import sanitize_address

from common.wire.smtp import SmtpPool, SmtpRefused, SmtpSettings, SmtpUnreachable
from delivery.channels.email.message import as_bytes, email_for, email_of
from delivery.messages import PushMessage, SendResult, Target, Verdict

# The settings an SMTP connection depends on: a change (a test's) makes a new pool.
_SMTP_SETTINGS = ("EMAIL_BACKEND", "EMAIL_HOST", "EMAIL_PORT", "EMAIL_HOST_USER", "EMAIL_HOST_PASSWORD",
                  "EMAIL_USE_TLS", "EMAIL_USE_SSL", "EMAIL_TIMEOUT", "EMAIL_SSL_KEYFILE",
                  "EMAIL_SSL_CERTFILE")  # fmt: skip


class EmailProvider:
    name = "email"

    def __init__(self, *, connections: int) -> None:
        self.connections = connections  # open SMTP connections at most (or threads, for another backend)
        self._smtp: SmtpPool | None = None
        self._smtp_key: tuple[Any, ...] = ()
        self._retired: list[SmtpPool] = []
        self._threads: ThreadPoolExecutor | None = None  # for a backend that is not SMTP
        self._local = threading.local()
        self._backends: list[Any] = []
        self._lock = threading.Lock()

    def prepare(self) -> None:
        pass

    async def send(self, push: PushMessage, device: Target) -> SendResult:
        pool = self._smtp_pool()
        if pool is None:
            if self._threads is None:
                self._threads = ThreadPoolExecutor(max_workers=self.connections, thread_name_prefix="email")
            return await asyncio.get_running_loop().run_in_executor(self._threads, self._send, push, device)
        try:
            email = email_of(push, device)
            message, recipient = as_bytes(email), _envelope_address(email.to)
        except ValueError as exc:  # a header value with a line break, an address Django cannot write
            return SendResult(Verdict.FAILED, error=f"not an email: {exc}"[:200])
        try:
            await pool.send(_envelope(settings.DEFAULT_FROM_EMAIL), recipient, message)
        except SmtpRefused as exc:
            if exc.command == "AUTH" and exc.code >= 500:
                return SendResult(Verdict.AUTH, error=f"SMTP {exc.code} authentication refused")
            return _smtp_verdict(exc.code, exc.text, dead=exc.command == "RCPT")
        except SmtpUnreachable as exc:
            return SendResult(Verdict.RETRY, error=f"SMTP unreachable: {exc}"[:200])
        return SendResult(Verdict.ACCEPTED, message_id=email.headers["Message-ID"])

    async def aclose(self) -> None:
        for pool in [*self._retired, *([self._smtp] if self._smtp else [])]:
            await pool.aclose()
        if self._threads is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._close_all)

    def _smtp_pool(self) -> SmtpPool | None:
        """The SMTP pool when EMAIL_BACKEND is Django's SMTP backend, else None (the backend on threads)."""
        key = tuple(getattr(settings, name, None) for name in _SMTP_SETTINGS)
        if key != self._smtp_key:
            if self._smtp is not None:
                self._retired.append(self._smtp)
            backend = get_connection(fail_silently=False)
            self._smtp = (
                SmtpPool(SmtpSettings.of(backend), size=self.connections)
                if isinstance(backend, SmtpBackend)
                else None
            )
            self._smtp_key = key
        return self._smtp

    def _connection(self) -> Any:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = get_connection(fail_silently=False)
            connection.open()
            with self._lock:
                self._backends.append(connection)
        return connection

    def _drop(self) -> None:
        connection = getattr(self._local, "connection", None)
        self._local.connection = None
        if connection is not None:
            with contextlib.suppress(Exception):  # a broken connection may fail to close; dropped anyway
                connection.close()

    def _close_all(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=True)
        with self._lock:
            for connection in self._backends:
                with contextlib.suppress(Exception):
                    connection.close()
            self._backends.clear()

    def _send(self, push: PushMessage, device: Target) -> SendResult:
        """On a thread: the email through a backend that is not SMTP (anymail, the console)."""
        try:
            message = email_for(push, device)
            message.connection = self._connection()
            message.send()
        except smtplib.SMTPRecipientsRefused as exc:
            code, text = next(iter(exc.recipients.values()), (550, b""))
            return _smtp_verdict(code, text, dead=True)
        except smtplib.SMTPAuthenticationError as exc:
            self._drop()
            return SendResult(Verdict.AUTH, error=f"SMTP {exc.smtp_code} authentication refused")
        except smtplib.SMTPResponseException as exc:  # sender refused, data refused
            self._drop()
            return _smtp_verdict(exc.smtp_code, exc.smtp_error, dead=False)
        except (smtplib.SMTPException, OSError) as exc:  # disconnected, unreachable
            self._drop()
            if type(exc).__name__.startswith("Anymail"):  # anymail's API errors are requests' (an OSError)
                return _anymail_verdict(exc)
            return SendResult(Verdict.RETRY, error=f"SMTP unreachable: {type(exc).__name__}")
        except ValueError as exc:  # this push cannot be an email (a header with a newline, a bad address)
            return SendResult(Verdict.FAILED, error=f"not an email: {exc}"[:200])
        except Exception as exc:  # an anymail backend's errors, read by name (anymail is optional here)
            self._drop()
            return _anymail_verdict(exc)
        status = getattr(message, "anymail_status", None)
        message_id = str(getattr(status, "message_id", "") or "") or message.extra_headers["Message-ID"]
        return SendResult(Verdict.ACCEPTED, message_id=message_id)


def _envelope_address(address: str) -> str:
    """An address as MAIL FROM and RCPT TO take it, as Django's SMTP backend and smtplib give it (display
    name dropped, domain in punycode)."""
    return parseaddr(sanitize_address(address, "utf-8"))[1]


_envelope = functools.lru_cache(maxsize=16)(_envelope_address)  # MAIL FROM: DEFAULT_FROM_EMAIL, one value


def _smtp_verdict(code: int, text: bytes | str, *, dead: bool) -> SendResult:
    reason = text.decode(errors="replace") if isinstance(text, bytes) else str(text)
    error = f"SMTP {code} {reason}".strip()[:200]
    if 400 <= code < 500:
        return SendResult(Verdict.RETRY, error=error)
    return SendResult(Verdict.TOKEN_DEAD if dead else Verdict.FAILED, error=error)


def _anymail_verdict(exc: Exception) -> SendResult:
    name = type(exc).__name__
    if name == "AnymailRecipientsRefused":
        return SendResult(Verdict.TOKEN_DEAD, error="email provider refused the address")
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if status in (401, 403):
        return SendResult(Verdict.AUTH, error=f"email provider refused our credentials ({status})")
    if status is not None and (status == 429 or status >= 500):
        return SendResult(Verdict.RETRY, error=f"email provider answered {status}")
    if name.startswith("Anymail") and status is not None:
        return SendResult(Verdict.FAILED, error=f"email provider answered {status}")
    return SendResult(Verdict.RETRY, error=f"email not sent: {name}")
