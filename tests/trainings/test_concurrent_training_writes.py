"""Writers of one training at the same moment (a DELETE, PATCHes that move or rename it, a cancel) take
their locks in one order, so none of them deadlocks: every request answers 2xx or 404, never a 500, and
the training ends either deleted with every pending reminder cancelled, or kept with its reminders
scheduled for the last write that won."""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

import pytest
from django.db import connection, connections, transaction

from reminders.models import Occurrence, OccurrenceStatus
from tests.clients import api_as
from tests.concurrency import run_together
from trainings.models import ReminderRule, Team, Training
from trainings.planning.writes import training_delete

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)
ROUNDS = 6


def _create(api: Any, team: Team) -> str:
    body = {
        "team": team.pk,
        "title": "Speed session",
        "start": START.isoformat(),
        "end": (START + dt.timedelta(minutes=90)).isoformat(),
        "time_zone": "Europe/Paris",
    }
    response = api.post("/api/trainings/", body, format="json")
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


def _scheduled(training_id: str) -> set[tuple[str, dt.datetime]]:
    """The training's pending reminders, as (rule slug, instant)."""
    rows = Occurrence.objects.filter(
        job__key__startswith=f"training-{training_id}-", status=OccurrenceStatus.SCHEDULED
    ).values_list("job__key", "fire_at")
    return {(key.removeprefix(f"training-{training_id}-"), fire_at) for key, fire_at in rows}


def _wanted(training: Training, rules: dict[str, ReminderRule]) -> set[tuple[str, dt.datetime]]:
    if training.cancelled:
        return set()
    return {
        (rule.slug, instant)
        for rule in rules.values()
        if rule.active
        for instant, _ in rule.instants_for(training)
    }


def test_it_never_deadlocks_a_delete_racing_patches_and_moves(
    coach: Any, team: Team, rules: dict[str, ReminderRule]
) -> None:
    answers: list[int] = []
    for round_ in range(ROUNDS):
        training_id = _create(api_as(coach), team)
        assert _scheduled(training_id)
        url = f"/api/trainings/{training_id}/"

        def write(slot: int, url: str = url, round_: int = round_) -> int:
            api = api_as(coach, raise_request_exception=False)
            if slot == (round_ % 4):
                return api.delete(url).status_code
            start = START + dt.timedelta(minutes=15 * (slot + 1))
            body: dict[str, Any] = {"start": start.isoformat(),
                                    "end": (start + dt.timedelta(minutes=90)).isoformat()}  # fmt: skip
            if slot == 3:
                body = {"title": f"Renamed {round_}"}
            return api.patch(url, body, format="json").status_code

        codes = run_together(write, 4)
        answers += codes
        assert all(code in (200, 204, 404) for code in codes), codes
        assert codes.count(204) == 1, codes
        training = Training.objects.filter(pk=training_id).first()
        assert training is None, "the DELETE answered 204: the training is gone"
        assert _scheduled(training_id) == set(), "a deleted training keeps no pending reminder"
    assert 500 not in answers


def test_it_keeps_the_reminders_of_the_last_move_when_moves_and_a_cancel_race(
    coach: Any, team: Team, rules: dict[str, ReminderRule]
) -> None:
    for round_ in range(ROUNDS):
        training_id = _create(api_as(coach), team)
        url = f"/api/trainings/{training_id}/"

        def write(slot: int, url: str = url, round_: int = round_) -> int:
            api = api_as(coach, raise_request_exception=False)
            if slot == 3 and round_ % 2:
                return api.patch(url, {"cancelled": True}, format="json").status_code
            start = START + dt.timedelta(minutes=15 * (slot + 1))
            body = {"start": start.isoformat(), "end": (start + dt.timedelta(minutes=90)).isoformat()}
            return api.patch(url, body, format="json").status_code

        codes = run_together(write, 4)
        assert codes == [200] * 4, codes
        training = Training.objects.get(pk=training_id)
        assert _scheduled(training_id) == _wanted(training, rules)


def _blocked_on_a_lock() -> int:
    """How many other sessions wait for a row lock right now (a fresh snapshot: within a transaction
    PostgreSQL keeps answering from its first look at the statistics)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        return int(cursor.fetchone()[0])


@pytest.mark.parametrize("method", ["patch", "delete"])
def test_a_write_that_waited_behind_a_delete_answers_404(coach: Any, team: Team, method: str) -> None:
    training_id = _create(api_as(coach), team)
    url = f"/api/trainings/{training_id}/"
    locked = threading.Event()
    codes: dict[str, Any] = {}

    def delete_slowly() -> None:
        try:
            with transaction.atomic():
                training_delete(training=Training.objects.get(pk=training_id))
                locked.set()
                deadline = time.monotonic() + 10
                while not _blocked_on_a_lock() and time.monotonic() < deadline:
                    time.sleep(0.02)
                codes["waited"] = _blocked_on_a_lock()
        finally:
            connections.close_all()

    def write() -> None:
        try:
            locked.wait(10)
            api = api_as(coach, raise_request_exception=False)
            if method == "patch":
                response = api.patch(url, {"title": "Renamed"}, format="json")
            else:
                response = api.delete(url)
            codes.update(code=response.status_code, type=response["Content-Type"], body=response.content)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=delete_slowly), threading.Thread(target=write)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert codes["waited"], ("the write did not wait for the DELETE's lock", codes)
    assert codes["code"] == 404, codes
    assert codes["type"] == "application/json"
