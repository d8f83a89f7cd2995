"""A coach switches the digest on alone: a coach (not an operator) who has no coach profile sets "Digest
before 2h" on their team's page, and the digest reaches them at their account's email (the loopback SMTP
server) with no operator step: the digest's recipients are the team's coaches, each one's profile made
on demand. The team page warns when a setting reaches nobody (no coach has a device or an email; no
player has one)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from delivery.channels.providers import providers_from_settings
from delivery.gateway.consumer import Outcome, PushSender
from delivery.models import Device
from reminders.models import Occurrence
from tests.clients import logged_in
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, UserFactory, training_made
from tests.trainings.conftest import fire
from tests.trainings.push_fixtures import left_on
from tests.trainings.smtp_peer import Inbox
from trainings.access import coach_group_ensure
from trainings.models import Coach, CoachPush, ReminderRule, ReminderRun, RunOutcome, Team
from trainings.selectors import job_key

pytestmark = pytest.mark.django_db

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris
NOBODY = "reach nobody: no coach of this team has a device or an email address"


def _coach_user(username: str, email: str = "") -> Any:
    user = UserFactory(username=username, email=email, is_staff=True, is_superuser=False)
    user.groups.add(coach_group_ensure())
    return user


@pytest.fixture
def u15() -> Team:
    team = TeamFactory(name="U15", time_zone="Europe/Paris")
    for name in ("Anna", "Ben"):
        MembershipFactory(team=team, player=PlayerFactory(name=name))
    return team


def _form(team: Team, **changes: str) -> dict[str, str]:
    """The team page's form as the browser posts it, with `changes`."""
    data = {
        "name": team.name, "time_zone": team.time_zone, "quiet_start": "", "quiet_end": "",
        "reminds": team.reminds, "digest_before": "", "digest_morning_at": "", "decline_alert_within": "",
        "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0", "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000", "_continue": "Save",
    }  # fmt: skip
    return {**data, **changes}


def _digest(training: Any) -> Occurrence:
    rule = ReminderRule.objects.get(slug="coach-digest")
    return Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=rule))


def _save(client: Any, team: Team, **changes: str) -> str:
    response = client.post(f"/admin/trainings/team/{team.pk}/change/", _form(team, **changes), follow=True)
    assert response.status_code == 200
    page = response.content.decode()
    assert "errorlist" not in page, page.split("errorlist")[1][:400]
    return page


def test_a_coach_switches_the_digest_on_and_it_reaches_their_email(
    u15: Team, file_broker: str, smtp: Inbox, settings: Any
) -> None:
    user = _coach_user("camille", email="camille@example.com")
    u15.coaches.add(user)
    assert not Coach.objects.exists()  # nobody made a profile for them
    training = training_made(u15, START, title="Speed session")

    page = _save(logged_in(user), u15, digest_before="2h")

    assert NOBODY not in page  # their account's email is their digest's address
    coach = Coach.objects.get(user=user)
    assert (coach.time_zone, coach.language) == ("Europe/Paris", "en")  # the team's zone
    assert list(coach.devices.values_list("provider", "token")) == [("email", "camille@example.com")]
    coaches_list = logged_in(user).get("/admin/trainings/coach/").content.decode()
    assert "1 coach" in coaches_list and "camille" in coaches_list

    digest = _digest(training)
    assert digest.fire_at == START - dt.timedelta(hours=2)
    fire(digest)
    run = ReminderRun.objects.get(occurrence_key=digest.idempotency_key)
    assert (run.outcome, run.recipients) == (RunOutcome.SENT, 1)
    sender = PushSender(providers_from_settings())
    try:
        handled = sender.handle(left_on(file_broker, settings.TRAININGS_PUSH_QUEUE))
    finally:
        sender.close()
    assert {h.outcome for h in handled} == {Outcome.DELIVERED}
    (mail,) = smtp.messages
    assert (mail["To"], mail["Subject"]) == ("camille@example.com", "U15: who still owes what")
    plain = mail.get_body(preferencelist=("plain",))
    assert plain is not None and "still owe" in str(plain.get_content())


def test_the_digest_finds_a_coach_without_a_profile_when_it_fires(u15: Team, file_broker: str) -> None:
    """No page visited at all: the digest's recipients are the team's coaches, the profile made then."""
    user = _coach_user("sam", email="sam@example.com")
    u15.coaches.add(user)
    Team.objects.filter(pk=u15.pk).update(digest_before="2h")
    training = training_made(Team.objects.get(pk=u15.pk), START)
    digest = _digest(training)
    fire(digest)
    run = ReminderRun.objects.get(occurrence_key=digest.idempotency_key)
    assert (run.outcome, run.recipients) == (RunOutcome.SENT, 1)
    assert CoachPush.objects.get().coach.user == user


def test_the_team_page_warns_when_the_digest_reaches_nobody(u15: Team) -> None:
    user = _coach_user("dana")  # no email on the account, no device
    u15.coaches.add(user)
    client = logged_in(user)

    assert NOBODY not in client.get(f"/admin/trainings/team/{u15.pk}/change/").content.decode()  # nothing on
    page = _save(client, u15, digest_before="2h")
    assert NOBODY in page and "digest before" in page

    coach = Coach.objects.get(user=user)  # made by the save: the coach can now add an address to it
    Device.objects.create(coach=coach, provider="email", platform="email", token="dana@example.com")
    assert NOBODY not in client.get(f"/admin/trainings/team/{u15.pk}/change/").content.decode()


def test_the_team_page_warns_when_no_player_can_be_reached(u15: Team) -> None:
    user = _coach_user("eli", email="eli@example.com")
    u15.coaches.add(user)
    client = logged_in(user)
    warning = "Reminders reach no player"
    assert warning not in client.get(f"/admin/trainings/team/{u15.pk}/change/").content.decode()
    Device.objects.filter(player__memberships__team=u15).delete()
    assert warning in client.get(f"/admin/trainings/team/{u15.pk}/change/").content.decode()
