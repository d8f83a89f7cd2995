"""An SMTP client on the gateway's event loop: a pool of up to N open connections, each reused for every
email it sends, the commands of one email pipelined (RFC 2920) when the server offers it.

Why not Django's SMTP backend on threads: each email there is four request/answer exchanges, each handing
the GIL back and forth with the gateway's other threads; under load, that handover, not the server, set
the pace. Here one thread serves every connection. The connection settings are the SMTP backend's own
(a `django.core.mail.backends.smtp.EmailBackend` is asked for its host, port, credentials, TLS mode,
timeout and TLS context), so EMAIL_HOST, EMAIL_USE_TLS (STARTTLS), EMAIL_USE_SSL, EMAIL_HOST_USER and the
rest mean what they mean for Django.

A refusal is an `SmtpRefused` naming the command and the server's code; a connection that fails (reset,
timeout, a 421) is an `SmtpUnreachable` and is closed; the pool opens another for the next email.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
from dataclasses import dataclass, field
from typing import Any

from django.core.mail.utils import DNS_NAME

_DOT = re.compile(rb"^\.", re.MULTILINE)


class SmtpRefused(Exception):
    """The server refused a command of this email: `command` (MAIL, RCPT, DATA, AUTH), its code and text."""

    def __init__(self, command: str, code: int, text: str) -> None:
        super().__init__(f"{command} refused: {code} {text}")
        self.command, self.code, self.text = command, code, text


class SmtpUnreachable(Exception):
    """No answer, a dropped connection, or the server closing it (421): try again later."""


@dataclass(frozen=True)
class SmtpSettings:
    host: str
    port: int
    username: str
    password: str
    starttls: bool
    implicit_tls: bool
    timeout: float | None
    ssl_context: Any = field(compare=False)

    @classmethod
    def of(cls, backend: Any) -> SmtpSettings:
        """The settings a Django SMTP backend instance would connect with."""
        tls = backend.use_tls or backend.use_ssl
        return cls(backend.host, int(backend.port), backend.username or "", backend.password or "",
                   bool(backend.use_tls), bool(backend.use_ssl), backend.timeout,
                   backend.ssl_context if tls else None)  # fmt: skip


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.pipelining = False

    async def reply(self) -> tuple[int, str]:
        lines = []
        while True:
            line = await self.reader.readline()
            if not line:
                raise SmtpUnreachable("the server closed the connection")
            lines.append(line[4:].strip().decode(errors="replace"))
            if line[3:4] != b"-":
                code = int(line[:3])
                if code == 421:
                    raise SmtpUnreachable(f"421 {' '.join(lines)}")
                return code, " ".join(lines)

    async def command(self, line: str, *, expect: int, name: str) -> tuple[int, str]:
        self.writer.write(line.encode() + b"\r\n")
        code, text = await self.reply()
        if code != expect:
            raise SmtpRefused(name, code, text)
        return code, text

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


async def _open(settings: SmtpSettings) -> _Connection:
    reader, writer = await asyncio.open_connection(
        settings.host, settings.port, ssl=settings.ssl_context if settings.implicit_tls else None
    )
    connection = _Connection(reader, writer)
    try:
        code, text = await connection.reply()
        if code != 220:
            raise SmtpUnreachable(f"greeting {code} {text}")
        helo = f"EHLO {DNS_NAME.get_fqdn()}"
        _, offered = await connection.command(helo, expect=250, name="EHLO")
        if settings.starttls:
            await connection.command("STARTTLS", expect=220, name="STARTTLS")
            await writer.start_tls(settings.ssl_context)
            _, offered = await connection.command(helo, expect=250, name="EHLO")
        extensions = {word.upper() for word in offered.split()}
        connection.pipelining = "PIPELINING" in extensions
        if settings.username and settings.password:
            await _login(connection, settings, extensions)
    except BaseException:
        connection.close()
        raise
    return connection


async def _login(connection: _Connection, settings: SmtpSettings, extensions: set[str]) -> None:
    if "PLAIN" in extensions or "LOGIN" not in extensions:
        secret = base64.b64encode(f"\0{settings.username}\0{settings.password}".encode()).decode()
        await connection.command(f"AUTH PLAIN {secret}", expect=235, name="AUTH")
        return
    await connection.command("AUTH LOGIN", expect=334, name="AUTH")
    await connection.command(base64.b64encode(settings.username.encode()).decode(), expect=334, name="AUTH")
    await connection.command(base64.b64encode(settings.password.encode()).decode(), expect=235, name="AUTH")


class SmtpPool:
    """Up to `size` open connections to one server, on the running event loop: at most `size` emails are
    in flight, each on an idle connection or, when none is, a new one."""

    def __init__(self, settings: SmtpSettings, *, size: int) -> None:
        self.settings, self.size = settings, size
        self._idle: list[_Connection] = []
        self._slots: asyncio.Semaphore | None = None  # made on the loop that sends

    async def send(self, sender: str, recipient: str, message: bytes) -> None:
        """One email to one recipient; SmtpRefused or SmtpUnreachable otherwise."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.size)
        async with self._slots:
            try:
                async with asyncio.timeout(self.settings.timeout):
                    connection = self._idle.pop() if self._idle else await _open(self.settings)
            except SmtpRefused as exc:
                if exc.command == "AUTH":
                    raise
                raise SmtpUnreachable(str(exc)) from exc
            except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError) as exc:
                raise SmtpUnreachable(f"{type(exc).__name__}: {exc}"[:200]) from exc
            try:
                async with asyncio.timeout(self.settings.timeout):
                    await self._transaction(connection, sender, recipient, message)
            except SmtpRefused:
                self._idle.append(connection)  # the transaction was reset: the connection is fine
                raise
            except (OSError, TimeoutError, ValueError, SmtpUnreachable, asyncio.IncompleteReadError) as exc:
                connection.close()
                raise SmtpUnreachable(f"{type(exc).__name__}: {exc}"[:200]) from exc
            except BaseException:
                connection.close()
                raise
            self._idle.append(connection)

    async def _transaction(
        self, connection: _Connection, sender: str, recipient: str, message: bytes
    ) -> None:
        commands = [f"MAIL FROM:<{sender}>", f"RCPT TO:<{recipient}>", "DATA"]
        if connection.pipelining:
            connection.writer.write("".join(f"{c}\r\n" for c in commands).encode())
            replies = [await connection.reply() for _ in commands]
        else:
            replies = []
            for command in commands:
                connection.writer.write(command.encode() + b"\r\n")
                replies.append(await connection.reply())
                if replies[-1][0] >= 400:
                    break
        refused = next(((name, *reply) for name, reply, ok in zip(("MAIL", "RCPT", "DATA"), replies,
                        (250, 250, 354), strict=False) if reply[0] not in (ok, 251)), None)  # fmt: skip
        if refused is None:
            data = _DOT.sub(b"..", message)
            connection.writer.write(data + (b"" if data.endswith(b"\r\n") else b"\r\n") + b".\r\n")
            code, text = await connection.reply()
            if code != 250:
                await self._reset(connection)
                raise SmtpRefused("DATA", code, text)
            return
        if len(replies) == 3 and replies[2][0] == 354:  # DATA accepted after a refusal: end it empty
            connection.writer.write(b".\r\n")
            await connection.reply()
        await self._reset(connection)
        raise SmtpRefused(*refused)

    @staticmethod
    async def _reset(connection: _Connection) -> None:
        connection.writer.write(b"RSET\r\n")
        await connection.reply()

    async def aclose(self) -> None:
        for connection in self._idle:
            with contextlib.suppress(Exception):
                connection.writer.write(b"QUIT\r\n")
                await asyncio.wait_for(connection.writer.drain(), 1)
            connection.close()
        self._idle.clear()
