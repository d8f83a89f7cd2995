"""13. The email channel's two protocol pieces against the libraries that could do them, in the same run.

- MIME, the bytes of one reminder email (HTML and text, answer links, unsubscribe headers), made by
  Django's own builder, `EmailMultiAlternatives(...).message().as_bytes()`, the channel's only one: CPU per
  email in this process, and what it takes of a core at the channel's volume. Until it was removed, the
  project's own writer ran beside it here (docs/benchmarks.md, row 13a, has both).
- SMTP, sending those bytes over 8 connections to a local server (bench/smtp_sink.py, a process of its
  own, offering PIPELINING as Postfix does): the project's client (common/wire/smtp.py, one event loop)
  against aiosmtplib (one event loop, 8 clients) and smtplib on 8 threads (what Django's SMTP backend
  drives). Emails per second and this process's CPU per email (the server's not counted).

Each is run ROUNDS times, the competitors alternately; rows give the medians over rounds and the median of
the per-round ratios. The volume they are judged against is the email channel's target, 500 emails/s per
gateway (row 11).
"""

from __future__ import annotations

import asyncio
import dataclasses
import smtplib
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from bench.harness import Harness
from bench.report import RoundRatios, Row, Section

CONNECTIONS = 8
VOLUME = 500.0  # emails/s, the email channel's target (row 11)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _emails(n: int) -> list[Any]:
    """n reminder emails as the channel makes them (`email_of`), each to its own address."""
    from django.utils import timezone

    from delivery.channels.email.message import email_of
    from delivery.messages import PushMessage, Target
    from trainings.reminding.publishing import answered

    push = PushMessage.from_body(answered({
        "schema": "trainings.push/2", "idempotency_key": "wire", "player": 1,
        "title": "Pre-training questionnaire", "body": "Speed session starts at 6 p.m.", "language": "en",
        "training": str(uuid.uuid4()), "kind": "PRE", "rule": "pre-questionnaire",
        "expires_at": (timezone.now() + timedelta(hours=2)).isoformat(),
    }))  # fmt: skip
    email = email_of(push, Target(1, "email", "email", "player0@example.com"))
    return [dataclasses.replace(email, to=f"player{i}@example.com") for i in range(n)]


def _cpu_per_email(build: Callable[[Any], bytes], emails: list[Any]) -> float:
    cpu = time.process_time()
    for email in emails:
        build(email)
    return (time.process_time() - cpu) / len(emails) * 1e6


def _own_smtp(port: int, raw: bytes, n: int) -> dict[str, float]:
    from common.wire.smtp import SmtpPool, SmtpSettings

    async def main() -> dict[str, float]:
        pool = SmtpPool(SmtpSettings("127.0.0.1", port, "", "", False, False, 10.0, None), size=CONNECTIONS)
        await asyncio.gather(*[pool.send("reminders@localhost", f"w{i}@example.com", raw)
                               for i in range(CONNECTIONS)])  # fmt: skip
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*[pool.send("reminders@localhost", f"p{i}@example.com", raw) for i in range(n)])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        await pool.aclose()
        return {"rate": n / wall, "cpu": cpu / n * 1e6}

    return asyncio.run(main())


def _aiosmtplib(port: int, raw: bytes, n: int) -> dict[str, float]:
    import aiosmtplib

    async def main() -> dict[str, float]:
        idle: asyncio.Queue[aiosmtplib.SMTP] = asyncio.Queue()
        for _ in range(CONNECTIONS):
            client = aiosmtplib.SMTP(hostname="127.0.0.1", port=port, use_tls=False, start_tls=False)
            await client.connect()
            await client.ehlo()
            idle.put_nowait(client)

        async def send(i: int) -> None:
            client = await idle.get()
            try:
                await client.sendmail("reminders@localhost", [f"p{i}@example.com"], raw)
            finally:
                idle.put_nowait(client)

        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*[send(i) for i in range(n)])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        while not idle.empty():
            await idle.get_nowait().quit()
        return {"rate": n / wall, "cpu": cpu / n * 1e6}

    return asyncio.run(main())


