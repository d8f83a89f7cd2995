"""7. The push gateway: pushes per second from the push queue to the phones' services.

N pushes (4,000; 1,000 with --quick), one per player, each player with one device, half iOS (APNs) and
half Android (FCM), are published to the push queue; then `manage.py push_gateway` (a child process)
drains them, twice in the same run:
- a: to a local APNs peer (HTTP/2 over TLS, the provider JWT checked) and a local FCM v1 peer (the OAuth
  bearer token checked), both served from this process (tests/peers/apns_fcm.py);
- b: the logging provider (no credentials: what `make run` uses), the same messages.
The rate is pushes finished (their PushSend rows, written before each ack) over the time from the
gateway's first recorded send to the last, so the process start-up is not counted.
Target: >= 1,000 pushes/s to the peers.
"""

from __future__ import annotations

import resource
import sys
import time
import uuid
from datetime import datetime, timedelta
from typing import Any

from bench.harness import Harness
from bench.peers import KEY_ID, TEAM_ID, TOPIC, Peers, peers_start
from bench.report import Row, Section

TARGET = 1_000.0


def _send_path(n: int, peers: Peers) -> dict[str, Any]:
    """7b: the providers alone, as the gateway's sending thread drives them (100 workers on one event
    loop), without the database and the queue: what the HTTP/2 path itself costs per send."""
    import asyncio

    from django.test import override_settings

    from delivery.channels.apns import ApnsProvider
    from delivery.channels.fcm import FcmProvider
    from delivery.messages import PushMessage, PushProvider, Target, Verdict
    from trainings.reminding.publishing import answered

    with override_settings(PUSH_TLS_CA_FILE=str(peers.apns.ca_file)):
        providers: dict[str, PushProvider] = {
            "apns": ApnsProvider(key_file=str(peers.key_path), key_id=KEY_ID, team_id=TEAM_ID, topic=TOPIC,
                                 base_url=peers.apns.url),
            "fcm": FcmProvider(credentials_file=str(peers.account), base_url=peers.fcm.url),
        }  # fmt: skip
    providers["fcm"].prepare()
    now = time.time()
    body = {"schema": "trainings.push/2", "title": "Pre-training questionnaire", "language": "en",
            "body": "Speed session starts at 6 p.m.", "training": str(uuid.uuid4()), "kind": "PRE",
            "rule": "pre-questionnaire", "expires_at": _iso(now + 7200)}  # fmt: skip
    work = [
        (
            PushMessage.from_body(answered({**body, "idempotency_key": f"send.{i}", "player": i})),
            Target(i, "apns", "ios", f"{i:064x}") if i % 2 == 0 else Target(i, "fcm", "android", f"fcm-{i}"),
        )
        for i in range(n)
    ]

    async def main() -> dict[str, Any]:
        for push, device in work[:2]:  # connections and TLS handshakes before the clock starts
            await providers[device.provider].send(push, device)
        todo = iter(work)
        accepted = 0

        async def worker() -> None:
            nonlocal accepted
            for push, device in todo:
                result = await providers[device.provider].send(push, device)
                accepted += result.verdict == Verdict.ACCEPTED

        cpu, wall = time.thread_time(), time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(100)))
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        for provider in providers.values():
            await provider.aclose()
        return {"accepted": accepted, "seconds": wall, "rate": n / wall, "cpu_us": cpu / n * 1e6}

    return asyncio.run(main())


def _iso(epoch: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC).isoformat()


