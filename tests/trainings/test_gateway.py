"""The push gateway: provider backends, de-duplication on the idempotency key, ack only when accepted."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from reminders.transports import Delivery
from reminders.transports.rabbitmq import RabbitMQTransport
from tests.conftest import drain_queue
from trainings.models import DeliveredPush
from trainings.push.gateway import Outcome, gateway_run, push_handle
from trainings.push.providers import PushMessage, PushProviderError, WebhookProvider


def _message(key: str = "occ-1.7", **overrides: Any) -> dict[str, Any]:
    body = {
        "schema": "trainings.push/1",
        "idempotency_key": key,
        "player": 7,
        "device_tokens": ["fcm:abc"],
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
    name = "recorder"

    def __init__(self, fail: PushProviderError | None = None) -> None:
        self.sent: list[PushMessage] = []
        self.fail = fail

    def send(self, push: PushMessage) -> None:
        if self.fail is not None:
            raise self.fail
        self.sent.append(push)


@pytest.mark.django_db
def test_it_sends_once_per_idempotency_key() -> None:
    provider = Recorder()
    assert push_handle(_message(), provider=provider) == Outcome.DELIVERED
    assert push_handle(_message(), provider=provider) == Outcome.DUPLICATE
    assert [p.idempotency_key for p in provider.sent] == ["occ-1.7"]
    assert DeliveredPush.objects.get().provider == "recorder"


@pytest.mark.django_db
def test_a_refused_push_is_retried_and_not_recorded() -> None:
    assert push_handle(_message(), provider=Recorder(PushProviderError("down"))) == Outcome.RETRY
    assert (
        push_handle(_message(), provider=Recorder(PushProviderError("bad", permanent=True)))
        == Outcome.REJECTED
    )
    assert not DeliveredPush.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("body", [[], "x", {"idempotency_key": "k"}, _message(player="seven")])
def test_a_malformed_message_is_rejected(body: Any) -> None:
    assert push_handle(body, provider=Recorder()) == Outcome.REJECTED


# --- webhook backend (a real HTTP server on loopback stands in for the provider) -------------------------


class _Hook(BaseHTTPRequestHandler):
    status = 200
    received: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((dict(self.headers), body))
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[tuple[str, type[_Hook]]]:
    handler = type("Hook", (_Hook,), {"status": 200, "received": []})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/push", handler
    server.shutdown()
    server.server_close()


def test_the_webhook_posts_the_signed_push(hook) -> None:  # type: ignore[no-untyped-def]
    url, handler = hook
    WebhookProvider(url, secret="s3cret").send(PushMessage.from_body(_message()))
    headers, body = handler.received[0]
    assert json.loads(body)["idempotency_key"] == "occ-1.7"
    assert headers["Idempotency-Key"] == "occ-1.7"
    expected = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert headers["X-Push-Signature"] == f"sha256={expected}"


@pytest.mark.parametrize(("status", "permanent"), [(503, False), (429, False), (400, True), (404, True)])
def test_the_webhook_raises_on_refusal(hook, status: int, permanent: bool) -> None:  # type: ignore[no-untyped-def]
    url, handler = hook
    handler.status = status
    with pytest.raises(PushProviderError) as error:
        WebhookProvider(url).send(PushMessage.from_body(_message()))
    assert error.value.permanent is permanent


def test_an_unreachable_webhook_is_retried() -> None:
    with pytest.raises(PushProviderError) as error:
        WebhookProvider("http://127.0.0.1:1/push", timeout=1).send(PushMessage.from_body(_message()))
    assert not error.value.permanent


# --- the consumer, against the real broker ---------------------------------------------------------------


def _publish(queue: str, *bodies: dict[str, Any]) -> None:
    transport = RabbitMQTransport()
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
def test_the_gateway_acks_accepted_and_duplicate_pushes(push_queue: str) -> None:
    _publish(push_queue, _message("a.1"), _message("b.2"), _message("a.1"))
    provider = Recorder()
    stats = gateway_run(provider=provider, max_messages=3, idle_seconds=5)
    assert stats.counts == {"delivered": 2, "duplicate": 1}
    assert sorted(p.idempotency_key for p in provider.sent) == ["a.1", "b.2"]
    assert drain_queue(push_queue) == []


@pytest.mark.django_db
@pytest.mark.rabbitmq
def test_the_gateway_leaves_a_refused_push_on_the_queue(push_queue: str, settings: Any) -> None:
    settings.TRAININGS_GATEWAY_RETRY_SECONDS = 0
    _publish(push_queue, _message("c.3"))
    stats = gateway_run(provider=Recorder(PushProviderError("provider down")), max_messages=1, idle_seconds=5)
    assert set(stats.counts) == {"retry"}  # requeued (maybe redelivered and refused again), never acked
    remaining = drain_queue(push_queue, expect=1)
    assert [json.loads(m.body)["idempotency_key"] for m in remaining] == ["c.3"]


@pytest.mark.django_db
@pytest.mark.rabbitmq
def test_the_command_runs_the_logging_provider(push_queue: str, caplog: Any) -> None:
    _publish(push_queue, _message("d.4"))
    with caplog.at_level("INFO", logger="trainings.push"):
        call_command("push_gateway", "--max-messages", "1", "--idle-seconds", "5")
    assert "key=d.4" in caplog.text
    assert DeliveredPush.objects.filter(key="d.4", provider="logging").exists()
