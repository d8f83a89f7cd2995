"""SMTP (RFC 5321, with PIPELINING, RFC 2920) as common/wire/smtp.py speaks it, against a scripted server on
loopback that records every byte it receives and answers what each test says: dot-stuffing and the end of
data (4.5.2), multi-line replies (4.2.1), the reply codes (2yz go on, 4yz and 5yz refuse the command, 421
closes the connection, 251 is accepted), a refused transaction reset with RSET and the connection reused,
and commands pipelined only when the server offers it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from common.wire.smtp import SmtpPool, SmtpRefused, SmtpSettings, SmtpUnreachable

Answer = Callable[[str], str]


class ScriptedServer:
    """Greets with `greeting`, answers each command line with `answer(line)` (the default: what a willing
    server says), keeps the lines and each message's data as received (dot-stuffed, CRLF-terminated)."""

    def __init__(
        self, answer: Answer | None = None, *, pipelining: bool = True, greeting: str = "220 ok"
    ) -> None:
        self.answer = answer or (lambda line: "")
        self.pipelining = pipelining
        self.greeting = greeting
        self.lines: list[str] = []
        self.data: list[bytes] = []
        self.connections = 0

    def _default(self, line: str) -> str:
        verb = line.split(" ", 1)[0].split(":", 1)[0].upper()
        if verb == "EHLO":
            extensions = ["250-PIPELINING"] if self.pipelining else []
            return "\r\n".join(
                ["250-test.example greets you", *extensions, "250-8BITMIME", "250 SIZE 1000000"]
            )
        return {"MAIL": "250 2.1.0 ok", "RCPT": "250 2.1.5 ok", "DATA": "354 go ahead", "RSET": "250 reset",
                "QUIT": "221 bye"}.get(verb, "502 not implemented")  # fmt: skip

    async def start(self) -> SmtpSettings:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return SmtpSettings("127.0.0.1", port, "", "", False, False, 5.0, None)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        writer.write(self.greeting.encode() + b"\r\n")
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while line := (await reader.readline()).decode():
                line = line.rstrip("\r\n")
                self.lines.append(line)
                reply = self.answer(line) or self._default(line)
                writer.write(reply.encode() + b"\r\n")
                await writer.drain()
                if reply.startswith("421"):
                    break
                if reply.startswith("354"):  # the data, to the line that is a lone "."
                    data = bytearray()
                    while (chunk := await reader.readline()) and chunk != b".\r\n":
                        data += chunk
                    self.data.append(bytes(data + chunk))
                    self.lines.append("<data>")
                    after = self.answer("<data>") or "250 2.0.0 queued"
                    writer.write(after.encode() + b"\r\n")
        writer.close()


def _run(server: ScriptedServer, test: Callable[[SmtpPool], Awaitable[Any]], size: int = 1) -> Any:
    async def main() -> Any:
        pool = SmtpPool(await server.start(), size=size)
        try:
            return await test(pool)
        finally:
            await pool.aclose()
            server.server.close()

    return asyncio.run(main())


def test_lines_starting_with_a_dot_are_stuffed_and_the_data_ends_with_crlf_dot_crlf() -> None:
    """4.5.2: a line of the message that starts with "." gets one more; the data ends with CRLF.CRLF, a
    CRLF added first when the message does not end with one."""
    server = ScriptedServer()
    message = b"Subject: dots\r\n\r\n.hidden\r\n..two\r\nmiddle . dot\r\n.\r\nlast line"
    _run(server, lambda pool: pool.send("from@example.com", "to@example.com", message))
    assert server.data == [
        b"Subject: dots\r\n\r\n..hidden\r\n...two\r\nmiddle . dot\r\n..\r\nlast line\r\n.\r\n"
    ]
    assert server.lines[1:4] == ["MAIL FROM:<from@example.com>", "RCPT TO:<to@example.com>", "DATA"]
    assert server.lines[0].startswith("EHLO ")


def test_one_connection_carries_many_transactions_and_quit_ends_it() -> None:
    server = ScriptedServer()

    async def test(pool: SmtpPool) -> None:
        for n in range(3):
            await pool.send("from@example.com", f"to{n}@example.com", b"x\r\n")

    _run(server, test)
    assert server.connections == 1 and len(server.data) == 3
    assert server.lines.count("DATA") == 3 and server.lines[-1] == "QUIT"


