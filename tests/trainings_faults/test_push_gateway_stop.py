"""The push gateway stopped in the middle of 2,000 pushes (4,000 device sends to the loopback APNs and FCM
peers), then restarted:
- SIGTERM (a deploy): it finishes, records and acks what it had begun, closes its connections and exits
  0; every (push, device) pair is accepted by a peer exactly once.
- kill -9 (a crash): what is sent again is at most the sends without a committed outcome, which the
  gateway bounds to TRAININGS_GATEWAY_IN_FLIGHT (10 here, so a late recording would show).

Real `manage.py push_gateway` subprocesses (default batch and prefetch), the real RabbitMQ and PostgreSQL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from delivery.gateway.queue import queue_publisher_at
from reminders.transports import Delivery
from tests.factories import PlayerFactory
from tests.peers.apns_fcm import ApnsPeer, FcmPeer, apns_key, service_account
from tests.trainings.push_fixtures import message
from tests.trainings_faults.conftest import Processes, ready_count, record_with_the_queue_empty, wait_for

pytestmark = [
    pytest.mark.faults,
    pytest.mark.postgres,
    pytest.mark.rabbitmq,
    pytest.mark.django_db(transaction=True),
]

PLAYERS, PUSHES_EACH = 200, 10  # 2,000 pushes, each to an iPhone and an Android phone
TOPIC = "com.example.coach"


@pytest.fixture
def peers(tmp_path: Path) -> Iterator[tuple[ApnsPeer, FcmPeer, dict[str, str]]]:
    key_path, public_key = apns_key(tmp_path)
    apns = ApnsPeer(tmp_path, public_key=public_key, key_id="KEY1234567", team_id="TEAM123456", topic=TOPIC)
    fcm = FcmPeer(tmp_path)
    account, account_key = service_account(tmp_path, token_uri=fcm.token_uri)
    fcm.trust(account_key)
    env = {
        "PUSH_APNS_BASE_URL": apns.url, "PUSH_APNS_KEY_FILE": str(key_path), "PUSH_APNS_KEY_ID": "KEY1234567",
        "PUSH_APNS_TEAM_ID": "TEAM123456", "PUSH_APNS_TOPIC": TOPIC,
        "PUSH_FCM_BASE_URL": fcm.url, "PUSH_FCM_CREDENTIALS_FILE": str(account),
        "PUSH_TLS_CA_FILE": str(apns.ca_file),
    }  # fmt: skip
    yield apns, fcm, env
    apns.stop()
    fcm.stop()


def _queued_pushes(push_queue: str) -> set[tuple[str, str]]:
    """2,000 pushes on the queue; every (push key, device token) pair the peers must accept."""
    bodies, pairs = [], set()
    for p in range(PLAYERS):
        apns_token, fcm_token = f"{p:064x}", f"android-{p}"
        devices = [{"provider": "apns", "platform": "ios", "token": apns_token},
                   {"provider": "fcm", "platform": "android", "token": fcm_token}]  # fmt: skip
        player = PlayerFactory(devices=devices)
        for n in range(PUSHES_EACH):
            key = f"stop.{p}.{n}"
            bodies.append(message(key, player.pk, expires_in=3600))
            pairs |= {(key, apns_token), (key, fcm_token)}
    transport = queue_publisher_at(settings.CELERY_BROKER_URL)
    try:
        refused = transport.deliver(
            [
                Delivery(i, b["idempotency_key"], "job", timezone.now(), 1, push_queue, b)
                for i, b in enumerate(bodies)
            ]
        )
    finally:
        transport.close()
    assert not refused
    return pairs


def _accepted(apns: ApnsPeer, fcm: FcmPeer) -> Counter[tuple[str, str]]:
    """(push key, device token) per request a peer answered 200."""
    pairs = [(r.body["push"], r.token) for r in list(apns.received) if r.status == 200]
    pairs += [(r.body["data"]["push"], r.token) for r in list(fcm.received) if r.status == 200]
    return Counter(pairs)


def _stop_mid_way(
    processes: Processes, apns: ApnsPeer, fcm: FcmPeer, env: dict[str, str], signum: int, push_queue: str
) -> tuple[int, subprocess.Popen[bytes]]:
    """Start the gateway, send it `signum` once 40 % of the sends were answered; the answered count then."""
    gateway = processes.gateway("gateway-1", "--idle-seconds", "30", **env)
    wait_for(lambda: apns.count + fcm.count >= 1600, timeout=120, what="40 % of the sends")
    answered = apns.count + fcm.count
    os.kill(gateway.pid, signum)
    try:
        gateway.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the gateway did not stop:\n" + processes.log("gateway-1"))
    assert apns.count + fcm.count < 4000, "the gateway finished before the signal: nothing was tested"
    wait_for(lambda: ready_count(push_queue) > 0, timeout=10, what="the unfinished pushes back on the queue")
    return answered, gateway


def _restart(processes: Processes, env: dict[str, str]) -> None:
    restarted = processes.gateway("gateway-2", "--idle-seconds", "5", **env)
    try:
        restarted.wait(timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("the restarted gateway did not finish:\n" + processes.log("gateway-2"))
    assert restarted.returncode == 0, processes.log("gateway-2")


def test_a_graceful_stop_sends_nothing_twice(
    push_queue: str, processes: Processes, peers: tuple[ApnsPeer, FcmPeer, dict[str, str]]
) -> None:
    apns, fcm, env = peers
    every = _queued_pushes(push_queue)
    started = time.monotonic()
    answered, gateway = _stop_mid_way(processes, apns, fcm, env, signal.SIGTERM, push_queue)
    log = processes.log("gateway-1")
    assert gateway.returncode == 0, log
    for trouble in ("Task was destroyed", "Event loop is closed", "Traceback", "ERROR"):
        assert trouble not in log, log
    stopped_with = sum(_accepted(apns, fcm).values())

    _restart(processes, env)

    accepted = _accepted(apns, fcm)
    twice = {pair: n for pair, n in accepted.items() if n > 1}
    assert not twice, f"{len(twice)} (push, device) pairs accepted more than once"
    assert set(accepted) == every
    record_with_the_queue_empty(
        push_queue,
        sorted({key for key, _ in every}),
        scenario="Push gateway stopped with SIGTERM in the middle of 2,000 pushes (4,000 device sends)",
        fault=f"SIGTERM to `manage.py push_gateway` (defaults) after {answered} sends were answered",
        result=f"the stopping gateway finished its open rounds ({stopped_with} sends accepted), recorded and "
        f"acked them and exited 0 with no task or loop errors; the restarted one sent the rest: 4,000/4,000 "
        f"(push, device) pairs accepted exactly once, 0 duplicates, queue empty "
        f"({time.monotonic() - started:.1f} s)",
    )


def test_a_crash_resends_at_most_the_sends_in_flight(
    push_queue: str, processes: Processes, peers: tuple[ApnsPeer, FcmPeer, dict[str, str]]
) -> None:
    apns, fcm, env = peers
    bound = 10  # sends in flight: small, so recording a round (or 50 ms) late would show
    env = {**env, "TRAININGS_GATEWAY_IN_FLIGHT": str(bound)}
    every = _queued_pushes(push_queue)
    started = time.monotonic()
    answered, gateway = _stop_mid_way(processes, apns, fcm, env, signal.SIGKILL, push_queue)
    assert gateway.returncode == -signal.SIGKILL

    _restart(processes, env)

    accepted = _accepted(apns, fcm)
    duplicates = sum(n - 1 for n in accepted.values())
    assert duplicates <= bound, (
        f"{duplicates} sends repeated after a kill -9, more than the {bound} in flight"
    )
    assert set(accepted) == every
    record_with_the_queue_empty(
        push_queue,
        sorted({key for key, _ in every}),
        scenario="Push gateway killed -9 in the middle of 2,000 pushes (4,000 device sends)",
        fault=f"SIGKILL of `manage.py push_gateway` (10 sends in flight) after {answered} answers",
        result=f"{duplicates} (push, device) pairs accepted twice (bound: TRAININGS_GATEWAY_IN_FLIGHT = "
        f"{bound}); 4,000/4,000 accepted, 0 lost, queue empty ({time.monotonic() - started:.1f} s)",
    )
