"""Audit history of trainings and rules (issue 16.7): a coach's admin or API change is recorded with the
coach and the changed field, a coach reads only their own teams' training history (also of a deleted
training), and the jobs the trainings app derives from a training record nothing of their own."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from reminders.models import Job
from tests.factories import TeamFactory, UserFactory
from trainings.access import coach_group_ensure
from trainings.models import ReminderRule, Team, Training
from trainings.planning.writes import training_create, training_delete

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)


@pytest.fixture
def staff_coach(coach: Any) -> Any:
    coach.is_staff = True
    coach.save()
    coach.groups.add(coach_group_ensure())
    return coach


@pytest.fixture
def admin_client(staff_coach: Any) -> Client:
    client = Client()
    client.force_login(staff_coach)
    return client


def _training(team: Team, title: str = "Sprint drills") -> Training:
    return training_create(
        team=team, title=title, start=START, end=START + dt.timedelta(minutes=90), time_zone="Europe/Paris"
    )


@pytest.fixture
def empty_team(coach: Any) -> Team:
    """The coach's team with nobody on it, so the change form has no inline rows to post."""
    return TeamFactory(name="Empty U13", coaches=[coach])


@pytest.fixture
def other_training(db: None) -> Training:
    return _training(TeamFactory(name="Seniors", coaches=[UserFactory(username="coach-b")]), "B session")


def _changed(record: Any) -> set[str]:
    return set(record.diff_against(record.prev_record).changed_fields)


def test_a_coachs_admin_change_is_recorded_and_shown_on_the_history_page(
    admin_client: Client, staff_coach: Any, empty_team: Team
) -> None:
    training = _training(empty_team)
    form = {
        "team": empty_team.pk,
        "title": "Sprint drills (moved indoors)",
        "start_0": "2030-06-11",
        "start_1": "18:00:00",
        "end_0": "2030-06-11",
        "end_1": "19:30:00",
        "time_zone": "Europe/Paris",
        "location": "Gym B",
        **{f"{p}-{k}": 0 for p in ("invitations", "answers") for k in ("TOTAL_FORMS", "INITIAL_FORMS")},
    }
    response = admin_client.post(f"/admin/trainings/training/{training.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:2000]

    latest = training.history.latest()
    assert (latest.history_type, latest.history_user) == ("~", staff_coach)
    assert _changed(latest) == {"title", "location"}
    page = admin_client.get(f"/admin/trainings/training/{training.pk}/history/").content.decode()
    assert "coach-a" in page and "Sprint drills (moved indoors)" in page and "Gym B" in page
    # The author is named, not linked: a coach may not open the user admin (the link was a 403).
    assert f"/admin/auth/user/{staff_coach.pk}/change/" not in page
    assert admin_client.get(f"/admin/auth/user/{staff_coach.pk}/change/").status_code == 403


def test_an_operator_who_may_open_users_gets_the_author_as_a_link(staff_coach: Any, empty_team: Team) -> None:
    training = _training(empty_team)
    training.title = "Renamed"
    training.save()
    superuser = UserFactory(username="root-op", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(superuser)
    training.history.update(history_user=staff_coach)
    page = client.get(f"/admin/trainings/training/{training.pk}/history/").content.decode()
    assert f'<a href="/admin/auth/user/{staff_coach.pk}/change/">coach-a</a>' in page


def test_an_api_change_with_a_token_is_attributed_to_the_coach(coach: Any, team: Team) -> None:
    training = _training(team)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=coach).key}")
    response = client.patch(f"/api/trainings/{training.pk}/", {"cancelled": True}, format="json")
    assert response.status_code == 200, response.content

    latest = training.history.latest()
    assert (latest.history_type, latest.history_user) == ("~", coach)
    assert _changed(latest) == {"cancelled"}


def test_a_coach_cannot_read_another_teams_training_history(
    admin_client: Client, other_training: Training
) -> None:
    version = other_training.history.latest().history_id
    base = f"/admin/trainings/training/{other_training.pk}/history/"
    assert admin_client.get(base).status_code == 404
    assert admin_client.get(f"{base}{version}/").status_code == 404
    training_delete(training=other_training)  # deleted: judged on its last recorded team
    assert admin_client.get(base).status_code == 404
    assert admin_client.get("/admin/trainings/training/not-a-uuid/history/").status_code == 404


