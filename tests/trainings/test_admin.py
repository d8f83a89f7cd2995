"""Admin: a coach sees and changes only their own teams; saves reschedule; rule edits reschedule."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.test import Client

from reminders.models import Occurrence, OccurrenceStatus
from tests.clients import logged_in
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, UserFactory, training_made
from trainings.access import coach_group_ensure
from trainings.models import Player, ReminderRule, Team, Training

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)


def _staff_coach(username: str) -> Any:
    user = UserFactory(username=username, is_staff=True)
    user.groups.add(coach_group_ensure())
    return user


@pytest.fixture
def coach(db: None) -> Any:  # overrides the conftest coach: a staff user in the Coaches group
    return _staff_coach("coach-a")


@pytest.fixture
def admin_a(coach: Any) -> Client:
    return logged_in(coach)


@pytest.fixture
def team_b(db: None) -> Team:
    team = TeamFactory(name="Seniors B", coaches=[_staff_coach("coach-b")])
    MembershipFactory(team=team, player=PlayerFactory(name="Zoe"))
    return team


def _training(team: Team, title: str) -> Training:
    return training_made(team, START, minutes=60, title=title)


def _pending(training: Training) -> list[dt.datetime]:
    return list(
        Occurrence.objects.filter(
            job__key=f"training-{training.pk}-pre-questionnaire", status=OccurrenceStatus.SCHEDULED
        )
        .order_by("fire_at")
        .values_list("fire_at", flat=True)
    )


def test_a_coach_lists_only_their_teams_trainings(admin_a, team, team_b) -> None:
    _training(team, "A session")
    _training(team_b, "B session")
    page = admin_a.get("/admin/trainings/training/")
    assert page.status_code == 200
    assert b"A session" in page.content and b"B session" not in page.content


def test_a_coach_cannot_open_or_change_another_teams_training(admin_a, team, team_b) -> None:
    theirs = _training(team_b, "B session")
    url = f"/admin/trainings/training/{theirs.pk}/change/"
    response = admin_a.get(url)
    assert response.status_code == 302 and response["Location"] == "/admin/"
    response = admin_a.post(url, {"title": "hijacked"})
    assert response.status_code == 302
    assert admin_a.post(f"/admin/trainings/training/{theirs.pk}/delete/", {"post": "yes"}).status_code == 302
    theirs.refresh_from_db()
    assert theirs.title == "B session" and len(_pending(theirs)) == 6


def _player_search(client: Any, model_name: str, term: str = "") -> list[str]:
    """What a row's player search box offers (Django's admin autocomplete view)."""
    query = {"app_label": "trainings", "model_name": model_name, "field_name": "player", "term": term}
    response = client.get("/admin/autocomplete/", query)
    assert response.status_code == 200, response.content[:300]
    return [row["text"] for row in response.json()["results"]]


def test_a_coach_is_offered_only_their_teams_and_players(admin_a, team, team_b) -> None:
    page = admin_a.get("/admin/trainings/training/add/").content.decode()
    assert "U15" in page and "Seniors B" not in page
    assert "Zoe" not in page
    for rows in ("invitation", "membership", "guardianship"):  # a training's, a team's, a guardian's rows
        assert "Alice" in _player_search(admin_a, rows) and "Zoe" not in _player_search(admin_a, rows)
        assert _player_search(admin_a, rows, "Zo") == []
    assert admin_a.get("/admin/trainings/team/").content.count(b"Seniors B") == 0
    assert admin_a.get("/admin/trainings/player/").content.count(b"Zoe") == 0


def _player_form(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "user": "",
        "time_zone": "Europe/Paris",
        "language": "fr",
    } | extra


def test_a_player_a_coach_adds_joins_their_team_and_stays_in_their_reach(admin_a, team, team_b) -> None:
    response = admin_a.post("/admin/trainings/player/add/", _player_form("Dora", team=team.pk))
    assert response.status_code == 302, response.content.decode()[:3000]
    dora = Player.objects.get(name="Dora")
    assert list(dora.memberships.values_list("team__name", "active")) == [("U15", True)]
    assert b">Dora</a>" in admin_a.get("/admin/trainings/player/").content  # in the change list
    change_page = admin_a.get(f"/admin/trainings/player/{dora.pk}/change/")
    assert change_page.status_code == 200

    page = admin_a.get("/admin/trainings/player/add/").content.decode()
    assert "U15" in page and "Seniors B" not in page
    for refused in (_player_form("Eve", team=team_b.pk), _player_form("Eve")):  # not their team; no team
        response = admin_a.post("/admin/trainings/player/add/", refused)
        assert response.status_code == 200 and "errorlist" in response.content.decode()
    assert not Player.objects.filter(name="Eve").exists()


def test_an_operator_may_add_a_player_to_no_team_yet(db: None) -> None:
    client = logged_in(UserFactory(username="root", is_staff=True, is_superuser=True))
    response = client.post("/admin/trainings/player/add/", _player_form("Free agent"))
    assert response.status_code == 302, response.content.decode()[:3000]
    assert not Player.objects.get(name="Free agent").memberships.exists()


def _inline_management(prefix: str, total: int) -> dict[str, Any]:
    return {
        f"{prefix}-TOTAL_FORMS": total,
        f"{prefix}-INITIAL_FORMS": 0,
        f"{prefix}-MIN_NUM_FORMS": 0,
        f"{prefix}-MAX_NUM_FORMS": 1000,
    }


def test_a_coach_schedules_a_training_from_the_admin_and_sees_its_timeline(admin_a, team) -> None:
    alice = Player.objects.get(name="Alice")
    form = {
        "team": team.pk,
        "title": "Admin session",
        "start_0": "2030-06-11",
        "start_1": "18:00:00",  # typed in the training's zone: 16:00 UTC
        "end_0": "2030-06-11",
        "end_1": "19:30:00",
        "time_zone": "Europe/Paris",
        "location": "Gym",
        **_inline_management("invitations", 1),
        "invitations-0-player": alice.pk,
        "invitations-0-status": "PENDING",
        **_inline_management("answers", 0),
    }
    response = admin_a.post("/admin/trainings/training/add/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    training = Training.objects.get(title="Admin session")
    assert list(training.invitations.values_list("player__name", flat=True)) == ["Alice"]
    assert _pending(training)[0] == START - dt.timedelta(minutes=90)
    page = admin_a.get(f"/admin/trainings/training/{training.pk}/change/").content.decode()
    assert "Reminder timeline" in page and "<h3>Pre-training questionnaire</h3>" in page
    assert "Tue 2030-06-11 16:30:00 CEST" in page  # 14:30 UTC, shown in the training's zone


def test_an_rsvp_set_in_the_admin_is_stamped_and_a_reset_one_is_cleared(admin_a, team) -> None:
    training = _training(team, "RSVP by hand")
    invitation = training.invitations.select_related("player").order_by("player__name").first()
    assert invitation is not None and invitation.responded_at is None

    def post(status: str, responded_at: tuple[str, str] = ("", "")) -> None:
        others = list(training.invitations.exclude(pk=invitation.pk))
        form = {
            "team": team.pk,
            "title": training.title,
            "start_0": "2030-06-11",
            "start_1": "18:00:00",  # the training's zone (Paris, UTC+2): unchanged
            "end_0": "2030-06-11",
            "end_1": "19:00:00",
            "time_zone": "Europe/Paris",
            "location": "",
            **_inline_management("invitations", 1 + len(others)),
            "invitations-INITIAL_FORMS": 1 + len(others),
            **_inline_management("answers", 0),
        }
        for index, row in enumerate([invitation, *others]):
            form |= {
                f"invitations-{index}-id": row.pk,
                f"invitations-{index}-training": training.pk,
                f"invitations-{index}-player": row.player_id,
                f"invitations-{index}-status": status if row.pk == invitation.pk else row.status,
                f"invitations-{index}-responded_at_0": responded_at[0] if row.pk == invitation.pk else "",
                f"invitations-{index}-responded_at_1": responded_at[1] if row.pk == invitation.pk else "",
            }
        response = admin_a.post(f"/admin/trainings/training/{training.pk}/change/", form)
        assert response.status_code == 302, response.content.decode()[:3000]
        invitation.refresh_from_db()

    before = dt.datetime.now(dt.UTC)
    post("ACCEPTED")
    assert invitation.status == "ACCEPTED"
    assert invitation.responded_at is not None and invitation.responded_at >= before
    post("PENDING")
    assert (invitation.status, invitation.responded_at) == ("PENDING", None)
    post("DENIED", ("2030-06-01", "09:30:00"))  # a time given by hand is kept
    # Typed on the training's page, so read in the training's zone.
    assert invitation.responded_at == dt.datetime(2030, 6, 1, 7, 30, tzinfo=dt.UTC)


def test_a_coach_cannot_schedule_for_another_team_from_the_admin(admin_a, team, team_b) -> None:
    form = {
        "team": team_b.pk,
        "title": "Sneaky",
        "start_0": "2030-06-11",
        "start_1": "16:00:00",
        "end_0": "2030-06-11",
        "end_1": "17:00:00",
        "time_zone": "Europe/Paris",
        **_inline_management("invitations", 0),
        **_inline_management("answers", 0),
    }
    response = admin_a.post("/admin/trainings/training/add/", form)
    assert response.status_code == 200  # the form comes back with an error on `team`
    assert not Training.objects.filter(title="Sneaky").exists()
    assert not Occurrence.objects.exists()


def test_a_coach_cannot_edit_rules(admin_a) -> None:
    assert admin_a.get("/admin/trainings/reminderrule/").status_code == 403


def test_an_operator_with_manage_all_teams_edits_rules_in_the_admin_as_in_the_api(rules) -> None:
    from django.contrib.auth.models import Permission

    operator = UserFactory(username="operator", is_staff=True)
    operator.user_permissions.add(Permission.objects.get(codename="manage_all_teams"))
    client = logged_in(operator)
    rule = ReminderRule.objects.get(slug="pre-questionnaire")

    assert client.get("/admin/trainings/reminderrule/").status_code == 200
    page = client.get(f"/admin/trainings/reminderrule/{rule.pk}/change/")
    assert page.status_code == 200
    assert b'name="offsets"' in page.content  # editable, not read-only
    assert b"templates-TOTAL_FORMS" in page.content


def test_an_operator_sees_every_team(admin_client, team, team_b) -> None:
    _training(team_b, "B session")
    assert b"B session" in admin_client.get("/admin/trainings/training/").content


def test_editing_a_rule_in_the_admin_reschedules_after_commit(
    admin_client, team, rules, django_capture_on_commit_callbacks
) -> None:
    from config.celery import app

    training = _training(team, "A session")
    rule: ReminderRule = rules["pre-questionnaire"]
    templates = list(rule.templates.order_by("id"))
    form: dict[str, Any] = {
        "kind": "PRE",
        "offsets": "20m",
        "active": "on",
        "templates-TOTAL_FORMS": len(templates),
        "templates-INITIAL_FORMS": len(templates),
        "templates-MIN_NUM_FORMS": 0,
        "templates-MAX_NUM_FORMS": 1000,
    }
    for index, template in enumerate(templates):
        form |= {
            f"templates-{index}-id": template.pk,
            f"templates-{index}-rule": rule.pk,
            f"templates-{index}-language": template.language,
            f"templates-{index}-title": template.title,
            f"templates-{index}-body": template.body,
        }
    app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            response = admin_client.post(f"/admin/trainings/reminderrule/{rule.pk}/change/", form)
    finally:
        app.conf.task_always_eager = False
    assert response.status_code == 302, response.content.decode()[:3000]
    assert len(callbacks) == 1
    assert _pending(training) == [START - dt.timedelta(minutes=20)]


def test_a_rule_with_a_bad_offset_or_placeholder_is_refused(admin_client, rules) -> None:
    response = admin_client.post(
        "/admin/trainings/reminderrule/add/",
        {
            "slug": "bad",
            "kind": "PRE",
            "offsets": "90min",
            "active": "on",
            "templates-TOTAL_FORMS": 1,
            "templates-INITIAL_FORMS": 0,
            "templates-MIN_NUM_FORMS": 0,
            "templates-MAX_NUM_FORMS": 1000,
            "templates-0-language": "en",
            "templates-0-title": "{nope}",
            "templates-0-body": "x",
        },
    )
    assert response.status_code == 200
    assert b"is not an offset" in response.content and b"unknown placeholder" in response.content
    assert not ReminderRule.objects.filter(slug="bad").exists()
