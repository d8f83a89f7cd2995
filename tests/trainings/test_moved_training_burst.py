"""A burst of concurrent moves of one training reaches each player once: the notice fires a few seconds
after the last move, and each later move replaces a notice not yet sent, while a worker keeps firing
whatever falls due."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from typing import Any

import pytest
from django.db import connections

from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.models import Occurrence, OccurrenceStatus
from tests.concurrency import run_together
from tests.conftest import drain_queue
from tests.trainings.conftest import fire
from trainings.models import Push, ReminderRule, Team, Training
from trainings.planning import kinds
from trainings.planning.writes import training_create, training_update
from trainings.reminding.notices import moved_notice_key
from trainings.selectors import job_key

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.django_db(transaction=True)]

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)
MOVES = 14


def _worker(stop: threading.Event) -> None:
    """A worker firing everything due, as often as it can, until told to stop."""
    try:
        while not stop.is_set():
            occurrences_dispatch_batch()
            time.sleep(0.005)
    finally:
        connections.close_all()


def test_fourteen_concurrent_moves_send_each_player_one_notice_with_the_last_time(
    team: Team, rules: dict[str, ReminderRule], push_queue: str, settings: Any
) -> None:
    settings.TRAININGS_MOVED_NOTICE_DELAY_SECONDS = 3
    training = training_create(team=team, title="Speed session", start=START,
                               end=START + dt.timedelta(minutes=90), time_zone="Europe/Paris")  # fmt: skip
    rule = rules["pre-questionnaire"]
    fire(Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=rule),
                                fire_at=START - dt.timedelta(minutes=90)))  # fmt: skip
    assert len(drain_queue(push_queue, expect=3)) == 3

    def move(slot: int) -> None:
        start = START + dt.timedelta(minutes=slot + 1)
        training_update(training=Training.objects.get(pk=training.pk), start=start,
                        end=start + dt.timedelta(minutes=90))  # fmt: skip

    stop = threading.Event()
    worker = threading.Thread(target=_worker, args=(stop,))
    worker.start()
    try:
        run_together(move, MOVES)
        notices = Occurrence.objects.filter(job__key=moved_notice_key(training_id=training.pk))
        deadline = time.monotonic() + 30
        while notices.filter(status=OccurrenceStatus.SCHEDULED).exists() and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        stop.set()
        worker.join()

    final = Training.objects.get(pk=training.pk).start
    moved = [
        json.loads(m.body)
        for m in drain_queue(push_queue, expect=3)
        if json.loads(m.body)["kind"] == kinds.MOVED.code
    ]
    per_player = sorted(Push.objects.filter(kind=kinds.MOVED.code).values_list("player_id", flat=True))
    assert per_player == sorted(team.players.filter(memberships__active=True).values_list("pk", flat=True))
    assert len(moved) == 3
    local = final.astimezone(training.zone)
    assert all(f"{local:%-I:%M}" in m["body"] for m in moved if m["language"] == "en"), (local, moved)
