"""The migration that gives questionnaires their questions keeps every answer stored before it, as it was:
the email page's free text (`{"notes": ...}`, now the built-in optional note), an API caller's own keys,
an empty answer. After it they still read (the answer link's GET, the training page), back and forth."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

# Stored before questionnaires had questions (trainings/answers/email_pages.py stored `{"notes": ...}`).
LEGACY = [
    {"notes": "knee still hurts"},
    {"notes": ""},
    {},
    {"sleep": 8, "mood": "good"},
    {"sleep_hours": 7.5, "sore": False, "tags": ["legs", "back"], "nested": {"a": 1}},
    {"notes": "é" * 1999},
]


def _node(suffix: str) -> tuple[str, str]:
    graph = MigrationExecutor(connection).loader.graph
    return next(n for n in graph.nodes if n[0] == "trainings" and n[1].endswith(suffix))


@pytest.mark.django_db(transaction=True)
def test_every_answer_stored_before_questions_is_kept_and_still_reads() -> None:
    node = _node("_questionnaires")
    executor = MigrationExecutor(connection)
    before = sorted(parent.key for parent in executor.loader.graph.node_map[node].parents)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    team = old.get_model("trainings", "Team").objects.create(name="U15", time_zone="Europe/Paris")
    Player, Answer = old.get_model("trainings", "Player"), old.get_model("trainings", "QuestionnaireAnswer")
    start = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)
    training = old.get_model("trainings", "Training").objects.create(
        team=team, title="S", start=start, end=start + dt.timedelta(hours=1), time_zone="Europe/Paris"
    )
    stored: dict[int, Any] = {}
    for i, answers in enumerate(LEGACY):
        player = Player.objects.create(name=f"P{i}")
        old.get_model("trainings", "Membership").objects.create(team=team, player=player)
        old.get_model("trainings", "Invitation").objects.create(training=training, player=player)
        for phase in ("PRE", "POST"):
            row = Answer.objects.create(training=training, player=player, phase=phase, answers=answers,
                                        answered_at=start, source="email_link")  # fmt: skip
            stored[row.pk] = (player.pk, phase, answers)

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    from trainings.models import QuestionnaireAnswer

    kept = {a.pk: (a.player_id, a.phase, a.answers) for a in QuestionnaireAnswer.objects.all()}
    assert kept == stored  # every row, every answer as it was
    _they_still_read(training.pk, stored)

    executor = MigrationExecutor(connection)
    executor.migrate(before)  # and back: the answers are not the questionnaires' tables
    assert Answer.objects.count() == len(stored)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def _they_still_read(training_id: Any, stored: dict[int, Any]) -> None:
    from django.test import Client

    from tests.clients import logged_in
    from tests.factories import UserFactory
    from trainings.answers.links import answer_token
    from trainings.models import Training

    for player_id, phase, answers in stored.values():
        token = answer_token(player_id=player_id, training_id=training_id, kind=phase)
        assert Client().get(f"/api/answer-links/{token}/").json()["answer"]["answers"] == answers
    admin = logged_in(UserFactory(username="root", is_staff=True, is_superuser=True))
    page = admin.get(f"/admin/trainings/training/{Training.objects.get().pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "knee still hurts" in html and "<dt>Mood</dt><dd>good</dd>" in html
