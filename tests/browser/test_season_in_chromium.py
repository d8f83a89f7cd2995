"""A coach's season in Chromium, as a coach (staff in the coaches' group, not a superuser): the training
page's Cancel tells the players who said they would come (one "training cancelled" push each, none to one
who declined), and the team page switches the coaches' digest on with no operator step, or warns when it
would reach nobody. Screenshots: var/artifacts/browser/season-cancelled.png, season-digest-on.png,
season-digest-nobody.png, season-coach-profile.png."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from reminders.models import Occurrence
from tests.browser.conftest import fits_without_sideways_scroll, log_in, shot
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, UserFactory, training_made
from tests.trainings.conftest import fire
from trainings.access import coach_group_ensure
from trainings.models import Coach, InvitationStatus, Push, ReminderRule, ReminderTemplate, Team
from trainings.planning import kinds
from trainings.planning.defaults import rules_seed
from trainings.planning.writes import invitation_respond
from trainings.reminding.notices import cancelled_notice_key
from trainings.selectors import job_key

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

NOBODY = "reach nobody: no coach of this team has a device or an email address"


def _coach(username: str, email: str = "") -> Any:
    user = UserFactory(
        username=username, email=email, is_staff=True, is_superuser=False, first_name="Camille"
    )
    user.groups.add(coach_group_ensure())
    return user


def _team(user: Any, name: str = "U15") -> Team:
    team = TeamFactory(name=name, coaches=[user])
    for player in ("Anna", "Ben", "Cleo"):
        MembershipFactory(team=team, player=PlayerFactory(name=f"{player} {name}"))
    return team


def test_a_coach_cancels_a_training_and_the_players_coming_are_told(
    live_server: Any, page: Any, settings: Any
) -> None:
    rules_seed(ReminderRule, ReminderTemplate)
    settings.TRAININGS_PUSH_QUEUE = "season-cancelled"
    user = _coach("coach-c")
    team = _team(user)
    training = training_made(team, timezone.now() + dt.timedelta(days=2), title="Speed session")
    invitation_respond(
        invitation=training.invitations.get(player__name="Anna U15"), status=InvitationStatus.ACCEPTED
    )
    invitation_respond(
        invitation=training.invitations.get(player__name="Ben U15"), status=InvitationStatus.DENIED
    )

    log_in(page, live_server.url, "coach-c")
    page.goto(f"{live_server.url}/admin/trainings/training/{training.pk}/change/")
    asked: list[str] = []
    page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.click("button:text-is('Cancel training')")
    page.wait_for_selector(".messagelist")
    assert "the players who said they would come or were reminded are told" in asked[0]
    message = page.inner_text(".messagelist")
    assert "the players who said they would come or were reminded are told" in message
    assert "Cancelled" in page.inner_text("#content")
    assert fits_without_sideways_scroll(page)
    shot(page, "season-cancelled")

    fire(Occurrence.objects.get(job__key=cancelled_notice_key(training_id=training.pk)))
    told = Push.objects.filter(training=training, kind=kinds.CANCELLED.code)
    assert list(told.values_list("player__name", "title")) == [
        ("Anna U15", "Training cancelled: Speed session")
    ]


def test_a_coach_switches_the_digest_on_alone_or_is_told_it_reaches_nobody(
    live_server: Any, page: Any
) -> None:
    rules_seed(ReminderRule, ReminderTemplate)
    user = _coach("coach-d", email="camille@example.com")
    team = _team(user)
    start = (timezone.now() + dt.timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
    training = training_made(team, start, title="Speed session")
    assert not Coach.objects.exists()

    log_in(page, live_server.url, "coach-d")
    page.goto(f"{live_server.url}/admin/trainings/team/{team.pk}/change/")
    page.fill("#id_digest_before", "2h")
    page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist")
    assert "was changed successfully" in page.inner_text(".messagelist")
    assert NOBODY not in page.inner_text("body")
    shot(page, "season-digest-on")
    digest = Occurrence.objects.get(
        job__key=job_key(training_id=training.pk, rule=ReminderRule.objects.get(slug="coach-digest")),
        status="scheduled",
    )
    assert digest.fire_at == start - dt.timedelta(hours=2)

    page.goto(f"{live_server.url}/admin/trainings/coach/")
    assert page.locator("#result_list tbody tr").count() == 1  # their own profile, made for them
    page.click("#result_list tbody tr a")
    page.wait_for_selector("#id_email")
    assert page.input_value("#id_email") == "camille@example.com"  # the account's email, made its address
    shot(page, "season-coach-profile")

    other = _coach("coach-e")  # no email, no device
    u17 = _team(other, "U17")
    page.context.clear_cookies()
    log_in(page, live_server.url, "coach-e")
    page.goto(f"{live_server.url}/admin/trainings/team/{u17.pk}/change/")
    page.fill("#id_digest_before", "2h")
    page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist .warning")
    assert NOBODY in page.inner_text(".messagelist .warning")
    assert fits_without_sideways_scroll(page)
    shot(page, "season-digest-nobody")

    page.goto(f"{live_server.url}/admin/trainings/coach/")  # the way out the warning names
    page.click("#result_list tbody tr a")
    page.wait_for_selector("#id_email")
    page.fill("#id_email", "eli@example.com")
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist")
    page.goto(f"{live_server.url}/admin/trainings/team/{u17.pk}/change/")
    assert NOBODY not in page.inner_text("body")
    assert Coach.objects.get(user=other).devices.get().token == "eli@example.com"
