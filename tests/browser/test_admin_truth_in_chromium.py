"""The admin tells the truth, checked in Chromium: what reached a phone, Remind now, a training added in the
admin, owed only when owed, readable answers and zones (a coach); stuck work, the gateway, the queue and
pushes reaching phones on the status page, read-only records named in words, dead letters and schedules
(an operator). Screenshots land in var/artifacts/browser/admin-truth-*.png."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.conf import settings
from django.utils import timezone
from kombu import Connection, Producer, Queue

from delivery.gateway.consumer import dead_letter_queue_name
from delivery.gateway.dead_letters import DEAD_LETTER_SCHEMA
from delivery.gateway.liveness import gateway_heartbeat, push_minutes_add
from delivery.models import Device, GatewayHeartbeat, PushSend, SendStatus
from reminders.engine.dispatch import ScanResult
from reminders.ops.figures import scan_record
from tests.browser.conftest import fits_without_sideways_scroll, log_in, shot
from tests.conftest import delete_queue
from tests.factories import (
    MembershipFactory,
    OccurrenceFactory,
    PlayerFactory,
    TeamFactory,
    UserFactory,
    schedule_create,
)
from trainings.access import coach_group_ensure
from trainings.models import Push, QuestionnaireAnswer, ReminderRule, ReminderTemplate, Training
from trainings.planning import kinds
from trainings.planning.defaults import rules_seed
from trainings.planning.writes import training_create

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.django_db(transaction=True)]

PARIS = ZoneInfo("Europe/Paris")


@pytest.fixture
def world(settings: Any, queue_name: str) -> dict[str, Any]:
    """A Paris team's training starting in 40 minutes (the pre questionnaire open), another that ended
    yesterday, a coach and an operator."""
    settings.TRAININGS_PUSH_QUEUE = queue_name
    rules_seed(ReminderRule, ReminderTemplate)
    coach = UserFactory(username="coach", is_staff=True)
    coach.groups.add(coach_group_ensure())
    UserFactory(username="operator", is_staff=True, is_superuser=True, queues=["*"])
    team = TeamFactory(name="U15 Paris", time_zone="Europe/Paris", coaches=[coach])
    for name in ("Alice", "Bruno", "Chloe", "Dan"):
        MembershipFactory(team=team, player=PlayerFactory(name=name, time_zone="Europe/Paris", devices=[]))
    start = (timezone.now() + dt.timedelta(minutes=40)).replace(second=0, microsecond=0)
    soon = training_create(
        team=team, title="Sprint drills", start=start, end=start + dt.timedelta(minutes=90),
        time_zone="Europe/Paris", location="Stade Charléty",
    )  # fmt: skip
    past_start = start - dt.timedelta(days=1)
    past = training_create(
        team=team, title="Recovery run", start=past_start, end=past_start + dt.timedelta(minutes=60),
        time_zone="Europe/Paris",
    )  # fmt: skip
    alice = past.invitations.get(player__name="Alice").player
    QuestionnaireAnswer.objects.create(  # stored before questionnaires had questions: still shown
        training=past,
        player=alice,
        phase=kinds.POST.code,
        answered_at=timezone.now(),
        answers={"sleep_hours": 8, "sore": False, "mood": "good"},
    )
    return {"team": team, "soon": soon, "past": past}


def _gateway_answers(training: Training) -> None:
    """What a gateway would record: Bruno's phone accepted, Chloe has no device, Dan's token is dead."""
    now = timezone.now()
    pushes = {p.player.name: p for p in Push.objects.filter(training=training).select_related("player")}
    bruno, chloe, dan = pushes["Bruno"], pushes["Chloe"], pushes["Dan"]
    phone = Device.objects.create(player=bruno.player, platform="ios", provider="apns", token="b" * 64)
    gone = Device.objects.create(
        player=dan.player, platform="android", provider="fcm", token="d" * 40, disabled_at=now,
        disabled_reason="FCM 404 UNREGISTERED",
    )  # fmt: skip
    PushSend.objects.bulk_create(
        [
            PushSend(push_key=bruno.key, device=phone, player_id=bruno.player_id, provider="apns",
                     status=SendStatus.ACCEPTED, recorded_at=now),
            PushSend(push_key=chloe.key, player_id=chloe.player_id, provider="", status=SendStatus.NO_DEVICE,
                     recorded_at=now),
            PushSend(push_key=dan.key, device=gone, player_id=dan.player_id, provider="fcm",
                     status=SendStatus.TOKEN_DEAD, error="FCM 404 UNREGISTERED", recorded_at=now),
        ]
    )  # fmt: skip


def test_a_coach_reminds_now_and_reads_what_reached_each_phone(
    page: Any, live_server: Any, world: dict[str, Any]
) -> None:
    soon, past = world["soon"], world["past"]
    log_in(page, live_server.url, "coach")
    page.goto(f"{live_server.url}/admin/trainings/training/{soon.pk}/change/")
    selected = page.locator("#remind-form select option:checked").inner_text()
    assert selected == "Pre-training questionnaire (4 pending, open now)"
    page.click("#remind-form button")
    page.wait_for_selector(".messagelist")
    message = page.inner_text(".messagelist")
    assert "Pre-training questionnaire: queued for 4 player(s) (Alice, Bruno, Chloe, Dan)" in message
    page.click("#remind-form button")  # a second click within the minute
    page.wait_for_selector(".messagelist")
    assert "4 player(s) reminded of it less than a minute ago were left out" in page.inner_text(
        ".messagelist"
    )
    assert Push.objects.filter(training=soon).count() == 4

    _gateway_answers(soon)
    page.goto(f"{live_server.url}/admin/trainings/training/{soon.pk}/change/")
    grid = page.locator("table.player-grid")
    rows = {
        name: grid.locator("tr", has_text=name).inner_text() for name in ("Alice", "Bruno", "Chloe", "Dan")
    }
    assert "reached (1 device accepted)" in rows["Bruno"]
    assert "no device" in rows["Chloe"] and "token dead" in rows["Dan"]
    assert "queued for" in rows["Alice"]
    assert "owed" in rows["Alice"] and "not yet open" in rows["Alice"]  # pre open, post not yet
    assert not page.locator(".timezonewarning:visible").count()
    shot(page, "admin-truth-coach-training")

    page.goto(f"{live_server.url}/admin/trainings/training/{past.pk}/change/")
    answers = page.locator(".field-readable_answers, td.field-readable_answers").first.inner_text()
    assert "Sleep hours" in answers and "8" in answers and "{" not in answers
    grid = page.locator("table.player-grid").inner_text()
    assert "missed" in grid and "owed" not in grid
    shot(page, "admin-truth-coach-past")

    page.goto(f"{live_server.url}/admin/trainings/training/")
    listing = page.locator("#result_list").inner_text()
    assert "Upcoming" in listing and "Done" in listing and "✗" not in listing.split("status", 1)[-1][:0]
    shot(page, "admin-truth-coach-list")
    assert fits_without_sideways_scroll(page)

    page.goto(f"{live_server.url}/admin/trainings/push/")
    pushes = page.locator("#result_list").inner_text()
    assert "reached (1 device accepted)" in pushes and "Published to the push queue" not in pushes
    page.locator("#result_list tr", has_text="Bruno").locator("th a").click()
    page.wait_for_selector("table.device-sends")
    assert "Pre-training questionnaire to Bruno for Sprint drills" in page.inner_text("#content")
    assert "iOS via APNS" in page.inner_text("table.device-sends")
    shot(page, "admin-truth-push")


def test_a_coach_adds_a_training_that_takes_the_teams_zone_and_players(
    page: Any, live_server: Any, world: dict[str, Any]
) -> None:
    log_in(page, live_server.url, "coach")
    page.goto(f"{live_server.url}/admin/trainings/training/add/")
    assert page.locator("select#id_time_zone option:checked").inner_text() == "The team's zone"
    assert page.locator("select#id_team option:checked").inner_text() == "U15 Paris"
    page.fill("#id_title", "Added in the admin")
    page.fill("#id_start_0", "2030-06-11")
    page.fill("#id_start_1", "18:00:00")
    page.fill("#id_end_0", "2030-06-11")
    page.fill("#id_end_1", "19:30:00")
    shot(page, "admin-truth-add-training")
    page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist")
    training = Training.objects.get(title="Added in the admin")
    assert training.time_zone == "Europe/Paris" and training.invitations.count() == 4
    assert "Tue 2030-06-11" in page.inner_text("table.player-grid") or "Pending" in page.inner_text(
        "table.player-grid"
    )
    alice = world["team"].players.get(name="Alice")
    page.goto(f"{live_server.url}/admin/trainings/player/{alice.pk}/change/")
    assert (
        page.locator("select#id_time_zone").count() == 1 and page.locator("select#id_language").count() == 1
    )
    assert (
        "times in europe/paris" in page.inner_text("#user-tools").lower()
    )  # the team's zone, no setting needed


def test_an_operator_reads_stuck_work_the_gateway_and_pushes_reaching_phones(
    page: Any, live_server: Any, world: dict[str, Any]
) -> None:
    now = timezone.now()
    for minutes, error in ((9, "HTTP 503 from the endpoint"), (4, "HTTP 503 from the endpoint"),
                           (2, "broker error: ConnectionRefusedError")):  # fmt: skip
        OccurrenceFactory(fire_at=now - dt.timedelta(minutes=minutes), attempts=2, last_error=error,
                          next_attempt_at=now + dt.timedelta(minutes=1))  # fmt: skip
    for minutes in range(59):  # the chart's last hour keeps all of them should a minute pass meanwhile
        delivered = 300 + 200 * ((minutes * 7) % 5) if minutes % 13 else 0
        at = now - dt.timedelta(minutes=minutes)
        scan_record(result=ScanResult(claimed=delivered, delivered=delivered), worker="worker@ci", at=at)
        push_minutes_add(at=at, accepted=int(delivered * 0.8), not_reached=int(delivered * 0.05))
    gateway_heartbeat(name="gateway@ci", force=True)
    GatewayHeartbeat.objects.update(seen_at=now - dt.timedelta(seconds=40))

    log_in(page, live_server.url, "operator")
    page.click("text=Scheduler status")
    page.wait_for_selector("#retrying")
    assert page.inner_text("[data-figure=retrying]") == "3"
    retrying = page.inner_text("#retrying")
    assert "HTTP 503 from the endpoint" in retrying and "Retry now" in retrying and "Cancel" in retrying
    gateway = page.locator("[data-figure=gateway]")
    assert gateway.get_attribute("data-level") == "amber" and gateway.inner_text().startswith(
        "late: last heartbeat "
    )
    assert "waiting (up to 100 pushes each)" in page.inner_text("[data-figure=push-depth]")
    assert page.locator("svg.chart circle.reached").count() == 54  # 59 minutes, 5 of them with none
    assert "pushes reaching phones" in page.locator("svg.chart .legend").text_content()
    shot(page, "admin-truth-status")
    page.locator("#retrying tr", has_text="HTTP 503").locator("button", has_text="Retry now").click()
    page.wait_for_selector(".messagelist")
    assert "2 retrying occurrence(s) due now." in page.inner_text(".messagelist")

    page.goto(f"{live_server.url}/admin/reminders/occurrence/?state=upcoming")
    assert "Sprint drills · U15 Paris · Pre-training questionnaire" in page.inner_text("#result_list")
    page.locator("#result_list tbody tr th a").first.click()
    page.wait_for_selector("#content-main")
    assert page.locator("input[name=_save]").count() == 0  # read-only: no Save
    shot(page, "admin-truth-occurrence")
    page.goto(f"{live_server.url}/admin/reminders/job/")
    page.locator("#result_list a", has_text="Sprint drills · U15 Paris · Pre-training questionnaire").click()
    page.click("fieldset.collapse summary, fieldset.collapse h2 a, details summary")
    assert '"training"' in page.inner_text("pre.json")
    shot(page, "admin-truth-job")


def test_an_operator_replays_a_dead_letter_and_runs_a_schedule_from_the_admin(
    page: Any, live_server: Any, world: dict[str, Any]
) -> None:
    player = world["team"].players.get(name="Chloe")
    dead = {
        "schema": DEAD_LETTER_SCHEMA, "attempts": 5, "dead_at": timezone.now().isoformat(),
        "error": "FCM 503 UNAVAILABLE",
        "push": {"schema": "trainings.push/2", "idempotency_key": "occ.dead.1", "player": player.pk,
                 "title": "Sprint drills", "body": "Please answer", "training": str(world["soon"].pk)},
    }  # fmt: skip
    name = dead_letter_queue_name()
    try:
        with Connection(settings.REMINDERS_CALLBACK_BROKER_URL) as broker:
            Producer(broker.default_channel).publish(
                json.dumps(dead), routing_key=name, declare=[Queue(name, routing_key=name, durable=True)],
                content_type="application/json",
            )  # fmt: skip
        log_in(page, live_server.url, "operator")
        page.click("text=Dead-lettered pushes")
        page.wait_for_selector("#dead-letters")
        row = page.locator("#dead-letters tr[data-key='occ.dead.1']")
        assert "Chloe" in row.inner_text() and "Sprint drills" in row.inner_text()
        assert "FCM 503 UNAVAILABLE" in row.inner_text()
        row.locator("summary").click()
        assert "trainings.push-dead/1" in row.locator("pre.json").inner_text()
        shot(page, "admin-truth-dead-letters")
        row.locator("input[type=checkbox]").check()
        page.click("text=Replay selected")
        page.wait_for_selector(".messagelist")
        assert "1 push(es) put back on the push queue" in page.inner_text(".messagelist")
        assert "None: no push is dead-lettered." in page.inner_text("#content-main")
    finally:
        delete_queue(name)

    schedule = schedule_create(key="nightly-report", expression="30 2 * * *", timezone="Europe/Paris")
    page.goto(f"{live_server.url}/admin/reminders/schedule/{schedule.pk}/change/")
    preview = page.locator("ol.schedule-preview li")
    assert preview.count() == 10 and "02:30:00 CE" in preview.first.inner_text()
    shot(page, "admin-truth-schedule")
    page.goto(f"{live_server.url}/admin/reminders/schedule/")
    page.locator("#result_list input[name=_selected_action]").first.check()
    page.select_option("select[name=action]", "run_now")
    page.click("button[name=index]")
    page.wait_for_selector(".messagelist")
    assert "1 schedule(s) run now (1 event(s) due)." in page.inner_text(".messagelist")
    page.goto(f"{live_server.url}/admin/reminders/schedule/add/")
    page.fill("#id_key", "weekly-digest")
    page.fill("#id_expression", "0 8 * * 1")
    page.select_option("#id_timezone", "Europe/Paris")
    page.fill("#id_target", "digests")
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist")
    assert "weekly-digest" in page.inner_text("#result_list")
