"""The coach's admin: local times (across DST), list counts without N+1, player grid, timeline by name,
remind-now once per click, cancel, copy to next week."""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from delivery.models import Device, PushSend, SendStatus
from reminders.models import Occurrence, OccurrenceStatus, UserPreference
from tests.factories import WELLNESS, UserFactory, training_made
from trainings.access import coach_group_ensure
from trainings.models import InvitationStatus, Player, Push, PushStatus, Team, Training
from trainings.planning import kinds
from trainings.planning.writes import answer_record, invitation_respond

PARIS = ZoneInfo("Europe/Paris")


@pytest.fixture
def coach(db: None) -> Any:
    user = UserFactory(username="coach-a", is_staff=True)
    user.groups.add(coach_group_ensure())
    return user


@pytest.fixture
def browser(coach: Any) -> Client:
    client = Client()
    client.force_login(coach)
    return client


def _training(team: Team, start: dt.datetime, title: str = "Session") -> Training:
    return training_made(team, start, title=title)


def _form(team: Team, day: str, start: str, end: str) -> dict[str, Any]:
    return {
        "team": team.pk,
        "title": "Typed in Paris",
        "start_0": day,
        "start_1": start,
        "end_0": day,
        "end_1": end,
        "time_zone": "Europe/Paris",
        "location": "",
        **{
            f"{p}-{k}": v
            for p in ("invitations", "answers")
            for k, v in (("TOTAL_FORMS", 0), ("INITIAL_FORMS", 0))
        },
    }


@pytest.mark.parametrize(
    ("day", "utc_hour"),
    [("2030-10-26", 15), ("2030-10-27", 16)],  # Paris leaves summer time on 27 October 2030
)
def test_it_reads_typed_times_in_the_trainings_zone_on_both_sides_of_a_dst_change(
    browser: Client, team: Team, coach: Any, day: str, utc_hour: int
) -> None:
    UserPreference.objects.create(user=coach, time_zone="America/New_York")  # the person's zone is irrelevant
    response = browser.post("/admin/trainings/training/add/", _form(team, day, "17:25:00", "18:55:00"))
    assert response.status_code == 302, response.content.decode()[:2000]
    training = Training.objects.get(title="Typed in Paris")
    assert training.start == dt.datetime.fromisoformat(f"{day}T{utc_hour}:25:00+00:00")
    page = browser.get(f"/admin/trainings/training/{training.pk}/change/").content.decode()
    assert 'value="17:25:00"' in page  # shown back as typed, in the training's zone
    assert "Europe/Paris" in page
    listing = browser.get("/admin/trainings/training/").content.decode()
    abbreviation = "CEST" if day == "2030-10-26" else "CET"
    assert f"17:25:00 {abbreviation}" in listing


def test_the_list_shows_local_start_next_reminder_rsvp_and_answer_counts_in_a_fixed_number_of_queries(
    browser: Client, team: Team
) -> None:
    start = timezone.now() + dt.timedelta(days=2)
    first = _training(team, start, "First")
    alice, bruno, chloe = (Player.objects.get(name=n) for n in ("Alice", "Bruno", "Chloe"))
    invitation_respond(invitation=first.invitations.get(player=alice), status=InvitationStatus.ACCEPTED)
    invitation_respond(invitation=first.invitations.get(player=bruno), status=InvitationStatus.DENIED)
    answer_record(training=first, player=alice, phase=kinds.PRE.code, answers=WELLNESS)
    with CaptureQueriesContext(connection) as one:
        page = browser.get("/admin/trainings/training/").content.decode()
    for n in range(4):
        _training(team, start + dt.timedelta(days=n + 1), f"More {n}")
    with CaptureQueriesContext(connection) as five:
        browser.get("/admin/trainings/training/")
    assert len(five.captured_queries) == len(one.captured_queries)  # no query per row
    assert "1 ✓" in page and "1 ✗" in page and "1 pending" in page
    # Two days ahead neither questionnaire is open yet: nobody owes an answer (Alice answered early).
    assert "not yet open" in page and "owed</span>" not in page
    next_fire = Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED).order_by("fire_at").first()
    assert next_fire is not None
    local = next_fire.fire_at.astimezone(PARIS)
    assert f"{local:%a %Y-%m-%d}<br>{local:%H:%M:%S} {local.tzname()}" in page
    assert chloe.name not in page  # names belong to the training page, the list has counts


def test_the_training_page_names_players_in_the_grid_and_the_timeline(
    browser: Client, team: Team, push_queue: str
) -> None:
    training = _training(team, timezone.now() + dt.timedelta(days=2))
    alice = Player.objects.get(name="Alice")
    answer_record(training=training, player=alice, phase=kinds.PRE.code, answers=WELLNESS)
    page = browser.get(f"/admin/trainings/training/{training.pk}/change/").content.decode()
    assert str(training.pk) not in page.split("Player grid", 1)[1].split("</table>", 1)[0]
    for name in ("Alice", "Bruno", "Chloe"):
        assert name in page
    assert "owed" in page and "✓" in page
    assert "<h3>Invitation</h3>" in page and "<h3>Pre-training questionnaire</h3>" in page  # by rule
    assert f"-&gt; {training.pk}" not in page  # no "Alice -> <uuid>" labels


