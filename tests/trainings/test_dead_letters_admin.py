"""Dead-lettered pushes in the admin: an operator lists them by player, inspects the message, and replays
them from the page; the gateway then sends them again (accepted devices are not resent). A coach cannot
open the page. The real RabbitMQ and a loopback FCM peer."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from delivery.channels.providers import providers_from_settings
from delivery.gateway.consumer import dead_letter_queue_name, gateway_run
from delivery.models import PushSend, SendStatus
from tests.conftest import delete_queue, drain_queue
from tests.factories import DeviceFactory, PlayerFactory, UserFactory
from tests.peers.apns_fcm import Answer, FcmPeer
from tests.trainings.push_fixtures import message
from tests.trainings.test_push_answers import _publish
from trainings.access import coach_group_ensure
from trainings.admin.dead_letters import HIDDEN

pytestmark = [pytest.mark.django_db, pytest.mark.rabbitmq]


@pytest.fixture
def queues(settings: Any, queue_name: str) -> Any:
    settings.TRAININGS_PUSH_QUEUE = queue_name
    settings.TRAININGS_GATEWAY_RETRY_SECONDS = 0.05
    settings.TRAININGS_GATEWAY_MAX_ATTEMPTS = 2
    yield queue_name
    delete_queue(f"{queue_name}.dead")


def test_an_operator_lists_inspects_and_replays_dead_letters_from_the_admin(
    operator: Client, fcm: FcmPeer, queues: str
) -> None:
    player = PlayerFactory(name="Zoé", devices=[])
    DeviceFactory(player=player, provider="fcm", platform="android", token="down")
    fcm.script("down", [Answer(503)] * 2)
    _publish(queues, message("occ.dead", player.pk))
    assert gateway_run(providers=providers_from_settings(), max_messages=2, idle_seconds=10).counts == {
        "retry": 1, "dead_lettered": 1,
    }  # fmt: skip

    assert 'href="/admin/push-dead-letters/"' in operator.get("/admin/").content.decode()
    page = operator.get("/admin/push-dead-letters/").content.decode()
    row = page.split('data-key="occ.dead', 1)[1].split("</tr>", 1)[0]
    assert "Zoé" in row and "FCM 503" in row  # the player by name and the last error
    assert '<pre class="json">' in row and "trainings.push-dead/1" in row  # inspect: the message as it was
    assert HIDDEN in row and "answer-links/" not in row and "/answer/" not in row  # its links answer for Zoé
    assert operator.get("/admin/push-dead-letters/").status_code == 200  # listing changed nothing

    key = row.split('value="', 1)[1].split('"', 1)[0]
    response = operator.post("/admin/push-dead-letters/replay/", {"key": key}, follow=True)
    assert "1 push(es) put back on the push queue" in response.content.decode()
    assert drain_queue(dead_letter_queue_name()) == []
    assert gateway_run(providers=providers_from_settings(), max_messages=1, idle_seconds=10).counts == {
        "delivered": 1
    }
    assert set(PushSend.objects.values_list("status", flat=True)) == {SendStatus.ACCEPTED}


def test_a_coach_cannot_open_the_dead_letters(db: None) -> None:
    coach = UserFactory(is_staff=True)
    coach.groups.add(coach_group_ensure())
    client = Client()
    client.force_login(coach)
    assert client.get("/admin/push-dead-letters/").status_code == 403
    assert client.post("/admin/push-dead-letters/replay/", {"all": "1"}).status_code == 403
