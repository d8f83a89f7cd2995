"""Players' own preferences: channels and mute per reminder kind and their own quiet hours, through the
API for the app; a muted reminder is a recorded outcome `muted`; a reminder an operator marks critical
(an offset of a rule, or all of them) goes through mute and quiet hours."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from delivery.gateway.consumer import Outcome, PushSender
from delivery.models import PushSend, SendStatus
from reminders.models import Occurrence
from reminders.transports import Delivery
from tests.conftest import drain_queue
from tests.factories import DeviceFactory, PlayerFactory, UserFactory, training_made
from tests.peers.apns_fcm import ApnsPeer, FcmPeer
from tests.trainings.conftest import fire
from tests.trainings.push_fixtures import message
from trainings.models import Player, Push, PushStatus, ReminderPreference, ReminderRule, Team
from trainings.planning.scheduling import HANDLER_NAME
from trainings.planning.writes import rule_update, training_create
from trainings.reminding.firing import reminder_fire
from trainings.reminding.held import held_pushes_release
from trainings.selectors import job_key

pytestmark = pytest.mark.django_db


def _owner() -> tuple[Player, APIClient]:
    user = UserFactory()
    player = PlayerFactory(user=user, devices=[])
    client = APIClient()
    client.force_authenticate(user)
    return player, client


def test_the_app_reads_every_kinds_preference_and_the_player_changes_them() -> None:
    player, client = _owner()
    path = f"/api/players/{player.pk}/preferences/"
    body = client.get(path).json()
    assert body["quiet_start"] is None
    assert {k["kind"]: (k["channels"], k["muted"]) for k in body["kinds"]} == {
        "PRE": ("default", False), "POST": ("default", False), "INVITATION": ("default", False),
    }  # fmt: skip
    kinds = [{"kind": "POST", "muted": True}, {"kind": "PRE", "channels": "email"}]
    body = {"kinds": kinds, "quiet_start": "22:30", "quiet_end": "07:00"}
    changed = client.put(path, body, format="json")
    assert changed.status_code == 200, changed.content
    kinds = {k["kind"]: (k["channels"], k["muted"]) for k in changed.json()["kinds"]}
    assert kinds["POST"] == ("default", True) and kinds["PRE"] == ("email", False)
    player.refresh_from_db()
    assert (player.quiet_start, player.quiet_end) == (dt.time(22, 30), dt.time(7))


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"quiet_start": "22:00"}, "quiet_end"),
        ({"kinds": [{"kind": "LINEUP"}]}, "kinds"),
        ({"kinds": [{"kind": "PRE", "channels": "sms"}]}, "kinds"),
        ({"kinds": [{"kind": "PRE"}, {"kind": "PRE"}]}, "kinds"),
    ],
)
def test_a_bad_preference_is_a_400_naming_the_field(body: dict[str, Any], field: str) -> None:
    player, client = _owner()
    response = client.put(f"/api/players/{player.pk}/preferences/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert not ReminderPreference.objects.exists()


def test_only_the_player_changes_their_preferences(coach: Any, team: Team) -> None:
    player = team.players.get(name="Alice")
    client = APIClient()
    client.force_authenticate(coach)
    path = f"/api/players/{player.pk}/preferences/"
    assert client.get(path).status_code == 200  # the coach of the team reads them
    assert client.put(path, {"kinds": [{"kind": "PRE", "muted": True}]}, format="json").status_code == 403
    stranger = APIClient()
    stranger.force_authenticate(UserFactory())
    assert stranger.get(path).status_code == 404


def test_a_muted_kind_is_a_recorded_outcome_and_a_critical_offset_still_comes(
    apns: ApnsPeer, fcm: FcmPeer, sender: PushSender, rules: dict[str, ReminderRule]
) -> None:
    player = PlayerFactory(devices=[])
    DeviceFactory(player=player, provider="fcm", platform="android", token="phone")
    ReminderPreference.objects.create(player=player, kind="PRE", muted=True)

    assert sender.handle([message("occ.1", player.pk, kind="PRE")])[0].outcome == Outcome.MUTED
    send = PushSend.objects.get(push_key="occ.1")
    assert (send.status, send.device_id) == (SendStatus.MUTED, None)
    assert fcm.received == []

    rule_update(rule=rules["pre-questionnaire"], critical_offsets=["15m"])  # the last reminder only
    assert sender.handle([message("occ.2", player.pk, offset="60m")])[0].outcome == Outcome.MUTED
    assert sender.handle([message("occ.3", player.pk, offset="15m")])[0].outcome == Outcome.DELIVERED
    assert len(fcm.received) == 1
    rule_update(rule=rules["pre-questionnaire"], critical_offsets="all")
    assert sender.handle([message("occ.4", player.pk, offset="60m")])[0].outcome == Outcome.DELIVERED
    assert len(fcm.received) == 2


@pytest.mark.rabbitmq
def test_a_critical_offset_goes_through_quiet_hours(
    team: Team, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    team.quiet_start, team.quiet_end = dt.time(0), dt.time(23, 59)  # quiet almost all day
    team.save()
    rule = rules["pre-questionnaire"]
    start = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)
    training = training_create(team=team, title="Session", start=start, end=start + dt.timedelta(hours=1),
                               time_zone="Europe/Paris")  # fmt: skip

    def fire_at(minutes: int) -> None:
        at = start - dt.timedelta(minutes=minutes)
        occurrence = Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=rule), fire_at=at)
        payload = {"training": str(training.pk), "rule": rule.pk}
        reminder_fire(delivery=Delivery(occurrence.pk, occurrence.idempotency_key, occurrence.job.key, at, 1,
                                        HANDLER_NAME, payload))  # fmt: skip

    fire_at(90)
    assert set(Push.objects.values_list("status", flat=True)) == {PushStatus.SKIPPED}  # quiet: no use after
    rule_update(rule=rule, critical_offsets=["75m"])
    rule.refresh_from_db()
    fire_at(75)
    at_75 = Push.objects.filter(offset="75m")
    assert at_75.count() == 3 and set(at_75.values_list("status", flat=True)) == {PushStatus.SENT}
    fire_at(60)  # not critical: quiet hours hold it as before
    assert set(Push.objects.filter(offset="60m").values_list("status", flat=True)) == {PushStatus.SKIPPED}


@pytest.mark.rabbitmq
def test_a_muted_player_in_quiet_hours_gets_only_the_critical_last_reminder(
    team: Team, rules: dict[str, ReminderRule], push_queue: str, fcm: FcmPeer, sender: PushSender
) -> None:
    """Alice muted the pre-training kind and is quiet 16:00-17:50 (Paris) before an 18:00 training; the
    operator marked only the 15-min reminder critical. It reaches her phone; the 60-min one, held by her
    quiet hours, is withdrawn then (it would come after it, at 17:50), and nothing else reaches her."""
    alice = Player.objects.get(name="Alice")
    ReminderPreference.objects.create(player=alice, kind="PRE", muted=True)
    Player.objects.filter(pk=alice.pk).update(quiet_start=dt.time(16), quiet_end=dt.time(17, 50))
    rule = rules["pre-questionnaire"]
    rule_update(rule=rule, critical_offsets=["15m"])
    start = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris
    training = training_made(team, start)

    def fire_before(minutes: int) -> None:
        at = start - dt.timedelta(minutes=minutes)
        occurrence = Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=rule), fire_at=at)
        assert fire(occurrence).delivered == 1

    fire_before(60)
    held = Push.objects.get(player=alice, offset="60m")
    assert (held.status, held.release_at) == (
        PushStatus.HELD,
        dt.datetime(2030, 6, 11, 15, 50, tzinfo=dt.UTC),
    )
    fire_before(15)
    assert Push.objects.get(player=alice, offset="15m").status == PushStatus.SENT  # through quiet hours
    held.refresh_from_db()
    assert held.status == PushStatus.WITHDRAWN
    bodies = [json.loads(m.body) for m in drain_queue(push_queue, expect=5)]
    assert {h.outcome for h in sender.handle(bodies)} == {Outcome.DELIVERED}  # hers through mute
    assert sorted(fcm.tokens()) == ["fcm-alice", "fcm-bruno", "fcm-bruno", "fcm-chloe", "fcm-chloe"]
    assert held_pushes_release(training_id=training.pk, at=held.release_at)["released"] == 0


@pytest.mark.rabbitmq
def test_a_critical_reminder_withdraws_the_rules_earlier_reminders_still_held_for_the_player(
    team: Team, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    """Quiet 16:00-17:50 (Paris): the 60- and 30-min reminders are held for Alice when the critical 15-min
    one reaches her; released at 17:50 they would repeat it, later and out of order, so they go."""
    alice = Player.objects.get(name="Alice")
    Player.objects.filter(pk=alice.pk).update(quiet_start=dt.time(16), quiet_end=dt.time(17, 50))
    rule = rules["pre-questionnaire"]
    rule_update(rule=rule, critical_offsets=["15m"])
    start = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris
    training = training_made(team, start)
    for minutes in (60, 30, 15):
        at = start - dt.timedelta(minutes=minutes)
        assert fire(Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=rule), fire_at=at))
    statuses = dict(Push.objects.filter(player=alice).values_list("offset", "status"))
    assert statuses == {"60m": PushStatus.WITHDRAWN, "30m": PushStatus.WITHDRAWN, "15m": PushStatus.SENT}
    assert "came through quiet hours" in Push.objects.get(player=alice, offset="60m").status_reason
    others = set(Push.objects.exclude(player=alice).values_list("status", flat=True))
    assert others == {PushStatus.SENT}  # nobody else was quiet
    release = dt.datetime(2030, 6, 11, 15, 50, tzinfo=dt.UTC)
    assert held_pushes_release(training_id=training.pk, at=release)["released"] == 0


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ({"critical_offsets": ["20m"]}, "critical_offsets", "20m not among the rule's offsets"),
        ({"critical_offsets": "sometimes"}, "critical_offsets", '"all", or a list'),
        ({"critical_offsets": ["soon"]}, "critical_offsets", "is not an offset"),
        ({"offsets": ["30m"], "critical_offsets": ["15m"]}, "critical_offsets", "15m not among"),
        ({"critical": True}, "critical", "replaced by critical_offsets"),
    ],
)
def test_a_critical_offset_the_rule_does_not_have_is_a_400_naming_the_field(
    rules: dict[str, ReminderRule], body: dict[str, Any], field: str, reason: str
) -> None:
    api = APIClient()
    api.force_authenticate(UserFactory(is_staff=True, is_superuser=True))
    response = api.patch("/api/reminder-rules/pre-questionnaire/", body, format="json")
    assert response.status_code == 400, response.content
    assert reason in str(response.json()[field])
    rule = ReminderRule.objects.get(slug="pre-questionnaire")
    assert (rule.critical_offsets, len(rule.offsets)) == ([], 6)


def test_an_operator_marks_critical_offsets_through_the_api_and_the_history_keeps_them(
    rules: dict[str, ReminderRule],
) -> None:
    api = APIClient()
    api.force_authenticate(UserFactory(is_staff=True, is_superuser=True))
    path = "/api/reminder-rules/pre-questionnaire/"
    response = api.patch(path, {"critical_offsets": ["15m", " 15m", "30m"]}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["critical_offsets"] == ["15m", "30m"]  # as pushes name them, once each
    assert api.patch(path, {"critical_offsets": "all"}, format="json").json()["critical_offsets"] == "all"
    rule = ReminderRule.objects.get(slug="pre-questionnaire")
    assert [h.critical_offsets for h in rule.history.order_by("history_date")][-2:] == [["15m", "30m"], "all"]


def test_the_admin_form_takes_critical_offsets_and_names_a_wrong_one(admin_client: Any) -> None:
    rule = ReminderRule.objects.get(slug="pre-questionnaire")
    templates = list(rule.templates.order_by("id"))
    form: dict[str, Any] = {
        "kind": "PRE", "offsets": ", ".join(rule.offsets), "active": "on",
        "templates-TOTAL_FORMS": len(templates), "templates-INITIAL_FORMS": len(templates),
        "templates-MIN_NUM_FORMS": 0, "templates-MAX_NUM_FORMS": 1000,
    }  # fmt: skip
    for index, template in enumerate(templates):
        form |= {f"templates-{index}-{name}": value for name, value in (
            ("id", template.pk), ("rule", rule.pk), ("language", template.language),
            ("title", template.title), ("body", template.body))}  # fmt: skip
    path = f"/admin/trainings/reminderrule/{rule.pk}/change/"
    page = admin_client.post(path, form | {"critical_offsets": "20m"})
    assert page.status_code == 200
    assert "20m not among the rule's offsets" in page.context["adminform"].form.errors["critical_offsets"][0]
    assert admin_client.post(path, form | {"critical_offsets": "15m"}).status_code == 302
    rule.refresh_from_db()
    assert rule.critical_offsets == ["15m"]
    assert admin_client.post(path, form | {"critical_offsets": ""}).status_code == 302  # an empty box: none
    rule.refresh_from_db()
    assert rule.critical_offsets == []
