"""Scenario 6: the push gateway is killed -9 in the middle of a push; nothing is lost.

What the gateway guarantees (delivery/gateway/consumer.py): a message leaves the queue only by an ack, and
the ack comes after the provider accepted the push and its outcome was committed to `PushSend`. So:
- every push reaches the provider at least once (none lost);
- a crash after the provider accepted a push but before the `PushSend` commit sends that one push
  once more on redelivery (the provider sees its key twice; the `Idempotency-Key` header lets a provider
  drop the copy);
- a crash after the commit but before the ack sends nothing again: the redelivered message is acked as a
  duplicate;
- `PushSend` holds each (push, device) exactly once either way.

Each case runs the real `manage.py push_gateway` against the real RabbitMQ, with the webhook provider
pointed at an HTTP server in this test, and pushes made by the real reminder pipeline.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from delivery.models import PushSend
from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.models import Occurrence
from tests.factories import training_made
from tests.trainings_faults.conftest import Processes, ready_count, record_with_the_queue_empty, wait_for
from tests.trainings_faults.proxy import SwallowingProxy
from trainings.models import Push, ReminderRule, Team
from trainings.selectors import job_key

pytestmark = [
    pytest.mark.faults,
    pytest.mark.postgres,
    pytest.mark.rabbitmq,
    pytest.mark.django_db(transaction=True),
]


class Provider:
    """The push provider's endpoint on loopback: records each request's Idempotency-Key, in order.

    `on_request(key)` runs before the answer; returning False sends no answer at all.
    """

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.requests: list[str] = []  # each request's whole Idempotency-Key: `<push key>/<device id>`
        self.on_request: Callable[[str], bool] = lambda key: True
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                # `<push key>/<device id>`; each player here has one device, so the push key says it all.
                provider.requests.append(self.headers["Idempotency-Key"])
                key = self.headers["Idempotency-Key"].rsplit("/", 1)[0]
                provider.keys.append(key)
                if provider.on_request(key):
                    self.send_response(200)
                    self.end_headers()
                else:
                    self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/push"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def _a_message_per_push(settings: Any) -> None:
    """These cases are about the one message in flight (prefetch 1) and the rest on the queue: a message per
    push. A batch of pushes killed mid-way: test_push_gateway_crash.py."""
    settings.TRAININGS_PUSH_MESSAGE_PUSHES = 1


@pytest.fixture
def provider() -> Iterator[Provider]:
    endpoint = Provider()
    yield endpoint
    endpoint.close()


def _pushes_on_the_queue(team: Team, queue: str) -> list[str]:
    """Fire a training's first invitation reminder through the engine: four pushes land on the queue."""
    start = timezone.now() + dt.timedelta(days=10)
    training = training_made(team, start, minutes=60, time_zone="UTC")
    rule = ReminderRule.objects.get(slug="invitation")
    first = Occurrence.objects.filter(job__key=job_key(training_id=training.pk, rule=rule)).earliest(
        "fire_at"
    )
    Occurrence.objects.filter(pk=first.pk).update(next_attempt_at=timezone.now() - dt.timedelta(seconds=1))
    assert occurrences_dispatch_batch().delivered == 1
    keys = sorted(Push.objects.values_list("key", flat=True))
    assert len(keys) == 4
    wait_for(lambda: ready_count(queue) == 4, timeout=5, what="four pushes on the queue")
    return keys


def _gateway_env(provider: Provider) -> dict[str, str]:
    return {
        "TRAININGS_PUSH_PROVIDER": "webhook",
        "TRAININGS_PUSH_WEBHOOK_URL": provider.url,
        "TRAININGS_PUSH_WEBHOOK_TIMEOUT": "30",
        # One message in flight: the crash hits exactly one push, and the rest wait on the queue.
        "TRAININGS_GATEWAY_PREFETCH": "1",
        "TRAININGS_GATEWAY_RETRY_SECONDS": "0",
    }


def _finish_with_a_new_gateway(processes: Processes, provider: Provider, messages: int) -> str:
    """Start a second gateway that handles the rest and exits; returns its log."""
    gateway = processes.gateway(
        "gateway-2", "--max-messages", str(messages), "--idle-seconds", "15", **_gateway_env(provider)
    )
    try:
        gateway.wait(timeout=45)
    except subprocess.TimeoutExpired:
        pytest.fail("the restarted gateway did not finish:\n" + processes.log("gateway-2"))
    return processes.log("gateway-2")