def test_remind_now_queues_once_per_player_a_minute_and_the_grid_tells_what_reached_a_phone(
    browser: Client, team: Team, push_queue: str, rules: dict[str, Any]
) -> None:
    training = _training(team, timezone.now() + dt.timedelta(days=2))
    invitation_respond(
        invitation=training.invitations.get(player__name="Alice"), status=InvitationStatus.ACCEPTED
    )
    url = f"/admin/trainings/training/{training.pk}/remind/"
    form = {"rule": rules["invitation"].pk, "click": "a1b2c3"}
    response = browser.post(url, form, follow=True).content.decode()
    assert "Invitation: queued for 2 player(s) (Bruno, Chloe)" in response
    assert "push(es) sent" not in response  # queued is not sent
    browser.post(url, form)  # the same click again (a double submit): nothing new
    pushes = Push.objects.filter(training=training)
    assert sorted(pushes.values_list("player__name", flat=True)) == ["Bruno", "Chloe"]
    assert set(pushes.values_list("status", flat=True)) == {PushStatus.SENT}
    # A second click within the minute (another tab, a colleague) reminds nobody twice.
    again = browser.post(url, {**form, "click": "d4e5f6"}, follow=True).content.decode()
    assert Push.objects.filter(training=training).count() == 2
    assert "2 player(s) reminded of it less than a minute ago were left out" in again

    # No gateway has answered: the grid says queued, not "published" or "sent".
    grid = browser.get(f"/admin/trainings/training/{training.pk}/change/").content.decode()
    grid = grid.split('class="player-grid"', 1)[1].split("</table>", 1)[0]
    assert "queued for" in grid and "Published to the push queue" not in grid
    # The gateway records Bruno's phone accepting and Chloe having no device.
    bruno, chloe = (pushes.get(player__name=name) for name in ("Bruno", "Chloe"))
    device = Device.objects.create(player=bruno.player, platform="android", provider="fcm", token="tok-b")
    now = timezone.now()
    PushSend.objects.create(push_key=bruno.key, device=device, player_id=bruno.player_id, provider="fcm",
                            status=SendStatus.ACCEPTED, recorded_at=now)  # fmt: skip
    PushSend.objects.create(push_key=chloe.key, player_id=chloe.player_id, provider="fcm",
                            status=SendStatus.NO_DEVICE, recorded_at=now)  # fmt: skip
    grid = browser.get(f"/admin/trainings/training/{training.pk}/change/").content.decode()
    rows = grid.split('class="player-grid"', 1)[1].split("</table>", 1)[0].split("<tr>")
    bruno_row = next(r for r in rows if "Bruno" in r)
    chloe_row = next(r for r in rows if "Chloe" in r)
    assert "reached (1 device accepted)" in bruno_row and "<td>1</td>" in bruno_row
    assert "no device" in chloe_row and "<td>0</td>" in chloe_row


def test_remind_now_offers_the_open_phase_first_with_plain_labels(
    browser: Client, team: Team, rules: dict[str, Any]
) -> None:
    soon = _training(team, timezone.now() + dt.timedelta(minutes=40))  # the pre questionnaire is open
    page = browser.get(f"/admin/trainings/training/{soon.pk}/change/").content.decode()
    options = page.split('aria-label="reminder"', 1)[1].split("</select>", 1)[0]
    first = options.split("<option", 2)[1]
    assert "selected" in first and "Pre-training questionnaire (3 pending, open now)" in first
    assert "(invitation)" not in options and "pre-questionnaire" not in options
    done = _training(team, timezone.now() - dt.timedelta(hours=3))  # ended 1.5 h ago: post is open
    page = browser.get(f"/admin/trainings/training/{done.pk}/change/").content.decode()
    first = page.split('aria-label="reminder"', 1)[1].split("<option", 2)[1]
    assert "selected" in first and "Post-training questionnaire" in first


def test_cancel_and_copy_to_next_week_keep_the_local_time_across_dst(browser: Client, team: Team) -> None:
    start = dt.datetime(2030, 10, 22, 17, 25, tzinfo=PARIS)  # the next week's is after the DST change
    training = _training(team, start)
    response = browser.post(f"/admin/trainings/training/{training.pk}/copy/")
    assert response.status_code == 302
    copy = Training.objects.exclude(pk=training.pk).get()
    assert copy.start.astimezone(PARIS) == dt.datetime(2030, 10, 29, 17, 25, tzinfo=PARIS)
    assert copy.start - training.start == dt.timedelta(days=7, hours=1)
    assert copy.invitations.count() == training.invitations.count()
    browser.post(f"/admin/trainings/training/{training.pk}/cancel/")
    training.refresh_from_db()
    assert training.cancelled
    assert not Occurrence.objects.filter(
        job__training_job__training=training, status=OccurrenceStatus.SCHEDULED
    ).exists()
    assert browser.get(f"/admin/trainings/training/{training.pk}/copy/").status_code == 403  # POST only
