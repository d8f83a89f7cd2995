"""11. The email channel: reminder emails per second from the push queue to a local SMTP server.

N players (2,000; 500 with --quick) whose only address is an email one get one push each; then
`manage.py push_gateway` (a child process, the SMTP backend of Django's email framework,
TRAININGS_EMAIL_CONNECTIONS threads each with one open connection) drains them: each email is made
(HTML and text, answer links, unsubscribe headers), sent, and recorded as a PushSend with its outcome.
Row 11 is one gateway process; row 11b two on the same queue (each takes its share of the messages), which
is how the channel scales past one process's core. The SMTP server is aiosmtpd on loopback in this process,
as in the tests (its per-command INFO log silenced: the server must cost little); it counts what it accepts.

The alternative, in the same run and to the same server: raw smtplib, the same number of threads each with
one connection, sending an already made email of the same size: what the SMTP exchange itself allows
here. Each is run ROUNDS times, alternately; the rows give the medians of the per-round ratios.
Target: >= 500 emails/s.
"""

from __future__ import annotations

import logging
import smtplib
import socket
import sys
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

from bench.harness import Harness
from bench.report import RoundRatios, Row, Section
from bench.scenarios.push import _children_cpu, gateway_drain, pushes_publish

TARGET = 500.0


class _Counter:
    """aiosmtpd handler: accepts every message and counts it (no parsing: the server must cost little).
    It offers PIPELINING (RFC 2920) as Postfix and Exim do: aiosmtpd reads commands line by line, so it
    serves pipelined ones; it only does not say so."""

    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

    async def handle_EHLO(
        self, server: Any, session: Any, envelope: Any, hostname: str, responses: list[str]
    ) -> list[str]:
        session.host_name = hostname
        return [*responses[:-1], "250-PIPELINING", responses[-1]]

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self.lock:
            self.count += 1
        return "250 Message accepted"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _raw_smtplib(port: int, raw: bytes, n: int, threads: int) -> dict[str, Any]:
    """n sendmail calls of `raw` over `threads` connections, one thread each; rate, CPU and how many the
    server accepted."""
    todo = iter(range(n))
    lock = threading.Lock()
    sent = [0] * threads

    def worker(index: int) -> None:
        with smtplib.SMTP("127.0.0.1", port, timeout=10) as client:
            while True:
                with lock:
                    i = next(todo, None)
                if i is None:
                    return
                client.sendmail("reminders@localhost", [f"raw-{i}@example.com"], raw)
                sent[index] += 1

    cpu, wall = time.process_time(), time.perf_counter()
    pool = [threading.Thread(target=worker, args=(index,)) for index in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    wall = time.perf_counter() - wall
    return {"rate": sum(sent) / wall, "seconds": wall, "cpu": time.process_time() - cpu, "sent": sum(sent)}


def _two_gateways(
    h: Harness, label: str, players: list[Any], *, training: str, expires_at: Any, **env: str
) -> dict[str, Any]:
    """`gateway_drain` with two gateway processes on the queue: each stops once idle for 3 s; the rate is
    from the first recorded send to the last, as there; CPU is both processes'."""
    from django.db.models import Max, Min

    from delivery import models as dm

    dm.PushSend.objects.all().delete()
    pushes_publish(h, players, label, training=training, expires_at=expires_at)
    cpu = _children_cpu()
    procs = [h.start(f"push-gateway-{label}-{i}", [sys.executable, "manage.py", "push_gateway",
                                                     "--idle-seconds", "3"], **env)
             for i in range(2)]  # fmt: skip
    for proc in procs:
        proc.wait(timeout=600)
    cpu = _children_cpu() - cpu
    first = dm.PushSend.objects.aggregate(at=Min("recorded_at"))["at"]
    last = dm.PushSend.objects.aggregate(at=Max("recorded_at"))["at"]
    done = dm.PushSend.objects.values("push_key").distinct().count()
    seconds = (last - first).total_seconds() if first and last else 0.0
    return {"done": done, "accepted": dm.PushSend.objects.filter(status=dm.SendStatus.ACCEPTED).count(),
            "seconds": seconds, "cpu": cpu, "rate": done / seconds if seconds else None,
            "exit": [p.returncode for p in procs]}  # fmt: skip


def _send_path(players: list[Any], training: str, expires_at: Any, threads: int) -> dict[str, Any]:
    """11c: the channel's provider alone, as the gateway's sending thread drives it (one event loop, its pool
    of `threads` connections), without the database and the queue: each email made and sent, in this
    process like the raw client. Run with the settings pointing at the bench's server."""
    import asyncio

    from delivery.channels.email import EmailProvider
    from delivery.messages import PushMessage, Target, Verdict
    from trainings.reminding.publishing import answered

    work = [
        (PushMessage.from_body(answered({
            "schema": "trainings.push/2", "idempotency_key": f"path.{p.pk}", "player": p.pk,
            "title": "Pre-training questionnaire", "body": "Speed session starts at 6 p.m.", "language": "en",
            "training": training, "kind": "PRE", "rule": "pre-questionnaire",
            "expires_at": expires_at.isoformat(),
        })), Target(p.pk, "email", "email", f"path{i}@example.com"))
        for i, p in enumerate(players)
    ]  # fmt: skip
    provider = EmailProvider(connections=threads)

    async def main() -> dict[str, Any]:
        todo = iter(work)
        accepted = 0
        errors: dict[str, int] = {}

        async def worker() -> None:
            nonlocal accepted
            for push, device in todo:
                result = await provider.send(push, device)
                accepted += result.verdict == Verdict.ACCEPTED
                if result.verdict != Verdict.ACCEPTED:
                    errors[result.error[:80]] = errors.get(result.error[:80], 0) + 1

        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*[worker() for _ in range(threads)])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        await provider.aclose()
        return {"rate": len(work) / wall, "cpu": cpu, "sent": accepted, "errors": errors}

    return asyncio.run(main())


