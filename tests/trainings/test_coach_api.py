"""A coach's own digest settings in the API: read and change their profile (a 400 names the field and
changes nothing), register their devices; anyone who coaches no team gets a 404. A coaches' rule
reminds no player."""

from __future__ import annotations

from typing import Any

import pytest

from tests.clients import api_as
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, UserFactory, training_made
from trainings.models import Coach, ReminderRule
from trainings.reminding.recipients import reminder_recipients
from trainings.reminding.remind_now import training_remind_now

pytestmark = pytest.mark.django_db


@pytest.fixture
def coach_user() -> Any:
    user = UserFactory(username="camille")
    TeamFactory(name="U15", time_zone="Europe/Paris", coaches=[user], digest_before="2h")
    return user


def test_a_coach_reads_their_profile_with_their_teams_digest_times(coach_user: Any) -> None:
    response = api_as(coach_user).get("/api/coach/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["language"], body["time_zone"], body["channels"]) == ("en", "Europe/Paris", "default")
    assert [(t["name"], t["digest_before"]) for t in body["teams"]] == [("U15", "2h")]
    assert not Coach.objects.exists()  # reading makes no profile


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"time_zone": "Mars/Olympus"}, "time_zone"),
        ({"language": "klingon"}, "language"),
        ({"channels": "pigeon"}, "channels"),
        ({"quiet_start": "22:00"}, "quiet_end"),
        ({"quiet_start": "22:00", "quiet_end": "7 o'clock"}, "quiet_end"),
    ],
)
def test_a_bad_change_is_a_400_naming_the_field_and_changes_nothing(
    coach_user: Any, change: dict[str, str], field: str
) -> None:
    response = api_as(coach_user).patch("/api/coach/", {"language": "fr", **change}, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert not Coach.objects.exists()


def test_a_coach_sets_their_language_zone_channels_and_quiet_hours(coach_user: Any) -> None:
    change = {"language": "fr", "time_zone": "Europe/London", "channels": "email",
              "quiet_start": "22:00", "quiet_end": "07:00"}  # fmt: skip
    response = api_as(coach_user).patch("/api/coach/", change, format="json")
    assert response.status_code == 200, response.content
    coach = Coach.objects.get(user=coach_user)
    assert (coach.language, coach.time_zone, coach.channels) == ("fr", "Europe/London", "email")
    assert (str(coach.quiet_start), str(coach.quiet_end)) == ("22:00:00", "07:00:00")


def test_a_coach_registers_an_email_address_and_removes_it(coach_user: Any) -> None:
    client = api_as(coach_user)
    bad = client.post("/api/coach/devices/", {"provider": "email", "platform": "email", "token": "nope"})
    assert bad.status_code == 400 and "token" in bad.json()
    made = client.post("/api/coach/devices/", {"provider": "email", "platform": "email",
                                               "token": "camille.club@example.com"})  # fmt: skip
    assert made.status_code == 201, made.content
    assert made.json()["coach"] == Coach.objects.get(user=coach_user).pk
    # The profile, made on demand, took the account's email as its first address.
    assert [d["token"] for d in client.get("/api/coach/devices/").json()] == [
        "camille@example.com", "camille.club@example.com"
    ]  # fmt: skip
    assert client.delete(f"/api/coach/devices/{made.json()['id']}/").status_code == 204


def test_someone_who_coaches_no_team_has_no_coach_profile() -> None:
    client = api_as(UserFactory(username="player-login"))
    assert client.get("/api/coach/").status_code == 404
    assert client.patch("/api/coach/", {"time_zone": "Mars/Olympus"}, format="json").status_code == 404
    assert client.get("/api/coach/devices/").status_code == 404


def test_remind_now_reminds_no_player_of_a_coaches_rule(coach_user: Any) -> None:
    import datetime as dt

    from django.utils import timezone

    team = coach_user.coached_teams.get()
    MembershipFactory(team=team, player=PlayerFactory(name="Anna"))
    training = training_made(team, timezone.now() + dt.timedelta(days=1))
    pre = ReminderRule.objects.get(slug="pre-questionnaire")
    assert reminder_recipients(training=training, rule=pre).count() == 1
    digest = ReminderRule.objects.get(slug="coach-digest")
    assert training_remind_now(training=training, rule=digest, click="c1").recipients == 0
