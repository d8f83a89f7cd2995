"""Issue 19, end to end: an account with an API token and no team attacks another team's training through
the engine's API while a real Celery worker runs on PostgreSQL and RabbitMQ.

1. It names the trainings handler in a job (three times, as the report did), a bulk request and a schedule,
   with the training's id in the payload and an instant of now: each is a 400 and the push queue gets
   nothing from it.
2. It tries to take the training's pre-questionnaire job key while the app has no job there (the offsets
   are past), so that the app would adopt its row when the coach moves the training: a 400. After the
   move the training's jobs are the app's, 404 to the attacker, and the reminder reaches the players.
The queue ends up holding exactly the coach's reminder: one push per pending player, nothing else.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any

import pytest
from django.utils import timezone

from reminders.models import Job, Schedule
from reminders.tasks import scan_due
from tests.clients import api_as
from tests.conftest import drain_queue
from tests.factories import UserFactory
from tests.fault_table import record
from tests.trainings_faults.conftest import Processes, training_via_api
from trainings.models import Push, ReminderRule, Team, TrainingJob

pytestmark = [
    pytest.mark.faults,
    pytest.mark.postgres,
    pytest.mark.rabbitmq,
    pytest.mark.django_db(transaction=True),
]


def _kick() -> None:
    scan_due.apply_async(expires=3)  # what beat does every second


def test_an_api_caller_cannot_push_to_or_take_over_another_teams_reminders(
    coach: Any, team: Team, push_queue: str, processes: Processes
) -> None:
    processes.worker("worker", REMINDERS_SCAN_SECONDS="1")
    rules = {rule.slug: rule for rule in ReminderRule.objects.all()}
    # Not under test: the invitation a training this close sends at its creation (test_late_invitation.py).
    ReminderRule.objects.filter(pk=rules["invitation"].pk).update(active=False)
    coach_api, attacker = api_as(coach), api_as(UserFactory(username="mallory", queues=["*"]))

    # Starts in 10 minutes: the pre-questionnaire and invitation offsets are past, only post is scheduled.
    start = timezone.now().replace(microsecond=0) + dt.timedelta(minutes=10)
    training_id = training_via_api(coach_api, team, start)
    assert attacker.get(f"/api/trainings/{training_id}/").status_code == 404

    # 1. The trainings handler, for every pending player of the invitation rule, due now.
    now = timezone.now().isoformat()
    payload = {"training": training_id, "rule": rules["invitation"].pk}
    replay = {"type": "handler", "data": {"name": "trainings.reminder", "payload": payload}}
    attempts = [
        ("/api/jobs/", {"key": f"replay-{i}", "schedules": [now], "callback": replay}) for i in range(3)
    ]
    attempts += [
        ("/api/jobs/bulk/", {"jobs": [{"key": "replay-bulk", "schedules": [now], "callback": replay}]}),
        ("/api/schedules/", {"key": "replay-every", "expression": "@every 10s", "callback": replay}),
    ]
    # 2. The key the app would create for the pre-questionnaire rule once the training moves.
    squat_key = f"training-{training_id}-pre-questionnaire"
    queue = {"type": "rabbitmq", "data": {"queue": push_queue, "payload": {"spoof": True}}}
    attempts.append(("/api/jobs/", {"key": squat_key, "schedules": [now], "callback": queue}))
    answers = [attacker.post(path, data, format="json") for path, data in attempts]
    assert [a.status_code for a in answers] == [400] * len(attempts), [a.content[:300] for a in answers]
    named = ["callback", "callback", "callback", "jobs", "callback", "key"]
    assert [field in answer.json() for field, answer in zip(named, answers, strict=True)] == [True] * 6
    assert not Job.objects.filter(owner__username="mallory").exists()
    assert not Schedule.objects.exists()

    deadline = time.monotonic() + 4  # would-be replays were due at once: give the worker time to fire
    while time.monotonic() < deadline:
        _kick()
        time.sleep(0.5)
    assert drain_queue(push_queue) == [], processes.log("worker")

    # The coach moves the training: the pre-questionnaire's 15-minute reminder is due in 3 seconds.
    moved = (timezone.now() + dt.timedelta(minutes=15, seconds=3)).replace(microsecond=0)
    changed = coach_api.patch(
        f"/api/trainings/{training_id}/",
        {"start": moved.isoformat(), "end": (moved + dt.timedelta(hours=1)).isoformat()},
        format="json",
    )
    assert changed.status_code == 200, changed.json()
    jobs = Job.objects.filter(training_job__training_id=training_id)
    assert {j.owner_id for j in jobs} == {None} and jobs.filter(key=squat_key).exists()
    for key in jobs.values_list("key", flat=True):
        assert attacker.get(f"/api/jobs/{key}/").status_code == 404
        assert attacker.delete(f"/api/jobs/{key}/").status_code == 404

    players = team.players.count()
    messages: list[Any] = []
    deadline = time.monotonic() + 40
    while len(messages) < players and time.monotonic() < deadline:
        _kick()
        messages += drain_queue(push_queue, timeout=1)
    messages += drain_queue(push_queue, timeout=3)  # anything more would be the attacker's
    bodies = [json.loads(m.body) for m in messages]
    assert len(bodies) == players, (bodies, processes.log("worker"))
    assert {(b["training"], b["rule"], b["kind"]) for b in bodies} == {
        (training_id, "pre-questionnaire", "PRE")
    }
    pre_job = TrainingJob.objects.get(training_id=training_id, rule=rules["pre-questionnaire"]).job
    assert {b["idempotency_key"].rsplit(".", 1)[0] for b in bodies} == set(
        pre_job.occurrences.filter(status="delivered").values_list("idempotency_key", flat=True)
    )
    assert Push.objects.count() == players
    record(
        scenario="Engine API attacker against another team's training (issue 19)",
        fault="a signed-in user with no team names `trainings.reminder` with the training's id in 3 jobs, "
        "a bulk request and an `@every` schedule, and takes the training's pre-questionnaire job key "
        "before the app creates it; the coach then moves the training; a real worker runs throughout",
        result=f"{len(attempts)}/{len(attempts)} attacker POSTs answered 400 naming the field; 0 messages "
        f"on the push queue in the 4 s after them; after the move the training's jobs are 404 to the "
        f"attacker and the queue got exactly the coach's reminder ({players} pushes, one per pending "
        "player), nothing else",
    )
