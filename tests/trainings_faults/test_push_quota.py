"""Provider quotas through real `manage.py push_gateway` processes and the loopback FCM peer enforcing its
project quota (tests/peers/quota.py): the gateways pace the project together at PUSH_FCM_QUOTA_PER_MINUTE
through the database, a quota 429 pauses the project once until the window ends, the pushes nearest their
expiry go first, nothing is lost and nothing is sent past its expiry (delivery/gateway/quota.py).

The real RabbitMQ and PostgreSQL; quotas scaled down to a few seconds of sends."""

from __future__ import annotations

import datetime as dt
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from delivery.gateway.queue import queue_publisher_at
from reminders.transports import Delivery
from tests.factories import PlayerFactory
from tests.peers.apns_fcm import FcmPeer, service_account
from tests.peers.quota import WindowQuota
from tests.trainings.push_fixtures import message
from tests.trainings_faults.conftest import Processes, record_with_the_queue_empty
from trainings.models import PushSend, SendStatus

pytestmark = [
    pytest.mark.faults,
    pytest.mark.postgres,
    pytest.mark.rabbitmq,
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture
def fcm(tmp_path: Path) -> Iterator[tuple[FcmPeer, dict[str, str]]]:
    peer = FcmPeer(tmp_path)
    account, account_key = service_account(tmp_path, token_uri=peer.token_uri)
    peer.trust(account_key)
    env = {"PUSH_FCM_BASE_URL": peer.url, "PUSH_FCM_CREDENTIALS_FILE": str(account),
           "PUSH_TLS_CA_FILE": str(peer.ca_file), "TRAININGS_GATEWAY_RETRY_SECONDS": "0.2"}  # fmt: skip
    yield peer, env
    peer.stop()


def _players(n: int) -> list[int]:
    """`n` players, each with one Android phone whose token is `android-<i>`."""
    return [
        PlayerFactory(devices=[{"provider": "fcm", "platform": "android", "token": f"android-{i}"}]).pk
        for i in range(n)
    ]


def _publish(push_queue: str, bodies: list[dict[str, Any]]) -> None:
    transport = queue_publisher_at(settings.CELERY_BROKER_URL)
    try:
        deliveries = [Delivery(i, b["idempotency_key"], "job", timezone.now(), 1, push_queue, b)
                      for i, b in enumerate(bodies)]  # fmt: skip
        assert not transport.deliver(deliveries)
    finally:
        transport.close()


def _run(processes: Processes, names: list[str], env: dict[str, str]) -> None:
    """Gateways that stop once idle for 3 s; each must exit 0."""
    started = [processes.gateway(name, "--idle-seconds", "3", **env) for name in names]
    for name, gateway in zip(names, started, strict=True):
        try:
            gateway.wait(timeout=180)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{name} did not finish:\n" + processes.log(name))
        assert gateway.returncode == 0, processes.log(name)


def _accepted(peer: FcmPeer) -> Counter[str]:
    return Counter(r.body["data"]["push"] for r in list(peer.received) if r.status == 200)


def test_two_gateways_share_the_project_quota(
    push_queue: str, processes: Processes, fcm: tuple[FcmPeer, dict[str, str]]
) -> None:
    """1,200 a minute (20 a second) for both gateways together; the peer allows 40 each 2 s, so two
    gateways each pacing at the full rate alone would be refused."""
    peer, env = fcm
    peer.quota = WindowQuota(limit=40, window=2.0)
    keys = [f"share.{i}" for i in range(120)]
    _publish(push_queue, [message(key, player) for key, player in zip(keys, _players(120), strict=True)])
    env = {**env, "PUSH_FCM_QUOTA_PER_MINUTE": "1200", "TRAININGS_GATEWAY_PREFETCH": "20"}

    _run(processes, ["gateway-1", "gateway-2"], env)

    accepted = _accepted(peer)
    assert set(accepted) == set(keys) and set(accepted.values()) == {1}, "a push lost or sent twice"
    refused = peer.quota.per_window(429)
    assert max(refused.values(), default=0) <= 2, f"more than one 429 a window per gateway: {refused}"
    assert max(peer.quota.per_window(200).values()) <= 40
    times = sorted(at for at, _, status in peer.quota.log if status == 200)
    assert times[-1] - times[0] >= 120 / 20 - 1.5, "faster than the quota allows"
    for name in ("gateway-1", "gateway-2"):  # both took part
        assert "'delivered':" in processes.log(name), processes.log(name)
    record_with_the_queue_empty(
        push_queue, keys,
        scenario="Two push gateways on one FCM project with a quota (PUSH_FCM_QUOTA_PER_MINUTE=1200)",
        fault="the FCM peer refuses sends past 40 each 2 s window (429 RESOURCE_EXHAUSTED)",
        result=f"120/120 accepted once in {times[-1] - times[0]:.1f} s (the quota allows 120 in 5-6 s), "
        f"at most {max(peer.quota.per_window(200).values())} a window, {sum(refused.values())} refused: the "
        "two gateways paced the project together through the database",
    )  # fmt: skip


def test_a_quota_429_pauses_the_project_once_and_loses_nothing(
    push_queue: str, processes: Processes, fcm: tuple[FcmPeer, dict[str, str]]
) -> None:
    """The gateway's quota (100 a second) is above the project's real one (30 each 3 s: another sender
    shares the project, or Google lowered it): each window's first 429 pauses the project until the
    window's end (Retry-After), the refused sends go again after it, without counting as retries."""
    peer, env = fcm
    peer.quota = WindowQuota(limit=30, window=3.0)
    keys = [f"pause.{i}" for i in range(75)]
    _publish(push_queue, [message(key, player) for key, player in zip(keys, _players(75), strict=True)])
    env = {**env, "PUSH_FCM_QUOTA_PER_MINUTE": "6000", "TRAININGS_GATEWAY_IN_FLIGHT": "10"}

    _run(processes, ["gateway-1"], env)

    accepted = _accepted(peer)
    assert set(accepted) == set(keys) and set(accepted.values()) == {1}, "a push lost or sent twice"
    refused = peer.quota.per_window(429)
    assert refused, "the quota was never reached: nothing was tested"
    assert max(refused.values()) <= 10, f"refused sends beyond those in flight: {refused}"
    log = processes.log("gateway-1")
    pauses = log.count("the provider's quota is exhausted")
    assert 1 <= pauses <= len(refused), log  # one pause per window refused, not one per send
    assert "dead-lettered" not in log
    assert set(PushSend.objects.values_list("status", flat=True)) == {SendStatus.ACCEPTED}
    record_with_the_queue_empty(
        push_queue, keys,
        scenario="FCM project quota lower than the gateway's PUSH_FCM_QUOTA_PER_MINUTE",
        fault="the FCM peer allows 30 sends each 3 s window, then 429 RESOURCE_EXHAUSTED with Retry-After",
        result=f"{sum(refused.values())} sends refused in {len(refused)} windows (at most the 10 in flight "
        f"each), {pauses} pause(s) of the project, each until its window's end; 75/75 accepted once, none "
        "dead-lettered",
    )  # fmt: skip


def test_the_pushes_nearest_their_expiry_go_first_and_none_goes_past_it(
    push_queue: str, processes: Processes, fcm: tuple[FcmPeer, dict[str, str]]
) -> None:
    """10 a second; 40 pushes expiring 2.5 s after they are queued cannot all go in time: those that can
    go first, the rest are recorded stale, never sent late, and the 20 due in an hour follow."""
    peer, env = fcm
    peer.quota = WindowQuota(limit=10, window=1.0)
    players = _players(60)
    # Single pushes to a message: the prefetch (the reorder buffer) takes them all at once.
    env = {**env, "PUSH_FCM_QUOTA_PER_MINUTE": "600", "TRAININGS_PUSH_MESSAGE_PUSHES": "1"}
    gateway = processes.gateway("gateway-1", "--idle-seconds", "4", **env)
    deadline = time.monotonic() + 60
    while "push gateway:" not in processes.log("gateway-1"):
        assert time.monotonic() < deadline and gateway.poll() is None, processes.log("gateway-1")
        time.sleep(0.1)
    later = [message(f"later.{i}", players[i]) for i in range(20)]  # queued first
    soon = [message(f"soon.{i}", players[20 + i], expires_in=2.5) for i in range(40)]
    expiry = {b["idempotency_key"]: dt.datetime.fromisoformat(b["expires_at"]).timestamp()
              for b in later + soon}  # fmt: skip
    _publish(push_queue, later + soon)
    gateway.wait(timeout=120)
    assert gateway.returncode == 0, processes.log("gateway-1")

    sent = [(at, r.body["data"]["push"]) for r in list(peer.received) if r.status == 200
            for at in [time.time() - (time.monotonic() - r.at)]]  # fmt: skip
    late = [(key, at - expiry[key]) for at, key in sent if at > expiry[key] + 0.25]
    assert not late, f"sent past their expiry: {late}"
    accepted = Counter(key for _, key in sent)
    assert set(accepted.values()) == {1}
    assert {f"later.{i}" for i in range(20)} <= set(accepted), "a push lost"
    stale = set(PushSend.objects.filter(status=SendStatus.STALE).values_list("push_key", flat=True))
    assert len(stale) >= 10 and all(key.startswith("soon.") for key in stale)  # 40 in 2.5 s: not at 10/s
    assert set(accepted) | stale == set(expiry), "a push neither sent nor recorded stale"
    order = [key for _, key in sorted(sent)]
    last_soon = max(i for i, key in enumerate(order) if key.startswith("soon."))
    first_later = min(i for i, key in enumerate(order) if key.startswith("later."))
    assert last_soon < first_later, f"a later push went before one nearer its expiry: {order}"
    record_with_the_queue_empty(
        push_queue, sorted(expiry),
        scenario="FCM quota of 10 a second, 40 pushes expiring 2.5 s after they are queued, 20 in an hour",
        fault="more pushes near their expiry than the quota lets through in time",
        result=f"{40 - len(stale)} of the 40 sent first, before their expiry, {len(stale)} recorded stale "
        "and "
        "never sent; the 20 others after them: nothing lost, nothing sent past its expiry",
    )  # fmt: skip