def test_a_coach_reads_the_history_of_their_own_deleted_training(admin_client: Client, team: Team) -> None:
    training = _training(team)
    pk = training.pk
    training_delete(training=training)
    page = admin_client.get(f"/admin/trainings/training/{pk}/history/")
    assert page.status_code == 200
    assert [h.history_type for h in Training.history.filter(id=pk).order_by("history_date")] == [
        "+",
        "-",
    ]


def test_the_jobs_a_training_derives_record_nothing_of_their_own(team: Team) -> None:
    """Its reminders' jobs follow the training (no owner): the training's history is the record, and a
    training save does not pay one history row per rule."""
    training = _training(team)
    assert Job.objects.filter(training_job__training=training).count() == 3
    assert Job.history.count() == 0
    assert training.history.count() == 1


def test_an_operators_rule_change_through_the_api_is_recorded(rules: dict[str, ReminderRule]) -> None:
    operator = UserFactory(username="ops", is_staff=True, is_superuser=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=operator).key}")
    rule = next(iter(rules.values()))
    response = client.patch(f"/api/reminder-rules/{rule.slug}/", {"offsets": ["2h"]}, format="json")
    assert response.status_code == 200, response.content

    latest = rule.history.latest()  # the seeded rules predate history: this is their first record
    assert (latest.history_type, latest.history_user, latest.offsets) == ("~", operator, ["2h"])


def test_a_coach_opens_a_version_of_their_training_and_an_operator_a_rules_history(
    admin_client: Client, team: Team, rules: dict[str, ReminderRule]
) -> None:
    training = _training(team)
    version = training.history.latest().history_id
    assert admin_client.get(f"/admin/trainings/training/{training.pk}/history/{version}/").status_code == 200
    operator = Client()
    operator.force_login(UserFactory(username="ops", is_staff=True, is_superuser=True))
    rule = rules["invitation"]
    assert operator.get(f"/admin/trainings/reminderrule/{rule.pk}/history/").status_code == 200
    assert admin_client.get(f"/admin/trainings/reminderrule/{rule.pk}/history/").status_code == 403


def test_a_training_created_through_the_api_records_what_save_records_attributed_to_the_coach(
    coach: Any, team: Team
) -> None:
    """training_create writes the training and its history row in one statement
    (trainings/planning/writes.py):
    the row must be the one simple-history's post_save makes for the same training, with the token's user."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=coach).key}")
    body = {
        "team": team.pk,
        "title": "Sprint drills",
        "start": "2030-06-11T18:00:00+02:00",
        "end": "2030-06-11T19:30:00+02:00",
        "time_zone": "Europe/Paris",
        "location": "Stadium",
    }
    response = client.post("/api/trainings/", body, format="json")
    assert response.status_code == 201, response.content
    created = Training.objects.get(pk=response.json()["id"])
    saved = Training(team=team, title="Sprint drills", start=created.start, end=created.end)
    saved.time_zone, saved.location = "Europe/Paris", "Stadium"
    saved._history_user = coach  # what the request gives the API's save
    saved.save()

    def record(training: Training) -> dict[str, Any]:
        (row,) = Training.history.filter(id=training.pk).values()
        assert row["created_at"] == training.created_at and row["history_date"] >= training.created_at
        return {k: v for k, v in row.items() if k not in ("id", "history_id", "history_date", "created_at")}

    assert record(created) == record(saved)
    assert record(created)["history_type"] == "+" and record(created)["history_user_id"] == coach.pk


def test_nothing_but_the_audit_history_listens_to_a_trainings_save() -> None:
    """training_create inserts the training without save(): only the history receiver's work (which it
    does itself) would be missed. A new pre_save/post_save receiver on Training must make it call save()."""
    from django.db.models.signals import post_save, pre_save

    from common.history import AuditedHistory

    def receivers(signal: Any) -> list[Any]:
        sync, async_ = signal._live_receivers(Training)
        return [*sync, *async_]

    assert receivers(pre_save) == []
    assert [type(getattr(r, "__self__", None)) for r in receivers(post_save)] == [AuditedHistory]
