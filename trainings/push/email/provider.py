"""Sending one reminder email through Django's email framework (SMTP, a django-anymail provider, or the
console under `make run`), on threads of its own: the backends are blocking, the gateway's loop is not.

Each thread keeps one open connection and reuses it for every email it sends; a connection that fails is
closed and opened again on the next email. What the server answers becomes the gateway's verdict: a
recipient refused permanently (SMTP 5xx on RCPT, anymail's "rejected"/"invalid") disables the address
like a dead token; a temporary refusal (4xx), a dropped connection or a provider's 429/5xx is retried;
refused credentials stop the gateway.
"""

from __future__ import annotations

import asyncio
import contextlib
import smtplib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.core.mail import get_connection

from trainings.push.email.message import email_for
from trainings.push.messages import PushMessage, SendResult, Target, Verdict


class EmailProvider:
    name = "email"

    def __init__(self, *, threads: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="email")
        self._local = threading.local()
        self._connections: list[Any] = []
        self._lock = threading.Lock()

    def prepare(self) -> None:
        pass

    async def send(self, push: PushMessage, device: Target) -> SendResult:
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._send, push, device)

    async def aclose(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._close_all)

    def _connection(self) -> Any:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = get_connection(fail_silently=False)
            connection.open()
            with self._lock:
                self._connections.append(connection)
        return connection

    def _drop(self) -> None:
        connection = getattr(self._local, "connection", None)
        self._local.connection = None
        if connection is not None:
            with contextlib.suppress(Exception):  # a broken connection may fail to close; dropped anyway
                connection.close()

    def _close_all(self) -> None:
        self._pool.shutdown(wait=True)
        with self._lock:
            for connection in self._connections:
                with contextlib.suppress(Exception):
                    connection.close()
            self._connections.clear()

    def _send(self, push: PushMessage, device: Target) -> SendResult:
        message = email_for(push, device)
        try:
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
            return SendResult(Verdict.RETRY, error=f"SMTP unreachable: {type(exc).__name__}")
        except Exception as exc:  # an anymail backend's errors, read by name (anymail is optional here)
            self._drop()
            return _anymail_verdict(exc)
        status = getattr(message, "anymail_status", None)
        message_id = str(getattr(status, "message_id", "") or "") or message.extra_headers["Message-ID"]
        return SendResult(Verdict.ACCEPTED, message_id=message_id)


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
