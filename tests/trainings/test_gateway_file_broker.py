"""The push gateway on the embedded file broker (kombu's filesystem transport, `make run`'s default): it
consumes, sends with the logging provider, acks, dead-letters and replays there as on RabbitMQ. No
service needed: this runs in the bare `make test`."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from delivery.channels.providers import Providers, PushMessage, SendResult, Target, Verdict
from delivery.gateway.consumer import dead_letter_queue_name, gateway_run
from delivery.models import PushSend, SendStatus
from tests.factories import PlayerFactory
from tests.trainings.push_fixtures import left_on, publish_to

pytestmark = pytest.mark.django_db


def _message(key: str, player: int) -> dict[str, Any]:
    return {"schema": "trainings.push/2", "idempotency_key": key, "player": player, "title": "Invitation",
            "body": "Speed session on Tuesday at 6 p.m.", "language": "en", "kind": "INVITATION",
            "training": "7d0c0a4e-0000-4000-8000-000000000000",
            "fire_at": timezone.now().isoformat()}  # fmt: skip


class Refusing:
    """A channel that keeps answering "try again" (the dead-letter path)."""

    name = "refusing"

    def prepare(self) -> None:
        pass

    async def send(self, push: PushMessage, device: Target) -> SendResult:
        return SendResult(Verdict.RETRY, error="told to")

    async def aclose(self) -> None:
        pass


@pytest.mark.django_db(transaction=True)  # committed rows: the gateway records from a thread of its own
def test_it_runs_the_gateway_with_the_logging_provider(file_broker: str, settings: Any, caplog: Any) -> None:
    settings.PUSH_APNS_KEY_FILE = settings.PUSH_FCM_CREDENTIALS_FILE = ""  # the logging provider serves all
    alice, bruno = PlayerFactory(name="Alice"), PlayerFactory(name="Bruno")
    queue = settings.TRAININGS_PUSH_QUEUE
    publish_to(
        file_broker, queue, _message("a.1", alice.pk), _message("b.2", bruno.pk), _message("a.1", alice.pk)
    )
    with caplog.at_level("INFO", logger="trainings.push"):
        call_command("push_gateway", "--max-messages", "3", "--idle-seconds", "3")
    assert "key=a.1" in caplog.text and "key=b.2" in caplog.text
    assert sorted(PushSend.objects.values_list("push_key", flat=True)) == ["a.1", "b.2"]  # a row a push
    assert set(PushSend.objects.values_list("provider", "status")) == {("logging", SendStatus.ACCEPTED)}
    assert left_on(file_broker, queue) == []  # every message acked, the duplicate too


def test_it_dead_letters_and_replays_on_the_file_broker(file_broker: str, settings: Any, capsys: Any) -> None:
    settings.TRAININGS_GATEWAY_MAX_ATTEMPTS = 1
    settings.TRAININGS_GATEWAY_RETRY_SECONDS = 0
    alice = PlayerFactory(name="Alice")
    queue = settings.TRAININGS_PUSH_QUEUE
    publish_to(file_broker, queue, _message("c.3", alice.pk))
    stats = gateway_run(
        url=file_broker, providers=Providers(standin=Refusing()), max_messages=1, idle_seconds=3
    )
    assert stats.counts == {"dead_lettered": 1}

    call_command("push_dead_letters")  # listing hands the message back
    assert "c.3" in capsys.readouterr().out
    call_command("push_dead_letters", "--replay")
    assert "replayed 1 of 1" in capsys.readouterr().out
    assert not PushSend.objects.filter(push_key="c.3").exists()  # forgotten, so it is sent again

    call_command("push_gateway", "--max-messages", "1", "--idle-seconds", "3")
    assert not PushSend.objects.filter(push_key="c.3", status=SendStatus.GIVEN_UP).exists()
    assert PushSend.objects.get(push_key="c.3", status=SendStatus.ACCEPTED).provider == "logging"
    assert left_on(file_broker, queue) == []
    assert left_on(file_broker, dead_letter_queue_name()) == []