def _smtplib_threads(port: int, raw: bytes, n: int) -> dict[str, float]:
    todo = iter(range(n))
    lock = threading.Lock()
    clients = [smtplib.SMTP("127.0.0.1", port, timeout=10) for _ in range(CONNECTIONS)]

    def worker(client: smtplib.SMTP) -> None:
        while True:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            client.sendmail("reminders@localhost", [f"p{i}@example.com"], raw)

    cpu, wall = time.process_time(), time.perf_counter()
    threads = [threading.Thread(target=worker, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    for client in clients:
        client.quit()
    return {"rate": n / wall, "cpu": cpu / n * 1e6}


def _mime_rows(emails: list[Any], rounds: int) -> list[Row]:
    """The channel's one MIME builder, Django's, against the channel's volume."""
    from delivery.channels.email.message import as_bytes

    django: list[float] = []
    for _ in range(rounds):
        django.append(_cpu_per_email(as_bytes, emails))
        print(f"  MIME round: Django's builder {django[-1]:,.1f} µs", flush=True)
    spread = RoundRatios(tuple(django))
    share = spread.median * VOLUME / 1e6
    return [
        Row(
            f"13a MIME: an email's bytes, Django's builder ({len(emails):,} emails x {rounds} rounds)",
            spread.median,
            unit="µs CPU/email",
            note=f"rounds {', '.join(f'{x:,.0f}' for x in django)} µs; at {VOLUME:,.0f} emails/s it takes "
            f"{share:.0%} of a core",
        )
    ]


def _smtp_rows(h: Harness, raw: bytes, n: int, rounds: int) -> list[Row]:
    port = _free_port()
    server = h.start("smtp-sink", [sys.executable, "-m", "bench.smtp_sink", str(port)])
    try:
        h.wait_for_log("smtp-sink", "listening on", timeout=30, proc=server)
        runs: dict[str, list[dict[str, float]]] = {"own": [], "aiosmtplib": [], "smtplib": []}
        for r in range(rounds):
            order = [("own", _own_smtp), ("aiosmtplib", _aiosmtplib), ("smtplib", _smtplib_threads)]
            for name, client in order if r % 2 == 0 else order[::-1]:
                runs[name].append(client(port, raw, n))
            print("  SMTP round: " + ", ".join(f"{k} {v[-1]['rate']:,.0f}/s {v[-1]['cpu']:,.0f} µs"
                                               for k, v in runs.items()), flush=True)  # fmt: skip
    finally:
        h.stop(server)
    rows = []
    own = runs["own"]
    for name, label in (("aiosmtplib", "aiosmtplib, one loop"), ("smtplib", "smtplib on threads")):
        other = runs[name]
        cpu = RoundRatios(tuple(o["cpu"] / s["cpu"] for s, o in zip(own, other, strict=True)))
        rate = RoundRatios(tuple(s["rate"] / o["rate"] for s, o in zip(own, other, strict=True)))
        rows.append(
            Row(
                f"13b SMTP: {n:,} emails over {CONNECTIONS} connections, own client vs {name} "
                f"({rounds} rounds)",
                RoundRatios(tuple(s["cpu"] for s in own)).median,
                RoundRatios(tuple(o["cpu"] for o in other)).median,
                f"{label}, {CONNECTIONS} connections",
                "µs CPU/email",
                cpu.median,
                f"{name}/own CPU",
                note=f"{name}/own CPU {cpu.describe()}; emails/s own "
                f"{RoundRatios(tuple(s['rate'] for s in own)).median:,.0f} against "
                f"{RoundRatios(tuple(o['rate'] for o in other)).median:,.0f}, own/{name} {rate.describe()}",
            )
        )
    return rows


def run(h: Harness) -> Section:
    from django.test import override_settings

    from delivery.channels.email.message import as_bytes

    section = Section("email_wire")
    n = 500 if h.quick else 2_000
    rounds = 3 if h.quick else 5
    with override_settings(TRAININGS_PUBLIC_URL="https://coach.example.com"):
        emails = _emails(n)
        section.rows += _mime_rows(emails, rounds)
        raw = as_bytes(emails[0])
    section.rows += _smtp_rows(h, raw, n, rounds)
    section.data = {"email_bytes": len(raw), "connections": CONNECTIONS}
    return section
