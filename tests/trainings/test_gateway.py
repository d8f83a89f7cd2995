"""The push gateway: stand-in backends (logging, webhook), de-duplication on the idempotency key, ack only
when every device has an outcome. FCM and APNs against real peers: test_push_*.py."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone

from delivery.channels.providers import Providers, PushMessage, SendResult, Target, Verdict
from delivery.channels.webhook import WebhookProvider
from delivery.gateway.consumer import Outcome, gateway_run, push_handle
from delivery.gateway.queue import queue_publisher_at
from delivery.models import PushSend, SendStatus
from reminders.transports import Delivery
from tests.conftest import drain_queue
from tests.factories import PlayerFactory
from tests.http_receiver import QuietHandler, serving


def _message(key: str = "occ-1.7", **overrides: Any) -> dict[str, Any]:
    body = {
        "schema": "trainings.push/2",
        "idempotency_key": key,
        "player": 7,
        "title": "Pre-training questionnaire",
        "body": "Speed session starts at 6 p.m.",
        "language": "en",
        "training": "7d0c0a4e-0000-4000-8000-000000000000",
        "kind": "PRE",
        "rule": "pre-questionnaire",
        "fire_at": "2030-06-11T14:30:00+00:00",
    }
    body.update(overrides)
    return body


class Recorder:
    """A stand-in provider that answers what it is told (the gateway's side of the interface)."""

    name = "recorder"

    def __init__(self, verdict: Verdict = Verdict.ACCEPTED) -> None:
        self.sent: list[tuple[PushMessage, Target]] = []
        self.verdict = verdict

    def prepare(self) -> None:
        pass

    async def send(self, push: PushMessage, device: Target) -> SendResult:
        self.sent.append((push, device))
        return SendResult(self.verdict, error="" if self.verdict == Verdict.ACCEPTED else "told to")

    async def aclose(self) -> None:
        pass


@pytest.fixture
def player7(db: None) -> Any:
    return PlayerFactory(id=7, name="Seven")


@pytest.mark.django_db
def test_it_sends_once_per_idempotency_key(player7: Any) -> None:
    provider = Recorder()
    assert push_handle(_message(), providers=provider) == Outcome.DELIVERED
    assert push_handle(_message(), providers=provider) == Outcome.DUPLICATE
    assert [p.idempotency_key for p, _ in provider.sent] == ["occ-1.7"]
    send = PushSend.objects.get()  # the one record of the push: its device's outcome
    assert (send.push_key, send.device.token, send.provider, send.status) == (
        "occ-1.7",
        "fcm-seven",
        "recorder",
        SendStatus.ACCEPTED,
    )


@pytest.mark.django_db
def test_a_refused_push_is_retried_and_not_recorded(player7: Any) -> None:
    assert push_handle(_message(), providers=Recorder(Verdict.RETRY)) == Outcome.RETRY
    assert not PushSend.objects.exists()
    # A payload the provider refuses for good is recorded failed for that device; the push is finished.
    assert push_handle(_message(), providers=Recorder(Verdict.FAILED)) == Outcome.DELIVERED
    assert PushSend.objects.get().status == SendStatus.FAILED


@pytest.mark.django_db
@pytest.mark.parametrize("body", [[], "x", {"idempotency_key": "k"}, _message(player="seven")])
def test_a_malformed_message_is_rejected(body: Any) -> None:
    assert push_handle(body, providers=Recorder()) == Outcome.REJECTED


# --- webhook backend (a real HTTP server on loopback stands in for the provider) -------------------------


class _Hook(QuietHandler):
    status = 200
    received: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((dict(self.headers), body))
        self.answer(type(self).status)


@pytest.fixture
def hook() -> Iterator[tuple[str, type[_Hook]]]:
    handler = type("Hook", (_Hook,), {"status": 200, "received": []})
    with serving(handler) as port:
        yield f"http://127.0.0.1:{port}/push", handler


_DEVICE = Target(3, "fcm", "android", "tok-3")


def _webhook_send(provider: WebhookProvider) -> SendResult:
    async def go() -> SendResult:
        try:
            return await provider.send(PushMessage.from_body(_message()), _DEVICE)
        finally:
            await provider.aclose()

    return asyncio.run(go())


def test_the_webhook_posts_the_signed_push(hook) -> None:
    url, handler = hook
    assert _webhook_send(WebhookProvider(url, secret="s3cret")).verdict == Verdict.ACCEPTED
    headers, body = handler.received[0]
    assert json.loads(body)["idempotency_key"] == "occ-1.7"
    assert json.loads(body)["device"]["token"] == "tok-3"
    assert headers["Idempotency-Key"] == "occ-1.7/3"
    expected = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert headers["X-Push-Signature"] == f"sha256={expected}"


@pytest.mark.parametrize(
    ("status", "verdict"),
    [(503, Verdict.RETRY), (429, Verdict.RETRY), (400, Verdict.FAILED), (404, Verdict.FAILED)],
)
def test_the_webhook_answers_a_refusal(hook, status: int, verdict: Verdict) -> None:
    url, handler = hook
    handler.status = status
    assert _webhook_send(WebhookProvider(url)).verdict == verdict


def test_an_unreachable_webhook_is_retried() -> None:
    assert _webhook_send(WebhookProvider("http://127.0.0.1:1/push", timeout=1)).verdict == Verdict.RETRY


# --- the consumer, against the real broker ---------------------------------------------------------------


def _publish(queue: str, *bodies: dict[str, Any]) -> None:
    transport = queue_publisher_at(settings.REMINDERS_CALLBACK_BROKER_URL)
    errors = transport.deliver(
        [
            Delivery(i, body["idempotency_key"], "job", timezone.now(), 1, queue, body)
            for i, body in enumerate(bodies)
        ]
    )
    transport.close()
    assert not errors


@pytest.mark.django_db
@pytest.mark.rabbitmq
def test_the_gateway_acks_accepted_and_duplicate_pushes(push_queue: str, player7: Any) -> None:
    _publish(push_queue, _message("a.1"), _message("b.2"), _message("a.1"))
    provider = Recorder()
    stats = gateway_run(providers=Providers(standin=provider), max_messages=3, idle_seconds=5)
    assert stats.counts == {"delivered": 2, "duplicate": 1}
    assert sorted(p.idempotency_key for p, _ in provider.sent) == ["a.1", "b.2"]
    assert drain_queue(push_queue) == []


@pytest.mark.django_db
@pytest.mark.rabbitmq
def test_the_gateway_leaves_a_refused_push_on_the_queue(push_queue: str, settings: Any, player7: Any) -> None:
    settings.TRAININGS_GATEWAY_RETRY_SECONDS = 0
    _publish(push_queue, _message("c.3"))
    stats = gateway_run(providers=Providers(standin=Recorder(Verdict.RETRY)), max_messages=1, idle_seconds=5)
    assert set(stats.counts) == {"retry"}  # requeued (maybe redelivered and refused again), never acked
    remaining = drain_queue(push_queue, expect=1)
    assert [json.loads(m.body)["idempotency_key"] for m in remaining] == ["c.3"]


@pytest.mark.django_db
@pytest.mark.rabbitmq
def test_the_command_runs_the_logging_provider(push_queue: str, caplog: Any, player7: Any) -> None:
    _publish(push_queue, _message("d.4"))
    with caplog.at_level("INFO", logger="trainings.push"):
        call_command("push_gateway", "--max-messages", "1", "--idle-seconds", "5")
    assert "key=d.4" in caplog.text
    assert PushSend.objects.get(push_key="d.4").provider == "logging"  # FCM has no credentials here