def _children_cpu() -> float:
    """User + system CPU seconds of this process's finished children (the gateway, once waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def pushes_publish(
    h: Harness, players: list[Any], tag: str, *, training: str, expires_at: datetime, kind: str = "PRE"
) -> None:
    """One push per player on the push queue, as the reminder pipeline publishes them."""
    from django.utils import timezone

    from delivery.gateway.queue import queue_publisher_at
    from reminders.transports import Delivery
    from trainings.reminding.publishing import answered

    transport = queue_publisher_at(h.broker_url)
    try:
        messages: list[dict[str, Any]] = [
            answered({
                "schema": "trainings.push/2", "idempotency_key": f"{tag}.{p.pk}", "player": p.pk,
                "title": "Pre-training questionnaire", "body": "Speed session starts at 6 p.m.",
                "language": "en", "training": training, "kind": kind, "rule": "pre-questionnaire",
                "fire_at": timezone.now().isoformat(), "expires_at": expires_at.isoformat(),
            })
            for p in players
        ]  # fmt: skip
        for first in range(0, len(messages), 500):
            chunk = messages[first : first + 500]
            refused = transport.deliver(
                [Delivery(i, str(m["idempotency_key"]), "bench", timezone.now(), 1, h.push_queue, m)
                 for i, m in enumerate(chunk)]
            )  # fmt: skip
            assert not refused, refused
    finally:
        transport.close()


def gateway_drain(
    h: Harness, label: str, players: list[Any], *, training: str, expires_at: datetime, **env: str
) -> dict[str, Any]:
    """Publish one push per player, then let `manage.py push_gateway` (a child process) drain them; the
    rate is from the first recorded send to the last, and the gateway's own CPU."""
    from django.db.models import Max, Min

    from delivery import models as dm

    n = len(players)
    dm.PushSend.objects.all().delete()
    pushes_publish(h, players, label, training=training, expires_at=expires_at)
    cpu = _children_cpu()
    proc = h.start(
        f"push-gateway-{label}",
        [sys.executable, "manage.py", "push_gateway", "--max-messages", str(n), "--idle-seconds", "30"],
        **env,
    )
    wall = time.perf_counter()
    proc.wait(timeout=600)
    wall = time.perf_counter() - wall
    cpu = _children_cpu() - cpu  # the gateway's own CPU, start-up included: steadier than rates on a busy box
    # From the first recorded send to the last (each recorded at its commit, before the ack): every push,
    # and not the process start-up. A push is done once it has its rows (a device each; one device here).
    first = dm.PushSend.objects.aggregate(at=Min("recorded_at"))["at"]
    last = dm.PushSend.objects.aggregate(at=Max("recorded_at"))["at"]
    done = dm.PushSend.objects.values("push_key").distinct().count()
    accepted = dm.PushSend.objects.filter(status=dm.SendStatus.ACCEPTED).count()
    seconds = (last - first).total_seconds() if first and last else 0.0
    return {"done": done, "accepted": accepted, "seconds": seconds, "wall": wall, "cpu": cpu,
            "rate": done / seconds if seconds else None,
            "exit": proc.returncode}  # fmt: skip


def run(h: Harness) -> Section:
    from django.utils import timezone

    from delivery import models as dm
    from trainings import models as tm

    section = Section("push")
    n = 1_000 if h.quick else 4_000
    h.declare(h.push_queue)
    players = tm.Player.objects.bulk_create([tm.Player(name=f"bench push {i}") for i in range(n)])
    dm.Device.objects.bulk_create(
        [
            dm.Device(player=p, provider="apns", platform="ios", token=f"{i:064x}")
            if i % 2 == 0
            else dm.Device(player=p, provider="fcm", platform="android", token=f"fcm-bench-{i}")
            for i, p in enumerate(players)
        ]
    )
    start = timezone.now() + timedelta(hours=2)
    training = str(uuid.uuid4())

    def drain(label: str, **env: str) -> dict[str, Any]:
        return gateway_drain(h, label, players, training=training, expires_at=start, **env)

    loopback = peers_start(h, "push-peers")
    try:
        peers = drain("peers", **loopback.env)
        peers["apns_requests"], peers["fcm_requests"] = loopback.apns.count, loopback.fcm.count
        sends = _send_path(n, loopback)
    finally:
        loopback.stop()
    logging_run = drain("logging")

    rate = peers["rate"]
    section.rows += [
        Row(
            f"7a push gateway to local APNs + FCM peers ({n:,} pushes)",
            rate,
            logging_run["rate"],
            "logging provider",
            "pushes/s",
            rate / logging_run["rate"] if rate and logging_run["rate"] else None,
            "of logging",
            "≥ 1,000 pushes/s",
            passed=bool(rate and rate >= TARGET and peers["accepted"] == n),
            note=f"{peers['accepted']:,}/{n:,} accepted ({peers['apns_requests']:,} APNs HTTP/2 streams "
            f"on one TLS connection, {peers['fcm_requests']:,} FCM requests) in {peers['seconds']:.2f} s; "
            f"logging provider {logging_run['accepted']:,} in {logging_run['seconds']:.2f} s; CPU per push: "
            f"gateway {peers['cpu'] / n * 1e6:,.0f} µs to the peers and "
            f"{logging_run['cpu'] / n * 1e6:,.0f} µs logging (process start-up included)",
        ),
    ]
    section.rows.append(
        Row(
            f"7b provider send path alone ({n:,} sends, no PostgreSQL or RabbitMQ)",
            sends["rate"],
            unit="sends/s",
            note=f"{sends['accepted']:,}/{n:,} accepted; {sends['cpu_us']:,.0f} µs of CPU per send on the "
            "sending thread (the gateway's event loop), with the peers in the same process",
        )
    )
    section.data = {"pushes": n, "peers": peers, "logging": logging_run, "send_path": sends}
    return section