def run(h: Harness) -> Section:
    from aiosmtpd.controller import Controller
    from django.conf import settings
    from django.test import override_settings
    from django.utils import timezone

    from delivery import models as dm
    from delivery.channels.email.message import as_bytes, email_of
    from delivery.messages import PushMessage, Target
    from trainings import models as tm
    from trainings.reminding.publishing import answered

    section = Section("email")
    n = 500 if h.quick else 2_000
    rounds = 2 if h.quick else 3
    threads = settings.TRAININGS_EMAIL_CONNECTIONS
    h.declare(h.push_queue)
    players = tm.Player.objects.bulk_create([tm.Player(name=f"bench email {i}") for i in range(n)])
    dm.Device.objects.bulk_create(
        [dm.Device(player=p, provider="email", platform="email", token=f"player{i}@example.com")
         for i, p in enumerate(players)]
    )  # fmt: skip
    start = timezone.now() + timedelta(hours=2)
    training = str(uuid.uuid4())

    logging.getLogger("mail.log").setLevel(logging.WARNING)  # aiosmtpd logs every command at INFO
    counter = _Counter()
    controller = Controller(counter, hostname="127.0.0.1", port=_free_port())
    controller.start()
    env = {
        "DJANGO_EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": "127.0.0.1", "EMAIL_PORT": str(controller.port),
        "TRAININGS_PUBLIC_URL": "https://coach.example.com",
    }  # fmt: skip
    # The raw client sends what the channel sends: one of its emails, rendered once.
    sample = PushMessage.from_body(answered({
        "schema": "trainings.push/2", "idempotency_key": "sample", "player": players[0].pk,
        "title": "Pre-training questionnaire", "body": "Speed session starts at 6 p.m.", "language": "en",
        "training": training, "kind": "PRE", "rule": "pre-questionnaire", "expires_at": start.isoformat(),
    }))  # fmt: skip
    raw_bytes = as_bytes(email_of(sample, Target(players[0].pk, "email", "email", "player0@example.com")))
    cpu = _children_cpu()  # a gateway's start-up and stop alone: subtracted to give CPU per email
    alone = [sys.executable, "manage.py", "push_gateway", "--max-messages", "0"]
    h.start("push-gateway-email-startup", alone, **env).wait(timeout=300)
    startup = _children_cpu() - cpu
    gateway: list[dict[str, Any]] = []
    two: list[dict[str, Any]] = []
    smtp: list[dict[str, Any]] = []
    path: list[dict[str, Any]] = []
    try:
        for r in range(rounds):
            for runs, drain in ((gateway, gateway_drain), (two, _two_gateways)):
                received = counter.count
                result = drain(h, f"email{r}{len(runs)}{id(runs) % 7}", players, training=training,
                               expires_at=start, **env)  # fmt: skip
                result["received"] = counter.count - received
                runs.append(result)
            smtp.append(_raw_smtplib(controller.port, raw_bytes, n, threads))
            with override_settings(
                EMAIL_BACKEND=env["DJANGO_EMAIL_BACKEND"],
                EMAIL_HOST="127.0.0.1",
                EMAIL_PORT=controller.port,
                TRAININGS_PUBLIC_URL=env["TRAININGS_PUBLIC_URL"],
            ):
                path.append(_send_path(players, training, start, threads))  # fmt: skip
            print(
                f"  round {r + 1}: one gateway {gateway[-1]['rate'] or 0:,.0f} emails/s, two "
                f"{two[-1]['rate'] or 0:,.0f}/s ({gateway[-1]['accepted']:,} and {two[-1]['accepted']:,} "
                f"accepted, {gateway[-1]['received']:,} and {two[-1]['received']:,} received), raw smtplib "
                f"{smtp[-1]['rate']:,.0f}/s, send path alone {path[-1]['rate']:,.0f}/s",
                flush=True,
            )
    finally:
        controller.stop()

    raw_rate = RoundRatios(tuple(s["rate"] for s in smtp)).median
    raw_ok = all(s["sent"] == n for s in smtp)
    raw_cpu = RoundRatios(tuple(s["cpu"] / n * 1e6 for s in smtp)).median
    for name, runs in (("11 email channel, one gateway", gateway), ("11b email channel, two gateways", two)):
        rates = [g["rate"] or 0.0 for g in runs]
        ratios = RoundRatios(tuple(g / s["rate"] for g, s in zip(rates, smtp, strict=True)))
        rate = RoundRatios(tuple(rates)).median
        all_ok = all(g["accepted"] == n and g["received"] == n for g in runs)
        processes = 1 if runs is gateway else 2
        cpu = RoundRatios(tuple(max(0.0, g["cpu"] - processes * startup) / n * 1e6 for g in runs)).median
        cpu_all = RoundRatios(tuple(g["cpu"] / n * 1e6 for g in runs)).median
        section.rows.append(
            Row(
                f"{name}, to local SMTP ({n:,} emails x {rounds} rounds)",
                rate,
                raw_rate,
                f"raw smtplib, {threads} connections",
                "emails/s",
                ratios.median,
                "of raw",
                "≥ 500 emails/s",
                passed=rate >= TARGET and all_ok,
                note=f"gateway/raw {ratios.describe()}; rates {', '.join(f'{x:,.0f}' for x in rates)}/s; "
                f"every round {n:,} recorded sends accepted and received: {all_ok} (raw: {raw_ok}); email "
                f"of {len(raw_bytes):,} bytes (HTML and text); CPU per email: gateway(s) {cpu:,.0f} µs "
                f"(each process's start-up, {startup:.2f} s measured alone, subtracted; {cpu_all:,.0f} µs "
                "with it), raw client "
                f"{raw_cpu:,.0f} µs (this process, the SMTP server's share included)",
            )
        )
    path_rate = RoundRatios(tuple(p["rate"] for p in path))
    path_ratios = RoundRatios(tuple(p["rate"] / s["rate"] for p, s in zip(path, smtp, strict=True)))
    path_ok = all(p["sent"] == n for p in path)
    path_cpu = RoundRatios(tuple(p["cpu"] / n * 1e6 for p in path)).median
    section.rows.append(
        Row(
            f"11c email send path alone, no PostgreSQL or RabbitMQ ({n:,} emails x {rounds} rounds)",
            path_rate.median,
            raw_rate,
            f"raw smtplib, {threads} connections",
            "emails/s",
            path_ratios.median,
            "of raw",
            note=f"the provider in this process (made and sent, {threads} connections on one loop)/raw "
            f"{path_ratios.describe()}; every email accepted: {path_ok} "
            f"{[p['errors'] for p in path if p['errors']] or ''}; CPU per email {path_cpu:,.0f} µs "
            f"against raw smtplib's {raw_cpu:,.0f} µs (this process, the SMTP server's share included)",
        )
    )
    section.data = {"send_path": path, "gateway": gateway, "two_gateways": two, "smtplib": smtp,
                    "email_bytes": len(raw_bytes), "startup_cpu": startup}  # fmt: skip
    return section