@pytest.mark.parametrize(
    ("answer", "command", "code"),
    [
        (lambda line: "550 5.1.1 no such user" if line.startswith("RCPT") else "", "RCPT", 550),
        (lambda line: "452 4.2.2 mailbox full" if line.startswith("RCPT") else "", "RCPT", 452),
        (lambda line: "553 5.7.1 sender refused" if line.startswith("MAIL") else "", "MAIL", 553),
        (lambda line: "554 5.6.0 content refused" if line == "<data>" else "", "DATA", 554),
    ],
    ids=["rcpt-5yz", "rcpt-4yz", "mail-5yz", "data-after-content"],
)
def test_a_refused_command_fails_that_email_the_transaction_is_reset_and_the_connection_reused(
    answer: Answer, command: str, code: int
) -> None:
    server = ScriptedServer(answer)

    async def test(pool: SmtpPool) -> SmtpRefused:
        with pytest.raises(SmtpRefused) as refused:
            await pool.send("from@example.com", "to@example.com", b"x\r\n")
        server.answer = lambda line: ""
        await pool.send("from@example.com", "next@example.com", b"y\r\n")
        return refused.value

    refused = _run(server, test)
    assert (refused.command, refused.code) == (command, code)
    assert "RSET" in server.lines and server.connections == 1
    assert server.data[-1] == b"y\r\n.\r\n"


def test_251_user_not_local_is_accepted() -> None:
    server = ScriptedServer(lambda line: "251 2.1.5 will forward" if line.startswith("RCPT") else "")
    _run(server, lambda pool: pool.send("from@example.com", "to@example.com", b"x\r\n"))
    assert server.data == [b"x\r\n.\r\n"]


def test_pipelined_commands_after_a_refused_mail_end_an_accepted_data_empty() -> None:
    """RFC 2920 3.1: with PIPELINING, RCPT and DATA follow MAIL without waiting; when MAIL was refused and
    the server still says 354, the client ends the data at once (a lone ".") and sends no message."""
    answers = {"MAIL": "550 5.7.1 no", "RCPT": "503 5.5.1 need MAIL"}
    server = ScriptedServer(lambda line: answers.get(line.split(" ", 1)[0], ""))

    async def test(pool: SmtpPool) -> None:
        with pytest.raises(SmtpRefused, match="MAIL refused: 550"):
            await pool.send("from@example.com", "to@example.com", b"secret\r\n")

    _run(server, test)
    assert server.data == [b".\r\n"] and server.lines[1:4] == [
        "MAIL FROM:<from@example.com>", "RCPT TO:<to@example.com>", "DATA"
    ]  # fmt: skip


def test_without_pipelining_each_command_waits_for_its_reply() -> None:
    """RFC 5321 without RFC 2920: after a refused MAIL the client sends no RCPT and no DATA."""
    server = ScriptedServer(lambda line: "550 5.7.1 no" if line.startswith("MAIL") else "", pipelining=False)

    async def test(pool: SmtpPool) -> None:
        with pytest.raises(SmtpRefused, match="MAIL refused: 550"):
            await pool.send("from@example.com", "to@example.com", b"x\r\n")

    _run(server, test)
    assert not [line for line in server.lines if line.startswith(("RCPT", "DATA"))]
    assert server.lines[-2:] == ["RSET", "QUIT"]


def test_421_closes_the_connection_and_the_next_email_opens_another() -> None:
    """3.8: 421 means the server is closing the channel, whatever command it answers."""
    closing = [True]

    def answer(line: str) -> str:
        if line.startswith("RCPT") and closing[0]:
            closing[0] = False
            return "421 4.3.2 shutting down"
        return ""

    server = ScriptedServer(answer)

    async def test(pool: SmtpPool) -> None:
        with pytest.raises(SmtpUnreachable, match="421"):
            await pool.send("from@example.com", "to@example.com", b"x\r\n")
        await pool.send("from@example.com", "to@example.com", b"x\r\n")

    _run(server, test)
    assert server.connections == 2 and server.data == [b"x\r\n.\r\n"]


@pytest.mark.parametrize("greeting", ["554 5.3.2 no service here", "421 4.3.2 busy"])
def test_a_server_that_does_not_greet_with_220_is_unreachable(greeting: str) -> None:
    server = ScriptedServer(greeting=greeting)

    async def test(pool: SmtpPool) -> None:
        with pytest.raises(SmtpUnreachable):
            await pool.send("from@example.com", "to@example.com", b"x\r\n")

    _run(server, test)
    assert server.data == []
