"""The admin tells the truth: engine records are read-only and named in words, a training added in the
admin is invited and zoned like one from the API, answers are owed only while their window is open, and
answers, zones, languages and dates read as people read them."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from delivery.models import Device, PushSend, SendStatus
from reminders.models import Occurrence, OccurrenceStatus
from tests.factories import OccurrenceFactory, UserFactory, training_made
from trainings.access import coach_group_ensure
from trainings.models import Push, QuestionnaireAnswer, ReminderRun, Team, Training
from trainings.planning import kinds
from trainings.planning.writes import training_cancel
from trainings.reminding.remind_now import training_remind_now


@pytest.fixture
def coach(db: None) -> Any:
    user = UserFactory(username="coach-t", is_staff=True)
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
    client.force_login(UserFactory(username="op-t", is_staff=True, is_superuser=True))
    return client


def _inline(prefix: str) -> dict[str, Any]:
    return {f"{prefix}-TOTAL_FORMS": 0, f"{prefix}-INITIAL_FORMS": 0}


def test_it_refuses_a_post_to_an_occurrence_push_send_or_run_page(
    operator_client: Client, team: Team, rules: dict[str, Any], push_queue: str
) -> None:
    delivered = OccurrenceFactory(status=OccurrenceStatus.DELIVERED, delivered_at=timezone.now())
    page = operator_client.get(f"/admin/reminders/occurrence/{delivered.pk}/change/").content.decode()
    assert 'name="_save"' not in page
    shown = delivered.delivered_at.astimezone(dt.UTC)
    assert f"{shown:%a %Y-%m-%d %H:%M:%S} UTC" in page  # one date format, with its zone
    assert " p.m." not in page and " a.m." not in page
    refused = operator_client.post(f"/admin/reminders/occurrence/{delivered.pk}/change/", {"job": 1})
    assert refused.status_code == 403
    assert Occurrence.objects.get(pk=delivered.pk).status == OccurrenceStatus.DELIVERED
    assert operator_client.post(f"/admin/reminders/job/{delivered.job_id}/change/", {}).status_code == 403
    training = training_made(team, timezone.now() + dt.timedelta(days=2))
    training_remind_now(training=training, rule=rules["invitation"], click="c1")
    push = Push.objects.filter(training=training).first()
    assert push is not None
    send = PushSend.objects.create(push_key=push.key, player_id=push.player_id, provider="fcm",
                                   status=SendStatus.NO_DEVICE, recorded_at=timezone.now())  # fmt: skip
    pre = rules["pre-questionnaire"]
    now = timezone.now()
    run = ReminderRun.objects.create(
        occurrence_key="k-1", training=training, rule=pre, fire_at=now, outcome="sent", ran_at=now
    )
    for path in (
        f"trainings/push/{push.pk}",
        f"delivery/pushsend/{send.pk}",
        f"trainings/reminderrun/{run.pk}",
    ):
        assert operator_client.get(f"/admin/{path}/change/").status_code == 200
        assert operator_client.post(f"/admin/{path}/change/", {}).status_code == 403, path
    assert operator_client.get("/admin/trainings/push/add/").status_code == 403


def test_jobs_occurrences_pushes_and_sends_read_names_not_keys(
    operator_client: Client, team: Team, rules: dict[str, Any], push_queue: str
) -> None:
    training = training_made(team, timezone.now() + dt.timedelta(days=2), title="Sprint drills")
    jobs = operator_client.get("/admin/reminders/job/").content.decode()
    assert "Sprint drills · U15 · Pre-training questionnaire" in jobs
    occurrences = operator_client.get("/admin/reminders/occurrence/?state=upcoming").content.decode()
    assert "Sprint drills · U15 · Invitation" in occurrences
    job = training.reminder_jobs.first().job
    detail = operator_client.get(f"/admin/reminders/job/{job.pk}/change/").content.decode()
    assert '<pre class="json">' in detail and "collapse" in detail  # the payload: formatted, secondary

    training_remind_now(training=training, rule=rules["invitation"], click="c2")
    push = Push.objects.get(training=training, player__name="Bruno")
    device = Device.objects.create(player=push.player, platform="ios", provider="apns", token="a" * 64)
    PushSend.objects.create(push_key=push.key, device=device, player_id=push.player_id, provider="apns",
                            status=SendStatus.ACCEPTED, recorded_at=timezone.now())  # fmt: skip
    page = operator_client.get(f"/admin/trainings/push/{push.pk}/change/").content.decode()
    assert "Invitation to Bruno for Sprint drills" in page  # the title, in words
    assert "reached (1 device accepted)" in page
    assert "iOS via APNS" in page and "Accepted by the provider" in page  # the device sends
    listing = operator_client.get("/admin/delivery/pushsend/").content.decode()
    assert "Bruno" in listing and "Sprint drills" in listing
    pushes = operator_client.get("/admin/trainings/push/").content.decode()
    assert "reached (1 device accepted)" in pushes and "queued for" in pushes


def test_a_training_added_in_the_admin_gets_the_teams_zone_and_active_players(
    browser: Client, team: Team
) -> None:
    team.time_zone = "Europe/Paris"
    team.save()
    form = {
        "team": team.pk, "title": "Added by hand", "start_0": "2030-06-11", "start_1": "18:00:00",
        "end_0": "2030-06-11", "end_1": "19:30:00", "time_zone": "", "location": "",
        **_inline("invitations"), **_inline("answers"),
    }  # fmt: skip
    page = browser.get("/admin/trainings/training/add/").content.decode()
    assert '<select name="time_zone"' in page and "The team&#x27;s zone" in page
    response = browser.post("/admin/trainings/training/add/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    training = Training.objects.get(title="Added by hand")
    assert training.time_zone == "Europe/Paris"
    assert training.start == dt.datetime(2030, 6, 11, 16, 0, tzinfo=dt.UTC)  # 18:00 in Paris
    invited = sorted(training.invitations.values_list("player__name", flat=True))
    assert invited == ["Alice", "Bruno", "Chloe"]  # the active members, not "Gone"


def test_a_training_with_nobody_invited_warns_its_coach(browser: Client, team: Team) -> None:
    training = training_made(team, timezone.now() + dt.timedelta(days=2), players=[])
    page = browser.get(f"/admin/trainings/training/{training.pk}/change/").content.decode()
    assert "Nobody is invited: its reminders reach no one." in page


def test_answers_are_owed_only_while_the_questionnaire_is_open(browser: Client, team: Team) -> None:
    later = training_made(team, timezone.now() + dt.timedelta(days=2), title="Later")
    listing = browser.get("/admin/trainings/training/").content.decode()
    row = listing.split("Later", 1)[1].split("</tr>", 1)[0]
    assert "not yet open" in row and "owed" not in row and "Upcoming" in row
    grid = browser.get(f"/admin/trainings/training/{later.pk}/change/").content.decode()
    grid = grid.split('class="player-grid"', 1)[1].split("</table>", 1)[0]
    assert "not yet open" in grid and "owed" not in grid

    past = training_made(team, timezone.now() - dt.timedelta(days=2), title="Past")
    QuestionnaireAnswer.objects.create(  # stored before questionnaires had questions: still shown
        training=past,
        player=past.invitations.first().player,
        phase=kinds.PRE.code,
        answered_at=timezone.now(),
        answers={"sleep_hours": 8, "sore": False, "mood": "good"},
    )
    page = browser.get(f"/admin/trainings/training/{past.pk}/change/").content.decode()
    grid = page.split('class="player-grid"', 1)[1].split("</table>", 1)[0]
    assert "missed" in grid and "owed" not in grid
    assert "<dt>Sleep hours</dt><dd>8</dd>" in page and "<dt>Sore</dt><dd>no</dd>" in page
    assert "{&quot;sleep_hours&quot;" not in page and "<textarea" not in page.split("answers-group", 1)[1]

    training_cancel(training=later)
    grid = browser.get(f"/admin/trainings/training/{later.pk}/change/").content.decode()
    grid = grid.split('class="player-grid"', 1)[1].split("</table>", 1)[0]
    assert "grid-owed" not in grid and "grid-missed" not in grid
    listing = browser.get("/admin/trainings/training/").content.decode()
    assert "Cancelled" in listing.split("Later", 1)[1].split("</tr>", 1)[0]


def test_zones_and_languages_are_chosen_from_lists_and_a_coach_reads_their_teams_zone(
    browser: Client, team: Team
) -> None:
    team.time_zone = "America/New_York"
    team.save()
    player = team.players.get(name="Alice")
    page = browser.get(f"/admin/trainings/player/{player.pk}/change/").content.decode()
    assert '<select name="time_zone"' in page and 'value="Asia/Tokyo"' in page
    assert '<select name="language"' in page and "Français (fr)" in page  # by its own name
    page = browser.get("/admin/").content.decode()
    assert "Times in America/New_York" in page  # no preference of their own: the team's zone
    detail = browser.get(f"/admin/trainings/team/{team.pk}/change/").content.decode()
    assert '<select name="time_zone"' in detail


def test_a_send_whose_device_was_deleted_in_flight_reads_as_no_device(
    operator_client: Client, team: Team, rules: dict[str, Any], push_queue: str
) -> None:
    """A send row keeps the id of a device deleted while its push was in flight (no database constraint):
    the push's page, the sends' list and the send's page say "no device" instead of failing."""
    training = training_made(team, timezone.now() + dt.timedelta(days=2), title="Hill runs")
    training_remind_now(training=training, rule=rules["invitation"], click="c3")
    push = Push.objects.get(training=training, player__name="Bruno")
    gone = Device.objects.create(player=push.player, platform="ios", provider="apns", token="d" * 64)
    gone_id = gone.pk
    gone.delete()
    send = PushSend.objects.create(push_key=push.key, device_id=gone_id, player_id=push.player_id,
                                   provider="apns", status=SendStatus.ACCEPTED,
                                   recorded_at=timezone.now())  # fmt: skip
    for path in (
        f"/admin/trainings/push/{push.pk}/change/",
        "/admin/delivery/pushsend/",
        f"/admin/delivery/pushsend/{send.pk}/change/",
    ):
        page = operator_client.get(path)
        assert page.status_code == 200, path
        assert "apns (no device)" in page.content.decode(), path
