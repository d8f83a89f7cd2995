"""Scenario 7a: scheduling is atomic with the training. A failure anywhere in the write, after the training
row and part of its reminders were written, leaves neither the training nor a single job or occurrence.

The failure is real, not mocked: PostgreSQL itself refuses the occurrence rows of the last rule the service
schedules (a trigger installed by the test), so the training, its invitations and the first rules' jobs and
occurrences are already written when the statement fails.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client

from reminders.models import Job, Occurrence
from tests.clients import api_as
from tests.fault_table import record
from trainings.access import coach_group_ensure
from trainings.models import Invitation, Player, Team, Training
from trainings.planning.writes import training_create

pytestmark = [pytest.mark.faults, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)
# ReminderRule's ordering is (kind, slug): INVITATION, POST, PRE. So the trigger below refuses the rows of
# pre-questionnaire, the rule scheduled last, after the other two rules' rows were written.


@contextmanager
def occurrence_inserts_refused() -> Iterator[None]:
    """PostgreSQL raises on any pre-questionnaire occurrence row, saying how much was written before it."""
    # No query parameters: the statement is sent as written, so '%' is LIKE's and PL/pgSQL's own.
    with connection.cursor() as cursor:
        cursor.execute("""
            CREATE FUNCTION faults_refuse_occurrence() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF (SELECT key FROM reminders_job WHERE id = NEW.job_id) LIKE '%-pre-questionnaire' THEN
                RAISE EXCEPTION 'injected fault: % occurrences and % trainings written before this one',
                  (SELECT count(*) FROM reminders_occurrence), (SELECT count(*) FROM trainings_training);
              END IF;
              RETURN NEW;
            END $$;
            CREATE TRIGGER faults_refuse_occurrence BEFORE INSERT ON reminders_occurrence
              FOR EACH ROW EXECUTE FUNCTION faults_refuse_occurrence();
        """)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                "DROP TRIGGER faults_refuse_occurrence ON reminders_occurrence; "
                "DROP FUNCTION faults_refuse_occurrence();"
            )


def _nothing_of_it_left() -> dict[str, int]:
    return {
        "trainings": Training.objects.count(),
        "invitations": Invitation.objects.count(),
        "jobs": Job.objects.count(),
        "occurrences": Occurrence.objects.count(),
    }


NOTHING = {"trainings": 0, "invitations": 0, "jobs": 0, "occurrences": 0}


def _body(team: Team) -> dict[str, Any]:
    return {
        "team": team.pk,
        "title": "Speed session",
        "start": START.isoformat(),
        "end": (START + dt.timedelta(minutes=90)).isoformat(),
        "time_zone": "Europe/Paris",
    }


def test_a_training_created_in_a_transaction_that_rolls_back_leaves_no_job_and_no_occurrence(
    team: Team,
) -> None:
    class CallerFailed(Exception):
        pass

    written = 0
    with pytest.raises(CallerFailed), transaction.atomic():
        training = training_create(
            team=team, title="T", start=START, end=START + dt.timedelta(hours=1), time_zone="Europe/Paris"
        )
        written = Occurrence.objects.filter(job__key__startswith=f"training-{training.pk}-").count()
        raise CallerFailed  # e.g. the caller's next write failed

    assert written == 22  # they existed inside the transaction...
    assert _nothing_of_it_left() == NOTHING  # ...and went with it
    record(
        scenario="Training created inside a caller's transaction that rolls back",
        fault="exception raised after `training_create` returned, inside `transaction.atomic()`",
        result=f"{written} occurrences existed inside the transaction; after the rollback 0 trainings, "
        "0 invitations, 0 jobs, 0 occurrences",
    )


def test_an_api_create_that_fails_after_the_training_row_was_written_leaves_nothing(
    coach: Any, team: Team
) -> None:
    client = api_as(coach, raise_request_exception=False)
    with occurrence_inserts_refused():
        response = client.post("/api/trainings/", _body(team), format="json")

    assert response.status_code == 500
    error = str(response.exc_info[1])
    assert "injected fault: 16 occurrences and 1 trainings written before this one" in error, error
    assert _nothing_of_it_left() == NOTHING
    record(
        scenario="API create fails after the training, its invitations and 2 of 3 rules were written",
        fault="PostgreSQL trigger refuses the last rule's occurrence rows (real DB error, no mock)",
        result="HTTP 500; the failed statement came after 1 training and 16 occurrences were written; "
        "after the request 0 trainings, 0 invitations, 0 jobs, 0 occurrences",
    )


def test_an_api_move_that_fails_halfway_keeps_the_training_and_its_reminders_as_they_were(
    coach: Any, team: Team
) -> None:
    client = api_as(coach, raise_request_exception=False)
    created = client.post("/api/trainings/", _body(team), format="json")
    assert created.status_code == 201, created.json()
    before = list(Occurrence.objects.order_by("id").values_list("id", "fire_at", "status", "idempotency_key"))
    assert len(before) == 22

    with occurrence_inserts_refused():
        moved = client.patch(
            f"/api/trainings/{created.json()['id']}/",
            {
                "start": (START + dt.timedelta(hours=1)).isoformat(),
                "end": (START + dt.timedelta(hours=2)).isoformat(),
            },
            format="json",
        )

    assert moved.status_code == 500
    assert "injected fault" in str(moved.exc_info[1])
    assert Training.objects.get().start == START
    after = list(Occurrence.objects.order_by("id").values_list("id", "fire_at", "status", "idempotency_key"))
    assert after == before  # the two rules already moved inside the transaction are back too
    record(
        scenario="API move of a training fails after 2 of 3 rules were rescheduled",
        fault="PostgreSQL trigger refuses the last rule's new occurrence rows",
        result="HTTP 500; training start unchanged; all 22 occurrences unchanged (same ids, instants, "
        "statuses, idempotency keys)",
    )


def test_an_admin_add_that_fails_after_the_inlines_were_saved_leaves_nothing(team: Team) -> None:
    from tests.factories import UserFactory

    coach = UserFactory(username="admin-coach", is_staff=True)
    coach.groups.add(coach_group_ensure())
    team.coaches.add(coach)
    client = Client(raise_request_exception=False)
    client.force_login(coach)
    alice = Player.objects.get(name="Alice")
    form = {
        "team": team.pk,
        "title": "Admin session",
        "start_0": "2030-06-11",
        "start_1": "16:00:00",
        "end_0": "2030-06-11",
        "end_1": "17:30:00",
        "time_zone": "Europe/Paris",
        "invitations-TOTAL_FORMS": 1,
        "invitations-INITIAL_FORMS": 0,
        "invitations-MIN_NUM_FORMS": 0,
        "invitations-MAX_NUM_FORMS": 1000,
        "invitations-0-player": alice.pk,
        "invitations-0-status": "PENDING",
        "answers-TOTAL_FORMS": 0,
        "answers-INITIAL_FORMS": 0,
        "answers-MIN_NUM_FORMS": 0,
        "answers-MAX_NUM_FORMS": 1000,
    }
    with occurrence_inserts_refused():
        response = client.post("/admin/trainings/training/add/", form)
    assert response.status_code == 500
    assert "injected fault: 16 occurrences and 1 trainings" in str(response.exc_info[1])
    assert _nothing_of_it_left() == NOTHING
    record(
        scenario="Admin add fails after the training and its player inline were saved",
        fault="PostgreSQL trigger refuses the last rule's occurrence rows during `save_related`",
        result="HTTP 500; after the request 0 trainings, 0 invitations, 0 jobs, 0 occurrences",
    )
