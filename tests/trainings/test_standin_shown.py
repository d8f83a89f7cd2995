"""A stand-in's acceptance is shown as such: with the logging stand-in (the development default) a push
"accepted" reached no phone, and the coach's grid, the push and send lists and the status page say
"logging stand-in, nothing sent" where a device's acceptance reads "reached"."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from delivery.channels.providers import providers_from_settings
from delivery.gateway.consumer import Outcome, PushSender
from delivery.gateway.liveness import push_minutes_add
from delivery.models import PushMinute, PushSend, SendStatus
from reminders.models import Occurrence
from tests.clients import api_as
from tests.factories import DeviceFactory, PlayerFactory, UserFactory, training_made
from tests.trainings.conftest import fire
from tests.trainings.push_fixtures import message
from trainings.access import coach_group_ensure
from trainings.models import Push, Team
from trainings.reminding.remind_now import training_remind_now
from trainings.selectors import job_key

STANDIN = "logging stand-in, nothing sent"


@pytest.fixture
def coach(db: None) -> Any:
    user = UserFactory(username="coach-s", is_staff=True)
    user.groups.add(coach_group_ensure())
    return user


@pytest.fixture
def browser(coach: Any) -> Client:
    client = Client()
    client.force_login(coach)
    return client


@pytest.fixture
def operator_client(db: None) -> Client:
    client = Client()
    client.force_login(UserFactory(username="op-s", is_staff=True, is_superuser=True))
    return client


def _reminded(team: Team, rules: dict[str, Any], *, provider_of: dict[str, str]) -> Any:
    """A training whose invitation reminder went to every player, each push accepted by `provider_of`'s
    channel for that player (the logging stand-in by default)."""
    training = training_made(team, timezone.now() + dt.timedelta(days=2))
    training_remind_now(training=training, rule=rules["invitation"], click="c-standin")
    for push in Push.objects.filter(training=training).select_related("player"):
        provider = provider_of.get(push.player.name, "logging")
        PushSend.objects.create(push_key=push.key, player_id=push.player_id, provider=provider,
                                status=SendStatus.ACCEPTED, recorded_at=timezone.now())  # fmt: skip
    return training


def test_the_coachs_grid_says_the_stand_in_sent_nothing(
    browser: Client, team: Team, rules: dict[str, Any], push_queue: str
) -> None:
    training = _reminded(team, rules, provider_of={"Alice": "fcm"})
    page = browser.get(f"/admin/trainings/training/{training.pk}/change/").content.decode()
    alice = page.split("<td>Alice</td>")[1].split("</tr>")[0]
    bruno = page.split("<td>Bruno</td>")[1].split("</tr>")[0]
    assert "reached (1 device accepted)" in alice and STANDIN not in alice
    assert STANDIN in bruno and "reached (" not in bruno
    assert "<td>0 <small" in bruno and "+1 accepted by a stand-in, nothing sent" in bruno
    assert "<td>1</td>" in alice


def test_the_push_and_send_lists_say_the_stand_in_sent_nothing(
    operator_client: Client, team: Team, rules: dict[str, Any], push_queue: str
) -> None:
    _reminded(team, rules, provider_of={"Alice": "fcm"})
    pushes = operator_client.get("/admin/trainings/push/").content.decode()
    assert pushes.count(f'<span class="outcome outcome-standin">{STANDIN}</span>') == 2  # Bruno, Chloe
    assert pushes.count("reached (1 device accepted)") == 1  # Alice's phone
    sends = operator_client.get("/admin/delivery/pushsend/").content.decode()
    assert sends.count(f"Accepted: {STANDIN}") == 2
    assert sends.count('<td class="field-outcome">Accepted by the provider</td>') == 1  # Alice's phone
    bruno = Push.objects.get(player__name="Bruno")
    page = operator_client.get(f"/admin/trainings/push/{bruno.pk}/change/").content.decode()
    assert f"Accepted: {STANDIN}" in page and STANDIN in page


def test_the_status_page_counts_the_stand_ins_apart(operator_client: Client) -> None:
    now = timezone.now()
    push_minutes_add(at=now - dt.timedelta(minutes=2), accepted=6, not_reached=0, standin=6)
    push_minutes_add(at=now - dt.timedelta(minutes=1), accepted=3, not_reached=1, standin=1)
    page = operator_client.get("/admin/status/").content.decode()
    assert '<span data-figure="reached-hour">2</span> pushes reached a phone, 1 did not' in page
    assert f'<span data-figure="standin-hour">7</span> accepted by the {STANDIN}' in page


def test_the_gateway_counts_what_the_stand_in_accepted_and_the_status_page_says_so(
    operator_client: Client, settings: Any
) -> None:
    """No FCM credentials: the logging stand-in serves the FCM devices; the minute counts its acceptances
    apart, and the status page does not call them phones reached."""
    settings.TRAININGS_PUSH_PROVIDER = "logging"
    players = [PlayerFactory(devices=[]) for _ in range(3)]
    for n, player in enumerate(players):
        DeviceFactory(player=player, provider="fcm", platform="android", token=f"fcm-standin-{n}")
    sender = PushSender(providers_from_settings())
    try:
        results = sender.handle([message(f"occ.{p.pk}", p.pk) for p in players])
    finally:
        sender.close()
    assert {r.outcome for r in results} == {Outcome.DELIVERED}
    assert set(PushSend.objects.values_list("provider", "status")) == {("logging", SendStatus.ACCEPTED)}
    [minute] = PushMinute.objects.all()
    assert (minute.accepted, minute.standin) == (3, 3)
    page = operator_client.get("/admin/status/").content.decode()
    assert '<span data-figure="reached-hour">0</span> pushes reached a phone' in page
    assert f'<span data-figure="standin-hour">3</span> accepted by the {STANDIN}' in page


def test_the_timeline_names_whom_only_the_stand_in_took(
    browser: Client, coach: Any, team: Team, rules: dict[str, Any], push_queue: str
) -> None:
    pre = rules["pre-questionnaire"]
    training = training_made(team, timezone.now() + dt.timedelta(hours=3))
    jobs = Occurrence.objects.filter(job__key=job_key(training_id=training.pk, rule=pre))
    occurrence = jobs.earliest("fire_at")
    fire(occurrence)
    pushes = Push.objects.filter(occurrence_key=occurrence.idempotency_key).select_related("player")
    assert {p.player.name for p in pushes} == {"Alice", "Bruno", "Chloe"}
    for push in pushes:
        provider = "fcm" if push.player.name == "Alice" else "logging"
        PushSend.objects.create(push_key=push.key, player_id=push.player_id, provider=provider,
                                status=SendStatus.ACCEPTED, recorded_at=timezone.now())  # fmt: skip
    page = browser.get(f"/admin/trainings/training/{training.pk}/change/").content.decode()
    assert f"Alice, Bruno ({STANDIN}), Chloe ({STANDIN})" in page
    body = api_as(coach).get(f"/api/trainings/{training.pk}/timeline/").json()
    fired = next(e for e in body if e["players_reached"])
    assert (fired["players_reached"], fired["players_standin"]) == (3, 2)
