"""End to end on the real services: API -> PostgreSQL -> a real Celery worker -> RabbitMQ push queue."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone
from kombu import Connection
from rest_framework.test import APIClient

from reminders.tasks import scan_due
from tests.conftest import drain_queue
from tests.factories import MembershipFactory, PlayerFactory
from trainings.models import Player, Team

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.django_db(transaction=True)]


def _worker(tmp_path: Path, push_queue: str) -> subprocess.Popen[bytes]:
    """A real `celery -A config worker` on the test database and this test's push queue."""
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "TRAININGS_PUSH_QUEUE": push_queue,
        "REMINDERS_SCAN_SECONDS": "1",
    }
    log = (tmp_path / "worker.log").open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo", "--loglevel=INFO",
         "--without-mingle", "--without-gossip", "--hostname", f"e2e-{push_queue}@%h"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=settings.BASE_DIR,
    )  # fmt: skip


def test_the_worker_pushes_exactly_the_pending_players_with_rendered_text(
    coach: Any, team: Team, push_queue: str, tmp_path: Path
) -> None:
    MembershipFactory(team=team, player=PlayerFactory(name="Dan", language="fr", time_zone="Europe/Paris"))
    with Connection(
        settings.CELERY_BROKER_URL
    ) as broker:  # declared as the publisher does, so we can poll it
        broker.default_channel.queue_declare(queue=push_queue, durable=True, auto_delete=False)
    worker = _worker(tmp_path, push_queue)
    try:
        api = APIClient()
        api.force_authenticate(coach)
        # The "6 h before" invitation reminder is 4 seconds away; everything else is far ahead.
        start = (timezone.now() + dt.timedelta(hours=6, seconds=4)).replace(microsecond=0)
        created = api.post(
            "/api/trainings/",
            {
                "team": team.pk,
                "title": "Speed session",
                "start": start.isoformat(),
                "end": (start + dt.timedelta(minutes=90)).isoformat(),
                "time_zone": "Europe/Paris",
                "location": "Stadium",
            },
            format="json",
        )
        assert created.status_code == 201, created.json()
        training_id = created.json()["id"]
        names = {p.name: p.pk for p in Player.objects.all()}
        url = f"/api/trainings/{training_id}/invitation/"
        assert (
            api.post(url, {"player": names["Alice"], "status": "ACCEPTED"}, format="json").status_code == 200
        )
        assert api.post(url, {"player": names["Bruno"], "status": "DENIED"}, format="json").status_code == 200

        messages: list[Any] = []
        deadline = time.monotonic() + 90
        while len(messages) < 2 and time.monotonic() < deadline:
            scan_due.delay()  # what beat does every second
            messages += drain_queue(push_queue, timeout=1)
        messages += drain_queue(push_queue, timeout=2)  # anything extra would be a bug
    finally:
        worker.terminate()
        worker.wait(timeout=30)

    log = (tmp_path / "worker.log").read_text(errors="replace")
    bodies = sorted((json.loads(m.body) for m in messages), key=lambda b: b["player"])
    assert [b["player"] for b in bodies] == sorted([names["Chloe"], names["Dan"]]), log[-3000:]
    by_player = {b["player"]: b for b in bodies}
    chloe, dan = by_player[names["Chloe"]], by_player[names["Dan"]]
    assert chloe["title"] == "Will you come to Speed session?"
    assert (
        chloe["body"].startswith("U15: Speed session on ")
        and "(Stadium). Please accept or decline." in chloe["body"]
    )
    assert dan["title"] == "Serez-vous à Speed session ?"
    assert (chloe["kind"], chloe["training"], chloe["rule"]) == ("INVITATION", training_id, "invitation")
    assert chloe["schema"] == "trainings.push/2" and "device_tokens" not in chloe  # devices are rows
    assert all(m.properties["message_id"] == json.loads(m.body)["idempotency_key"] for m in messages)

    timeline = api.get(f"/api/trainings/{training_id}/timeline/").json()
    fired = [e for e in timeline if e["status"] == "delivered"]
    reached = [
        (e["rule"], e["outcome"], e["recipients"], e["pushes_published"], e["players_reached"]) for e in fired
    ]
    assert reached == [("invitation", "sent", 2, 2, 0)]  # published; no gateway ran, so no phone reached