def test_a_gateway_killed_before_it_recorded_the_push_sends_that_push_twice_and_loses_none(
    team: Team, push_queue: str, processes: Processes, provider: Provider
) -> None:
    keys = _pushes_on_the_queue(team, push_queue)
    gateway: subprocess.Popen[bytes] | None = None

    def crash_on_first(key: str) -> bool:
        if len(provider.keys) > 1:
            return True
        assert gateway is not None
        os.kill(gateway.pid, signal.SIGKILL)  # the provider has the push; the gateway never hears back
        gateway.wait(timeout=10)
        return False

    provider.on_request = crash_on_first
    started = time.monotonic()
    gateway = processes.gateway("gateway-1", "--idle-seconds", "30", **_gateway_env(provider))
    wait_for(lambda: gateway.poll() is not None, timeout=30, what="the provider's first push")
    assert gateway.returncode == -signal.SIGKILL, processes.log("gateway-1")
    crashed = provider.keys[0]
    assert not PushSend.objects.exists()
    wait_for(lambda: ready_count(push_queue) == 4, timeout=10, what="RabbitMQ to requeue the unacked push")

    log = _finish_with_a_new_gateway(processes, provider, messages=4)
    elapsed = time.monotonic() - started

    assert "push gateway stopped: {'delivered': 4}" in log, log
    seen = Counter(provider.keys)
    assert seen == {key: 2 if key == crashed else 1 for key in keys}
    record_with_the_queue_empty(
        push_queue,
        keys,
        scenario="Push gateway killed -9 after the provider accepted a push, before recording it",
        fault="SIGKILL of `manage.py push_gateway` inside the provider's HTTP request (prefetch 1)",
        result=f"push redelivered by RabbitMQ to a restarted gateway: provider saw that key 2x "
        f"(at-least-once window), the other {len(keys) - 1} once; PushSend 1 row per key; "
        f"{len(keys)}/{len(keys)} delivered, 0 lost, queue empty ({elapsed:.1f} s)",
    )


def test_a_gateway_killed_after_it_recorded_the_push_sends_nothing_twice_and_loses_none(
    team: Team, push_queue: str, processes: Processes, provider: Provider
) -> None:
    keys = _pushes_on_the_queue(team, push_queue)
    proxy = SwallowingProxy(settings.CELERY_BROKER_URL)

    def swallow_the_ack(key: str) -> bool:
        proxy.swallow_client_bytes.set()  # from now on RabbitMQ hears nothing from this gateway
        return True

    provider.on_request = swallow_the_ack
    started = time.monotonic()
    try:
        env = {
            **_gateway_env(provider),
            "REMINDERS_CALLBACK_BROKER_URL": proxy.url_for(settings.CELERY_BROKER_URL),
        }
        gateway = processes.gateway("gateway-1", "--idle-seconds", "30", **env)
        wait_for(lambda: PushSend.objects.exists(), timeout=30, what="the gateway to record a push")
        crashed = PushSend.objects.get().push_key
        wait_for(lambda: proxy.swallowed > 0, timeout=10, what="the gateway's ack (swallowed)")
        assert ready_count(push_queue) == 3  # the recorded push is still unacked, held by the gateway
        os.kill(gateway.pid, signal.SIGKILL)
        gateway.wait(timeout=10)
    finally:
        proxy.close()
    wait_for(lambda: ready_count(push_queue) == 4, timeout=10, what="RabbitMQ to requeue the unacked push")

    log = _finish_with_a_new_gateway(processes, provider, messages=4)
    elapsed = time.monotonic() - started

    assert "push gateway stopped: {'duplicate': 1, 'delivered': 3}" in log, log
    assert Counter(provider.keys) == dict.fromkeys(keys, 1)
    assert provider.keys[0] == crashed
    record_with_the_queue_empty(
        push_queue,
        keys,
        scenario="Push gateway killed -9 after recording a push, before its ack reached RabbitMQ",
        fault="ack swallowed by a TCP proxy, then SIGKILL of `manage.py push_gateway`",
        result=f"push redelivered and acked as a duplicate without a send: provider saw every key once; "
        f"PushSend 1 row per key; {len(keys)}/{len(keys)} delivered, 0 lost, queue empty "
        f"({elapsed:.1f} s)",
    )
